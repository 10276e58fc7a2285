"""Intervals and estimators for "how often does it work": Wilson 95% intervals, pass^k (τ-bench's unbiased
per-task estimator) beside the naive p̄^k, and the product rule for chains (book §14.5.4, table 14-11).

What it does
- ``wilson(successes, n)`` → ``(low, high)``: the score interval, sane at 0 and n (unlike p ± 1.96·se).
- ``pass_hat_k(n, c, k)`` = C(c, k) / C(n, k): the chance that k draws *without replacement* from a task's n
  samples are all successes; averaged over tasks it is unbiased for E_task[p_task^k].
- ``pass_k_table(counts, ks)``: per k, the mean of pass^k over tasks, and p̄^k from the pooled success rate.
  The two differ because E[p^k] ≥ (E[p])^k (Jensen): tasks are not equally hard, and a task the model always
  gets right (or always wrong) keeps its rate at every k.
- ``gate_curve(masses)``: per category, the share of cases whose first-step mass reaches each threshold of the
  first-token gate's dial.

What it leaves out
- Intervals for pass^k (a bootstrap over tasks would give them).
"""

from __future__ import annotations

import math

from toolkit.eval.choices import GATE_THRESHOLDS


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (default 95%). ``n == 0`` → ``(0.0, 1.0)``."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n], got {successes} of {n}")
    p = successes / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k): all k of k samples drawn without replacement from n (c correct) succeed."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return math.comb(c, k) / math.comb(n, k)


def pass_k_table(counts: list[tuple[int, int]], ks=range(1, 9)) -> list[dict]:
    """``counts``: one ``(n, c)`` per task. Rows ``{k, pass_hat_k, naive, tasks}``."""
    if not counts:
        return []
    p_bar = sum(c for _, c in counts) / sum(n for n, _ in counts)
    rows = []
    for k in ks:
        usable = [(n, c) for n, c in counts if n >= k]
        if not usable:
            continue
        rows.append(
            {
                "k": k,
                "pass_hat_k": sum(pass_hat_k(n, c, k) for n, c in usable) / len(usable),
                "naive": p_bar**k,
                "tasks": len(usable),
            }
        )
    return rows


def chain_bound(step_rates: list[float]) -> float:
    """The product of per-step success rates: what a k-step chain would reach if steps failed independently."""
    return math.prod(step_rates)


def gate_curve(masses: dict[str, dict[str, float]], thresholds=GATE_THRESHOLDS) -> dict:
    """``masses[category][case id]`` → per category the share of cases whose mass reaches each threshold."""
    ts = sorted(set(thresholds))
    return {
        "thresholds": ts,
        "share": {c: [sum(m >= t for m in ms.values()) / len(ms) for t in ts] for c, ms in masses.items() if ms},
    }
