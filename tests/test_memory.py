"""toolkit.memory: the headroom a load is sized with (cgroup v1 and v2, page cache left out), what a load adds, and
giving freed heap pages back."""

import psutil
import pytest

from toolkit import memory


def test_memory_available_reads_a_cgroup_limit(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "_cgroup_limit_and_usage", lambda: (2 * 2**30, int(1.5 * 2**30)))
    assert memory.memory_available() <= 2**29
    assert memory.memory_limit() == 2 * 2**30


def _fake_cgroup(tmp_path, v2: bool, stat: str):
    proc = tmp_path / "cgroup"
    if v2:
        proc.write_text("0::/kit\n")
        base = tmp_path / "kit"
        base.mkdir()
        (base / "memory.max").write_text(f"{2 * 2**30}\n")
        (base / "memory.current").write_text(f"{int(1.8 * 2**30)}\n")
    else:
        proc.write_text("5:cpuset:/kit\n4:memory:/kit\n")
        base = tmp_path / "memory" / "kit"
        base.mkdir(parents=True)
        (base / "memory.limit_in_bytes").write_text(f"{2 * 2**30}\n")
        (base / "memory.usage_in_bytes").write_text(f"{int(1.8 * 2**30)}\n")
    (base / "memory.stat").write_text(stat)
    return proc


@pytest.mark.parametrize("v2", [False, True])
def test_cgroup_usage_leaves_out_unmapped_page_cache(tmp_path, v2):
    mib = 2**20
    stat = (
        f"file {900 * mib}\nfile_mapped {100 * mib}\nanon {800 * mib}\n"
        if v2
        else f"cache {900 * mib}\ntotal_cache {900 * mib}\ntotal_mapped_file {100 * mib}\ntotal_rss {800 * mib}\n"
    )
    limit, used = memory._cgroup_limit_and_usage(_fake_cgroup(tmp_path, v2, stat), tmp_path)
    assert limit == 2 * 2**30
    assert used == int(1.8 * 2**30) - 800 * mib  # the 100 MB mapped stays counted


def test_cgroup_usage_without_a_stat_file_counts_everything(tmp_path):
    proc = _fake_cgroup(tmp_path, False, "")
    (tmp_path / "memory" / "kit" / "memory.stat").unlink()
    assert memory._cgroup_limit_and_usage(proc, tmp_path) == (2 * 2**30, int(1.8 * 2**30))


def test_no_cgroup_limit_is_none(tmp_path):
    proc = _fake_cgroup(tmp_path, True, "")
    (tmp_path / "kit" / "memory.max").write_text("max\n")
    assert memory._cgroup_limit_and_usage(proc, tmp_path) is None


@pytest.mark.parametrize(
    "rss_mb,want_mb", [(30, 0.15 * 1024 + 512 - 30), (300, 0.15 * 1024 + 512 - 300), (900, 0.15 * 1024)]
)
def test_a_load_counts_only_the_runtime_this_process_has_not_paid(monkeypatch, rss_mb, want_mb):
    """A kernel that imported torch long ago needs only the weights and activations more (notebook 05 in a 2 GB
    cgroup was refused the int8 model when the whole runtime was counted twice)."""

    class Proc:
        def memory_info(self):
            return type("M", (), {"rss": rss_mb * 2**20})()

    monkeypatch.setattr(psutil, "Process", lambda: Proc())  # small imports psutil where it sizes a load
    assert memory.load_overhead() == pytest.approx(want_mb * 2**20, abs=2**20)


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def test_give_back_returns_freed_heap_pages():
    """Freed chunks in the middle of the heap stay resident until malloc_trim: the kernel that dropped the int8
    model held 830 MB until it, 456 MB after."""
    chunks = [b"x" * 65536 for _ in range(3000)]  # 192 MB of heap chunks (under glibc's mmap threshold)
    keep = chunks[::10]  # pins the heap around the holes, so free() alone cannot shrink it from the top
    del chunks
    before = _rss_mb()
    memory.give_back()
    assert before - _rss_mb() > 100, (before, _rss_mb())
    assert len(keep) == 300
