"""``python -m toolkit claims``: print (or write) the claims ledger."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from toolkit import cliargs


def _print(claims) -> None:
    from toolkit.book.claims import coverage, coverage_line  # lazy: see cli (torch, xgrammar)
    from toolkit.book.ledger import CAVEAT, FAILS, HOLDS, VERDICTS

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
    ap = cliargs.Parser(prog="python -m toolkit claims", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the ledger as JSON")
    ap.add_argument(
        "--write",
        nargs="?",
        const="figures/claims.md",
        default=None,
        metavar="PATH",
        type=cliargs.out_file,
        help="also write Markdown (default figures/claims.md)",
    )
    args = ap.parse_args(argv)
    # lazy: the ledger's checks import torch, transformers and xgrammar (~12 s); usage errors never wait for them
    from toolkit.book.claims import check_all, coverage, write_markdown

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
