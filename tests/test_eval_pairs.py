"""The pair-lookup chain: a stage's two calls in either order or in one turn, rounds counted, same turn budget."""

import json

import pytest

from toolkit.backends.scripted import ScriptedBackend
from toolkit.eval import chains, choices, pairs


@pytest.fixture(scope="module")
def tok():
    from toolkit.models import qwen_tokenizer

    return qwen_tokenizer("qwen2.5")


def call(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def both(*calls):
    return "\n".join(calls)


def test_questions_and_rounds():
    par, ser = pairs.pair_task("Big Ben", "Tokyo Tower", 5, True), pairs.pair_task("Big Ben", "Tokyo Tower", 5, False)
    assert (par.rounds, ser.rounds) == (3, 5)
    assert "same turn" in par.question and "one call at a time" in ser.question
    assert pairs.pair_task("Big Ben", "Tokyo Tower", 2, True).rounds == 1
    with pytest.raises(ValueError):
        pairs.pair_task("Big Ben", "Tokyo Tower", 3, True)
    assert len(pairs.pairs()) == len(choices.LANDMARKS) and all(a != b for a, b in pairs.pairs())


def test_parallel_pair_in_three_rounds(tok):
    script = [
        both(call("landmark_city", landmark="Tokyo Tower"), call("landmark_city", landmark="Big Ben")),  # any order
        both(call("get_weather", city="London"), call("get_weather", city="Tokyo")),
        call("calculator", expression="14 - 21"),
        "-7",
    ]
    _, s = chains.run_chain(ScriptedBackend(tok, script), tok, pairs.pair_task("Big Ben", "Tokyo Tower", 5, True))
    assert s.strict and s.retry and s.rounds == 3 and s.calls == 5


def test_the_same_pair_in_series_and_its_mistakes(tok):
    script = [
        call("landmark_city", landmark="Big Ben"),
        call("landmark_city", landmark="Tokyo Tower"),
        call("get_weather", city="London"),
        call("get_weather", city="Tokyo"),
        call("calculator", expression="21 - 14"),  # the wrong way round
        "7",
    ]
    t = pairs.pair_task("Big Ben", "Tokyo Tower", 5, False)
    _, s = chains.run_chain(ScriptedBackend(tok, script), tok, t)
    assert not s.strict and s.strict_steps_ok == 4 and s.rounds == 5
    early = [call("landmark_city", landmark="Big Ben"), call("get_weather", city="London"), "x", "y", "z"]
    _, s = chains.run_chain(ScriptedBackend(tok, early), tok, pairs.pair_task("Big Ben", "Tokyo Tower", 4, True))
    assert s.strict_steps_ok == 1  # a weather call before both cities are known is off the path
    bad = [
        both(call("landmark_city", landmark="Big Ben"), call("landmark_city", landmark="Tokyo Tower")),
        both(call("get_weather", city="London", unit="kelvin"), call("get_weather", city="Tokyo")),
        call("get_weather", city="London"),
        call("calculator", expression="14 - 21"),
        "-7",
    ]
    _, s = chains.run_chain(ScriptedBackend(tok, bad), tok, pairs.pair_task("Big Ben", "Tokyo Tower", 5, True))
    assert not s.strict and s.strict_steps_ok == 2 and s.retry and s.retried  # one retry after the tool's error


def test_pair_step_task():
    ((step, q, prev),) = pairs.pair_step_tasks("Big Ben", "Tokyo Tower")
    assert step == "difference" and prev == {"result": 14 - 21} and "21" in q and "14" in q
    assert chains.step_ok("difference", "calculator", {"expression": "14 - 21"}, prev, "")
    assert not chains.step_ok("difference", "calculator", {"expression": "21 - 14"}, prev, "")
