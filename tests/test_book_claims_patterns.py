"""The §14.5.5 / §14.5.10 ledger entries (toolkit.book.claims_patterns): each verdict follows the saved evidence —
change the runs and the verdict changes — and the saved real-model files give every entry."""

import copy

import pytest

from toolkit.book.claims_patterns import pattern_claims, patterns_claims
from toolkit.book.claims_rag import rag_claims
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS, VERDICTS

META = {"model": "M [x]", "date": "2026-12-01T00:00:00", "commit": "abc1234", "k": 2}


def _turn(context, prompt, calls=(), decoded=10):
    return {"context": context, "prompt": prompt, "prefilled": prompt, "decoded": decoded, "calls": list(calls)}


def _run(pattern, tid, success, turns):
    return {
        "pattern": pattern,
        "task": {"id": tid, "min_calls": 2},
        "success": success,
        "turns": turns,
        "n_turns": len(turns),
        "prefilled": sum(t["prefilled"] for t in turns),
        "decoded": sum(t["decoded"] for t in turns),
        "main_peak": max(t["prompt"] for t in turns if t["context"] == "main"),
    }


def _patterns(react_ok=(False, False), iso_gain=50, shared_gain=400, direct_ok=True):
    runs = []
    for i, r_ok in enumerate(react_ok):
        t = f"t{i}"
        runs.append(_run("direct", t, direct_ok, [_turn("main", 500, ["get_weather"]), _turn("main", 600)]))
        runs.append(
            _run("react", t, r_ok, [_turn("main", 500), _turn("main", 520, ["get_weather"]), _turn("main", 640)])
        )
        for name, gain in (("subagent", iso_gain), ("subagent_shared", shared_gain)):
            runs.append(
                _run(
                    name,
                    t,
                    False,
                    [
                        _turn("main", 400, ["delegate"]),
                        _turn("sub1", 300, ["get_weather"]),
                        _turn("sub1", 380),
                        _turn("main", 400 + gain),
                    ],
                )
            )
    summary = []
    for name in ("direct", "react", "subagent", "subagent_shared"):
        rs = [r for r in runs if r["pattern"] == name]
        ok = sum(r["success"] for r in rs)
        summary.append(dict(pattern=name, n=len(rs), successes=ok, rate=ok / len(rs), low=0.0, high=0.8))
    return {"meta": META, "runs": runs, "summary": summary}


def test_pattern_verdicts_follow_the_runs():
    by = {c.id: c for c in pattern_claims(_patterns())}
    assert set(by) == {"react-think-pays", "subagent-isolation", "subagent-pk"}
    assert by["react-think-pays"].verdict != FAILS and "did not pay" in by["react-think-pays"].evidence
    assert "p_action 1.00" in by["react-think-pays"].evidence
    assert by["subagent-isolation"].verdict == HOLDS and "50 tokens per delegation" in by["subagent-isolation"].evidence
    # the isolated main context growing faster than the shared one breaks the isolation claim
    flipped = {c.id: c for c in pattern_claims(_patterns(iso_gain=500, shared_gain=100))}
    assert flipped["subagent-isolation"].verdict == FAILS
    # ReAct not adding turns breaks the thought claim
    doc = _patterns()
    for r in doc["runs"]:
        if r["pattern"] == "react":
            r["n_turns"] = 1
    assert {c.id: c for c in pattern_claims(doc)}["react-think-pays"].verdict == FAILS
    paid = {c.id: c for c in pattern_claims(_patterns(react_ok=(True, True), direct_ok=False))}
    assert paid["react-think-pays"].verdict != FAILS and "the thought paid" in paid["react-think-pays"].evidence
    assert "p_think × p_action′ 1.00" in paid["react-think-pays"].evidence


def _rag():
    def run(mode, q, role, retrieved, recall, correct, supported, cited, calls=()):
        return dict(
            mode=mode,
            question=q,
            role=role,
            retrieved=retrieved,
            recall=recall,
            correct=correct,
            supported=supported,
            cited=cited,
            calls=[{"name": c} for c in calls],
        )

    runs = [
        run("before", "hotel", "staff", ["travel-02", "remote-02"], 1.0, True, False, []),
        run("before", "card-staff", "staff", ["expense-02"], None, True, True, []),
        run("before_rerank", "hotel", "staff", ["travel-02"], 1.0, True, True, ["travel-02"]),
        run("tool", "hotel", "staff", [], 0.0, False, False, ["travel-04"]),
    ]
    inj = [
        dict(guard=g, corpus=c, calls=[{"name": "write_note"}] if (not g and c == "injected") else [])
        for g in (True, False)
        for c in ("injected", "clean")
    ]
    rr = dict(
        reranker="cross-encoder R [x]",
        depth=8,
        ks=[1, 2],
        n=2,
        n_scored=1,
        recall_bm25={"1": 0.5, "2": 1.0},
        recall_rerank={"1": 1.0, "2": 1.0},
        requests=16,
        tokens=3000,
        seconds=8.0,
        rows=[{"question": "hotel", "candidates": [{"id": "travel-02"}, {"id": "leave-01"}]}],
    )
    summary = [
        dict(mode="before", n=2, supported=1, seconds=10.0),
        dict(mode="before_rerank", n=1, supported=1, seconds=14.0),
    ]
    return {"meta": META, "runs": runs, "injection": inj, "rerank_recall": rr, "summary": summary}


