"""A main agent that hands sub-tasks to sub-agents, each with its own context, and gets back only a summary
(book §14.5.5 "multi-agent": the gain is context isolation; the chain's p^k is only split, not shortened).

What it does
- ``subagent(setup, task, isolate=True)``: the main agent runs the kit's host loop with two tools, ``delegate`` and
  ``calculator``. ``delegate(task)`` runs a sub-agent — the same host loop in a NEW context (its own messages, its
  own backend and prefix cache) with the worker tools — and returns ``{"summary": its answer}``.
  ``isolate=False`` is the same run without isolation: the tool result also carries the sub-agent's whole
  transcript (its calls and their results), so the main context absorbs everything the sub-agent saw.
- The run's records are tagged by context (``"main"``, ``"sub1"``, ``"sub2"`` …); ``PatternRun.context_sizes("main")``
  is the main context's prompt length turn by turn, the number the comparison is about.

What it leaves out
- Agents negotiating with each other, roles with different models, sub-agents running in parallel (they run one at
  a time; the main agent waits, as a tool call waits).
"""

from __future__ import annotations

from toolkit.loop.loop import run
from toolkit.patterns.agents import SYSTEM, finish_run, log_calls, start_run, worker_tools
from toolkit.patterns.record import PatternRun, Recorder
from toolkit.patterns.setup import Setup
from toolkit.patterns.tasks import Task
from toolkit.tools import TOOLS, Tool

MAIN_SYSTEM = (
    "You coordinate helpers. Hand every lookup or conversion to `delegate` as one self-contained sub-task (one "
    "city or one quantity each); use `calculator` to combine their answers; then answer in one sentence."
)
SUB_SYSTEM = SYSTEM + " You are a helper: answer only the sub-task you are given, with its number."
SUB_TIMEOUT_S = 900.0  # a sub-agent is a model run, not a quick function: the main loop waits for it


def subagent(setup: Setup, task: Task, isolate: bool = True, max_turns: int = 5, sub_turns: int = 3) -> PatternRun:
    """The main agent with ``delegate`` (see the module docstring)."""
    out = start_run("subagent" if isolate else "subagent_shared", setup, task)
    counter = {"n": 0}

    def delegate(task: str) -> dict:
        """Hands one self-contained sub-task to a helper agent that has the weather, unit and calculator tools, and
        returns its short answer.

        Args:
            task: The sub-task in one sentence, e.g. "What is the current temperature in Paris in Celsius?"
        """
        counter["n"] += 1
        label = f"sub{counter['n']}"
        msgs = [{"role": "system", "content": SUB_SYSTEM}, {"role": "user", "content": task}]
        trace = run(
            setup.new_backend(label),
            setup.tokenizer,
            msgs,
            worker_tools(),
            on_step=Recorder(out.turns, label),
            **dict(setup.settings, tool_choice=setup.first_choice(), max_turns=sub_turns),
        )
        log_calls(out, trace, label)
        summary = (
            trace.answer if trace.answer is not None else f"(no answer: {trace.stop.reason if trace.stop else '?'})"
        )
        out.steps.append({"kind": "summary", "context": label, "task": task, "text": summary})
        if isolate:
            return {"summary": summary}
        return {
            "summary": summary,
            "transcript": [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls")} for m in msgs[1:]],
        }

    tools = {
        "delegate": Tool.from_function(delegate, bounds={"task": {"maxLength": 160}}),
        "calculator": TOOLS["calculator"],
    }
    msgs = [{"role": "system", "content": MAIN_SYSTEM}, {"role": "user", "content": task.question}]
    trace = run(
        setup.new_backend("main"),
        setup.tokenizer,
        msgs,
        tools,
        on_step=Recorder(out.turns, "main"),
        **dict(
            setup.settings,
            tool_choice=setup.first_choice(),
            max_turns=max_turns,
            parallel=False,
            tool_timeout_s=SUB_TIMEOUT_S,
        ),
    )
    log_calls(out, trace)
    if trace.answer is None:
        out.notes.append(f"no answer within {max_turns} main turns")
    out.notes.append(f"sub-agents run: {counter['n']}; main context " + ("isolated" if isolate else "shared"))
    return finish_run(out, task, trace.answer, out.turns)
