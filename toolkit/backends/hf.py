"""A transformers causal LM behind the backend protocol, with a prefix cache of one conversation.

What it does (book §14.5.3, §14.5.8)
- :class:`HFBackend` keeps one ``DynamicCache`` across turns and prefills only the tokens after the longest shared
  prefix; when the new rendering does not extend the old one it crops the cache to the shared prefix.
  ``reuse=False`` prefills the whole prompt every turn (what a server without prefix caching does).
- ``generate_batch(prompts, ...)`` decodes several prompts at once through the same decode loop and sampler
  (``toolkit.backends.decode.decode_rows``): the prompts' common leading tokens are prefilled once and their cache
  copied to every row; padding sits between that shared part and each row's own tokens (positions come from the
  attention mask), one grammar mask per row. Greedy, it gives the tokens ``generate`` gives each prompt alone
  (tested on the stand-in; in bf16 a near-tie can flip a token, as padded batches compute in another order).
  ``HFBackend(..., keep_prefix=True)`` keeps that shared part's keys/values for the next batch, which prefills only
  what it adds (a rollout's next round extends the same prompt); ``forget_batch_prefix()`` when the weights change.

What it leaves out
- Paged caches; dropping finished rows from a batch; the conversation cache is not used by batches.
"""

from __future__ import annotations

import inspect
import time

import torch
from transformers import DynamicCache

from toolkit.backends.base import Generation
from toolkit.backends.decode import decode, decode_rows
from toolkit.backends.sampling import allowed_from_bitmask, choose, generator
from toolkit.models import vocab_width
from toolkit.prefix import shared_prefix
from toolkit.qwen import ENDOFTEXT_ID


class HFBackend:
    """A transformers causal LM behind the backend protocol, with a prefix cache of one conversation.

    ``reuse=False`` prefills the whole prompt every turn (what a server without prefix caching does); greedy
    decoding gives the same tokens either way (tested), only the work differs.
    """

    def __init__(self, model, name: str | None = None, reuse: bool = True, keep_prefix: bool = False):
        self.model = model
        self.reuse, self.keep_prefix, self.prefix_reused = reuse, keep_prefix, 0
        self.name = name or type(model).__name__
        self.device = next(model.parameters()).device
        self.vocab_width = vocab_width(model)
        # transformers renamed forward's `past_key_values` to `cache` (5.2x); accept either version.
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.reset()

    @classmethod
    def from_loaded(cls, loaded, reuse: bool = True) -> HFBackend:
        return cls(loaded.model, loaded.description, reuse)

    def reset(self) -> None:
        self._cache = None
        self._ids: list[int] = []  # the token ids whose keys/values are in self._cache
        self.forget_batch_prefix()

    def forget_batch_prefix(self) -> None:
        """Drop the batches' kept prefix (``keep_prefix``): call it whenever the weights change."""
        self._kept: tuple[list[int], list] | None = None  # (ids, per-layer (keys, values)) of the last shared prefix

    def _prefill_shared(self, ids: list[int], cache) -> None:
        """Fill ``cache`` (batch 1) with ``ids``; with ``keep_prefix`` on, start from the longest part of the last
        batch's shared prefix that ``ids`` begin with, and keep this one for the next batch."""
        keep = shared_prefix(self._kept[0], ids) if self._kept is not None else 0
        keep = min(keep, len(ids) - 1) if keep >= _SHARE_MIN else 0
        for li, (k, v) in enumerate(self._kept[1] if keep else ()):
            cache.update(k[:, :, :keep].clone(), v[:, :, :keep].clone(), li)
        self.model(
            input_ids=torch.tensor([ids[keep:]], device=self.device),
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kw: cache},
        )
        self.prefix_reused += keep
        if self.keep_prefix:
            self._kept = (list(ids), [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers])

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _forward(self, ids: list[int]):
        x = torch.tensor([ids], device=self.device)
        # logits_to_keep=1: only the last position's logits are needed (a 151,936-wide row per token is costly)
        out = self.model(input_ids=x, use_cache=True, logits_to_keep=1, **{self._cache_kw: self._cache})
        self._cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        self._ids.extend(ids)
        return out.logits[0, -1].float()

    streams = True  # generate(..., on_token=f) calls f with each new id as it is decoded (base.Streams)

    def generate(
        self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, top_p=1.0, seed=0, on_token=None
    ):
        prompt_ids = list(prompt_ids)
        keep = shared_prefix(self._ids, prompt_ids) if (self.reuse and self._cache is not None) else 0
        keep = min(keep, len(prompt_ids) - 1)  # at least one token must run to produce the next logits
        if keep <= 0:
            self._cache, self._ids = DynamicCache(config=self.model.config), []
        elif keep < len(self._ids):
            self._cache.crop(keep - len(self._ids))  # negative: number of positions to drop
            self._ids = self._ids[:keep]
        with torch.inference_mode():
            self._sync()
            t0 = time.perf_counter()
            stepper = _Stepper(self, self._forward(prompt_ids[keep:]), temperature, top_p, generator(seed))
            self._sync()
            t1 = time.perf_counter()
            new, stopped_by = decode(
                stepper, max_new_tokens=max_new_tokens, stop_ids=stop_ids, mask=mask, on_token=on_token
            )
            self._sync()
            t2 = time.perf_counter()
        return Generation(new, keep, len(prompt_ids) - keep, t1 - t0, t2 - t1, stopped_by)

    def next_token_logits(self, prompt_ids) -> torch.Tensor:
        """The model's logits for the token after ``prompt_ids``: one forward of the whole prompt, no cache, no
        mask (``toolkit.backends.base.Scores``; BFCL's first-token probes)."""
        with torch.inference_mode():
            x = torch.tensor([list(prompt_ids)], device=self.device)
            return self.model(input_ids=x, logits_to_keep=1).logits[0, -1].float().cpu()

    def generate_batch(
        self,
        prompts,
        *,
        max_new_tokens,
        stop_ids,
        masks=None,
        temperature=0.0,
        top_p=1.0,
        seed=0,
        pad_id: int = ENDOFTEXT_ID,
        share_prefix: bool = True,
        processors=(),
    ) -> list[Generation]:
        """One :class:`Generation` per prompt (see the module docstring). ``processors``: callables
        ``(ids_so_far, scores) -> scores`` applied to each step's ``[rows, V]`` logits before the mask, as
        transformers' logits processors are (the BFCL first-token gate, a recorder in tests)."""
        prompts = [list(p) for p in prompts]
        common = min(shared_prefix(prompts[0], p) for p in prompts) if share_prefix else 0
        common = min(common, min(map(len, prompts)) - 1)
        with torch.inference_mode():
            self._sync()
            t0 = time.perf_counter()
            stepper = _Rows(self, prompts, common, pad_id, temperature, top_p, generator(seed), processors)
            self._sync()
            t1 = time.perf_counter()
            outs = decode_rows(
                stepper, rows=len(prompts), max_new_tokens=max_new_tokens, stop_ids=stop_ids, masks=masks
            )
            self._sync()
            t2 = time.perf_counter()
        shared = common if common >= _SHARE_MIN else 0
        return [Generation(ids, shared, len(p) - shared, t1 - t0, t2 - t1, why) for p, (ids, why) in zip(prompts, outs)]