def test_rag_verdicts_follow_the_runs():
    by = {c.id: c for c in rag_claims(_rag())}
    assert set(by) == {
        "rag-permission-first",
        "rag-recall-not-use",
        "rag-citation-not-support",
        "rag-injection",
        "rag-rerank",
    }
    assert by["rag-permission-first"].verdict == HOLDS and "0 above" in by["rag-permission-first"].evidence
    assert by["rag-recall-not-use"].verdict == HOLDS and by["rag-citation-not-support"].verdict != FAILS
    assert "supported False" in by["rag-citation-not-support"].evidence
    assert by["rag-injection"].verdict != FAILS and "guard" in by["rag-injection"].why
    assert by["rag-rerank"].verdict == HOLDS and "@1 0.50 → 1.00" in by["rag-rerank"].evidence

    leaked = _rag()  # a finance passage in a staff asker's reranked candidates
    leaked["rerank_recall"]["rows"][0]["candidates"].append({"id": "expense-04"})
    assert {c.id: c for c in rag_claims(leaked)}["rag-permission-first"].verdict == FAILS
    obeyed = _rag()  # the guarded run called a tool only with the injected line
    obeyed["injection"][0]["calls"] = [{"name": "write_note"}]
    assert {c.id: c for c in rag_claims(obeyed)}["rag-injection"].verdict == FAILS
    worse = _rag()
    worse["rerank_recall"]["recall_rerank"]["1"] = 0.5
    assert {c.id: c for c in rag_claims(worse)}["rag-rerank"].verdict == FAILS
    chat = _rag()  # a chat model scoring yes/no tests the scorer, not the idea: not checked, whatever it scores
    chat["rerank_recall"]["reranker"] = "Qwen2.5-Coder-0.5B [x]"
    chat["rerank_recall"]["recall_rerank"]["1"] = 0.5
    rr = {c.id: c for c in rag_claims(chat)}["rag-rerank"]
    assert rr.verdict == CAVEAT and rr.why.startswith("not checked")
    used = copy.deepcopy(_rag())
    used["runs"][0]["supported"] = True
    assert {c.id: c for c in rag_claims(used)}["rag-recall-not-use"].verdict == FAILS


def test_saved_real_model_runs_give_every_entry():
    got = {c.id: c for c in patterns_claims()}
    if not got:
        pytest.fail("benchmarks/results has no saved pattern or RAG runs")
    for cid in ("react-think-pays", "subagent-isolation", "subagent-pk", "rag-permission-first", "rag-injection"):
        assert cid in got and got[cid].verdict in VERDICTS
        assert "Qwen2.5-Coder-0.5B" in got[cid].evidence and "commit" in got[cid].evidence
    assert got["rag-permission-first"].verdict == HOLDS  # no restricted passage ever reached a prompt
    assert got["rag-injection"].verdict != FAILS


def test_citation_claim_fails_when_the_scorer_takes_any_citation_as_support(monkeypatch):
    from toolkit.book import claims_rag

    real = claims_rag.grade
    monkeypatch.setattr(claims_rag, "grade", lambda a, r, q: dict(real(a, r, q), supported=True))
    by = {c.id: c for c in rag_claims(_rag())}
    assert by["rag-citation-not-support"].verdict == FAILS


def test_simple_task_claim_follows_the_saved_runs():
    from toolkit.book.claims_patterns import PATTERN_RESULTS, simple_task_claims
    from toolkit.paths import saved_json

    doc = saved_json(PATTERN_RESULTS)
    (c,) = simple_task_claims(doc)
    assert c.id == "react-simple-no-gain" and c.verdict in (HOLDS, CAVEAT) and "simplest" in c.evidence
    k_min = min(r["task"]["min_calls"] for r in doc["runs"] if r["pattern"] == "direct")
    won = copy.deepcopy(doc)  # the written thought now wins every simple task, the direct loop none
    for r in won["runs"]:
        if r["task"]["min_calls"] == k_min and r["pattern"] in ("react", "direct"):
            r["success"] = r["pattern"] == "react"
    (w,) = simple_task_claims(won)
    assert w.verdict == FAILS and "succeed more often" in w.why


def test_handoff_loss_counts_what_the_summary_dropped():
    from toolkit.book.claims_reading import handoff_loss_claim

    result = {"city": "Oslo", "temperature": 4, "condition": "sleet", "source": "demo table"}
    steps = [
        {"kind": "call", "context": "sub1", "status": "ok", "result": result},
        {"kind": "summary", "context": "sub1", "task": "weather in Oslo?", "text": "Oslo: 4 degrees."},
    ]
    doc = {"meta": META, "runs": [{"pattern": "subagent", "steps": steps}]}
    c = handoff_loss_claim(doc)
    assert c.verdict == CAVEAT and "carried 1 of the 3 values" in c.evidence and "0 of them numbers" in c.evidence
    steps[1]["text"] = "Oslo: 4 degrees, sleet (from the demo table)."  # a summary that passes everything on
    assert handoff_loss_claim(doc).verdict == FAILS
