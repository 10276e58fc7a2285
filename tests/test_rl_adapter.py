"""toolkit.rl_adapter: an RL adapter is put only on the model its run started from, and a mismatch is one line
before any model loads (``qwen2.5-coder-0.5b+rl`` from the base, ``...+lora+rl`` from the SFT adapter)."""

import json

import pytest

from toolkit.artifact import ArtifactError, verify_rl_adapter
from toolkit.rl_adapter import rl_adapter_folder, rl_start_mismatch

BASE = "Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M → bf16, offline) [real-offline, real weights, 630.2M params, cpu]"
SFT = "Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M → bf16, offline) + LoRA adapter x (r=8, weights 07ad3f3e) [cpu]"


def _run(tmp_path, start):
    folder = tmp_path / "run" / "adapter"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    (folder / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    if start is not None:
        (folder.parent / "results.json").write_text(json.dumps({"model": start}))
    return verify_rl_adapter(folder)


@pytest.mark.parametrize(
    "start, name, fits",
    [
        (BASE, "qwen2.5-coder-0.5b+rl", True),
        (SFT, "qwen2.5-coder-0.5b+lora+rl", True),
        (BASE, "qwen2.5-coder-0.5b+lora+rl", False),
        (SFT, "qwen2.5-coder-0.5b+rl", False),
        (None, "qwen2.5-coder-0.5b+rl", True),  # no start recorded: the load says so
    ],
)
def test_an_rl_adapter_fits_only_the_start_its_run_recorded(tmp_path, start, name, fits):
    why = rl_start_mismatch(name, _run(tmp_path, start))
    assert (why is None) == fits
    if not fits:
        stem = name.removesuffix("+rl")
        assert why.endswith(f"not from {stem}") and "was trained from Qwen2.5-Coder" in why and "[" not in why


def test_the_folder_is_the_environments_and_a_bad_home_is_one_error(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLKIT_RL_ADAPTER", str(tmp_path / "x"))
    assert rl_adapter_folder() == (tmp_path / "x").resolve()
    monkeypatch.setenv("TOOLKIT_RL_ADAPTER", "~nosuchuser_x9/adapter")
    with pytest.raises(Exception, match="nosuchuser") as e:
        rl_adapter_folder()
    assert not isinstance(e.value, ArtifactError) or "nosuchuser" in str(e.value)
