"""The saved BFCL results re-score to the same verdicts: every output text saved in
``benchmarks/results/bfcl_qwen2.5-coder-0.5b.json`` (accuracy, levers, levers_full) read back and scored by the kit's
reader and scorer gives the saved ``ok``/``kind``, and the tables' counts add up to them. A change to reading,
scoring or the levers' reader flags shows up here without running a model."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from toolkit.eval import bfcl
from toolkit.eval.run import result_from

SAVED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "bfcl_qwen2.5-coder-0.5b.json"


@pytest.fixture(scope="module")
def saved():
    return json.loads(SAVED.read_text())


@pytest.fixture(scope="module")
def cases():
    return {c.id: c for c in bfcl.subset()}


def _rescored(case, mode, text, lists=False):
    return result_from(case, mode, 0, text, 0, 0, 0.0, "stop", "", lists)


def test_accuracy_section_rescores_to_the_saved_verdicts(saved, cases):
    data = saved["accuracy"]["data"]
    changed = []
    for row in data["cases"]:
        if row["kind"] == "malformed" and "schema rejected" in str(row.get("detail", "")):
            continue
        r = _rescored(cases[row["id"]], row["mode"], row["text"])
        if (r.ok, r.kind) != (row["ok"], row["kind"]):
            changed.append((row["mode"], row["id"], row["kind"], r.kind))
    assert not changed, f"{len(changed)} saved outputs score differently now, e.g. {changed[:5]}"
    for t in data["rows"]:  # the table's counts are the cases' verdicts
        rs = [c for c in data["cases"] if c["mode"] == t["mode"] and cases[c["id"]].category == t["category"]]
        assert (len(rs), sum(c["ok"] for c in rs)) == (t["n"], t["correct"])
        assert dict(Counter(c["kind"] for c in rs)) == t["kinds"]


@pytest.mark.parametrize("section", ["levers", "levers_full"])
def test_lever_sections_rescore_to_the_saved_verdicts(saved, cases, section):
    data = saved[section]["data"]
    changed = []
    for row in data["cases"]:
        lever = data["levers"][row["lever"]]  # as benchmarks/bfcl.py runs it: the mode it names, its list reader
        r = _rescored(cases[row["id"]], lever.get("mode", "constrained"), row["text"], lever.get("list_calls", False))
        if (r.ok, r.kind) != (row["ok"], row["kind"]):
            changed.append((row["lever"], row["id"], row["kind"], r.kind))
    assert not changed, f"{len(changed)} saved lever outputs score differently now, e.g. {changed[:5]}"
    for t in data["rows"]:
        rs = [c for c in data["cases"] if c["lever"] == t["lever"] and cases[c["id"]].category == t["category"]]
        assert (len(rs), sum(c["ok"] for c in rs)) == (t["n"], t["correct"])
