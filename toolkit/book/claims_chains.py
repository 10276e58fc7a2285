"""§14.5.4 measured: the kit's k-step chains (``python benchmarks/bfcl.py chains`` saves them), read from
``benchmarks/results/bfcl_qwen2.5-coder-0.5b.json``. The book's p is the per-step rate *inside* a chain, so the
prediction is p_in^k with p_in = steps right / steps run in that row's chains (rows saved without step counts
fall back to the product of the rates measured on each step alone, which the evidence also shows). Verdicts follow
the saved Wilson intervals: "p^k holds" where the prediction lies inside the measured interval in at least half
the rows; for "an upper-bound model" one verdict weighs the measurement (below the interval more often: an upper
bound; above: a lower one) with a seeded simulation of the two departures the sentence names.
``lever_claims`` reads every row, the plain and "+ retry" ones included: whether chain length moved success more
than any lever did ("the strongest first-order factor"), and the design levers p^k explains (retry, shorter chains,
human confirmation) in the arithmetic beside what the saved retry and parallel rows show.

One check per claim; the saved chains are read once per ledger run (``bfcl_doc``, ``chain_rows``, ``lever_rows``).

What it leaves out: anything not in the saved results (no model runs here).
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit import cost
from toolkit.book.claims_cost import upper_bound_simulation
from toolkit.book.evidence import BFCL_RESULTS
from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group, NotCheckable, loader

CHAINS, LEVERS = Group("chains"), Group("levers")
BOUND_KEY = "strict, all levers but plain"  # the section's bound over the rows that test p^k
RETRY = " + retry"


def _read(path) -> dict:
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _given(path) -> dict:
    """A saved file other than the checkout's, as the evidence a group reads (a test's, or another run's)."""
    return {} if path is None else {"bfcl_doc": _read(path)}


@loader
def chain_rows(bfcl_doc) -> dict:
    """The rows ``toolkit.eval.chain_table.bound`` compared when ``benchmarks/bfcl.py`` saved them (strict scoring, a
    measured product, not the plain lever), with their meta and bound; an older save without them is not measured."""
    data = (bfcl_doc or {}).get("chains", {}).get("data", {})
    b = data.get("bound", {}).get(BOUND_KEY)
    keys = {tuple(k) for k in (b or {}).get("keys", [])}
    rows = [r for r in data.get("rows", []) if (r["lever"], r["k"]) in keys]
    if not rows:
        why = (
            f"no saved chain rows with intervals and a bound at {BFCL_RESULTS} (an older save, or none): "
            "python benchmarks/bfcl.py chains writes them"
        )
        if bfcl_doc is None:  # a kit installed outside a checkout: say how to point it at one
            why += "; benchmarks/results not found: run from a checkout or set TOOLKIT_RESULTS"
        raise NotCheckable(why)
    return dict(rows=rows, meta=bfcl_doc["chains"]["meta"], bound=b)


def predicted(r: dict) -> float:
    """p_in^k, p_in the in-chain step rate; rows saved without step counts: the product of isolated step rates."""
    return (r["steps_ok"] / r["steps"]) ** r["k"] if r.get("steps") else r["product"]


def _chain_source(chain_rows) -> str:
    m, in_chain = chain_rows["meta"], all(r.get("steps") for r in chain_rows["rows"])
    return (
        f"{m['model']}, {m['date']}, commit {m['commit']}: strict chain success (Wilson 95%) vs "
        + ("p_in^k, p_in the in-chain step rate" if in_chain else "the product of isolated step rates")
        + " (plain and '+ retry' rows left out)"
    )


@CHAINS(
    "pk-measured-chains",
    "§14.5.4 table 14-11",
    "A k-step chain succeeds with p^k, p the per-step rate.",
    supports=("整体成功率是 p^k",),
)
def pk_measured_chains(chain_rows):
    rows = chain_rows["rows"]
    inside = sum(r["low"] <= predicted(r) <= r["high"] for r in rows)
    table = "; ".join(
        f"{r['lever']} k={r['k']}: {r['success']:.2f} [{r['low']:.2f}–{r['high']:.2f}] vs p_in^k "
        f"{predicted(r):.2f} (isolated-step product {r['product']:.2f}, n={r['n']})"
        for r in rows
    )
    small = min(r["n"] for r in rows)
    return (
        f"{_chain_source(chain_rows)}: {table}",
        *make_verdict(
            inside >= len(rows) / 2,
            f"p^k falls outside the measured 95% interval in {len(rows) - inside} of {len(rows)} rows",
            caveats=[(small < 30, f"as few as {small} chains per row: intervals are wide")],
        ),
    )


