"""Each family's calls read while they stream: for every chunking (hypothesis) the events assemble to exactly what
the one-shot reader returns on the whole text; the call's name arrives before the call is done; no marker leaks."""

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.families import FAMILIES, FamilyRendering, render_all
from toolkit.familystream import FamilyStreamParser, family_stream_events
from toolkit.readers import read_calls
from toolkit.streamparse import CallDone, CallName, CallStarted, TextDelta, assemble

CASES = [
    ("mistral", 'Let me check. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]</s>'),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{}</s>'),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": '),
    ("mistral", "Just text.</s>[TOOL_CALLS]ignored"),
    ("mistral", "Cut off [TOOL_C"),
    ("llama3.1", '<|python_tag|>{"type": "function", "name": "f", "parameters": {"a": 1}}<|eom_id|>'),
    ("llama3.1", '  {"name": "f", "parameters": {"a": 1}}<|eot_id|>'),
    ("llama3.1", '<function=f>{"a": 1}</function><|eom_id|>'),
    ("llama3.1", "<|python_tag|>print(2 + 2)<|eom_id|>"),
    ("llama3.1", "It is <sunny> {today}.<|eot_id|>more"),
    ("llama3.1", "<functional text"),
    ("llama3.2", '[get_weather(city="北京"), f(a=[1, 2])]<|eom_id|>'),
    ("llama3.2", "<|python_tag|>not a list<|eom_id|>"),
    ("llama3.2", "The weather is [fine].<|eot_id|>"),
    ("llama3.2", "[f(a="),
    (
        "gpt-oss",
        "<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    ),
    (
        "gpt-oss",
        "<|channel|>commentary to=functions.a<|message|>{}<|call|><|start|>assistant to=functions.b"
        '<|channel|>commentary<|message|>{"x": 1}<|call|>',
    ),
    (
        "gpt-oss",
        "<|channel|>final<|message|>Sunny <|end|><|start|>assistant<|channel|>final<|message|> and warm.<|return|>",
    ),
    ("gpt-oss", '<|channel|>commentary to=functions.f<|message|>{"a": 1'),
    ("gpt-oss", "<|channel|>final<|message|>no end"),
    ("qwen3", 'Sure.<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'),
]


def _rendered():
    out = []
    for name, r in render_all("weather", families=FAMILIES).items():
        if isinstance(r, FamilyRendering):
            out.append((name, r.call))
    return out


ALL = CASES + _rendered()


def _chunks(text, cuts):
    points = sorted({min(c, len(text)) for c in cuts})
    pieces, last = [], 0
    for p in points + [len(text)]:
        pieces.append(text[last:p])
        last = p
    return pieces


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(ALL), st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_any_chunking_equals_the_one_shot_reader(case, cuts):
    family, text = case
    events = list(family_stream_events(_chunks(text, cuts), family))
    assert assemble(events) == read_calls(text, family), (family, text, cuts)


def test_one_character_at_a_time_names_each_call_before_it_is_done():
    for family, text in ALL:
        events = list(family_stream_events(list(text), family))
        done = [i for i, e in enumerate(events) if isinstance(e, CallDone)]
        names = [i for i, e in enumerate(events) if isinstance(e, CallName)]
        if done:
            assert names and names[0] < done[0], (family, text)
            assert any(isinstance(e, CallStarted) for e in events[: done[0]])
        leaked = "".join(e.text for e in events if isinstance(e, TextDelta))
        for marker in ("[TOOL_CALLS]", "<|python_tag|>", "<|call|>", "<|eom_id|>"):
            assert marker not in leaked, (family, text)


def test_harmony_call_is_done_when_call_arrives_not_at_the_end():
    p = FamilyStreamParser("gpt-oss")
    p.feed("<|channel|>commentary to=functions.f<|message|>{}")
    assert [type(e) for e in p.feed("<|call|>")] == [CallDone]


def test_the_name_is_read_before_the_stream_ends():
    for family, text in _rendered():
        if family.startswith("qwen"):
            continue
        p = FamilyStreamParser(family)
        during = [e for ch in text for e in p.feed(ch)]  # finish() not called: the stream is still open
        assert any(isinstance(e, CallName) and e.name == "get_weather" for e in during), family
