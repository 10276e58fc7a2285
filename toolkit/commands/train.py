"""``python -m toolkit train``: both fine-tunes (with / without the loss mask), one table."""

from __future__ import annotations

from toolkit import cliargs


def cli(argv: list[str]) -> int:
    """``python -m toolkit train [--template qwen3] [--steps 220] [--lr 8e-3] [--seed 0]``: both runs, one table."""
    ap = cliargs.Parser(prog="python -m toolkit train", description=cli.__doc__)
    ap.add_argument("--template", default="qwen3", choices=["qwen3", "qwen2.5"])
    ap.add_argument("--steps", type=cliargs.count(1, 100_000), default=220)
    ap.add_argument("--lr", type=cliargs.number(0.0, 10.0, lo_open=True), default=8e-3)
    ap.add_argument("--seed", type=cliargs.count(0), default=0)
    args = ap.parse_args(argv)
    from toolkit.sft.experiment import experiment  # lazy: torch (~3 s), after the arguments are checked

    print("model: random-weight Qwen-shaped stand-in (learns the format, never meaning), CPU")
    res = experiment(args.template, steps=args.steps, lr=args.lr, seed=args.seed)
    rows = res.table()
    w = max(len(r[""]) for r in rows)
    print(f"{'':<{w}}  {'masked':>10}  {'unmasked':>10}")
    for r in rows:
        print(f"{r['']:<{w}}  {r['masked']!s:>10}  {r['unmasked']!s:>10}")
    return 0
