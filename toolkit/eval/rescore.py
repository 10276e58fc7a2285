"""Saved BFCL outputs re-read and re-scored with today's reader and scorer, no model run (``benchmarks/bfcl.py
rescore``).

What it does
- ``rescore(doc, cases, stamp)``: for the sections that keep every output (``accuracy``, ``levers``,
  ``levers_full``), each saved text read back and scored again in place; each table row's counts follow, and each
  section's meta records when and how many verdicts changed. Returns the changes per section.

What it leaves out
- Outputs the grammar never produced (a schema xgrammar refused: nothing to re-read); writing the files (the
  benchmark does, through ``toolkit.eval.report``).
"""

from __future__ import annotations

from types import SimpleNamespace

from toolkit.eval.report import rate_row
from toolkit.eval.run import result_from


def rescore_section(section: dict, cases: dict, key: str, mode_of, lists_of) -> list:
    """Re-read and re-score each saved output of one section in place (rows of one ``key`` value, "mode" or
    "lever", make one table row); the rows' counts follow. Returns (key value, id, old kind, new kind) per change."""
    data, changed = section["data"], []
    for row in data["cases"]:
        if row["kind"] == "malformed" and "schema rejected" in str(row.get("detail", "")):
            continue  # the grammar refused the schema: nothing was generated to re-read
        r = result_from(cases[row["id"]], mode_of(row), 0, row["text"], 0, 0, 0.0, "stop", "", lists_of(row))
        if (r.ok, r.kind) != (row["ok"], row["kind"]):
            changed.append((row[key], row["id"], row["kind"], r.kind))
            row["ok"], row["kind"] = r.ok, r.kind
    for t in data["rows"]:
        rs = [c for c in data["cases"] if c[key] == t[key] and cases[c["id"]].category == t["category"]]
        t.update(rate_row(t["category"], [SimpleNamespace(ok=c["ok"], kind=c["kind"]) for c in rs]))
    return changed


def rescore(doc: dict, cases: dict, stamp: dict) -> dict[str, dict[str, int]]:
    """Every re-scorable section of ``doc`` in place; per section, how many verdicts changed from which kind to which
    (``stamp``: the date and commit recorded in each section's meta)."""
    out = {}
    for name, sec in doc.items():
        if name == "accuracy":
            changed = rescore_section(sec, cases, "mode", lambda r: r["mode"], lambda r: False)
        elif name in ("levers", "levers_full"):
            lv = sec["data"]["levers"]
            changed = rescore_section(
                sec,
                cases,
                "lever",
                lambda r, lv=lv: lv[r["lever"]].get("mode", "constrained"),
                lambda r, lv=lv: lv[r["lever"]].get("list_calls", False),
            )
        else:
            continue
        sec["meta"]["rescored"] = dict(stamp, changed=len(changed))
        kinds: dict[str, int] = {}
        for _, _, old, new in changed:
            kinds[f"{old} -> {new}"] = kinds.get(f"{old} -> {new}", 0) + 1
        out[name] = kinds
    return out
