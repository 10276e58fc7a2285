"""What ``benchmarks/bfcl.py`` saves per section, built from what it ran: the rows and per-case records of the
accuracy, lever, description and chain runs, and the chain-cache's one file per item.

What it does
- ``pass_k(results, samples)``: each complete task's verdicts and the pass^k table.
- ``case_rows(results)`` / ``lever_cases(results)`` / ``lever_rows(results, published)``: the saved per-case records and the levers' table rows
  (with each category's baseline and BFCL's published prompt-mode rate).
- ``description_row(variant, mode, results, scored, tools_of, cases, tokenizer)``: one description variant's row
  (right tool chosen, Wilson interval, full AST verdict, tool tokens per request) and its per-case records.
- ``chain_summary(records, levers, bound_key)``: the chains' table rows, isolated step rates with their intervals and the
  p^k bounds (over every comparable row, and per lever).
- ``ItemCache``: one JSON file per chain or step task (a killed chain run resumes).

What it leaves out
- Running anything (``toolkit.eval.run``, ``toolkit.eval.chain_table``), printing the tables (``toolkit.eval.report``)
  and the command line (the benchmark).
"""

from __future__ import annotations

import hashlib
import os

from toolkit.eval import chain_table
from toolkit.eval.descriptions import selected
from toolkit.eval.report import rate_row
from toolkit.eval.run import Cache
from toolkit.eval.stats import pass_k_table, wilson
from toolkit.render import tool_definition_cost


def case_rows(results) -> list[dict]:
    """The accuracy section's per-case records: id, mode, verdict and what the model wrote."""
    keys = ("id", "mode", "ok", "kind", "text", "calls", "prompt_tokens", "new_tokens")
    return [{k: getattr(r, k) for k in keys} for r in results]


def pass_k(results, samples: int) -> tuple[dict[str, list], list[dict]]:
    """Each task's verdicts (tasks with all ``samples`` only: a --cached-only run may hold part of one) and the
    pass^k table for k = 1 … samples."""
    per_task: dict[str, list] = {}
    for r in results:
        per_task.setdefault(r.id, []).append(r.ok)
    per_task = {k: v for k, v in per_task.items() if len(v) == samples}
    return per_task, pass_k_table([(len(v), sum(v)) for v in per_task.values()], range(1, samples + 1))


def lever_rows(results: dict, published: dict) -> list[dict]:
    """``results[(lever, category)]`` → one table row each: the rates, calls per case, that category's baseline
    lever and BFCL's published prompt-mode rate."""
    rows = []
    for (lever, cat), rs in results.items():
        if not rs:
            continue
        base = results.get(("baseline", cat))
        rows.append(
            {
                "lever": lever,
                **rate_row(cat, rs),
                "calls_per_case": sum(len(r.calls) for r in rs) / len(rs),
                "baseline": (sum(r.ok for r in base) / len(base)) if base else None,
                "published_prompt": published.get(cat),
            }
        )
    return rows


def lever_cases(results: dict) -> list[dict]:
    """The levers section's per-case records: lever, id, verdict and what the model wrote."""
    return [
        {"lever": lv, "id": r.id, "ok": r.ok, "kind": r.kind, "text": r.text}
        for (lv, _), rs in results.items()
        for r in rs
    ]


def description_row(variant, mode, results, scored, tools_of, cases, tokenizer) -> tuple[dict, list[dict]]:
    """One description variant: its table row and its per-case records (``scored``: each case with the renamed
    answer, ``tools_of``: the variant's tools per case id)."""
    n = len(results)
    picked = {r.id: selected(r.calls, scored[r.id]) for r in results}
    lo, hi = wilson(sum(picked.values()), n)
    done = [c for c in cases if c.id in picked]
    cost = sum(tool_definition_cost(tools_of[c.id], "qwen2.5", tokenizer, per_tool=False)["total"] for c in done)
    row = dict(variant=variant, mode=mode, n=n, accuracy=sum(picked.values()) / n, low=lo, high=hi)
    row.update(ast_accuracy=sum(r.ok for r in results) / n, tool_tokens=cost / len(done))
    per_case = [
        dict(variant=variant, id=r.id, selected=picked[r.id], ok=r.ok, kind=r.kind, text=r.text) for r in results
    ]
    return row, per_case


def chain_summary(records: list[dict], levers, bound_key: str) -> dict:
    """The chain table's rows, the isolated step rates (with counts and Wilson intervals) and the p^k bounds: over
    every comparable row under ``bound_key`` (the name the ledger reads it by), and per lever."""
    chains_run = [r for r in records if r["kind"] == "chain"]
    rates, step_n = chain_table.step_rates(records, levers)
    rows = chain_table.table(chains_run, rates)
    bounds = {bound_key: chain_table.bound(chain_table.comparable(rows))}
    for lever in dict.fromkeys(r["lever"] for r in rows):
        bounds[lever] = chain_table.bound([r for r in rows if r["lever"] == lever])
    intervals = {
        lever: {s: list(wilson(round(v * step_n[lever][s]), step_n[lever][s])) for s, v in r.items()}
        for lever, r in rates.items()
    }
    timed = [r["seconds"] for r in chains_run if r.get("seconds")]
    return dict(
        rows=rows,
        chains=[{k: v for k, v in r.items() if k not in ("cached", "kind")} for r in chains_run],
        step_rates=rates,
        step_n=step_n,
        step_intervals=intervals,
        bound=bounds,
        seconds_per_chain=round(sum(timed) / len(timed), 1) if timed else None,
    )


class ItemCache:
    """One JSON file per chain or step task under ``<cache>/chains/<model>/<settings>/`` (a killed run resumes)."""

    def __init__(self, root: str, model: str, version: int, **settings):
        self._c = Cache(os.path.join(root, "chains"), model, version=version, **settings)

    def _id(self, key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def get(self, key):
        return self._c.get("items", self._id(key))

    def put(self, key, rec):
        self._c.put("items", self._id(key), 0, {**rec, "key": key})
