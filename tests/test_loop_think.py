"""toolkit.loop.think: a thinking model (Qwen3) in the host loop, with a scripted backend that writes Qwen3-shaped
outputs through the kit's Qwen3 template (checked against the official template's golden renderings in
tests/test_templates.py; the enable_thinking cases are compared here too)."""

import json
from pathlib import Path

import pytest

from toolkit.backends.scripted import ScriptedBackend
from toolkit.loop.loop import run
from toolkit.loop.steps import Answered, Executed, Generated, Rendered
from toolkit.loop.think import THINK_END_ID, THINK_ID, split_think
from toolkit.tokenizer import qwen_tokenizer
from toolkit.tools import TOOLS

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "qwen3_golden.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen3")


def call(name, **args):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def test_think_tokens_are_qwen3_s():
    t = qwen_tokenizer("qwen3")
    assert t.convert_tokens_to_ids("<think>") == THINK_ID and t.convert_tokens_to_ids("</think>") == THINK_END_ID


@pytest.mark.parametrize(
    "text,thought,rest",
    [
        ("It is 4.", "", "It is 4."),
        ("<think>\nadd\n</think>\n\nIt is 4.", "<think>\nadd\n</think>\n\n", "It is 4."),
        (
            "<think>\n\n</think>\n\n" + call("calculator", expression="1"),
            "<think>\n\n</think>\n\n",
            call("calculator", expression="1"),
        ),
        ("<think>\nstill thinking " + call("calculator", expression="1"), None, ""),  # cut while thinking: all thought
        ("Answer first <think>x</think>", "", "Answer first <think>x</think>"),  # only a leading block is a thought
    ],
)
def test_split_think(text, thought, rest):
    got_thought, got_rest = split_think(text)
    assert got_rest == rest and got_thought + got_rest == text
    if thought is not None:
        assert got_thought == thought


def test_a_call_written_while_thinking_is_not_run_and_the_gate_reads_the_token_after(tok):
    bogus = call("calculator", expression="999*999")
    script = [
        f"<think>\nI could try {bogus} but I should check.\n</think>\n\n" + call("calculator", expression="2+2"),
        "<think>\nThe tool said 4.\n</think>\n\nIt is 4.",
    ]
    backend = ScriptedBackend(tok, script)
    msgs = [{"role": "user", "content": "What is 2+2?"}]
    trace = run(backend, tok, msgs, {"calculator": TOOLS["calculator"]}, template="qwen3", max_new_tokens=120)
    executed = [s for s in trace.steps if isinstance(s, Executed)]
    assert len(executed) == 1 and len(executed[0].results) == 1
    assert executed[0].results[0].result == "4" or "4" in json.dumps(executed[0].results[0].result)
    rendered = [s for s in trace.steps if isinstance(s, Rendered)]
    assert "'<tool_call>'" in rendered[0].rule and "opens a call" in rendered[0].rule  # decided after </think>
    generated = [s for s in trace.steps if isinstance(s, Generated)]
    assert generated[0].text.startswith("<think>\nI could try") and "999*999" in generated[0].text  # shown
    answer = [s for s in trace.steps if isinstance(s, Answered)][0]
    assert answer.text == "It is 4."  # the thought is shown in the trace, not given as the answer
    assistant = [m for m in msgs if m["role"] == "assistant"]
    assert assistant[0]["reasoning_content"].startswith("I could try") and assistant[0]["content"] == ""
    # turn 2's prompt is the template's rendering of that history: the thought kept (after the last user query)
    assert "<think>\nI could try" in tok.decode(rendered[1].prompt_ids)


def test_the_gate_sees_text_after_a_thought(tok):
    backend = ScriptedBackend(tok, ["<think>\nNo tool needed.\n</think>\n\nBonjour !"])
    trace = run(backend, tok, [{"role": "user", "content": "Hello in French?"}], TOOLS, template="qwen3")
    rendered = [s for s in trace.steps if isinstance(s, Rendered)][0]
    assert "'Bon'" in rendered.rule or "starts text" in rendered.rule
    assert [s for s in trace.steps if isinstance(s, Answered)][0].text == "Bonjour !"
    assert not [s for s in trace.steps if isinstance(s, Executed)]


@pytest.mark.parametrize("flag", [False, True])
def test_enable_thinking_reaches_the_template_as_the_official_one_renders_it(tok, flag):
    case = next(c for c in GOLDEN["cases"] if c["kwargs"] == {"enable_thinking": flag})
    backend = ScriptedBackend(tok, ["It is 37.5."])
    names = [t["function"]["name"] for t in case["tools"] or []]
    tools = {n: TOOLS[n] for n in names}
    trace = run(backend, tok, [dict(m) for m in case["messages"]], tools, template="qwen3", thinking=flag)
    rendered = [s for s in trace.steps if isinstance(s, Rendered)][0]
    tail = case["text"][case["text"].rindex("<|im_start|>user") :]  # the tools' text may differ; the turn may not
    assert tok.decode(rendered.prompt_ids).endswith(tail)
    assert ("<think>\n\n</think>" in tail) is (flag is False)


def test_a_thought_cut_by_the_budget_ends_as_text_not_as_a_call(tok):
    # The thought is cut at max_new_tokens; the turn goes on from the open block (what the model writes next is the
    # second entry) and a call inside the still-open block is neither run nor an answer.
    long = "<think>\n" + "thinking " * 200
    backend = ScriptedBackend(tok, [long, "more " + call("calculator", expression="1")])
    trace = run(backend, tok, [{"role": "user", "content": "1?"}], TOOLS, template="qwen3", max_new_tokens=40)
    assert not [s for s in trace.steps if isinstance(s, Executed)]
    answers = [s for s in trace.steps if isinstance(s, Answered)]
    assert answers and answers[0].text == ""  # all of it was thought
