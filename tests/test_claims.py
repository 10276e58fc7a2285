import json

import pytest

from toolkit import claims, cost

# What issue 5 requires the ledger to cover, by claim id.
REQUIRED = {
    "prefill-no-cache", "prefill-cache", "ratio-30", "ratio-60", "constant", "inverse-0.9947", "one-per-190",
    "flops-llama", "flops-deepseek", "pflops", "tokens-per-tool", "tools-10", "tools-50", "tools-100",
    "tool-call-token", "special-set", "tool-role-turn", "jsonrpc", "tools-list-fields", "is-error", "transports",
    "sse-deprecated", "initialize-era",
    *{f"table-{p:.2f}-{k}" for p in cost.BOOK_PS for k in cost.BOOK_KS},
}


@pytest.fixture(scope="module")
def ledger():
    return claims.check_all()


def test_ledger_covers_the_issue_and_every_entry_is_complete(ledger):
    ids = [c.id for c in ledger]
    assert len(ids) == len(set(ids))
    assert REQUIRED <= set(ids), REQUIRED - set(ids)
    for c in ledger:
        assert c.verdict in claims.VERDICTS and c.claim and c.evidence and c.section
        if c.verdict != claims.HOLDS:
            assert len(c.why) > 20, c.id


def test_known_verdicts(ledger):
    by = {c.id: c for c in ledger}
    assert by["prefill-no-cache"].verdict == claims.HOLDS and "1,252,320" in by["prefill-no-cache"].evidence
    assert all(by[f"table-{p:.2f}-{k}"].verdict == claims.HOLDS for p in cost.BOOK_PS for k in cost.BOOK_KS)
    # the second chapter prints a 'tool' turn; both kit templates render results in a user turn
    role = by["tool-role-turn"]
    assert role.verdict == claims.FAILS and "user turn" in role.why
    assert "tool turn False" in role.evidence
    assert by["tool-call-token"].verdict == claims.HOLDS and "151657" in by["tool-call-token"].evidence
    assert by["initialize-era"].verdict == claims.CAVEAT and "server/discover" in by["initialize-era"].why
    assert "2.0" in by["jsonrpc"].evidence


def test_verdicts_are_computed_not_typed(monkeypatch):
    """Break the arithmetic and the same claims stop holding, with a reason."""
    monkeypatch.setattr(claims.cost, "success", lambda p, k: p ** (k + 3))
    broken = claims.decay_claims()
    assert all(c.verdict == claims.FAILS and c.why.startswith("rounds to") for c in broken if c.id.startswith("table"))
    monkeypatch.undo()
    assert all(c.verdict == claims.HOLDS for c in claims.decay_claims() if c.id.startswith("table"))
    real_growth = cost.growth  # claims.cost is this module: keep the original before patching
    monkeypatch.setattr(claims.cost, "growth", lambda *a, **k: real_growth(10_000, 2000, 30, *a[3:], **k))
    by = {c.id: c for c in claims.cost_claims()}
    assert by["prefill-no-cache"].verdict == claims.FAILS and by["ratio-30"].verdict == claims.FAILS


def test_claim_rejects_missing_reason_and_bad_verdict():
    with pytest.raises(ValueError, match="needs a reason"):
        claims.Claim("x", "§1", "c", "e", claims.FAILS)
    with pytest.raises(ValueError, match="unknown verdict"):
        claims.Claim("x", "§1", "c", "e", "maybe")


def test_markdown_and_cli(tmp_path, capsys, ledger):
    md = claims.to_markdown(ledger)
    assert md.count("\n| ") == len(ledger) + 1  # header + one row per claim
    path = claims.write_markdown(tmp_path / "claims.md", ledger)
    assert path.read_text(encoding="utf-8") == md
    monkey = claims.check_all
    try:
        claims.check_all = lambda: ledger  # the CLI formats; the checks already ran in the fixture
        assert claims.cli(["--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert {r["id"] for r in rows} == {c.id for c in ledger}
        assert claims.cli([]) == 0
        out = capsys.readouterr().out
        assert "does not hold" in out and "why:" in out
    finally:
        claims.check_all = monkey
