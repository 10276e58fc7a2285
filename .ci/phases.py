#!/usr/bin/env python3
"""Times the phases of `make test` and prints them at the end. Standard library only: it runs before the venv.

    phases.py start LOG                  empty LOG and note the start time and load
    phases.py run LOG NAME -- CMD ...    run CMD; append NAME's wall and CPU seconds to LOG; exit with CMD's status
    phases.py summary LOG                print one table: the steps run through ``run`` (install, pytest)
                                         and the rows pytest itself appended per test phase (unit,
                                         notebooks, browser: tests/conftest.py writes them when TOOLKIT_PHASE_LOG
                                         names LOG)

CPU is user + system time of the command and of every child it waited for. Under pytest-xdist the test phases
overlap, so each is shown as the span from its first test's start to its last test's end, relative to the start.
Leaves out: time spent in make itself between the steps (it is in the total).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _append(log: str, row: dict) -> None:
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def _mmss(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 60}:{s % 60:02d}" if s < 3600 else f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def start(log: str) -> int:
    os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
    with open(log, "w", encoding="utf-8"):
        pass
    _append(log, {"kind": "start", "at": time.time(), "load": os.getloadavg()[0], "cpus": os.cpu_count()})
    return 0


def run(log: str, name: str, cmd: list[str]) -> int:
    t0, c0 = time.time(), _cpu_children()
    rc = subprocess.call(cmd)
    _append(
        log, {"kind": "step", "phase": name, "start": t0, "stop": time.time(), "cpu": _cpu_children() - c0, "rc": rc}
    )
    return rc


def summary(log: str) -> int:
    try:
        with open(log, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError as e:
        print(f"(no phase times: {e})")
        return 0
    first = next((r for r in rows if r["kind"] == "start"), None)
    t0 = first["at"] if first else min((r["start"] for r in rows if "start" in r), default=time.time())
    print(
        f"\n==== time per phase ({first['cpus'] if first else '?'} CPUs; 1-min load "
        f"{first['load'] if first else float('nan'):.1f} at the start, {os.getloadavg()[0]:.1f} now)"
    )
    print(f"{'phase':<16} {'wall':>8} {'CPU':>8} {'tests':>6}   {'from':>6} → {'to':<6}")
    steps = [r for r in rows if r["kind"] == "step"]
    tests = [r for r in rows if r["kind"] == "pytest"]
    ordered = []
    for r in steps:
        ordered.append(r)
        if r["phase"] == "pytest":
            ordered += tests
    ordered += [r for r in tests if r not in ordered]
    for r in ordered:
        wall = r["stop"] - r["start"]
        indent = "  " if r["kind"] == "pytest" else ""
        status = "" if r.get("rc", 0) == 0 else f"   exit {r['rc']}"
        tests = str(r["tests"]) if "tests" in r else ""
        print(
            f"{indent + r['phase']:<16} {_mmss(wall):>8} {_mmss(r['cpu']):>8} {tests:>6}   "
            f"{_mmss(r['start'] - t0):>6} → {_mmss(r['stop'] - t0):<6}{status}"
        )
    end = max((r["stop"] for r in rows if "stop" in r), default=t0)
    print(f"{'total':<16} {_mmss(end - t0):>8}")
    for kind, what in (("file", "test files (test time summed over their tests"), ("test", "tests (test time")):
        slow = [r for r in rows if r["kind"] == kind]
        if slow:
            print(f"slowest {what}, CPU):")
            for r in slow:
                name = r["file"] if len(r["file"]) <= 70 else r["file"][:69] + "…"
                print(f"  {name:<70} {_mmss(r['busy']):>8} {_mmss(r['cpu']):>8}")
    nbs = [r for r in rows if r["kind"] == "notebook"]
    if nbs:
        print(
            "notebook runs (binder, lab:binder: in a 2 GB / one-CPU cgroup, its peak without the page cache it can "
            "drop; lab: the RSS of the Jupyter server and its kernel):"
        )
        print(f"  {'notebook [mode]':<48} {'seconds':>8} {'peak PSS MB':>12} {'cgroup peak MB':>15}")
        for r in sorted(nbs, key=lambda r: r["test"]):
            print(
                f"  {r['test']:<48} {r.get('seconds', 0):>8.1f} {r.get('peak_rss_mb', 0):>12} "
                f"{r.get('cgroup_peak_mb', 0):>15}"
            )
    print(
        "(test phases run side by side under pytest-xdist: their spans overlap; CPU counts the processes and "
        "the children they waited for)"
    )
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "start":
        return start(argv[1])
    if len(argv) >= 2 and argv[0] == "summary":
        return summary(argv[1])
    if len(argv) >= 5 and argv[0] == "run" and argv[3] == "--":
        return run(argv[1], argv[2], argv[4:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
