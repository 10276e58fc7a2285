import ast
import inspect
import json

import pytest

from toolkit import cost
from toolkit.book import (
    claims,
    claims_chains,
    claims_cost,
    claims_failures,
    claims_flops,
    claims_grammar,
    claims_kit,
    claims_learned,
    claims_mcp,
    claims_mcp_probe,
    claims_mcp_sdk,
    claims_patterns,
    claims_rag,
    claims_reading,
    claims_render,
    claims_serving,
    claims_tool_use,
    claims_weights,
    evidence,
    ledger,
    registry,
)
from toolkit.book.claims import INVENTORY, check_all, coverage, inventory, to_markdown, write_markdown
from toolkit.book.claims_cost import cost_claims, decay_claims
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS, VERDICTS, Claim, make_verdict
from toolkit.commands.claims import cli

CLAIM_MODULES = (
    ledger,
    claims_cost,
    claims_flops,
    claims_render,
    claims_tool_use,
    claims_mcp,
    claims_kit,
    claims_serving,
    claims_patterns,
    claims_reading,
    claims_chains,
    claims_failures,
    claims_grammar,
    claims_weights,
    claims_rag,
    claims_mcp_probe,
    claims_mcp_sdk,
    claims_learned,
    evidence,
    registry,
    claims,
)

# What issues 5 and 17 require the ledger to cover, by claim id.
REQUIRED = {
    "prefill-no-cache",
    "prefill-cache",
    "ratio-30",
    "ratio-60",
    "constant",
    "inverse-0.9947",
    "one-per-190",
    "flops-llama",
    "flops-deepseek",
    "pflops",
    "tokens-per-tool",
    "tools-10",
    "tools-50",
    "tools-100",
    "tool-call-token",
    "special-set",
    "tool-role-turn",
    "jsonrpc",
    "tools-list-fields",
    "is-error",
    "transports",
    "sse-deprecated",
    "initialize-era",
    *{f"table-{p:.2f}-{k}" for p in cost.BOOK_PS for k in cost.BOOK_KS},
    # issue 17: the missing claims
    "system-block",
    "im-start-colon",
    "apply-chat-template",
    "sdk-names",
    "only-discover-call",
    "pk-upper-bound-measured",
    "decoupling-security",
    "loss-mask",
    "no-suspend",
    "parallel-calls",
    "compression-breaks-cache",
    "shape-not-meaning",
}


@pytest.fixture(scope="module")
def ledger():
    return check_all()


def test_ledger_covers_the_issue_and_every_entry_is_complete(ledger):
    ids = [c.id for c in ledger]
    assert len(ids) == len(set(ids))
    assert REQUIRED <= set(ids), REQUIRED - set(ids)
    for c in ledger:
        assert c.verdict in VERDICTS and c.claim and c.evidence and c.section
        if c.verdict != HOLDS:
            assert len(c.why) > 20, c.id


def test_every_inventory_line_is_mapped_or_says_why_not(ledger):
    statements = inventory()
    assert len(statements) >= 120  # the issue's reading found ~125 checkable claims
    cov = coverage(ledger, statements)
    assert cov["unmapped"] == [] and cov["unknown_ids"] == [] and cov["bad_kind"] == []
    assert cov["unused_claims"] == []  # every ledger entry answers some line of the chapters
    assert cov["mapped"] + cov["not_checkable"] == cov["statements"] == len(statements)
    for s in statements:
        assert s.section and s.quote and (s.ledger or len(s.reason) > 5), s


def test_inventory_rejects_a_line_with_neither(tmp_path, ledger):
    src = INVENTORY.read_text(encoding="utf-8")
    bad = tmp_path / "inv.tsv"
    bad.write_text(src + "§14.5.3\tsome new number\tnumber\t\n", encoding="utf-8")
    cov = coverage(ledger, inventory(bad))
    assert cov["unmapped"] == ["§14.5.3: some new number"] and cov["unknown_ids"] == []
    # a statement whose check the ledger did not produce (the mapping names an id the run lacks)
    cov = coverage([c for c in ledger if c.id != "constant"], inventory(bad))
    assert cov["unknown_ids"] == ["constant"]


