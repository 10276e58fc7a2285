"""BFCL's prompt style under a grammar (toolkit.eval.prompt_grammar): BFCL's own answers, written in that style,
pass the grammar and the scorer; what the style forbids is refused; the lever runs only in prompt mode."""

import json

import pytest

from toolkit.eval import bfcl


def _py(v):
    """A Python literal as the grammar writes it (double-quoted strings, True/False, ", " separators)."""
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, list):
        return "[" + ", ".join(_py(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_py(x)}" for k, x in v.items()) + "}"
    return repr(v)


def test_python_call_grammar_accepts_bfcl_answers_and_the_scorer_agrees():
    """BFCL's prompt style under a grammar: each possible answer, written as `[f(a=1), g(b="x")]`, is accepted by
    the case's grammar and scored correct; a wrong type, an unknown function and a fence are refused."""
    from toolkit.eval.prompt_grammar import python_calls_grammar
    from toolkit.eval.read import decode_python
    from toolkit.eval.score import score
    from toolkit.grammar.mask import replay
    from toolkit.qwen import IM_END_ID
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen2.5")

    def ids(text):
        return tok.encode(text, add_special_tokens=False) + [IM_END_ID]

    checked = 0
    for case in bfcl.load("simple_python")[:15] + bfcl.load("parallel")[:15]:
        calls = []
        for ans in case.answers:
            ((name, args),) = ans.items()
            kw = {k: next((v for v in vals if v != ""), None) for k, vals in args.items()}
            kw = {k: v for k, v in kw.items() if v is not None}
            if any(isinstance(v, str) and ('"' in v or "\\" in v or "\n" in v) for v in kw.values()):
                break  # the grammar's strings carry no escapes
            calls.append(f"{name}(" + ", ".join(f"{k}={_py(v)}" for k, v in kw.items()) + ")")
        else:
            text = "[" + ", ".join(calls) + "]"
            g = python_calls_grammar(case.tools, tok)
            assert replay(g, ids(text)) == (True, True), (case.id, text)
            assert score(case, decode_python(text)).ok, (case.id, text)
            checked += 1
    assert checked >= 25
    case = bfcl.load("parallel")[0]
    g = python_calls_grammar(case.tools, tok)
    assert replay(g, ids('[spotify.play(artist="Taylor Swift", duration="20")]'))[0] is False  # a string for an int
    assert replay(g, ids('[spotify.pause(artist="Taylor Swift")]'))[0] is False  # not one of the tools
    assert replay(g, ids('```python\n[spotify.play(artist="A")]\n```'))[0] is False  # no fence
    assert replay(g, ids("None of the functions can do that.")) == (True, True)  # declining allowed


def test_python_calls_lever_only_in_prompt_mode():
    from toolkit.eval.levers import Levers

    with pytest.raises(ValueError, match="prompt"):  # before any case or model is touched
        Levers(mode="constrained", python_calls=True)
