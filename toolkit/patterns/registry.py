"""The patterns by name, in the order tables and widgets show them.

What it does
- ``PATTERNS``: name -> ``(setup, task) -> PatternRun``, one for each of ``toolkit.patterns.names.NAMES`` (the light
  list a command line offers) in its order; ``run_all(setup, tasks, names)`` runs each on each task.

What it leaves out
- Scoring across runs (success rate with an interval: ``benchmarks/patterns.py`` uses ``toolkit.eval.stats``).
"""

from __future__ import annotations

from toolkit.patterns.agents import direct, plan_execute, react
from toolkit.patterns.subagent import subagent

PATTERNS = {
    "direct": direct,
    "react": react,
    "plan_execute": plan_execute,
    "subagent": lambda setup, task: subagent(setup, task, isolate=True),
    "subagent_shared": lambda setup, task: subagent(setup, task, isolate=False),
}


def run_all(setup, tasks, names=tuple(PATTERNS), on_run=None) -> list:
    out = []
    for name in names:
        if name not in PATTERNS:
            raise ValueError(f"unknown pattern {name!r}; known: {', '.join(PATTERNS)}")
        for t in tasks:
            r = PATTERNS[name](setup, t)
            out.append(r)
            if on_run:
                on_run(r)
    return out
