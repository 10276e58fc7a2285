"""toolkit.paths.cpu_threads: the threads torch gets here never exceed the CPUs a cpuset, a cgroup quota (v1 and v2)
or OMP_NUM_THREADS allow."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit import paths


def _fake_cgroup(tmp_path, line: str, files: dict) -> tuple:
    proc = tmp_path / "cgroup"
    proc.write_text(line + "\n")
    for rel, text in files.items():
        f = tmp_path / "fs" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return proc, tmp_path / "fs"


V1 = "cpu,cpuacct/pod/cpu.cfs_"


@pytest.mark.parametrize(
    "line,files,want",
    [
        ("0::/pod", {"pod/cpu.max": "100000 100000\n"}, 1.0),  # v2, one CPU (a Binder pod)
        ("0::/pod", {"pod/cpu.max": "max 100000\n"}, None),  # v2, no quota
        ("4:cpu,cpuacct:/pod", {V1 + "quota_us": "150000", V1 + "period_us": "100000"}, 1.5),
        ("4:cpu,cpuacct:/pod", {"cpu/pod/cpu.cfs_quota_us": "-1", "cpu/pod/cpu.cfs_period_us": "100000"}, None),
        ("4:cpu,cpuacct:/pod", {}, None),  # unreadable: no quota, no error
    ],
)
def test_cpu_quota_is_read_from_v1_and_v2(tmp_path, line, files, want):
    proc, root = _fake_cgroup(tmp_path, line, files)
    assert paths._cpu_quota(proc, root) == want


def test_cpu_threads_never_exceed_the_quota_affinity_or_env(monkeypatch):
    monkeypatch.setattr(paths.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(paths, "_cpu_quota", lambda: None)
    assert paths.cpu_threads() == 2 and paths.cpu_threads(cap=8) == 8
    monkeypatch.setattr(paths, "_cpu_quota", lambda: 1.0)  # Binder: many host cores, one CPU of quota
    assert paths.cpu_threads() == 1
    monkeypatch.setattr(paths, "_cpu_quota", lambda: 0.5)
    assert paths.cpu_threads() == 1
    monkeypatch.setattr(paths, "_cpu_quota", lambda: None)
    monkeypatch.setattr(paths.os, "sched_getaffinity", lambda pid: {3}, raising=False)  # a cpuset of one CPU
    assert paths.cpu_threads() == 1
    monkeypatch.setattr(paths.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert paths.cpu_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert paths.cpu_threads() == 2


@pytest.mark.skipif(not Path("/sys/fs/cgroup/cpu/tasks").exists() or os.geteuid() != 0, reason="needs root and v1 cpu")
def test_a_real_v1_quota_of_one_cpu_gives_one_thread():
    """A process started inside a cgroup whose quota is one CPU (as on Binder), with every core in its affinity."""
    g = Path("/sys/fs/cgroup/cpu") / f"toolkit-threads-{os.getpid()}"
    g.mkdir()
    try:
        (g / "cpu.cfs_period_us").write_text("100000")
        (g / "cpu.cfs_quota_us").write_text("100000")
        code = "from toolkit.paths import cpu_threads; print(cpu_threads(cap=64))"
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            preexec_fn=lambda: (g / "cgroup.procs").write_text(str(os.getpid())),
        ).stdout
        assert out.strip() == "1"
    finally:
        g.rmdir()
