"""The loop's worked examples on a loaded model, with the defaults the kit uses for them.

What it does
- ``example(name)``: a fresh copy of one of ``toolkit.conversations.LOOP_EXAMPLES`` with its tools resolved.
- ``ask(question, loaded)`` / ``run_example(name, loaded)``: the loop on ``toolkit.backends.choose.backend_for(loaded)``
  (local weights or a server) with ``toolkit.settings.LoopConfig.for_model(loaded)`` (keyword arguments override
  it; ``config=`` passes a whole one); ``pick_tools`` narrows the demo tools by name.

What it leaves out
- Free-form questions (call ``toolkit.loop.loop.run`` with your own messages).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from toolkit.backends.choose import backend_for
from toolkit.conversations import LOOP_EXAMPLES
from toolkit.loop.loop import run
from toolkit.loop.steps import Trace
from toolkit.settings import LoopConfig
from toolkit.tools import TOOLS

MAX_QUESTION_CHARS = 4000


def example(name: str) -> dict:
    """A fresh copy of one of :data:`LOOP_EXAMPLES` with its tools resolved from ``toolkit.tools.TOOLS``."""
    if name not in LOOP_EXAMPLES:
        raise ValueError(f"unknown example {name!r}; choose one of {sorted(LOOP_EXAMPLES)}")
    ex = LOOP_EXAMPLES[name]
    return dict(messages=[dict(m) for m in ex["messages"]], tools={n: TOOLS[n] for n in ex["tools"]})


def pick_tools(names=None) -> dict:
    """``toolkit.tools.TOOLS`` narrowed to ``names`` (a list or "a,b"; None: all four). ValueError names the
    unknown ones."""
    if names is None:
        return dict(TOOLS)
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in names if n not in TOOLS]
    if unknown or not names:
        raise ValueError(f"unknown tool(s) {unknown or names!r}; known: {', '.join(TOOLS)}")
    return {n: TOOLS[n] for n in names}


def ask(
    question: str | list[dict],
    loaded,
    *,
    tools=None,
    reuse: bool = True,
    on_step: Callable | None = None,
    config: LoopConfig | None = None,
    **kw,
) -> Trace:
    """Run the loop on a question (or a message list) with the named tools (default: all four demo tools) and
    ``config`` (default ``LoopConfig.for_model(loaded)``); keyword arguments override it."""
    messages = [{"role": "user", "content": question}] if isinstance(question, str) else question
    mounted = tools if isinstance(tools, Mapping) else pick_tools(tools)
    backend = backend_for(loaded, reuse=reuse)
    cfg = (config or LoopConfig.for_model(loaded)).but("caller", **kw)
    return run(backend, loaded.tokenizer, messages, mounted, on_step=on_step, config=cfg)


def run_example(name: str, loaded, *, reuse: bool = True, **kw) -> Trace:
    """Run one of :data:`LOOP_EXAMPLES` with the same defaults as :func:`ask`."""
    ex = example(name)
    return ask(ex["messages"], loaded, tools=ex["tools"], reuse=reuse, **kw)
