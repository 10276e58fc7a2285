"""The agent patterns (toolkit.patterns) on scripted backends: what each loop does turn by turn, the token
accounting, plan-and-execute's replanning, sub-agent isolation, and the seeded task set. One run on the
random-weight stand-in checks the mechanics with a real decode loop and grammars."""

import json
import re

import pytest

from toolkit.patterns import tasks as T
from toolkit.patterns.agents import direct, plan_execute, react
from toolkit.patterns.registry import PATTERNS, run_all
from toolkit.patterns.setup import Setup
from toolkit.patterns.subagent import subagent
from toolkit.tokenizer import qwen_tokenizer
from toolkit.tools import WEATHER_TABLE


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2.5")


def call(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


# Tokyo 21 °C, London 14 °C in the kit's table: 7 degrees.
DIFF = T.Task("diff-x", "How many degrees Celsius warmer is it in Tokyo than in London right now?", 7.0, "diff", 3)


def _consistent(run):
    for t in run.turns:
        assert t.reused + t.prefilled == t.prompt, t
        assert t.decoded > 0
    assert run.prefilled == sum(t.prefilled for t in run.turns) and run.decoded == sum(t.decoded for t in run.turns)


# ------------------------------------------------------------------ tasks
def test_task_answers_come_from_the_kit_tools_and_are_seeded():
    a, b = T.tasks(10, seed=3), T.tasks(10, seed=3)
    assert a == b and a != T.tasks(10, seed=4)
    assert {t.kind for t in a} == {"diff", "fahrenheit", "mean", "distance", "humidity"}
    for t in a:
        if t.kind == "diff":
            c1, c2 = re.search(r"in (.+) than in (.+) right now", t.question).groups()
            assert t.expected == WEATHER_TABLE[c1][0] - WEATHER_TABLE[c2][0] > 0


@pytest.mark.parametrize(
    "answer,ok",
    [("It is 7 degrees warmer.", True), ("about 7.05", True), ("21 and 14", False), ("", False), (None, False)],
)
def test_task_check(answer, ok):
    assert DIFF.check(answer) is ok


@pytest.mark.parametrize(
    "answer,ok",
    # measured: "89.6 °F" expected, the real model answered "32 degrees Celsius, with a humidity of 90%"
    [("32 degrees Celsius, with a humidity of 90%.", False), ("It is 89.6 degrees Fahrenheit.", True), ("89.60", True)],
)
def test_task_check_is_not_fooled_by_a_nearby_unrelated_number(answer, ok):
    f = T.Task("f", "Singapore in Fahrenheit?", 89.6, "fahrenheit", 2)
    assert f.check(answer) is ok


def test_tasks_rejects_empty():
    with pytest.raises(ValueError):
        T.tasks(0)


# ------------------------------------------------------------------ direct
def test_direct_counts_every_turn_and_scores_the_answer(tok):
    script = [
        call("get_weather", city="Tokyo") + call("get_weather", city="London"),
        call("calculator", expression="21 - 14"),
        "Tokyo is 7 degrees warmer than London.",
    ]
    run = direct(Setup.scripted(tok, {"main": script}), DIFF)
    assert run.success and run.n_turns == 3 and [t.kind for t in run.turns] == ["call", "call", "text"]
    assert [s["name"] for s in run.steps if s["kind"] == "call"] == ["get_weather", "get_weather", "calculator"]
    _consistent(run)
    sizes = run.context_sizes()
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]  # the one context grows every turn
    assert run.turns[1].reused >= run.turns[0].prompt  # and the prefix cache covers the earlier turns
    wrong = direct(Setup.scripted(tok, {"main": script[:2] + ["It is 9 degrees warmer."]}), DIFF)
    assert not wrong.success and wrong.n_turns == 3


