"""The merged model folder is reused only while its files match its manifest; otherwise it is rebuilt, saying why."""

import json

import pytest

from toolkit.artifact import record_files
from toolkit.models import adapter_folder
from toolkit.sft import export


class Rebuilt(Exception):
    pass


def _fake_merged(tmp_path):
    target = tmp_path / "merged"
    target.mkdir()
    (target / "model.safetensors").write_bytes(b"weights" * 100)
    (target / "config.json").write_text("{}")
    facts = {"adapter_weights_sha256": export._weights_sha(adapter_folder())}
    facts |= record_files(target, skip=(export.MANIFEST,))
    (target / export.MANIFEST).write_text(json.dumps(facts))
    return target


@pytest.fixture
def no_build(monkeypatch):
    def refuse(*a, **k):
        raise Rebuilt

    monkeypatch.setattr(export, "load", refuse)
    monkeypatch.setattr(export, "apply_adapter", refuse)


def test_an_intact_folder_is_reused_without_loading_a_model(tmp_path, no_build):
    target = _fake_merged(tmp_path)
    assert export.merged_folder(out=target, say=lambda line: None) == target


@pytest.mark.parametrize(
    "damage, why",
    [
        (lambda t: (t / "model.safetensors").write_bytes(b"short"), "bytes; the manifest says"),
        (lambda t: (t / "model.safetensors").write_bytes(b"WEIGHTS" * 100), "sha256"),
        (lambda t: (t / "config.json").unlink(), "missing"),
        (lambda t: (t / export.MANIFEST).write_text('{"adapter_weights_sha256": "x"}'), None),
        (lambda t: (t / export.MANIFEST).write_text("{not json"), "bad manifest"),
    ],
)
def test_a_damaged_or_stale_folder_is_rebuilt_saying_why(tmp_path, no_build, damage, why):
    target = _fake_merged(tmp_path)
    damage(target)
    lines = []
    with pytest.raises(Rebuilt):
        export.merged_folder(out=target, say=lines.append)
    if why:
        assert len(lines) >= 1 and why in lines[0] and "\n" not in lines[0], lines
    assert not (target / export.MANIFEST).exists()  # a build cut short is never reused
