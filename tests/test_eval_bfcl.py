"""BFCL loading, BFCL-doc → JSON Schema conversion, the three modes' prompts and grammars, the gate, the benchmark CLI."""

import jsonschema
import pytest

from toolkit.eval import bfcl
from toolkit.eval.bfcl import to_schema
from toolkit.eval.choices import HINTS
from toolkit.eval.read import decode


def test_categories_load_with_their_answers():
    sizes = {c: len(bfcl.load(c)) for c in bfcl.CATEGORIES}
    assert sizes == {
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "irrelevance": 240,
    }
    assert all(c.answers for c in bfcl.load("parallel"))
    assert all(c.answers is None for c in bfcl.load("irrelevance"))
    with pytest.raises(ValueError, match="unknown BFCL category"):
        bfcl.load("simple_cobol")


def test_subset_is_seeded_and_nested():
    a = bfcl.subset(["multiple"], 10, seed=3)
    b = bfcl.subset(["multiple"], 20, seed=3)
    assert [c.id for c in a] == [c.id for c in bfcl.subset(["multiple"], 10, seed=3)]
    assert {c.id for c in a} <= {c.id for c in b} and len(b) == 20
    assert {c.id for c in a} != {c.id for c in bfcl.subset(["multiple"], 10, seed=4)}


def _types(s, out):
    if isinstance(s, dict):
        if "type" in s:
            out.add(s["type"])
        for v in s.get("properties", {}).values():
            _types(v, out)
        _types(s.get("items"), out)
    return out


def _keys(s) -> set:
    """Every key of every dict in ``s`` (JSON Schema keywords and property names alike)."""
    if isinstance(s, dict):
        return set(s) | set().union(*(_keys(v) for v in s.values()))
    if isinstance(s, list):
        return set().union(*(_keys(v) for v in s))
    return set()


def test_every_function_doc_converts_to_valid_json_schema():
    seen_bfcl, seen_json = set(), set()
    for cat in bfcl.CATEGORIES:
        for c in bfcl.load(cat):
            for f in c.functions:
                _types(f["parameters"], seen_bfcl)
                tool = to_schema(f)
                params = tool["function"]["parameters"]
                jsonschema.Draft202012Validator.check_schema(params)
                _types(params, seen_json)
                assert "optional" not in _keys(params), (c.id, f["name"])  # BFCL's own flag is dropped
    assert {"dict", "float", "tuple", "any"} <= seen_bfcl
    assert seen_json <= {"object", "number", "integer", "string", "boolean", "array"}


