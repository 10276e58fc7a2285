"""The two worked round trips the kit uses everywhere: a calculator question and a weather question.

``round_trip(name)`` builds the message lists of each request of one tool-call round trip (book §14.5.2 steps
1–6; "Tool Use" §3.1): the first request (system + user, tools attached), the assistant's call, the tool result
produced by actually running the kit's tool, and the second request with the longer prefix. The assistant
messages here are *scripted* (what a well-behaved model emits) so the rendering can be studied without a model;
the host loop (``toolkit.host``) is where a real model writes them.

Leaves out: multi-round chains (the host loop builds those) and parallel calls (see ``parallel_round_trip``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

EXAMPLES = {
    "calculator": dict(system="你是一个计算助手。你可以调用外部工具。", question="250的15%是多少？",
                       tool="calculator", arguments={"expression": "250 * 15%"},
                       answer="250的15%是{result}。"),
    "weather": dict(system=None, question="今天北京天气怎么样？", tool="get_weather",
                    arguments={"city": "北京"}, answer="北京今天{condition}，气温{temperature}°C。"),
}


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
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def round_trip(name: str = "calculator") -> RoundTrip:
    """One round trip with the tool really executed by ``toolkit.tools``."""
    from .tools import TOOLS, schemas

    if name not in EXAMPLES:
        raise ValueError(f"unknown example {name!r}; choose one of {sorted(EXAMPLES)}")
    ex = EXAMPLES[name]
    first = ([{"role": "system", "content": ex["system"]}] if ex["system"] else [])
    first.append({"role": "user", "content": ex["question"]})
    out = TOOLS[ex["tool"]].call(ex["arguments"])
    result = {"role": "tool", "tool_call_id": "call_1", "name": ex["tool"],
              "content": json.dumps(out, ensure_ascii=False)}
    answer = {"role": "assistant", "content": ex["answer"].format(**out)}
    return RoundTrip(name, schemas(), first, _call_message(ex["tool"], ex["arguments"], "call_1"), [result], answer,
                     [out])


def parallel_round_trip(cities=("北京", "Paris")) -> RoundTrip:
    """Two independent calls in one assistant turn; their two results share one user turn."""
    from .tools import TOOLS, schemas

    first = [{"role": "user", "content": f"{cities[0]}和{cities[1]}今天天气怎么样？"}]
    calls = [{"id": f"call_{i}", "type": "function", "function": {"name": "get_weather", "arguments": {"city": c}}}
             for i, c in enumerate(cities, 1)]
    outs = [TOOLS["get_weather"].call({"city": c}) for c in cities]
    results = [{"role": "tool", "tool_call_id": f"call_{i}", "name": "get_weather",
                "content": json.dumps(o, ensure_ascii=False)} for i, o in enumerate(outs, 1)]
    answer = {"role": "assistant", "content": "; ".join(f"{o['city']}: {o['condition']}, {o['temperature']}°C"
                                                        for o in outs)}
    return RoundTrip("parallel", schemas(), first, {"role": "assistant", "content": "", "tool_calls": calls},
                     results, answer, outs)
