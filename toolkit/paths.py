"""Where the kit keeps things outside the repo, and whether the hub can be reached.

What it does
- ``cache_dir()``: ``~/.cache/toolcall-kit`` (or ``$TOOLKIT_CACHE``): built tokenizers, the converted real model,
  the notes sandbox.
- ``hub_reachable()``: never hangs (``HF_HUB_OFFLINE=1`` answers at once, otherwise one TCP connect with a timeout).
- ``data_file(name)``: a file shipped inside the package (``toolkit/data/``), read with ``importlib.resources`` so it
  works from a wheel as well as from a checkout.
- ``results_file(name)``: a saved benchmark result (``benchmarks/results/<name>``). The one place that finds that
  folder: ``$TOOLKIT_RESULTS`` if set, else ``benchmarks/results`` beside the imported package (a checkout), else
  in the current folder or one above it (a notebook in ``notebooks/``). A kit installed from a wheel outside a
  checkout has none: ``results_file`` then raises :class:`ResultsMissing`, whose message says where it looked and
  how to point the kit at a checkout; ``results_file(name, required=False)`` returns None instead.
  ``saved_json(name)``: that file read as JSON, or None when the checkout has none.
- ``kit_root()``: the folder that holds the imported ``toolkit`` package (a checkout's root, or site-packages).
- ``script_module(path)``: a script or test file that is not in a package (``benchmarks/*.py``, ``tests/*.py``)
  loaded as a module by its path, for the benchmarks that reuse a test's helpers and the tests of a benchmark.
- ``provenance(root)``: what a saved result says about the code that made it: ``commit`` (short sha), ``clean``
  and ``changed`` (files under ``toolkit/`` and ``benchmarks/`` that differ from that commit, saved results
  aside). A dirty tree is marked, never hidden: its commit reads ``<sha>+dirty``; with
  ``TOOLKIT_REQUIRE_CLEAN=1`` it is refused instead (:class:`DirtyTree`). Outside a git checkout the commit
  is ``unknown`` and ``clean`` is None.

- ``cgroup_dirs(controller)``: the cgroup folders (v1, v2) this process's limits are read from.
- ``cpu_threads()``: how many threads torch should compute with here: the CPUs this process may run on (its
  affinity, i.e. a cpuset; a cgroup CPU quota, as on Binder and in containers), ``OMP_NUM_THREADS`` where set, at
  most 2 (a classroom laptop's cores). Every notebook and model load sets torch's threads from it.

What it leaves out
- Downloading anything (``toolkit.fetch`` does that) and any cache eviction.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import socket
import subprocess
import sys
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path


def cache_dir() -> Path:
    """Where built tokenizers and converted models live (outside the repo)."""
    root = Path(os.environ.get("TOOLKIT_CACHE", Path.home() / ".cache" / "toolcall-kit"))
    if root.exists() and not root.is_dir():  # one line from the command (toolkit.__main__), not mkdir's traceback
        raise NotADirectoryError(errno.ENOTDIR, "the kit's cache ($TOOLKIT_CACHE) is a file, not a folder", str(root))
    root.mkdir(parents=True, exist_ok=True)
    return root


def hub_reachable(timeout: float = 3.0) -> bool:
    """False at once when HF_HUB_OFFLINE is set, else whether huggingface.co:443 answers within ``timeout``."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


class ResultsMissing(FileNotFoundError):
    """A saved benchmark result the kit cannot find (the message says where it looked and what to do)."""


def kit_root() -> Path:
    """The folder holding the imported ``toolkit`` package: a checkout's root, or site-packages for a wheel."""
    return Path(str(files("toolkit"))).resolve().parent


def results_dirs() -> list[Path]:
    """Where saved benchmark results are looked for, in order (see the module docstring)."""
    if os.environ.get("TOOLKIT_RESULTS"):
        return [Path(os.environ["TOOLKIT_RESULTS"]).expanduser()]
    here = Path.cwd().resolve()
    out = [
        kit_root() / "benchmarks" / "results",
        here / "benchmarks" / "results",
        here.parent / "benchmarks" / "results",
    ]
    return list(dict.fromkeys(out))


def results_file(name: str, required: bool = True) -> Path | None:
    """``benchmarks/results/<name>`` from the first folder of :func:`results_dirs` that has it."""
    tried = results_dirs()
    for d in tried:
        if (d / name).is_file():
            return d / name
    if not required:
        return None
    raise ResultsMissing(
        f"saved result {name!r} not found (looked in {', '.join(map(str, tried))}): it lives in a checkout's "
        "benchmarks/results; run from the checkout or set TOOLKIT_RESULTS=/path/to/checkout/benchmarks/results"
    )


