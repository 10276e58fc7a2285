"""§14.5.1 measured: exact multiplication of large numbers, by the model alone and with the calculator tool.

``measure(loaded, n, digits, seed)`` draws ``n`` seeded pairs of ``digits``-digit integers. For each it asks the
model twice, greedy: (a) alone — "what is A × B", no tools, and the first integer in its answer is compared with
the exact product; (b) through the host loop (``toolkit.host``) with the calculator tool — the model writes the
call, the host runs ``toolkit.tools.calculator`` (exact integers) and feeds the result back, and the final answer
is checked for the exact product. Digits are compared after removing thousands separators and spaces.

What the kit does to help the model in (b), and says so in the result: the host loop's tag constraint (the
first reply must be a ``<tool_call>`` of the offered tool; the arguments are the model's own) and its answer
prefix. ``benchmarks/multiplication.py`` saves a run with date, machine, model and commit; notebook 04 reruns
a smaller seeded set live.

What it leaves out: sampling (greedy only), other operations, and any model but the one passed in.
"""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass

from . import host
from .tools import TOOLS

QUESTION = "What is {a} × {b}? Give the exact result."
HELP = "the host loop's tag constraint (the first reply must be a calculator <tool_call>) and its answer prefix"


@dataclass
class Row:
    a: int
    b: int
    product: int
    alone_text: str
    alone_exact: bool
    tool_call: str  # the expression the model passed to the calculator ('' if none)
    tool_text: str
    tool_exact: bool


def pairs(n: int, digits: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    lo, hi = 10 ** (digits - 1), 10 ** digits - 1
    return [(rng.randint(lo, hi), rng.randint(lo, hi)) for _ in range(n)]


def _digits(text: str) -> list[int]:
    """Every integer in ``text``, with thousands separators (',', ' ', '_') joined."""
    return [int(re.sub(r"[,\s_]", "", m)) for m in re.findall(r"\d[\d,_ ]*\d|\d", text or "")]


def ask_alone(loaded, question: str, max_new_tokens: int = 40) -> str:
    backend = host.HFBackend.from_loaded(loaded, reuse=False)
    trace = host.run(backend, loaded.tokenizer, [{"role": "user", "content": question}], {},
                     template=host.template_for(loaded), max_new_tokens=max_new_tokens, constrain="none",
                     answer_prefix=None)
    return trace.answer or ""


def ask_with_tool(loaded, question: str, max_new_tokens: int = 60) -> tuple[str, str]:
    backend = host.HFBackend.from_loaded(loaded)
    trace = host.run(backend, loaded.tokenizer, [{"role": "user", "content": question}],
                     {"calculator": TOOLS["calculator"]}, template=host.template_for(loaded),
                     max_new_tokens=max_new_tokens, constrain="tag", answer_prefix=host.DEFAULT_ANSWER_PREFIX,
                     parallel=False, max_calls=2)
    calls = [c for s in trace.of(host.Parsed) for c in s.calls if c.ok]
    expr = str(calls[0].arguments.get("expression", "")) if calls else ""
    return expr, trace.answer or ""


def measure(loaded, n: int = 8, digits: int = 6, seed: int = 0, on_row=None) -> dict:
    """Run both conditions on ``n`` seeded pairs; return rows and a summary (plain data)."""
    rows = []
    for a, b in pairs(n, digits, seed):
        q = QUESTION.format(a=a, b=b)
        alone = ask_alone(loaded, q)
        expr, with_tool = ask_with_tool(loaded, q)
        p = a * b
        row = Row(a, b, p, alone, (_digits(alone) or [None])[0] == p, expr, with_tool, p in _digits(with_tool))
        rows.append(row)
        if on_row:
            on_row(row)
    return dict(model=loaded.name, semantic=loaded.semantic, digits=digits, seed=seed, help=HELP,
                question=QUESTION, rows=[asdict(r) for r in rows],
                summary=dict(n=len(rows), alone_exact=sum(r.alone_exact for r in rows),
                             tool_exact=sum(r.tool_exact for r in rows)))
