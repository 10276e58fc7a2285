"""The tool grammars against the decoding budget, on the real Qwen tokenizer (no model): a call the grammar
allows always finishes within ``max_new_tokens`` once the strings are bounded from the budget
(toolkit/grammar/budget.py), measured by the slowest decoder (``toolkit.grammar.mask.longest_call``)."""

import pytest

from toolkit.grammar.budget import fit, worst_call_tokens
from toolkit.grammar.compile import SchemaError, bounded, compile_schema, compile_tool_choice
from toolkit.grammar.mask import longest_call, replay
from toolkit.settings import MODEL_MAX_NEW_TOKENS as LOOP_BUDGET  # the loop's default max_new_tokens on a model
from toolkit.tools import TOOLS, schemas


def test_the_calculators_declared_bound_cannot_finish_in_the_loops_budget(qwen3_tok):
    # the reported failure: 200 characters, one token per digit, and the call's own text on top
    g = compile_tool_choice(schemas(["calculator"]), qwen3_tok, "required")
    assert longest_call(g, qwen3_tok, LOOP_BUDGET) is None
    assert worst_call_tokens(schemas(["calculator"])[0]) > LOOP_BUDGET


@pytest.mark.parametrize(
    "name,budget",
    [("calculator", LOOP_BUDGET), ("calculator", 96), ("get_weather", LOOP_BUDGET), ("write_note", LOOP_BUDGET)],
)
def test_a_call_bounded_from_the_budget_always_finishes_within_it(qwen3_tok, name, budget):
    tool = fit(schemas([name])[0], budget)
    bound = worst_call_tokens(tool)
    assert bound is not None and bound <= budget
    # through compile_tool_choice's own budget argument, as the loop's "auto" turn would compile it
    g = compile_tool_choice(schemas([name]), qwen3_tok, "auto", max_new_tokens=budget)
    walked = longest_call(g, qwen3_tok, budget)
    assert walked is not None and walked <= bound, (walked, bound)
    print(f"{name} at {budget} tokens: bound {bound}, slowest decoder {walked}")


def test_fitting_keeps_what_already_fits_and_never_loosens(qwen3_tok):
    weather = schemas(["get_weather"])[0]
    roomy = fit(weather, 4096)
    assert roomy == weather  # 40 characters already fit
    tight = fit(schemas(["calculator"])[0], LOOP_BUDGET)["function"]["parameters"]["properties"]["expression"]
    assert 10 <= tight["maxLength"] < TOOLS["calculator"].parameters["properties"]["expression"]["maxLength"]
    least = worst_call_tokens(bounded(schemas(["calculator"])[0], 1))  # its own text and one character
    with pytest.raises(SchemaError, match=f"leaves no room.*at least {least}$"):  # the stand-in's 48
        compile_tool_choice(schemas(["calculator"]), qwen3_tok, "auto", max_new_tokens=48)


def test_water_filling_keeps_a_short_string_beside_a_long_one():
    note = fit(schemas(["write_note"])[0], LOOP_BUDGET)["function"]["parameters"]["properties"]
    assert abs(note["title"]["maxLength"] - note["text"]["maxLength"]) <= 1  # neither starves (was 1 beside 23)
    short = fit(schemas(["write_note"])[0], 1000)["function"]["parameters"]["properties"]
    assert short["title"]["maxLength"] == 64 and short["text"]["maxLength"] > 64  # the title keeps its own bound


def test_the_bounds_assumption_a_length_bounded_string_has_no_escapes(qwen3_tok):
    bounded = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}, "required": ["a"]}
    free = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    escaped = qwen3_tok.encode('{"a": "\\u0041"}')
    assert replay(compile_schema(bounded, qwen3_tok), escaped)[0] is False  # so 4 bytes per character bound it
    assert replay(compile_schema(free, qwen3_tok), escaped)[0] is True
    assert replay(compile_schema(bounded, qwen3_tok), qwen3_tok.encode('{"a": "😀😀😀😀😀"}'))[0] is True


def test_a_number_has_no_length_bound():
    assert worst_call_tokens(schemas(["convert_units"])[0]) is None  # JSON numbers: digits without limit


def test_a_patterned_string_is_bounded_in_its_pattern_because_xgrammar_ignores_maxlength_there(qwen3_tok):
    def tool(prop):
        return {"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string", **prop}}, "required": ["a"]}}}  # fmt: skip

    with_both = tool({"pattern": "^[a-z]*$", "maxLength": 3})["function"]["parameters"]
    assert replay(compile_schema(with_both, qwen3_tok), qwen3_tok.encode('{"a": "abcdefgh"}'))[0] is True
    assert worst_call_tokens(tool({"pattern": "^[a-z]*$", "maxLength": 3})) is None  # so maxLength does not count
    assert worst_call_tokens(tool({"pattern": "^(ab)*$"})) is None  # nor can another pattern be bounded
    fitted = fit(tool({"pattern": "^[a-z]{0,500}$"}), 60)
    prop = fitted["function"]["parameters"]["properties"]["a"]
    assert prop["pattern"].startswith("^[a-z]{0,") and worst_call_tokens(fitted) <= 60
    g = compile_tool_choice([tool({"pattern": "^[a-z]*$"})], qwen3_tok, "auto", max_new_tokens=60)
    walked = longest_call(g, qwen3_tok, 60)
    assert walked is not None and walked <= 60, walked
