"""Every worked conversation of the kit, defined once.

What it does (book §14.5.2 steps 1–6; "Tool Use" §3.1)
- ``round_trip(name)`` / ``parallel_round_trip()``: the message lists of each request of one tool-call round trip,
  with the tool really executed by ``toolkit.tools`` and the assistant's messages scripted (what a well-behaved
  model emits), so rendering can be studied without a model.
- ``LOOP_EXAMPLES``: the questions the host loop runs on a real model (``toolkit.loop.examples``).
- ``stability_conversation()``: two queries with reasoning, for ``toolkit.prefix.prefix_stability``.
- ``tool_use_conversation()``: the message list as "Tool Use" §3.1 prints it (arguments as a JSON string).

What it leaves out
- Multi-round chains (the host loop builds those) and data sets (``toolkit.trajectories``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from toolkit.tools import TOOLS, schemas

# The worked questions, each written once: the system prompt (if any), the user's question, the call a
# well-behaved model makes, and how it answers (filled in from the real tool result).
CALCULATOR = dict(
    system="你是一个计算助手。你可以调用外部工具。",
    question="250的15%是多少？",
    tool="calculator",
    arguments={"expression": "250 * 15%"},
    answer="250的15%是{result}。",
)
WEATHER = dict(
    system=None,
    question="今天北京天气怎么样？",
    tool="get_weather",
    arguments={"city": "北京"},
    answer="北京今天{condition}，气温{temperature}°C。",
)
ROUND_TRIPS = {"calculator": CALCULATOR, "weather": WEATHER}


def first_messages(ex: dict) -> list[dict]:
    """The first request's messages of a worked question: its system prompt (if any) and the question."""
    return ([{"role": "system", "content": ex["system"]}] if ex["system"] else []) + [
        {"role": "user", "content": ex["question"]}
    ]


def call_text(ex: dict) -> str:
    """The assistant turn a well-behaved model writes for ``ex``: one ``<tool_call>`` block, as Qwen's template
    formats it (what scripted backends replay)."""
    return (
        "<tool_call>\n"
        + json.dumps({"name": ex["tool"], "arguments": ex["arguments"]}, ensure_ascii=False)
        + "\n</tool_call>"
    )


def answer_text(ex: dict, result: dict) -> str:
    """The final answer of ``ex`` given its tool's result."""
    return ex["answer"].format(**result)


@dataclass
class RoundTrip:
    name: str
    tools: list[dict]
    first: list[dict]  # request 1: what the model sees before it calls
    call: dict  # the assistant message carrying the tool call
    results: list[dict]  # the role="tool" message(s) with the executed result(s)
    answer: dict  # the assistant's final answer (scripted)
    executed: list[dict] = field(default_factory=list)

    @property
    def second(self) -> list[dict]:
        """Request 2: the same prefix plus the call and its result — a new request, longer prefix."""
        return self.first + [self.call] + self.results

    @property
    def full(self) -> list[dict]:
        return self.second + [self.answer]


def _call_message(name: str, arguments: dict, call_id: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def round_trip(name: str = "calculator") -> RoundTrip:
    """One round trip with the tool really executed by ``toolkit.tools``."""
    if name not in ROUND_TRIPS:
        raise ValueError(f"unknown example {name!r}; choose one of {sorted(ROUND_TRIPS)}")
    ex = ROUND_TRIPS[name]
    first = first_messages(ex)
    out = TOOLS[ex["tool"]].call(ex["arguments"])
    result = {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": ex["tool"],
        "content": json.dumps(out, ensure_ascii=False),
    }
    answer = {"role": "assistant", "content": answer_text(ex, out)}
    return RoundTrip(
        name, schemas(), first, _call_message(ex["tool"], ex["arguments"], "call_1"), [result], answer, [out]
    )


def parallel_round_trip(cities=("北京", "Paris")) -> RoundTrip:
    """Two independent calls in one assistant turn; their two results share one user turn."""
    first = [{"role": "user", "content": f"{cities[0]}和{cities[1]}今天天气怎么样？"}]
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "get_weather", "arguments": {"city": c}}}
        for i, c in enumerate(cities, 1)
    ]
    outs = [TOOLS["get_weather"].call({"city": c}) for c in cities]
    results = [
        {
            "role": "tool",
            "tool_call_id": f"call_{i}",
            "name": "get_weather",
            "content": json.dumps(o, ensure_ascii=False),
        }
        for i, o in enumerate(outs, 1)
    ]
    answer = {
        "role": "assistant",
        "content": "; ".join(f"{o['city']}: {o['condition']}, {o['temperature']}°C" for o in outs),
    }
    return RoundTrip(
        "parallel", schemas(), first, {"role": "assistant", "content": "", "tool_calls": calls}, results, answer, outs
    )


# ================================================================ prefix stability of a template
def stability_conversation() -> list[dict]:
    """Two user queries, each answered after one tool call; assistant turns carry reasoning (Qwen3 shows it)."""
    c = CALCULATOR
    calc = {"id": "call_1", "type": "function", "function": {"name": c["tool"], "arguments": c["arguments"]}}
    weather = {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "北京"}}}
    result = TOOLS[c["tool"]].call(c["arguments"])
    return [
        {"role": "user", "content": c["question"]},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "The user wants 15% of 250: use the calculator.",
            "tool_calls": [calc],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "name": c["tool"],
            "content": json.dumps(result, ensure_ascii=False),
        },
        {"role": "assistant", "content": answer_text(c, result), "reasoning_content": "The tool returned 37.5."},
        {"role": "user", "content": "北京今天天气怎么样？"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "A weather question: call get_weather.",
            "tool_calls": [weather],
        },
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "name": "get_weather",
            "content": '{"city": "北京", "temperature": 25, "condition": "sunny"}',
        },
        {"role": "assistant", "content": "北京今天晴，25°C。", "reasoning_content": "Sunny, 25 degrees."},
    ]


# ================================================================ the host loop's examples (a real model answers)
LOOP_EXAMPLES = {
    "calculator": dict(messages=first_messages(CALCULATOR), tools=["calculator"]),
    "weather": dict(messages=first_messages(WEATHER), tools=["get_weather", "calculator"]),
    "two_cities": dict(
        messages=[{"role": "user", "content": "What is the weather in Paris and in Tokyo today?"}],
        tools=["get_weather"],
    ),
}


# ================================================================ "Tool Use" §3.1 (Qwen2.5 printout)
def tool_use_conversation():
    """The calculator round trip as the chapter prints it: the call's arguments as a JSON string (OpenAI style),
    its own call id and tool description, the result as bare text."""
    sys_msg, user = first_messages(CALCULATOR)
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_abc123xyz",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "250 * 0.15"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_abc123xyz", "name": "calculator", "content": "37.5"}
    answer = {"role": "assistant", "content": answer_text(CALCULATOR, {"result": 37.5})}
    tools = [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "description": "计算数学表达式",
                "parameters": {
                    "type": "object",
                    "properties": {"expression": {"type": "string"}},
                    "required": ["expression"],
                },
            },
        }
    ]
    return [sys_msg, user, call, result, answer], tools
