"""The backend protocol the host loop drives, and the one ``Generation`` every backend returns.

Backend protocol (``HFBackend``, ``ScriptedBackend`` and ``Engine`` implement it)::

    backend.generate(prompt_ids: list[int], *, max_new_tokens: int, stop_ids: set[int], mask=None,
                     temperature: float = 0.0, top_p: float = 1.0, seed: int = 0) -> Generation
    backend.name: str            # what ran, e.g. Loaded.description; says "STAND-IN" for random weights
    backend.vocab_width: int     # logit width, for grammar bitmasks (``vocab_width(backend)``: default 151,936)

Optional capabilities, each a ``runtime_checkable`` protocol of its own, so callers ask
``isinstance(backend, Peeks)`` instead of probing attribute names:

- :class:`Resets`: ``reset()`` forgets any cached prefix;
- :class:`Peeks`: ``peek(prompt_ids, *, temperature, top_p, seed) -> Generation``, the next token without a mask
  (the call gate of ``tool_choice="auto"``; without it the loop does a one-token generate);
- :class:`Batches`: ``generate_batch(prompts, ...) -> list[Generation]``, a padded batch through the same decode
  loop (``toolkit.eval.run.generate_batch``; without it prompts run one at a time);
- :class:`Scores`: ``next_token_logits(prompt_ids)``, the model's logits for the next token (one forward, no mask;
  ``toolkit.eval.run.first_tokens``). A server that returns tokens, not logits, does not have it.
- :class:`Streams`: ``streams = True`` and ``generate(..., on_token=f)`` calls ``f(id)`` with each new id as soon as
  it is decoded (``HFBackend``, ``Engine``, ``ScriptedBackend``); the loop reads a call while it streams
  (``toolkit.loop.stream``). A backend without it is read after its turn, token by token, with the same events.

Every model backend picks tokens with the one sampler (``toolkit.backends.sampling.choose``) inside the one decode
loop (``toolkit.backends.decode``): the same seed, temperature, top-p and grammar give the same tokens.

``Generation(new_ids, reused, prefilled, prefill_s, decode_s, stopped_by)``: ``new_ids`` are the generated ids
including the stop token if one was hit; ``reused`` prompt tokens came from a cache, ``prefilled`` were computed
(``reused + prefilled == len(prompt_ids)``); ``stopped_by`` is ``"stop"`` (a stop id), ``"grammar"`` (the mask
terminated), or ``"length"`` (``max_new_tokens``). ``mask`` is a ``toolkit.grammar.mask.GrammarMask``-like object.

Leaves out: batching several conversations; streaming from the HTTP backends (their chunks arrive inside one
``generate``; the loop reads such a turn after it ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolkit.qwen import VOCAB_WIDTH


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


def name_of(backend) -> str:
    """What ran: the backend's ``name``, or its class name for one that does not say."""
    return getattr(backend, "name", type(backend).__name__)


def vocab_width(backend) -> int:
    """The backend's logit width, or :data:`VOCAB_WIDTH` for one that does not say."""
    return getattr(backend, "vocab_width", None) or VOCAB_WIDTH


def context_length(backend) -> int | None:
    """The most tokens (prompt + new) the backend's model takes: its ``context_length``, else the loaded model's
    ``max_position_embeddings``; None when it does not say (a server that does not report it)."""
    n = getattr(backend, "context_length", None)
    if n is None:
        n = getattr(getattr(getattr(backend, "model", None), "config", None), "max_position_embeddings", None)
    return n if isinstance(n, int) and n > 0 else None


@runtime_checkable
class Resets(Protocol):
    def reset(self) -> None: ...


@runtime_checkable
class Peeks(Protocol):
    def peek(
        self, prompt_ids: list[int], *, temperature: float = 0.0, top_p: float = 1.0, seed: int = 0
    ) -> Generation: ...


@runtime_checkable
class Batches(Protocol):
    def generate_batch(
        self,
        prompts: list[list[int]],
        *,
        max_new_tokens: int,
        stop_ids: set[int],
        masks=None,
        temperature: float = 0.0,
        seed: int = 0,
        pad_id: int,
        share_prefix: bool = True,
        processors=(),
    ) -> list[Generation]: ...


@runtime_checkable
class Streams(Protocol):
    streams: bool  # True: generate(..., on_token=f) calls f(id) with each new id as it is decoded


@runtime_checkable
class Scores(Protocol):
    def next_token_logits(self, prompt_ids: list[int]) -> Any: ...  # a 1-D float tensor over the vocabulary
