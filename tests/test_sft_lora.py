"""toolkit.sft.lora: the group loss is exact, a short real fine-tune lowers the loss and its adapter round-trips,
and the shipped adapter makes the real model write <tool_call> by itself (no grammar, no forced prefix)."""

import json

import pytest
import torch

from toolkit.models import ADAPTER_NAME, adapter_folder, adapter_manifest, apply_adapter, load, stand_in
from toolkit.sft import data, lora
from toolkit.tokenizer import qwen_tokenizer


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_group_loss_savings_are_exact():
    """Shared prefix once and logits only at trained positions give the same loss and gradients as the plain
    computation (a Qwen2-shaped random model, adapters on every layer)."""
    torch.manual_seed(0)
    model = lora.attach(stand_in("qwen2.5"), lora.LoraSettings(first_layer=0))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    exs = data.dataset(1, seed=7, per_group=3)
    rows = data.labelled(exs, qwen_tokenizer("qwen2.5"))
    out = {}
    for share in (True, False):
        for head in (True, False):
            model.zero_grad()
            loss, ran, trained = lora.group_loss(model, rows, share, head)
            loss.backward()
            out[share, head] = (loss.item(), _grads(model), ran, trained)
    ref_loss, ref_g, ref_ran, ref_trained = out[False, False]
    assert ref_g, "adapters received gradients"
    for key, (loss, g, _ran, trained) in out.items():
        assert loss == pytest.approx(ref_loss, rel=1e-5), key
        assert trained == ref_trained
        for n in ref_g:
            torch.testing.assert_close(g[n], ref_g[n], rtol=1e-3, atol=1e-6)
    assert out[True, True][2] < ref_ran  # the shared prefix ran once


def test_adapters_only_on_the_upper_layers():
    model = lora.attach(stand_in("qwen2.5"), lora.LoraSettings(first_layer=1))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    lora_params = [n for n in trainable if "lora_" in n]
    rows = [n for n in trainable if "lora_" not in n]
    assert lora_params and all(".layers.1." in n for n in lora_params)
    assert rows and all("trainable_tokens" in n and "embed_tokens" in n for n in rows)  # tied: one copy


def test_apply_adapter_refuses_another_model():
    if adapter_manifest() is None:
        pytest.fail(f"the kit's adapter is missing from {adapter_folder()}")
    with pytest.raises(ValueError, match="different model"):
        apply_adapter(load("stand-in", quiet=True))


def test_shipped_adapter_manifest_says_what_made_it():
    man = adapter_manifest()
    assert man is not None, "toolkit/data/adapters holds the kit's adapter"
    for key in ("base", "data", "settings", "commit", "steps", "loss_first10", "loss_last10", "seconds"):
        assert key in man
    assert len(man["base"]["safetensors_sha256"]) == 64 and len(man["data"]["sha256"]) == 64
    assert man["loss_last10"] < man["loss_first10"]
    assert "+dirty" not in man["commit"]
    # the data it names is the data the generator makes from that seed
    s = man["settings"]
    exs = data.dataset(s["groups"], seed=s["data_seed"], per_group=s["per_group"], mix=s.get("mix", "v1"))
    assert data.data_hash(exs) == man["data"]["sha256"]
    size = sum(man["files"].values())
    assert size < 8_000_000, size


@pytest.mark.real_model
def test_short_real_fine_tune_lowers_the_loss_and_round_trips(tmp_path):
    """A few steps on one small group (the smoke the issue asks for): stopped and resumed from its checkpoint, the
    loss falls, and the saved float16 adapter applied to fresh base weights carries what was trained."""
    s = lora.LoraSettings(groups=1, per_group=2, data_seed=11, epochs=4, lr=2e-3, warmup=1)
    out, ckpt = tmp_path / "adapter", tmp_path / "ckpt"
    # float32 throughout: where the CPU has fast bf16, load() would pick bf16, and the round trip below compares numerics
    first = load("qwen2.5-coder-0.5b", quiet=True, dtype="float32")
    res = lora.train(first, s, out, ckpt, progress=False, limit_steps=2)  # stopped early ...
    assert len(res.losses) == 2 and (ckpt / f"lora-{s.key()}.pt").exists()
    del first
    trained = load("qwen2.5-coder-0.5b", quiet=True, dtype="float32")
    res = lora.train(trained, s, out, ckpt, progress=False)  # ... and resumed: steps 3 and 4 only
    assert len(res.losses) == 4 and res.losses[-1] < res.losses[0], res.losses
    man = json.loads((out / "manifest.json").read_text())
    assert man["steps"] == 4 and man["settings"]["epochs"] == 4
    rows = data.labelled(data.dataset(1, seed=11, per_group=2), trained.tokenizer)
    again = apply_adapter(load("qwen2.5-coder-0.5b", quiet=True, dtype="float32"), out)
    assert "LoRA adapter adapter" in again.description
    ids = torch.tensor([rows[0].ids])
    with torch.no_grad():
        a = again.model(input_ids=ids).logits[0, -8:]
        c = trained.model(input_ids=ids).logits[0, -8:]  # peft injected the adapters into these modules in place
        loss, _, _ = lora.group_loss(again.model, rows)
    torch.testing.assert_close(a, c, rtol=1e-2, atol=5e-2)  # float16 adapter vs float32 training weights
    assert loss.item() < res.losses[0]


@pytest.mark.real_model
def test_the_adapter_writes_tool_calls_by_itself():
    """Held-out generated requests (a data seed training never used), greedy, no grammar, no forced prefix: the
    adapted model opens a <tool_call> block; the base model (0 of 1,240 BFCL cases) does not."""
    loaded = load("qwen2.5-coder-0.5b" + "+lora", quiet=True)
    assert ADAPTER_NAME in loaded.description
    man = adapter_manifest()
    seed = man["settings"]["data_seed"] + 1000
    held = [e for e in data.dataset(12, seed=seed) if e.kind in ("single", "multiple", "parallel")][:3]
    assert len(held) == 3
    tok = loaded.tokenizer
    for e in held:
        prompt = [m for m in e.messages if m["role"] in ("system", "user")]
        text = tok.apply_chat_template(prompt, tools=e.tools, tokenize=False, add_generation_prompt=True)
        ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            out = loaded.model.generate(ids, max_new_tokens=12, do_sample=False)
        new = tok.decode(out[0, ids.shape[1] :], skip_special_tokens=False)
        assert new.startswith("<tool_call>"), (e.messages[-2]["content"], new)
