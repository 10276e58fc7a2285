"""The tool grammars against the decoding budget, on the real Qwen tokenizer (no model): a call the grammar
allows always finishes within ``max_new_tokens`` once the strings are bounded from the budget
(toolkit/grammar/budget.py), measured by the slowest decoder (``toolkit.grammar.mask.longest_call``)."""

import pytest

from toolkit.backends.base import Generation
from toolkit.grammar.budget import fit, worst_call_tokens
from toolkit.grammar.compile import SchemaError, bounded, compile_schema, compile_tool_choice
from toolkit.grammar.mask import longest_call, replay, slowest_next, token_sizes
from toolkit.loop.loop import run
from toolkit.qwen import IM_END_ID, TOOL_CALL_END_ID, TOOL_CALL_ID
from toolkit.settings import MODEL_MAX_NEW_TOKENS as LOOP_BUDGET  # the loop's default max_new_tokens on a model
from toolkit.settings import LoopConfig
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


class SlowestDecoder:
    """A backend that decodes every call the way the slowest decoder would (one byte a token where the grammar lets
    it, never closing a string early), writes ``calls`` calls, then stops: the worst a model can do to the budget."""

    name = "slowest decoder (test)"

    def __init__(self, tokenizer, calls: int):
        self.tokenizer, self.calls, self.budgets = tokenizer, calls, []

    def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, top_p=1.0, seed=0):
        self.budgets.append(max_new_tokens)
        assert mask is not None, "the test drives call turns only"
        sizes = token_sizes(self.tokenizer, mask.vocab_width)
        bm, out, last, done = mask.allocate(), [], None, 0
        while len(out) < max_new_tokens:
            mask.fill(bm)
            allowed = mask.allowed(bm)
            if last in (None, TOOL_CALL_END_ID):  # between calls: open another, or end the turn
                choice = TOOL_CALL_ID if done < self.calls and allowed[TOOL_CALL_ID] else IM_END_ID
            else:
                choice = slowest_next(allowed, sizes, last)
            assert allowed[choice], choice
            out.append(choice)
            if choice == IM_END_ID:
                return Generation(out, 0, len(prompt_ids), 0.0, 0.0, "stop")
            mask.accept(choice)
            done += choice == TOOL_CALL_END_ID
            last = choice
        return Generation(out, 0, len(prompt_ids), 0.0, 0.0, "length")


@pytest.mark.parametrize("names", [["calculator"], ["get_weather", "convert_units"], ["write_note", "calculator"]])
def test_the_loop_gives_every_call_it_may_run_room_to_finish(qwen25_tok, names):
    """#28: three calculator calls in one turn were cut off at the loop's 160 new tokens. A call turn now gets room
    for max_calls of the longest call its grammar allows; the slowest decoder writes them all, none is cut."""
    from toolkit.tools import TOOLS

    tools = {n: TOOLS[n] for n in names}
    cfg = LoopConfig().but("test", max_new_tokens=LOOP_BUDGET, max_calls=3, tool_choice="required", max_turns=1)
    backend = SlowestDecoder(qwen25_tok, calls=3)
    trace = run(backend, qwen25_tok, [{"role": "user", "content": "go"}], tools, config=cfg, confirm=lambda c: False)
    (parsed,) = [s for s in trace.steps if type(s).__name__ == "Parsed"]
    assert len(parsed.calls) == 3 and all(c.ok for c in parsed.calls), [c.error for c in parsed.calls]
    (rendered,) = [s for s in trace.steps if type(s).__name__ == "Rendered"]
    assert backend.budgets[0] > LOOP_BUDGET and f"up to {backend.budgets[0]} new tokens" in rendered.rule
    print(names, "turn budget", backend.budgets[0], "for 3 calls; rule:", rendered.rule)


def test_the_raise_is_capped_by_the_context_window(qwen25_tok):
    from toolkit.tools import TOOLS

    backend = SlowestDecoder(qwen25_tok, calls=1)
    backend.context_length = 0  # not reported: no cap
    cfg = LoopConfig().but("test", max_new_tokens=LOOP_BUDGET, max_calls=8, tool_choice="required", max_turns=1)
    run(backend, qwen25_tok, [{"role": "user", "content": "go"}], {"calculator": TOOLS["calculator"]}, config=cfg)
    roomy = backend.budgets[-1]
    backend.context_length = 700
    run(backend, qwen25_tok, [{"role": "user", "content": "go"}], {"calculator": TOOLS["calculator"]}, config=cfg)
    capped = backend.budgets[-1]
    assert roomy > 700 > capped > LOOP_BUDGET, (roomy, capped)