def test_conversion_maps_bfcl_types():
    doc = {
        "name": "f",
        "description": "d",
        "parameters": {
            "type": "dict",
            "properties": {
                "a": {"type": "float"},
                "b": {"type": "tuple", "items": {"type": "float"}},
                "c": {"type": "any"},
                "d": {"type": "dict", "properties": {"x": {"type": "integer", "required": True}}, "optional": True},
            },
            "required": ["a"],
        },
    }
    p = to_schema(doc)["function"]["parameters"]
    assert p["type"] == "object" and p["required"] == ["a"]
    assert p["properties"]["a"] == {"type": "number"}
    assert p["properties"]["b"] == {"type": "array", "items": {"type": "number"}}
    assert p["properties"]["c"] == {"type": "string"}
    assert p["properties"]["d"] == {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert doc["parameters"]["type"] == "dict"  # the case itself is untouched


def test_prompt_mode_puts_bfcl_text_and_docs_in_the_system_prompt():
    c = bfcl.load("multiple")[0]
    msgs, tools = bfcl.messages_for(c, "prompt")
    assert tools is None and msgs[0]["role"] == "system" and msgs[1:] == c.messages
    for f in c.functions:
        assert f["name"] in msgs[0]["content"]
    assert "func_name1(params_name1=params_value1" in msgs[0]["content"]  # BFCL's python call format
    msgs, tools = bfcl.messages_for(c, "native")
    assert msgs == c.messages and [t["function"]["name"] for t in tools] == [f["name"] for f in c.functions]
    with pytest.raises(ValueError):
        bfcl.messages_for(c, "telepathy")


def test_intent_gate_forces_a_call_or_text_by_the_structured_mass():
    import torch

    from toolkit.eval.bfcl import IntentGate, _structured_ids
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen2.5")
    fence = tok.convert_tokens_to_ids(tok.tokenize("```")[0])
    word = tok.encode("To", add_special_tokens=False)[0]
    assert fence in _structured_ids(tok) and word not in _structured_ids(tok)
    scores = torch.full((2, 151936), -30.0)
    scores[0, fence], scores[0, word] = 5.0, 2.0  # row 0: mostly wants a fence → call
    scores[1, fence], scores[1, word] = 2.0, 5.0  # row 1: mostly prose → text
    gate = IntentGate(tok, threshold=0.85)
    out = gate(None, scores)
    assert gate.masses[0] > 0.85 > gate.masses[1]
    assert int(out[0].argmax()) == 151657 and torch.isinf(out[0, word])
    assert torch.isinf(out[1, 151657]) and int(out[1].argmax()) == word  # the grammar bans the fence too
    assert gate(None, scores) is scores  # later steps untouched
    moved = IntentGate(tok, threshold=None)(None, scores)
    assert moved[0, 151657] >= moved[0, fence] > moved[0, word]  # the grammar then bans the fence: a call
    assert moved[1, word] > moved[1, 151657]


def test_irrelevance_counts_a_broken_call_block_as_an_attempt():
    from toolkit.eval.score import score

    case = bfcl.load("irrelevance")[0]
    cut = decode('<tool_call>\n{"name": "determine_body_mass_index", "arguments": {"weight"', "constrained")
    assert cut.error and cut.attempted
    s = score(case, cut)
    assert not s.ok and s.kind == "call_when_none"
    assert score(case, decode("I cannot do that [", "prompt")).ok  # prompt mode: BFCL's rule


def test_system_hint_is_added_only_where_asked():
    case = bfcl.load("parallel")[0]
    hint = HINTS["one-block-per-call"]
    plain, _ = bfcl.messages_for(case, "constrained")
    hinted, tools = bfcl.messages_for(case, "constrained", system_hint=hint)
    assert plain == [dict(m) for m in case.messages]  # no lever: the case's messages as they were
    assert hinted[0]["role"] == "system" and hinted[0]["content"].endswith(hint)
    assert hinted[0]["content"].startswith(bfcl.default_system()) and bfcl.default_system().startswith("You are Qwen")
    assert hinted[1:] == plain and tools == case.tools
    prompt, _ = bfcl.messages_for(case, "prompt", system_hint=hint)
    assert hint not in prompt[0]["content"]  # the prompt mode is BFCL's text, untouched
    with_system = bfcl.Case("x", "parallel", [{"role": "system", "content": "Be brief."}, *case.messages], [], None)
    m, _ = bfcl.messages_for(with_system, "native", system_hint=hint)
    assert m[0]["content"] == "Be brief.\n\n" + hint and len(m) == len(with_system.messages)
    assert all("parallel" not in h.lower() for h in HINTS.values())  # no category knowledge in a lever


def test_newline_after_grammar_puts_the_end_decision_after_each_call():
    from toolkit.eval.bfcl import constrained_grammar
    from toolkit.grammar.mask import replay
    from toolkit.qwen import IM_END_ID
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen2.5")
    tools = bfcl.load("simple_python")[0].tools
    one = '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>'

    def ids(text):
        return tok.encode(text, add_special_tokens=False) + [IM_END_ID]

    old, new = constrained_grammar(tools, tok), constrained_grammar(tools, tok, more_calls=True)
    assert replay(old, ids(one)) == (True, True) and replay(old, ids(one + "\n")) == (True, True)
    assert replay(new, ids(one))[0] is False  # the end decision comes only after the newline
    assert replay(new, ids(one + "\n")) == (True, True) and replay(new, ids(one + "\n" + one + "\n")) == (True, True)
    assert replay(new, ids("The tools cannot answer that.")) == (True, True)  # declining still allowed


def test_more_calls_gate_pools_call_openers_at_the_end_decision_only():
    import torch

    from toolkit.eval.levers import MoreCallsGate
    from toolkit.qwen import ENDOFTEXT_ID, IM_END_ID, TOOL_CALL_END_ID, TOOL_CALL_ID
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen2.5")
    nl = tok.encode("\n", add_special_tokens=False)[0]
    fence = tok.convert_tokens_to_ids(tok.tokenize("```")[0])
    gate = MoreCallsGate(tok)
    ids = torch.tensor([[5, TOOL_CALL_END_ID, nl], [5, 6, nl]])  # row 0 at a decision, row 1 not
    scores = torch.full((2, 151936), -30.0)
    scores[:, ENDOFTEXT_ID], scores[:, fence], scores[:, TOOL_CALL_ID], scores[:, IM_END_ID] = 3.0, 2.0, 1.5, 2.5
    out = gate(ids, scores)
    pooled = float(torch.logsumexp(torch.tensor([2.0, 1.5]), 0))
    assert float(out[0, TOOL_CALL_ID]) == pytest.approx(pooled, abs=0.05)  # the end tokens are not in the pool
    assert float(out[0, ENDOFTEXT_ID]) == 3.0 and torch.equal(out[1], scores[1])
    p_more, p_stop = gate.decisions[0]
    assert len(gate.decisions) == 1 and p_stop > p_more > 0.2
    assert gate(ids[:, :1], scores) is scores


def _bench():
    from pathlib import Path

    from toolkit.paths import script_module

    return script_module(Path(__file__).parents[1] / "benchmarks" / "bfcl.py", "bench_bfcl")


def test_benchmark_default_categories_per_subcommand():
    # a subparser's set_defaults once leaked into every subcommand (shared parent actions): a full accuracy run
    # then silently skipped 'multiple'
    bench = _bench()
    for cmd in ("accuracy", "passk", "descriptions", "report", "chains", "gate"):
        assert bench.parse([cmd]).categories == list(bfcl.CATEGORIES), cmd
    assert bench.parse(["levers"]).categories == list(bench.LEVER_CATEGORIES)
    assert bench.parse(["accuracy"]).categories == list(bfcl.CATEGORIES)  # after levers was parsed too
    assert bench.parse(["accuracy", "--categories", "multiple"]).categories == ["multiple"]
    with pytest.raises(SystemExit) as e:  # before any model loads: a usage error, not a traceback
        bench.parse(["accuracy", "--categories", "nonsense"])
    assert e.value.code == 2
    for bad in (
        ["gate", "--limit", "-5"],
        ["levers", "--limit", "0"],
        ["passk", "--samples", "x"],
        ["chains", "--first", "-1"],
    ):
        with pytest.raises(SystemExit) as e:  # a count below 1 once ran silently (a negative slice, an empty table)
            bench.parse(bad)
        assert e.value.code == 2, bad
    assert bench.parse(["levers", "--limit", "3"]).limit == 3 and bench.parse(["chains", "--first", "0"]).first == 0


def test_gate_curve_counts_the_cases_at_or_above_each_threshold():
    from toolkit.eval.report import gate_table

    bench = _bench()
    masses = {"parallel": {"a": 0.95, "b": 0.7, "c": 0.2, "d": 0.85}, "irrelevance": {"x": 0.1, "y": 0.86}}
    curve = bench.gate_curve(masses)
    at = curve["thresholds"].index
    assert curve["share"]["parallel"][at(0.85)] == 0.5  # 0.95 and 0.85 (at the threshold the gate opens)
    assert curve["share"]["parallel"][at(0.7)] == 0.75 and curve["share"]["irrelevance"][at(0.7)] == 0.5
    assert curve["share"]["irrelevance"][at(0.9)] == 0.0
    table = gate_table(curve)
    assert "| 0.85 | 50.0 | 50.0 |" in table and "| 0.5 | 75.0 | 50.0 |" in table


def test_gate_lever_is_a_threshold_of_the_same_gate():
    """The "list + gate 0.7" lever: the same first-step scores open a call at 0.7 and decline at the default 0.85."""
    import torch

    from toolkit.eval.bfcl import IntentGate
    from toolkit.qwen import TOOL_CALL_ID
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen2.5")
    bench = _bench()
    assert bench.PROMPT_LEVERS["list + gate 0.7"] == {"list_calls": True, "gate_threshold": 0.7}
    assert bench.LEVER_MAX_NEW["parallel"] >= 4 * 48  # room for four compact calls
    fence, word = tok.encode("```", add_special_tokens=False)[0], tok.encode("The", add_special_tokens=False)[0]
    scores = torch.full((1, 151936), -30.0)
    scores[0, fence], scores[0, word] = 1.0, 0.0  # ~0.73 on opening structured output
    assert int(IntentGate(tok, 0.7)(None, scores.clone())[0].argmax()) == TOOL_CALL_ID
    assert torch.isinf(IntentGate(tok, 0.85)(None, scores.clone())[0, TOOL_CALL_ID])


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", "\udcff"])
def test_an_unreadable_results_file_is_one_line_and_left_as_it_was(tmp_path, capsys, content):
    from toolkit.eval import report

    path = tmp_path / "bfcl_qwen2.5-coder-0.5b.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    before = path.read_bytes()
    with pytest.raises(report.ResultsUnreadable):
        report.load_results(path)
    with pytest.raises(report.ResultsUnreadable):
        report.save_results(path, "accuracy", {}, {})
    assert _bench().main(["rescore", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a" in err[0] and "Traceback" not in err[0]
    assert path.read_bytes() == before


def test_benchmark_says_in_one_line_that_a_cache_folder_holds_another_models_outputs(tmp_path, monkeypatch, capsys):
    import json

    from toolkit.eval.run import Cache

    bench = _bench()
    folder = Cache(tmp_path, "model a").dir
    (folder / "settings.json").write_text(json.dumps({"model": "model b"}))

    def accuracy(a):  # what cmd_accuracy does first for each category: open the model's cache
        Cache(tmp_path, "model a")
        return 0

    monkeypatch.setattr(bench, "_dispatch", accuracy)
    assert bench.main(["accuracy", "--limit", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds outputs of another model (model b)" in err[0] and "Traceback" not in err[0]
    assert json.loads((folder / "settings.json").read_text()) == {"model": "model b"}  # nothing overwritten
