"""The names an evaluation run is asked for by, in one light place: BFCL's categories and modes, the chains'
landmarks and steps, the pair variant's call counts, the chain table's levers, the description variants and the
prompt hints.

What it does
- Holds each list once; ``toolkit.eval.bfcl``, ``chains``, ``pairs``, ``chain_table`` and ``levers`` import their
  names from here (``descriptions.variants`` makes one of each :data:`VARIANTS`, its test checks), and
  ``benchmarks/bfcl.py`` builds its command line (choices, defaults) from here, so a bad value is refused before
  xgrammar and torch load (import-linter keeps this module free of them).

What it leaves out
- What the names mean when run: the prompts, grammars, tools, scorers and loops live in the modules above.
"""

from __future__ import annotations

# BFCL (toolkit.eval.bfcl): the categories the AST scorer handles, and the three ways a case is asked
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
MODES = ("prompt", "native", "constrained")

# the k-step chains (toolkit.eval.chains): the landmark table behind the first tool, and the steps in order
CITY_OF = {
    "Eiffel Tower": "Paris",
    "Big Ben": "London",
    "Tokyo Tower": "Tokyo",
    "Brandenburg Gate": "Berlin",
    "Sydney Opera House": "Sydney",
    "Golden Gate Bridge": "San Francisco",
    "Marina Bay Sands": "Singapore",
    "Statue of Liberty": "New York",
}
LANDMARKS = tuple(CITY_OF)
STEPS = ("landmark_city", "get_weather", "c_to_f", "times_two", "minus_100", "f_to_c")
MAX_K = len(STEPS)

# the pair-lookup variant (toolkit.eval.pairs): calls after 1, 2, 3 stages
PAIR_KS = (2, 4, 5)

# the chain table's measuring run (toolkit.eval.chain_table)
PLAIN = {"constrain": "none", "answer_prefix": None}  # the model's own format, no grammar, no started answer
LEVERS = {  # name -> (loop options, task family); {}: the kit loop's defaults (auto, call gate, grammar, prefix)
    "plain": (PLAIN, "chain"),
    "constrained": ({}, "chain"),
    "pair, in series": ({}, "pair-series"),
    "pair, parallel": ({}, "pair-parallel"),
}

# the tool-description variants (toolkit.eval.descriptions)
VARIANTS = ("original", "vague", "lookalike", "improved")

# prompt levers for BFCL's constrained mode (toolkit.eval.levers): general lines, no knowledge of a case's
# category or answer
HINTS = {
    "one-block-per-call": "When the request needs several function calls (several items, values or tasks), "
    "write one <tool_call></tool_call> block for each call, one after another, before you stop.",
    # for the list lever (one block, a JSON list of calls): the same advice in the list's terms
    "one-call-per-item": "When functions fit the request, make one call for each item, value or task the request "
    "names, all in one list.",
}
