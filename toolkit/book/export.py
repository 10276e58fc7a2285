"""Image export of the book's figures in a child process that is bounded in time and shares nothing writable.

What it does
- ``export(jobs, timeout)`` writes each ``(figure JSON, file, width, height, scale)`` job to an image through
  kaleido and the system chromium, in a child process (``python -m toolkit.book.export JOBFILE``) started in its
  own session. The child gets a private ``HOME``, ``TMPDIR`` and XDG cache/config folders, so its chromium shares
  no profile, cache, lock or temp file with another chromium on the machine (kaleido already gives chromium a fresh
  ``--user-data-dir``, talks to it over pipes rather than a port, and passes ``--disable-dev-shm-usage``, so it
  leaves ``/dev/shm`` alone). Past ``timeout`` seconds the child's whole process group is killed, and every process
  below it that left the group (kaleido's browser wrapper starts its own session), and :class:`ExportTimeout` says
  so in one line; the data files, written before, stay.

What it leaves out
- Retrying: a timed-out export is reported, not run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import psutil


class ExportTimeout(RuntimeError):
    pass


def _private_env(root: Path, browser: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("home", "tmp", "cache", "config", "data"):
        (root / name).mkdir()
    env.update(
        HOME=str(root / "home"),
        TMPDIR=str(root / "tmp"),
        XDG_CACHE_HOME=str(root / "cache"),
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_DATA_HOME=str(root / "data"),
        BROWSER_PATH=browser,
    )
    return env


def _kill_tree(pid: int) -> None:
    """Kill ``pid``'s process group and every descendant, also those in a session of their own."""
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        below = []
    os.killpg(pid, signal.SIGKILL)
    for p in below:
        try:
            p.kill()
        except psutil.Error:  # gone already
            pass


def export(jobs: list[dict], browser: str, timeout: float = 300.0) -> int:
    """Run the jobs in a bounded child process; return how many files it wrote."""
    if not jobs:
        return 0
    with tempfile.TemporaryDirectory(prefix="toolkit-figures-") as d:
        root = Path(d)
        jobfile = root / "jobs.json"
        jobfile.write_text(json.dumps(jobs), encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolkit.book.export", str(jobfile)],
            env=_private_env(root, browser),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: a timeout kills chromium too
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            proc.communicate()
            raise ExportTimeout(
                f"image export did not finish in {timeout:.0f} s and was stopped (chromium at {browser}); "
                "the data files are written; rerun, or raise --timeout"
            ) from None
        if proc.returncode != 0:
            last = (err.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"image export failed (exit {proc.returncode}): {last}")
    return sum(Path(j["file"]).exists() for j in jobs)


def _main(jobfile: str) -> int:
    import kaleido  # lazy: only the child process loads the browser driver
    import plotly.io as pio  # lazy: the parent process never needs it here

    jobs = json.loads(Path(jobfile).read_text(encoding="utf-8"))
    kaleido.start_sync_server(silence_warnings=True)
    try:
        with warnings.catch_warnings():  # plotly always passes kopts; the running server ignores them, as meant
            warnings.filterwarnings("ignore", message="The kopts argument is ignored")
            pio.write_images(
                [pio.from_json(j["figure"]) for j in jobs],
                [j["file"] for j in jobs],
                width=[j["width"] for j in jobs],
                height=[j["height"] for j in jobs],
                scale=[j["scale"] for j in jobs],
            )
    finally:
        kaleido.stop_sync_server(silence_warnings=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
