"""The one first-token gate: the host loop's own-token rule and BFCL's mass threshold are two settings of one class."""

import pytest
import torch

from toolkit.eval.bfcl import STRUCTURED_STARTS, IntentGate
from toolkit.loop.gate import CALL_OPENERS, FirstTokenGate, starting_ids
from toolkit.qwen import TOOL_CALL_ID
from toolkit.tokenizer import qwen_tokenizer


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2.5")


def _id(tok, text):
    return tok.encode(text, add_special_tokens=False)[0]


def test_own_token_rule_counts_every_spelling_of_a_call(tok):
    gate = FirstTokenGate(tok)  # the loop's setting
    assert gate.starts == CALL_OPENERS
    assert gate.opens(TOOL_CALL_ID) and gate.opens(_id(tok, "```")) and gate.opens(_id(tok, "{"))
    assert gate.opens(_id(tok, " {"))  # leading space stripped
    assert not gate.opens(_id(tok, "The")) and not gate.opens(_id(tok, "["))  # "[" opens only BFCL's starts
    assert FirstTokenGate(tok, STRUCTURED_STARTS).opens(_id(tok, "["))


def test_bfcl_gate_is_the_same_gate_with_a_threshold(tok):
    gate = IntentGate(tok)
    assert isinstance(gate, FirstTokenGate) and gate.threshold == 0.85 and gate.starts == STRUCTURED_STARTS
    ids = set(gate.ids.tolist())
    assert ids == set(starting_ids(tok, STRUCTURED_STARTS)) | {TOOL_CALL_ID}
    assert all(gate.opens(i) for i in list(ids)[:200])  # mass rule and own-token rule count the same tokens


def test_token_setting_applies_the_own_token_rule_as_a_processor(tok):
    fence, word = _id(tok, "```"), _id(tok, "To")
    scores = torch.full((2, 151936), -30.0)
    scores[0, fence], scores[0, word] = 3.0, 2.9  # greedy token opens a call, though its mass is only ~0.5
    scores[1, fence], scores[1, word] = 2.9, 3.0
    out = FirstTokenGate(tok, STRUCTURED_STARTS, threshold="token")(None, scores)
    assert int(out[0].argmax()) == TOOL_CALL_ID and torch.isinf(out[0, word])
    assert torch.isinf(out[1, TOOL_CALL_ID]) and int(out[1].argmax()) == word
    by_mass = IntentGate(tok)  # 0.85: row 0's ~0.5 is not enough for the mass rule
    out = by_mass(None, scores)
    assert by_mass.masses[0] < 0.85 and torch.isinf(out[0, TOOL_CALL_ID])


def test_added_tokens_never_open_a_call(tok):
    """`<|im_end|>`, `<|endoftext|>`, `</tool_call>` … start with "<" but a turn that ends at once is no call: neither
    rule counts them (they once did: the mass rule added p(<|im_end|>) to the call mass, the own-token rule took an
    empty answer for a call)."""
    added = tok.get_added_vocab()
    specials = [added[t] for t in ("<|im_end|>", "<|endoftext|>", "</tool_call>", "<|im_start|>")]
    for starts in (CALL_OPENERS, STRUCTURED_STARTS):
        gate = FirstTokenGate(tok, starts)
        assert not any(gate.opens(i) for i in specials)
        assert not set(specials) & set(gate.ids.tolist())
        assert set(gate.ids.tolist()) & set(added.values()) == {TOOL_CALL_ID}
    assert FirstTokenGate(tok).opens(_id(tok, "<"))  # an ordinary "<" still opens a call spelled from pieces
    scores = torch.full((1, 151936), -30.0)
    scores[0, added["<|im_end|>"]] = 5.0  # all the mass on ending the turn
    gate = IntentGate(tok)
    out = gate(None, scores)
    assert gate.masses[0] < 0.01 and torch.isinf(out[0, TOOL_CALL_ID])
