"""RL tasks: no overlap with the evaluation sets, tools run for real, the outcome check is strict."""

import json
import re

import pytest

from toolkit.eval.questions import questions
from toolkit.rl import envs

norm = lambda s: re.sub(r"\W+", " ", s.lower()).strip()  # noqa: E731


def _loop_questions():
    return [q.question for q in questions()]


def _all_tasks():
    return envs.call_tasks(0, 30) + envs.decline_tasks(0, 30) + envs.multi_tasks(0, 60)


def test_no_task_reuses_a_loop_question_or_its_city_pair():
    qs = {norm(q) for q in _loop_questions()}
    tasks = _all_tasks()
    assert {t.family for t in tasks} == {"call", "decline", "warmer", "calc"}
    assert not qs & {norm(t.question) for t in tasks}
    pairs = [{t.truth["warm"], t.truth["cold"]} for t in tasks if t.family == "warmer"]
    assert pairs and not [p for p in pairs if p in envs.LOOP_PAIRS]


def test_the_heldout_loop_questions_share_no_phrasing_or_city_pair_with_the_rl_tasks():
    """The held-out set (written before the RL adapter ran): no question is a task, none starts like a task's
    template, and the one two-city question uses a pair the generator never draws (``envs.LOOP_PAIRS``)."""
    from toolkit.tools import get_weather

    held = questions("heldout")
    assert len(held) == 16 and {q.set for q in held} == {"heldout"}
    tasks = envs.multi_tasks(0, 400) + envs.call_tasks(0, 30) + envs.decline_tasks(0, 30)
    assert not {norm(q.question) for q in held} & {norm(t.question) for t in tasks}
    stems = {norm(t.split("{")[0]) for t in envs.WARMER_Q + envs.CALC_Q}
    assert not [q.id for q in held if any(norm(q.question).startswith(s) for s in stems)]
    drawn = {frozenset((t.truth["warm"], t.truth["cold"])) for t in tasks if t.family == "warmer"}
    for q in held:
        cities = {get_weather(n["city"])["city"] for n in q.tools if n["name"] == "get_weather"}
        if len(cities) == 2:
            assert cities in envs.LOOP_PAIRS and frozenset(cities) not in drawn, q.id


def test_the_second_heldout_set_shares_no_phrasing_or_two_city_question_with_the_rl_tasks():
    """ "heldout2" (written before the run with dynamic sampling): no question is a task of any family, none starts
    like a template, and none compares two cities (the generator's pairs are fixed, and its draws kept)."""
    from toolkit.rl import asks

    held = questions("heldout2")
    assert len(held) == 14 and {q.set for q in held} == {"heldout2"}
    tasks = _all_tasks() + envs.ask_tasks(0, 700) + envs.ask_tasks(envs.EVAL_SEED, 700)
    asked = {norm(t.question) for t in tasks}
    assert not {norm(q.question) for q in held} & asked
    assert not [q.id for q in held if norm(q.question)[:14] in {a[:14] for a in asked}]
    stems = {norm(t.split("{")[0]) for t in envs.WARMER_Q + envs.CALC_Q}
    assert not [q.id for q in held if any(norm(q.question).startswith(s) for s in stems)]
    assert not [q.id for q in held if len({n.get("city") for n in q.tools if n["name"] == "get_weather"}) > 1]
    own = {w for q in held if q.no_tools for w in q.answer.get("words", [])} - set(asks.REFUSE)
    assert own and not own & {
        w for t in tasks if t.family == "ask" for w in t.truth["question"].answer.get("words", [])
    }


def test_no_task_is_a_bfcl_question():
    from toolkit.eval import bfcl

    cats = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
    asked = {norm(m["content"]) for c in cats for case in bfcl.load(c) for m in case.messages if m["role"] == "user"}
    assert len(asked) > 1000
    assert not asked & {norm(t.question) for t in _all_tasks()}


def test_rl_seeds_are_not_the_sft_seeds():
    from toolkit.sft.data import dataset

    sft = {norm(m["content"]) for e in dataset(30, seed=0) for m in e.messages if m["role"] == "user"}
    rl = {norm(t.question) for t in envs.call_tasks(0, 30)}
    assert len(rl - sft) > 0.8 * len(rl)


def _call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args}, ensure_ascii=False)}</tool_call>"


def _warmer():
    return next(t for t in envs.multi_tasks(0, 20) if t.family == "warmer")


def test_a_multi_turn_episode_runs_the_real_tools_and_checks_the_outcome():
    t = _warmer()
    a, b = re.findall(r"(?:: |：)(.+?)(?: or |和)(.+?)(?:\?|现在)", t.question)[0]

    def good(msgs, tools):
        if msgs[-1]["role"] == "user":
            return _call("get_weather", city=a) + _call("get_weather", city=b)
        temps = {json.loads(m["content"])["city"]: json.loads(m["content"])["temperature"] for m in msgs[2:]}
        w = max(temps, key=temps.get)
        return f"{w} is warmer, at {temps[w]} degrees."

    ep = envs.rollout(good, t)
    assert [r.ok for r in ep.results] == [True, True] and ep.met and ep.reward == 1.0
    assert sum(m["role"] == "tool" for m in ep.messages) == 2

    def guess(msgs, tools):  # names the right city without looking: not met
        return f"{t.truth['warm']} is warmer, at {t.truth['temp']} degrees."

    assert envs.rollout(guess, t).reward == 0.0


