"""An adapter folder checked against its manifest (toolkit/artifact.py) before anything loads it: the shipped one
passes; no weights, random bytes as weights, truncated weights, no config, a truncated or non-UTF-8 manifest are
each one ``ArtifactError`` line; ``models adapter`` and ``cliargs.model`` refuse them (exit 1 / a usage error).
An RL adapter folder (no manifest) passes or fails the checks it shares with them the same way."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit import artifact, cliargs
from toolkit.models import adapter_folder

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = adapter_folder()


def _copy(tmp_path) -> Path:
    out = tmp_path / "adapter"
    shutil.copytree(SHIPPED, out)
    return out


def test_the_shipped_adapter_matches_its_manifest():
    man = artifact.verify_adapter(SHIPPED)
    assert set(man["sha256"]) == set(man["files"]) == {"adapter_config.json", "adapter_model.safetensors"}


def _no_weights(d):
    (d / "adapter_model.safetensors").unlink()


def _random_weights(d):
    w = d / "adapter_model.safetensors"
    w.write_bytes(os.urandom(w.stat().st_size))


def _truncated(d):
    w = d / "adapter_model.safetensors"
    w.write_bytes(w.read_bytes()[:1000])


def _no_config(d):
    (d / "adapter_config.json").unlink()


def _manifest_cut(d):
    m = d / "manifest.json"
    m.write_bytes(m.read_bytes()[:300])


def _manifest_binary(d):
    (d / "manifest.json").write_bytes(b"\xff\xfe" + os.urandom(200))


@pytest.mark.parametrize(
    "spoil, why",
    [
        (_no_weights, "adapter_model.safetensors is missing"),
        (_random_weights, "sha256"),
        (_truncated, "truncated"),
        (_no_config, "adapter_config.json is missing"),
        (_manifest_cut, "not valid JSON"),
        (_manifest_binary, "not UTF-8"),
    ],
)
def test_a_spoilt_adapter_is_one_line(tmp_path, spoil, why):
    d = _copy(tmp_path)
    spoil(d)
    with pytest.raises(artifact.ArtifactError) as e:
        artifact.verify_adapter(d)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_random_weights_of_the_listed_size_fail_even_without_sha256(tmp_path):
    d = _copy(tmp_path)
    m = d / "manifest.json"
    m.write_text(m.read_text().replace('"sha256": {', '"sha256_": {'))
    _random_weights(d)
    with pytest.raises(artifact.ArtifactError, match="not a safetensors file"):
        artifact.verify_adapter(d)


def test_models_adapter_and_the_model_option_refuse_before_any_load(tmp_path, monkeypatch):
    d = _copy(tmp_path)
    _random_weights(d)
    env = dict(os.environ, TOOLKIT_ADAPTER=str(d), PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [sys.executable, "-m", "toolkit", "models", "adapter", "--check"], env=env, capture_output=True, text=True
    )
    assert r.returncode == 1 and r.stdout == "" and "sha256" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    monkeypatch.setenv("TOOLKIT_ADAPTER", str(d))
    with pytest.raises(Exception, match="sha256"):
        cliargs.model("qwen2.5-coder-0.5b+lora")


def _rl_adapter(d: Path) -> Path:
    """An RL adapter folder as ``benchmarks/rl.py train`` writes it: peft's config and weights, no manifest."""
    d.mkdir(parents=True)
    _write_config(d, {"peft_type": "LORA", "r": 8})
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    (d / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    return d


def _write_config(d, cfg):
    (d / "adapter_config.json").write_text(json.dumps(cfg))


def _cut_data(d):
    w = d / "adapter_model.safetensors"
    w.write_bytes(w.read_bytes()[:-4])


@pytest.mark.parametrize(
    "spoil, why",
    [
        (lambda d: shutil.rmtree(d), "no such folder"),
        (_no_weights, "adapter_model.safetensors is missing"),
        (_no_config, "adapter_config.json is missing"),
        (lambda d: (d / "adapter_config.json").write_bytes(b"\xff\xfe"), "not UTF-8"),
        (lambda d: _write_config(d, [8]), "adapter_config.json is not a JSON object"),
        (lambda d: _write_config(d, {"peft_type": "PREFIX_TUNING", "r": 8}), "is not a LoRA adapter's config"),
        (lambda d: _write_config(d, {"peft_type": "LORA", "r": "8"}), "is not a LoRA adapter's config"),
        (_cut_data, "adapter_model.safetensors is tensor 'w' lies outside the file (truncated?)"),
        (_random_weights, "adapter_model.safetensors is not a safetensors file"),
    ],
)
def test_a_spoilt_rl_adapter_is_one_line(tmp_path, spoil, why):
    d = _rl_adapter(tmp_path / "run" / "adapter")
    assert artifact.verify_rl_adapter(d)["rank"] == 8
    spoil(d)
    with pytest.raises(artifact.ArtifactError) as e:
        artifact.verify_rl_adapter(d)
    assert why in str(e.value) and "\n" not in str(e.value) and "RL adapter" in str(e.value)
