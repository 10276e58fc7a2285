import json
import subprocess
import sys

import pytest

from toolkit.conversations import parallel_round_trip, round_trip
from toolkit.prefix import shared_prefix
from toolkit.render import SEGMENTS, render, segment_spans, tool_definition_cost
from toolkit.tokenizer import template_text


@pytest.mark.parametrize("template", ["qwen3", "qwen2.5"])
def test_calculator_round_trip_shape(template):
    rt = round_trip("calculator")
    r = render(rt.second, rt.tools, template)
    # the result comes back inside a *user* turn wrapped in <tool_response>, then the generation prompt
    assert (
        '<|im_start|>user\n<tool_response>\n{"expression": "250 * 15%", "result": 37.5}\n</tool_response><|im_end|>\n'
        in r.text
    )
    assert r.text.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>tool" not in r.text
    # tools are rendered as plain text into the system turn
    sys_turn = r.text.split("<|im_end|>")[0]
    assert sys_turn.startswith("<|im_start|>system\n") and '"name": "calculator"' in sys_turn
    assert r.tokens[-3].segment == "generation_prompt" and r.tokens[-1].text == "\n"


def test_call_tokens_and_flags():
    rt = round_trip("calculator")
    r = render(rt.second, rt.tools, "qwen3")
    calls = [t for t in r.tokens if t.text == "<tool_call>" and t.segment == "tool_call"]
    assert len(calls) == 1 and calls[0].id == 151657 and calls[0].special is False and calls[0].added is True
    ends = [t for t in r.tokens if t.id == 151645]
    assert ends and all(t.special and t.segment == "control" for t in ends)
    resp = [t for t in r.tokens if t.segment == "tool_response"]
    assert resp[0].id == 151665  # <tool_response> is one token in Qwen3
    r25 = render(rt.second, rt.tools, "qwen2.5")
    assert 151665 not in r25.ids
    assert "".join(t.text for t in r25.tokens if t.segment == "tool_response").startswith("<tool_response>")


def test_consecutive_tool_messages_share_one_user_turn():
    rt = parallel_round_trip()
    for template in ("qwen3", "qwen2.5"):
        r = render(rt.second, rt.tools, template)
        tail = r.text.split("</tool_call><|im_end|>\n")[-1]
        assert tail.count("<|im_start|>user") == 1 and tail.count("<tool_response>") == 2
        assert sum(t.id == 151657 and t.segment == "tool_call" for t in r.tokens) == 2  # two calls, one turn


def test_segments_cover_every_token_and_reassemble_text():
    rt = round_trip("weather")
    for template in ("qwen3", "qwen2.5"):
        r = render(rt.full, rt.tools, template, add_generation_prompt=False)
        assert {t.segment for t in r.tokens} <= set(SEGMENTS)
        assert "".join(r.text[t.start : t.end] for t in r.tokens) == r.text
        assert sum(r.counts.values()) == len(r.ids)
        for seg in ("control", "tools", "user", "assistant", "tool_call", "tool_response"):
            assert r.counts[seg] > 0, (template, seg)
        assert r.counts["generation_prompt"] == 0
        assert r.segment_text("assistant")[-1].startswith("北京今天")
        # spans tile the text with no gaps or overlaps
        spans = segment_spans(r.text)
        assert spans[0][0] == 0 and spans[-1][1] == len(r.text)
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))


def test_think_segment_after_last_query():
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<think>\nplan\n</think>\n\nhello"}]
    r = render(msgs, None, "qwen3", add_generation_prompt=False)
    assert "<think>\nplan\n</think>" in r.text
    assert r.counts["think"] > 0 and r.segment_text("assistant") == ["hello"]


@pytest.mark.parametrize("template", ["qwen3", "qwen2.5"])
def test_appending_turns_keeps_prefix_when_template_only_appends(template):
    rt = round_trip("calculator")
    first = render(rt.first, rt.tools, template)
    second = render(rt.second, rt.tools, template)
    # The first request ends with the generation prompt, which the call then continues.
    assert shared_prefix(first, second) == len(first)
    assert second.ids[: len(first)] == first.ids


def test_qwen3_history_rewrite_is_measured():
    # Qwen3 drops <think> from assistant turns before the last real user query: the next request is
    # not an extension of the previous one, and shared_prefix says where they part.
    turn1 = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nx\n</think>\n\nb"}]
    turn2 = turn1 + [{"role": "user", "content": "c"}]
    r1 = render(turn1, None, "qwen3", add_generation_prompt=False)
    r2 = render(turn2, None, "qwen3")
    n = shared_prefix(r1, r2)
    assert 0 < n < len(r1)
    assert "<think>" not in r2.text and "<think>" in r1.text


def test_tool_definition_cost_is_paid_per_tool():
    rt = round_trip("calculator")
    one = tool_definition_cost(rt.tools[:1])
    all_ = tool_definition_cost(rt.tools)
    assert one["n_tools"] == 1 and all_["n_tools"] == len(rt.tools)
    assert all_["total"] > one["total"] > 0
    assert all_["total"] == all_["preamble"] + sum(all_["per_tool"].values())
    assert one["preamble"] == all_["preamble"]  # the fixed instructions are paid once per request


def test_unknown_template_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown template"):
        template_text("llama3")


def test_cli_json_works_offline():
    out = subprocess.run(
        [sys.executable, "-m", "toolkit", "render", "--example", "calculator", "--template", "qwen3", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["ids"] == {"<tool_call>": 151657, "<|im_end|>": 151645}
    assert data["n_tokens"] == len(data["tokens"]) and data["tokens"][0]["id"] == 151644
    assert data["shared_prefix_with_first_request"] < data["n_tokens"]


def test_cli_text_table():
    out = subprocess.run(
        [sys.executable, "-m", "toolkit", "render", "--example", "weather", "--template", "qwen2.5", "--limit", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "<|im_start|>user\n<tool_response>" in out.stdout and "151644" in out.stdout
