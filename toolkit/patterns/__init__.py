"""Agent patterns as small loops on the kit's host loop (book §14.5.5): direct call, ReAct, plan-and-execute, a main
agent with a sub-agent; a seeded task set with checkable answers; per-turn token accounting as plain data.

``PATTERNS`` maps a pattern's name to its function ``(setup, task) -> PatternRun``."""
