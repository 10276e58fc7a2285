"""Chains: each step's expected call follows what the previous call returned; strict vs one-retry scoring."""

import json

import pytest

from toolkit.backends.scripted import ScriptedBackend
from toolkit.eval import chains


@pytest.fixture(scope="module")
def tok():
    from toolkit.models import qwen_tokenizer

    return qwen_tokenizer("qwen2.5")


def call(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def test_expected_steps_follow_the_previous_result():
    assert chains.step_ok("landmark_city", "landmark_city", {"landmark": "eiffel tower"}, None, "Eiffel Tower")
    assert chains.step_ok("get_weather", "get_weather", {"city": "Paris"}, {"city": "Paris"}, "x")
    assert not chains.step_ok("get_weather", "get_weather", {"city": "London"}, {"city": "Paris"}, "x")
    assert chains.step_ok(
        "c_to_f", "convert_units", {"value": 18, "from_unit": "c", "to_unit": "f"}, {"temperature": 18}, "x"
    )
    assert chains.step_ok("times_two", "calculator", {"expression": "64.4*2"}, {"result": 64.4}, "x")
    assert not chains.step_ok("times_two", "calculator", {"expression": "64.4+2"}, {"result": 64.4}, "x")
    assert not chains.step_ok("minus_100", "calculator", {"expression": "__import__('os')"}, {"result": 1}, "x")
    assert chains.task("Big Ben", 3).steps == ("landmark_city", "get_weather", "c_to_f")
    with pytest.raises(ValueError):
        chains.task("Big Ben", 7)


def test_a_right_chain_scores_all_steps(tok):
    script = [
        call("landmark_city", landmark="Eiffel Tower"),
        call("get_weather", city="Paris"),
        call("convert_units", value=18, from_unit="c", to_unit="f"),
        "It is 64.4 °F.",
    ]
    _trace, s = chains.run_chain(ScriptedBackend(tok, script), tok, chains.task("Eiffel Tower", 3))
    assert s.strict and s.retry and s.calls == 3


def test_strict_fails_where_one_retry_after_a_tool_error_succeeds(tok):
    script = [
        call("landmark_city", landmark="Eiffel Tower"),
        call("get_weather", city="Paris", unit="kelvin"),
        call("get_weather", city="Paris"),
        "18 °C.",
    ]
    _, s = chains.run_chain(ScriptedBackend(tok, script), tok, chains.task("Eiffel Tower", 2))
    assert not s.strict and s.strict_steps_ok == 1 and s.retry and s.retried


def test_a_wrong_but_accepted_call_is_not_retried(tok):
    script = [
        call("landmark_city", landmark="Eiffel Tower"),
        call("get_weather", city="London"),
        call("get_weather", city="Paris"),
        "done",
    ]
    _, s = chains.run_chain(ScriptedBackend(tok, script), tok, chains.task("Eiffel Tower", 2))
    assert not s.strict and not s.retry and s.retry_steps_ok == 1


def test_step_tasks(tok):
    steps = chains.step_tasks("Tokyo Tower")
    assert [s for s, _, _ in steps] == list(chains.STEPS)
    ok = chains.run_step(
        ScriptedBackend(tok, [call("calculator", expression=f"{steps[3][2]['result']} * 2")]),
        tok,
        "Tokyo Tower",
        *steps[3],
    )
    assert ok
    wrong = chains.run_step(
        ScriptedBackend(tok, [call("calculator", expression=f"{steps[3][2]['result']} / 2")]),
        tok,
        "Tokyo Tower",
        *steps[3],
    )
    assert not wrong


def test_a_repeat_is_not_a_tool_error_so_retry_does_not_excuse_it(tok):
    script = [
        call("landmark_city", landmark="Big Ben"),
        call("landmark_city", landmark="Big Ben"),  # the same call again: the loop does not run it
        call("get_weather", city="London"),
        "14 °C.",
    ]
    _, s = chains.run_chain(ScriptedBackend(tok, script), tok, chains.task("Big Ben", 2))
    assert s.strict_steps_ok == 1 and not s.retry and not s.retried


def test_until_decided_stops_early_with_the_same_score(tok):
    script = [call("landmark_city", landmark="Big Ben"), call("get_weather", city="London"), "It is 14 °C in London."]
    full, s_full = chains.run_chain(ScriptedBackend(tok, script), tok, chains.task("Big Ben", 2))
    short, s_short = chains.run_chain(ScriptedBackend(tok, script), tok, chains.task("Big Ben", 2), until_decided=True)
    assert (
        (s_full.strict, s_full.retry, s_full.strict_steps_ok) == (s_short.strict, s_short.retry, 2) == (True, True, 2)
    )
    assert full.answer and full.stop.reason == "answered"
    assert short.answer is None and short.stop is None  # the unscored answer turn never ran
    wrong = [call("landmark_city", landmark="Big Ben"), call("get_weather", city="Paris"), "x", "y"]
    tr, s = chains.run_chain(ScriptedBackend(tok, wrong), tok, chains.task("Big Ben", 3), until_decided=True)
    assert s.decided and not s.strict and s.strict_steps_ok == 1 and s.rounds == 2  # stopped at the wrong step
    log = chains.call_log(tr)
    assert [c["name"] for c in log] == ["landmark_city", "get_weather"] and log[1]["temperature"] == 18


def test_chain_claims_follow_the_saved_numbers(tmp_path):
    from toolkit.book import claims_chains as claims
    from toolkit.book.ledger import CAVEAT, FAILS, HOLDS
    from toolkit.eval import chain_table, report
    from toolkit.eval.stats import wilson

    path = tmp_path / "bfcl_x.json"
    missing = claims.chain_claims(path)
    assert [c.verdict for c in missing] == [CAVEAT, CAVEAT]

    def save(rows):
        for r in rows:
            r["low"], r["high"] = wilson(round(r["success"] * r["n"]), r["n"])
        bound = {claims.BOUND_KEY: chain_table.bound(chain_table.comparable(rows))}
        report.save_results(path, "chains", {"rows": rows, "bound": bound}, report.meta("m", repo=tmp_path))
        return {c.id: c for c in claims.chain_claims(path)}

    def rows(success, product, n=40, lever="c"):
        return [
            {"lever": lever, "k": k, "n": n, "success": success, "product": product, "steps_ok": 0, "steps": 0}
            for k in (1, 2, 3)
        ]

    above = save(rows(0.8, 0.5))  # chains beat the product: p^k is a lower bound here
    assert above["pk-upper-bound-measured"].verdict == FAILS and "LOWER" in above["pk-upper-bound-measured"].why
    assert above["pk-measured-chains"].verdict == FAILS
    below = save(rows(0.4, 0.7))
    # measured as an upper bound; the caveat is the simulation: the departures the sentence names push success up
    assert below["pk-upper-bound-measured"].verdict == CAVEAT and "ABOVE p^k" in below["pk-upper-bound-measured"].why
    inside = save(rows(0.5, 0.55))
    assert inside["pk-measured-chains"].verdict == HOLDS
    assert inside["pk-upper-bound-measured"].verdict == CAVEAT  # inside every interval: no direction to claim
    plain_only = save(rows(0.0, 0.0, lever="plain") + rows(1.0, 0.2, lever="plain + retry"))
    assert [c.verdict for c in plain_only.values()] == [CAVEAT, CAVEAT]  # nothing there tests p^k
    few = save(rows(0.5, 0.5, n=4))
    assert few["pk-measured-chains"].verdict == CAVEAT and "as few as 4" in few["pk-measured-chains"].why
