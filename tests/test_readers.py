"""Each family's calls read back: the call its own package rendered (toolkit.families) reads as the conversation's
call; malformed calls become errors, never exceptions; a pythonic call is read with ast, never run."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.conversations import round_trip
from toolkit.families import FAMILIES, FamilyRendering, render_all
from toolkit.readers import FAMILY_KINDS, kind_of, read_calls, wrote_call

CALL = round_trip("weather").call["tool_calls"][0]["function"]


@pytest.fixture(scope="module")
def fam():
    return render_all("weather")


def test_each_familys_rendered_call_reads_back(fam):
    read = 0
    for name in FAMILIES:
        r = fam[name]
        if not isinstance(r, FamilyRendering):
            continue  # its package is missing (test_families says which)
        text, calls = read_calls(r.call, name)
        assert [(c.name, c.arguments, c.ok) for c in calls] == [(CALL["name"], CALL["arguments"], True)], name
        assert wrote_call(r.call, name), name
        read += 1
    assert read >= 2  # Qwen's two are always there


def test_kind_of():
    assert [kind_of(f) for f in ("qwen3", "mistral-v7", "llama3.1", "llama3.2", "gpt-oss")] == list(FAMILY_KINDS)
    text, (call,) = read_calls("x", "falcon")
    assert text == "" and call.error["type"] == "bad_call"


def test_mistral_v11_calls_and_errors():
    _, calls = read_calls(
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]f[CALL_ID]abc123def[ARGS]{}</s>', "mistral"
    )
    assert [(c.name, c.arguments, c.id) for c in calls] == [
        ("get_weather", {"city": "Paris"}, "call_1"),
        ("f", {}, "abc123def"),
    ]
    text, (bad,) = read_calls('Sure. [TOOL_CALLS][{"name": "f", "arguments": {', "mistral-v3")
    assert text == "Sure." and bad.error["type"] == "malformed_json"
    _, (bad,) = read_calls('[TOOL_CALLS]get_weather[ARGS]{"city": </s>', "mistral")
    assert bad.name == "get_weather" and bad.error["type"] == "malformed_json"
    assert read_calls("Just text.</s>", "mistral") == ("Just text.", [])


def test_llama31_formats():
    _, (c,) = read_calls('{"name": "f", "parameters": {"a": 1}}<|eot_id|>', "llama3.1")
    assert (c.name, c.arguments) == ("f", {"a": 1})
    _, (c,) = read_calls('<function=f>{"a": 1}</function><|eom_id|>', "llama3.1")
    assert (c.name, c.arguments) == ("f", {"a": 1})
    _, (c,) = read_calls("<function=f>{", "llama3.1")
    assert c.error["type"] == "unclosed_tag"
    _, (c,) = read_calls("<|python_tag|>print(2 + 2)<|eom_id|>", "llama3.1")
    assert (c.name, c.arguments) == ("code_interpreter", {"code": "print(2 + 2)"})
    assert read_calls("It is sunny.<|eot_id|>", "llama3.1") == ("It is sunny.", [])


def test_llama32_pythonic_list_is_read_never_run():
    _, calls = read_calls(
        '[f(a=1, b="x"), g(c=[1, 2], d={"k": None}), h(1), os.system(a="x"), i(a=__import__("os"))]', "llama3.2"
    )
    assert [(c.name, c.arguments) for c in calls[:2]] == [
        ("f", {"a": 1, "b": "x"}),
        ("g", {"c": [1, 2], "d": {"k": None}}),
    ]
    assert [c.error["type"] for c in calls[2:]] == ["bad_call"] * 3
    _, (c,) = read_calls("[f(a=", "llama3.2")
    assert not c.ok
    assert read_calls("The weather is fine.", "llama3.2") == ("The weather is fine.", [])


def test_harmony_channels_and_headers():
    text = (
        "<|channel|>analysis<|message|>Need the weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"city": "Paris"}<|call|>'
    )
    assert read_calls(text, "gpt-oss")[0] == ""  # thinking is neither text nor call
    (c,) = read_calls(text, "gpt-oss")[1]
    assert (c.name, c.arguments) == ("get_weather", {"city": "Paris"})
    assert read_calls("<|channel|>final<|message|>Sunny.<|return|>", "gpt-oss") == ("Sunny.", [])
    _, (c,) = read_calls('<|channel|>commentary to=functions.f<|message|>{"a": 1}', "gpt-oss")
    assert c.error["type"] == "unclosed_tag"
    _, (c,) = read_calls("<|channel|>commentary to=functions.f<|message|>{oops<|call|>", "gpt-oss")
    assert c.error["type"] == "malformed_json"


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["mistral", "llama3.1", "llama3.2", "gpt-oss", "qwen3"]), st.text(max_size=80))
def test_never_raises(family, junk):
    for text in (junk, "[TOOL_CALLS]" + junk, "<|python_tag|>" + junk, "[" + junk, "to=functions.f<|message|>" + junk):
        read_calls(text, family)
    read_calls(None, family)
