"""toolkit.loop.loop: the parser, every error path and guard of the loop (scripted fake models), prefix reuse on a
real transformers model (the random-weight stand-in), and the real offline model's round trips."""

import json
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit import tools
from toolkit.backends.hf import HFBackend
from toolkit.backends.scripted import ScriptedBackend
from toolkit.commands.loop import cli
from toolkit.loop.examples import run_example
from toolkit.loop.loop import CALL_OPENERS, RULE, LoopConfig, loop, run, timestamp_prefix
from toolkit.loop.steps import STOP_REASONS, Executed, Generated, Parsed, Rendered
from toolkit.loop.think import peek
from toolkit.parse import parse_tool_calls
from toolkit.prefix import prefix_stability
from toolkit.qwen import IM_END_ID, TOOL_CALL_ID
from toolkit.tokenizer import qwen_tokenizer
from toolkit.tools import TOOLS, Tool


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2.5")


def call(name, **arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def loop_once(tok, script, tools=None, messages=None, **kw):
    backend = ScriptedBackend(tok, script)
    msgs = messages or [{"role": "user", "content": "250的15%是多少？"}]
    return run(backend, tok, msgs, tools if tools is not None else TOOLS, **kw), backend


def tool_messages(trace):
    return [json.loads(m["content"]) for m in trace.messages if m["role"] == "tool"]


# ------------------------------------------------------------------ parser
def test_parse_zero_one_several():
    assert parse_tool_calls("just text") == ("just text", [])
    content, calls = parse_tool_calls("Let me check.\n" + call("calculator", expression="1+1"))
    assert content == "Let me check." and [(c.name, c.arguments, c.ok) for c in calls] == [
        ("calculator", {"expression": "1+1"}, True)
    ]
    _, calls = parse_tool_calls(call("get_weather", city="Paris") + "\n" + call("get_weather", city="Tokyo"))
    assert [c.arguments["city"] for c in calls] == ["Paris", "Tokyo"] and [c.id for c in calls] == ["call_1", "call_2"]


@pytest.mark.parametrize(
    "text,kind",
    [
        ('<tool_call>\n{"name": "calculator", "arguments": {"expression": "1"}\n</tool_call>', "malformed_json"),
        ('<tool_call>\n{"name": "calculator"', "unclosed_tag"),
        ("<tool_call>[1, 2]</tool_call>", "bad_call"),
        ('<tool_call>{"arguments": {}}</tool_call>', "bad_call"),
        ('<tool_call>{"name": "calculator", "arguments": [1]}</tool_call>', "bad_call"),
        ('<tool_call>{"name": "calculator", "arguments": "{not json"}</tool_call>', "bad_call"),
        ("<tool_call>" + "[" * 10_000 + "</tool_call>", "malformed_json"),
        ("<tool_call>" + "x" * 30_000 + "</tool_call>", "bad_call"),
    ],
)
def test_parse_errors_become_structured(text, kind):
    _, calls = parse_tool_calls(text)
    assert len(calls) == 1 and calls[0].error["type"] == kind and calls[0].error["message"]


def test_parse_accepts_double_encoded_arguments():
    _, calls = parse_tool_calls(
        '<tool_call>{"name": "calculator", "arguments": "{\\"expression\\": \\"2\\"}"}</tool_call>'
    )
    assert calls[0].ok and calls[0].arguments == {"expression": "2"}


# One character per piece keeps generation cheap (10,000 examples in seconds); translate() expands the pieces.
_PIECES = str.maketrans(
    {
        "A": "<tool_call>",
        "B": "</tool_call>",
        "N": '"name": ',
        "R": '"arguments": ',
        "C": '"calculator"',
        "E": "1e999",
        "U": "\\u12",
        "O": '{"expression": "1"}',
    }
)
_TEXTS = st.text(alphabet='ABNRCEUO{}[]":,\\\n 1x\x00🙂', max_size=40).map(lambda s: s.translate(_PIECES))


@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(_TEXTS)
def test_parser_never_raises(text):
    content, calls = parse_tool_calls(text)
    assert isinstance(content, str) and (len(calls) > 0) == ("<tool_call>" in text)
    assert len(calls) <= text.count("<tool_call>")
    for c in calls:
        assert c.ok == (c.error is None)
        assert c.ok or c.error["type"] in ("malformed_json", "unclosed_tag", "bad_call")
        assert not c.ok or (isinstance(c.name, str) and isinstance(c.arguments, dict))


# ------------------------------------------------------------------ the loop, scripted
def test_one_round_trip_and_step_order(tok):
    trace, backend = loop_once(tok, [call("calculator", expression="250 * 15%"), "250的15%是37.5。"])
    kinds = [type(s).__name__ for s in trace.steps]
    assert kinds == [
        "Rendered",
        "Generated",
        "Parsed",
        "Executed",
        "Rendered",
        "Generated",
        "Parsed",
        "Answered",
        "Stopped",
    ]
    assert trace.stop.reason == "answered" and "37.5" in trace.answer
    assert tool_messages(trace) == [{"expression": "250 * 15%", "result": 37.5}]
    # the second request carries the result inside <tool_response>, rendered by the template
    second = tok.decode(backend.prompts[1])
    assert '<tool_response>\n{"expression": "250 * 15%", "result": 37.5}\n</tool_response>' in second
    assert second.endswith("<|im_start|>assistant\n")


def test_prefix_accounting_with_scripted_backend(tok):
    trace, backend = loop_once(tok, [call("calculator", expression="2+2"), "4"])
    t1, t2 = trace.turns()
    assert t1["reused"] == 0 and t1["prefilled"] == t1["prompt"] and t1["history"] == 0
    assert t2["reused"] + t2["prefilled"] == t2["prompt"] and t2["reused"] >= t1["prompt"]
    assert t1["tools"] == t2["tools"] > 0 and t2["tools"] + t2["history"] + t2["new"] == t2["prompt"]
    assert t2["history"] == t1["prompt"] - t1["tools"]


@pytest.mark.parametrize(
    "script,kind",
    [
        (['<tool_call>\n{"name": "calculator", "arguments": {"expression": "1"}\n</tool_call>'], "malformed_json"),
        ([call("search_web", q="x")], "unknown_tool"),
        ([call("calculator", expr="1+1")], "invalid_arguments"),
        ([call("calculator", expression=7)], "invalid_arguments"),
        ([call("get_weather", city="Paris", unit="kelvin")], "invalid_arguments"),
        ([call("calculator", expression="__import__('os')")], "tool_error"),
        ([call("get_weather", city="Atlantis")], "tool_error"),
    ],
)
def test_model_errors_become_results_the_model_sees(tok, script, kind):
    trace, backend = loop_once(tok, script + ["sorry"])
    assert trace.stop.reason == "answered"
    (result,) = tool_messages(trace)
    assert result["error"]["type"] == kind and result["error"]["message"]
    assert kind in tok.decode(backend.prompts[1])  # the model is shown what went wrong


def test_tool_that_raises_or_hangs(tok):
    def boom(x: int) -> dict:
        """Explodes.

        Args:
            x: anything
        """
        raise RuntimeError("kaboom")

    finished = threading.Event()

    def hang(x: int) -> dict:
        """Never returns in time.

        Args:
            x: seconds
        """
        time.sleep(x)
        finished.set()
        return {"slept": x}

    mine = {"boom": Tool.from_function(boom), "hang": Tool.from_function(hang)}
    trace, _ = loop_once(tok, [call("boom", x=1) + "\n" + call("hang", x=3), "done"], tools=mine, tool_timeout_s=0.2)
    (ex,) = trace.of(Executed)
    assert [r.status for r in ex.results] == ["error", "timeout"]
    assert ex.results[0].result["error"] == {"type": "tool_exception", "message": "RuntimeError: kaboom"}
    assert ex.results[1].result["error"]["type"] == "timeout"
    assert not finished.is_set()  # the loop went on without waiting for the hung tool (it sleeps 3 s)
    assert trace.stop.reason == "answered"


def test_independent_calls_run_at_the_same_time(tok):
    barrier = threading.Barrier(2, timeout=5)

    def meet(who: str) -> dict:
        """Waits until the other call arrives too (only possible if both run concurrently).

        Args:
            who: a name
        """
        barrier.wait()
        return {"met": who}

    trace, _ = loop_once(
        tok,
        [call("meet", who="a") + "\n" + call("meet", who="b"), "ok"],
        tools={"meet": Tool.from_function(meet)},
        tool_timeout_s=10,
    )
    assert [r["met"] for r in tool_messages(trace)] == ["a", "b"]
    assert len(trace.of(Rendered)) == 2  # both calls were executed in one round


def test_confirmation_denies_by_default_and_runs_when_approved(tok, tmp_path):
    tools.set_notes_dir(tmp_path)
    try:
        script = [call("write_note", title="todo", text="buy milk"), "ok"]
        trace, _ = loop_once(tok, script)
        assert tool_messages(trace)[0]["error"]["type"] == "denied" and not list(tmp_path.iterdir())
        seen = []
        trace, _ = loop_once(tok, script, confirm=lambda c: seen.append((c.name, c.arguments)) or True)
        assert seen == [("write_note", {"title": "todo", "text": "buy milk"})]
        assert (tmp_path / "todo.txt").read_text() == "buy milk" and tool_messages(trace)[0]["saved"] == "todo.txt"
        trace, _ = loop_once(tok, script, confirm=lambda c: False)
        assert tool_messages(trace)[0]["error"]["type"] == "denied"
    finally:
        tools.set_notes_dir(None)


def test_guard_max_turns(tok):
    script = [call("calculator", expression=f"{i}+1") for i in range(5)]
    trace, _ = loop_once(tok, script, max_turns=3)
    assert trace.stop.reason == "max_turns" and len(trace.of(Executed)) == 3 and trace.answer is None
    ids = [m["tool_call_id"] for m in trace.messages if m["role"] == "tool"]
    assert ids == ["call_1", "call_2", "call_3"]  # unique over the conversation, not per turn


def test_guard_repeated_call_across_turns(tok):
    trace, _ = loop_once(tok, [call("calculator", expression="1+1")] * 2 + ["2"])
    first, second = trace.of(Executed)
    assert [r.status for r in first.results] == ["ok"] and [r.status for r in second.results] == ["repeated"]
    rep = second.results[0].result
    assert "call_1" in rep["repeated_call"] and rep["result"] == {"expression": "1+1", "result": 2}
    # a turn of only repeats stays in the trace but not in the history: its results are already there
    assert len(tool_messages(trace)) == 1 and sum(bool(m.get("tool_calls")) for m in trace.messages) == 1
    # a turn of only repeats: the next turn has tools off and the answer started for the model
    r3 = trace.of(Rendered)[2]
    assert r3.mode == "answer" and r3.forced_prefix and "repeat" in r3.rule and trace.stop.reason == "answered"
    trace, _ = loop_once(tok, [call("calculator", expression="1+1")] * 3 + ["2"], repeat_limit=3, max_turns=5)
    assert trace.stop.reason == "answered" and [r.status for s in trace.of(Executed) for r in s.results] == ["ok"] * 3


def test_guard_counts_calls_already_in_the_history(tok):
    """A run on a history that already holds a call (a second run on the same conversation, as the agent patterns
    do one turn at a time) does not run that call again: the guard spans the whole conversation."""
    first, _ = loop_once(tok, [call("calculator", expression="1+1"), "2"])
    msgs = first.messages + [{"role": "user", "content": "again?"}]
    again, _ = loop_once(tok, [call("calculator", expression="1+1"), "2"], messages=msgs)
    (ex,) = again.of(Executed)
    assert [r.status for r in ex.results] == ["repeated"]
    assert ex.results[0].result["result"] == {"expression": "1+1", "result": 2}  # told the earlier result
    other, _ = loop_once(tok, [call("calculator", expression="2+2"), "4"], messages=list(msgs))
    assert [r.status for s in other.of(Executed) for r in s.results] == ["ok"]


def test_guard_repeated_call_within_one_turn(tok):
    """Five identical calls in one turn: one runs, four get a structured 'repeated call' result."""
    ran = []

    def count(x: int) -> dict:
        """Counts how often it ran.

        Args:
            x: anything
        """
        ran.append(x)
        return {"x": x}

    five = "\n".join([call("count", x=1)] * 5)
    trace, backend = loop_once(
        tok, [five + "\n" + call("count", x=2), "done"], tools={"count": Tool.from_function(count)}, max_new_tokens=400
    )
    (ex,) = trace.of(Executed)
    assert sorted(ran) == [1, 2] and [r.status for r in ex.results] == ["ok"] + ["repeated"] * 4 + ["ok"]
    res = tool_messages(trace)
    assert all(r == {"repeated_call": res[1]["repeated_call"], "result": {"x": 1}} for r in res[1:5])
    assert "call_1" in res[1]["repeated_call"] and res[5] == {"x": 2}
    assert "repeated_call" in tok.decode(backend.prompts[1])  # the model is told
    assert trace.of(Rendered)[1].mode != "answer"  # a new call ran: the model answers on its own


def test_calls_per_turn_are_capped_with_an_error_result(tok):
    many = "\n".join(call("calculator", expression=f"{i}+1") for i in range(5))
    trace, _ = loop_once(tok, [many, "ok"], max_calls=3, max_new_tokens=400)
    assert [r.status for r in trace.of(Executed)[0].results] == ["ok"] * 3 + ["skipped"] * 2
    assert tool_messages(trace)[4]["error"]["type"] == "too_many_calls"


def test_guard_token_budget(tok):
    script = [call("calculator", expression=f"{i}+1") for i in range(5)]
    trace, _ = loop_once(tok, script, token_budget=400)
    assert trace.stop.reason == "token_budget" and 1 <= len(trace.of(Executed)) < 5


def test_truncated_answer_is_reported(tok):
    trace, _ = loop_once(tok, ["word " * 50], max_new_tokens=10)
    assert trace.stop.reason == "max_new_tokens" and trace.of(Generated)[0].generation.stopped_by == "length"


def test_answer_started_only_on_the_last_turn_after_tool_results(tok):
    trace, backend = loop_once(
        tok, [call("calculator", expression="2*3"), " 6."], answer_prefix="The answer is", max_turns=2
    )
    r1, r2 = trace.of(Rendered)
    assert r1.forced_prefix == "" and r2.forced_prefix == "The answer is" and r2.mode == "answer"
    assert "last turn" in r2.rule
    assert tok.decode(backend.prompts[1]).endswith("<|im_start|>assistant\nThe answer is")
    assert trace.answer == "The answer is 6."
    # with turns to spare, the model answers on its own: nothing is put in its mouth
    trace, backend = loop_once(tok, [call("calculator", expression="2*3"), "6."], answer_prefix="The answer is")
    assert trace.of(Rendered)[1].forced_prefix == "" and trace.answer == "6."


def test_a_question_needing_two_calls_can_make_both(tok):
    """A result in hand does not stop the next call: turn 2 may call again (the old default started the answer)."""
    trace, _ = loop_once(
        tok,
        [
            call("get_weather", city="Paris"),
            call("get_weather", city="Tokyo"),
            "Tokyo (21 °C) is warmer than Paris (18 °C).",
        ],
        messages=[{"role": "user", "content": "Which is warmer, Paris or Tokyo?"}],
    )
    assert [r.result["city"] for s in trace.of(Executed) for r in s.results] == ["Paris", "Tokyo"]
    modes = [r.mode for r in trace.of(Rendered)]
    assert modes == ["call", "call", "text"] and not any(r.forced_prefix for r in trace.of(Rendered))
    assert trace.stop.reason == "answered" and "Tokyo" in trace.answer


@pytest.mark.parametrize(
    "question,prefix", [("250的15%是多少？", "根据工具结果，"), ("What is 15% of 250?", "Based on the tool results,")]
)
def test_auto_answer_prefix_follows_the_question_language(tok, question, prefix):
    trace, _ = loop_once(
        tok,
        [call("calculator", expression="2*3"), " 6."],
        max_turns=2,
        messages=[{"role": "user", "content": question}],
    )
    assert trace.of(Rendered)[1].forced_prefix == prefix and trace.answer == prefix + " 6."


# ------------------------------------------------------------------ tool choice: which grammar each turn gets
class _Recorder(ScriptedBackend):
    """A scripted backend that keeps the grammar mask of every turn and checks its text against it."""

    def __init__(self, tok, script):
        super().__init__(tok, script)
        self.masks = []

    def generate(self, prompt_ids, *, mask=None, **kw):
        self.masks.append(mask)
        return super().generate(prompt_ids, mask=mask, **kw)


def _fits(mask, tok, text):
    from toolkit.grammar.mask import replay

    return replay(mask.grammar, tok.encode(text, add_special_tokens=False) + [IM_END_ID])


WEATHER = call("get_weather", city="Paris")


@pytest.mark.parametrize(
    "choice,first,mode",
    [
        ("auto", WEATHER, "call"),
        ("auto", "Bonjour !", "text"),
        ("required", WEATHER, "call"),
        ("get_weather", WEATHER, "call"),
        ("none", "Bonjour !", "text"),
        ({"type": "function", "function": {"name": "get_weather"}}, WEATHER, "call"),
    ],
)
def test_tool_choice_modes(tok, choice, first, mode):
    backend = _Recorder(tok, [first, "ok"])
    trace = run(backend, tok, [{"role": "user", "content": "hi"}], TOOLS, tool_choice=choice)
    r1 = trace.of(Rendered)[0]
    assert r1.mode == mode and r1.rule
    mask = backend.masks[0]
    assert mask is not None and _fits(mask, tok, first) == (True, True)
    text_ok = _fits(mask, tok, "Bonjour !")[1]
    other_tool_ok = _fits(mask, tok, call("calculator", expression="1"))[1]
    bad_call_ok = _fits(mask, tok, call("get_weather", town="Paris"))[1]
    assert not bad_call_ok  # whenever a call is started, it must fit the schemas
    if choice == "none":
        assert text_ok and not _fits(mask, tok, WEATHER)[1]
    elif mode == "call":
        assert not text_ok and other_tool_ok == (choice in ("auto", "required"))
    else:
        assert text_ok and other_tool_ok  # auto, text turn: free text, and a <tool_call> still starts a call
    if len(backend.masks) > 1:  # after a tool result the turn is 'auto' again: a forced call cannot loop
        assert trace.of(Rendered)[1].mode in ("text", "call") and "after tool results" in trace.of(Rendered)[1].rule


def test_auto_gate_counts_other_spellings_of_a_call_as_a_call(tok):
    for opener in [
        '```json\n{"name": "calculator"}\n```',
        '{"name": "calculator", "arguments": {}}',
        '<tool_call>{"name"',
    ]:
        backend = ScriptedBackend(tok, [opener, "x"])
        gen = peek(backend, [1, 2, 3], 0.0, 0)
        text0 = tok.decode(gen.new_ids[:1]).lstrip()
        assert gen.new_ids[0] == TOOL_CALL_ID or text0.startswith(CALL_OPENERS), opener


def test_bad_tool_choice_is_a_one_line_error(tok):
    with pytest.raises(ValueError, match="tool_choice must be one of"):
        list(
            loop(ScriptedBackend(tok, ["x"]), tok, [{"role": "user", "content": "hi"}], TOOLS, tool_choice="search_web")
        )


def test_system_prefix_is_rendered_not_stored(tok):
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    trace, backend = loop_once(tok, ["hello"], messages=msgs, system_prefix=lambda t: f"T{t}\n")
    assert "<|im_start|>system\nT1\nsys" in tok.decode(backend.prompts[0]) and msgs[0]["content"] == "sys"


def test_mcp_style_tool_like_objects_are_accepted(tok):
    class Remote:  # what an MCP adapter supplies: name, MCP-style schema, needs_confirmation, call
        name, needs_confirmation = "echo", False
        schema = {
            "name": "echo",
            "description": "Echoes.",
            "inputSchema": {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]},
        }

        def call(self, args):
            return {"echo": args["s"]}

    trace, backend = loop_once(tok, [call("echo", s="hi") + "\n" + call("echo"), "done"], tools={"echo": Remote()})
    res = tool_messages(trace)
    assert res[0] == {"echo": "hi"} and res[1]["error"]["type"] == "invalid_arguments"
    assert '"name": "echo"' in tok.decode(backend.prompts[0])  # rendered as an OpenAI-style tool


