"""Three single-context patterns as short loops over the kit's one-turn step (book §14.5.5).

What it does
- ``direct(setup, task)``: the host loop as it is — the model calls tools until it answers (``max_turns``).
- ``react(setup, task)``: before each action a short visible reason — a ``"Thought:"`` turn (prose only, see
  ``toolkit.patterns.setup.think``) — then an action turn under ``"auto"`` (a call, or the answer). An action of
  only repeated calls (the loop's guard spans the conversation) ends the steps: the answer turn follows, as in
  the loop itself. Each thought is
  one more model turn: §14.5.5's point that the reasoning step lengthens the chain and pays only when it raises
  the per-step success rate by more than its own risk costs.
- ``plan_execute(setup, task)``: a planning turn that must call the ``plan`` tool (its argument is the plan as a
  list of steps, so the kit's grammar and parser deliver a list); then one turn per step (the host states the step
  as a user message and requires a call); a step whose call fails (an error result) is replanned once; a different
  plan sent during a step replaces the plan (once), the SAME plan re-sent is not a replan (the host notes it and
  goes on with the next step, instead of running the done steps again); then the answer turn.
- Every function returns a :class:`toolkit.patterns.record.PatternRun` (turns with tokens, steps, answer,
  success by ``task.check``). Where the host helps the model (a started answer, a forced call) it says so in
  ``notes``.

What it leaves out
- Hiding thoughts from the user (§14.5.5 advises showing a summary, not raw reasoning); here they are shown,
  since teaching is the point. Parallel execution of independent plan steps.
"""

from __future__ import annotations

import re

from toolkit.loop.loop import ANSWER_PREFIXES, run
from toolkit.patterns.record import PatternRun, Recorder
from toolkit.patterns.setup import THOUGHT_PREFIX, Setup, results, think, turn
from toolkit.patterns.tasks import Task
from toolkit.tools import TOOLS, Tool

WORKER_TOOLS = ("get_weather", "convert_units", "calculator")
SYSTEM = "You are a careful assistant. Use the tools to get facts and do arithmetic; then answer in one sentence."
REACT_SYSTEM = SYSTEM + " Before each tool call, state in one short sentence what you need next and why."
PLAN_SYSTEM = SYSTEM + " First call `plan` with the steps (one tool call each), then the host runs them one by one."


def worker_tools() -> dict:
    return {n: TOOLS[n] for n in WORKER_TOOLS}


def plan(steps: list[str]) -> dict:
    """Records the plan: the ordered steps that answer the question, one tool call per step.

    Args:
        steps: The steps in order, each a short instruction such as "get the temperature in Paris".
    """
    return {"planned_steps": len(steps)}


PLAN_TOOL = Tool.from_function(
    plan, bounds={"steps": {"minItems": 1, "maxItems": 5, "items": {"type": "string", "maxLength": 120}}}
)


def answer_prefix(task: Task) -> str:
    """The loop's started answer in the language of the QUESTION (the last user message here is the host's step)."""
    return ANSWER_PREFIXES["zh" if re.search(r"[\u4e00-\u9fff]", task.question) else "en"]


def start_run(pattern: str, setup: Setup, task: Task) -> PatternRun:
    return PatternRun(pattern, task.to_json(), setup.model)


def finish_run(run: PatternRun, task: Task, answer: str | None, records) -> PatternRun:
    run.answer = answer
    run.success = task.check(answer)
    run.steps.append({"kind": "answer", "text": answer})
    forced = sorted({r.forced for r in records if r.forced and r.kind != "thought"})
    if forced:
        run.notes.append(f"the host started the answer with {forced} (the model's own next tokens follow)")
    return run


def log_calls(run: PatternRun, trace, context: str = "main") -> None:
    for r in results(trace):
        run.steps.append(
            {
                "kind": "call",
                "context": context,
                "name": r.name,
                "arguments": r.arguments,
                "status": r.status,
                "result": r.result,
            }
        )


def direct(setup: Setup, task: Task, max_turns: int = 5) -> PatternRun:
    """The host loop as it is, in one context: ``toolkit.loop.loop.run`` with ``max_turns``."""
    out = start_run("direct", setup, task)
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": task.question}]
    trace = run(
        setup.new_backend("main"),
        setup.tokenizer,
        msgs,
        worker_tools(),
        on_step=Recorder(out.turns, "main"),
        **dict(setup.settings, tool_choice=setup.first_choice(), max_turns=max_turns),
    )
    log_calls(out, trace)
    if trace.answer is None:
        out.notes.append(f"no answer within {max_turns} turns ({trace.stop.reason if trace.stop else '?'})")
    return finish_run(out, task, trace.answer, out.turns)


