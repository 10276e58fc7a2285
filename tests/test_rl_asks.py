"""Free-form RL questions: none is a loop question, the truth is the tools', the strict judge pays only the answer."""

import json
import re

from toolkit.eval.questions import questions
from toolkit.rl import asks, envs
from toolkit.tools import get_weather

norm = lambda s: re.sub(r"\W+", " ", s.lower()).strip()  # noqa: E731


def _drawn(n=700):
    return [q for seed in (envs.SEED_BASE, envs.SEED_BASE + envs.EVAL_SEED) for q, _ in asks.asks(seed, n)]


def _weather_cities(q):
    return {get_weather(n["city"])["city"] for n in q.tools if n["name"] == "get_weather"}


def test_no_generated_question_is_or_starts_like_a_loop_question():
    loop, drawn = questions(), _drawn()
    assert {q.kind for q in drawn} >= {"pct", "arith", "units", "weather", "gap", "colder", "known", "chat", "refuse"}
    assert not {norm(q.question) for q in loop} & {norm(q.question) for q in drawn}
    heads = {norm(q.question)[:14] for q in drawn}
    assert not [q.id for q in loop if norm(q.question)[:14] in heads]


def test_no_loop_city_pair_or_knowledge_item_is_drawn():
    loop, drawn = questions(), _drawn()
    pairs = [_weather_cities(q) for q in loop if len(_weather_cities(q)) == 2]
    assert len(pairs) >= 6 and all(p in asks.LOOP_PAIRS for p in pairs)  # the skip list covers every set
    assert not [q.question for q in drawn if _weather_cities(q) in asks.LOOP_PAIRS]
    loop_words = {w for q in loop if q.no_tools for w in q.answer.get("words", [])}
    assert not loop_words & {w for q in drawn if q.no_tools for w in q.answer.get("words", [])} - set(asks.REFUSE)


def _call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args}, ensure_ascii=False)}</tool_call>"


def _task(kind, seed=0):
    return next(t for t in envs.ask_tasks(seed, 300) if t.truth["question"].kind == kind)


def _value(t):
    lo, hi = t.truth["question"].answer["number"]
    return (lo + hi) / 2


def test_a_look_up_then_arithmetic_question_is_met_only_with_the_look_up_and_the_value():
    t = _task("half")
    (city,) = _weather_cities(t.truth["question"])
    seq = iter([_call("get_weather", city=city), f"It is {2 * _value(t):g}°C there, so half is {_value(t):g}."])
    ep = envs.rollout(lambda m, s: next(seq), t)
    assert ep.met and ep.reward == 1.0 and [r.ok for r in ep.results] == [True]
    assert envs.rollout(lambda m, s: f"Half is {_value(t):g}.", t).reward == 0.0  # no look-up: not met
    seq = iter([_call("get_weather", city=city), f"Half is {_value(t) + 1:g}."])
    assert envs.rollout(lambda m, s: next(seq), t).reward == 0.0  # the wrong value


def test_a_two_city_comparison_reads_the_city_the_comparative_names():
    t = _task("colder")
    spec = t.truth["question"].answer["compare"]
    calls = _call("get_weather", city=spec["more"]) + _call("get_weather", city=spec["than"])
    for answer, want in ((f"{spec['more']} is colder.", 1.0), (f"{spec['than']} is colder.", 0.0)):
        seq = iter([calls, answer])
        assert envs.rollout(lambda m, s: next(seq), t).reward == want, answer


def test_gaming_a_free_form_question_earns_nothing():
    t = _task("pct")
    v = _value(t)
    assert envs.rollout(lambda m, s: f"It is {v:g}.", t).reward == 1.0  # arithmetic may be done without a tool
    assert envs.rollout(lambda m, s: f"Maybe {v - 1:g}, {v:g} or {v + 1:g}.", t).reward == 0.0  # many numbers
    every = _call("calculator", expression="1+1") + _call("get_weather", city="Paris")
    every += _call("convert_units", value=1, from_unit="km", to_unit="m")
    seq = iter([every, f"It is {v:g}."])
    assert envs.rollout(lambda m, s: next(seq), t).reward <= 0.5  # every tool called: two unneeded calls cost
    assert envs.rollout(lambda m, s: "", t).reward == 0.0
    # a call written as text with its result made up (what RL from the base model learned): nothing ran, nothing paid
    blob = json.dumps({"name": "calculator", "arguments": {"expression": "x", "result": f"{v:g}"}})
    for text in (blob, f"```json\n{blob}\n```", f"The answer: {blob}"):
        assert envs.rollout(lambda m, s: text, t).reward == 0.0, text  # noqa: B023
    known = _task("known")
    word = known.truth["question"].answer.get("words", ["366"])[0]
    assert envs.rollout(lambda m, s: f"It is {word}.", known).reward == 1.0
    seq = iter([_call("get_weather", city="Paris"), f"It is {word}."])
    assert envs.rollout(lambda m, s: next(seq), known).reward < 0  # a tool for a question that needs none
    assert envs.rollout(lambda m, s: "Sorry, the available tools don't cover this request.", known).reward == 0.0


def test_blend_is_half_free_form_questions():
    fams = [t.family for t in envs.tasks("blend", 0, 6)]
    assert sorted(fams) == sorted(["ask"] * 12 + ["call"] * 6 + ["decline"] * 6)
    mixed = [t.family for t in envs.tasks("askmix", 0, 3)]  # 4 : 2 : 1
    assert sorted(mixed) == sorted(["ask"] * 12 + ["call"] * 6 + ["decline"] * 3)
    assert [t.family for t in envs.tasks("askcall", 0, 3)].count("decline") == 0
    assert envs.tasks("ask", 0, 5)[0].tools == envs.tasks("ask", 3, 5)[0].tools  # the loop's four tools, each time
    assert len(envs.tasks("ask", 0, 5)[0].tools) == 4
