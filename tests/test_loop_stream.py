"""toolkit.loop.stream: the host loop reads each turn through the stream parser while the (scripted) model generates;
the events' calls and text equal the loop's one-shot parse of the same turn."""

import json

import pytest

from toolkit.backends.base import Streams
from toolkit.backends.scripted import ScriptedBackend
from toolkit.loop.loop import run
from toolkit.loop.steps import Generated, Parsed
from toolkit.loop.stream import TurnStream
from toolkit.parse import parse_tool_calls
from toolkit.qwen import STOP_IDS, TOOL_CALL_ID
from toolkit.streamparse import ArgumentsDelta, CallDone, CallError, CallName, CallStarted, TextDelta, assemble
from toolkit.tokenizer import qwen_tokenizer
from toolkit.tools import TOOLS


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2.5")


def call(name, **arguments):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


def streamed(tok, script, backend=None, **kw):
    """Run the loop on ``script`` with ``on_event``; return the trace and each turn's events (with their arrival
    order relative to the backend's ids)."""
    seen: dict[int, list] = {}
    backend = backend or ScriptedBackend(tok, script)
    msgs = [{"role": "user", "content": "Weather in Paris, and 2+3?"}]
    trace = run(backend, tok, msgs, TOOLS, on_event=lambda t, e: seen.setdefault(t, []).append(e), **kw)
    return trace, seen


def same_calls(a, b):
    return [(c.name, c.arguments, c.error and c.error["type"]) for c in a] == [
        (c.name, c.arguments, c.error and c.error["type"]) for c in b
    ]


def check_equal_to_one_shot(trace, seen):
    gens, parses = trace.of(Generated), trace.of(Parsed)
    assert gens and sorted(seen) == [g.turn for g in gens]
    for g, p in zip(gens, parses):
        content, calls = assemble(seen[g.turn])
        one_content, one_calls = parse_tool_calls(g.text)
        assert content == one_content  # the text, thinking included, as the one-shot parse keeps it
        assert same_calls(calls, one_calls) and same_calls(calls, p.calls)  # and what the loop ran
        assert "".join(e.text for e in seen[g.turn] if isinstance(e, TextDelta)).strip() == one_content


def test_events_of_every_turn_equal_the_one_shot_parse(tok):
    script = [
        "Let me look both up.\n" + call("get_weather", city="Paris") + "\n" + call("calculator", expression="2+3"),
        "It is sunny in Paris; 2+3 = 5.",
    ]
    trace, seen = streamed(tok, script, constrain="none")
    check_equal_to_one_shot(trace, seen)
    kinds = [type(e).__name__ for e in seen[1]]
    assert kinds.count("CallStarted") == 2 and kinds.count("CallDone") == 2 and "CallError" not in kinds
    assert [e.name for e in seen[1] if isinstance(e, CallName)] == ["get_weather", "calculator"]
    args = {e.index: "" for e in seen[1] if isinstance(e, ArgumentsDelta)}
    for e in seen[1]:
        if isinstance(e, ArgumentsDelta):
            args[e.index] += e.delta
    assert [json.loads(args[i]) for i in sorted(args)] == [{"city": "Paris"}, {"expression": "2+3"}]
    assert all(isinstance(e, TextDelta) for e in seen[2])  # the answer turn is text only


def test_a_call_after_text_streams_the_text_first(tok):
    trace, seen = streamed(tok, ["Checking the weather now. " + call("get_weather", city="北京"), "Done."])
    check_equal_to_one_shot(trace, seen)
    first_call = next(i for i, e in enumerate(seen[1]) if isinstance(e, CallStarted))
    before = "".join(e.text for e in seen[1][:first_call] if isinstance(e, TextDelta))
    assert before.strip() == "Checking the weather now." and len(seen[1][:first_call]) > 1  # several text deltas


