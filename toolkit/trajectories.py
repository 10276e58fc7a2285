"""A small, seeded synthetic data set of tool-calling trajectories whose tool results are real.

Book §14.5.7 names what an SFT set for tool use needs: whole trajectories (question, call, result, answer),
multi-step chains, and samples where no tool is needed (so the model does not learn to over-call). This module
writes such trajectories for the calculator and weather tools. The assistant turns are scripted from a few
phrasings; every tool message holds what :data:`toolkit.tools.TOOLS` returned when the call was actually run.

Kinds: ``calc`` (one calculator call), ``weather`` (one get_weather call), ``parallel`` (two weather calls in one
turn), ``chain`` (weather, then a calculator call that uses its result), ``multi_turn`` (a calculator question,
then a second user question about the weather) and ``no_tool`` (answered directly).

Leaves out: errors from tools, refusals of unsafe calls, reasoning text, languages other than English and a few
Chinese city names. It is a teaching set, not a training recipe.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from toolkit.tools import TOOLS, WEATHER_TABLE, schemas

KINDS = ("calc", "weather", "parallel", "chain", "multi_turn", "no_tool")
TOOL_NAMES = ("calculator", "get_weather")
SYSTEM = "You are a helpful assistant. Use a tool when it helps."

_CALC_Q = ("What is {e}?", "Please compute {e}.", "Calculate {e} for me.", "{e} = ?")
_WEATHER_Q = ("What's the weather in {c}?", "How is the weather in {c} today?", "Weather for {c}, please.")
_PARALLEL_Q = ("Compare the weather in {a} and {b}.", "What's the weather in {a} and in {b}?")
_CHAIN_Q = ("What is the temperature in {c} plus {n} degrees?", "Take the temperature in {c} and add {n}.")
_NO_TOOL = (
    ("Hello!", "Hello! Ask me to calculate something or to look up the weather."),
    ("Thanks, that is all.", "You're welcome!"),
    ("What can you do?", "I can do arithmetic with a calculator and look up the weather in a few cities."),
    ("Say hi in French.", "Bonjour !"),
    ("What is the capital of France?", "Paris."),
)


@dataclass
class Trajectory:
    kind: str
    messages: list[dict]
    tools: list[dict]
    calls: list[dict] = field(default_factory=list)  # {"name", "arguments", "result"} for every executed call


def _expr(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 9)
    return rng.choice(
        (
            f"{a} + {b}",
            f"{a} * {b}",
            f"{a} - {b}",
            f"({a} + {b}) * {c}",
            f"{a} * {c} - {b}",
            f"{a * c} / {c}",
            f"{b}% of {a * 10}",
        )
    )


class _Builder:
    """Accumulates messages; ``call`` runs the real tools and appends the assistant call and tool results."""

    def __init__(self, kind: str):
        self.t = Trajectory(kind, [{"role": "system", "content": SYSTEM}], schemas(TOOL_NAMES))
        self._n = 0

    def say(self, role: str, content: str) -> None:
        self.t.messages.append({"role": role, "content": content})

    def call(self, *calls: tuple[str, dict]) -> list[dict]:
        msg = {"role": "assistant", "content": "", "tool_calls": []}
        results = []
        self.t.messages.append(msg)
        for name, args in calls:
            self._n += 1
            cid = f"call_{self._n}"
            out = TOOLS[name].call(args)  # the real tool: its result is a fact, never scripted
            msg["tool_calls"].append({"id": cid, "type": "function", "function": {"name": name, "arguments": args}})
            results.append(
                {"role": "tool", "tool_call_id": cid, "name": name, "content": json.dumps(out, ensure_ascii=False)}
            )
            self.t.calls.append({"name": name, "arguments": args, "result": out})
        self.t.messages.extend(results)
        return [c["result"] for c in self.t.calls[-len(calls) :]]


def _weather_text(w: dict) -> str:
    return f"{w['city']}: {w['condition']}, {w['temperature']}°{'C' if w['unit'] == 'celsius' else 'F'}"


def make(kind: str, rng: random.Random) -> Trajectory:
    """One trajectory of ``kind`` drawn with ``rng``."""
    cities = sorted(WEATHER_TABLE)
    b = _Builder(kind)
    if kind in ("calc", "multi_turn"):
        e = _expr(rng)
        b.say("user", rng.choice(_CALC_Q).format(e=e))
        (r,) = b.call(("calculator", {"expression": e}))
        b.say("assistant", f"{e} = {r['result']}.")
        if kind == "multi_turn":
            c = rng.choice(cities)
            b.say("user", rng.choice(_WEATHER_Q).format(c=c))
            (w,) = b.call(("get_weather", {"city": c, "unit": "celsius"}))
            b.say("assistant", _weather_text(w) + ".")
    elif kind == "weather":
        c, unit = rng.choice(cities), rng.choice(("celsius", "fahrenheit"))
        b.say("user", rng.choice(_WEATHER_Q).format(c=c) + (" In Fahrenheit." if unit == "fahrenheit" else ""))
        (w,) = b.call(("get_weather", {"city": c, "unit": unit}))
        b.say("assistant", _weather_text(w) + ".")
    elif kind == "parallel":
        x, y = rng.sample(cities, 2)
        b.say("user", rng.choice(_PARALLEL_Q).format(a=x, b=y))
        w1, w2 = b.call(
            ("get_weather", {"city": x, "unit": "celsius"}), ("get_weather", {"city": y, "unit": "celsius"})
        )
        b.say("assistant", f"{_weather_text(w1)}; {_weather_text(w2)}.")
    elif kind == "chain":
        c, n = rng.choice(cities), rng.randint(1, 20)
        b.say("user", rng.choice(_CHAIN_Q).format(c=c, n=n))
        (w,) = b.call(("get_weather", {"city": c, "unit": "celsius"}))
        e = f"{w['temperature']} + {n}"
        (r,) = b.call(("calculator", {"expression": e}))  # the second call depends on the first result
        b.say("assistant", f"It is {w['temperature']}°C in {w['city']}; plus {n} that makes {r['result']}°C.")
    elif kind == "no_tool":
        q, a = rng.choice(_NO_TOOL)
        b.say("user", q)
        b.say("assistant", a)
    else:
        raise ValueError(f"unknown kind {kind!r}; choose one of {KINDS}")
    return b.t


def dataset(n: int, seed: int = 0, kinds=KINDS, weights=None) -> list[Trajectory]:
    """``n`` trajectories, kinds drawn with ``weights`` (default: equal), reproducible from ``seed``."""
    rng = random.Random(seed)
    return [make(rng.choices(kinds, weights)[0], rng) for _ in range(n)]
