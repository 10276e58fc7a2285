"""What every pattern runs on: a tokenizer, a way to open a fresh context (a backend with its own cache), the loop
settings, and the one-turn step the patterns are built from.

What it does
- :class:`Setup` holds the tokenizer, ``new_backend(label)`` (each context — the main agent, each sub-agent — gets
  its own backend and so its own prefix cache), the model's description, whether it is a real model
  (``semantic``), and the ``toolkit.loop.loop.run`` settings. ``Setup.from_loaded(loaded)`` takes them from
  ``toolkit.settings.LoopConfig.for_model`` (so a random-weight stand-in gets bounded strings and a required first
  call, as in notebook 03); ``Setup.scripted(tok, scripts)`` replays fixed texts per context for tests.
- ``turn(setup, backend, messages, tools, record, ...)``: ONE turn of the kit's host loop (``max_turns=1``):
  render, generate, parse, validate, execute, append — the patterns are sequences of such turns with different
  ``tool_choice``. Call ids are renamed to stay unique across turns of one conversation.
- ``think(...)``: a ReAct reasoning turn: the same rendering, the answer started with ``"Thought:"``, decoded under
  the kit's ``"answer"`` grammar (prose: no ``<tool_call>``, brace or fence), short.

What it leaves out
- Running contexts concurrently: a sub-agent runs while the main agent waits for its tool result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from toolkit.backends.base import Generation, vocab_width
from toolkit.backends.choose import backend_for
from toolkit.backends.scripted import ScriptedBackend
from toolkit.grammar.compile import compile_tool_choice
from toolkit.grammar.mask import GrammarMask
from toolkit.loop.loop import run
from toolkit.loop.steps import Executed, Trace
from toolkit.patterns.record import Recorder, TurnRecord
from toolkit.qwen import STOP_IDS
from toolkit.render import render
from toolkit.schema import openai_schema
from toolkit.settings import LoopConfig

# Settings the patterns choose per turn themselves (the rest come from the model's defaults).
PER_TURN = ("tool_choice", "max_turns")
THOUGHT_PREFIX = "Thought:"


@dataclass
class Setup:
    tokenizer: object
    new_backend: Callable[[str], object]
    model: str
    semantic: bool = True
    settings: dict = field(default_factory=dict)
    thought_tokens: int = 32
    _answer_grammar: object = None

    @classmethod
    def from_loaded(cls, loaded, max_new_tokens: int = 80, **kw) -> Setup:
        """The patterns on a ``toolkit.models.Loaded`` (or a served model, ``toolkit.backends.choose``); a fresh
        backend (own cache) per context."""
        cfg = LoopConfig.for_model(loaded, **kw)
        if loaded.semantic:
            cfg = cfg.but("the patterns' turns", max_new_tokens=max_new_tokens)
        settings = {k: v for k, v in cfg.values().items() if k not in PER_TURN}
        return cls(loaded.tokenizer, lambda label: backend_for(loaded), loaded.description, loaded.semantic, settings)

    @classmethod
    def scripted(cls, tokenizer, scripts: dict[str, list], **settings) -> Setup:
        """Fixed texts per context label (``"main"``, ``"sub1"`` …): each label's backend replays its list."""
        return cls(
            tokenizer,
            lambda label: ScriptedBackend(tokenizer, scripts[label]),
            "scripted (no model)",
            True,
            dict(template="qwen2.5", **settings),
        )

    def first_choice(self) -> str:
        """``"auto"`` on a real model; ``"required"`` on a random-weight stand-in, whose first token is noise."""
        return "auto" if self.semantic else "required"

    def answer_grammar(self, backend):
        if self._answer_grammar is None and self.settings.get("constrain", "tag") == "tag":
            self._answer_grammar = compile_tool_choice([], self.tokenizer, "answer", vocab_width=vocab_width(backend))
        return self._answer_grammar


def _rename_ids(messages: list[dict], start: int, prefix: str) -> None:
    """The loop numbers calls call_1, call_2 … per run; one run per turn would repeat them, so prefix them."""
    for m in messages[start:]:
        for c in m.get("tool_calls") or []:
            c["id"] = f"{prefix}_{c['id']}"
        if m["role"] == "tool":
            m["tool_call_id"] = f"{prefix}_{m['tool_call_id']}"


def turn(
    setup: Setup,
    backend,
    messages,
    tools,
    records: list,
    *,
    context: str,
    kind: str | None = None,
    tool_choice="auto",
    tag: str = "",
    **kw,
) -> Trace:
    """One turn of the kit's host loop; its record is appended to ``records``; ``messages`` grows in place."""
    start = len(messages)
    settings = dict(setup.settings, **kw)
    trace = run(
        backend,
        setup.tokenizer,
        messages,
        tools,
        on_step=Recorder(records, context, kind),
        tool_choice=tool_choice,
        max_turns=1,
        **settings,
    )
    if tag:
        _rename_ids(messages, start, tag)
    return trace


def results(trace: Trace) -> list:
    return [r for s in trace.of(Executed) for r in s.results]


def think(setup: Setup, backend, messages, tools, records: list, *, context: str = "main") -> str:
    """A ReAct reasoning turn (see the module docstring); appends the thought as an assistant message."""
    schemas = [openai_schema(t) for t in tools.values()]
    tok = setup.tokenizer
    rendering = render(messages, schemas or None, template=setup.settings.get("template", "qwen2.5"), tokenizer=tok)
    prompt = list(rendering.ids) + tok.encode(THOUGHT_PREFIX, add_special_tokens=False)
    grammar = setup.answer_grammar(backend)
    g: Generation = backend.generate(
        prompt,
        max_new_tokens=setup.thought_tokens,
        stop_ids=set(STOP_IDS),
        mask=GrammarMask(grammar) if grammar is not None else None,
        temperature=setup.settings.get("temperature", 0.0),
        seed=setup.settings.get("seed", 0),
    )
    body = g.new_ids[:-1] if g.new_ids and g.new_ids[-1] in STOP_IDS else g.new_ids
    text = THOUGHT_PREFIX + tok.decode(body, skip_special_tokens=False)
    records.append(
        TurnRecord(
            context, "thought", len(prompt), g.reused, g.prefilled, len(g.new_ids), text=text, forced=THOUGHT_PREFIX
        )
    )
    messages.append({"role": "assistant", "content": text})
    return text