def test_trace_json_is_serialisable(tok):
    trace, _ = loop_once(tok, [call("calculator", expression="1+1"), "2"])
    out = json.loads(json.dumps(trace.to_json(), default=str))
    assert out["stop_reason"] == "answered" and out["answer"] == "2" and len(out["turns"]) == 2


# ------------------------------------------------------------------ a real transformers model (stand-in)
@pytest.fixture(scope="module")
def stand_in():
    import torch

    from toolkit.models import load

    torch.set_num_threads(1)
    return load("stand-in-qwen2.5", quiet=True)


def _two_turns(loaded, reuse, system_prefix=None):
    backend = HFBackend.from_loaded(loaded, reuse=reuse)
    msgs = [{"role": "user", "content": "What is 2+2?"}]
    tools_ = {"calculator": TOOLS["calculator"]}
    # Turn 2 follows whatever turn 1 generated (random weights: free text), so script the history instead:
    steps, gens = [], []
    for turn in range(2):
        trace = run(
            backend,
            loaded.tokenizer,
            msgs,
            tools_,
            max_turns=1,
            max_new_tokens=12,
            template="qwen2.5",
            system_prefix=system_prefix,
        )
        gens.append(trace.of(Generated)[0].generation)
        steps.append(trace)
        msgs += [{"role": "user", "content": f"And {turn}+3?"}]
    return gens


