"""``python -m toolkit train``: the masked vs unmasked fine-tune of the stand-in (default), or ``--model real``: the
LoRA fine-tune of the real offline model into a native tool caller (``toolkit.sft.lora``)."""

from __future__ import annotations

import sys
from pathlib import Path

from toolkit import cliargs
from toolkit.sft.data import MIX, MIXES


def _real(args) -> int:
    from toolkit import fetch  # lazy: keeps the usage errors fast
    from toolkit.models import REAL_OFFLINE, adapter_folder, load  # lazy: torch, after the arguments are checked
    from toolkit.paths import cache_dir, results_dirs
    from toolkit.sft.lora import LoraSettings, train  # lazy: torch, after the arguments are checked

    if not fetch.is_installed():
        print("the real offline model is not installed: run `make real-model` first", file=sys.stderr)
        return 2
    try:
        fetch.verify_installed()  # before torch reads a weight: a damaged folder is one line
    except ValueError as e:
        print(f"train: {e}", file=sys.stderr)
        return 1
    s = LoraSettings(
        groups=args.groups, per_group=args.per_group, data_seed=args.data_seed, mix=args.mix, seed=args.seed, lr=args.lr
    )
    out = Path(args.out) if args.out else adapter_folder()
    results = Path(args.results) if args.results else results_dirs()[0] / "sft_lora_qwen2.5-coder-0.5b.json"
    loaded = load(REAL_OFFLINE)
    print(f"model: {loaded.description}\nsettings: {s}\nadapter -> {out}\nresults -> {results}", flush=True)
    res = train(loaded, s, out, cache_dir() / "sft", results, limit_steps=args.limit_steps)
    n = len(res.losses)
    print(
        f"steps {n}: loss {sum(res.losses[:10]) / min(10, n):.3f} (first 10) -> {sum(res.losses[-10:]) / min(10, n):.3f}"
        f" (last 10); {sum(res.tokens) / sum(res.step_seconds):.0f} tokens/s; {sum(res.step_seconds):.0f} s"
    )
    return 0


STAND_IN_ONLY = ["--template", "--steps"]
REAL_ONLY = ["--groups", "--per-group", "--data-seed", "--mix", "--limit-steps", "--out", "--results"]
DEFAULTS = {"template": "qwen3", "steps": 220, "groups": 50, "per_group": 10, "data_seed": 0, "mix": MIX}


def cli(argv: list[str]) -> int:
    """``python -m toolkit train [--template qwen3] [--steps 220] [--lr 8e-3] [--seed 0]``: both runs, one table;
    ``python -m toolkit train --model real [--groups 50]``: the LoRA fine-tune of the real offline model."""
    ap = cliargs.Parser(prog="python -m toolkit train", description=cli.__doc__)
    ap.add_argument("--model", default="stand-in", choices=["stand-in", "real"])
    ap.add_argument("--template", default=None, choices=["qwen3", "qwen2.5"], help="stand-in: the chat template")
    ap.add_argument("--steps", type=cliargs.count(1, 100_000), default=None, help="stand-in: steps (default 220)")
    ap.add_argument("--lr", type=cliargs.number(0.0, 10.0, lo_open=True), default=None)
    ap.add_argument("--seed", type=cliargs.seed, default=0)
    ap.add_argument(
        "--groups", type=cliargs.count(1, 100_000), default=None, help="real: optimizer steps (one group each; 50)"
    )
    ap.add_argument("--per-group", type=cliargs.count(1, 64), default=None, help="real: conversations per group (10)")
    ap.add_argument("--data-seed", type=cliargs.seed, default=None, help="real: the data's seed (0)")
    ap.add_argument("--mix", default=None, choices=list(MIXES), help="real: the data mix (toolkit.sft.data.MIXES)")
    ap.add_argument("--limit-steps", type=cliargs.count(1, 100_000), default=None, help="real: stop after N steps")
    ap.add_argument("--out", type=cliargs.out_dir, default=None, help="real: adapter folder (default: the shipped one)")
    ap.add_argument("--results", type=cliargs.out_file, default=None, help="real: results JSON")
    args = ap.parse_args(argv)
    # an option of the other run is refused, not ignored (``train --model real --steps 5`` once trained 50 groups)
    own = {"real": REAL_ONLY, "stand-in": STAND_IN_ONLY}[args.model]
    stray = [
        o for o in REAL_ONLY + STAND_IN_ONLY if o not in own and getattr(args, o[2:].replace("-", "_")) is not None
    ]
    if stray:
        ap.error(f"{', '.join(stray)} do(es) not apply to --model {args.model} (it takes {', '.join(own)})")
    for name, default in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.model == "real":
        args.lr = args.lr or 4e-4
        return _real(args)
    from toolkit.sft.experiment import experiment  # lazy: torch (~3 s), after the arguments are checked

    print("model: random-weight Qwen-shaped stand-in (learns the format, never meaning), CPU")
    res = experiment(args.template, steps=args.steps, lr=args.lr or 8e-3, seed=args.seed)
    rows = res.table()
    w = max(len(r[""]) for r in rows)
    print(f"{'':<{w}}  {'masked':>10}  {'unmasked':>10}")
    for r in rows:
        print(f"{r['']:<{w}}  {r['masked']!s:>10}  {r['unmasked']!s:>10}")
    return 0
