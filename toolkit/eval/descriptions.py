"""Tool-description variants for the same selection tasks (the "Tool Use" chapter's guidelines, §3.1): the
original BFCL descriptions, degraded ones and improved ones, each a pure function of the case.

What it does
- ``variants(case)`` → ``{variant: tools}`` for one BFCL ``multiple`` case (pick one function of several):
  ``original``; ``vague`` (every description becomes "Handles <noun> requests." — a vague verb, nothing
  specific); ``lookalike`` (every other function is renamed to a near-copy of the right one's name, so only
  the descriptions tell them apart); ``improved`` (a verb-first first sentence kept, plus "Do not use it to
  <what each other tool does>" — the guideline's "when not to use").
- ``selected(result, case)``: did the model call the right function (selection), beside BFCL's full AST verdict.

What it leaves out
- Hand-written descriptions per tool: the variants are mechanical so that the same rule applies to every case
  (and a reader can check it); they show the direction of an effect, not the best wording.
"""

from __future__ import annotations

import copy
import re

from toolkit.eval.bfcl import Case, to_schema


def _first_sentence(text: str) -> str:
    s = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0].rstrip(".")
    return s[:1].lower() + s[1:] if s else s


def _noun(name: str) -> str:
    return re.split(r"[._]", name)[-1].replace("-", " ") or "data"


def variants(case: Case) -> dict[str, list[dict]]:
    tools = [to_schema(f) for f in case.functions]
    target = next(iter(case.answers[0])) if case.answers else tools[0]["function"]["name"]
    out = {"original": tools}
    vague = copy.deepcopy(tools)
    for t in vague:
        t["function"]["description"] = f"Handles {_noun(t['function']['name'])} requests."
    out["vague"] = vague
    look = copy.deepcopy(tools)
    k = 0
    for t in look:
        if t["function"]["name"] != target:
            k += 1
            t["function"]["name"] = f"{target}{'_' if not target.endswith('_') else ''}{k}"
    out["lookalike"] = look
    better = copy.deepcopy(tools)
    for t in better:
        others = [
            _first_sentence(o["function"].get("description", ""))
            for o in tools
            if o["function"]["name"] != t["function"]["name"]
        ]
        desc = t["function"].get("description", "").strip()
        if others:
            desc += ("" if desc.endswith(".") else ".") + " Do not use it to " + "; or to ".join(others) + "."
        t["function"]["description"] = desc
    out["improved"] = better
    return out


def renamed_answer(case: Case, tools: list[dict]) -> Case:
    """The case with the tools' (possibly renamed) functions as its function docs, answers unchanged: the right
    function keeps its name in every variant, so BFCL's scorer applies as is."""
    c = copy.deepcopy(case)
    by = {f["name"]: f for f in case.functions}
    docs = []
    for orig, t in zip(case.functions, tools):
        d = copy.deepcopy(by[orig["name"]])
        d["name"], d["description"] = t["function"]["name"], t["function"]["description"]
        docs.append(d)
    c.functions = docs
    return c


def selected(calls: list, case: Case) -> bool:
    """Exactly one call, to the function the answer names."""
    return len(calls) == 1 and next(iter(calls[0])) == next(iter(case.answers[0]))