# ------------------------------------------------------------------ ReAct
def test_react_puts_a_visible_thought_before_each_action(tok):
    script = [
        " I need Tokyo's and London's temperatures.",
        call("get_weather", city="Tokyo") + call("get_weather", city="London"),
        " Now subtract them.",
        call("calculator", expression="21 - 14"),
        " I have the difference.",
        "Tokyo is 7 degrees warmer.",
    ]
    setup = Setup.scripted(tok, {"main": script})
    run = react(setup, DIFF)
    assert [t.kind for t in run.turns] == ["thought", "call", "thought", "call", "thought", "text"]
    thoughts = [s["text"] for s in run.steps if s["kind"] == "thought"]
    assert thoughts[0] == "Thought: I need Tokyo's and London's temperatures." and len(thoughts) == 3
    assert run.success
    _consistent(run)
    # the thoughts are real turns: ReAct costs more decoded tokens and turns than the direct run of the same calls
    plain = direct(Setup.scripted(tok, {"main": [script[1], script[3], script[5]]}), DIFF)
    assert run.n_turns == plain.n_turns + 3 and run.decoded > plain.decoded


def test_react_repeated_action_is_not_run_again_and_ends_the_steps(tok):
    # measured on the real model: ReAct's action turns are separate loop runs, and the same calculator call ran
    # twice (the loop's repeat guard forgot the earlier turns); now the guard spans the conversation
    script = [" a", call("calculator", expression="21 - 14"), " b", call("calculator", expression="21 - 14"), " 7"]
    run = react(Setup.scripted(tok, {"main": script}), DIFF)
    statuses = [s["status"] for s in run.steps if s["kind"] == "call"]
    assert statuses == ["ok", "repeated"] and run.turns[-1].kind == "answer"
    assert any("only repeated" in n for n in run.notes) and not any("step cap" in n for n in run.notes)
    assert run.success


def test_react_step_cap_asks_for_the_answer_and_says_so(tok):
    script = [" look", call("get_weather", city="Tokyo"), " look", call("get_weather", city="London"), "7"]
    run = react(Setup.scripted(tok, {"main": script}), DIFF, max_steps=2)
    assert run.turns[-1].kind == "answer" and run.turns[-1].forced == "Based on the tool results,"
    assert any("step cap 2" in n for n in run.notes) and any("started the answer" in n for n in run.notes)


# ------------------------------------------------------------------ plan-and-execute
def test_plan_execute_runs_the_plan_step_by_step(tok):
    steps = ["get the temperature in Tokyo", "get the temperature in London", "subtract London from Tokyo"]
    seen = []

    def step_call(name, **args):
        def entry(prompt_ids):
            seen.append(tok.decode(prompt_ids))
            return call(name, **args)

        return entry

    script = [
        call("plan", steps=steps),
        step_call("get_weather", city="Tokyo"),
        step_call("get_weather", city="London"),
        step_call("calculator", expression="21 - 14"),
        " 7 degrees.",
    ]
    run = plan_execute(Setup.scripted(tok, {"main": script}), DIFF)
    assert run.steps[0] == {"kind": "plan", "steps": steps}
    assert [t.kind for t in run.turns] == ["plan", "call", "call", "call", "answer"]
    for i, prompt in enumerate(seen):  # each execution turn is told its step, in order
        assert f"Step {i + 1} of 3: {steps[i]}" in prompt and f"Step {i + 2} of" not in prompt
    assert run.success and run.answer.startswith("Based on the tool results,")
    _consistent(run)


def test_plan_execute_replans_after_a_failed_step(tok):
    script = [
        call("plan", steps=["get the weather in Londres", "subtract"]),
        call("get_weather", city="Londres"),  # unknown city: an error result
        call("plan", steps=["get the weather in Tokyo", "get the weather in London", "subtract"]),
        call("get_weather", city="Tokyo"),
        call("get_weather", city="London"),
        call("calculator", expression="21 - 14"),
        " 7.",
    ]
    run = plan_execute(Setup.scripted(tok, {"main": script}), DIFF)
    plans = [s for s in run.steps if s["kind"] == "plan"]
    assert len(plans) == 2 and "failed" in plans[1]["why"] and len(plans[1]["steps"]) == 3
    statuses = [s["status"] for s in run.steps if s["kind"] == "call" and s["name"] != "plan"]
    assert statuses == ["error", "ok", "ok", "ok"] and run.success


