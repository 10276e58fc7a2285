"""Verifiable rewards for one rollout: a single call scored by the kit's AST rules, a decline, a multi-turn outcome.

What it does
- ``call_reward(text, tools, want)``: 1.0 when ``text`` is exactly the wanted ``<tool_call>`` block(s) and nothing
  else — judged by the kit's BFCL scorer (:func:`toolkit.eval.score.score`: name, arguments, count) — else 0.0.
  Binary, as Nemotron Tool-N1 found best; prose around a call, or a call written in prose, earns nothing.
- ``decline_reward(text)``: 1.0 for a plain-text answer with no call attempt, 0.0 for any ``<tool_call>`` or an
  empty answer.
- ``outcome_reward(met, results, needed)``: 1.0 when the host's strict check says the final answer states what the
  tools' results imply, minus :data:`COST` for every failed call, every repeated call and every call beyond
  ``needed``; never below -1.
- ``numbers_ok(answer, want, question)``: the strict number check the multi-turn tasks use — the numbers the answer
  states beyond those the question gave must be exactly ``{want}`` (listing many numbers fails).

What it leaves out
- Graded partial credit (ToolRL's reward): a call is right or wrong.
- Judging free text by a model: every check here is a rule a test can state.
"""

from __future__ import annotations

import json

from toolkit.eval.bfcl import Case
from toolkit.eval.questions import numbers as read_numbers
from toolkit.eval.read import decode_tagged
from toolkit.eval.score import score
from toolkit.loop.execute import CallResult
from toolkit.parse import parse_tool_calls, wrote_tag

COST = 0.25  # per failed, repeated or unneeded call
_TYPES = {"number": "float", "integer": "integer", "string": "string", "boolean": "boolean", "array": "array"}
_TYPES["object"] = "dict"


def _doc(schema: dict) -> dict:
    """A JSON-Schema tool as a BFCL function doc (the scorer's typing)."""
    f = schema.get("function", schema)
    props = {}
    for k, p in f.get("parameters", {}).get("properties", {}).items():
        props[k] = {**p, "type": _TYPES.get(p.get("type", "string"), "string")}
        if "items" in p:
            props[k]["items"] = {**p["items"], "type": _TYPES.get(p["items"].get("type", "string"), "string")}
    params = {"type": "dict", "properties": props, "required": f.get("parameters", {}).get("required", [])}
    return {"name": f["name"], "description": f.get("description", ""), "parameters": params}


def as_case(tools: list[dict], want: list[dict], cid: str = "rl") -> Case:
    """The wanted calls ``[{"name", "arguments"}]`` as a BFCL case: every argument's one allowed value."""
    answers = [{c["name"]: {k: [v] for k, v in c["arguments"].items()}} for c in want]
    for a, c in zip(answers, want):  # a parameter the call leaves out is optional ("")
        doc = _doc(next(t for t in tools if t.get("function", t)["name"] == c["name"]))
        for p in doc["parameters"]["properties"]:
            a[c["name"]].setdefault(p, [""])
    category = "parallel_multiple" if len(want) > 1 else "simple"
    return Case(cid, category, [], [_doc(t) for t in tools], answers)


def call_reward(text: str, tools: list[dict], want: list[dict]) -> float:
    """1.0 when ``text`` is exactly the wanted call(s), judged by the kit's AST scorer; else 0.0."""
    content, calls = parse_tool_calls(text)
    if content.strip() or not calls:
        return 0.0
    return 1.0 if score(as_case(tools, want), decode_tagged(text)).ok else 0.0


def decline_reward(text: str) -> float:
    """1.0 for a non-empty plain-text answer with no call attempt; 0.0 otherwise."""
    return 1.0 if text.strip() and not wrote_tag(text) else 0.0


def numbers(text: str) -> list[float]:
    """The numbers ``text`` states, read as the loop questions' strict judge reads them
    (:func:`toolkit.eval.questions.numbers`): "1,316" is 1316, "13,16" is 13 and 16, and
    text such as "1.2.3" never raises."""
    return read_numbers(text or "")


def numbers_ok(answer: str, want: float, question: str = "") -> bool:
    """The answer states ``want`` and no number beyond it and the question's own."""
    given = set(numbers(question))
    said = {n for n in numbers(answer) if n not in given}
    return len(said) == 1 and abs(next(iter(said)) - want) <= 1e-6 * max(1.0, abs(want))


def _key(r: CallResult) -> str:
    return json.dumps([r.name, r.arguments], sort_keys=True, ensure_ascii=False, default=str)


def call_costs(results: list[CallResult], needed: int) -> dict:
    """How many calls failed, repeated an earlier one, or went beyond the ``needed`` count."""
    seen, failed, repeated = set(), 0, 0
    for r in results:
        failed += not r.ok
        k = _key(r)
        repeated += k in seen
        seen.add(k)
    return {"failed": failed, "repeated": repeated, "unneeded": max(0, len(results) - needed)}


def outcome_reward(met: bool, results: list[CallResult], needed: int) -> float:
    """1.0 if ``met`` (0.0 if not), minus :data:`COST` per failed, repeated and unneeded call; at least -1."""
    c = call_costs(results, needed)
    return max(-1.0, float(met) - COST * (c["failed"] + c["repeated"] + c["unneeded"]))
