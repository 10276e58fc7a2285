"""The kit's own chat templates against the real ones: identical strings, conversation by conversation.

- Qwen2.5: against the real template carried by the optional offline model's GGUF (``fetch.real_template()``).
- Qwen3: against golden renderings (tests/fixtures/qwen3_golden.json) made with the official Qwen3 template in a
  scratch folder outside the repo; the file says where that template came from. A ``hub`` test compares with
  the live ``Qwen/Qwen3-0.6B`` copy where the hub is reachable.
- Qwen3's history rewrite: earlier ``<think>`` blocks are dropped, so turn N is not always a prefix of turn N+1;
  we measure where the two part with ``shared_prefix``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from toolkit import render
from toolkit.prefix import shared_prefix
from toolkit.tokenizer import template_text

GOLDEN = Path(__file__).parent / "fixtures" / "qwen3_golden.json"

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression and return the number.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "for example 0.15 * 250"}},
            "required": ["expression"],
        },
    },
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "查询城市当前的天气 (current weather for a city).",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "城市名，例如 北京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TOOLS = [CALCULATOR, WEATHER]


def _call(name, args, wrap=True, as_string=False):
    fn = {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args}
    return {"type": "function", "function": fn} if wrap else fn


def _msg(role, content):
    return {"role": role, "content": content}


def _asst(content, *calls, **extra):
    """An assistant message: text, then any tool calls (``extra``: e.g. ``reasoning_content``)."""
    m = {"role": "assistant", "content": content, **extra}
    return {**m, "tool_calls": list(calls)} if calls else m


def _results(*contents):
    return [_msg("tool", c) for c in contents]


def _case(name, *messages, tools=TOOLS, **kwargs):
    return dict(name=name, messages=list(messages), tools=tools, kwargs=kwargs)


def conversations() -> list[dict]:
    """Reference conversations: each is ``{name, messages, tools, kwargs}`` (kwargs go to apply_chat_template)."""
    u_calc, u_bj, hi = _msg("user", "What is 15% of 250?"), _msg("user", "北京今天天气怎么样？"), _msg("user", "Hi")
    sys_ = _msg("system", "You are a careful assistant. Use tools for arithmetic.")
    calc = _call("calculator", {"expression": "0.15 * 250"})
    call_calc, res_calc = _asst("", calc), _msg("tool", "37.5")
    bj = _call("get_weather", {"city": "北京"})
    no_prompt = {"add_generation_prompt": False}
    c = [
        _case("user_only", u_calc, tools=None),
        _case("system_user", sys_, u_calc, tools=None),
        _case("tools_user", u_calc),
        _case("tools_system_user", sys_, u_calc),
        _case("one_call_then_result", u_calc, call_calc, res_calc),
        _case("round_trip_answer", sys_, u_calc, call_calc, res_calc, _asst("15% of 250 is 37.5."), **no_prompt),
        _case(
            "parallel_calls",
            _msg("user", "Weather in Beijing and in Shanghai, please."),
            _asst("", bj, _call("get_weather", {"city": "上海", "unit": "celsius"})),
            *_results('{"city": "北京", "temp_c": 21}', '{"city": "上海", "temp_c": 24}'),
        ),
        _case(
            "three_results_in_a_row",
            _msg("user", "Compute 1+1, 2*3 and 10/4."),
            _asst(None, *[_call("calculator", {"expression": e}) for e in ("1+1", "2*3", "10/4")]),
            *_results("2", "6", "2.5"),
        ),
        _case(
            "arguments_as_json_string",
            u_calc,
            _asst("", _call("calculator", {"expression": "0.15 * 250"}, as_string=True)),
            res_calc,
        ),
        _case("content_before_call", u_bj, _asst("我来查一下。", bj), *_results("晴，21°C")),
        _case(
            "call_without_function_wrapper",
            u_calc,
            _asst("", _call("calculator", {"expression": "0.15*250"}, wrap=False)),
            res_calc,
        ),
        _case(
            "multi_turn_plain",
            sys_,
            _msg("user", "Hi!"),
            _asst("Hello! How can I help?"),
            _msg("user", "Tell me a fact about the number 7."),
            tools=None,
        ),
        _case(
            "multi_turn_tools",
            u_calc,
            call_calc,
            res_calc,
            _asst("It is 37.5."),
            u_bj,
            _asst("", bj),
            *_results("晴，21°C"),
        ),
        _case(
            "chinese_round_trip",
            _msg("system", "你是一个乐于助人的助手。"),
            u_bj,
            _asst("", _call("get_weather", {"city": "北京", "unit": "celsius"})),
            *_results('{"天气": "晴", "温度": 21}'),
            _asst("北京今天晴，气温 21°C。"),
            **no_prompt,
        ),
        _case(
            "system_message_midway",
            hi,
            _asst("Hello."),
            _msg("system", "From now on answer in French."),
            _msg("user", "Bye"),
            tools=None,
        ),
        # --- <think> handling (Qwen3 drops reasoning before the last real user query; Qwen2.5 prints it as text)
        _case(
            "think_kept_after_last_query",
            u_calc,
            _asst("<think>\nI should use the calculator.\n</think>\n\n", calc),
            res_calc,
        ),
        _case(
            "think_dropped_before_last_query",
            hi,
            _asst("<think>\nA greeting; reply briefly.\n</think>\n\nHello!"),
            _msg("user", "What is 2+2?"),
            tools=None,
        ),
        _case(
            "reasoning_content_field",
            hi,
            _asst("Hello!", reasoning_content="Old reasoning, dropped later."),
            u_calc,
            _asst("", calc, reasoning_content="\nNeed the calculator.\n"),
            res_calc,
        ),
        _case(
            "reasoning_field_and_leading_newlines",
            u_calc,
            _asst("\n\n15% of 250 is 37.5.", reasoning_content="0.15*250"),
            tools=None,
            **no_prompt,
        ),
        _case("last_assistant_gets_empty_think", hi, _asst("Hello!"), tools=None, **no_prompt),
        _case(
            "tool_response_text_is_not_a_query",
            u_calc,
            _asst("<think>\nuse it\n</think>\n\n", calc),
            _msg("user", "<tool_response>\n37.5\n</tool_response>"),
        ),
        _case("enable_thinking_false", u_calc, enable_thinking=False),
        _case("enable_thinking_true", u_calc, tools=None, enable_thinking=True),
    ]
    return copy.deepcopy(c)


def _render(tok, case, chat_template):
    kw = dict(case["kwargs"])
    agp = kw.pop("add_generation_prompt", True)
    return tok.apply_chat_template(
        case["messages"],
        tools=case["tools"],
        chat_template=chat_template,
        tokenize=False,
        add_generation_prompt=agp,
        **kw,
    )


CASE_NAMES = [c["name"] for c in conversations()]


# ------------------------------------------------------------------ Qwen2.5: the real template, offline
@pytest.fixture(scope="module")
def real_qwen25_template():
    from toolkit import fetch

    tpl = fetch.real_template()
    assert tpl and "<tool_call>" in tpl and "You are Qwen, created by Alibaba Cloud" in tpl
    return tpl


@pytest.mark.real_model
@pytest.mark.parametrize("name", CASE_NAMES)
def test_qwen25_kit_template_matches_real(name, real_qwen25_template, qwen25_tok):
    case = next(c for c in conversations() if c["name"] == name)
    want = _render(qwen25_tok, case, real_qwen25_template)
    got = _render(qwen25_tok, case, template_text("qwen2.5"))
    assert got == want
    # The same string also gives the same ids through the model's own (GGUF-derived) tokenizer.
    assert qwen25_tok.encode(got, add_special_tokens=False) == _real_tokenizer().encode(want, add_special_tokens=False)


_REAL_TOK = {}


def _real_tokenizer():
    if "tok" not in _REAL_TOK:
        from transformers import AutoTokenizer

        from toolkit import fetch

        _REAL_TOK["tok"] = AutoTokenizer.from_pretrained(str(fetch.installed_folder()))
    return _REAL_TOK["tok"]


@pytest.mark.real_model
def test_qwen25_cases_cover_the_required_shapes(real_qwen25_template, qwen25_tok):
    """The comparison is only worth something if the rendered strings really exercise each feature."""
    texts = {c["name"]: _render(qwen25_tok, c, real_qwen25_template) for c in conversations()}
    assert len(texts) >= 10
    assert texts["parallel_calls"].count('<tool_call>\n{"name": "get_weather"') == 2
    assert texts["three_results_in_a_row"].count("<tool_response>") == 3
    assert texts["three_results_in_a_row"].count("<|im_start|>user") == 2  # the three results share one turn
    # Qwen2.5 JSON-encodes arguments that are already a string, so they come out quoted.
    assert '"arguments": "{\\"expression\\": \\"0.15 * 250\\"}"' in texts["arguments_as_json_string"]
    assert "北京今天晴" in texts["chinese_round_trip"]
    assert texts["user_only"].startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")


# ------------------------------------------------------------------ Qwen3: golden renderings of the real template
def _golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_qwen3_golden_file_says_where_it_came_from():
    g = _golden()
    src = g["source"]
    assert src["repo"] and src["path"] and src["commit"] and src["date"]
    assert len(g["cases"]) >= 10
    assert {c["name"] for c in g["cases"]} >= set(CASE_NAMES)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_qwen3_kit_template_matches_golden(name, qwen3_tok):
    case = next(c for c in _golden()["cases"] if c["name"] == name)
    got = _render(qwen3_tok, case, template_text("qwen3"))
    assert got == case["text"]


def test_qwen3_golden_shows_the_think_rules():
    """Facts the golden file must carry (so a regenerated file cannot silently lose them)."""
    t = {c["name"]: c["text"] for c in _golden()["cases"]}
    assert "<think>\nI should use the calculator.\n</think>\n\n<tool_call>" in t["think_kept_after_last_query"]
    assert "A greeting" not in t["think_dropped_before_last_query"]
    assert "<|im_start|>assistant\nHello!<|im_end|>" in t["think_dropped_before_last_query"]
    assert "Old reasoning" not in t["reasoning_content_field"]
    assert "<think>\nNeed the calculator.\n</think>" in t["reasoning_content_field"]
    assert t["last_assistant_gets_empty_think"].endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n"
    )
    assert t["enable_thinking_false"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert t["enable_thinking_true"].endswith("<|im_start|>assistant\n")
    assert not t["user_only"].startswith("<|im_start|>system")  # Qwen3 has no default system prompt
    # a user turn that only wraps a tool response is not "the last query": the think before it is kept
    assert "<think>\nuse it\n</think>" in t["tool_response_text_is_not_a_query"]


def test_qwen3_kit_template_matches_golden_turns(qwen3_tok):
    """The turn-by-turn renderings (used for the prefix test below) also match the official template."""
    for turn in _golden()["turns"]:
        got = qwen3_tok.apply_chat_template(
            turn["messages"],
            tools=TOOLS,
            chat_template=template_text("qwen3"),
            tokenize=False,
            add_generation_prompt=turn["add_generation_prompt"],
        )
        assert got == turn["text"]
    assert [t["messages"] for t in _golden()["turns"]] == [m for m, _ in _turns()]


def test_qwen25_template_rejects_non_string_text_content(qwen25_tok):
    """Qwen's own template fails on string + None; ours says what is wrong instead of printing "None"."""
    from jinja2 import TemplateError

    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]
    with pytest.raises(TemplateError, match="assistant message needs string content"):
        render.render_text(msgs, template="qwen2.5", add_generation_prompt=False, tokenizer=qwen25_tok)
    with pytest.raises(TemplateError, match="user message needs string content"):
        render.render_text(
            [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], template="qwen2.5", tokenizer=qwen25_tok
        )


