"""toolkit.small: the int8 build, on the random-weight stand-in (seconds): round trip, checks, memory sizing.

The real model's int8 build is measured against its float model in benchmarks/small_model.py (BFCL, loop questions,
tokens/s, peak memory) and run by the notebooks in Binder mode (tests/test_notebooks.py)."""

import json

import pytest
import torch

from toolkit import memory, models, small


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("art") / "int8"
    float_model = models.stand_in("qwen2.5", seed=1)
    float_model.config.save_pretrained(src)
    reference = models.stand_in("qwen2.5", seed=1)
    man = {"name": "test", "base": {"safetensors_sha256": "b" * 64, "gguf_sha256": "g"}, "adapter": {}}
    small.save(float_model, src, out, man)
    return out, reference


def test_round_trip_is_close_to_the_float_model(built):
    out, reference = built
    model = small.load(out)
    ids = torch.tensor([[151644, 872, 198, 3838, 374, 220, 16, 22, 151645]])
    with torch.no_grad():
        want, got = reference(ids).logits, model(ids).logits
    assert got.shape == want.shape
    rel = (got - want).norm() / want.norm()
    assert rel < 0.05, f"int8 logits differ from float by {rel:.3f} (relative)"
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() > 0.7
    assert small.count_params(model) == sum(p.numel() for p in reference.parameters())  # the tied table counted once


def _untied(seed: int, differ: list[int]):
    """A stand-in whose embedding is a copy of its output layer with a little rounding noise everywhere (as in the
    GGUF conversion's two copies) and the rows ``differ`` trained apart."""
    model = models.stand_in("qwen2.5", seed=seed)
    head = model.get_output_embeddings()
    with torch.no_grad():
        head.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())
        emb = model.get_input_embeddings().weight
        emb.mul_(1 + 0.03 * torch.randn_like(emb))
        emb[differ] = torch.randn(len(differ), emb.shape[1]) * 2
    return model


@pytest.mark.parametrize("tie", [True, False])
def test_a_tied_table_is_stored_once_and_trained_rows_stay_the_embeddings(tmp_path, tie):
    from safetensors import safe_open

    differ = [151657, 151658] if tie else list(range(151936))  # untied: every row its own
    src, out = tmp_path / "src", tmp_path / "int8"
    model = _untied(3, differ)
    model.config.tie_word_embeddings = False  # as the GGUF conversion's config says: the rows decide
    model.config.save_pretrained(src)
    own = model.get_input_embeddings().weight.detach().clone()
    small.save(model, src, out, {"name": "t", "base": {"safetensors_sha256": "b" * 64}, "adapter": {}})
    with safe_open(str(out / small.WEIGHTS), "pt") as f:
        keys = set(f.keys())
    assert ("model.embed_tokens.qweight" in keys) is not tie and ("model.embed_tokens.own_ids" in keys) is tie
    loaded = small.load(out)
    ids = torch.tensor([[5, 151657, 77, 151658, 5]])
    got = loaded.get_input_embeddings()(ids)[0]
    assert torch.equal(got[1], own[151657]) if tie else torch.allclose(got[1], own[151657], atol=0.05)
    head = loaded.get_output_embeddings()
    from_head = head.qweight[5].float() * torch.tensor(head.scales[5].item())
    assert torch.allclose(got[0], from_head, rtol=1e-2, atol=1e-3) is tie  # shared rows are the output layer's
    assert torch.allclose(got[0], own[5], rtol=0.2, atol=0.2)  # within rounding of the float embedding
    with torch.no_grad():
        assert loaded(ids).logits.shape == (1, 5, model.config.vocab_size)


def test_an_artifact_of_an_older_scheme_is_refused(built, tmp_path):
    import json
    import shutil

    out, _ = built
    old = tmp_path / "old"
    shutil.copytree(out, old)
    man = json.loads((old / small.MANIFEST).read_text())
    man["scheme"] = "int8 weights; embedding 8-bit rows"
    (old / small.MANIFEST).write_text(json.dumps(man))
    with pytest.raises(small.ArtifactError, match="another version of the kit: rebuild"):
        small.verify(old)


