"""The ledger's streaming check: the kit's side is computed (random chunkings), the vLLM side read from the saved
replay; the verdict follows both and fails when the streamed parse differs."""

from toolkit.book import claims_streaming as cs

REPLAY = {
    "worker": {"vllm": "0.32.0"},
    "streams": 70,
    "cases": 10,
    "date": "2026-12-04T00:00:00+00:00",
    "commit": "abc1234",
    "vllm_differences": 14,
    "vllm_stream_vs_own_one_shot": 9,
    "table": [{"cause": "stream cut mid-call", "streams": 14}],
    "chunking_dependent": {"cases": 2},
}


def test_the_kit_streams_to_the_one_shot_parse_on_every_chunking():
    s = cs.stream_chunkings()
    assert s["chunkings"] >= cs.MIN_CHUNKINGS and s["equal"] == s["chunkings"] and not s["bad"]
    assert s["real"] > 0 and s["texts"] == s["real"] + len(cs.HARD)


def test_the_verdict_follows_the_evidence():
    ok = {"texts": 3, "real": 1, "chunkings": cs.MIN_CHUNKINGS, "equal": cs.MIN_CHUNKINGS, "bad": []}
    run = lambda s, r: cs.STREAMING.run(stream_chunkings=s, stream_replay=r)[0]  # noqa: E731
    caveat = run(ok, REPLAY)
    assert caveat.verdict == "holds with a caveat" and "2 case(s)" in caveat.why and "14 of 70" in caveat.why
    assert "9 of 70" in caveat.why
    clean = run(ok, dict(REPLAY, vllm_differences=0, vllm_stream_vs_own_one_shot=0, chunking_dependent={"cases": 0}))
    assert clean.verdict == "holds"
    assert run(dict(ok, equal=ok["chunkings"] - 1, bad=["x"]), REPLAY).verdict == "does not hold"
    assert run(dict(ok, chunkings=99, equal=99), REPLAY).verdict == "does not hold"
    no_vllm = run(ok, {"worker": {}})
    assert no_vllm.verdict == "holds with a caveat" and "not replayed" in no_vllm.why
