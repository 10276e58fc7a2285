"""Table 14-11 with a measured column: chain success (Wilson 95% interval) beside the product of step rates, and
which way the product errs — plus the measuring run behind ``python benchmarks/bfcl.py chains``.

What it does
- ``table(chain_rows, step_rates)``: per (lever, k), measured chain success (strict, and "+ retry": one retry
  allowed after a call the tool rejected) beside Π p over the chain's steps, p measured on each step alone.
- ``bound(rows)``: counts rows whose product lies above the measured interval (p^k an upper bound there), below
  it (a lower bound) or inside it, and names the direction that dominates.
- ``measure(...)``: runs the step tasks and chains of each lever for each landmark (landmark-major, so a run cut
  short still covers every (lever, k)), through a per-item cache (``cache.get/put``, keyed by the caller) so a
  killed run resumes; yields one record per item for a progress bar.

What it leaves out
- Intervals on the product (it multiplies point estimates, as p^k does).
"""

from __future__ import annotations

import math
import time

from toolkit.eval import pairs
from toolkit.eval.chains import STEPS, call_log, run_chain, run_step, step_tasks, task
from toolkit.eval.choices import LEVERS
from toolkit.eval.stats import wilson


def steps_of(k: int, pair: bool = False) -> list[str]:
    """The step types a chain of k calls is made of (what its product multiplies)."""
    if not pair:
        return list(STEPS[:k])
    names = {"city": "landmark_city", "weather": "get_weather", "difference": "difference"}
    return [names[key[0]] for key in pairs.pair_expected(k)]


def table(chain_rows: list[dict], step_rates: dict[str, dict]) -> list[dict]:
    """Per (lever, k): measured chain success (strict, and with one retry after a tool error) with its Wilson 95%
    interval, beside the product of the isolated step rates over the chain's steps (``step_rates[lever]``; a
    rate that was not measured makes the product None, never a guess). Rows of pair tasks (``"pair": True``)
    multiply their own steps and report the mean rounds used."""
    out = []
    for lever in dict.fromkeys(r["lever"] for r in chain_rows):
        rates = step_rates.get(lever, {})
        for k in sorted({r["k"] for r in chain_rows if r["lever"] == lever}):
            rs = [r for r in chain_rows if r["lever"] == lever and r["k"] == k]
            need = steps_of(k, pair=bool(rs[0].get("pair")))
            prod = math.prod(rates[s] for s in need) if all(s in rates for s in need) else None
            for scoring in ("strict", "retry"):
                ok = sum(bool(r[scoring]) for r in rs)
                lo, hi = wilson(ok, len(rs))
                out.append(
                    {
                        "lever": lever if scoring == "strict" else f"{lever} + retry",
                        "k": k,
                        "n": len(rs),
                        "ok": ok,
                        "success": ok / len(rs),
                        "low": lo,
                        "high": hi,
                        "product": prod,
                        "steps_ok": sum(r[f"{scoring}_steps_ok"] for r in rs),
                        "steps": k * len(rs),
                        "rounds": sum(r.get("rounds", k) for r in rs) / len(rs),
                    }
                )
    return out


def comparable(rows: list[dict]) -> list[dict]:
    """Rows that test p^k: a product was measured, the lever is not ``plain`` (its format fails every step: 0 vs
    0 says nothing) and the scoring is strict (a "+ retry" row is set beside strict step rates, so it would lean
    towards "lower bound" by construction)."""
    return [
        r
        for r in rows
        if r.get("product") is not None and not r["lever"].startswith("plain") and not r["lever"].endswith("+ retry")
    ]


def bound(rows: list[dict]) -> dict:
    """Is the product an upper or a lower bound on these rows? Counts rows whose product lies above the measured
    interval (upper), below it (lower), or inside it (consistent); rows without a product are left out."""
    rs = [r for r in rows if r.get("product") is not None]
    upper = [r for r in rs if r["product"] > r["high"] + 1e-9]
    lower = [r for r in rs if r["product"] < r["low"] - 1e-9]
    verdict = "upper" if len(upper) > len(lower) else "lower" if len(lower) > len(upper) else "neither"
    return {
        "rows": len(rs),
        "product_above_interval": len(upper),
        "product_below_interval": len(lower),
        "inside": len(rs) - len(upper) - len(lower),
        "above_point": sum(r["product"] > r["success"] + 1e-9 for r in rs),
        "below_point": sum(r["product"] < r["success"] - 1e-9 for r in rs),
        "verdict": verdict,
        "keys": [[r["lever"], r["k"]] for r in rs],  # which rows were compared (the claims ledger reads them)
    }