_SHARE_MIN = 16  # a shorter common prefix is not worth a separate prefill


class _Rows:
    """Several prompts under the one decode loop: prefill (the shared part once, then each row's own tokens behind
    padding), then one forward of the last tokens per step. The call shapes are transformers' ``generate``'s
    (attention mask over everything so far, positions from it), so the logits are the ones it computes."""

    depth = 1

    def __init__(self, backend: HFBackend, prompts, common, pad, temperature, top_p, gen, processors):
        self.backend, self.temperature, self.top_p, self.gen = backend, temperature, top_p, gen
        self.processors = list(processors)
        model, dev = backend.model, backend.device
        n = max(map(len, prompts))
        self.cache = DynamicCache(config=model.config)
        start = 0
        if common >= _SHARE_MIN:  # prefill the shared part once, copy its cache to every row
            backend._prefill_shared(prompts[0][:common], self.cache)
            self.cache.batch_repeat_interleave(len(prompts))
            start = common
        # padding goes right after the shared part (plain left padding when there is none)
        self.ids = torch.tensor([p[:common] + [pad] * (n - len(p)) + p[common:] for p in prompts], device=dev)
        self.att = torch.tensor(
            [[1] * common + [0] * (n - len(p)) + [1] * (len(p) - common) for p in prompts], device=dev
        )
        self.logits = self._forward(self.ids[:, start:])
        self.tokens: list[list[int]] = []

    def _forward(self, x):
        pos = (self.att.cumsum(-1) - 1).masked_fill(self.att == 0, 1)[:, -x.shape[1] :]
        out = self.backend.model(
            input_ids=x,
            attention_mask=self.att,
            position_ids=pos,
            use_cache=True,
            logits_to_keep=1,
            **{self.backend._cache_kw: self.cache},
        )
        return out.logits[:, -1].float()

    def launch(self, i: int, bitmasks) -> None:
        if i > 0:
            last = torch.tensor(self.tokens[i - 1], device=self.ids.device)[:, None]
            self.ids = torch.cat([self.ids, last], 1)
            self.att = torch.cat([self.att, torch.ones_like(last)], 1)
            self.logits = self._forward(last)
        scores = self.logits
        for proc in self.processors:
            scores = proc(self.ids, scores)
        allowed = None
        if bitmasks is not None:
            rows = [
                torch.ones(scores.shape[-1], dtype=torch.bool, device=scores.device)
                if b is None
                else allowed_from_bitmask(b.to(scores.device), scores.shape[-1])
                for b in bitmasks
            ]
            allowed = torch.stack(rows)
        # sampling reads a CPU generator: the same seed draws the same tokens on every device
        if self.temperature > 0:
            scores, allowed = scores.cpu(), (allowed.cpu() if allowed is not None else None)
        self.tokens.append([int(t) for t in choose(scores, self.temperature, self.top_p, allowed, self.gen)])

    def token(self, i: int) -> list[int]:
        return self.tokens[i]


class _Stepper:
    """The HF backend under the one decode loop: token i is picked from the logits after token i-1, whose forward
    runs only when token i is asked for (so nothing is computed past the last token, as before)."""

    depth = 1

    def __init__(self, backend: HFBackend, logits, temperature: float, top_p: float, gen):
        self.backend, self.logits, self.temperature, self.top_p, self.gen = backend, logits, temperature, top_p, gen
        self.tokens: list[int] = []

    def launch(self, i: int, bitmask) -> None:
        if i > 0:
            self.logits = self.backend._forward([self.tokens[i - 1]])
        allowed = None
        if bitmask is not None:
            allowed = allowed_from_bitmask(bitmask.to(self.logits.device), self.logits.shape[-1])
        # sampling reads a CPU generator: the same seed draws the same tokens on every device
        logits = self.logits.cpu() if self.temperature > 0 else self.logits
        allowed = allowed.cpu() if (allowed is not None and self.temperature > 0) else allowed
        self.tokens.append(int(choose(logits, self.temperature, self.top_p, allowed, self.gen)))

    def token(self, i: int) -> int:
        return self.tokens[i]