def react(setup: Setup, task: Task, max_steps: int = 4) -> PatternRun:
    """Thought, then action (a call or the answer), repeated; see the module docstring."""
    out = start_run("react", setup, task)
    backend, tools = setup.new_backend("main"), worker_tools()
    msgs = [{"role": "system", "content": REACT_SYSTEM}, {"role": "user", "content": task.question}]
    answer = None
    for i in range(max_steps):
        thought = think(setup, backend, msgs, tools, out.turns)
        out.steps.append({"kind": "thought", "text": thought})
        tr = turn(
            setup,
            backend,
            msgs,
            tools,
            out.turns,
            context="main",
            tag=f"s{i}",
            tool_choice=setup.first_choice() if i == 0 else "auto",
        )
        log_calls(out, tr)
        if tr.answer is not None:
            answer = tr.answer
            break
        rs = results(tr)
        if rs and all(r.status in ("repeated", "skipped") for r in rs):  # as the loop does: nothing new, answer
            why = f"step {i + 1} only repeated earlier calls: the host asked for the answer"
            if msgs[-1]["role"] == "assistant" and str(msgs[-1]["content"]).startswith(THOUGHT_PREFIX):
                msgs.pop()  # the thought that led to the repeat leaves the history (the loop drops that turn too)
            break
    else:
        why = f"step cap {max_steps} reached: the host asked for the answer"
    if answer is None:  # after the last results the loop's answer turn (tools off, answer started for it)
        tr = turn(setup, backend, msgs, tools, out.turns, context="main", tag="final")
        answer = tr.answer
        out.notes.append(why)
    return finish_run(out, task, answer, out.turns)


def _plan_of(trace) -> list[str] | None:
    calls = [r for r in results(trace) if r.name == "plan" and r.ok]
    return [str(s) for s in calls[-1].arguments["steps"]] if calls else None


def plan_execute(setup: Setup, task: Task, max_steps: int = 5, max_replans: int = 1) -> PatternRun:
    """Plan as a list, execute step by step, replan once on a failed step; see the module docstring."""
    out = start_run("plan_execute", setup, task)
    backend = setup.new_backend("main")
    tools = {**worker_tools(), "plan": PLAN_TOOL}  # one tool block for every turn: the prefix stays cached
    msgs = [{"role": "system", "content": PLAN_SYSTEM}, {"role": "user", "content": task.question}]

    def make_plan(tag: str) -> list[str]:
        tr = turn(setup, backend, msgs, tools, out.turns, context="main", kind="plan", tool_choice="plan", tag=tag)
        steps = _plan_of(tr) or []
        out.steps.append({"kind": "plan", "steps": steps})
        return steps

    steps, i, done, replans = make_plan("p0"), 0, 0, 0
    while i < len(steps) and done < max_steps:
        msgs.append({"role": "user", "content": f"Step {i + 1} of {len(steps)}: {steps[i]}"})
        tr = turn(setup, backend, msgs, tools, out.turns, context="main", tool_choice="required", tag=f"x{done}")
        done += 1
        log_calls(out, tr)
        rs = results(tr)
        if rs and all(r.status in ("repeated", "skipped") for r in rs):
            # nothing new (the loop kept that turn out of the history): the host's step line leaves it too, so the
            # next turn reads the last real result (measured: left in, the answer turn wrote a plan as plain text)
            msgs.pop()
            out.notes.append(f"step {i + 1}: only repeated calls; the host moved on")
            i += 1
            continue
        new_plan = _plan_of(tr)
        failed = [r for r in results(tr) if r.status not in ("ok", "repeated")]  # a repeat is told the result
        if new_plan and new_plan == steps:  # the same plan again is no replan: restarting would redo done steps
            out.steps.append({"kind": "plan", "steps": steps, "why": f"the same plan re-sent at step {i + 1}: kept"})
            out.notes.append(
                f"step {i + 1}: the model re-sent the same plan instead of a step's call; the host moved on"
            )
            i += 1
        elif new_plan and replans < max_replans:  # the model replanned on its own
            steps, i, replans = new_plan, 0, replans + 1
            out.steps.append({"kind": "plan", "steps": steps, "why": "the model called plan during a step"})
        elif failed and replans < max_replans:
            why = "; ".join(str(r.result)[:160] for r in failed)
            msgs.append(
                {"role": "user", "content": f"Step {i + 1} failed ({why}). Call plan with the remaining steps."}
            )
            replans += 1
            steps, i = make_plan(f"p{replans}"), 0
            out.steps[-1]["why"] = f"step failed: {why}"
        else:
            i += 1
    if done >= max_steps and i < len(steps):
        out.notes.append(f"step cap {max_steps} reached with {len(steps) - i} step(s) left")
    while len(msgs) > 2 and msgs[-1]["role"] == "user":  # host lines (a step, a replan request) no call answered
        msgs.pop()
        out.notes.append("a host line no new call answered left the history before the answer turn")
    tr = turn(
        setup,
        backend,
        msgs,
        tools,
        out.turns,
        context="main",
        tag="final",
        tool_choice="none" if msgs[-1]["role"] != "tool" else "auto",
        answer_prefix=answer_prefix(task),
    )
    return finish_run(out, task, tr.answer, out.turns)