def test_a_tag_split_across_tokens_is_held_back_not_leaked(tok):
    pieces = (
        "Sure. <tool",
        "_ca",
        "ll>\n" + json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}),
        "\n</tool",
        "_call>",
    )
    backend = ScriptedBackend(tok, [pieces, "Sunny."])
    trace, seen = streamed(tok, None, backend=backend, constrain="none")
    ids = trace.of(Generated)[0].ids
    assert TOOL_CALL_ID not in ids  # the tag really came in ordinary pieces
    check_equal_to_one_shot(trace, seen)
    text = "".join(e.text for e in seen[1] if isinstance(e, TextDelta))
    assert "<" not in text and text.strip() == "Sure."
    assert [type(e) for e in seen[1] if not isinstance(e, TextDelta | ArgumentsDelta)] == [
        CallStarted,
        CallName,
        CallDone,
    ]


def test_a_turn_cut_mid_call_ends_in_a_call_error(tok):
    long_call = call("calculator", expression="1+" * 40 + "1")
    trace, seen = streamed(tok, [long_call, "ok"], constrain="none", max_new_tokens=12, max_turns=2)
    check_equal_to_one_shot(trace, seen)
    errors = [e for e in seen[1] if isinstance(e, CallError)]
    assert len(errors) == 1 and errors[0].call.error["type"] == "unclosed_tag"


class _Quiet:
    """A backend that does not stream: only the protocol's plain ``generate`` (the HTTP backends' case)."""

    def __init__(self, inner):
        self.inner, self.name = inner, "quiet"

    def peek(self, *a, **kw):
        return self.inner.peek(*a, **kw)

    def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, top_p=1.0, seed=0):
        return self.inner.generate(
            prompt_ids, max_new_tokens=max_new_tokens, stop_ids=stop_ids, mask=mask, temperature=temperature, seed=seed
        )


def test_a_backend_that_does_not_stream_gives_the_same_events_after_its_turn(tok):
    script = ["Let me see. " + call("get_weather", city="東京"), "Rainy in 東京."]
    _, live = streamed(tok, script)
    quiet = _Quiet(ScriptedBackend(tok, script))
    assert isinstance(ScriptedBackend(tok, []), Streams) and not isinstance(quiet, Streams)
    trace, replayed = streamed(tok, None, backend=quiet)
    check_equal_to_one_shot(trace, replayed)
    assert replayed == live


def test_events_arrive_while_the_backend_decodes(tok):
    """Live: the first event comes before the backend's generate returns (one id at a time, as it decodes)."""
    order = []

    class Watched(ScriptedBackend):
        def generate(self, *a, **kw):
            g = super().generate(*a, **kw)
            order.append("returned")
            return g

    backend = Watched(tok, ["Hello " + call("calculator", expression="1+1"), "2"])
    msgs = [{"role": "user", "content": "1+1?"}]
    run(backend, tok, msgs, TOOLS, on_event=lambda t, e: order.append(type(e).__name__))
    assert order.index("TextDelta") < order.index("returned") and order.index("CallDone") < order.index("returned")


def test_split_characters_come_out_whole(tok):
    text = "温度 🌡️ é " + call("get_weather", city="Zürich")
    ids = tok.encode(text, add_special_tokens=False)
    assert any("\ufffd" in tok.decode([i]) for i in ids)  # some character really spans two ids
    s = TurnStream(tok, 1, None, STOP_IDS)
    for i in ids + [STOP_IDS[0]]:
        s.token(i)
    events = s.end(ids, text)
    assert s.exact and not any("\ufffd" in e.text for e in events if isinstance(e, TextDelta))
    assert same_calls(assemble(events)[1], parse_tool_calls(text)[1]) and assemble(events)[0] == "温度 🌡️ é"


def test_without_on_event_the_backend_gets_the_plain_protocol(tok):
    seen = []

    class Strict(ScriptedBackend):
        def generate(self, *a, **kw):
            seen.append(sorted(kw))
            return super().generate(*a, **kw)

    run(Strict(tok, ["hi"]), tok, [{"role": "user", "content": "hi"}], TOOLS)
    assert seen and all("on_token" not in k for k in seen)
