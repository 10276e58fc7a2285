"""The host loop's typed steps and the trace that collects them.

What it does
- One dataclass per step (``Rendered``, ``Generated``, ``Parsed``, ``Executed``, ``Answered``, ``Stopped``).
- :class:`Trace`: all steps of one run, the answer, the stop reason, one row per turn and the JSON the CLI prints.

What it leaves out
- Producing steps (``toolkit.loop.loop``) and drawing them (``toolkit.widgets.trace``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from toolkit.backends.base import Generation
from toolkit.loop.execute import CallResult
from toolkit.parse import ToolCall

STOP_REASONS = ("answered", "max_turns", "repeated_call", "token_budget", "max_new_tokens")


# ================================================================ steps
@dataclass
class Rendered:
    turn: int
    rendering: Any  # toolkit.render.Rendering
    prompt_ids: list[int]  # rendering ids + forced prefix ids
    split: dict  # {"tools": n, "history": n, "new": n}
    forced_prefix: str = ""
    mode: str = ""  # "call" | "text" | "answer" | "free": how this turn is decoded (see RULE)
    rule: str = ""  # why, in words


@dataclass
class Generated:
    turn: int
    text: str
    generation: Generation
    constrained: bool

    @property
    def ids(self) -> list[int]:
        return self.generation.new_ids


@dataclass
class Parsed:
    turn: int
    content: str
    calls: list[ToolCall]


@dataclass
class Executed:
    turn: int
    results: list[CallResult]
    wall_s: float


@dataclass
class Answered:
    turn: int
    text: str


@dataclass
class Stopped:
    reason: str  # one of STOP_REASONS
    turn: int
    detail: str = ""


Step = Rendered | Generated | Parsed | Executed | Answered | Stopped


# ================================================================ collecting
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
        rows: dict[int, dict] = {}
        for s in self.steps:
            r = rows.setdefault(getattr(s, "turn", 0), {"turn": getattr(s, "turn", 0)})
            if isinstance(s, Rendered):
                r.update(prompt=len(s.prompt_ids), **s.split, forced_prefix=s.forced_prefix, mode=s.mode)
            elif isinstance(s, Generated):
                g = s.generation
                r.update(reused=g.reused, prefilled=g.prefilled, generated=len(g.new_ids),
                         prefill_ms=round(g.prefill_s * 1e3, 2), decode_ms=round(g.decode_s * 1e3, 2),
                         stopped_by=g.stopped_by, constrained=s.constrained)
            elif isinstance(s, Parsed):
                r["calls"] = [c.name if c.ok else f"!{c.error['type']}" for c in s.calls]
            elif isinstance(s, Executed):
                r["statuses"] = [x.status for x in s.results]
                r["tool_ms"] = round(s.wall_s * 1e3, 2)
        return [r for r in rows.values() if "prompt" in r]

    def to_json(self) -> dict:
        out = []
        for s in self.steps:
            d = {"step": type(s).__name__}
            if isinstance(s, Rendered):
                d.update(turn=s.turn, prompt_tokens=len(s.prompt_ids), split=s.split, forced_prefix=s.forced_prefix,
                         mode=s.mode, rule=s.rule)
            elif isinstance(s, Generated):
                d.update(turn=s.turn, text=s.text, constrained=s.constrained,
                         **{k: v for k, v in asdict(s.generation).items() if k != "new_ids"},
                         new_tokens=len(s.generation.new_ids))
            elif isinstance(s, Parsed):
                d.update(turn=s.turn, content=s.content,
                         calls=[{"id": c.id, "name": c.name, "arguments": c.arguments, "error": c.error}
                                for c in s.calls])
            elif isinstance(s, Executed):
                d.update(turn=s.turn, wall_s=s.wall_s, results=[asdict(r) for r in s.results])
            else:
                d.update(asdict(s))
            out.append(d)
        return {"model": self.model, "steps": out, "turns": self.turns(), "answer": self.answer,
                "stop_reason": self.stop.reason if self.stop else None}
