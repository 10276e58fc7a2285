"""Dependent k-step chains on the kit's tools, measured beside the product of per-step rates (book §14.5.4,
table 14-11), with the section's levers.

What it does
- A chain starts at a landmark and walks up to 6 steps, each using the previous result: ``landmark_city`` (a
  fixed table defined here) → ``get_weather`` (°C) → ``convert_units`` (°C→°F) → ``calculator`` (×2) →
  ``calculator`` (−100) → ``convert_units`` (°F→°C). ``task(landmark, k)`` asks for the first k steps in one
  user message; ``expected_call(step, previous_result)`` is what a correct step looks like *given what the
  previous call actually returned*.
- ``run_chain(backend, tokenizer, task, **loop_kwargs)`` runs :func:`toolkit.loop.loop.run` (the kit's one loop) and
  ``score_chain(trace, task)`` walks the executed calls in order. Two scorings of the same run: ``strict``
  (the first wrong call ends the chain) and ``retry`` (one retry allowed after a call the tool rejected with an
  error — the §14.5.4 lever "retry after a tool error").
- ``step_tasks``: each step type alone (its input given in the question), to measure a per-step rate p in
  isolation. ``call_log(trace)`` keeps each executed call (turn, name, arguments, status, key result fields) so
  a saved chain says where it went wrong.
- The pair-lookup variant (parallel calls shortening the chain) is :mod:`toolkit.eval.pairs`; the table, the
  bound and the measuring run are :mod:`toolkit.eval.chain_table`.

What it leaves out
- Judging the final text answer: a chain succeeds when its k calls are right (the answer step is the host's
  business; the 0.5B model often re-emits JSON there).
- Conditional step rates (step i given steps 1..i-1 right, in the same conversation): the chains are set beside
  the product of rates measured on each step *alone*, which is what p^k assumes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from toolkit.backends.base import name_of
from toolkit.calculator import calculator
from toolkit.errors import ToolError
from toolkit.eval.choices import CITY_OF, MAX_K, STEPS
from toolkit.loop.loop import loop, run
from toolkit.loop.steps import Executed, Trace
from toolkit.tools import TOOLS, Tool, get_weather


def landmark_city(landmark: str) -> dict:
    """Finds the city a famous landmark is in, from the kit's fixed table. Do not use it for addresses.

    Args:
        landmark: The landmark's name, e.g. "Eiffel Tower".
    """
    key = next((k for k in CITY_OF if k.lower() == str(landmark).strip().lower()), None)
    if key is None:
        raise ToolError(f"landmark_city: unknown landmark {landmark!r}; known: {', '.join(CITY_OF)}")
    return {"landmark": key, "city": CITY_OF[key]}


LANDMARK_TOOL = Tool.from_function(landmark_city, bounds={"landmark": {"maxLength": 40}})


def tools() -> dict:
    return {
        "landmark_city": LANDMARK_TOOL,
        "get_weather": TOOLS["get_weather"],
        "convert_units": TOOLS["convert_units"],
        "calculator": TOOLS["calculator"],
    }


_ASK = {
    "landmark_city": "find the city the {landmark} is in",
    "get_weather": "get that city's current temperature in Celsius",
    "c_to_f": "convert that temperature from Celsius to Fahrenheit with convert_units",
    "times_two": "multiply the Fahrenheit value by 2 with the calculator",
    "minus_100": "subtract 100 from that with the calculator",
    "f_to_c": "convert the result, read as degrees Fahrenheit, to Celsius with convert_units",
}


@dataclass
class Task:
    landmark: str
    k: int
    question: str
    steps: tuple = field(default_factory=tuple)

    @property
    def rounds(self) -> int:
        return self.k  # every step needs the previous result: one round trip each

    def score(self, calls) -> ChainScore:
        return score_calls(calls, self)


def task(landmark: str, k: int) -> Task:
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be 1..{MAX_K}, got {k}")
    steps = STEPS[:k]
    parts = [_ASK[s].format(landmark=landmark) for s in steps]
    q = (
        "Use the tools, one step at a time, each step using the previous step's result: "
        + "; then ".join(parts)
        + ". Finally tell me the last result."
    )
    return Task(landmark, k, q, steps)


def as_number(x) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _close(a, b) -> bool:
    a, b = as_number(a), as_number(b)
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-3, abs_tol=0.05)


def _unit(u) -> str:
    u = str(u or "").strip().lower()
    return {"celsius": "c", "fahrenheit": "f", "kelvin": "k", "°c": "c", "°f": "f"}.get(u, u)


def step_ok(step: str, name: str | None, args: dict | None, prev: dict | None, landmark: str) -> bool:
    """Is this call the right one for ``step``, given what the previous call returned (``prev``)?"""
    args = args or {}
    if step == "landmark_city":
        return name == "landmark_city" and str(args.get("landmark", "")).strip().lower() == landmark.lower()
    if prev is None:
        return False
    if step == "get_weather":
        return (
            name == "get_weather"
            and str(args.get("city", "")).strip().lower() == str(prev.get("city", "")).lower()
            and args.get("unit", "celsius") == "celsius"
        )
    if step in ("c_to_f", "f_to_c"):
        src, dst = ("c", "f") if step == "c_to_f" else ("f", "c")
        value = prev.get("temperature", prev.get("result"))
        return (
            name == "convert_units"
            and _close(args.get("value"), value)
            and _unit(args.get("from_unit")) == src
            and _unit(args.get("to_unit")) == dst
        )
    if step in ("times_two", "minus_100", "difference"):
        value = as_number(prev.get("result", prev.get("value")))
        if name != "calculator" or value is None or not isinstance(args.get("expression"), str):
            return False
        want = {"times_two": value * 2, "minus_100": value - 100, "difference": value}[step]
        try:
            got = calculator(args["expression"]).get("result")
        except Exception:  # noqa: BLE001 — a bad expression is a wrong step, not a crash
            return False
        return _close(got, want)
    raise ValueError(f"unknown step {step!r}")


TOOL_ERRORS = ("error", "timeout")  # statuses of a call the tool (or the host's checks) rejected: retry may follow


@dataclass
class ChainScore:
    k: int
    strict_steps_ok: int  # leading steps right (strict)
    retry_steps_ok: int  # leading steps right when one retry after a tool error is allowed
    calls: int
    retried: bool
    rounds: int = 0  # turns in which the model made calls
    decided: bool = True  # False: more calls could still change a scoring (the walk ran out of calls)

    @property
    def strict(self) -> bool:
        return self.strict_steps_ok == self.k

    @property
    def retry(self) -> bool:
        return self.retry_steps_ok == self.k


def executed_calls(trace) -> list:
    """``CallResult`` objects of a :class:`toolkit.loop.loop.Trace`, in the order they ran."""

    return [r for s in trace.steps if isinstance(s, Executed) for r in s.results]


def score_calls(calls, t: Task) -> ChainScore:
    def walk(allow_retry: bool) -> tuple[int, bool, bool]:
        i, prev, retried = 0, None, False
        for c in calls:
            if i >= t.k:
                break
            res = c.result if isinstance(c.result, dict) else {}
            if c.status == "ok" and step_ok(t.steps[i], c.name, c.arguments, prev, t.landmark):
                prev, i = res, i + 1
                continue
            if allow_retry and not retried and c.status in TOOL_ERRORS:
                retried = True  # the tool said no: the model may try this step once more
                continue
            return i, retried, True  # a wrong call the tool accepted, or a repeat: the chain is off its path
        return i, retried, i >= t.k

    strict, _, d1 = walk(False)
    retry, retried, d2 = walk(True)
    return ChainScore(t.k, strict, retry, len(calls), retried, decided=d1 and d2)


def rounds(trace) -> int:
    """Turns of a trace in which calls ran (or were refused): the chain's length in round trips."""
    return sum(1 for s in trace.steps if isinstance(s, Executed) and s.results)


