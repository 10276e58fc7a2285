"""Tables from scored results: accuracy with Wilson intervals per category × mode, the failure taxonomy, tokens
and seconds per case, the published BFCL rows to compare with, and the saved-results file format.

What it does
- ``summarize(results)`` → rows ``{mode, category, n, correct, accuracy, low, high, kinds, prompt_tokens,
  new_tokens, seconds}`` (means per case; ``seconds`` only over freshly generated cases).
- ``PUBLISHED``: BFCL leaderboard rows (V3 Qwen2.5-0.5B-Instruct (Prompt), V4 Qwen3-0.6B (FC)) taken like for like
  from the columns that match what the kit runs (``PUBLISHED_SOURCE``), not the leaderboard's averaged overall row.
- ``load_results(path)`` / ``save_results(path, section, data, meta)``: one JSON file per model holding
  sections (``accuracy``, ``pass_k``, ``chains``, ``descriptions``, ``levers``, ``levers_full``, ``gate``) each with
  the date, machine, model and commit of the run that wrote it; ``markdown(doc)`` renders the whole file as the
  ``.md`` beside it.

What it leaves out
- BFCL's weighted "overall" score (it mixes categories this kit does not run).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections import Counter
from pathlib import Path

from toolkit.eval.bfcl import CATEGORIES, MODES
from toolkit.eval.score import KINDS
from toolkit.eval.stats import wilson
from toolkit.paths import provenance

PUBLISHED_SOURCE = (
    "BFCL leaderboard data_non_live.csv: Python simple AST and non-live irrelevance, the columns the kit runs "
    "(as read on 2026-12-01)"
)
# Like for like: each figure from the column that matches what the kit runs. The leaderboard's overall rows average
# simple over Python/Java/JavaScript and irrelevance over non-live/live (58.25 and 16.44 for the first row below):
# those are not comparable with the kit's Python-only simple and non-live irrelevance, and are not used here.
PROMPT_ROW = "BFCL V3 Qwen2.5-0.5B-Instruct (Prompt)"  # the row the kit's targets are set against
PUBLISHED = {
    "BFCL V3 Qwen2.5-0.5B-Instruct (Prompt)": {
        "simple_python": 76.75,
        "multiple": 68.0,
        "parallel": 53.5,
        "parallel_multiple": 33.0,
        "irrelevance": 12.92,
    },
    "BFCL V4 Qwen3-0.6B (FC)": {  # its non-live irrelevance is not among the figures the kit has
        "simple_python": 86.5,
        "multiple": 86.0,
        "parallel": 67.5,
        "parallel_multiple": 69.5,
    },
}


def rate_row(category: str, rs) -> dict:
    """The scored part of a table row for results ``rs``: n, correct, accuracy, its Wilson interval, failure kinds."""
    n, ok = len(rs), sum(r.ok for r in rs)
    lo, hi = wilson(ok, n)
    return {
        "category": category,
        "n": n,
        "correct": ok,
        "accuracy": ok / n,
        "low": lo,
        "high": hi,
        "kinds": dict(Counter(r.kind for r in rs)),
    }


def summarize(results) -> list[dict]:
    groups: dict[tuple, list] = {}
    for r in results:
        groups.setdefault((r.mode, r.category), []).append(r)
    rows = []
    for mode in MODES:
        for cat in CATEGORIES + tuple(sorted({c for _, c in groups} - set(CATEGORIES))):
            rs = groups.get((mode, cat))
            if not rs:
                continue
            n = len(rs)
            timed = [r.seconds for r in rs if r.seconds > 0]
            rows.append(
                {
                    "mode": mode,
                    **rate_row(cat, rs),
                    "untagged_json": sum(r.untagged_json for r in rs),
                    "grammar_errors": sum(bool(r.grammar_error) for r in rs),
                    "prompt_tokens": sum(r.prompt_tokens for r in rs) / n,
                    "new_tokens": sum(r.new_tokens for r in rs) / n,
                    "seconds": (sum(timed) / len(timed)) if timed else None,
                    "timed_cases": len(timed),
                }
            )
    return rows


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            "",
        )
    except OSError:
        pass
    import torch  # lazy: only when a model ran

    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def commit(repo: str | Path = ".") -> str:
    """The commit a result was made with, as ``toolkit.paths.provenance`` reads it (the one reader: the kit's code
    and pins count, saved results and prose do not; a dirty tree reads ``<sha>+dirty``)."""
    return provenance(repo)["commit"]


def meta(model: str, repo=".", **extra) -> dict:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "model": model,
        "commit": commit(repo),
        **extra,
    }


class ResultsUnreadable(ValueError):
    """A results file that exists but is not a results document (truncated, hand-edited, another file)."""


def load_results(path: str | Path) -> dict:
    """The saved results document at ``path`` ({} when there is none); :class:`ResultsUnreadable` in one line when
    the file is not one (a run never overwrites it then: nothing saved is lost)."""
    p = Path(path)
    if not p.exists():
        return {}
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsUnreadable(f"{p} is not a readable results file ({str(e)[:120]}); move it aside") from None
    if not isinstance(doc, dict):
        raise ResultsUnreadable(f"{p} is not a results file (a JSON {type(doc).__name__}, not an object)")
    return doc


def save_results(path: str | Path, section: str, data, run_meta: dict) -> dict:
    """Replace one section of the results file (keeping the others) and rewrite the ``.md`` beside it."""
    p = Path(path)
    doc = load_results(p)
    doc[section] = {"meta": run_meta, "data": data}
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    p.with_suffix(".md").write_text(markdown(doc))
    return doc


def percent(x) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def accuracy_table(rows: list[dict]) -> str:
    lines = [
        "| category | " + " | ".join(f"{m} (n, %, 95% CI)" for m in MODES) + " | " + " | ".join(PUBLISHED) + " |",
        "|---|" + "---|" * (len(MODES) + len(PUBLISHED)),
    ]
    by = {(r["mode"], r["category"]): r for r in rows}
    for cat in dict.fromkeys(r["category"] for r in rows):
        cells = []
        for m in MODES:
            r = by.get((m, cat))
            cells.append(
                "—"
                if r is None
                else f"{r['n']}, **{percent(r['accuracy'])}** [{percent(r['low'])}–{percent(r['high'])}]"
            )
        pub = [f"{PUBLISHED[k].get(cat, '—')}" for k in PUBLISHED]
        lines.append(f"| {cat} | " + " | ".join(cells) + " | " + " | ".join(pub) + " |")
    return "\n".join(lines)


def accuracy_report(rows: list[dict], speed: dict) -> str:
    """The accuracy run's printout: the accuracy, failure-taxonomy and cost tables, and this run's speed."""
    fresh = ", ".join(
        f"{m} {s['fresh_cases']} cases in {s['seconds']} s = {s['cases_per_s']} cases/s" for m, s in speed.items()
    )
    tables = (accuracy_table(rows), taxonomy_table(rows), cost_table(rows))
    return "\n\n".join(tables) + f"\n\nthis run (fresh generations only): {fresh}"


def taxonomy_table(rows: list[dict]) -> str:
    kinds = [k for k in KINDS if k != "ok" and any(r["kinds"].get(k) for r in rows)]
    lines = [
        "| mode | category | n | " + " | ".join(kinds) + " | untagged JSON |",
        "|---|---|---|" + "---|" * (len(kinds) + 1),
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['category']} | {r['n']} | "
            + " | ".join(str(r["kinds"].get(k, 0)) for k in kinds)
            + f" | {r['untagged_json']} |"
        )
    return "\n".join(lines)


def cost_table(rows: list[dict]) -> str:
    lines = [
        "| mode | category | prompt tokens | new tokens | s/case (timed cases) | cases/hour |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["seconds"]
        lines.append(
            f"| {r['mode']} | {r['category']} | {r['prompt_tokens']:.0f} | {r['new_tokens']:.1f} | "
            + (f"{s:.2f} ({r['timed_cases']})" if s else "—")
            + " | "
            + (f"{3600 / s:.0f}" if s else "—")
            + " |"
        )
    return "\n".join(lines)


def _meta_line(m: dict) -> str:
    mc = m.get("machine", {})
    return (
        f"date {m.get('date')}, model {m.get('model')}, commit {m.get('commit')}, machine {mc.get('cpu')} "
        f"({mc.get('cores')} cores, torch threads {mc.get('torch_threads')}, gpu {mc.get('gpu')})"
        + "".join(f", {k} {v}" for k, v in m.items() if k not in ("date", "model", "commit", "machine"))
    )


def pass_k_table(table: list[dict]) -> str:
    """pass^k beside the naive p̄^k, one row per k (``toolkit.eval.stats.pass_k_table``'s rows)."""
    lines = ["| k | pass^k | p̄^k | tasks |", "|---|---|---|---|"]
    lines += [f"| {r['k']} | {r['pass_hat_k']:.3f} | {r['naive']:.3f} | {r['tasks']} |" for r in table]
    return "\n".join(lines)


def chains_table(rows: list[dict]) -> str:
    """Measured k-step chain success (Wilson 95% interval) beside the product of measured per-step rates
    (``toolkit.eval.chain_table.table``'s rows; older saves without intervals print "—")."""
    lines = [
        "| lever | k | chains | chain success [95% CI] | product of step rates | steps ok / steps | rounds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = f" [{percent(r['low'])}–{percent(r['high'])}]" if "low" in r else ""
        prod = "—" if r.get("product") is None else percent(r["product"])
        rounds = f"{r['rounds']:.1f}" if "rounds" in r else "—"
        lines.append(
            f"| {r['lever']} | {r['k']} | {r['n']} | {percent(r['success'])}{ci} | {prod} | "
            f"{r['steps_ok']}/{r['steps']} | {rounds} |"
        )
    return "\n".join(lines)


def descriptions_table(rows: list[dict]) -> str:
    """Selection accuracy per tool-description variant, with its Wilson interval and the tools' token cost."""
    lines = ["| variant | mode | n | accuracy [95% CI] | tool tokens per request |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['variant']} | {r['mode']} | {r['n']} | {percent(r['accuracy'])} [{percent(r['low'])}–{percent(r['high'])}] | "
        f"{r['tool_tokens']:.0f} |"
        for r in rows
    ]
    return "\n".join(lines)


def levers_table(rows: list[dict]) -> str:
    """Constrained-mode accuracy per lever × category, against the lever-free baseline and the published
    BFCL V3 Qwen2.5-0.5B-Instruct (Prompt) row (``benchmarks/bfcl.py levers``), read from :data:`PUBLISHED` (a row's
    saved ``published_prompt`` is what the run compared with when it ran, and older runs saved the averaged row)."""
    lines = [
        "| lever | category | n | accuracy [95% CI] | vs baseline (points) | published (Prompt) | vs published (points) "
        "| calls/case | top failure |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        fails = {k: v for k, v in r["kinds"].items() if k != "ok"}
        top = max(fails, key=fails.get) if fails else "—"
        d_base = "—" if r.get("baseline") is None else f"{100 * (r['accuracy'] - r['baseline']):+.1f}"
        pub = PUBLISHED[PROMPT_ROW].get(r["category"])
        d_pub = "—" if pub is None else f"{100 * r['accuracy'] - pub:+.1f}"
        lines.append(
            f"| {r['lever']} | {r['category']} | {r['n']} | {percent(r['accuracy'])} [{percent(r['low'])}–{percent(r['high'])}] "
            f"| {d_base} | {'—' if pub is None else f'{pub:g}'} | "
            f"{d_pub} | {r['calls_per_case']:.2f} | "
            f"{top}{f' ({fails[top]})' if fails else ''} |"
        )
    return "\n".join(lines)


def gate_table(curve: dict, thresholds=(0.5, 0.6, 0.7, 0.8, 0.85, 0.9)) -> str:
    """Per category, the share of cases whose first-step call mass reaches each threshold (the gate would open a
    call there): the first-token gate's threshold as a dial (``benchmarks/bfcl.py gate``)."""
    cats = list(curve["share"])
    lines = ["| threshold | " + " | ".join(cats) + " |", "|---" * (len(cats) + 1) + "|"]
    for t in thresholds:
        i = curve["thresholds"].index(t)
        lines.append(f"| {t:g} | " + " | ".join(percent(curve["share"][c][i]) for c in cats) + " |")
    return "\n".join(lines)


SECTIONS = (  # (key in the results file, heading, the tables drawn from its data)
    (
        "accuracy",
        "Accuracy per category × mode (BFCL AST rules), with published rows",
        lambda d: [
            accuracy_table(d["rows"]),
            "## Failure taxonomy (counts)",
            taxonomy_table(d["rows"]),
            "## Tokens and time per case",
            cost_table(d["rows"]),
        ],
    ),
    ("pass_k", "pass^k (unbiased, C(c,k)/C(n,k) per task) vs naive p̄^k", lambda d: [pass_k_table(d["table"])]),
    (
        "chains",
        "Chains: measured k-step success vs the product of measured per-step rates",
        lambda d: [chains_table(d["rows"])],
    ),
    ("descriptions", "Tool-description variants (same selection tasks)", lambda d: [descriptions_table(d["rows"])]),
    (
        "levers",
        "Parallel-call levers, constrained decoding (seeded subset), against the published Prompt row",
        lambda d: [levers_table(d["rows"])],
    ),
    (
        "levers_full",
        "Parallel-call levers on whole categories, constrained decoding, against the published Prompt row",
        lambda d: [levers_table(d["rows"])],
    ),
    (
        "gate",
        "First-token gate as a dial: % of cases whose first-step call mass reaches the threshold",
        lambda d: [gate_table(d["curve"])],
    ),
)


def markdown(doc: dict) -> str:
    out = ["# BFCL and chain results (written by benchmarks/bfcl.py; do not edit by hand)", ""]
    for key, heading, tables in SECTIONS:
        if key in doc:
            out += [f"## {heading}", "", _meta_line(doc[key]["meta"]), ""]
            for part in tables(doc[key]["data"]):
                out += [part, ""]
    return "\n".join(out)
