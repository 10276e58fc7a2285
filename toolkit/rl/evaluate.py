"""A policy measured on held-out tasks: episodes run through the environment, their rewards summed up.

What it does
- :func:`evaluate(loaded, tasks, max_new, temperature, samples, seed, batch)`: ``samples`` episodes of every task
  (greedy at ``temperature=0``: one is enough), ``batch`` episodes rolled out together
  (:func:`toolkit.rl.envs.rollout_group` with :class:`toolkit.rl.policy.Sampler`; the tools run for real). Returns
  ``{"summary": ..., "rows": [...]}``: mean reward, episodes met, calls per episode, failed and unneeded calls,
  seconds and tokens sampled; one row per episode (task, sample, answer, reward). The sampler's seed is
  ``seed``, so two evaluations with the same arguments draw the same random numbers: before and after a training
  run, a changed episode is the policy's doing, not the dice's.
- :func:`changed(before, after)`: the episodes whose reward moved between two such evaluations, paired.

What it leaves out
- Confidence intervals (a handful of tasks is a demonstration, not a measurement of a rate: the benchmarks count
  rates on BFCL and the loop questions), the loop's crutches (as :mod:`toolkit.rl.envs`).
"""

from __future__ import annotations

import time

from toolkit.rl.envs import BatchPolicy, Task, rollout_group
from toolkit.rl.policy import Sampler


def evaluate(
    loaded,
    tasks: list[Task],
    max_new: int = 96,
    temperature: float = 0.0,
    samples: int = 1,
    seed: int = 0,
    batch: int = 4,
    policy: BatchPolicy | None = None,
) -> dict:
    """Episodes of ``tasks`` (``samples`` each) and their summary; see the module docstring. ``policy``: a scripted
    batch policy in place of the model's sampling (tests)."""
    if samples < 1 or batch < 1:
        raise ValueError(f"samples and batch must be at least 1, not {samples} and {batch}")
    if not tasks:
        raise ValueError("no tasks to evaluate")
    sampler = policy or Sampler(loaded, max_new=max_new, temperature=temperature, seed=seed)
    todo = [(i, k, t) for k in range(samples) for i, t in enumerate(tasks)]
    rows, t0 = [], time.perf_counter()
    for start in range(0, len(todo), batch):
        part = todo[start : start + batch]
        for (i, k, t), e in zip(part, rollout_group(sampler, [t for _, _, t in part])):
            needed = t.truth.get("needed", len(t.want))
            rows.append(
                {
                    "task": i,
                    "sample": k,
                    "family": t.family,
                    "question": t.question,
                    "reward": e.reward,
                    "met": e.met,
                    "calls": len(e.results),
                    "failed_calls": sum(not r.ok for r in e.results),
                    "unneeded_calls": max(0, len(e.results) - needed),
                    "answer": e.answer[:300],
                }
            )
    n = len(rows)
    summary = {
        "n": n,
        "mean_reward": round(sum(r["reward"] for r in rows) / n, 4),
        "met": sum(r["met"] for r in rows),
        "calls_per_task": round(sum(r["calls"] for r in rows) / n, 3),
        "failed_calls": sum(r["failed_calls"] for r in rows),
        "unneeded_calls": sum(r["unneeded_calls"] for r in rows),
        "seconds": round(time.perf_counter() - t0, 1),
        "sampled_tokens": getattr(sampler, "tokens", 0),
    }
    return {"summary": summary, "rows": rows}


def changed(before: dict, after: dict) -> list[dict]:
    """The episodes (same task, same sample) whose reward differs between two evaluations, with both answers."""
    then = {(r["task"], r["sample"]): r for r in before["rows"]}
    out = []
    for r in after["rows"]:
        b = then.get((r["task"], r["sample"]))
        if b is not None and b["reward"] != r["reward"]:
            out.append({"question": r["question"], "before": b["answer"], "reward before": b["reward"]})
            out[-1] |= {"after": r["answer"], "reward after": r["reward"]}
    return out
