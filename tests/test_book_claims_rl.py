"""§14.5.7's RL claims: the verdict reads the saved runs it is given, and a start with nothing to learn from is said."""

from toolkit.book import claims_rl


def _summary(met: int, n: int = 24) -> dict:
    return {"n": n, "met": met, "mean_reward": met / n, "failed_calls": 0}


def _run(spreads: list[int]) -> dict:
    steps = [{"family": "calc", "trained_tokens": t} for t in spreads]
    return {"model": "m", "date": "2026-12-05", "commit": "abc", "family": "calc", "steps": steps}


def _claim(**given):
    run = {
        "rl_run": _run([5, 0, 3]),
        "rl_eval": {"before": {"summary": _summary(13)}, "after": {"summary": _summary(17)}},
        "rl_base_ask": None,
    }
    return next(c for c in claims_rl.RL.run(**(run | given)) if c.id == "rl-verifiable-env")


def test_a_start_whose_groups_never_had_a_spread_is_a_caveat():
    ev = lambda b, a: {"before": {"summary": _summary(b)}, "after": {"summary": _summary(a)}}  # noqa: E731
    starts = {"the SFT adapter": (_run([9, 0, 0]), ev(13, 21)), "the base model": (_run([0, 0, 0]), ev(0, 0))}
    c = _claim(rl_starts=starts)
    assert "from the base model, 3 steps on calc tasks, 0 with a spread" in c.evidence
    assert "13 -> 21 of 24 met" in c.evidence
    assert "from the base model no group had a spread (0 of 24 met before)" in c.why
    assert "from the SFT adapter no group" not in c.why


def _loop(answers: list[str], tags: int) -> dict:
    rows = [{"id": "sqrt_en", "answer": a, "tagged_turns": tags, "calls": [], "met": True} for a in answers]
    return {"rows": rows}


def test_a_base_start_that_never_calls_on_free_form_questions_is_a_caveat_judged_now():
    blob = '{"name": "calculator", "arguments": {"expression": "sqrt(1764)", "result": "42.0"}}'
    base_ask = {
        "run": {"steps": [{"calls": [0, 0, 0, 0], "trained_tokens": t} for t in (0, 12, 0)]},
        "before": [_loop(["I cannot compute that."], 0)],
        "after": [_loop([blob, "The square root of 1764 is 42."], 0)],
    }
    c = _claim(rl_base_ask=base_ask)
    # the saved rows say met; today's judge refuses the call written as text with a made-up result
    assert "3 steps on free-form questions (ask), 1 with a spread, 0 calls run by the host" in c.evidence
    assert "loop questions met 0 -> 1 of 2 (judged now), the <tool_call> tag in 0 -> 0 turns" in c.evidence
    assert "never wrote a call the host could run" in c.why
    base_ask["after"] = [_loop(["42"], 1)]
    assert "never wrote a call" not in _claim(rl_base_ask=base_ask).why


def test_without_the_start_runs_the_claim_rests_on_the_multi_run_alone():
    c = _claim(rl_starts={})
    assert "from the base model" not in c.evidence + c.why and "met 13 before, 17 after" in c.evidence
