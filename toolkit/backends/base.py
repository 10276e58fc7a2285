"""The backend protocol the host loop drives, and the one ``Generation`` every backend returns.

Backend protocol (``HFBackend``, ``ScriptedBackend`` and ``Engine`` implement it)::

    backend.generate(prompt_ids: list[int], *, max_new_tokens: int, stop_ids: set[int], mask=None,
                     temperature: float = 0.0, top_p: float = 1.0, seed: int = 0) -> Generation
    backend.name: str            # what ran, e.g. Loaded.description; says "STAND-IN" for random weights
    backend.reset() -> None      # forget any cached prefix (optional)
    backend.vocab_width: int     # logit width, for grammar bitmasks (optional; default 151,936)
    backend.peek(prompt_ids, *, temperature, top_p, seed) -> Generation   # next token, no mask (optional;
                                 # default: a one-token generate) — the call gate of tool_choice="auto"

Every model backend picks tokens with the one sampler (``toolkit.backends.sampling.choose``) inside the one decode
loop (``toolkit.backends.decode``): the same seed, temperature, top-p and grammar give the same tokens.

``Generation(new_ids, reused, prefilled, prefill_s, decode_s, stopped_by)``: ``new_ids`` are the generated ids
including the stop token if one was hit; ``reused`` prompt tokens came from a cache, ``prefilled`` were computed
(``reused + prefilled == len(prompt_ids)``); ``stopped_by`` is ``"stop"`` (a stop id), ``"grammar"`` (the mask
terminated), or ``"length"`` (``max_new_tokens``). ``mask`` is a ``toolkit.grammar.mask.GrammarMask``-like object.

Leaves out: batching several conversations, streaming.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


# ================================================================ backend protocol
@dataclass
class Generation:
    new_ids: list[int]
    reused: int
    prefilled: int
    prefill_s: float
    decode_s: float
    stopped_by: str  # "stop" | "grammar" | "length"


class Backend(Protocol):
    name: str

    def generate(
        self,
        prompt_ids: list[int],
        *,
        max_new_tokens: int,
        stop_ids: set[int],
        mask=None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
    ) -> Generation: ...
