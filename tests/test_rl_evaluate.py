"""Held-out evaluation: every task sampled the asked number of times, the summary counts what the rows say, and two
evaluations pair their episodes so a changed answer can be shown beside the old one."""

import json
import re

import pytest

from toolkit.rl import envs
from toolkit.rl.evaluate import changed, evaluate


def _calc_policy(right: set[int], tasks):
    """A scripted batch policy: a calculator call for each task, then the right result for the tasks in ``right``
    (by index in ``tasks``) and a wrong one with an extra number for the others; records the batch sizes."""
    sizes = []

    def policy(batch):
        sizes.append(len(batch))
        out = []
        for messages, _tools in batch:
            q = next(m["content"] for m in messages if m["role"] == "user")
            i = next(k for k, t in enumerate(tasks) if t.question == q)
            if messages[-1]["role"] == "user":
                x, y, z = re.findall(r"\d+", q)[:3]
                call = {"name": "calculator", "arguments": {"expression": f"{x} * {y} - {z}"}}
                out.append(f"<tool_call>\n{json.dumps(call)}\n</tool_call>")
            else:
                value = tasks[i].truth["value"]
                out.append(f"= {value:g}." if i in right else f"123456 then {value:g}.")
        return out

    return policy, sizes


def test_every_task_is_sampled_and_the_summary_counts_the_rows():
    tasks = envs.tasks("calc", envs.EVAL_SEED, 3)
    assert [t.family for t in tasks] == ["calc"] * 3
    policy, sizes = _calc_policy({0, 2}, tasks)
    res = evaluate(None, tasks, samples=2, batch=4, policy=policy)
    rows, s = res["rows"], res["summary"]
    assert [(r["task"], r["sample"]) for r in rows] == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert [r["met"] for r in rows] == [True, False, True] * 2
    assert s["n"] == 6 and s["met"] == 4 and s["mean_reward"] == pytest.approx(4 / 6, abs=1e-4)
    assert s["calls_per_task"] == 1.0 and s["failed_calls"] == 0 == s["unneeded_calls"]
    assert sizes == [4, 4, 2, 2]  # two batches of at most 4 episodes, each a call turn and an answer turn


def test_changed_pairs_the_same_task_and_sample():
    tasks = envs.tasks("calc", envs.EVAL_SEED, 2)
    before = evaluate(None, tasks, samples=2, policy=_calc_policy(set(), tasks)[0])
    after = evaluate(None, tasks, samples=2, policy=_calc_policy({1}, tasks)[0])
    moved = changed(before, after)
    assert len(moved) == 2 and {m["question"] for m in moved} == {tasks[1].question}
    assert all(m["reward before"] == 0.0 and m["reward after"] == 1.0 for m in moved)
    assert changed(after, after) == []


def test_bad_arguments_are_refused_before_anything_runs():
    tasks = envs.tasks("calc", envs.EVAL_SEED, 1)
    for kw in ({"samples": 0}, {"batch": 0}):
        with pytest.raises(ValueError, match="at least 1"):
            evaluate(None, tasks, policy=lambda b: [], **kw)
    with pytest.raises(ValueError, match="no tasks"):
        evaluate(None, [], policy=lambda b: [])


def test_the_calc_and_warmer_families_are_the_multi_tasks_of_that_kind_in_order():
    multi = envs.multi_tasks(4, 40)
    for fam in ("calc", "warmer"):
        alone = envs.tasks(fam, 4, 5)
        assert [t.question for t in alone] == [t.question for t in multi if t.family == fam][:5]
    held = {t.question for t in envs.tasks("calc", envs.EVAL_SEED, 20)}
    assert not held & {t.question for s in range(0, 10) for t in envs.tasks("calc", s, 20)}
