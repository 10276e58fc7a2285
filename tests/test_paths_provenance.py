import subprocess

import pytest

from toolkit.paths import DirtyTree, provenance


def _repo(tmp_path):
    run = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("config", "user.email", "t@t"), run("config", "user.name", "t")
    (tmp_path / "toolkit").mkdir()
    (tmp_path / "toolkit" / "a.py").write_text("x = 1\n")
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    run("add", "-A"), run("commit", "-qm", "c")
    return run


def test_a_clean_tree_names_its_commit_and_a_dirty_one_is_marked_or_refused(tmp_path, monkeypatch):
    _repo(tmp_path)
    clean = provenance(tmp_path)
    assert clean["clean"] is True and clean["changed"] == [] and "+" not in clean["commit"]
    (tmp_path / "benchmarks" / "results" / "r.json").write_text("{}")  # saved results do not make it dirty
    assert provenance(tmp_path)["clean"] is True
    (tmp_path / "toolkit" / "a.py").write_text("x = 2\n")
    dirty = provenance(tmp_path)
    assert dirty["clean"] is False and dirty["commit"] == clean["commit"] + "+dirty"
    assert dirty["changed"] == ["toolkit/a.py"]
    monkeypatch.setenv("TOOLKIT_REQUIRE_CLEAN", "1")
    with pytest.raises(DirtyTree, match="refusing to save a result for commit .*toolkit/a.py"):
        provenance(tmp_path)


def test_outside_a_checkout_the_commit_is_unknown(tmp_path):
    assert provenance(tmp_path) == dict(commit="unknown", clean=None, changed=[])
