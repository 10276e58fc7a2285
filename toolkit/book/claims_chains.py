"""§14.5.4 measured: the kit's k-step chains (``python benchmarks/bfcl.py chains`` saves them) beside the product
of per-step rates measured on each step alone; read from ``benchmarks/results/bfcl_qwen2.5-coder-0.5b.json``.
The verdicts follow the saved Wilson intervals: "p^k holds" where the product lies inside the measured interval,
"upper bound" unless the product lies *below* the interval more often than above it (then p^k was a lower bound).

What it leaves out: anything not in the saved results (no model runs here).
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.book.ledger import Claim, make_verdict
from toolkit.paths import results_file

BFCL_RESULTS = "bfcl_qwen2.5-coder-0.5b.json"  # in benchmarks/results (toolkit.paths.results_file finds it)
BOUND_KEY = "strict, all levers but plain"  # the section's bound over the rows that test p^k


def chain_claims(path: Path | None = None) -> list[Claim]:
    """§14.5.4 measured: the kit's k-step chains (``python benchmarks/bfcl.py chains`` saves them) beside the
    product of per-step rates measured on each step alone."""
    path = results_file(BFCL_RESULTS, required=False) if path is None else Path(path)
    doc = json.loads(path.read_text(encoding="utf-8")) if (path is not None and path.exists()) else {}
    data = doc.get("chains", {}).get("data", {})
    # the rows toolkit.eval.chain_table.bound compared when benchmarks/bfcl.py saved them (strict scoring, a
    # measured product, not the plain lever), and its counts; an older save without them reads as not measured
    b = data.get("bound", {}).get(BOUND_KEY)
    keys = {tuple(k) for k in (b or {}).get("keys", [])}
    rows = [r for r in data.get("rows", []) if (r["lever"], r["k"]) in keys]
    if not rows:
        where = BFCL_RESULTS if path is None else path.name
        why = (
            f"no saved chain rows with intervals and a bound at {where} (an older save, or none): "
            "python benchmarks/bfcl.py chains writes them"
        )
        if path is None:  # a kit installed outside a checkout: say how to point it at one
            why += "; benchmarks/results not found: run from a checkout or set TOOLKIT_RESULTS"
        return [
            Claim(
                "pk-measured-chains",
                "§14.5.4",
                "A k-step chain succeeds with p^k.",
                "not measured",
                *make_verdict(not rows, why, caveats=[(not rows, why)]),
            ),
            Claim(
                "pk-upper-bound-measured",
                "§14.5.4",
                "p^k is an upper-bound model.",
                "not measured",
                *make_verdict(not rows, why, caveats=[(not rows, why)]),
            ),
        ]
    m = doc["chains"]["meta"]
    n = sum(r["n"] for r in rows)
    table = "; ".join(
        f"{r['lever']} k={r['k']}: {r['success']:.2f} [{r['low']:.2f}–{r['high']:.2f}] vs {r['product']:.2f} (n={r['n']})"
        if "low" in r
        else f"{r['lever']} k={r['k']}: {r['success']:.2f} vs {r['product']:.2f} (n={r['n']})"
        for r in rows
    )
    small = min(r["n"] for r in rows)
    src = (
        f"{m['model']}, {m['date']}, commit {m['commit']}: strict chain success (Wilson 95%) vs the product of step "
        "rates measured on each step alone (plain and '+ retry' rows left out)"
    )
    where = (
        f"the product lies above the measured interval in {b['product_above_interval']} of {b['rows']} rows, "
        f"below it in {b['product_below_interval']}, inside it in {b['inside']} ({n} chains in all)"
    )
    return [
        Claim(
            "pk-measured-chains",
            "§14.5.4 table 14-11",
            "A k-step chain succeeds with p^k (the product of the per-step rates).",
            f"{src}: {table}",
            *make_verdict(
                b["inside"] >= b["rows"] / 2,
                f"the product falls outside the measured 95% interval in {b['rows'] - b['inside']} of {b['rows']} "
                "rows: chained steps are not the independent isolated steps p^k multiplies",
                caveats=[(small < 30, f"as few as {small} chains per row: intervals are wide")],
            ),
        ),
        Claim(
            "pk-upper-bound-measured",
            "§14.5.4",
            "p^k is an upper-bound model of chain success.",
            f"{src}: {where}",
            *make_verdict(
                b["verdict"] != "lower",
                f"measured chain success lies above p^k more often than below ({where}): on these chains p^k was a "
                "LOWER bound — a step that follows right ones succeeds more often than the same step alone",
                caveats=[
                    (b["verdict"] == "neither", f"neither direction dominates: {where}"),
                    (small < 30, f"as few as {small} chains per row"),
                ],
            ),
        ),
    ]