def call_log(trace) -> list[dict]:
    """The executed calls of a trace, small enough to save beside each chain (what to read when one fails)."""
    out = []
    for s in trace.steps:
        if isinstance(s, Executed):
            for r in s.results:
                res = r.result if isinstance(r.result, dict) else {"text": str(r.result)}
                keep = {k: res[k] for k in ("city", "temperature", "result", "type", "message") if k in res}
                out.append({"turn": s.turn, "name": r.name, "arguments": r.arguments, "status": r.status, **keep})
    return out


def run_chain(backend, tokenizer, t, until_decided: bool = False, **loop_kwargs):
    """Run a task (:class:`Task`, or ``toolkit.eval.pairs.PairTask``: anything with ``question``, ``k`` and
    ``score(calls)``) through the kit's loop; ``(trace, ChainScore)``. ``until_decided``: stop the loop as soon
    as more calls cannot change the score (all k steps right, or a wrong step no retry can undo) — the same
    score, fewer turns (the unscored answer turn is skipped); the trace then ends without a ``Stopped`` step.
    The backend's prefix cache is kept between runs (the tool definitions are prefilled once; greedy tokens
    are the same either way, only the work differs)."""
    # the same turn budget in series and in parallel (k calls + 2), so the parallel ask is not also a tighter cap
    kw = {"max_turns": t.k + 2, "parallel": False, "max_new_tokens": 96}
    kw.update(loop_kwargs)
    msgs = [{"role": "user", "content": t.question}]
    trace = Trace(name_of(backend), messages=msgs)
    for step in loop(backend, tokenizer, msgs, tools(), **kw):
        trace.steps.append(step)
        if until_decided and isinstance(step, Executed) and t.score(executed_calls(trace)).decided:
            break
    sc = t.score(executed_calls(trace))
    sc.rounds = rounds(trace)
    return trace, sc


def step_tasks(landmark: str) -> list[tuple[str, str, dict | None]]:
    """Each step alone: ``(step, question, prev)`` with the input the step needs stated in the question."""

    city = CITY_OF[landmark]
    w = get_weather(city)
    f = round(w["temperature"] * 9 / 5 + 32, 10)
    t2 = f * 2
    t3 = t2 - 100
    return [
        ("landmark_city", f"Use a tool to find the city the {landmark} is in.", None),
        ("get_weather", f"Use a tool to get the current temperature in {city} in Celsius.", {"city": city}),
        (
            "c_to_f",
            f"Use convert_units to convert {w['temperature']} degrees Celsius to Fahrenheit.",
            {"temperature": w["temperature"]},
        ),
        ("times_two", f"Use the calculator to multiply {f:g} by 2.", {"result": f}),
        ("minus_100", f"Use the calculator to subtract 100 from {t2:g}.", {"result": t2}),
        ("f_to_c", f"Use convert_units to convert {t3:g} degrees Fahrenheit to Celsius.", {"result": t3}),
    ]


def run_step(backend, tokenizer, landmark: str, step: str, question: str, prev, **loop_kwargs) -> bool:

    kw = {"max_turns": 1, "parallel": False, "max_new_tokens": 96}
    kw.update(loop_kwargs)
    trace = run(backend, tokenizer, [{"role": "user", "content": question}], tools(), **kw)
    calls = executed_calls(trace)
    return bool(calls) and calls[0].status == "ok" and step_ok(step, calls[0].name, calls[0].arguments, prev, landmark)