def test_plan_execute_same_plan_resent_mid_run_does_not_restart_the_plan(tok):
    # measured on the real model: at the last step it called `plan` again with the same list; taken as a replan,
    # the host started over at step 1 and ran into the step cap with every step "left"
    steps = ["get the temperature in Tokyo", "get the temperature in London", "subtract"]
    script = [
        call("plan", steps=steps),
        call("get_weather", city="Tokyo"),
        call("plan", steps=steps),
        call("calculator", expression="21 - 14"),
        " 7.",
    ]
    run = plan_execute(Setup.scripted(tok, {"main": script}), DIFF)
    calls = [(s["name"], s["status"]) for s in run.steps if s["kind"] == "call"]
    assert calls == [("get_weather", "ok"), ("plan", "repeated"), ("calculator", "ok")]  # the loop's guard
    assert [t.kind for t in run.turns] == ["plan", "call", "call", "call", "answer"]
    assert not any("step cap" in n for n in run.notes) and run.success
    assert any("only repeated" in n for n in run.notes)
    # the repeated step at the END: the answer turn still reads the last result, answer started (measured: the
    # step line left in the history made it a plain-text turn that wrote the plan again)
    last = [call("plan", steps=steps[:2]), call("get_weather", city="Tokyo"), call("plan", steps=steps[:2]), " 7."]
    end = plan_execute(Setup.scripted(tok, {"main": last}), DIFF)
    assert end.turns[-1].kind == "answer" and end.turns[-1].forced == "Based on the tool results,"
    # with repeats allowed the same plan runs again: still no restart, and the host says it moved on
    again = plan_execute(Setup.scripted(tok, {"main": script}, repeat_limit=2), DIFF)
    assert any("same plan" in n for n in again.notes) and not any("step cap" in n for n in again.notes)
    assert [s["name"] for s in again.steps if s["kind"] == "call"] == ["get_weather", "plan", "calculator"]


def test_plan_execute_answer_turn_follows_a_replan_that_gave_nothing_new(tok):
    # measured on the real model: a failed step, then the same plan again (a repeat: no new plan); the host's
    # "call plan" line stayed last and the final turn was plain text that wrote the plan as JSON
    plan = call("plan", steps=["get the weather in Londres", "subtract"])
    script = [plan, call("get_weather", city="Londres"), plan, " 7."]
    run = plan_execute(Setup.scripted(tok, {"main": script}), DIFF)
    assert run.turns[-1].kind == "answer" and run.turns[-1].forced == "Based on the tool results,"
    assert any("left the history" in n for n in run.notes)


def test_plan_execute_replans_at_most_max_replans(tok):
    bad = call("get_weather", city="Atlantis")
    script = [call("plan", steps=["a"]), bad, call("plan", steps=["b"]), bad, " no idea"]
    run = plan_execute(Setup.scripted(tok, {"main": script}), DIFF, max_replans=1)
    assert sum(s["kind"] == "plan" for s in run.steps) == 2 and not run.success


# ------------------------------------------------------------------ sub-agents
def _sub_scripts(tok):
    return {
        "main": [
            call("delegate", task="What is the temperature in Tokyo in Celsius?"),
            call("delegate", task="What is the temperature in London in Celsius?"),
            call("calculator", expression="21 - 14"),
            "Tokyo is 7 degrees warmer.",
        ],
        "sub1": [call("get_weather", city="Tokyo"), "It is 21 degrees in Tokyo."],
        "sub2": [call("get_weather", city="London"), "It is 14 degrees in London."],
    }


def test_subagent_has_its_own_context_and_returns_only_a_summary(tok):
    backends = {}
    scripts = _sub_scripts(tok)
    setup = Setup.scripted(tok, scripts)
    make = setup.new_backend
    setup.new_backend = lambda label: backends.setdefault(label, make(label))
    run = subagent(setup, DIFF)
    assert run.success and {t.context for t in run.turns} == {"main", "sub1", "sub2"}
    sub_prompt = tok.decode(backends["sub1"].prompts[0])
    assert "What is the temperature in Tokyo in Celsius?" in sub_prompt and DIFF.question not in sub_prompt
    main_last = tok.decode(backends["main"].prompts[-1])
    assert "It is 21 degrees in Tokyo." in main_last and '"humidity"' not in main_last  # no raw weather dict
    # turn order: a sub-agent's turns sit between the main turn that delegated and the next main turn
    assert [t.context for t in run.turns] == ["main", "sub1", "sub1", "main", "sub2", "sub2", "main", "main"]
    _consistent(run)


