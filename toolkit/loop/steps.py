"""The host loop's typed steps and the trace that collects them.

What it does
- One dataclass per step (``Rendered``, ``Generated``, ``Parsed``, ``Executed``, ``Answered``, ``Stopped``), each
  carrying its own serialisation (:class:`Step`: ``to_json``, ``row``, ``lines``, ``html``), so the trace, the CLI,
  the widget and the figure read steps without knowing their types.
- :class:`Trace`: all steps of one run, the answer, the stop reason, one row per turn and the JSON the CLI prints.

What it leaves out
- Producing steps (``toolkit.loop.loop``) and drawing them (``toolkit.widgets.trace``).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from toolkit.backends.base import Generation
from toolkit.loop.execute import CallResult
from toolkit.parse import ToolCall

STOP_REASONS = ("answered", "max_turns", "repeated_call", "token_budget", "max_new_tokens")


# ================================================================ steps
class Step:
    """What every step can say about itself. A new step type is one dataclass here that subclasses ``Step`` (with a
    ``turn`` field) and overrides what it has to add; the trace, the CLI, the widget and the figure need no change.

    - ``to_json()``: the step as JSON-ready data (``Trace.to_json``, ``python -m toolkit loop --json``);
    - ``row()``: what it adds to its turn's row of ``Trace.turns()`` (the notebook table, the widget's bars);
    - ``lines()``: its lines in the CLI's plain output ("" prints nothing);
    - ``html()``: its line in the trace widget's log.
    """

    turn: int

    def to_json(self) -> dict:
        return {"step": type(self).__name__, **asdict(self)}

    def row(self) -> dict:
        return {}

    def lines(self) -> str:
        return ""

    def html(self) -> str:
        return html.escape(self.lines().strip())


@dataclass
class Rendered(Step):
    turn: int
    rendering: Any  # toolkit.render.Rendering
    prompt_ids: list[int]  # rendering ids + a thinking model's <think> block (toolkit.loop.think) + forced prefix ids
    split: dict  # {"tools": n, "history": n, "new": n}
    forced_prefix: str = ""
    mode: str = ""  # "call" | "text" | "answer" | "free": how this turn is decoded (see RULE)
    rule: str = ""  # why, in words

    def to_json(self) -> dict:
        return {
            "step": "Rendered",
            "turn": self.turn,
            "prompt_tokens": len(self.prompt_ids),
            "split": self.split,
            "forced_prefix": self.forced_prefix,
            "mode": self.mode,
            "rule": self.rule,
        }

    def row(self) -> dict:
        return dict(prompt=len(self.prompt_ids), **self.split, forced_prefix=self.forced_prefix, mode=self.mode)

    def lines(self) -> str:
        return f"\n-- turn {self.turn} [{self.mode}]: prompt {len(self.prompt_ids)} tokens {self.split}\n   why: {self.rule}"

    def html(self) -> str:
        e = html.escape
        extra = f" · answer started with <code>{e(self.forced_prefix)}</code>" if self.forced_prefix else ""
        return f"<b>turn {self.turn}</b> · prompt {len(self.prompt_ids)} tokens {e(json.dumps(self.split))}{extra}"


@dataclass
class Generated(Step):
    turn: int
    text: str
    generation: Generation
    constrained: bool

    @property
    def ids(self) -> list[int]:
        return self.generation.new_ids

    def to_json(self) -> dict:
        g = self.generation
        return {
            "step": "Generated",
            "turn": self.turn,
            "text": self.text,
            "constrained": self.constrained,
            **{k: v for k, v in asdict(g).items() if k != "new_ids"},
            "new_tokens": len(g.new_ids),
        }

    def row(self) -> dict:
        g = self.generation
        return dict(
            reused=g.reused,
            prefilled=g.prefilled,
            generated=len(g.new_ids),
            prefill_ms=round(g.prefill_s * 1e3, 2),
            decode_ms=round(g.decode_s * 1e3, 2),
            stopped_by=g.stopped_by,
            constrained=self.constrained,
        )

    def cache_line(self) -> str:
        """A served turn's prefix-cache hits beside the kit's own count ("" where the server reports none)."""
        server = getattr(self.generation, "server", None) or {}
        if server.get("cached_tokens") is None:
            return ""
        prompt = (server.get("usage") or {}).get("prompt_tokens") or server.get("prompt_tokens_kit")
        return (
            f"   server prefix cache: {server['cached_tokens']} of {prompt} prompt tokens cached; the kit's shared "
            f"prefix with its last request: {server.get('kit_shared_prefix')}"
        )

    def lines(self) -> str:
        g = self.generation
        main = (
            f"   generated {len(g.new_ids)} tokens ({'constrained' if self.constrained else 'free'}), "
            f"reused {g.reused}, prefilled {g.prefilled}, prefill {g.prefill_s * 1e3:.0f} ms, "
            f"decode {g.decode_s * 1e3:.0f} ms: {self.text!r}"
        )
        cache = self.cache_line()
        return f"{main}\n{cache}" if cache else main

    def html(self) -> str:
        g = self.generation
        kind = "constrained (tool-call tag)" if self.constrained else "free"
        return (
            f"&nbsp;&nbsp;generated {len(g.new_ids)} tokens, {kind}, stopped by {g.stopped_by}: "
            f"<code>{html.escape(self.text)}</code>"
        )


@dataclass
class Parsed(Step):
    turn: int
    content: str
    calls: list[ToolCall]

    def to_json(self) -> dict:
        return {
            "step": "Parsed",
            "turn": self.turn,
            "content": self.content,
            "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments, "error": c.error} for c in self.calls],
        }

    def row(self) -> dict:
        return {"calls": [c.name if c.ok else f"!{c.error['type']}" for c in self.calls]}

    def html(self) -> str:
        e = html.escape
        return "&nbsp;&nbsp;parsed: " + (
            ", ".join(e(c.name or "?") if c.ok else f"<i>{e(c.error['type'])}</i>" for c in self.calls)
            or "no tool call → answer"
        )


@dataclass
class Executed(Step):
    turn: int
    results: list[CallResult]
    wall_s: float

    def to_json(self) -> dict:
        return {
            "step": "Executed",
            "turn": self.turn,
            "wall_s": self.wall_s,
            "results": [asdict(r) for r in self.results],
        }

    def row(self) -> dict:
        return {"statuses": [x.status for x in self.results], "tool_ms": round(self.wall_s * 1e3, 2)}

    def lines(self) -> str:
        return "\n".join(
            f"   {r.status:>8} {r.name}({json.dumps(r.arguments, ensure_ascii=False)}) -> "
            f"{json.dumps(r.result, ensure_ascii=False)[:300]}"
            for r in self.results
        )

    def html(self) -> str:
        e = html.escape
        return "<br>".join(
            f"&nbsp;&nbsp;{e(r.status)}: {e(str(r.name))}({e(json.dumps(r.arguments, ensure_ascii=False))})"
            f" → <code>{e(json.dumps(r.result, ensure_ascii=False))}</code>"
            for r in self.results
        )


@dataclass
class Answered(Step):
    turn: int
    text: str

    def html(self) -> str:
        return f"<b>answer</b>: {html.escape(self.text)}"


@dataclass
class Stopped(Step):
    reason: str  # one of STOP_REASONS
    turn: int
    detail: str = ""

    def lines(self) -> str:
        return f"\nstopped: {self.reason} {self.detail}".rstrip()

    def html(self) -> str:
        return f"<b>stopped</b>: {html.escape(self.reason)} {html.escape(self.detail)}"


# ================================================================ collecting
def turn_rows(steps) -> list[dict]:
    """One row per turn (each step adds its ``row()``); turns that never rendered a prompt are left out."""
    rows: dict[int, dict] = {}
    for s in steps:
        rows.setdefault(s.turn, {"turn": s.turn}).update(s.row())
    return [r for r in rows.values() if "prompt" in r]


@dataclass
class Trace:
    """All steps of one run plus the per-turn accounting the trace widget plots."""

    model: str
    steps: list = field(default_factory=list)
    messages: list = field(default_factory=list)

    @property
    def stop(self) -> Stopped | None:
        return next((s for s in reversed(self.steps) if isinstance(s, Stopped)), None)

    @property
    def answer(self) -> str | None:
        return next((s.text for s in reversed(self.steps) if isinstance(s, Answered)), None)

    def of(self, kind) -> list:
        return [s for s in self.steps if isinstance(s, kind)]

    def turns(self) -> list[dict]:
        """One row per turn: prompt split, reused/prefilled, times, calls and their statuses."""
        return turn_rows(self.steps)

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "steps": [s.to_json() for s in self.steps],
            "turns": self.turns(),
            "answer": self.answer,
            "stop_reason": self.stop.reason if self.stop else None,
        }