def test_the_file_holds_int8_and_no_pickle(built):
    out, _ = built
    from safetensors import safe_open

    with safe_open(str(out / small.WEIGHTS), "pt") as f:
        dtypes = {f.get_tensor(k).dtype for k in f.keys() if k.endswith(".qweight")}
    assert dtypes == {torch.int8}  # the tied embedding is the output layer's int8 rows (an untied one: uint8 rows)
    assert not list(out.glob("*.pt")) and not list(out.glob("*.bin"))


def test_verify_refuses_truncated_corrupted_and_foreign(built, tmp_path):
    out, _ = built
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    (bad / ".verified").unlink(missing_ok=True)
    small.verify(bad)
    with pytest.raises(small.ArtifactError, match="other base weights"):
        small.verify(bad, base_sha256="c" * 64)
    with pytest.raises(small.ArtifactError, match="another adapter"):
        small.verify(bad, adapter_sha256="d" * 64)
    data = (bad / small.WEIGHTS).read_bytes()
    (bad / small.WEIGHTS).write_bytes(data[:-10] + b"\0" * 10)  # same size, other bytes
    with pytest.raises(small.ArtifactError, match="sha256"):
        small.verify(bad)
    (bad / small.WEIGHTS).write_bytes(data[: len(data) // 2])
    with pytest.raises(small.ArtifactError, match="truncated"):
        small.verify(bad)
    (bad / small.WEIGHTS).unlink()
    with pytest.raises(small.ArtifactError, match="missing"):
        small.verify(bad)
    (bad / small.MANIFEST).write_bytes(b"\xff\xfe{")
    with pytest.raises(small.ArtifactError, match="unreadable manifest"):
        small.verify(bad)
    with pytest.raises(small.ArtifactError, match="no small-memory model"):
        small.verify(tmp_path / "nothing")


def test_errors_are_one_line_value_errors(tmp_path):
    with pytest.raises(ValueError) as e:
        small.verify(tmp_path)
    assert "\n" not in str(e.value)


def test_auto_picks_by_memory(monkeypatch, tmp_path):
    monkeypatch.setattr(models.fetch, "is_installed", lambda: True)
    monkeypatch.setattr(small, "target_folder", lambda adapter=True: tmp_path)
    monkeypatch.setattr(memory, "memory_available", lambda: 16 * 2**30)
    assert models.pick_auto("cpu", torch.float32)[0] == models.REAL_LORA
    monkeypatch.setattr(memory, "memory_available", lambda: int(1.5 * 2**30))
    name, why = models.pick_auto("cpu", torch.float32)
    assert name == models.SMALL and "int8" in why and "1.5 GB" in why
    monkeypatch.setattr(models.fetch, "is_installed", lambda: False)
    name, why = models.pick_auto("cpu", torch.float32)
    assert name == models.STAND_IN and "not installed" in why


def test_auto_never_picks_the_hub(monkeypatch):
    monkeypatch.setattr(models, "hub_reachable", lambda *a, **k: True)
    monkeypatch.setattr(models.fetch, "is_installed", lambda: False)
    assert models.pick_auto("cpu", torch.float32)[0] == models.STAND_IN


def test_load_small_refuses_when_memory_is_short(monkeypatch, built):
    out, _ = built
    monkeypatch.setattr(models.fetch, "is_installed", lambda: True)
    monkeypatch.setattr(small, "target_folder", lambda adapter=True: out)
    monkeypatch.setattr(models, "adapter_weights_sha256", lambda *a: None)
    man = json.loads((out / small.MANIFEST).read_text())
    monkeypatch.setattr(small, "verify", lambda *a, **k: dict(man, base={"gguf_sha256": models.fetch.GGUF_SHA256}))
    monkeypatch.setattr(memory, "memory_available", lambda: 100 * 2**20)
    with pytest.raises(small.ArtifactError, match="too little memory"):
        models.load_small()


def test_the_float_model_is_refused_in_one_line_when_memory_is_short(monkeypatch):
    if not models.fetch.is_installed():
        pytest.skip("needs the real offline model (make real-model); make test installs it")
    monkeypatch.setattr(memory, "memory_available", lambda: 300 * 2**20)
    with pytest.raises(small.ArtifactError, match="too little memory for the float32 model") as e:
        models.load(models.REAL_OFFLINE, dtype="float32", quiet=True)
    assert "\n" not in str(e.value) and models.SMALL in str(e.value)
