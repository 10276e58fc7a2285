"""Base model vs the kit's LoRA adapter on BFCL, like for like (§14.5.2: the format comes from training).

What it does
- ``LIKE_FOR_LIKE``: published BFCL rows taken from the columns that match what the kit runs (Python simple AST and
  non-live irrelevance, from the leaderboard's ``data_non_live.csv``), each with its source; the averaged rows the
  leaderboard's overall file prints (simple = mean of Python/Java/JavaScript, irrelevance = mean of non-live and
  live) are kept apart and marked as such, never mixed into the like-for-like columns.
- ``compare(base_doc, adapter_doc)``: per mode × category, the adapter's rows and the base model's rows on exactly
  the same cases (read from the per-case outputs both results files keep), with Wilson intervals, the failure
  taxonomy and the *tag rate*: the share of answers holding a ``<tool_call>`` block, where a call is due (the four
  call categories) and where none is (irrelevance).
- ``lost(before_doc, after_doc)``: what the cases the first model got right and the second missed became (the
  second's failure kinds), and how many of them are the first model's calls with stated arguments left out.
- ``markdown(cmp)``: the before/after table, the published rows beside it, the paired count of cases each side got
  right alone, and the taxonomy of what training did not fix, per mode.

What it leaves out
- Running anything (``benchmarks/bfcl.py accuracy --model qwen2.5-coder-0.5b+lora`` makes the adapter's file) and
  BFCL's live, multi-turn and agentic categories.
"""

from __future__ import annotations

from collections import Counter

from toolkit.eval.bfcl import CATEGORIES
from toolkit.eval.report import PUBLISHED, PUBLISHED_SOURCE
from toolkit.eval.stats import wilson
from toolkit.parse import wrote_tag

AVERAGED = "BFCL leaderboard overall row (simple = mean of Python/Java/JavaScript; irrelevance = non-live/live mean)"

LIKE_FOR_LIKE = {  # report.PUBLISHED's rows (one source of those figures) and the stretch row, the same columns
    "Qwen2.5-0.5B-Instruct (Prompt, V3)": dict(
        source=PUBLISHED_SOURCE, **PUBLISHED["BFCL V3 Qwen2.5-0.5B-Instruct (Prompt)"]
    ),
    "Hammer2.0-0.5b (FC, V3)": dict(
        source=PUBLISHED_SOURCE,
        simple_python=82.75,
        multiple=80.5,
        parallel=67.0,
        parallel_multiple=58.0,
        irrelevance=68.33,
    ),
    "Qwen3-0.6B (FC, V4)": dict(source=PUBLISHED_SOURCE, irrelevance=None, **PUBLISHED["BFCL V4 Qwen3-0.6B (FC)"]),
}

AVERAGED_ROWS = {
    "Hammer2.1-0.5b (FC, V4; fine-tune of the kit's base model on 60k + 7.5k samples)": dict(
        source=AVERAGED, simple=62.42, multiple=81.0, parallel=69.0, parallel_multiple=51.5, irrelevance=80.79
    )
}

TARGET_ROW = "Qwen2.5-0.5B-Instruct (Prompt, V3)"  # the target: each call category at least this row
STRETCH_ROW = "Hammer2.0-0.5b (FC, V3)"


def category_of(case_id: str) -> str:
    for cat in sorted(CATEGORIES, key=len, reverse=True):
        if case_id.startswith(cat + "_"):
            return cat
    raise ValueError(f"case id {case_id!r} names no BFCL category the kit runs")


def _cases(doc: dict) -> list[dict]:
    return (doc.get("accuracy") or {}).get("data", {}).get("cases", [])


def row(cases: list[dict]) -> dict:
    n, ok = len(cases), sum(bool(c["ok"]) for c in cases)
    lo, hi = wilson(ok, n) if n else (0.0, 0.0)
    tagged = sum(wrote_tag(c.get("text")) for c in cases)
    return dict(
        n=n,
        correct=ok,
        accuracy=ok / n if n else None,
        low=lo,
        high=hi,
        kinds=dict(Counter(c["kind"] for c in cases)),
        tagged=tagged,
        tag_rate=tagged / n if n else None,
    )