def test_the_mapping_comes_from_the_checks():
    """Each inventory line's ids are the checks that name its quote (main check first); the registry's side is sound,
    and it says so when a check names a quote the inventory lacks or a line has a check and a reason."""
    assert claims.registry_problems() == []
    by_quote = {s.quote: s.ledger for s in inventory()}
    assert by_quote["相差 20.4 倍"] == ["ratio-30"]
    assert by_quote["第 6 步是一个新请求，只是前缀更长"] == ["no-suspend", "prefix-extends", "served-prefix"]
    lines = [s for s in inventory() if s.quote != "相差 20.4 倍"]  # a check's quote gone from the inventory
    assert any("ratio-30" in p and "not in the inventory" in p for p in claims.registry_problems(lines))
    both = inventory()
    both[0].reason = "said not checkable, yet a check answers it"
    assert any("and a reason" in p for p in claims.registry_problems(both))


def _calls(fn_name: str):
    tree = ast.parse("\n".join(inspect.getsource(m) for m in CLAIM_MODULES))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == fn_name]


def test_no_verdict_or_caveat_is_typed():
    """Every verdict and every caveat hangs on a computed condition: no literal True/False, no literal verdict."""
    calls = _calls("make_verdict")
    assert len(calls) > 50
    for c in calls:
        assert not isinstance(c.args[0], ast.Constant), ast.unparse(c)
        caveats = c.args[2] if len(c.args) > 2 else next((k.value for k in c.keywords if k.arg == "caveats"), None)
        if caveats is not None:
            assert isinstance(caveats, ast.List), ast.unparse(c)
            for item in caveats.elts:
                assert isinstance(item, ast.Tuple) and len(item.elts) == 2, ast.unparse(item)
                cond = item.elts[0]
                assert not isinstance(cond, ast.Constant), ast.unparse(item)
                assert any(isinstance(x, (ast.Name, ast.Subscript, ast.Attribute, ast.Call)) for x in ast.walk(cond))
    verdict_names = {"HOLDS", "CAVEAT", "FAILS"}
    for c in _calls("Claim"):
        for arg in list(c.args[4:]) + [k.value for k in c.keywords if k.arg in ("verdict", "why")]:
            assert not (isinstance(arg, ast.Name) and arg.id in verdict_names), ast.unparse(c)
            assert not (isinstance(arg, ast.Constant) and arg.value in VERDICTS), ast.unparse(c)


def test_caveats_follow_the_evidence():
    assert make_verdict(True, "x", [(False, "hidden")]) == (HOLDS, "")
    assert make_verdict(True, "x", [(True, "shown"), (False, "hidden")]) == (CAVEAT, "shown")
    assert make_verdict(False, "because") == (FAILS, "because")


def test_known_verdicts(ledger):
    by = {c.id: c for c in ledger}
    assert by["prefill-no-cache"].verdict == HOLDS and "1,252,320" in by["prefill-no-cache"].evidence
    assert all(by[f"table-{p:.2f}-{k}"].verdict == HOLDS for p in cost.BOOK_PS for k in cost.BOOK_KS)
    role = by["tool-role-turn"]
    assert role.verdict == FAILS and "user turn" in role.why and "tool turn False" in role.evidence
    assert by["tool-call-token"].verdict in (HOLDS, CAVEAT) and "151657" in by["tool-call-token"].evidence
    assert "tokenizer.json" in by["tool-call-token"].evidence  # the real model's file, not the kit's table
    assert "generation_config.json" in by["eos"].evidence and "<|im_end|>" in by["eos"].evidence
    assert by["arguments-object"].verdict == FAILS and "escaped JSON string" in by["arguments-object"].evidence
    assert by["tools-isomorphic"].verdict == CAVEAT and "outputSchema" in by["tools-isomorphic"].why
    assert by["shorten-lowers-base"].verdict == FAILS and "exponent" in by["shorten-lowers-base"].why
    assert by["one-line-newlines"].verdict == FAILS
    assert by["initialize-era"].verdict == CAVEAT and "server/discover" in by["initialize-era"].why
    assert "clientInfo" in by["initialize-era"].evidence and "protocolVersion" in by["initialize-era"].evidence
    assert "2.0" in by["jsonrpc"].evidence
    # issue 17's fixes: no pedantic caveats; the book is right about isError, the SDK deviates
    assert by["constant"].verdict == HOLDS and by["special-set"].verdict in (HOLDS, CAVEAT)
    assert by["is-error"].verdict == HOLDS and "-32601" in by["is-error"].evidence
    assert "deviation of the SDK" in by["is-error"].evidence
    assert "BFCL" in by["tokens-per-tool"].evidence and all("BFCL" in by[f"tools-{n}"].evidence for n in (10, 50, 100))
    assert "KV cache" in by["decode-wall-clock"].evidence and "attention" in by["decode-wall-clock"].evidence
    assert by["apply-chat-template"].verdict == CAVEAT and "input_ids" in by["apply-chat-template"].why
    assert by["im-start-colon"].verdict == FAILS
    assert by["loss-mask"].verdict == HOLDS and "trained 0 of" in by["loss-mask"].evidence
    assert by["shape-not-meaning"].verdict == CAVEAT and "strict mode" in by["shape-not-meaning"].why
    assert by["enum-range-grammar"].verdict in (HOLDS, CAVEAT) and "xgrammar" in by["enum-range-grammar"].evidence
    # the final <|im_end|> is sampled, never fed: the cache holds one token less than prompt + output
    assert "cached tokens reused" in by["prefix-extends"].evidence


