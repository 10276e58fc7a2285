"""§14.5.1, measured: exact multiplication of large numbers by the real offline model, alone and with the calculator.

Seeded pairs of ``--digits``-digit numbers. Each product is asked twice through the kit's host loop
(``toolkit.loop.examples.ask``, greedy): once with no tool mounted (the model must write the digits itself) and
once with only the calculator mounted under the loop's defaults (``tool_choice="auto"``: the model decides whether
to call it). A row is exact when the answer contains the product's digits (commas, spaces and underscores between
digits ignored). The file ``benchmarks/results/multiplication.json`` (date, machine, model, commit, seed, rows,
summary) is what the claims ledger's ``exact-multiplication`` entry reads.

Run:  nice python benchmarks/multiplication.py            # 10 pairs of 6-digit numbers, seed 0
      nice python benchmarks/multiplication.py --n 5 --digits 4

Leaves out: sampling (greedy: one run per question is the whole distribution), other phrasings, any timing
assert; a random-weight stand-in (the script refuses to run without the real model: it would measure nothing).
"""

from __future__ import annotations

import json
import os
import random
import re
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from toolkit import cliargs  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def pairs(n: int, digits: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    lo, hi = 10 ** (digits - 1), 10**digits - 1
    return [(rng.randint(lo, hi), rng.randint(lo, hi)) for _ in range(n)]


def states_exactly(answer: str | None, product: int) -> bool:
    """True when ``answer`` contains ``product`` as a whole number (digit groups joined by , _ or space)."""
    joined = re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", answer or "")
    return str(product) in re.findall(r"\d+", joined)


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=cliargs.count(1), default=10, help="how many products (default 10)")
    p.add_argument("--digits", type=cliargs.count(1, 100), default=6, help="digits per factor (default 6)")
    p.add_argument("--seed", type=cliargs.seed, default=0)
    p.add_argument("--threads", type=cliargs.count(1, 1024), default=1, help="torch threads (1 on a shared machine)")
    p.add_argument(
        "--out", type=cliargs.out_file, default=os.path.join(ROOT, "benchmarks", "results", "multiplication.json")
    )
    a = p.parse_args(argv)
    if not (1 <= a.n <= 500 and 2 <= a.digits <= 30):
        p.error("--n must be 1..500 and --digits 2..30")
    import torch

    from toolkit.eval.report import meta
    from toolkit.loop.examples import ask
    from toolkit.loop.steps import Executed
    from toolkit.models import load

    torch.set_num_threads(a.threads)
    loaded = load("auto", quiet=True)
    if not loaded.semantic:
        print("the real offline model is not installed: this benchmark needs it (make real-model)")
        return 2
    run_meta = meta(loaded.description, ROOT)
    print(f"model: {loaded.description}\ncommit: {run_meta['commit']}\n{a.n} products of {a.digits}-digit numbers")
    rows = []
    for i, (x, y) in enumerate(pairs(a.n, a.digits, a.seed)):
        q = f"What is {x} * {y}? Reply with the exact integer only."
        row = {"a": x, "b": y, "product": x * y}
        for mode, tools in (("alone", {}), ("tool", ["calculator"])):
            t0 = time.perf_counter()
            trace = ask(q, loaded, tools=tools)
            calls = [r for s in trace.of(Executed) for r in s.results]
            row[mode] = {
                "exact": states_exactly(trace.answer, x * y),
                "answer": trace.answer,
                "calls": [f"{r.name}({json.dumps(r.arguments)})->{r.status}" for r in calls],
                "stop": trace.stop.reason if trace.stop else None,
                "seconds": round(time.perf_counter() - t0, 1),
            }
        rows.append(row)
        print(
            f"{i + 1:>3}  {x} * {y} = {x * y}   alone: {'exact' if row['alone']['exact'] else 'wrong'} "
            f"{(row['alone']['answer'] or '')[:40]!r}   with calculator: {'exact' if row['tool']['exact'] else 'wrong'}"
            f" ({len(row['tool']['calls'])} call(s))"
        )
    summary = {
        "n": len(rows),
        "alone_exact": sum(r["alone"]["exact"] for r in rows),
        "tool_exact": sum(r["tool"]["exact"] for r in rows),
        "tool_called": sum(bool(r["tool"]["calls"]) for r in rows),
    }
    doc = {
        **run_meta,
        "digits": a.digits,
        "seed": a.seed,
        "question": "What is {a} * {b}? Reply with the exact integer only.",
        "rows": rows,
        "summary": summary,
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    print(
        f"\nexact without a tool: {summary['alone_exact']}/{summary['n']}; with the calculator: "
        f"{summary['tool_exact']}/{summary['n']} (called it in {summary['tool_called']}); saved {a.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
