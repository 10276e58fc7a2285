"""toolkit.book.claims_serving: §14.5.8 claims computed from the saved server run (benchmarks/serving.py)."""

import copy
import json

import pytest

from toolkit.book import claims_serving
from toolkit.book.claims import check_all
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS
from toolkit.paths import results_file

IDS = ["served-no-suspend", "served-stop", "served-parallel", "served-stream", "served-prefix"]


@pytest.fixture(scope="module")
def saved():
    path = results_file("serving.json", required=False)
    assert path is not None, "benchmarks/results/serving.json is missing: run python benchmarks/serving.py"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def saved_vllm():
    path = results_file("serving_vllm.json", required=False)
    assert path is not None, "benchmarks/results/serving_vllm.json is missing: run python benchmarks/serving.py"
    return json.loads(path.read_text(encoding="utf-8"))


def _one(r, cid):
    return {
        "served-no-suspend": claims_serving._idle,
        "served-stop": claims_serving._stop,
        "served-parallel": claims_serving._parallel,
        "served-stream": claims_serving._stream,
        "served-prefix": claims_serving._prefix,
    }[cid](r)


def test_the_ledger_holds_the_five_server_claims_with_their_source(saved, saved_vllm):
    by = {c.id: c for c in check_all()}
    for cid in IDS:
        c = by[cid]
        run = saved_vllm if cid == "served-prefix" else saved  # the prefix claim reads the server with a cache
        assert c.section.startswith("§14.5.8") and run["meta"]["commit"] in c.evidence
        assert run["meta"]["server"] in c.evidence
    # what the saved run shows: the server is idle while the tool runs, stops at <|im_end|>, streams the same text
    assert (
        by["served-no-suspend"].verdict == HOLDS
        and "requests open while a tool ran: 0" in by["served-no-suspend"].evidence
    )
    assert by["served-stop"].verdict == HOLDS and "'stop'" in by["served-stop"].evidence
    assert by["served-stream"].verdict in (HOLDS, CAVEAT) and "same text: True" in by["served-stream"].evidence
    assert saved_vllm["prefix"]["server_reports_cached"] and by["served-prefix"].verdict == HOLDS
    if saved["parallel"]["two_call_answer_written_here"]:
        assert by["served-parallel"].verdict == CAVEAT and "written by the benchmark" in by["served-parallel"].why


def test_verdicts_follow_the_saved_numbers(saved):
    r = copy.deepcopy(saved)
    r["idle"]["overlaps"] = [[1, 0]]
    assert _one(r, "served-no-suspend").verdict == FAILS
    r = copy.deepcopy(saved)
    r["idle"]["tool_spans"] = []
    assert _one(r, "served-no-suspend").verdict == FAILS  # no tool ran: nothing shown
    r = copy.deepcopy(saved)
    r["stop"]["finish_reason"] = "length"
    assert _one(r, "served-stop").verdict == FAILS
    r = copy.deepcopy(saved)
    r["parallel"]["user_turns_after_call"] = 2
    assert _one(r, "served-parallel").verdict == FAILS
    r = copy.deepcopy(saved)
    r["parallel"]["two_call_answer_written_here"] = False
    assert _one(r, "served-parallel").verdict == HOLDS  # the caveat hangs on the saved flag
    r = copy.deepcopy(saved)
    r["stream"]["same_text"] = False
    assert _one(r, "served-stream").verdict == FAILS
    r = copy.deepcopy(saved)
    r["prefix"]["server_reports_cached"] = True
    assert _one(r, "served-prefix").verdict == HOLDS
    r["prefix"]["compressed_shared"] = r["prefix"]["compressed_prompt"]
    assert _one(r, "served-prefix").verdict == FAILS


def test_vllm_prefix_hits_and_the_prefill_workload(saved_vllm, saved):
    r = copy.deepcopy(saved_vllm)
    assert _one(r, "served-prefix").verdict == HOLDS
    r["prefix"]["turns"][1]["server_cached"] = 0  # the server reported no hit on a 236-token shared prefix
    assert _one(r, "served-prefix").verdict == FAILS
    c = claims_serving._prefill(saved_vllm, saved)
    w = saved_vllm["workload"]
    assert c.id == "served-prefill-cached" and f"{w['ratio_seconds']}x" in c.evidence
    assert c.verdict == CAVEAT and "scaled" in c.why  # measured at a smaller (T, Δ, R) than the chapter's
    r = copy.deepcopy(saved_vllm)
    r["workload"]["ratio_seconds"] = 1.02  # a server with no cache: no faster
    assert claims_serving._prefill(r, saved).verdict == FAILS
    r = copy.deepcopy(saved_vllm)
    r["workload"].update(T=10_000, delta=2048, R=30, ratio_seconds=r["workload"]["ratio_closed"])
    assert claims_serving._prefill(r, saved).verdict == HOLDS  # the chapter's own workload, at the closed form


def test_without_the_saved_run_there_are_no_typed_claims(monkeypatch):
    monkeypatch.setattr(claims_serving, "results_file", lambda name, required=True: None)
    assert claims_serving.serving_claims() == []
