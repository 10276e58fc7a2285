# Two commands a teacher needs: `make lab` and `make test`. Everything else is for authors and CI.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8888
export HF_HUB_OFFLINE ?= 1
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: setup system real-model lab test test-fast figures claims app bench

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

## real-model: the optional real offline model (Qwen2.5-Coder-0.5B-Instruct, ~480 MB download, ~1.2 GB cache)
real-model: setup
	$(PY) -m toolkit models install-real

## lab: JupyterLab on notebooks/ (prints the URL)
lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --no-browser --ip=127.0.0.1 --port=$(PORT) $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

## test: the whole suite, notebooks and browser test included
test: setup system real-model
	$(PY) -m pytest -q --durations=25

## test-fast: skip notebooks, browser and slow tests
test-fast: setup
	$(PY) -m pytest -q -m "not notebook and not browser and not slow"

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
