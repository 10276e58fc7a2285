"""``python -m toolkit claims``: print (or write) the claims ledger."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from toolkit.book.claims import check_all, coverage, coverage_line, write_markdown
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS, VERDICTS, Claim


def _print(claims: list[Claim]) -> None:
    mark = {HOLDS: "✓", CAVEAT: "~", FAILS: "✗"}
    for c in claims:
        print(f"{mark[c.verdict]} [{c.verdict}] {c.section} — {c.claim}")
        print(f"    evidence: {c.evidence}")
        if c.why:
            print(f"    why: {c.why}")
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    print("\n" + ", ".join(f"{n} {v}" for v, n in counts.items()) + f" ({len(claims)} claims)")
    print(coverage_line(coverage(claims)))


def cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit claims", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the ledger as JSON")
    ap.add_argument(
        "--write",
        nargs="?",
        const="figures/claims.md",
        default=None,
        metavar="PATH",
        help="also write Markdown (default figures/claims.md)",
    )
    args = ap.parse_args(argv)
    claims = check_all()
    if args.json:
        print(
            json.dumps(
                dict(claims=[asdict(c) for c in claims], coverage=coverage(claims)), ensure_ascii=False, indent=1
            )
        )
    else:
        _print(claims)
    if args.write:
        print(f"wrote {write_markdown(args.write, claims)}", file=sys.stderr)
    return 0
