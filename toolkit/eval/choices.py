"""The names an evaluation run is asked for by, in one light place: BFCL's categories and modes, the chains'
landmarks and steps, the pair variant's call counts, the chain table's levers, the description variants and the
prompt hints.

What it does
- Holds each list once (and the tables ``benchmarks/bfcl.py`` runs by name: the fixed token budgets ``MAX_NEW``,
  the prompt levers ``PROMPT_LEVERS`` with their categories and budgets, the gate's thresholds); ``toolkit.eval.bfcl``, ``chains``, ``pairs``, ``chain_table`` and ``levers`` import their
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


# benchmarks/bfcl.py: the fixed budgets of the saved base-model runs (`accuracy --budget measured`, the default since
# issue 25, gives each category enough for its longest possible answer instead: toolkit.eval.budget)
MAX_NEW = {"simple_python": 64, "multiple": 64, "irrelevance": 64, "parallel": 128, "parallel_multiple": 128}

PROMPT_LEVERS = {  # item 6: general levers for the constrained mode (no knowledge of category or answer)
    "baseline": {},
    "hint": {"system_hint": HINTS["one-block-per-call"]},
    "more-calls": {"more_calls": True},
    "list": {"list_calls": True},
    # the gate's threshold as a dial (toolkit.eval.bfcl.IntentGate, 0.85 by default): 0.7 read off the first-step
    # masses of all 1,240 cases (`python benchmarks/bfcl.py gate`) as the point where irrelevance still calls in
    # under half of its cases — chosen on the evaluation data, so an optimistic estimate of what the dial gives
    "list + gate 0.7": {"list_calls": True, "gate_threshold": 0.7},
    "list + hint": {"list_calls": True, "system_hint": HINTS["one-call-per-item"]},
    "list + hint + gate 0.7": {"list_calls": True, "system_hint": HINTS["one-call-per-item"], "gate_threshold": 0.7},
    # BFCL's own prompt style (functions in the system prompt, `[f(a=1), g(b=2)]`), decoded under a grammar of
    # those calls or short text, the first token gated onto "[" at the default threshold
    "python list (prompt style)": {"mode": "prompt", "python_calls": True},
    # the same with the gate's argmax setting (threshold None): the pooled opening mass against the best other token
    "python list, gate argmax": {"mode": "prompt", "python_calls": True, "gate_threshold": None},
    # ... and at 0.5: a call when the model more likely than not opens structured output (chosen before measuring)
    "python list, gate 0.5": {"mode": "prompt", "python_calls": True, "gate_threshold": 0.5},
}
LEVER_CATEGORIES = ["parallel", "parallel_multiple", "simple_python", "irrelevance"]
# the levers' token budget: room for four calls in the parallel categories (a list of 3–4 compact JSON calls
# runs past the accuracy runs' 128), the same for every lever
LEVER_MAX_NEW = {**MAX_NEW, "parallel": 256, "parallel_multiple": 256}

# the first-token gate's dial (benchmarks/bfcl.py gate): the thresholds its curve is read at
GATE_THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)] + [0.85]
