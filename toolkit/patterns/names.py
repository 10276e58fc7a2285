"""The patterns' names, in the order tables and widgets show them: light (standard library only), so a command line
can offer them before the patterns' imports (xgrammar, torch) load.

What it does
- :data:`NAMES`; ``toolkit.patterns.registry.PATTERNS`` maps each to its run (``tests/test_patterns.py`` checks
  the two agree), and ``benchmarks/patterns.py --patterns`` refuses any other name at once.

What it leaves out
- The patterns themselves (``toolkit.patterns.agents``, ``toolkit.patterns.subagent``).
"""

NAMES = ("direct", "react", "plan_execute", "subagent", "subagent_shared")
