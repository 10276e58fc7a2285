"""The grammar, weight-file and prompt-mask entries of the ledger: each verdict follows its evidence."""

import json

import pytest

from toolkit.book import claims_grammar, claims_kit, claims_weights
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS
from toolkit.tokenizer import tokenizer_for


@pytest.fixture(scope="module")
def grammar():
    return {c.id: c for c in claims_grammar.grammar_claims()}


def test_enum_and_ranges_are_enforced_by_xgrammar(grammar, monkeypatch):
    c = grammar["enum-range-grammar"]
    assert c.verdict in (HOLDS, CAVEAT), c
    assert "unit kelvin True" in c.evidence and "days 8 True" in c.evidence and "percent 100.5 True" in c.evidence
    real_compile = claims_grammar.compile_schema

    def unconstrained(schema, *a, **k):  # the same fields without enum / minimum / maximum
        plain = {n: {"type": p["type"]} for n, p in schema["properties"].items()}
        return real_compile({**schema, "properties": plain}, *a, **k)

    monkeypatch.setattr(claims_grammar, "compile_schema", unconstrained)
    broken = {x.id: x for x in claims_grammar.grammar_claims()}["enum-range-grammar"]
    assert broken.verdict == FAILS and "unit kelvin False" in broken.evidence


def test_a_grammar_carries_no_permission(grammar, monkeypatch):
    c = grammar["grammar-not-authorisation"]
    assert c.verdict == HOLDS and "needs_confirmation=True" in c.evidence and "accepted True" in c.evidence
    monkeypatch.setattr(claims_grammar, "accepts", lambda *a: False)  # a grammar that refused unapproved calls
    assert {x.id: x for x in claims_grammar.grammar_claims()}["grammar-not-authorisation"].verdict == FAILS


def test_unknown_field_is_refused_only_in_strict_mode(monkeypatch):
    tok = tokenizer_for("qwen3")
    assert claims_grammar.strict_unknown_field(tok) == dict(strict=False, loose=True, schema_forbids=False)
    from toolkit.tools import schemas as real_schemas

    def closed(names):  # the same tool with additionalProperties: false in its schema
        s = real_schemas(names)
        s[0]["function"]["parameters"]["additionalProperties"] = False
        return s

    monkeypatch.setattr(claims_grammar, "schemas", closed)
    assert claims_grammar.strict_unknown_field(tok) == dict(strict=False, loose=False, schema_forbids=True)


def test_prompt_mask_claim_follows_the_labels():
    parts = {"system": [11, 0], "tools": [300, 0], "user": [9, 0], "tool_response": [12, 0], "control": [23, 2]}
    c = claims_kit.prompt_mask_claim(parts)
    assert c.verdict == CAVEAT and "-100" in c.evidence and "True" in c.evidence and "<|im_end|>" in c.why
    assert claims_kit.prompt_mask_claim({**parts, "tool_response": [6, 6]}).verdict == FAILS
    assert claims_kit.prompt_mask_claim({**parts, "control": [25, 0]}).verdict == HOLDS


def _tiny_model(folder, extra=False):
    """A 2-layer Qwen2 of width 8 over a 16-token vocabulary, saved as safetensors (+ an extra call head)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = Qwen2Config(
        vocab_size=16, hidden_size=8, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=False, architectures=["Qwen2ForCausalLM"],
    )  # fmt: skip
    cfg.save_pretrained(folder)
    state = {k: v.contiguous() for k, v in AutoModelForCausalLM.from_config(cfg).state_dict().items()}
    if extra:
        state["tool_call_head.weight"] = torch.zeros(16, 8)
    save_file(state, str(folder / "model.safetensors"))
    return dict(folder="qwen2.5-tiny", added={"<tool_call>": (5, False), "</tool_call>": (6, False)})


@pytest.mark.parametrize("extra", [False, True])
def test_weight_claims_read_the_weight_file(tmp_path, monkeypatch, extra):
    real = _tiny_model(tmp_path, extra)
    assert json.loads((tmp_path / "config.json").read_text())["vocab_size"] == 16
    by = {c.id: c for c in claims_weights.weight_claims(real_folder=tmp_path, real_files=real)}
    if extra:  # a model with a separate output for calls: both statements fail
        assert by["same-logits"].verdict == FAILS and by["no-structure-change"].verdict == FAILS
        assert "tool_call_head.weight" in by["no-structure-change"].evidence
    else:
        assert by["same-logits"].verdict == CAVEAT and "['lm_head.weight']" in by["same-logits"].evidence
        assert (
            by["no-structure-change"].verdict == CAVEAT and "meta device): True" in by["no-structure-change"].evidence
        )


def test_weight_claims_without_the_model(monkeypatch):
    from toolkit.book import evidence

    monkeypatch.setattr(evidence, "installed_folder", lambda: None)  # the loaders of the real model's files
    assert all(c.evidence == "not checked" for c in claims_weights.weight_claims())