def saved_json(name: str) -> dict | None:
    """A saved benchmark result read as JSON (``results_file``), or None when this checkout has none."""
    path = results_file(name, required=False)
    return json.loads(path.read_text(encoding="utf-8")) if path is not None else None


def data_file(name: str) -> Traversable:
    """A file shipped inside the package, under ``toolkit/data/`` (a wheel carries it; no repo checkout needed)."""
    return files("toolkit") / "data" / name


def package_text(*parts: str) -> str:
    """The text of a file shipped inside the package, e.g. ``package_text("templates", "qwen3.jinja")``."""
    return files("toolkit").joinpath(*parts).read_text(encoding="utf-8")


class DirtyTree(RuntimeError):
    """A result would name a commit that did not make it (``TOOLKIT_REQUIRE_CLEAN=1`` and changed files)."""


PROVENANCE_PATHS = ("toolkit", "benchmarks", ":(exclude)benchmarks/results", "pyproject.toml", "requirements.txt")


def provenance(root: str | os.PathLike | None = None) -> dict:
    """``{"commit", "clean", "changed"}`` for a results file; see the module docstring."""
    root = Path(root) if root is not None else kit_root()

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)

    try:
        head = git("rev-parse", "--short", "HEAD")
        status = git("status", "--porcelain", "--", *PROVENANCE_PATHS)
    except (OSError, subprocess.TimeoutExpired):
        return dict(commit="unknown", clean=None, changed=[])
    if head.returncode != 0 or status.returncode != 0:
        return dict(commit="unknown", clean=None, changed=[])
    changed = sorted(line[3:] for line in status.stdout.splitlines() if line.strip())
    sha = head.stdout.strip()
    if changed and os.environ.get("TOOLKIT_REQUIRE_CLEAN", "") in ("1", "true", "yes"):
        raise DirtyTree(
            f"refusing to save a result for commit {sha}: {len(changed)} changed file(s) "
            f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}); commit them first"
        )
    return dict(commit=sha + ("+dirty" if changed else ""), clean=not changed, changed=changed)


def script_module(path: str | os.PathLike, name: str | None = None):
    """The file at ``path`` imported as module ``name`` (default: its stem) and registered in ``sys.modules`` so
    that dataclasses and pickling inside it work; files in ``tests/`` and ``benchmarks/`` are not packages."""
    path = Path(path)
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def cgroup_dirs(controller: str, proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")):
    """(folder, is_v2) of each cgroup this process is in that can hold ``controller``'s files ("memory", "cpu"): the
    v2 group, and the v1 group of that controller (under its combined name, e.g. ``cpu,cpuacct``, where that folder
    exists). Nothing where ``proc`` cannot be read."""
    try:
        lines = proc.read_text().splitlines()
    except OSError:
        return
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            yield root / path.lstrip("/"), True
        elif controller in controllers.split(","):
            combined = root / controllers / path.lstrip("/")
            yield (combined if combined.exists() else root / controller / path.lstrip("/")), False


def _cpu_quota(proc: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs a cgroup quota allows this process (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us / cpu.cfs_period_us``), or
    None where no quota is set (or none can be read)."""
    for base, v2 in cgroup_dirs("cpu", proc, root):
        try:
            if v2:
                quota, period = (base / "cpu.max").read_text().split()
            else:
                quota, period = ((base / f"cpu.cfs_{k}_us").read_text().strip() for k in ("quota", "period"))
            if quota in ("max", "-1"):
                continue
            return int(quota) / int(period)
        except (OSError, ValueError):
            continue
    return None


def cpu_threads(cap: int = 2) -> int:
    """Threads for torch here: the CPUs this process may use (affinity; a cgroup quota, rounded down, at least 1),
    ``OMP_NUM_THREADS`` where it says fewer, at most ``cap``. More threads than CPUs make torch's OpenMP threads
    wait on each other: on a 2-core machine with one core busy, a 64x896 by 896x4864 float32 matmul took 5.4 s with
    2 threads and 2.9 s with 1 (1.8 s with 2 on an idle machine)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    quota = _cpu_quota()
    if quota is not None:
        n = min(n, max(1, int(quota)))
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        n = min(n, int(env))
    return max(1, min(n, cap))