@CHAINS(
    "pk-upper-bound-measured",
    "§14.5.4",
    "p^k is only an upper-bound model: real steps are not independent and a failure need not end the task.",
    answers=("这只是一个上界模型",),
)
def pk_upper_bound_measured(chain_rows):
    rows = chain_rows["rows"]
    inside = sum(r["low"] <= predicted(r) <= r["high"] for r in rows)
    above = sum(predicted(r) > r["high"] for r in rows)  # chains did worse than p^k: p^k an upper bound
    below = sum(predicted(r) < r["low"] for r in rows)  # chains did better: p^k a lower bound
    small, sim = min(r["n"] for r in rows), upper_bound_simulation()
    where = (
        f"p_in^k lies above the measured interval in {above} of {len(rows)} rows, below it in {below}, "
        f"inside it in {inside} ({sum(r['n'] for r in rows)} chains in all); the isolated-step product lay above it "
        f"in {chain_rows['bound']['product_above_interval']} (measuring p on steps alone overstates the in-chain p)"
    )
    return (
        f"{_chain_source(chain_rows)}: {where}. Seeded simulation of the two departures named: {sim['text']}",
        *make_verdict(
            below <= above,
            f"measured chain success lies above p^k more often than below ({where}): on these chains p^k was a "
            "LOWER bound — a step that follows right ones succeeds more often than the same step alone",
            caveats=[
                (above == below, f"neither direction is measured: {where}"),
                (small < 30, f"as few as {small} chains per row"),
                (
                    sim["above"],
                    "both departures the sentence names push success ABOVE p^k in the simulation (retries raise "
                    "each step's p; dependence concentrates failures in fewer tasks, Jensen's inequality): "
                    "they make p^k pessimistic, so 'upper bound' needs failures that compound, not these reasons",
                ),
            ],
        ),
    )


def chain_claims(path: Path | None = None) -> list[Claim]:
    """§14.5.4 measured: the kit's k-step chains (``python benchmarks/bfcl.py chains`` saves them) beside the
    product of per-step rates measured on each step alone; ``path``: another saved file than the checkout's."""
    return CHAINS.run(**_given(path))


# ================================================================ the rows chain_claims leaves out: levers and length
@loader
def lever_rows(bfcl_doc) -> dict | None:
    """Every saved chain row with step counts, the plain and "+ retry" ones included, by (lever, k); None if none."""
    rows = [r for r in (bfcl_doc or {}).get("chains", {}).get("data", {}).get("rows", []) if r.get("steps")]
    if not rows:
        return None
    m = bfcl_doc["chains"]["meta"]
    able = sorted({r["lever"] for r in rows if r["steps_ok"] > 0})  # levers under which a step can succeed at all
    return dict(
        rows=rows,
        by={(r["lever"], r["k"]): r for r in rows},
        able=able,
        unable=sorted({r["lever"] for r in rows} - set(able)),
        small=min(r["n"] for r in rows if r["lever"] in able) if able else 0,
        src=f"{m['model'].split(' [')[0]}, {m['date'][:10]}, commit {m['commit']}, the kit's k-step chains, strict",
    )


def spreads(by: dict, able: list[str]):
    """The widest spread of chain success over k under one lever (gap, lever, best k, worst k), and over levers at
    one k (gap, k, best lever, worst lever), among the levers under which steps succeed; None where there is none."""
    spread_k = {
        lv: (max(ks, key=lambda k: by[lv, k]["success"]), min(ks, key=lambda k: by[lv, k]["success"]))
        for lv in able
        if len(ks := sorted(k for (x, k) in by if x == lv)) > 1
    }
    length = max(
        ((by[lv, a]["success"] - by[lv, b]["success"], lv, a, b) for lv, (a, b) in spread_k.items()),
        key=lambda t: t[0],  # the first lever of the widest spread: a "+ retry" twin does not replace its row
        default=None,
    )
    at_k = {}
    for (lv, k), r in by.items():
        if lv in able:
            at_k.setdefault(k, []).append((r["success"], lv))
    levers = max(
        (
            (max(v, key=lambda x: x[0])[0] - min(v, key=lambda x: x[0])[0], k)
            + (max(v, key=lambda x: x[0])[1], min(v, key=lambda x: x[0])[1])
            for k, v in sorted(at_k.items())
            if len(v) > 1
        ),
        key=lambda t: t[0],
        default=None,
    )
    return length, levers