def test_greedy_tokens_identical_with_and_without_reuse(stand_in):
    with_reuse = _two_turns(stand_in, True)
    without = _two_turns(stand_in, False)
    assert [g.new_ids for g in with_reuse] == [g.new_ids for g in without]
    assert with_reuse[1].reused > 0 and without[1].reused == 0
    assert with_reuse[1].prefilled < without[1].prefilled
    assert with_reuse[1].reused + with_reuse[1].prefilled == without[1].prefilled


def test_timestamp_at_start_of_system_prompt_collapses_reuse(stand_in):
    stable = _two_turns(stand_in, True)
    stamped = _two_turns(stand_in, True, system_prefix=timestamp_prefix)
    # only '<|im_start|>system\nCurrent time: 2026-..' up to the first digit that changed survives
    line = stand_in.tokenizer.encode("<|im_start|>system\n" + timestamp_prefix(0))
    assert stable[1].reused > 200 and stamped[1].reused < len(line)


def test_cache_is_cropped_when_history_is_rewritten(stand_in):
    backend = HFBackend.from_loaded(stand_in)
    ids = stand_in.tokenizer.encode("one two three four five six seven eight nine ten")
    backend.generate(ids, max_new_tokens=3, stop_ids={IM_END_ID})
    g = backend.generate(ids[:5] + [11, 12, 13], max_new_tokens=3, stop_ids={IM_END_ID})
    assert (g.reused, g.prefilled) == (5, 3)
    fresh = HFBackend.from_loaded(stand_in, reuse=False).generate(
        ids[:5] + [11, 12, 13], max_new_tokens=3, stop_ids={IM_END_ID}
    )
    assert fresh.new_ids == g.new_ids


