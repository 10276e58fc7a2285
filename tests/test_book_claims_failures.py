"""The ledger entries read from saved runs for §14.5.9, the "Tool Use" intro and §3.1 (toolkit.book.claims_failures)
and for §14.5.4's levers and length (toolkit.book.claims_chains.lever_claims): each verdict follows the saved
evidence — change the runs and the verdict changes — and the committed files give every entry."""

import copy
import json

import pytest

from toolkit import cost
from toolkit.book import claims_chains
from toolkit.book.claims_chains import lever_claims
from toolkit.book.claims_failures import (
    failure_claims,
    loop_claims,
    multi_call_claims,
    prompt_era_claims,
    selection_claims,
)
from toolkit.book.evidence import BFCL_RESULTS, LOOP_RESULTS
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS
from toolkit.paths import results_file


@pytest.fixture(scope="module")
def bfcl():
    return json.loads(results_file(BFCL_RESULTS).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def loops():
    return json.loads(results_file(LOOP_RESULTS).read_text(encoding="utf-8"))


def _by(claims):
    return {c.id: c for c in claims}


def _variant(doc, name):
    return next(r for r in doc["descriptions"]["data"]["rows"] if r["variant"] == name)


def test_saved_files_give_every_entry():
    assert set(_by(failure_claims())) == {
        "tool-choice-lookalike",
        "description-guidelines",
        "prompt-era-success",
        "multi-call-measured",
        "loops-and-early-answers",
    }
    assert set(_by(lever_claims())) == {"length-first-order", "pk-design-levers"}


def test_lookalike_tools_cut_the_step_rate_and_the_verdict_follows(bfcl):
    c = _by(selection_claims(bfcl))["tool-choice-lookalike"]
    look, orig = _variant(bfcl, "lookalike"), _variant(bfcl, "original")
    assert c.verdict in (HOLDS, CAVEAT) and f"{100 * look['accuracy']:.0f}%" in c.evidence
    assert f"{100 * orig['accuracy']:.0f}%" in c.evidence and "wrong_function" in c.evidence
    same = copy.deepcopy(bfcl)
    _variant(same, "lookalike").update({k: orig[k] for k in ("accuracy", "low", "high")})
    assert _by(selection_claims(same))["tool-choice-lookalike"].verdict == FAILS


def test_description_guidelines_verdict_follows_the_variants(bfcl):
    c = _by(selection_claims(bfcl))["description-guidelines"]
    assert c.verdict in (HOLDS, CAVEAT) and "tool tokens per request" in c.evidence
    worse = copy.deepcopy(bfcl)
    _variant(worse, "improved").update(accuracy=0.1, low=0.02, high=0.3)
    assert _by(selection_claims(worse))["description-guidelines"].verdict == FAILS
    clear = copy.deepcopy(bfcl)  # a clear gain, the AST verdict as good: only the sample-size caveat is left
    _variant(clear, "improved").update(accuracy=1.0, low=0.95, high=1.0, ast_accuracy=1.0)
    got = _by(selection_claims(clear))["description-guidelines"]
    assert got.verdict == CAVEAT and "no measurable gain" not in got.why and "tasks per variant" in got.why


def test_prompt_era_success_reads_the_prompt_and_native_rows(bfcl):
    c = _by(prompt_era_claims(bfcl))["prompt-era-success"]
    rows = {(r["mode"], r["category"]): r for r in bfcl["accuracy"]["data"]["rows"]}
    assert c.verdict in (HOLDS, CAVEAT)
    assert f"{100 * rows['prompt', 'simple_python']['accuracy']:.0f}%" in c.evidence
    good = copy.deepcopy(bfcl)
    for r in good["accuracy"]["data"]["rows"]:
        if r["mode"] == "prompt":
            r["correct"] = r["n"]
    assert _by(prompt_era_claims(good))["prompt-era-success"].verdict == FAILS


def test_loops_are_counted_from_the_saved_calls(loops):
    c = _by(loop_claims(loops))["loops-and-early-answers"]
    looped = [r["id"] for r in loops["rows"] if any(x.endswith("->repeated") for x in r["calls"])]
    assert looped and c.verdict == CAVEAT and f"in {len(looped)} of {len(loops['rows'])}" in c.evidence
    assert "context bloat is not observed" in c.why
    no_repeats = copy.deepcopy(loops)
    for r in no_repeats["rows"]:
        r["calls"] = [x for x in r["calls"] if not x.endswith("->repeated")]
    assert _by(loop_claims(no_repeats))["loops-and-early-answers"].verdict == FAILS


def _chains_file(tmp_path, change):
    doc = json.loads(results_file(claims_chains.BFCL_RESULTS).read_text(encoding="utf-8"))
    change(doc["chains"]["data"]["rows"])
    path = tmp_path / "bfcl.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_length_first_order_follows_the_rows(tmp_path):
    c = _by(lever_claims())["length-first-order"]
    assert c.verdict in (HOLDS, CAVEAT) and "spread" in c.evidence

    def flat(rows):  # success no longer depends on k under any lever
        for r in rows:
            r["success"] = 0.5 if r["steps_ok"] else 0.0

    assert _by(lever_claims(_chains_file(tmp_path, flat)))["length-first-order"].verdict == FAILS


def test_design_levers_show_the_retry_rows(tmp_path, monkeypatch):
    c = _by(lever_claims())["pk-design-levers"]
    assert c.verdict in (HOLDS, CAVEAT) and "'+ retry' rows equal" in c.evidence

    def retry_helps(rows):
        for r in rows:
            if r["lever"] == "constrained + retry" and r["k"] == 6:
                r["ok"] += 1

    got = _by(lever_claims(_chains_file(tmp_path, retry_helps)))["pk-design-levers"]
    assert "no retry changed an outcome" not in got.why
    monkeypatch.setattr(cost, "success", lambda p, k: 0.5)  # arithmetic in which nothing helps
    assert _by(lever_claims())["pk-design-levers"].verdict == FAILS


def test_several_calls_per_request_follow_the_parallel_rows(bfcl):
    c = _by(multi_call_claims(bfcl))["multi-call-measured"]
    assert c.verdict == CAVEAT and "calls per case" in c.evidence and "hierarchical" in c.why
    one = copy.deepcopy(bfcl)  # a model that wrote a single call where several were due
    for r in one["levers_full"]["data"]["rows"]:
        r["calls_per_case"] = 1.0
    assert _by(multi_call_claims(one))["multi-call-measured"].verdict == FAILS
    assert multi_call_claims({"accuracy": bfcl["accuracy"]}) == []  # no lever rows saved: nothing is claimed
