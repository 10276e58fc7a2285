"""How much memory this process may still use, and giving freed memory back: what the loaders size a load with.

What it does
- ``memory_available()``: what this process may still allocate (the cgroup's limit minus its usage where one is
  set, else the machine's available memory); ``memory_limit()``: the cgroup's limit, else the machine's total.
- ``load_overhead()``: what loading a model adds beyond its weights in this process (activations, and the part of
  the runtime — Python, torch, transformers, the tokenizer — the process has not yet paid: a kernel that already
  imported them needs less).
- ``give_back()``: returns freed heap pages to the system (glibc keeps them, and RSS and the cgroup count them):
  measured here, a kernel that dropped the int8 model went from 830 MB to 456 MB only after it.

What it leaves out
- GPU memory; swap; other processes' use beyond what the cgroup counts.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from toolkit.paths import cgroup_dirs


def _reclaimable(stat: Path, v2: bool) -> int:
    """Page cache the kernel drops before it refuses an allocation: file pages not mapped by a process."""
    try:
        kv = dict(line.split() for line in stat.read_text().splitlines() if line.count(" ") == 1)
        if v2:
            return max(0, int(kv.get("file", 0)) - int(kv.get("file_mapped", 0)))
        return max(0, int(kv.get("total_cache", 0)) - int(kv.get("total_mapped_file", 0)))
    except (OSError, ValueError):
        return 0


def _cgroup_limit_and_usage(proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")):
    """This process's cgroup memory limit and usage (v2, else v1), or None when none is set. Usage leaves out
    page cache that is not mapped (the model file read a minute ago): the kernel drops it on demand, and counting
    it refused a load in a 2 GB cgroup with about 900 MB of it reclaimable."""
    for base, v2 in cgroup_dirs("memory", proc, root):
        if v2:
            lim, use = base / "memory.max", base / "memory.current"
        else:
            lim, use = base / "memory.limit_in_bytes", base / "memory.usage_in_bytes"
        try:
            raw = lim.read_text().strip()
            if raw == "max" or int(raw) >= 1 << 60:
                continue
            used = int(use.read_text().strip()) - _reclaimable(base / "memory.stat", v2)
            return int(raw), max(0, used)
        except (OSError, ValueError):
            continue
    return None


def memory_available() -> int:
    """Bytes this process may still allocate: the smaller of the cgroup's headroom and the machine's available."""
    import psutil  # lazy: only when sizing a load

    free = psutil.virtual_memory().available
    cg = _cgroup_limit_and_usage()
    return min(free, cg[0] - cg[1]) if cg else free


RUNTIME_BYTES = int(0.5 * 2**30)  # Python + torch + transformers + a Qwen tokenizer, resident (measured)
ACTIVATION_BYTES = int(0.15 * 2**30)  # a forward's activations and the KV cache of a loop's few thousand tokens


def load_overhead() -> int:
    """Bytes a model load adds beyond its weights here: the activations, plus the runtime less this process's RSS
    now (what it already holds of it). Counting the whole runtime again refused the int8 model in a 2 GB cgroup
    whose kernel had imported torch long before (notebook 05 in JupyterLab: 1,198 MB free, 1,270 MB "needed")."""
    import psutil  # lazy: only when sizing a load

    return ACTIVATION_BYTES + max(0, RUNTIME_BYTES - psutil.Process().memory_info().rss)


def memory_limit() -> int:
    """The memory this process's world has in all: the cgroup limit where set, else the machine's total."""
    import psutil  # lazy: only when sizing a load

    cg = _cgroup_limit_and_usage()
    return cg[0] if cg else psutil.virtual_memory().total


def give_back() -> None:
    """Give freed heap pages back to the system (glibc keeps them otherwise, and RSS would count them)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