@pytest.mark.hub
@pytest.mark.parametrize("name", CASE_NAMES)
def test_qwen3_kit_template_matches_live_hub(name, qwen3_tok):
    from transformers import AutoTokenizer

    hub = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")
    case = next(c for c in conversations() if c["name"] == name)
    assert _render(qwen3_tok, case, template_text("qwen3")) == _render(hub, case, hub.chat_template)


# ------------------------------------------------------------------ prefix stability across turns
def _turns():
    """A conversation grown turn by turn, as a host would send it: each entry is (messages, add_generation_prompt)."""
    u1 = {"role": "user", "content": "What is 15% of 250?"}
    a1 = {
        "role": "assistant",
        "content": "<think>\nUse the calculator.\n</think>\n\n",
        "tool_calls": [_call("calculator", {"expression": "0.15 * 250"})],
    }
    r1 = {"role": "tool", "content": "37.5"}
    a2 = {"role": "assistant", "content": "<think>\nThe tool said 37.5.\n</think>\n\n15% of 250 is 37.5."}
    u2 = {"role": "user", "content": "And 20%?"}
    return [
        ([u1], True),
        ([u1, a1], False),
        ([u1, a1, r1], True),
        ([u1, a1, r1, a2], False),
        ([u1, a1, r1, a2, u2], True),
    ]


