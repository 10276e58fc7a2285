"""toolkit.eval.agent_runs: the summaries benchmarks/patterns.py saves, recomputed from the saved runs."""

import copy

from toolkit.eval.agent_runs import isolation, markdown, rag_summary, summarize
from toolkit.paths import saved_json


def test_the_saved_summaries_are_what_the_runs_give():
    doc = saved_json("patterns_qwen2.5-coder-0.5b.json")
    assert summarize(doc["runs"]) == doc["summary"] and isolation(doc["runs"]) == doc["isolation"]
    assert "| direct |" in markdown(doc) and doc["meta"]["commit"] in markdown(doc)
    rag = saved_json("rag_qwen2.5-coder-0.5b.json")
    assert rag_summary(rag["runs"]) == rag["summary"]
    flipped = copy.deepcopy(doc["runs"])  # every direct run now succeeds: the row follows
    for r in flipped:
        r["success"] = r["success"] or r["pattern"] == "direct"
    row = next(r for r in summarize(flipped) if r["pattern"] == "direct")
    assert row["successes"] == row["n"] and row["low"] > 0.5
