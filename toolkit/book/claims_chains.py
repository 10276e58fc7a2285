"""§14.5.4 measured: the kit's k-step chains (``python benchmarks/bfcl.py chains`` saves them) beside the product
of per-step rates measured on each step alone; read from ``benchmarks/results/bfcl_qwen2.5-coder-0.5b.json``.

What it leaves out: anything not in the saved results (no model runs here).
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.book.ledger import Claim, _verdict
from toolkit.paths import results_file

BFCL_RESULTS = "bfcl_qwen2.5-coder-0.5b.json"  # in benchmarks/results (toolkit.paths.results_file finds it)


def chain_claims(path: Path | None = None) -> list[Claim]:
    """§14.5.4 measured: the kit's k-step chains (``python benchmarks/bfcl.py chains`` saves them) beside the
    product of per-step rates measured on each step alone."""
    path = results_file(BFCL_RESULTS, required=False) if path is None else Path(path)
    doc = json.loads(path.read_text(encoding="utf-8")) if (path is not None and path.exists()) else {}
    # the kit loop as it ships (levers other than "plain", whose format fails every step and proves nothing)
    rows = [
        r
        for r in doc.get("chains", {}).get("data", {}).get("rows", [])
        if r.get("product") is not None and not r["lever"].startswith("plain")
    ]
    if not rows:
        why = f"no saved chain results at {BFCL_RESULTS if path is None else path.name} (python benchmarks/bfcl.py chains)"
        if path is None:  # a kit installed outside a checkout: say how to point it at one
            why += "; benchmarks/results not found: run from a checkout or set TOOLKIT_RESULTS"
        return [
            Claim(
                "pk-measured-chains",
                "§14.5.4",
                "A k-step chain succeeds with p^k.",
                "not measured",
                *_verdict(not rows, why, caveats=[(not rows, why)]),
            ),
            Claim(
                "pk-upper-bound-measured",
                "§14.5.4",
                "p^k is an upper-bound model.",
                "not measured",
                *_verdict(not rows, why, caveats=[(not rows, why)]),
            ),
        ]
    m = doc["chains"]["meta"]
    n = sum(r["n"] for r in rows)
    table = "; ".join(f"{r['lever']} k={r['k']}: {r['success']:.2f} vs {r['product']:.2f} (n={r['n']})" for r in rows)
    close = sum(abs(r["success"] - r["product"]) <= 0.25 for r in rows)
    above = sum(r["success"] > r["product"] + 1e-9 for r in rows)
    below = sum(r["success"] < r["product"] - 1e-9 for r in rows)
    small = min(r["n"] for r in rows)
    src = f"{m['model']}, {m['date']}, commit {m['commit']}: measured chain success vs product of isolated step rates"
    return [
        Claim(
            "pk-measured-chains",
            "§14.5.4 table 14-11",
            "A k-step chain succeeds with p^k (the product of the per-step rates).",
            f"{src}: {table}",
            *_verdict(
                close >= len(rows) / 2,
                f"the product is more than 0.25 away from the measured success in "
                f"{len(rows) - close} of {len(rows)} rows",
                caveats=[(small < 30, f"as few as {small} chains per row: intervals are wide")],
            ),
        ),
        Claim(
            "pk-upper-bound-measured",
            "§14.5.4",
            "p^k is an upper-bound model of chain success.",
            f"{src}: measured above the product in {above} rows, below in {below}, equal in "
            f"{len(rows) - above - below} ({n} chains in all)",
            *_verdict(
                below >= above,
                f"measured chain success exceeded p^k in {above} of {len(rows)} rows "
                "(more than fell below it): on these chains p^k was a lower bound more often",
                caveats=[(small < 30, f"as few as {small} chains per row")],
            ),
        ),
    ]