def test_verdicts_are_computed_not_typed(monkeypatch):
    """Break the arithmetic and the same claims stop holding, with a reason."""
    monkeypatch.setattr(cost, "success", lambda p, k: p ** (k + 3))
    broken = decay_claims()
    assert all(c.verdict == FAILS and c.why.startswith("rounds to") for c in broken if c.id.startswith("table"))
    monkeypatch.undo()
    assert all(c.verdict == HOLDS for c in decay_claims() if c.id.startswith("table"))
    real_growth = cost.growth  # cost is this module: keep the original before patching
    monkeypatch.setattr(cost, "growth", lambda *a, **k: real_growth(10_000, 2000, 30, *a[3:], **k))
    by = {c.id: c for c in cost_claims()}
    assert by["prefill-no-cache"].verdict == FAILS and by["ratio-30"].verdict == FAILS


def test_claim_rejects_missing_reason_and_bad_verdict():
    with pytest.raises(ValueError, match="needs a reason"):
        Claim("x", "§1", "c", "e", FAILS)
    with pytest.raises(ValueError, match="unknown verdict"):
        Claim("x", "§1", "c", "e", "maybe")


def test_markdown_and_cli(tmp_path, capsys, ledger):
    md = to_markdown(ledger)
    assert md.count("\n| ") == len(ledger) + 1  # header + one row per claim
    assert "Coverage — inventory:" in md
    path = write_markdown(tmp_path / "claims.md", ledger)
    assert path.read_text(encoding="utf-8") == md
    import toolkit.book.claims as claims_module  # the command imports check_all from here after parsing

    monkey = claims_module.check_all
    try:
        claims_module.check_all = lambda: ledger  # the CLI formats; the checks already ran in the fixture
        assert cli(["--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert {r["id"] for r in out["claims"]} == {c.id for c in ledger}
        assert out["coverage"]["unmapped"] == [] and out["coverage"]["statements"] >= 120
        assert cli([]) == 0
        out = capsys.readouterr().out
        assert "does not hold" in out and "why:" in out and "not checkable here" in out
    finally:
        claims_module.check_all = monkey


def test_openai_request_body_is_sent_by_the_pinned_client(monkeypatch):
    c = {x.id: x for x in claims_tool_use.request_body_claims()}["openai-request-body"]
    assert c.verdict == CAVEAT and "'gpt-4o'" in c.evidence and "tool.name" in c.why
    assert f"pinned {claims_tool_use.pinned('openai')}" in c.evidence
    real = claims_tool_use.tool_use_conversation

    def without_name():
        msgs, tools = real()
        return [{k: v for k, v in m.items() if not (m["role"] == "tool" and k == "name")} for m in msgs], tools

    monkeypatch.setattr(claims_tool_use, "tool_use_conversation", without_name)
    assert claims_tool_use.request_body_claims()[0].verdict == HOLDS

    def arguments_as_object():
        msgs, tools = real()
        for m in msgs:
            for call in m.get("tool_calls") or []:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        return msgs, tools

    monkeypatch.setattr(claims_tool_use, "tool_use_conversation", arguments_as_object)
    assert claims_tool_use.request_body_claims()[0].verdict == FAILS


def test_mcp_sdk_wire_encoding_and_governance_come_from_the_sdk(monkeypatch):
    import mcp.server.mcpserver as mcpserver
    from starlette.responses import Response

    by = {c.id: c for c in claims_mcp_sdk.mcp_sdk_claims()}
    utf8, gov = by["utf8-every-transport"], by["mcp-governance-not-automatic"]
    assert utf8.verdict == CAVEAT and "'utf-8'" in utf8.evidence and "not enforced" in utf8.why
    assert gov.verdict == CAVEAT and "mcp.server.auth" in gov.evidence and "opt-in" in gov.why
    monkeypatch.setattr(Response, "charset", "utf-16")  # an HTTP stack that wrote another encoding
    assert {c.id: c for c in claims_mcp_sdk.mcp_sdk_claims()}["utf8-every-transport"].verdict == FAILS
    monkeypatch.undo()

    class Guarded:  # a server whose defaults already required authentication
        def __init__(self, name):
            self.settings = type("S", (), {"auth": object()})()

    monkeypatch.setattr(mcpserver, "MCPServer", Guarded)
    assert {c.id: c for c in claims_mcp_sdk.mcp_sdk_claims()}["mcp-governance-not-automatic"].verdict == FAILS


def test_renormalisation_claim_is_computed_on_the_stand_in(ledger, monkeypatch):
    from toolkit.grammar.distortion import Distortion
    from toolkit.tokenizer import tokenizer_for

    c = {x.id: x for x in ledger}["renormalisation-distorts"]
    assert c.verdict in (HOLDS, CAVEAT) and "total variation" in c.evidence and "stand-in" in c.evidence
    assert all(f'"{city}"' in c.evidence for city in claims_kit.CITIES["enum"])

    def faithful(*a, **k):  # a mask that kept the model's own distribution over the valid outputs
        rows = [('"Paris"', 0.7, 0.7, 1), ('"Lyon"', 0.3, 0.3, 1)]
        return Distortion(rows, valid_mass=0.5, pruned=0.0, nodes=3, greedy='"Paris"')

    monkeypatch.setattr(claims_kit, "distortion", faithful)
    assert claims_kit.renormalisation_claim(tokenizer_for("qwen3")).verdict == FAILS


def test_decode_wall_clock_reads_the_saved_gpu_run():
    from toolkit.speed import saved_gpu_result

    gpu = saved_gpu_result()
    c = claims_flops.wall_clock_claim(97, 25, 37, 2.3, gpu)
    assert c.verdict == CAVEAT and "H200" in c.evidence and "of the bandwidth floor" in c.evidence
    assert "0.6B" in c.why and "40%" not in c.evidence  # the measured fractions, no assumed utilisation
    slow = {**gpu, "agent": {**gpu["agent"], "wall_reuse_s": 1e4}}  # a cached prefill slower than decode
    assert claims_flops.wall_clock_claim(97, 25, 37, 2.3, slow).verdict == FAILS
    assert claims_flops.wall_clock_claim(97, 25, 37, 2.3, None).evidence.endswith("each phase gets")


def test_decoupling_is_checked_on_a_killed_stdio_server(monkeypatch):
    crash = claims_mcp.stdio_crash_probe()
    assert crash["server_gone"] and crash["fresh"] == {"expression": "1+1", "result": 2}, crash
    assert crash["error"].startswith("crash_process: ") and "\n" not in crash["error"] and crash["seconds"] < 10
    # a host that hung or died with the server: the same claim no longer holds
    stuck = dict(error=None, seconds=30.0, server_gone=True, dead_session="MCPError: timed out", fresh=None)
    monkeypatch.setattr(claims_mcp, "stdio_crash_probe", lambda: stuck)
    assert {c.id: c for c in claims_mcp.mcp_claims()}["decoupling-security"].verdict == FAILS


def test_one_verdict_per_statement(ledger):
    from toolkit.book.claims import statement_verdict

    assert statement_verdict([HOLDS, CAVEAT]) == CAVEAT and statement_verdict([CAVEAT, FAILS, HOLDS]) == FAILS
    cov = coverage(ledger)
    assert sum(cov["statement_verdicts"].values()) == cov["computed"]
    assert all("→" in m for m in cov["mixed"]) and "weakest" in to_markdown(ledger)
