import pytest
import torch

from toolkit import models, paths
from toolkit.models import Loaded, load, stand_in
from toolkit.paths import hub_reachable
from toolkit.qwen import ADDED_TOKENS, VOCAB_WIDTH
from toolkit.tokenizer import qwen_tokenizer


def test_official_added_token_ids_and_flags(qwen3_tok, qwen25_tok):
    for tok, flavor in ((qwen3_tok, "qwen3"), (qwen25_tok, "qwen2.5")):
        dec = tok.added_tokens_decoder
        for tid, text, special in ADDED_TOKENS[flavor]:
            assert dec[tid].content == text
            assert dec[tid].special is special, text
    assert qwen3_tok.convert_tokens_to_ids("<tool_call>") == 151657
    assert qwen3_tok.added_tokens_decoder[151657].special is False
    assert qwen3_tok.convert_tokens_to_ids("<|im_end|>") == 151645
    assert qwen3_tok.added_tokens_decoder[151645].special is True
    assert qwen3_tok.eos_token == "<|im_end|>"


def test_tool_response_is_one_token_in_qwen3_four_in_qwen25(qwen3_tok, qwen25_tok):
    assert qwen3_tok.encode("<tool_response>", add_special_tokens=False) == [151665]
    pieces = qwen25_tok.encode("<tool_response>", add_special_tokens=False)
    assert len(pieces) == 4 and all(i < 151643 for i in pieces)


def test_bpe_matches_known_qwen_ids(qwen3_tok):
    # Ids of the byte-level BPE shared by Qwen2/2.5/3 (facts from the official tokenizer).
    assert qwen3_tok.encode("你好", add_special_tokens=False) == [108386]
    assert qwen3_tok.encode("\n", add_special_tokens=False) == [198]
    # Qwen splits digits one by one.
    assert len(qwen3_tok.encode("12345", add_special_tokens=False)) == 5
    text = "def f(x):\n    return x**2  # 平方 🙂"
    assert qwen3_tok.decode(qwen3_tok.encode(text, add_special_tokens=False)) == text


def test_skip_special_tokens_keeps_tool_call_text(qwen3_tok):
    ids = qwen3_tok.encode('<tool_call>\n{"a": 1}\n</tool_call><|im_end|>', add_special_tokens=False)
    assert ids[0] == 151657
    out = qwen3_tok.decode(ids, skip_special_tokens=True)
    assert out.startswith("<tool_call>") and "<|im_end|>" not in out


def test_tokenizer_is_cached_outside_repo(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path))
    tok = qwen_tokenizer("qwen2.5")
    assert (tmp_path / "tokenizers" / "qwen2.5" / "tokenizer.json").exists()
    again = qwen_tokenizer("qwen2.5")
    assert again.encode("hello world") == tok.encode("hello world")
    with pytest.raises(ValueError, match="unknown tokenizer flavor"):
        qwen_tokenizer("llama")


def test_stand_in_is_fast_qwen_shaped_and_labelled():
    m = stand_in()  # how fast (target < 1 s after the first build) is measured by benchmarks/latency.py
    assert models.vocab_width(m) == VOCAB_WIDTH
    assert m.config.model_type == "qwen3"
    out = load("stand-in", quiet=True)
    assert out.semantic is False and "STAND-IN" in out.description and "qwen3" in out.description
    with torch.no_grad():
        logits = out.model(torch.tensor([[151644, 872, 198]])).logits
    assert logits.shape[-1] == VOCAB_WIDTH
    # Seeded: two builds are identical.
    a, b = stand_in(seed=3), stand_in(seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_offline_detection_does_not_hang(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*a, **k):
        raise AssertionError("HF_HUB_OFFLINE=1 must answer without opening a connection")

    monkeypatch.setattr(paths.socket, "create_connection", no_network)
    assert hub_reachable() is False  # how fast (target < 0.1 s) is measured by benchmarks/latency.py
    with pytest.raises(ConnectionError, match="cannot reach the hub"):
        load("Qwen/Qwen3-0.6B", quiet=True)


def test_unreachable_hub_times_out_quickly(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def refuse(*a, **k):
        raise OSError("no route")

    monkeypatch.setattr(paths.socket, "create_connection", refuse)
    assert hub_reachable(timeout=0.5) is False


def test_auto_falls_back_and_says_so(monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from toolkit import fetch

    monkeypatch.setattr(fetch, "is_installed", lambda: False)
    out = load("auto", quiet=True)  # quiet or not, the stand-in is announced
    assert out.kind == "stand-in" and out.notes and "not installed" in out.notes[0]
    err = capsys.readouterr().err
    assert "NO REAL MODEL INSTALLED" in err and "RANDOM-WEIGHT STAND-IN" in err and "make real-model" in err


def test_local_folder_round_trip(tmp_path):
    m = stand_in(flavor="qwen2.5")
    m.save_pretrained(tmp_path)
    qwen_tokenizer("qwen2.5").save_pretrained(tmp_path)
    out = load(str(tmp_path), quiet=True, dtype="float32")
    assert out.kind == "local" and out.device in ("cpu", "cuda")
    assert out.tokenizer.convert_tokens_to_ids("<tool_call>") == 151657


def test_toolkit_model_variable_overrides_auto(monkeypatch, capsys):
    monkeypatch.setenv("TOOLKIT_MODEL", "stand-in")
    out = load("auto")
    assert out.kind == "stand-in" and "TOOLKIT_MODEL=stand-in" in out.notes
    assert "TOOLKIT_MODEL is set" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name,dtype,semantic,want",
    [
        (
            "Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M → bf16, offline) + LoRA adapter qwen2.5-coder-0.5b-toolcall "
            "(merged, weights 07ad3f3e)",
            "int8 weights (per row), bf16 activations",
            True,
            "Qwen2.5-Coder-0.5B-Instruct + LoRA, int8",
        ),
        (
            "Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M → bf16, offline) + LoRA adapter x (r=8, 300 steps, data 1, "
            "weights 2) + RL adapter rl/adapter (r=8, weights 3)",
            "float32",
            True,
            "Qwen2.5-Coder-0.5B-Instruct + LoRA + RL, float32",
        ),
        ("stand-in qwen2.5", "torch.float32", False, "stand-in qwen2.5, float32, RANDOM-WEIGHT STAND-IN"),
    ],
)
def test_label_is_short_and_still_names_model_adapters_and_precision(name, dtype, semantic, want):
    loaded = Loaded(None, None, name, "real-offline", "cpu", dtype, semantic=semantic)
    assert loaded.label == want
    assert len(loaded.label) < 60 or not semantic
