"""What a pattern run returns: plain data per turn (which context, tokens prefilled and decoded) and per run.

What it does
- :class:`TurnRecord`: one model turn — its context (``"main"``, ``"sub1"`` …), its kind (``call``, ``text``,
  ``answer``, ``thought``, ``plan``), the prompt length, tokens reused from the prefix cache, prefilled, decoded,
  the calls it made and their statuses, and its text.
- :class:`Recorder`: an ``on_step`` callback for ``toolkit.loop.loop.run`` that turns the loop's typed steps into
  records as they happen (so a sub-agent's turns land between its main turn's call and the next main turn).
- :class:`PatternRun`: a whole run — records, steps, answer, success, with totals and ``to_json()``.

What it leaves out
- Timing: the loop's steps carry wall times; totals here are tokens, which do not depend on the machine's load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from toolkit.loop.steps import Executed, Generated, Parsed, Rendered


@dataclass
class TurnRecord:
    context: str
    kind: str
    prompt: int
    reused: int
    prefilled: int
    decoded: int
    calls: list = field(default_factory=list)
    statuses: list = field(default_factory=list)
    text: str = ""
    forced: str = ""


class Recorder:
    """Collects :class:`TurnRecord` rows from the loop's steps (``run(..., on_step=recorder)``) into ``into``."""

    def __init__(self, into: list, context: str, kind: str | None = None):
        self.into, self.context, self.kind = into, context, kind
        self._rendered: Rendered | None = None
        self.current: TurnRecord | None = None

    def __call__(self, step) -> None:
        if isinstance(step, Rendered):
            self._rendered = step
        elif isinstance(step, Generated) and self._rendered is not None:
            g, r = step.generation, self._rendered
            kind = self.kind or r.mode
            self.current = TurnRecord(
                self.context,
                kind,
                len(r.prompt_ids),
                g.reused,
                g.prefilled,
                len(g.new_ids),
                text=step.text,
                forced=r.forced_prefix,
            )
            self.into.append(self.current)
        elif isinstance(step, Parsed) and self.current is not None:
            self.current.calls = [c.name if c.ok else f"!{c.error['type']}" for c in step.calls]
        elif isinstance(step, Executed) and self.current is not None:
            self.current.statuses = [r.status for r in step.results]


class TokenTotals:
    """Tokens prefilled and decoded over a run's ``turns`` (a :class:`TurnRecord` list): patterns and RAG runs."""

    turns: list

    @property
    def prefilled(self) -> int:
        return sum(t.prefilled for t in self.turns)

    @property
    def decoded(self) -> int:
        return sum(t.decoded for t in self.turns)


@dataclass
class PatternRun(TokenTotals):
    pattern: str
    task: dict
    model: str
    turns: list[TurnRecord] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)  # thoughts, plans, calls with results, the answer
    answer: str | None = None
    success: bool = False
    notes: list[str] = field(default_factory=list)  # where the host helped the model (forced prefixes, caps)

    @property
    def n_turns(self) -> int:
        return len(self.turns)

    def context_sizes(self, context: str = "main") -> list[int]:
        """The prompt length of each turn of one context, in order: where that context grows."""
        return [t.prompt for t in self.turns if t.context == context]

    def summary(self) -> dict:
        return dict(
            pattern=self.pattern,
            task=self.task["id"],
            success=self.success,
            n_turns=self.n_turns,
            prefilled=self.prefilled,
            decoded=self.decoded,
            main_peak=max(self.context_sizes() or [0]),
            contexts=sorted({t.context for t in self.turns}),
        )

    def to_json(self) -> dict:
        return dict(
            pattern=self.pattern,
            task=self.task,
            model=self.model,
            turns=[asdict(t) for t in self.turns],
            steps=self.steps,
            answer=self.answer,
            success=self.success,
            notes=self.notes,
            **{k: v for k, v in self.summary().items() if k not in ("pattern", "task", "success")},
        )
