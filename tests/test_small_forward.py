"""toolkit.small_forward: the int8 build's own Qwen2 forward against transformers' class holding the same int8
modules (the stand-in's artifact, seconds), and the import it saves (a fresh process)."""

import subprocess
import sys

import pytest
import torch

from toolkit import models, small, small_forward
from toolkit.backends.hf import HFBackend

STOP = {151645}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("art") / "int8"
    float_model = models.stand_in("qwen2.5", seed=4)
    float_model.config.save_pretrained(src)
    small.save(float_model, src, out, {"name": "t", "base": {"safetensors_sha256": "b" * 64}, "adapter": {}})
    ours, theirs = small.load(out), small.load(out, transformers_class=True)
    assert isinstance(ours, small_forward.Qwen2) and not isinstance(theirs, small_forward.Qwen2)
    return out, ours, theirs


def _prompt(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return [151644, 872, 198] + torch.randint(200, 150000, (n,), generator=g).tolist()


def test_logits_equal_transformers_on_the_same_int8_modules(pair):
    _, ours, theirs = pair
    for n in (40, 3 * small_forward.MLP_ROWS + 5):  # one MLP call, and a prefill the MLP takes in slices
        ids = torch.tensor([_prompt(n, 1)])
        with torch.inference_mode():
            a, b = ours(input_ids=ids).logits, theirs(input_ids=ids).logits
        assert a.shape == b.shape == (1, ids.shape[1], ours.config.vocab_size)
        assert torch.allclose(a, b, atol=1e-4, rtol=1e-4), float((a - b).abs().max())
        assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_greedy_turns_with_a_reused_cache_give_transformers_tokens(pair):
    _, ours, theirs = pair
    mine, ref = HFBackend(ours, "kit"), HFBackend(theirs, "transformers")
    first = _prompt(small_forward.MLP_ROWS + 30, 2)
    for prompt in (first, first + [151645, 198] + _prompt(12, 3), first[:20] + _prompt(9, 4)):  # extend, then diverge
        a = mine.generate(prompt, max_new_tokens=12, stop_ids=STOP)
        b = ref.generate(prompt, max_new_tokens=12, stop_ids=STOP)
        assert a.new_ids == b.new_ids and a.reused == b.reused
    assert mine.generate(first, max_new_tokens=1, stop_ids=STOP).reused > 0  # the cache really was reused


def test_a_padded_batch_gives_transformers_tokens(pair):
    _, ours, theirs = pair
    shared = _prompt(20, 5)
    prompts = [shared + _prompt(3, 6), shared + _prompt(11, 7), _prompt(7, 8)]  # a shared part, and plain left padding
    for share in (True, False):
        a = HFBackend(ours).generate_batch(prompts, max_new_tokens=8, stop_ids=STOP, share_prefix=share)
        b = HFBackend(theirs).generate_batch(prompts, max_new_tokens=8, stop_ids=STOP, share_prefix=share)
        assert [g.new_ids for g in a] == [g.new_ids for g in b]
        alone = [HFBackend(ours).generate(p, max_new_tokens=8, stop_ids=STOP).new_ids for p in prompts]
        assert [g.new_ids for g in a] == alone


def test_generate_is_transformers_own_on_the_same_modules(pair):
    _, ours, _ = pair
    prompt = _prompt(15, 9)
    want = HFBackend(ours).generate(prompt, max_new_tokens=6, stop_ids=set()).new_ids
    out = ours.generate(torch.tensor([prompt]), max_new_tokens=6, min_new_tokens=6, do_sample=False)
    assert out[0, len(prompt) :].tolist() == want
    wrapped = ours.transformers_model()
    assert wrapped.lm_head is ours.lm_head and wrapped.model.layers[0].mlp.up_proj is ours.model.layers[0].mlp.up_proj


def test_only_qwen2_configs_take_this_forward():
    assert small_forward.supports(models.stand_in("qwen2.5").config)
    assert not small_forward.supports(models.stand_in("qwen3").config)  # q/k norms: transformers' class
    cfg = models.stand_in("qwen2.5").config
    cfg.use_sliding_window = True
    assert not small_forward.supports(cfg)


def test_loading_and_running_it_never_imports_transformers_modeling(pair):
    out, _, _ = pair
    code = (
        "import sys, torch; from pathlib import Path; from toolkit import small; from toolkit.backends.hf import HFBackend\n"
        f"m = small.load(Path({str(out)!r}))\n"
        "HFBackend(m).generate([151644, 872, 198, 3838], max_new_tokens=3, stop_ids=set())\n"
        "print(sorted(k for k in sys.modules if k.startswith('torch._dynamo') or 'modeling_qwen2' in k)[:3])\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip().splitlines()[-1] == "[]"