@LEVERS(
    "length-first-order",
    "§14.5.4",
    "Chain length is the strongest first-order factor of an agent's success.",
    answers=("链路长度是最强的一阶因素",),
)
def length_first_order(lever_rows):
    if lever_rows is None:
        return None
    by, able, unable, small = (lever_rows[k] for k in ("by", "able", "unable", "small"))
    length, levers = spreads(by, able)
    if length is None or levers is None:
        return None
    (d_len, lv, a, b), (d_lev, k_lev, hi, lo) = length, levers
    return (
        f"{lever_rows['src']}: under the lever {lv!r} chain success falls from {by[lv, a]['success']:.2f} at k={a} to "
        f"{by[lv, b]['success']:.2f} at k={b} (a spread of {d_len:.2f}); the widest spread between levers at one k, "
        f"among the levers under which steps succeed ({', '.join(able)}): {d_lev:.2f} at k={k_lev} ({hi!r} vs {lo!r})",
        *make_verdict(
            d_len > d_lev,
            f"a lever moved success as much as length did ({d_lev:.2f} vs {d_len:.2f})",
            [
                (
                    bool(unable),
                    f"without a grammar ({', '.join(unable)}) no step succeeded at any k: a per-step p near 0 "
                    "fails every length, so p is a factor of the same order as k",
                ),
                (small < 30, f"as few as {small} chains per row, on the kit's synthetic chains"),
            ],
        ),
    )


def parallel_vs_series(rows) -> str:
    series, par = (next((r for r in rows if r["lever"] == n), None) for n in ("pair, in series", "pair, parallel"))
    if not (series and par):
        return ""
    return (
        f"; two calls per round (parallel) vs in series at k={par['k']}: {par['rounds']:.1f} vs {series['rounds']:.1f} "
        f"rounds, steps right {par['steps_ok']}/{par['steps']} vs {series['steps_ok']}/{series['steps']}, chains "
        f"{par['ok']}/{par['n']} vs {series['ok']}/{series['n']}"
    )


def retry_pairs(lever_rows) -> list[tuple[dict, dict]]:
    by = lever_rows["by"]
    return [(by[lv, k], by[lv + RETRY, k]) for (lv, k) in by if not lv.endswith(RETRY) and (lv + RETRY, k) in by]


def in_chain_p(lever_rows) -> tuple[float, int]:
    """The pooled in-chain step rate over the rows where steps succeed (no "+ retry" twins), and the longest k."""
    pooled = [r for r in lever_rows["rows"] if r["lever"] in lever_rows["able"] and not r["lever"].endswith(RETRY)]
    p_in = sum(r["steps_ok"] for r in pooled) / sum(r["steps"] for r in pooled) if pooled else 0.0
    return p_in, max((r["k"] for r in pooled), default=0)


@LEVERS(
    "pk-design-levers",
    "§14.5.4",
    "p^k explains the engineering: shorter chains, verification and retry (a higher p per step), checkpoints, and "
    "human confirmation (p = 1 on a risky step) each raise the chance of finishing.",
    answers=("缩短链路…验证与重试…检查点…人工确认",),
)
def pk_design_levers(lever_rows):
    if lever_rows is None:
        return None
    pairs, (p_in, k), rows = retry_pairs(lever_rows), in_chain_p(lever_rows), lever_rows["rows"]
    if not pairs or not 0 < p_in < 1 or k < 2:
        return None
    same = sum(a["ok"] == b["ok"] and a["steps_ok"] == b["steps_ok"] for a, b in pairs)
    series, par = (next((r for r in rows if r["lever"] == n), None) for n in ("pair, in series", "pair, parallel"))
    p_up = p_in + (1 - p_in) / 2  # a retry that fixes half the failures
    arithmetic = {
        "retry (p → p + (1−p)/2)": (cost.success(p_up, k), cost.success(p_in, k)),
        "one step fewer (k → k−1)": (cost.success(p_in, k - 1), cost.success(p_in, k)),
        "one step confirmed by a person (its p → 1)": (cost.success(p_in, k - 1) * 1.0, cost.success(p_in, k)),
    }
    return (
        f"the arithmetic at the measured in-chain p = {p_in:.3f} and k = {k} (p^k = {cost.success(p_in, k):.3f}): "
        + "; ".join(f"{what}: {a:.3f}" for what, (a, _b) in arithmetic.items())
        + f". Measured ({lever_rows['src']}): the '+ retry' rows equal their rows without retry in {same} of "
        f"{len(pairs)} (same chains finished, same steps right){parallel_vs_series(rows)}. Checkpoints are not measured",
        *make_verdict(
            all(a > b for a, b in arithmetic.values()),
            "in the arithmetic a higher p or a shorter chain does not raise p^k",
            [
                (
                    same == len(pairs),
                    "on the kit's saved chains no retry changed an outcome: a retry repeats a step only when the "
                    "host sees it fail, and these failures went unseen or the retry wrote the same thing again",
                ),
                (
                    bool(series and par) and par["ok"] <= series["ok"],
                    "the shorter (parallel) chains took fewer rounds but did not finish more often here",
                ),
                (lever_rows["small"] < 30, f"as few as {lever_rows['small']} chains per row"),
            ],
        ),
    )


def lever_claims(path: Path | None = None) -> list[Claim]:
    """§14.5.4's design consequences of p^k and "chain length is the strongest first-order factor", from every
    saved chain row, the "+ retry" and plain rows included (``chain_claims`` compares p^k without them)."""
    return LEVERS.run(**_given(path))