def compare(base_doc: dict, adapter_doc: dict) -> dict:
    """Rows for every (mode, category) the adapter's file holds, and the base model on the same case ids."""
    base = {(c["mode"], c["id"]): c for c in _cases(base_doc)}
    out: dict = {"rows": [], "missing_in_base": 0}
    groups: dict[tuple[str, str], list[dict]] = {}
    for c in _cases(adapter_doc):
        groups.setdefault((c["mode"], category_of(c["id"])), []).append(c)
    for (mode, cat), cs in sorted(groups.items(), key=lambda kv: (kv[0][0], CATEGORIES.index(kv[0][1]))):
        pairs = [(c, base[(mode, c["id"])]) for c in cs if (mode, c["id"]) in base]
        same = [b for _, b in pairs]
        out["missing_in_base"] += len(cs) - len(same)
        out["rows"].append(
            dict(
                mode=mode,
                category=cat,
                adapter=row(cs),
                base=row(same),
                # paired: cases only the adapter got right, and cases only the base model got right
                gained=sum(bool(a["ok"]) and not bool(b["ok"]) for a, b in pairs),
                lost=sum(bool(b["ok"]) and not bool(a["ok"]) for a, b in pairs),
            )
        )
    due = [r for r in out["rows"] if r["mode"] == "native" and r["category"] != "irrelevance"]
    none = [r for r in out["rows"] if r["mode"] == "native" and r["category"] == "irrelevance"]
    for who in ("adapter", "base"):
        n_due = sum(r[who]["n"] for r in due)
        n_none = sum(r[who]["n"] for r in none)
        out[f"{who}_tag_rate_due"] = sum(r[who]["tagged"] for r in due) / n_due if n_due else None
        out[f"{who}_tag_rate_none"] = sum(r[who]["tagged"] for r in none) / n_none if n_none else None
    out["adapter_model"] = (adapter_doc.get("accuracy") or {}).get("meta", {}).get("model")
    out["base_model"] = (base_doc.get("accuracy") or {}).get("meta", {}).get("model")
    return out


def _dropped(before: list, after: list) -> bool:
    """The same functions in the same order, each call's arguments a strict subset of the earlier call's (or equal)."""
    if not before or len(before) != len(after):
        return False
    if not all(
        isinstance(x, dict) and len(x) == 1 and isinstance(next(iter(x.values())), dict) for x in before + after
    ):
        return False
    pairs = [(next(iter(b.items())), next(iter(a.items()))) for b, a in zip(before, after)]
    names_same = all(bn == an for (bn, _), (an, _) in pairs)
    subsets = all(set(aa) <= set(ba) for (_, ba), (_, aa) in pairs)
    return names_same and subsets and any(set(aa) < set(ba) for (_, ba), (_, aa) in pairs)


def lost(before_doc: dict, after_doc: dict, mode: str = "native") -> dict:
    """Cases of ``mode`` the first file's model got right and the second's missed, where a call was due: their count,
    the second model's failure kinds, and ``dropped`` (those whose calls are the first model's with arguments left
    out). Cases only one file holds are skipped."""
    before = {c["id"]: c for c in _cases(before_doc) if c["mode"] == mode}
    out, kinds = [], Counter()
    for c in _cases(after_doc):
        b = before.get(c["id"])
        if c["mode"] != mode or b is None or category_of(c["id"]) == "irrelevance":
            continue
        if b["ok"] and not c["ok"]:
            kinds[c["kind"]] += 1
            out.append((c["id"], _dropped(b.get("calls") or [], c.get("calls") or [])))
    return dict(n=len(out), kinds=dict(kinds.most_common()), dropped=sum(d for _, d in out), ids=[i for i, _ in out])