# ---------------------------------------------------------------- the measuring run


def _steps_lever(lever: str) -> str:
    """Whose isolated step runs a lever's product uses: the lever with the same loop options."""
    opts = LEVERS[lever][0]
    return next(name for name, (o, fam) in LEVERS.items() if o == opts and fam == "chain")


def measure(
    backend,
    tokenizer,
    landmarks,
    levers,
    ks=range(1, 7),
    pair_ks=pairs.PAIR_KS,
    cache=None,
    cached_only=False,
    until_decided=True,
):
    """Yield one record per step task or chain (see the module docstring). ``cache``: anything with
    ``get(key) -> dict | None`` and ``put(key, record)``; a cached record comes back with ``cached=True``.
    ``cached_only``: run nothing, yield only what the cache holds. ``until_decided``: see
    ``toolkit.eval.chains.run_chain`` (default on: the answer turn is not scored)."""
    seen = set()

    def item(key, fn):
        got = cache.get(key) if cache is not None else None
        if got is not None:
            return {**got, "cached": True}
        if cached_only:
            return None
        t0 = time.perf_counter()
        rec = {**fn(), "seconds": round(time.perf_counter() - t0, 2)}
        if cache is not None:
            cache.put(key, rec)
        return {**rec, "cached": False}

    def chain_record(lever, names, t, pair):
        trace, sc = run_chain(backend, tokenizer, t, until_decided=until_decided, **LEVERS[lever][0])
        return {
            "kind": "chain",
            "lever": lever,
            "landmark": " + ".join(names),
            "k": t.k,
            "pair": pair,
            "strict": sc.strict,
            "retry": sc.retry,
            "strict_steps_ok": sc.strict_steps_ok,
            "retry_steps_ok": sc.retry_steps_ok,
            "calls": sc.calls,
            "retried": sc.retried,
            "rounds": sc.rounds,
            "stop": trace.stop.reason if trace.stop else "decided",
            "answer": (trace.answer or "")[:200],
            "log": call_log(trace),
        }

    def steps(lever, lm, tasks):
        group = _steps_lever(lever)
        for step, q, prev in tasks:
            if (group, lm, step) in seen:
                continue
            seen.add((group, lm, step))
            yield item(
                f"step/{group}/{lm}/{step}",
                lambda: {
                    "kind": "step",
                    "lever": group,
                    "landmark": lm,
                    "step": step,
                    "ok": run_step(backend, tokenizer, lm, step, q, prev, **LEVERS[group][0]),
                },
            )

    def every():
        for lm in landmarks:
            for lever in levers:
                family = LEVERS[lever][1]
                if family == "chain":  # (a pair lever reads the same loop's steps from that chain lever's runs)
                    yield from steps(lever, lm, step_tasks(lm))
                    for k in ks:
                        yield item(f"chain/{lever}/{lm}/{k}", lambda: chain_record(lever, [lm], task(lm, k), False))
                    continue
                b = dict(pairs.pairs())[lm]  # the next landmark of the kit's list, whatever subset runs
                yield from steps(lever, f"{lm} + {b}", pairs.pair_step_tasks(lm, b))
                par = family == "pair-parallel"
                for k in pair_ks:
                    t = pairs.pair_task(lm, b, k, par)
                    yield item(f"chain/{lever}/{lm} + {b}/{k}", lambda: chain_record(lever, [lm, b], t, True))

    yield from (r for r in every() if r is not None)  # None: not cached under cached_only


def step_rates(records, levers) -> tuple[dict, dict]:
    """``({lever: {step: rate}}, {lever: {step: n}})`` from step records; each lever reads its loop options'
    steps (the pair levers: the constrained lever's step runs plus their own ``difference``; run ``constrained``
    too, or a pair row's product stays None)."""
    by: dict = {}
    for r in records:
        if r["kind"] == "step":
            by.setdefault(r["lever"], {}).setdefault(r["step"], []).append(bool(r["ok"]))
    rates, ns = {}, {}
    for lever in levers:
        got = by.get(_steps_lever(lever), {})
        rates[lever] = {s: sum(v) / len(v) for s, v in got.items()}
        ns[lever] = {s: len(v) for s, v in got.items()}
        rates[f"{lever} + retry"], ns[f"{lever} + retry"] = rates[lever], ns[lever]
    return rates, ns
