"""How often does a tool call work? Measured on a public benchmark (BFCL) and on the kit's own chains (book
§14.5.4 table 14-11, §14.5.9; "Tool Use" guidelines for descriptions).

What it does
- :mod:`toolkit.eval.bfcl`: load BFCL categories from the installed ``bfcl-eval`` package, convert its function
  docs (``dict``, ``float``, ``tuple``, ``any`` …) to JSON Schema tools, build each case's prompt in three modes
  (``prompt``, ``native``, ``constrained``); :mod:`toolkit.eval.read`: read the calls back out of each mode's text.
- :mod:`toolkit.eval.score`: an AST scorer that follows BFCL's rules, with a failure taxonomy.
- :mod:`toolkit.eval.stats`: Wilson intervals, the unbiased pass^k estimator and the naive p̄^k.
- :mod:`toolkit.eval.run`: batched generation over many cases on any kit backend, with an on-disk cache.
- :mod:`toolkit.eval.chains`: dependent k-step tasks on the kit's tools, measured beside p^k;
  :mod:`toolkit.eval.pairs`: the pair-lookup variant (parallel calls shorten the chain);
  :mod:`toolkit.eval.chain_table`: the measured table 14-11, which way p^k errs, and the measuring run.
- :mod:`toolkit.eval.levers`: general levers for parallel calls in the constrained mode (a hint, a gate);
  :mod:`toolkit.eval.prompt_grammar`: BFCL's prompt style under a grammar (another lever).
- :mod:`toolkit.eval.descriptions` / :mod:`toolkit.eval.lint`: description variants and ``lint-tools``.
- :mod:`toolkit.eval.sections` / :mod:`toolkit.eval.rescore`: what ``benchmarks/bfcl.py`` saves per section, and
  its saved outputs re-scored without a model.
- :mod:`toolkit.eval.questions`: the host loop's question sets (data) and their one strict judge;
  :mod:`toolkit.eval.agent_runs`: summaries of saved agent-pattern and RAG runs.

What it leaves out
- BFCL's live, multi-turn, agentic and non-Python categories (their data ships with the package; the scorer
  handles Python-typed AST cases and irrelevance only).
- Executable evaluation: calls are compared as syntax trees against possible answers, never run.
"""