def test_gaming_the_outcome_earns_nothing():
    t = _warmer()
    tools_all = lambda m, s: (  # noqa: E731
        _call("get_weather", city=t.truth["warm"])
        + _call("get_weather", city=t.truth["cold"])
        + _call("calculator", expression="1+1")
        + _call("convert_units", value=1, from_unit="km", to_unit="m")
        if m[-1]["role"] == "user"
        else f"{t.truth['warm']}, {t.truth['cold']}: 1, 2, 3, {t.truth['temp']}"
    )
    assert envs.rollout(tools_all, t).reward <= 0.0
    assert envs.rollout(lambda m, s: "", t).reward == 0.0
    prose = lambda m, s: "I would call " + json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})  # noqa: E731
    assert envs.rollout(prose, t).reward == 0.0


def test_a_calc_task_is_met_by_the_calculator_result_only():
    t = next(t for t in envs.multi_tasks(0, 20) if t.family == "calc")
    x, y, z = re.findall(r"\d+", t.question)[:3]
    seq = iter([_call("calculator", expression=f"{x}*{y}-{z}"), f"The result is {t.truth['value']:g}."])
    assert envs.rollout(lambda m, s: next(seq), t).reward == 1.0
    assert envs.rollout(lambda m, s: f"The result is {t.truth['value']:g}.", t).reward == 0.0  # no tool: not met


def test_tasks_by_family_name():
    assert {t.family for t in envs.tasks("multi", 0, 12)} == {"warmer", "calc"}
    assert {t.family for t in envs.tasks("all", 0, 12)} == {"call", "decline", "warmer", "calc"}
    mix = envs.tasks("mix", 0, 6)  # n of each kind: a step drawing one task at random draws each kind as often
    assert sorted(t.family for t in mix) == sorted(["call", "decline", "warmer", "calc"] * 6)
    calc = [t.messages for t in mix if t.family == "calc"]
    assert calc == [t.messages for t in envs.tasks("calc", 0, 6)]  # the same tasks the single family draws
    held = {str(t.messages) for t in envs.tasks("mix", envs.EVAL_SEED, 6)}
    assert not held & {str(t.messages) for t in mix}  # the held-out seed draws other tasks

    with pytest.raises(ValueError, match="unknown task family"):
        envs.tasks("nosuch")


def test_the_warmer_check_reads_the_comparison_not_the_first_city_named():
    from toolkit.loop.execute import CallResult

    t = next(t for t in envs.multi_tasks(3, 12) if t.family == "warmer")
    warm, cold, temp = t.truth["warm"], t.truth["cold"], t.truth["temp"]
    looked = [CallResult(f"c{i}", "get_weather", {"city": c}, "ok", {"city": c}) for i, c in enumerate((cold, warm))]
    other = {"北京": "Beijing"}.get(warm, warm)
    assert envs.met(t, f"{cold} is 12°C and {warm} is {temp}°C, so it is warmer in {other}.", looked)
    assert not envs.met(t, f"{cold} is 12°C and {warm} is {temp}°C, so {cold} is warmer.", looked)
    assert not envs.met(t, f"{warm} is warmer.", looked)  # its temperature is not stated
    assert not envs.met(t, f"It is warmer in {warm}, at {temp}°C.", looked[1:])  # only one city looked up


def test_a_bad_task_count_is_one_error_and_the_benchmark_offers_the_same_families():
    for n in (-1, 2.5, "3"):
        with pytest.raises(ValueError, match="whole number of tasks"):
            envs.tasks("calc", 0, n)
    assert envs.tasks("warmer", 0, 0) == []
    from pathlib import Path

    from toolkit.paths import script_module

    bench = script_module(Path(__file__).parents[1] / "benchmarks" / "rl.py")
    assert tuple(bench.FAMILIES) == envs.FAMILIES


def test_a_run_with_another_seed_gets_its_own_name_and_folder():
    """A replicate (``--seed 1``) must not resume, or be refused by, the seed-0 run of the same recipe; seed 0 keeps
    the names the saved runs already have."""
    from pathlib import Path
    from types import SimpleNamespace

    from toolkit.paths import script_module

    bench = script_module(Path(__file__).parents[1] / "benchmarks" / "rl.py")
    how = dict(family="askpair", resample=3, resample_within="family", engine="vllm")
    names = [bench._run_name(SimpleNamespace(**how, seed=s)) for s in (0, 1, 2)]
    assert names[0] == "askpair-resample3-family-vllm"
    assert len(set(names)) == 3 and names[1] == "askpair-resample3-family-seed1-vllm"
    assert len({bench._adapter_dir("lora", n) for n in names}) == 3


def test_askpair_is_askmix_with_a_same_tools_call_beside_each_decline():
    """``askpair`` draws askmix's tasks in the same order (so a run differs from askmix's only by the partners); each
    decline carries a call task of its own generator group: the same system prompt and tools, another request, and a
    call the generator knows. Partners are call tasks the generator draws anyway, so they keep its held-out checks."""
    mix, pair = envs.tasks("askmix", 0, 5), envs.tasks("askpair", 0, 5)
    assert [(t.family, t.messages, t.tools) for t in mix] == [(t.family, t.messages, t.tools) for t in pair]
    declines = [t for t in pair if t.family == "decline"]
    assert len(declines) == 5 and all(t.partner is None for t in mix)
    calls = {str(t.messages) for t in envs.call_tasks(0, 40)}
    for t in declines:
        p = t.partner
        assert p.family == "call" and p.want and p.partner is None
        assert p.tools == t.tools and p.messages[:-1] == t.messages[:-1]  # the system prompt, if any, and tools
        assert p.question != t.question and str(p.messages) in calls
    assert all(t.partner is None for t in pair if t.family != "decline")
