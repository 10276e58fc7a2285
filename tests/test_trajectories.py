"""The synthetic tool-use data set: seeded, every kind present, every tool result really computed."""

import json
import random

import pytest

from toolkit import trajectories
from toolkit.tools import TOOLS


def test_seeded_and_reproducible():
    a, b = trajectories.dataset(30, seed=7), trajectories.dataset(30, seed=7)
    assert [t.messages for t in a] == [t.messages for t in b]
    assert [t.messages for t in a] != [t.messages for t in trajectories.dataset(30, seed=8)]


def test_every_kind_appears_and_results_come_from_the_real_tools():
    ds = trajectories.dataset(60, seed=0)
    assert {t.kind for t in ds} == set(trajectories.KINDS)
    for t in ds:
        calls = [c for m in t.messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
        results = [m for m in t.messages if m["role"] == "tool"]
        assert len(calls) == len(results) == len(t.calls)
        for c, r in zip(calls, results):
            fn = c["function"]
            assert r["name"] == fn["name"] and r["tool_call_id"] == c["id"]
            # recompute with the real tool: the stored result is exactly what it returns
            assert json.loads(r["content"]) == TOOLS[fn["name"]].call(fn["arguments"])
        assert t.messages[-1]["role"] == "assistant" and not t.messages[-1].get("tool_calls")
        assert {s["function"]["name"] for s in t.tools} == set(trajectories.TOOL_NAMES)


@pytest.mark.parametrize(
    "kind,n_calls,n_turns",
    [("calc", 1, 1), ("weather", 1, 1), ("parallel", 2, 1), ("chain", 2, 2), ("multi_turn", 2, 2), ("no_tool", 0, 0)],
)
def test_kinds_have_their_shape(kind, n_calls, n_turns):
    t = trajectories.make(kind, random.Random(1))
    call_turns = [m for m in t.messages if m["role"] == "assistant" and m.get("tool_calls")]
    assert len(t.calls) == n_calls and len(call_turns) == n_turns
    if kind == "chain":  # the second call uses the first call's result
        temp = t.calls[0]["result"]["temperature"]
        assert t.calls[1]["arguments"]["expression"].startswith(f"{temp} + ")
        assert str(t.calls[1]["result"]["result"]) in t.messages[-1]["content"]
    if kind == "multi_turn":
        assert sum(m["role"] == "user" for m in t.messages) == 2


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown kind"):
        trajectories.make("poem", random.Random(0))
