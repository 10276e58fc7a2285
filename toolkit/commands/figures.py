"""``python -m toolkit figures``: regenerate the book's figures and their data."""

from __future__ import annotations

import sys

from toolkit import cliargs

FORMATS = ("svg", "png", "pdf")


def cli(argv: list[str]) -> int:
    ap = cliargs.Parser(prog="python -m toolkit figures", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=cliargs.out_dir, default="figures", help="output folder (default: figures)")
    ap.add_argument("--lang", choices=("zh", "en", "both"), default="both")
    ap.add_argument(
        "--formats",
        type=cliargs.one_of(FORMATS, "image format", allow_empty=True),
        default=list(FORMATS),
        help="comma-separated image formats; '' for data only",
    )
    ap.add_argument(
        "--timeout",
        type=cliargs.number(0.0, lo_open=True),
        default=300.0,
        help="seconds the image export may take (default 300)",
    )
    ap.add_argument("--no-claims", action="store_true", help="do not write claims.md into --out")
    args = ap.parse_args(argv)
    langs = ("zh", "en") if args.lang == "both" else (args.lang,)
    formats = tuple(args.formats)
    from toolkit.book.figures import write_all  # lazy: plotly, torch and xgrammar (~10 s), after the arguments

    try:
        r = write_all(args.out, langs, formats, claims=not args.no_claims, timeout=args.timeout)
    except RuntimeError as e:
        print(f"figures: {e}", file=sys.stderr)
        return 1
    print(
        f"wrote {r['figures']} figures as {r['images']} images, with their data, into {args.out}/ "
        f"in {r['seconds']:.1f} s (data {r['data_seconds']:.1f} s)"
    )
    return 0