def targets(cmp: dict) -> list[dict]:
    """The issue's targets, each with the measured value, the bar and the gap (native mode, adapter)."""
    nat = {r["category"]: r["adapter"] for r in cmp["rows"] if r["mode"] == "native"}
    out = []
    if cmp.get("adapter_tag_rate_due") is not None:
        out.append(dict(target="<tool_call> where a call is due", bar=95.0, got=100 * cmp["adapter_tag_rate_due"]))
    for cat in CATEGORIES:
        if cat not in nat:
            continue
        bar = 60.0 if cat == "irrelevance" else LIKE_FOR_LIKE[TARGET_ROW][cat]
        out.append(dict(target=f"native {cat}", bar=bar, got=100 * nat[cat]["accuracy"], n=nat[cat]["n"]))
    for t in out:
        t["met"] = t["got"] >= t["bar"]
        t["gap"] = round(t["got"] - t["bar"], 1)
    cons = {r["category"]: r for r in cmp["rows"] if r["mode"] == "constrained"}
    for cat, r in cons.items():
        a, b = r["adapter"]["accuracy"], r["base"]["accuracy"]
        if b is not None and a is not None:
            out.append(
                dict(
                    target=f"constrained {cat}: adapter >= base",
                    bar=100 * b,
                    got=100 * a,
                    met=a >= b,
                    gap=round(100 * (a - b), 1),
                    n=r["adapter"]["n"],
                )
            )
    return out


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def markdown(cmp: dict) -> str:
    lines = [
        f"adapter: {cmp['adapter_model']}",
        f"base: {cmp['base_model']}",
        "",
        "| mode | category | n | base | adapter [95% CI] | base tag rate | adapter tag rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in cmp["rows"]:
        a, b = r["adapter"], r["base"]
        lines.append(
            f"| {r['mode']} | {r['category']} | {a['n']} | {_pct(b['accuracy'])} | {_pct(a['accuracy'])} "
            f"[{_pct(a['low'])}–{_pct(a['high'])}] | {_pct(b['tag_rate'])} | {_pct(a['tag_rate'])} |"
        )
    lines += [
        "",
        f"native tag rate where a call is due: base {_pct(cmp['base_tag_rate_due'])}%, adapter "
        f"{_pct(cmp['adapter_tag_rate_due'])}%; where none is due (irrelevance): base "
        f"{_pct(cmp['base_tag_rate_none'])}%, adapter {_pct(cmp['adapter_tag_rate_none'])}%",
        "",
        "published, like for like (" + PUBLISHED_SOURCE + "):",
        "",
        "| row | " + " | ".join(CATEGORIES) + " |",
        "|---|" + "---|" * len(CATEGORIES),
    ]
    for name, pub in LIKE_FOR_LIKE.items():
        lines.append(f"| {name} | " + " | ".join("–" if pub[c] is None else f"{pub[c]:g}" for c in CATEGORIES) + " |")
    lines += ["", "averaged rows (not like for like: " + AVERAGED + "):", ""]
    for name, pub in AVERAGED_ROWS.items():
        lines.append(
            f"- {name}: simple {pub['simple']:g}, multiple {pub['multiple']:g}, parallel {pub['parallel']:g}, "
            f"parallel_multiple {pub['parallel_multiple']:g}, irrelevance {pub['irrelevance']:g}"
        )
    lines += ["", "targets (native mode, adapter; constrained: adapter vs base):", ""]
    for t in targets(cmp):
        lines.append(
            f"- {t['target']}: {t['got']:.1f} vs {t['bar']:.1f} — {'met' if t['met'] else 'missed by'}"
            + ("" if t["met"] else f" {-t['gap']:.1f} points")
        )
    lines += ["", "paired, on the same cases (adapter right where the base model was wrong / the reverse):", ""]
    for r in cmp["rows"]:
        if "gained" in r:
            lines.append(f"- {r['mode']} {r['category']}: +{r['gained']} / -{r['lost']}")
    if any(r["mode"] == "native" for r in cmp["rows"]):
        lines += ["", "what training did not fix (native mode, adapter, failure kinds):", ""] + _kinds(cmp, "native")
    for mode in ("prompt", "constrained"):
        if any(r["mode"] == mode for r in cmp["rows"]):
            lines += ["", f"{mode} mode, adapter, failure kinds:", ""] + _kinds(cmp, mode)
    return "\n".join(lines) + "\n"


def _kinds(cmp: dict, mode: str) -> list[str]:
    out = []
    for r in cmp["rows"]:
        if r["mode"] == mode:
            bad = {k: v for k, v in r["adapter"]["kinds"].items() if k != "ok"}
            out.append(
                f"- {r['category']}: "
                + (", ".join(f"{k} {v}" for k, v in sorted(bad.items(), key=lambda kv: -kv[1])) or "none")
            )
    return out