def test_constrained_turn_on_the_stand_in_is_a_well_formed_call(stand_in):
    from toolkit.grammar.compile import bounded, compile_tools

    schemas = [bounded(s, max_length=6) for s in tools.schemas(["get_weather"])]
    grammar = compile_tools(schemas, stand_in.tokenizer, mode="tag", vocab_width=151_936)
    trace = run(
        HFBackend.from_loaded(stand_in),
        stand_in.tokenizer,
        [{"role": "user", "content": "weather?"}],
        {"get_weather": TOOLS["get_weather"]},
        tool_choice="required",
        grammar=grammar,
        max_turns=1,
        max_new_tokens=60,
    )
    gen, parsed = trace.of(Generated)[0], trace.of(Parsed)[0]
    assert gen.constrained and gen.generation.stopped_by in ("stop", "grammar")
    assert len(parsed.calls) == 1 and parsed.calls[0].ok and parsed.calls[0].name == "get_weather"


def test_cli_json_on_the_stand_in_says_so(capsys):
    assert (
        cli(["--example", "weather", "--model", "stand-in", "--max-turns", "1", "--max-new-tokens", "40", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["semantic"] is False and "STAND-IN" in out["model"]
    assert out["steps"][0]["step"] == "Rendered" and out["stop_reason"] in STOP_REASONS


def test_cli_own_question_on_the_stand_in(capsys):
    assert (
        cli(
            [
                "What is 2+2?",
                "--tools",
                "calculator",
                "--tool-choice",
                "calculator",
                "--model",
                "stand-in",
                "--max-turns",
                "1",
                "--max-new-tokens",
                "40",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["tools"] == ["calculator"] and out["settings"]["tool_choice"] == "calculator"
    assert out["steps"][0]["mode"] == "call" and "calculator" in out["steps"][0]["rule"]
    parsed = next(s for s in out["steps"] if s["step"] == "Parsed")
    assert [c["name"] for c in parsed["calls"]] == ["calculator"] and out["rule"] == RULE


@pytest.mark.parametrize(
    "argv,needle",
    [
        ([], "give a question"),
        (["hi", "--tools", "calculator,nope"], "unknown tool(s) ['nope']"),
        (["hi", "--tool-choice", "sometimes"], "tool_choice must be"),
        (["hi", "--tools", "calculator", "--tool-choice", "get_weather"], "get_weather"),
        (["  "], "empty"),
        (["x" * 5000], "at most"),
        (["hi", "--max-new-tokens", "-3"], "between"),
        (["hi", "--model", "no/such/thing"], "--model"),
        (["hi", "--example", "weather"], "one of them"),
        (["hi", "--json", "--bogus"], "unrecognized"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2_before_any_model_loads(argv, needle, monkeypatch, capsys):
    import toolkit.models

    monkeypatch.setattr(toolkit.models, "load", lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit) as e:
        cli(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------ the real offline model
def _real():
    from toolkit import fetch

    if not fetch.is_installed():
        pytest.skip("real offline model not installed (python -m toolkit models install-real)")
    from toolkit.models import load

    return load("qwen2.5-coder-0.5b", quiet=True)


@pytest.fixture(scope="module")
def real():
    import torch

    from toolkit.paths import cpu_threads

    torch.set_num_threads(cpu_threads())  # make test: 6:33 for these tests with 2 forced, 2:41 with its 1
    return _real()


@pytest.mark.real_model
def test_real_calculator_round_trip(real):
    trace = run_example("calculator", real)
    ran = [r for s in trace.of(Executed) for r in s.results if r.status == "ok"]  # repeats are not run
    assert len(ran) == 1 and ran[0].result["result"] == 37.5
    assert sum(m["role"] == "tool" for m in trace.messages) == 1  # a repeat-only turn stays out of the history
    assert trace.stop.reason == "answered" and "37.5" in trace.answer


@pytest.mark.real_model
def test_real_weather_answer_comes_from_the_table(real):
    trace = run_example("weather", real)
    (ran,) = [r for s in trace.of(Executed) for r in s.results if r.status == "ok"]  # repeats are not run
    assert ran.name == "get_weather" and ran.result["city"] == "北京"
    assert str(tools.WEATHER_TABLE["北京"][0]) in trace.answer


@pytest.mark.real_model
def test_real_two_cities_calls_guarded_and_answered(real):
    """No call slots under the default tool_choice 'auto'. Measured 2026-12-01: this 0.5B model looks up Paris, then
    repeats that call instead of asking for Tokyo (issue #13 stays open for it). What the host guarantees: every
    call that ran is a real get_weather call, none ran twice, and the loop ends with an answer."""
    trace = run_example("two_cities", real)
    ran = [r for s in trace.of(Executed) for r in s.results if r.status == "ok"]
    assert ran and all(r.name == "get_weather" and r.result["city"] in ("Paris", "Tokyo") for r in ran)
    assert len({r.result["city"] for r in ran}) == len(ran)  # the repeat guard: no call ran twice
    assert trace.stop.reason == "answered"


@pytest.mark.real_model
def test_real_greedy_identical_with_and_without_reuse(real):
    a = run_example("calculator", real, reuse=True)
    b = run_example("calculator", real, reuse=False)
    assert [g.ids for g in a.of(Generated)] == [g.ids for g in b.of(Generated)]
    assert a.turns()[1]["reused"] > 0 and b.turns()[1]["reused"] == 0


# ------------------------------------------------------------------ the trace widget (toolkit/widgets/trace.py)
def test_trace_view_plots_the_trace_numbers(tok):
    from toolkit.widgets.trace import SERIES, TraceView, panel_data

    trace, _ = loop_once(tok, [call("calculator", expression="2+2"), "4"])
    view = TraceView("scripted", semantic=False)
    for s in trace.steps:
        view.on_step(s)
    assert view.rows == trace.turns() and "STAND-IN" in view.header.value
    data = panel_data(view.rows)
    assert data["reused"][1] == trace.turns()[1]["reused"] > 0
    for fig_trace, (_, key, _, _) in zip(view.fig.data, SERIES):
        assert list(fig_trace.y) == data[key] and list(fig_trace.x) == [1, 2]
    assert "answer" in view.steps_html.value and "calculator" in view.steps_html.value
    view.show(trace)  # replaying a finished trace gives the same picture
    assert view.rows == trace.turns() and view.steps_html.value.count("<b>turn") == 2
    view.clear()
    assert view.rows == [] and len(view.fig.data[0].y) == 0


def test_prefix_stability_qwen3_rewrites_qwen25_keeps():
    q3, q25 = prefix_stability("qwen3"), prefix_stability("qwen2.5")
    assert all(r["prompt_was_prefix"] for r in q3 + q25)
    assert all(r["kept"] == 1.0 for r in q25)
    after_user = [r for r in q3 if r["after"] == "user"]
    assert after_user and all(r["kept"] < 1.0 for r in after_user)
    assert all(r["kept"] == 1.0 for r in q3 if r["after"] == "tool")


def test_a_new_step_type_needs_no_change_elsewhere(tok):
    """Steps serialise themselves: a step type defined here (not in the kit) goes through the trace's JSON, its
    per-turn rows, the CLI's lines and the widget's log without any other module knowing it."""
    from dataclasses import dataclass

    from toolkit.loop.steps import Step, turn_rows
    from toolkit.widgets.trace import TraceView

    @dataclass
    class Thought(Step):
        turn: int
        note: str

        def lines(self) -> str:
            return f"   thought: {self.note}"

    trace, _ = loop_once(tok, [call("calculator", expression="2+2"), "4"])
    plain = trace.turns()
    trace.steps.insert(1, Thought(1, "use the calculator <b>"))
    out = trace.to_json()
    assert out["steps"][1] == {"step": "Thought", "turn": 1, "note": "use the calculator <b>"}
    assert trace.turns() == plain == turn_rows([s for s in trace.steps if not isinstance(s, Thought)])
    assert "   thought: use the calculator <b>" in [s.lines() for s in trace.steps]
    view = TraceView("scripted")
    view.show(trace)
    assert "thought: use the calculator &lt;b&gt;" in view.steps_html.value and view.rows == plain


def _steps_json(trace):
    def scrub(x):  # timings differ run to run
        if isinstance(x, dict):
            return {k: scrub(v) for k, v in x.items() if k not in ("prefill_s", "decode_s", "wall_s", "seconds")}
        return [scrub(v) for v in x] if isinstance(x, list) else x

    return [scrub(s.to_json()) for s in trace.steps]


def test_loop_config_and_keyword_options_are_the_same_run(tok):
    """The options live in one LoopConfig; keyword arguments override its fields; a misspelt option fails loudly."""
    script = [call("calculator", expression="2+2"), "4"]
    by_kw, _ = loop_once(tok, script, template="qwen3", max_turns=3, repeat_limit=2)
    cfg = LoopConfig(template="qwen3", max_turns=3, repeat_limit=2)
    by_cfg, _ = loop_once(tok, script, config=cfg)
    mixed, _ = loop_once(
        tok, script, config=LoopConfig(template="qwen2.5", max_turns=3), template="qwen3", repeat_limit=2
    )
    assert _steps_json(by_kw) == _steps_json(by_cfg) == _steps_json(mixed)
    assert (
        by_kw.answer == "4" and by_kw.of(Rendered)[0].prompt_ids != loop_once(tok, script)[0].of(Rendered)[0].prompt_ids
    )
    with pytest.raises(TypeError):
        loop_once(tok, script, max_turn=3)


def test_loop_hands_temperature_top_p_and_seed_to_the_backend(tok):
    seen = []

    class Sampling(ScriptedBackend):
        def generate(self, prompt_ids, **kw):
            seen.append({k: kw[k] for k in ("temperature", "top_p", "seed")})
            return super().generate(prompt_ids, **kw)

    backend = Sampling(tok, [call("calculator", expression="2+2"), "4"])
    run(
        backend,
        tok,
        [{"role": "user", "content": "2+2?"}],
        TOOLS,
        temperature=0.7,
        top_p=0.9,
        seed=5,
        tool_choice="required",
    )
    assert seen == [dict(temperature=0.7, top_p=0.9, seed=6), dict(temperature=0.7, top_p=0.9, seed=7)]


def test_a_turn_ends_at_endoftext_too(tok):
    """Qwen2.5-Coder-0.5B sometimes writes <|endoftext|> (an eos in Qwen's generation_config) right after
    </tool_call>. The turn must end there, under the grammar and without it; what follows is never decoded."""
    from toolkit.backends.base import Generation
    from toolkit.backends.decode import decode
    from toolkit.qwen import ENDOFTEXT_ID, STOP_IDS

    garbage = tok.encode(" and then some more text", add_special_tokens=False)

    class Replay(ScriptedBackend):  # replays fixed ids through the one decode loop, as a model would emit them
        def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, **kw):
            self.prompts.append(list(prompt_ids))
            ids = tok.encode(self.script[len(self.prompts) - 1], add_special_tokens=False) + [ENDOFTEXT_ID] + garbage

            class Stepper:
                depth = 1

                def launch(self, i, bitmask):
                    pass

                def token(self, i):
                    return ids[i]

            new, stopped = decode(Stepper(), max_new_tokens=max_new_tokens, stop_ids=stop_ids, mask=mask)
            return Generation(new, 0, len(prompt_ids), 0.0, 0.0, stopped)

    for constrain in ("tag", "none"):
        backend = Replay(tok, [call("calculator", expression="2+2"), "It is 4."])
        trace = run(
            backend, tok, [{"role": "user", "content": "2+2?"}], TOOLS, tool_choice="required", constrain=constrain
        )
        gens = [s for s in trace.steps if isinstance(s, Generated)]
        assert [g.generation.new_ids[-1] for g in gens] == [ENDOFTEXT_ID, ENDOFTEXT_ID], constrain
        assert all("endoftext" not in g.text and "more text" not in g.text for g in gens), constrain
        assert trace.steps[-1].reason == "answered" and gens[-1].text == "It is 4."
    assert set(STOP_IDS) == {IM_END_ID, ENDOFTEXT_ID}
