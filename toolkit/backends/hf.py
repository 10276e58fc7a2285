"""A transformers causal LM behind the backend protocol, with a prefix cache of one conversation.

What it does (book §14.5.3, §14.5.8)
- :class:`HFBackend` keeps one ``DynamicCache`` across turns and prefills only the tokens after the longest shared
  prefix; when the new rendering does not extend the old one it crops the cache to the shared prefix.
  ``reuse=False`` prefills the whole prompt every turn (what a server without prefix caching does).

What it leaves out
- Batches, paged caches, anything but one sequence.
"""
from __future__ import annotations

import time

from toolkit.backends.base import Generation
from toolkit.prefix import shared_prefix


def _pick(logits, temperature: float, generator) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


class HFBackend:
    """A transformers causal LM behind the backend protocol, with a prefix cache of one conversation.

    ``reuse=False`` prefills the whole prompt every turn (what a server without prefix caching does); greedy
    decoding gives the same tokens either way (tested), only the work differs.
    """

    def __init__(self, model, name: str | None = None, reuse: bool = True):
        self.model = model
        self.reuse = reuse
        self.name = name or type(model).__name__
        self.device = next(model.parameters()).device
        self.vocab_width = int(model.get_output_embeddings().weight.shape[0])
        import inspect

        # transformers renamed forward's `past_key_values` to `cache` (5.2x); accept either version.
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.reset()

    @classmethod
    def from_loaded(cls, loaded, reuse: bool = True) -> "HFBackend":
        return cls(loaded.model, loaded.description, reuse)

    def reset(self) -> None:
        self._cache = None
        self._ids: list[int] = []  # the token ids whose keys/values are in self._cache

    def _sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _forward(self, ids: list[int]):
        import torch

        x = torch.tensor([ids], device=self.device)
        # logits_to_keep=1: only the last position's logits are needed (a 151,936-wide row per token is costly)
        out = self.model(input_ids=x, use_cache=True, logits_to_keep=1, **{self._cache_kw: self._cache})
        self._cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        self._ids.extend(ids)
        return out.logits[0, -1].float()

    def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, seed=0):
        import torch
        from transformers import DynamicCache

        prompt_ids = list(prompt_ids)
        keep = shared_prefix(self._ids, prompt_ids) if (self.reuse and self._cache is not None) else 0
        keep = min(keep, len(prompt_ids) - 1)  # at least one token must run to produce the next logits
        if keep <= 0:
            self._cache, self._ids = DynamicCache(config=self.model.config), []
        elif keep < len(self._ids):
            self._cache.crop(keep - len(self._ids))  # negative: number of positions to drop
            self._ids = self._ids[:keep]
        gen = torch.Generator(device="cpu").manual_seed(seed)
        bitmask = mask.allocate() if mask is not None else None
        new: list[int] = []
        stopped_by = "length"
        with torch.inference_mode():
            self._sync()
            t0 = time.perf_counter()
            logits = self._forward(prompt_ids[keep:])
            self._sync()
            t1 = time.perf_counter()
            while len(new) < max_new_tokens:
                if mask is not None:
                    mask.fill(bitmask)
                    import xgrammar as xgr

                    xgr.apply_token_bitmask_inplace(logits.unsqueeze(0), bitmask.to(logits.device))
                tok = _pick(logits.cpu() if temperature > 0 else logits, temperature, gen)
                new.append(tok)
                if mask is not None:
                    mask.accept(tok)
                if tok in stop_ids:
                    stopped_by = "stop"
                    break
                if mask is not None and mask.is_terminated():
                    stopped_by = "grammar"
                    break
                if len(new) < max_new_tokens:
                    logits = self._forward([tok])
            self._sync()
            t2 = time.perf_counter()
        return Generation(new, keep, len(prompt_ids) - keep, t1 - t0, t2 - t1, stopped_by)
