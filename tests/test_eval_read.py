"""Reading calls back out of each mode's text (toolkit.eval.read): literal values only, never evaluated; the
host's parser for <tool_call> blocks; the list lever's split."""

import json

import pytest

from toolkit.eval import bfcl
from toolkit.eval.read import decode, decode_python, decode_tagged


@pytest.mark.parametrize(
    "text,calls",
    [
        ("[f(a=1, b='x')]", [{"f": {"a": 1, "b": "x"}}]),
        ("```python\n[math.hypot(x=4, y=-5)]\n```", [{"math.hypot": {"x": 4, "y": -5}}]),
        ("f(a=[1, 2], b={'k': (1, 2)})", [{"f": {"a": [1, 2], "b": {"k": (1, 2)}}}]),
        ("[f(a=2*3), g(b=True, c=None)]", [{"f": {"a": 6}}, {"g": {"b": True, "c": None}}]),
        ("[f(a=x)]", [{"f": {"a": "x"}}]),  # a bare name is its text (BFCL's rule)
        ("[]", []),
    ],
)
def test_decode_python(text, calls):
    d = decode_python(text)
    assert d.error is None and d.calls == calls


@pytest.mark.parametrize(
    "text",
    [
        "I cannot help with that.",
        "[f(a=1)",
        "[1, 2]",
        "[f(a=__import__('os').system('touch /tmp/pwned_h6'))]",
        "[f(a=(lambda: 1)())]",
        "[f(a='x' * 10**9)]",
        "[" * 5000,
        "[f(a=1/0)]",
        "[(f)(a=1)()]",
    ],
)
def test_decode_python_refuses_without_running_anything(text, tmp_path):
    d = decode_python(text)
    assert d.error is not None or all(isinstance(c, dict) for c in d.calls)
    import os

    assert not os.path.exists("/tmp/pwned_h6")


@pytest.mark.parametrize(
    "text,prose",
    [
        ("I cannot help with that.", True),
        ("抱歉，我无法回答这个问题。", True),
        ("The function needs a radius (in metres) first.", True),
        ("Sure: calculate_area(radius=5", False),  # a call begun, not finished: malformed, not prose
        ("[1, 2]", False),
        ("f(a=1) and then g(", False),
    ],
)
def test_a_prose_answer_is_no_call_not_malformed(text, prose):
    from toolkit.eval.score import score

    d = decode_python(text)
    assert d.prose is prose and (d.error is None) is prose, d
    case = bfcl.Case(id="simple_python_0", category="simple_python", messages=[], functions=[{"name": "f"}], answers=[])
    assert score(case, d).kind == ("no_call" if prose else "malformed")


def test_decode_tagged_uses_the_host_parser():
    ok = decode_tagged(
        '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
        '<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>'
    )
    assert ok.error is None and ok.calls == [{"f": {"a": 1}}, {"g": {}}]
    bad = decode_tagged('<tool_call>\n{"name": "f", "arguments": {"a": 1}\n</tool_call>')
    assert bad.error and bad.error.startswith("malformed_json")
    fenced = decode_tagged('```json\n{"name": "f", "arguments": {"a": 1}}\n```')
    assert fenced.error is None and fenced.calls == [] and fenced.untagged_json
    assert decode("[f(a=1)]", "prompt").calls == [{"f": {"a": 1}}]
    assert decode("[f(a=1)]", "native").calls == []


def test_list_grammar_holds_every_call_in_one_block_and_the_host_splits_it():
    from toolkit.eval.bfcl import constrained_grammar
    from toolkit.eval.read import decode, split_lists
    from toolkit.eval.score import score
    from toolkit.grammar.mask import replay
    from toolkit.qwen import IM_END_ID
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen2.5")
    case = bfcl.load("parallel")[0]
    a = {"name": "spotify.play", "arguments": {"artist": "Taylor Swift", "duration": 20}}
    b = {"name": "spotify.play", "arguments": {"artist": "Maroon 5", "duration": 15}}

    def ids(text):
        return tok.encode(text, add_special_tokens=False) + [IM_END_ID]

    g = constrained_grammar(case.tools, tok, list_calls=True)
    listed = f"<tool_call>\n{json.dumps([a, b])}\n</tool_call>"
    assert replay(g, ids(listed)) == (True, True)
    assert replay(g, ids(f"<tool_call>\n{json.dumps([a])}\n</tool_call>")) == (True, True)
    assert replay(g, ids(f"<tool_call>\n{json.dumps(a)}\n</tool_call>"))[0] is False  # an object: not this format
    assert replay(g, ids("<tool_call>\n[]\n</tool_call>"))[0] is False  # at least one call
    assert replay(g, ids("No tool fits that.")) == (True, True)  # declining still allowed
    five = f"<tool_call>\n{json.dumps([a] * 5)}\n</tool_call>"
    assert replay(g, ids(five))[0] is False  # at most max_calls (4)

    got = decode(listed, "constrained", list_calls=True)
    assert got.calls == [{"spotify.play": a["arguments"]}, {"spotify.play": b["arguments"]}]
    assert score(case, got).ok  # BFCL's parallel answer, in any order
    assert decode(listed, "constrained").error  # without the lever the kit's parser reads a list as a bad call
    assert split_lists("<tool_call>\n[{broken\n</tool_call>") == "<tool_call>\n[{broken\n</tool_call>"
    assert decode("<tool_call>\n[{broken\n</tool_call>", "constrained", list_calls=True).error  # malformed, counted
    assert decode("<tool_call>\n[1, 2]\n</tool_call>", "constrained", list_calls=True).error  # not calls
    assert split_lists("plain text") == "plain text"
