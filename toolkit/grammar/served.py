"""Greedy decoding with or without a grammar on whatever ``toolkit.backends.choose.choose`` picked: a server or
local weights, one call for notebook 02's decoding steps.

What it does
- ``generate_on(loaded, tokenizer, prompt_ids, grammar)`` returns a ``toolkit.grammar.hf.Sampled``. On local weights
  it is ``toolkit.grammar.hf.generate`` (xgrammar's own transformers integration). On a server it is the served
  backend's ``generate`` with the grammar as a ``GrammarMask``: the backend sends it to a server that takes a
  structured-output parameter, or enforces it on the host (``toolkit.backends.http_tokens``); ``notes`` says which.
  Termination is checked by replaying the ids through a fresh matcher, as on local weights.

What it leaves out
- Sampling several rows at once on a server (one request per row would be needed; notebook 02 samples locally).
"""

from __future__ import annotations

import time

from toolkit.backends.choose import backend_for, is_served
from toolkit.grammar.compile import Grammar, stop_ids_of
from toolkit.grammar.hf import Sampled, decode_text, generate
from toolkit.grammar.mask import GrammarMask, replay


def generate_on(loaded, tokenizer, prompt_ids, grammar: Grammar | None = None, max_new_tokens: int = 48) -> Sampled:
    """One greedy generation on ``loaded`` (see the module docstring); ``.notes`` lists what a server backend said."""
    if not is_served(loaded):
        return generate(loaded.model, tokenizer, prompt_ids, grammar, max_new_tokens=max_new_tokens)
    backend = backend_for(loaded)
    stops = set(grammar.stop_token_ids if grammar else stop_ids_of(tokenizer))
    t0 = time.perf_counter()
    g = backend.generate(
        list(prompt_ids),
        max_new_tokens=max_new_tokens,
        stop_ids=stops,
        mask=GrammarMask(grammar) if grammar is not None else None,
    )
    new = list(g.new_ids)
    if grammar is not None:
        ok, term = replay(grammar, new)
        term = ok and term
    else:
        term = bool(new) and new[-1] in stops
    text, secs = decode_text(tokenizer, new, stops), time.perf_counter() - t0
    return Sampled(new, text, term, secs, grammar is not None, list(g.server.get("notes", [])))
