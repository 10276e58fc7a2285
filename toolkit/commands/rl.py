"""``python -m toolkit rl``: learning from a verifiable reward (GRPO) on the kit's environments, on this machine.

Trains a fresh LoRA adapter on top of the chosen model (the shipped SFT adapter merged in, or the base) over one
task family of :mod:`toolkit.rl.envs`, prints a progress line per step and a before/after summary, and saves the
adapter with ``results.json`` (the reward curve) under ``--out``; the same command again resumes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from toolkit import cliargs

FAMILIES = ("call", "decline", "multi", "all")  # toolkit.rl.envs.FAMILIES, without its imports
TRAINABLE = ("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b+lora", "stand-in", "stand-in-qwen2.5", "stand-in-qwen3")


def cli(argv: list[str]) -> int:
    """``python -m toolkit rl [--model qwen2.5-coder-0.5b+lora] [--family call|decline|multi|all] [--steps 20]
    [--group 4] [--lr 2e-4] [--max-new 96] [--seed 0] [--out DIR]``"""
    ap = cliargs.Parser(prog="python -m toolkit rl", description=cli.__doc__)
    ap.add_argument(
        "--model",
        choices=TRAINABLE,
        default="qwen2.5-coder-0.5b+lora",
        help="a float model to train (the int8 build has no float weights to train)",
    )
    ap.add_argument("--family", choices=FAMILIES, default="multi")
    ap.add_argument("--steps", type=cliargs.count(1, 10_000), default=20)
    ap.add_argument("--group", type=cliargs.count(2, 64), default=4, help="rollouts per task (GRPO's group)")
    ap.add_argument("--tasks", type=cliargs.count(1, 10_000), default=16, help="tasks drawn for the family")
    ap.add_argument("--lr", type=cliargs.number(0.0, 1.0, lo_open=True), default=2e-4)
    ap.add_argument("--max-new", type=cliargs.count(1, 1024), default=96, help="new tokens per turn")
    ap.add_argument("--temperature", type=cliargs.number(0.0, 10.0, lo_open=True), default=1.0)
    ap.add_argument("--seed", type=cliargs.count(0, 2**31 - 1), default=0)
    ap.add_argument("--out", type=cliargs.out_dir, default=None, help="adapter + results.json (default: the cache)")
    args = ap.parse_args(argv)

    from toolkit import fetch  # lazy: keeps the usage errors fast
    from toolkit.paths import cache_dir

    if args.model.startswith("qwen") and not fetch.is_installed():
        print("the real offline model is not installed: run `make real-model` first", file=sys.stderr)
        return 2
    if args.model.startswith("qwen"):
        try:
            fetch.verify_installed()  # before torch reads a weight: a damaged folder is one line
        except ValueError as e:
            print(f"rl: {e}", file=sys.stderr)
            return 1
    out = Path(args.out) if args.out else cache_dir() / "rl" / f"{args.model}-{args.family}-seed{args.seed}"
    from toolkit.rl.envs import tasks as tasks_of  # lazy: the SFT generator and the scorer

    tasks = tasks_of(args.family, args.seed, args.tasks)
    if not tasks:
        print(f"no {args.family} tasks drawn with seed {args.seed}: try more --tasks", file=sys.stderr)
        return 2

    from toolkit.models import load  # lazy: torch, after the arguments are checked
    from toolkit.rl.train import train_tasks  # lazy: torch and peft
    from toolkit.small import ArtifactError

    try:
        loaded = load(args.model, dtype="float32")
    except (ArtifactError, MemoryError) as e:
        print(f"cannot load {args.model} to train: {e}", file=sys.stderr)
        return 1
    print(f"model: {loaded.description}\nfamily: {args.family} ({len(tasks)} tasks)  out: {out}", flush=True)
    res = train_tasks(
        loaded,
        tasks,
        steps=args.steps,
        group=args.group,
        lr=args.lr,
        max_new=args.max_new,
        temperature=args.temperature,
        seed=args.seed,
        out=out,
    )
    curve = [s["mean_reward"] for s in res["steps"]]
    k = max(1, len(curve) // 4)
    print(
        f"mean reward {sum(curve[:k]) / k:+.3f} (first {k} steps) -> {sum(curve[-k:]) / k:+.3f} (last {k}); "
        f"adapter and reward curve in {out}"
    )
    return 0
