"""toolkit.book.registry: one claim, one check; evidence loaded once per run; a loader that fails costs only the
checks that read it ("not checked", with the reason), and the others still give their verdicts."""

import pytest

from toolkit.book import claims_mcp, registry
from toolkit.book.ledger import CAVEAT, FAILS, HOLDS, make_verdict
from toolkit.book.registry import Group, NotCheckable


@pytest.fixture()
def toy(monkeypatch):
    """A group of three checks over two loaders, registered in a scratch loader table."""
    monkeypatch.setattr(registry, "LOADERS", {})
    calls = []

    @registry.loader
    def numbers():
        calls.append("numbers")
        return [1, 2, 3]

    @registry.loader
    def disk():
        raise RuntimeError("disk gone\nsecond line")

    g = Group("toy-test")
    g.add(
        "sum-is-6",
        "§0",
        "The numbers add up to 6.",
        lambda numbers: (f"sum {sum(numbers)}", *make_verdict(sum(numbers) == 6, "no")),
    )
    g.add("disk-read", "§0", "The disk is read.", lambda disk, numbers: ("read", *make_verdict(bool(disk), "no")))
    g.add(
        "three",
        "§0",
        "There are three.",
        lambda numbers: (f"{len(numbers)}", *make_verdict(len(numbers) == 4, "not 4")),
    )
    yield g, calls
    registry.GROUPS.pop("toy-test", None)


def test_a_failing_loader_costs_only_its_checks(toy):
    g, calls = toy
    by = {c.id: c for c in g.run()}
    assert list(by) == ["sum-is-6", "disk-read", "three"]
    assert by["sum-is-6"].verdict == HOLDS and by["three"].verdict == FAILS and by["three"].why == "not 4"
    lost = by["disk-read"]
    assert lost.verdict == CAVEAT and lost.evidence == "not checked"
    assert lost.why == "not checkable here: disk did not load: RuntimeError: disk gone"  # one line, bounded
    assert calls == ["numbers"]  # three checks read it; it ran once


def test_given_evidence_replaces_the_loader_and_a_check_is_callable(toy):
    g, calls = toy
    by = {c.id: c for c in g.run(numbers=[6], disk="ok")}
    assert by["sum-is-6"].evidence == "sum 6" and by["disk-read"].verdict == HOLDS and calls == []
    check = g.checks[0]
    assert check.evidence == ("numbers",)
    direct = check([1, 1])  # a test hands a check doctored evidence and gets the claim back
    assert direct.id == "sum-is-6" and direct.verdict == FAILS


def test_a_check_may_say_not_checkable_or_claim_nothing(monkeypatch):
    monkeypatch.setattr(registry, "LOADERS", {})
    g = Group("toy-test-2")

    def absent():
        raise NotCheckable("no saved run here")

    g.add("gone", "§0", "x", lambda: absent())
    g.add("nothing", "§0", "y", lambda: None)
    try:
        (c,) = g.run()
        assert c.id == "gone" and c.evidence == "not checked" and c.why == "not checkable here: no saved run here"
    finally:
        registry.GROUPS.pop("toy-test-2", None)


def test_a_loader_name_is_one_loader(monkeypatch):
    monkeypatch.setattr(registry, "LOADERS", {})

    def make():
        def twin():
            return 1

        return twin

    first, second = make(), make()
    second.__module__ = "elsewhere"
    registry.loader(first)
    with pytest.raises(ValueError, match="two loaders named 'twin'"):
        registry.loader(second)
    with pytest.raises(KeyError, match="no loader for evidence 'nowhere'"):
        registry.Evidence().load("nowhere")


def test_the_mcp_group_survives_a_probe_that_cannot_start(monkeypatch):
    """The real ledger: the in-process MCP probe fails to load; the checks that read it say why, the others still
    compute their verdicts (and the stdio crash probe, needed only beside it, is never started)."""
    monkeypatch.setitem(registry.LOADERS, "mcp_probe", lambda: (_ for _ in ()).throw(OSError("no event loop")))
    started = []
    monkeypatch.setitem(registry.LOADERS, "crash_probe", lambda: started.append(1))
    by = {c.id: c for c in claims_mcp.mcp_claims()}
    needs_probe = {c.id for c in claims_mcp.MCP.checks if "mcp_probe" in c.evidence}
    assert needs_probe >= {"tools-list-fields", "is-error", "decoupling-security"}
    for cid in needs_probe:
        assert by[cid].evidence == "not checked" and "mcp_probe did not load: OSError: no event loop" in by[cid].why
    others = set(by) - needs_probe
    assert others >= {"jsonrpc", "transports", "mcp-2024"} and all(
        not by[c].evidence.startswith("not ") for c in others
    )
    assert by["jsonrpc"].verdict == HOLDS and started == []


def test_every_check_is_small_and_registered_once():
    from toolkit.book.claims import checks

    ids = [c.id for c in checks()]
    assert len(ids) == len(set(ids)) >= 100
    import inspect

    long = []
    for c in checks():
        fn = getattr(c.fn, "func", c.fn)  # a table row binds its function with partial
        n = len(inspect.getsource(fn).splitlines())
        if n > 60:  # decorator included
            long.append(f"{c.id}: {n} lines")
    assert not long, long
