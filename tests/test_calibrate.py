"""toolkit.calibrate: the int8 build's output bias, on the random-weight stand-in (seconds)."""

import json

import torch

from toolkit import calibrate, models, small
from toolkit.qwen import TOOL_CALL_ID


def test_the_output_bias_removes_the_mean_gap_at_the_points_and_is_recorded(tmp_path):
    src, out = tmp_path / "src", tmp_path / "int8"
    float_model = models.stand_in("qwen2.5", seed=4)
    float_model.config.save_pretrained(src)
    reference = models.stand_in("qwen2.5", seed=4)
    g = torch.Generator().manual_seed(0)
    points = [torch.randint(100, 150_000, (n,), generator=g).tolist() for n in (7, 12, 9, 15)]
    ref = calibrate.last_logits(float_model, points)
    assert torch.allclose(ref, calibrate.last_logits(reference, points))  # the same model, measured first
    man = {"name": "t", "base": {"safetensors_sha256": "b" * 64}, "adapter": {}}
    small.save(float_model, src, out, man, before_publish=lambda staging: calibrate.apply(staging, ref, points))

    plain = tmp_path / "plain"
    small.save(models.stand_in("qwen2.5", seed=4), src, plain, man)
    before = (ref - calibrate.last_logits(small.load(plain), points)).mean(0)
    after = (ref - calibrate.last_logits(small.load(out), points)).mean(0)
    assert before.abs().mean() > 1e-3  # int8 moved the logits
    assert after.abs().mean() < before.abs().mean() / 20  # the bias takes the mean gap out (bf16 output rounding)

    recorded = small.verify(out)["output_bias"]  # the rewritten file's sha256 is the manifest's
    assert recorded["points"] == 4 and recorded["prompt_tokens"] == 43
    assert recorded["tool_call_shift_before"] == round(-float(before[TOOL_CALL_ID]), 4)
    assert "output_bias" not in json.loads((plain / small.MANIFEST).read_text())
    assert not list(out.glob("*.tmp")) and not list(tmp_path.glob(".staging-*"))
