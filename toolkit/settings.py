"""The host loop's one settings object: every option of ``toolkit.loop.loop.loop`` with its default, the settings the
kit runs a given model with, and where each value came from.

What it does
- :class:`LoopConfig` holds every option of the loop and its library default (a bare ``loop(...)`` uses these).
- ``LoopConfig.for_model(loaded)`` is what the kit runs on a model (local ``toolkit.models.Loaded`` or a served one,
  ``toolkit.backends.choose``): the model's template, :data:`MODEL_MAX_NEW_TOKENS` new tokens per turn, and for a
  random-weight stand-in 48 new tokens, strings bounded to 8 characters (otherwise it never closes one) and a call
  required on the first turn (its first token is noise: under "auto" it would show no round trip at all). The CLI
  (local and served), the notebooks, the patterns and the benchmarks all start from it.
- ``cfg.but(source, **changes)`` is a copy with ``changes``, each recorded as coming from ``source``;
  ``cfg.source_of(name)`` says where a value came from (``"default"`` if nobody set it); ``cfg.describe()`` prints
  the values with their sources; ``cfg.values()`` / ``cfg.sources()`` are the plain dicts (JSON output).

What it leaves out
- Validating the values (the loop checks ``constrain`` and ``tool_choice`` against the mounted tools when it runs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from toolkit.models import template_for

MODEL_MAX_NEW_TOKENS = 160  # per turn on a model: room for an answer written after tool results
STAND_IN_SETTINGS = dict(max_new_tokens=48, bound_strings=8, tool_choice="required", max_calls=1)
STAND_IN_WHY = "random-weight stand-in: short turns, bounded strings, a call required first, one call a turn"
SHOWN = (  # the plain values printed and saved (callables and a grammar object are shown only when set)
    "template",
    "tool_choice",
    "constrain",
    "max_turns",
    "max_new_tokens",
    "token_budget",
    "repeat_limit",
    "max_calls",
    "answer_prefix",
    "bound_strings",
    "tool_timeout_s",
    "parallel",
    "temperature",
    "top_p",
    "seed",
)


@dataclass(frozen=True)
class LoopConfig:
    """Every option of the loop with its default, in one place (``loop(..., config, **overrides)``).

    ``tool_choice``: see ``toolkit.loop.loop.RULE``. ``constrain="tag"`` decodes under the tool-choice grammars
    (``toolkit.grammar``); ``"none"`` decodes freely. ``template``: ``"qwen2.5"``, ``"qwen3"`` (the kit's) or
    ``"native"`` (the tokenizer's own). ``grammar`` overrides the grammar of call turns; ``bound_strings`` caps
    every string in the grammars (a random-weight stand-in needs it to finish). ``max_calls`` caps the calls one
    turn may run; ``repeat_limit`` how often the same call may run in the whole conversation.
    ``system_prefix(turn)`` is prepended to the system prompt at render time only (e.g.
    ``toolkit.loop.loop.timestamp_prefix``). ``temperature``/``top_p``/``seed`` go to the backend's one sampler
    (turn ``t`` draws with ``seed + t``). ``thinking`` is Qwen3's ``enable_thinking`` (``toolkit.loop.think``).
    ``on_event(turn, event)`` sees each turn's ``toolkit.streamparse`` events while the model generates
    (``toolkit.loop.stream``).
    ``origin`` records who set which value (see :meth:`but`).
    """

    template: str = "qwen2.5"
    tool_choice: Any = "auto"
    constrain: str = "tag"
    max_turns: int = 4
    max_new_tokens: int = 96
    token_budget: int = 50_000
    repeat_limit: int = 1
    confirm: Callable | None = None
    tool_timeout_s: float = 5.0
    parallel: bool = True
    grammar: Any = None
    max_calls: int = 8
    answer_prefix: str | None = "auto"
    bound_strings: int | None = None
    system_prefix: Callable[[int], str] | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    thinking: bool | None = None  # Qwen3's enable_thinking (None: the template's default, which thinks)
    on_event: Callable | None = None  # on_event(turn, event): the turn's toolkit.streamparse events as it streams
    origin: tuple = field(default=(), compare=False, repr=False)  # ((name, source), ...), latest last

    @classmethod
    def for_model(cls, loaded, **overrides) -> LoopConfig:
        """The settings the kit runs ``loaded`` with (see the module docstring); ``overrides`` are the caller's."""
        cfg = cls().but(f"model {loaded.name}", template=template_for(loaded))
        cfg = cfg.but("kit default for a model", max_new_tokens=MODEL_MAX_NEW_TOKENS)
        if not loaded.semantic:
            cfg = cfg.but(STAND_IN_WHY, **STAND_IN_SETTINGS)
        return cfg.but("caller", **overrides) if overrides else cfg

    def but(self, source: str, **changes) -> LoopConfig:
        """A copy with ``changes``, each recorded as set by ``source``. An unknown option raises ``TypeError``."""
        unknown = sorted(set(changes) - set(NAMES))
        if unknown:
            raise TypeError(f"unknown loop option(s) {unknown}; the options are {list(NAMES)}")
        return replace(self, **changes, origin=self.origin + tuple((k, source) for k in changes))

    def source_of(self, name: str) -> str:
        return next((s for k, s in reversed(self.origin) if k == name), "default")

    def _shown(self) -> list[str]:
        extra = [n for n in NAMES if n not in SHOWN and getattr(self, n) is not None]
        return list(SHOWN) + extra

    def values(self) -> dict:
        return {n: getattr(self, n) for n in self._shown()}

    def sources(self) -> dict:
        return {n: self.source_of(n) for n in self._shown()}

    def describe(self) -> str:
        """One line: the values set by someone, grouped by where they came from, then the defaults."""
        groups: dict[str, list[str]] = {}
        for n in self._shown():
            groups.setdefault(self.source_of(n), []).append(f"{n}={getattr(self, n)!r}")
        defaults = groups.pop("default", [])
        parts = [f"{', '.join(v)} ({s})" for s, v in groups.items()]
        return "; ".join(parts + ([f"defaults: {', '.join(defaults)}"] if defaults else []))


NAMES = tuple(f.name for f in fields(LoopConfig) if f.name != "origin")
