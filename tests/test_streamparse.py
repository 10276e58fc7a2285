"""The streaming parser against the one-shot parser: every chunking of real and generated outputs gives the same
free text and calls, the name and argument events agree with the finished call, and no tag leaks into the text."""

import json
import random
import re
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.parse import parse_tool_calls
from toolkit.paths import results_file
from toolkit.streamparse import (
    ArgumentsDelta,
    CallDone,
    CallError,
    CallName,
    CallStarted,
    StreamParser,
    TextDelta,
    assemble,
    stream_events,
)

CHUNKINGS_PER_TEXT = 45
COUNT = {"chunkings": 0}


def _real_outputs(limit=120):
    """Real model generations with `<tool_call>` blocks, from the saved BFCL run (benchmarks/results)."""
    found = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "text" and isinstance(v, str) and "<tool_call>" in v:
                    found.append(v)
                else:
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(json.loads(results_file("bfcl_qwen2.5-coder-0.5b.json").read_text()))
    return sorted(set(found))[:limit]


REAL = _real_outputs()
tricky = st.text(alphabet='ab <>{}[]":,\\/\n_é好', max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers(-99, 99) | tricky,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(tricky, kids, max_size=3),
    max_leaves=6,
)


@st.composite
def calls(draw):
    name = draw(st.sampled_from(["get_weather", "calc", "f", "näme", 'q"uote']))
    kind = draw(st.sampled_from(["args", "empty", "none", "params", "first", "malformed", "bad_args"]))
    args = draw(st.dictionaries(tricky, values, max_size=3))
    sep = draw(st.sampled_from(["", " ", "\n"]))
    body = {
        "args": json.dumps({"name": name, "arguments": args}),
        "empty": json.dumps({"name": name, "arguments": {}}),
        "none": json.dumps({"name": name}),
        "params": json.dumps({"name": name, "parameters": args}),
        "first": json.dumps({"arguments": args, "name": name}, indent=1),
        "malformed": json.dumps({"name": name, "arguments": args})[:-1],
        "bad_args": json.dumps({"name": name, "arguments": [1, 2]}),
    }[kind]
    return f"<tool_call>{sep}{body}{sep}</tool_call>"


@st.composite
def outputs(draw):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["text", "call", "call", "think"]))
        if kind == "text":
            parts.append(draw(tricky))
        elif kind == "call":
            parts.append(draw(calls()))
        else:
            parts.append(f"<think>{draw(tricky)}{draw(calls())}{draw(tricky)}</think>")
    text = "".join(parts)
    if draw(st.booleans()) and text:  # a stream cut anywhere, mid-call included
        text = text[: draw(st.integers(0, len(text)))]
    return text


def _chunkings(seed, text):
    """CHUNKINGS_PER_TEXT random splits of ``text`` (a seeded generator: cheaper than a hypothesis draw each)."""
    rng = random.Random(seed)
    for _ in range(CHUNKINGS_PER_TEXT):
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 12))))
        yield [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def _check(text, chunks):
    assert "".join(chunks) == text
    events = list(stream_events(chunks))
    assert assemble(events) == parse_tool_calls(text)
    names, args, started = {}, {}, []
    for e in events:
        if isinstance(e, CallStarted):
            started.append(e.index)
        elif isinstance(e, CallName):
            names[e.index] = e.name
        elif isinstance(e, ArgumentsDelta):
            args[e.index] = args.get(e.index, "") + e.delta
    finished = [e.call for e in events if isinstance(e, CallDone | CallError)]
    assert started == [c.index for c in finished] == list(range(len(finished)))
    for call in finished:
        if call.ok:
            assert names[call.index] == call.name
            if call.index in args and '"parameters"' not in call.raw:
                assert json.loads(args[call.index]) == call.arguments
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    outside = re.sub(r"<think>.*?(</think>|$)", "", shown, flags=re.S)
    assert "<tool_call>" not in outside  # no raw tag leaks into the content
    COUNT["chunkings"] += 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=outputs(), seed=st.integers(0, 2**32))
def test_generated_outputs_every_chunking_matches_the_one_shot_parse(text, seed):
    for chunks in _chunkings(seed, text):
        _check(text, chunks)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.sampled_from(REAL), seed=st.integers(0, 2**32))
def test_real_outputs_every_chunking_matches_the_one_shot_parse(text, seed):
    for chunks in _chunkings(seed, text):
        _check(text, chunks)


def test_the_named_cases_one_character_at_a_time():
    cases = {
        "split tag": "ok <tool_call>" + json.dumps({"name": "f", "arguments": {"x": 1}}) + "</tool_call>",
        "brace and quote in a string": '<tool_call>{"name": "f", "arguments": {"s": "}{\\"]"}}</tool_call>',
        "empty arguments": '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
        "two back to back": '<tool_call>{"name": "a"}</tool_call><tool_call>{"name": "b"}</tool_call>',
        "inside think": '<think>maybe <tool_call>{"name": "a"}</tool_call></think>answer',
        "cut mid-call": 'text <tool_call>{"name": "a", "argu',
    }
    got = {k: list(stream_events(list(t))) for k, t in cases.items()}
    for t in cases.values():
        _check(t, list(t))
    assert [e.delta for e in got["empty arguments"] if isinstance(e, ArgumentsDelta)] == ["{", "}"]
    assert [type(e).__name__ for e in got["two back to back"]].count("CallDone") == 2
    assert not any(isinstance(e, CallStarted) for e in got["inside think"])
    assert isinstance(got["cut mid-call"][-1], CallError)
    assert got["cut mid-call"][-1].call.error["type"] == "unclosed_tag"
    assert "".join(e.text for e in got["split tag"] if isinstance(e, TextDelta)) == "ok "


def test_a_parser_takes_any_input_and_holds_only_a_tag_prefix():
    p = StreamParser()
    assert p.feed("a <tool_") == [TextDelta("a ")]
    assert p.feed("cal") == []
    assert p.feed("x") == [TextDelta("<tool_calx")]  # not a tag after all: shown as text
    assert p.finish() == []


def test_total_chunkings_and_time():
    """Runs last in this file: the property tests above together cover at least 10,000 chunkings."""
    assert COUNT["chunkings"] >= 10_000, COUNT
    t = time.perf_counter()
    text = REAL[0] * 50
    list(stream_events([text[i : i + 3] for i in range(0, len(text), 3)]))
    assert time.perf_counter() - t < 5  # a bound against quadratic blow-up, not a benchmark
