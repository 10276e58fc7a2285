"""Executing parsed tool calls: validate, confirm, run with a timeout, and turn every failure into data.

What it does (book §14.5.2 step 5, §14.5.9)
- ``execute(calls, tools)`` validates each call's arguments (``toolkit.schema.check_arguments``), asks
  ``confirm(call)`` for tools marked ``needs_confirmation`` (default: deny), and runs independent calls at the same
  time (one daemon thread each, per-call timeout). Results come back in call order as :class:`CallResult`; an
  unknown tool, invalid arguments, a refusal, a raising or hanging tool each become a structured error result.

What it leaves out
- Killing a timed-out tool: Python threads cannot be stopped, so a timed-out call is abandoned (its daemon thread
  finishes in the background, or dies with the process) and its result ignored.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolkit.errors import ToolError, error_result
from toolkit.parse import ToolCall
from toolkit.schema import check_arguments


# ================================================================ executing
@dataclass
class CallResult:
    call_id: str
    name: str | None
    arguments: dict | None
    status: str  # "ok" | "error" | "denied" | "timeout" | "repeated" | "skipped" (not run)
    result: Any  # the tool's dict, or {"error": {"type": ..., "message": ...}}
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def message(self) -> dict:
        """The role="tool" message the model will see."""
        return {
            "role": "tool",
            "tool_call_id": self.call_id,
            "name": self.name or "",
            "content": json.dumps(self.result, ensure_ascii=False, default=str),
        }


def _run_one(tool, args):
    t0 = time.perf_counter()
    try:
        out = tool.call(args)
        json.dumps(out, default=str)  # the model must be able to read it back
        return "ok", out, time.perf_counter() - t0
    except Exception as e:  # a tool's failure is an observation for the model, not a crash of the host
        kind = "tool_error" if isinstance(e, ToolError) else "tool_exception"
        msg = str(e) if isinstance(e, ToolError) else f"{type(e).__name__}: {e}"
        return "error", error_result(kind, msg[:300]), time.perf_counter() - t0


def execute(
    calls: list[ToolCall],
    tools: Mapping[str, Any],
    *,
    confirm: Callable | None = None,
    timeout_s: float = 5.0,
    parallel: bool = True,
) -> list[CallResult]:
    """Validate and run ``calls``; independent ones at the same time. Results come back in call order."""
    results: list[CallResult | None] = [None] * len(calls)
    todo = []
    for i, c in enumerate(calls):
        if not c.ok:
            results[i] = CallResult(c.id, c.name, c.arguments, "error", {"error": c.error})
        elif c.name not in tools:
            results[i] = CallResult(
                c.id,
                c.name,
                c.arguments,
                "error",
                error_result("unknown_tool", f"no tool named {c.name!r}; available: {sorted(tools)}"),
            )
        elif (why := check_arguments(tools[c.name], c.arguments)) is not None:
            results[i] = CallResult(c.id, c.name, c.arguments, "error", error_result("invalid_arguments", why))
        elif getattr(tools[c.name], "needs_confirmation", False) and not (confirm and confirm(c)):
            results[i] = CallResult(
                c.id,
                c.name,
                c.arguments,
                "denied",
                error_result(
                    "denied",
                    f"{c.name} changes something outside the chat and the user "
                    "did not approve this call; it was not run",
                ),
            )
        else:
            todo.append(i)

    # One daemon thread per call, not a ThreadPoolExecutor: the executor's exit hook would join a hung tool's
    # thread and keep the process alive; a daemon thread is simply abandoned.
    def start(i):
        box: dict = {}
        done = threading.Event()

        def work():
            box["out"] = _run_one(tools[calls[i].name], calls[i].arguments)
            done.set()

        threading.Thread(target=work, name=f"tool-{calls[i].name}", daemon=True).start()
        return box, done, time.perf_counter()

    def finish(i, box, done, t0, deadline):
        c = calls[i]
        if done.wait(max(0.0, deadline - time.perf_counter())):
            status, out, secs = box["out"]
            results[i] = CallResult(c.id, c.name, c.arguments, status, out, secs)
        else:
            results[i] = CallResult(
                c.id,
                c.name,
                c.arguments,
                "timeout",
                error_result("timeout", f"{c.name} did not finish within {timeout_s:g} s"),
                time.perf_counter() - t0,
            )

    if parallel:
        running = {i: start(i) for i in todo}
        for i, (box, done, t0) in running.items():
            finish(i, box, done, t0, t0 + timeout_s)
    else:
        for i in todo:
            box, done, t0 = start(i)
            finish(i, box, done, t0, t0 + timeout_s)
    return results  # type: ignore[return-value]
