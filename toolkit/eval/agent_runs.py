"""Summaries of saved agent-pattern and RAG runs (``benchmarks/patterns.py`` writes the runs; notebook 09 and the
ledger read them): rates with Wilson intervals, tokens and turns per task, the main context with and without
sub-agent isolation, and the per-mode RAG rows.

What it does
- ``summarize(runs)``: one row per pattern (in ``toolkit.patterns.registry.PATTERNS`` order): n, successes, rate
  and its Wilson 95% interval, mean prefilled and decoded tokens, turns and main-context peak per task.
- ``isolation(runs)``: per task, the main context's prompt length turn by turn, sub-agent isolated vs shared.
- ``table(rows)`` / ``markdown(doc)``: the printed table and the saved ``.md``.
- ``rag_summary(runs)``: one row per RAG mode: correct and supported answers (each with a Wilson interval),
  recall@k, tokens, turns, searches, seconds and what reranking cost.

What it leaves out
- Running anything (the patterns and ``toolkit.rag.modes`` do), and resuming (the benchmark's file handling).
"""

from __future__ import annotations

from toolkit.eval.stats import wilson
from toolkit.patterns.names import NAMES


def summarize(runs: list[dict]) -> list[dict]:
    """One row per pattern: n, successes, rate with its Wilson interval, mean tokens and turns per task."""
    rows = []
    for name in NAMES:
        rs = [r for r in runs if r["pattern"] == name]
        if not rs:
            continue
        n, ok = len(rs), sum(r["success"] for r in rs)
        low, high = wilson(ok, n)

        def mean(k, rs=rs, n=n):
            return round(sum(r[k] for r in rs) / n, 1)

        rows.append(dict(pattern=name, n=n, successes=ok, rate=ok / n, low=low, high=high))
        rows[-1].update(
            prefilled=mean("prefilled"), decoded=mean("decoded"), turns=mean("n_turns"), main_peak=mean("main_peak")
        )
    return rows


def isolation(runs: list[dict]) -> list[dict]:
    """Per task: the main context's prompt length turn by turn, sub-agent isolated vs shared."""
    out = []
    for tid in dict.fromkeys(r["task"]["id"] for r in runs):
        pair = {r["pattern"]: r for r in runs if r["task"]["id"] == tid}
        if "subagent" in pair and "subagent_shared" in pair:
            sizes = {
                k: [t["prompt"] for t in pair[k]["turns"] if t["context"] == "main"]
                for k in pair
                if k.startswith("subagent")
            }
            out.append(dict(task=tid, isolated=sizes["subagent"], shared=sizes["subagent_shared"]))
    return out


def table(rows: list[dict]) -> str:
    head = "| pattern | n | success | 95% interval | prefilled/task | decoded/task | turns/task | main peak |"
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        lines.append(
            f"| {r['pattern']} | {r['n']} | {r['successes']}/{r['n']} ({100 * r['rate']:.0f}%) | "
            f"{100 * r['low']:.0f}–{100 * r['high']:.0f}% | {r['prefilled']:.0f} | {r['decoded']:.0f} | "
            f"{r['turns']:.1f} | {r['main_peak']:.0f} |"
        )
    return "\n".join(lines)


def markdown(doc: dict) -> str:
    m = doc["meta"]
    helped = sum(bool(r["notes"]) and any("started the answer" in n for n in r["notes"]) for r in doc["runs"])
    earlier = ", ".join(f"{e['date']} ({e['commit']})" for e in m.get("earlier", []))
    return (
        f"# Agent patterns — {m['label']}\n\n{m['model']} · {m['date']} · commit {m['commit']} · code {m.get('code')} · "
        f"{m['machine']['cpu']} ({m['machine']['cores']} cores, {m['machine'].get('torch_threads')} torch thread(s))"
        + (f" · resumed runs from {earlier}" if earlier else "")
        + f"\n\n{table(doc['summary'])}\n\nThe host started the answer (tools off, 'Based on the tool results,') in "
        f"{helped} of {len(doc['runs'])} runs; every run's `notes` say where the host helped.\n"
    )


def rag_summary(runs: list[dict]) -> list[dict]:
    """One row per mode: n, correct and supported (each with a Wilson interval), recall@k, tokens, turns, calls."""
    rows = []
    for mode in dict.fromkeys(r["mode"] for r in runs):
        rs = [r for r in runs if r["mode"] == mode]
        n = len(rs)
        row = dict(mode=mode, n=n)
        for key in ("correct", "supported"):
            ok = sum(r[key] for r in rs)
            row[key], (row[key + "_low"], row[key + "_high"]) = ok, wilson(ok, n)
        rec = [r["recall"] for r in rs if r["recall"] is not None]
        row.update(
            recall=sum(rec) / len(rec) if rec else None,
            prefilled=round(sum(r["prefilled"] for r in rs) / n, 1),
            decoded=round(sum(r["decoded"] for r in rs) / n, 1),
            turns=round(sum(r["n_turns"] for r in rs) / n, 2),
            searched=sum("search_policies" in [c["name"] for c in r["calls"]] for r in rs),
            seconds=round(sum(r.get("seconds", 0) for r in rs) / n, 1),
            rerank_tokens=round(sum(r.get("rerank_cost", {}).get("tokens", 0) for r in rs) / n, 1),
            rerank_seconds=round(sum(r.get("rerank_cost", {}).get("seconds", 0) for r in rs) / n, 1),
        )
        rows.append(row)
    return rows