def test_without_isolation_the_main_context_absorbs_the_sub_agents_work(tok):
    iso = subagent(Setup.scripted(tok, _sub_scripts(tok)), DIFF, isolate=True)
    shared = subagent(Setup.scripted(tok, _sub_scripts(tok)), DIFF, isolate=False)
    a, b = iso.context_sizes("main"), shared.context_sizes("main")
    assert len(a) == len(b) == 4 and a[0] == b[0]  # same first turn, then the shared context grows faster
    assert all(y > x for x, y in zip(a[1:], b[1:]))
    # the sub-agents' own contexts are the same size either way: only the main context changes
    assert iso.context_sizes("sub1") == shared.context_sizes("sub1")


# ------------------------------------------------------------------ registry, stand-in
def test_run_all_and_unknown_pattern(tok):
    with pytest.raises(ValueError, match="unknown pattern"):
        run_all(Setup.scripted(tok, {}), [DIFF], names=["nope"])
    assert set(PATTERNS) == {"direct", "react", "plan_execute", "subagent", "subagent_shared"}


def test_patterns_run_on_the_stand_in_model_and_say_so():
    from toolkit.models import load

    setup = Setup.from_loaded(load("stand-in", quiet=True))
    assert "STAND-IN" in setup.model and setup.first_choice() == "required"
    run = react(setup, T.tasks(1)[0], max_steps=1)
    assert run.turns[0].kind == "thought" and run.turns[0].decoded <= setup.thought_tokens
    assert run.turns[1].calls  # a required first call: the grammar made it well-formed (its meaning is noise)
    _consistent(run)
    assert json.loads(json.dumps(run.to_json()))["model"] == setup.model


# ------------------------------------------------------------------ the notebook's view
def test_turn_tokens_view_follows_the_dropdowns(tok):
    from toolkit.widgets.patterns import TurnTokensView

    d = direct(Setup.scripted(tok, {"main": [call("calculator", expression="21 - 14"), "7 degrees."]}), DIFF)
    r = react(
        Setup.scripted(tok, {"main": [" subtract", call("calculator", expression="21 - 14"), " done", "7."]}), DIFF
    )
    view = TurnTokensView([d.to_json(), r.to_json()])
    assert view.totals() == {"turns": 2, "prefilled": d.prefilled, "decoded": d.decoded}
    before = view.plot.redraws
    view.pattern_box.value = "react"  # what a person does in the browser
    assert view.totals() == {"turns": 4, "prefilled": r.prefilled, "decoded": r.decoded}
    assert view.plot.redraws == before + 1 and f"{r.prefilled:,} prefilled" in view.plot.figure.layout.title.text
    assert sum(sum(b.y) for b in view.plot.figure.data if b.type == "bar") == r.prefilled + r.decoded
    with pytest.raises(ValueError):
        view.run("plan_execute", DIFF.id)


# ------------------------------------------------------------------ the benchmark's resume cache
def test_benchmark_resumes_only_runs_saved_with_the_same_model_settings_and_code(tmp_path):
    from pathlib import Path

    from toolkit.paths import script_module

    bench = script_module(Path(__file__).resolve().parents[1] / "benchmarks" / "patterns.py", "bench_patterns")
    code = bench.code_hash()
    assert code == bench.code_hash() and code != bench.code_hash(code=bench.RAG_CODE)
    meta = dict(model="M", settings={"max_new_tokens": 64}, code=code, seed=0, date="d", commit="c", machine={})
    out = tmp_path / "p.json"
    runs = [{"pattern": "direct", "task": {"id": "t0"}, "success": True}]
    out.write_text(json.dumps({"meta": meta, "runs": runs}))
    key = lambda r: (r["pattern"], r["task"]["id"])  # noqa: E731
    now = dict(meta, date="later")
    assert bench.resumable(out, now, key) == {("direct", "t0"): runs[0]}
    assert now["earlier"][0]["date"] == "d"  # the reused runs' own date stays in the meta
    for change in ({"code": "other"}, {"settings": {"max_new_tokens": 32}}, {"model": "N"}, {"seed": 1}):
        assert bench.resumable(out, dict(meta, **change), key) == {}
    out.write_text("{not json")
    assert bench.resumable(out, meta, key) == {}


def test_the_light_names_are_the_registrys_patterns_in_order():
    from toolkit.patterns.names import NAMES
    from toolkit.patterns.registry import PATTERNS

    assert tuple(PATTERNS) == NAMES