def test_qwen3_tool_loop_appends_only_until_the_next_user_query(qwen3_tok):
    """Within one query the template only appends; the next real user query rewrites the history."""
    r = [render.render(m, TOOLS, "qwen3", add_generation_prompt=g, tokenizer=qwen3_tok) for m, g in _turns()]
    # Each step of the tool loop (model output, tool result, final answer) extends the previous one.
    for a, b in zip(r[1:4], r[2:4]):
        assert shared_prefix(a, b) == len(a)
    # The prompt the model answered from (gen prompt) is a prefix of its own transcript...
    assert shared_prefix(r[0], r[1]) == len(r[0])
    # ...but once u2 arrives, a1's and a2's <think> blocks are dropped: r[3] is NOT a prefix of r[4].
    before, after = r[3], r[4]
    n = shared_prefix(before, after)
    assert n < len(before)
    # They part exactly where a1's think block began: right after the first "<|im_start|>assistant\n".
    cut = before.text.index("<|im_start|>assistant\n") + len("<|im_start|>assistant\n")
    assert before.text[cut:].startswith("<think>") and not after.text[cut:].startswith("<think>")
    assert n == len(qwen3_tok.encode(before.text[:cut], add_special_tokens=False))
    assert "Use the calculator" in before.text and "Use the calculator" not in after.text


def test_qwen25_history_is_append_only(qwen25_tok):
    """Qwen2.5 has no think handling: every turn is a prefix of the next (a prefix cache reuses all of it)."""
    r = [render.render(m, TOOLS, "qwen2.5", add_generation_prompt=g, tokenizer=qwen25_tok) for m, g in _turns()]
    for a, b in zip(r, r[1:]):
        assert shared_prefix(a, b) == len(a)
