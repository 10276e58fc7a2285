"""The one sampler every backend uses: greedy, or temperature + top-p, under an optional grammar mask.

What it does
- ``choose(logits, temperature, top_p, allowed, noise)``: greedy is the argmax (first index on ties) of the masked
  logits; sampling draws from ``softmax(masked / T)`` cut to the top-p nucleus, as ``argmax(p / q)`` with
  ``q ~ Exp(1)``. That is exactly how ``torch.multinomial(p, 1, generator=g)`` draws one item (ATen's one-sample
  path), so with the same generator the draw is the one ``multinomial`` makes, and every backend that calls this
  function gives the same tokens for the same seed, temperature, top-p and grammar (tests/test_backends.py).
- ``greedy`` / ``sample`` are the two halves as pure tensor ops with no host synchronisation: the engine captures
  them inside CUDA graphs (temperature and top-p as device tensors). They work on ``[V]`` and ``[B, V]``.
- ``draw_noise`` draws ``q`` for one step from a seeded generator; ``generator(seed, device)`` makes one;
  ``allowed_from_bitmask`` unpacks xgrammar's int32 bitmask (bit j of word i = token 32*i + j) on any device.

What it leaves out
- Top-k, min-p, repetition penalties, beam search. Equal tokens across devices: a CUDA generator draws a
  different stream from a CPU one, so "same seed, same tokens" holds per device.
"""

from __future__ import annotations

import torch


def generator(seed: int, device="cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(int(seed))


def draw_noise(like: torch.Tensor, gen: torch.Generator, out: torch.Tensor | None = None) -> torch.Tensor:
    """``q ~ Exp(1)`` shaped like ``like`` (float32), drawn from ``gen`` (in place into ``out`` if given)."""
    if out is None:
        out = torch.empty(like.shape, dtype=torch.float32, device=like.device)
    return out.exponential_(generator=gen)


def allowed_from_bitmask(words: torch.Tensor, vocab_width: int, shifts: torch.Tensor | None = None) -> torch.Tensor:
    """Unpack an xgrammar int32 bitmask into a bool vector of length ``vocab_width`` (tensor ops only)."""
    if shifts is None:
        shifts = torch.arange(32, dtype=torch.int32, device=words.device)
    return (((words.reshape(-1, 1) >> shifts) & 1) != 0).reshape(-1)[:vocab_width]


def masked(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    return logits if allowed is None else logits.masked_fill(~allowed, float("-inf"))


def greedy(logits: torch.Tensor, allowed: torch.Tensor | None = None) -> torch.Tensor:
    return torch.argmax(masked(logits, allowed), dim=-1)


def nucleus(probs: torch.Tensor, top_p) -> torch.Tensor:
    """Zero every token outside the smallest set of most likely tokens whose mass reaches ``top_p``."""
    sorted_p, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass ranked above each token
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, before < top_p)
    return probs.masked_fill(~keep, 0.0)


def sample(
    logits: torch.Tensor, temperature, noise: torch.Tensor, top_p=None, allowed: torch.Tensor | None = None
) -> torch.Tensor:
    """``argmax(p / q)`` with ``p = softmax(masked logits / temperature)`` (cut to ``top_p`` unless None)."""
    probs = torch.softmax(masked(logits, allowed).float() / temperature, dim=-1)
    if top_p is not None:
        probs = nucleus(probs, top_p)
    return torch.argmax(probs / noise, dim=-1)


def choose(
    logits: torch.Tensor,
    temperature: float = 0.0,
    top_p: float = 1.0,
    allowed: torch.Tensor | None = None,
    gen: torch.Generator | None = None,
) -> torch.Tensor:
    """Pick the next token(s): greedy when ``temperature <= 0``, else a seeded draw from ``gen``."""
    if temperature <= 0:
        return greedy(logits, allowed)
    return sample(logits, float(temperature), draw_noise(logits, gen), top_p if top_p < 1.0 else None, allowed)
