"""The engine's forward pass on its static buffers: chunked prefill and the two fixed-shape decode steps.

What it does
- ``_prefill`` runs a prompt in chunks (causal attention aligned to the chunk's end, sdpa) and writes the KV cache.
- ``_body`` (embed the last token, every layer, logits; position read from a device tensor and advanced) and
  ``_sample`` (the one sampler, ``toolkit.backends.sampling``, under the grammar bitmask) are the two decode steps
  ``toolkit.backends.engine.Engine`` captures as CUDA graphs; ``_attend`` is one query over the cache (flash,
  matmul or sdpa).

What it leaves out
- Buffers, graphs and the backend protocol: ``Engine`` owns those (this is its mixin, not usable alone).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from toolkit.backends import sampling
from toolkit.backends.engine_math import EngineError, rms_scale
from toolkit.backends.sampling import allowed_from_bitmask


def shared_prefix(cached: list[int], prompt: list[int], most: int) -> int:
    """Length of the common prefix of two id lists, at most ``most``: one C-level list compare when the whole
    cache is a prefix (the usual next turn), else a bisection over slice compares — never a Python loop per
    token (a 70k-token agent context is compared every round)."""
    n = max(0, min(len(cached), most))
    if cached[:n] == prompt[:n]:
        return n
    lo, hi = 0, n  # cached[:lo] == prompt[:lo]; cached[:hi] != prompt[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if cached[:mid] == prompt[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class EngineSteps:
    """Mixin of :class:`toolkit.backends.engine.Engine`: reads the attributes its ``__init__`` sets."""

    streams = True  # Engine.generate(..., on_token=f) calls f with each new id as it is decoded (base.Streams)

    # ---------------------------------------------------------------- prefill (eager, host-known positions)
    @torch.no_grad()
    def _prefill(self, ids: list[int], start: int) -> None:
        n_rep = self.heads // self.kv_heads
        for c0 in range(0, len(ids), self.prefill_chunk):
            chunk = ids[c0 : c0 + self.prefill_chunk]
            p, c = start + c0, len(chunk)
            h = F.embedding(torch.tensor(chunk, device=self.device), self.embed)
            cos, sin = self._cos[p : p + c].unsqueeze(1), self._sin[p : p + c].unsqueeze(1)
            add = None
            cu = None  # flash's cumulative lengths [[0, c], [0, p + c]]
            if self.attention == "flash":
                cu = torch.tensor([[0, c], [0, p + c]], dtype=torch.int32, device=self.device)
            for i, w in enumerate(self.layers):
                h, q, kv = self._layer_pre(self._pre, h, add, w, cos, sin)
                cache = self.kv[i]
                cache[:, :, p : p + c] = kv.transpose(1, 2)
                if self.attention == "flash":  # grouped heads and bottom-right causal alignment in the kernel:
                    h, add = self._layer_post(self._post, h, self._flash_prefill(q, cache, p, c, cu), w)
                    continue  # no K/V copy per layer (repeat_kv of a 70k-token cache is ~0.6 GB a layer)
                keys, vals = cache[0, :, : p + c].unsqueeze(0), cache[1, :, : p + c].unsqueeze(0)
                if n_rep > 1:  # same layout as transformers' repeat_kv
                    keys = keys[:, :, None].expand(-1, -1, n_rep, -1, -1).reshape(1, self.heads, p + c, -1)
                    vals = vals[:, :, None].expand(-1, -1, n_rep, -1, -1).reshape(1, self.heads, p + c, -1)
                qh = q.transpose(0, 1).unsqueeze(0)
                if c == 1:
                    o = F.scaled_dot_product_attention(qh, keys, vals, scale=self.scaling)
                elif p == 0:
                    o = F.scaled_dot_product_attention(qh, keys, vals, is_causal=True, scale=self.scaling)
                else:  # queries are the last c of p+c positions: causal mask aligned bottom-right
                    o = F.scaled_dot_product_attention(
                        qh, keys, vals, attn_mask=causal_lower_right(c, p + c), scale=self.scaling
                    )
                h, add = self._layer_post(self._post, h, o[0].transpose(0, 1).reshape(c, -1), w)
            if c0 + c >= len(ids):  # logits only for the prompt's last token
                self._logits.copy_(self._head(h[-1:] + add[-1:]).view(-1))

    def _flash_prefill(self, q, cache, p, c, cu):
        """c queries (positions p..p+c-1) over keys 0..p+c-1 with FlashAttention's variable-length call: causal is
        aligned bottom-right there, and the KV heads are read in place for their grouped query heads."""
        n = p + c
        o = torch.ops.aten._flash_attention_forward(
            q,
            cache[0, :, :n].transpose(0, 1),
            cache[1, :, :n].transpose(0, 1),
            cu[0],
            cu[1],
            c,
            n,
            0.0,
            True,
            False,
            scale=self.scaling,
        )[0]
        return o.reshape(c, -1)

    # ---------------------------------------------------------------- the two decode steps (fixed shapes)
    def _body(self, bucket: int) -> None:
        """Embed self._tok at position self._pos, run every layer, write self._logits, advance self._pos."""
        if self._custom is not None:  # another decode body (e.g. toolkit.backends.engine_triton's kernels)
            self._custom.body(bucket)
            return
        pos = self._pos
        h = F.embedding(self._tok, self.embed)
        cos, sin = self._cos.index_select(0, pos).unsqueeze(1), self._sin.index_select(0, pos).unsqueeze(1)
        if self.attention == "flash":  # keys past the position are excluded by length, no mask needed
            mask = (pos + 1).to(torch.int32)
        else:
            mask = torch.where(self._arange[:bucket] <= pos, self._zero, self._ninf).view(1, 1, 1, bucket)
        add = None
        with self._attn_backend():
            for i, w in enumerate(self.layers):
                h, add = self._body_layer(i, w, h, add, pos, cos, sin, mask, bucket)
        self._logits.copy_(self._head(h + add).view(-1))
        pos.add_(1)

    def _attn_backend(self):
        # sdpa with a mask: pin the memory-efficient kernel on CUDA (flash takes no mask; pinning keeps eager and
        # graph runs on the same kernel). The CPU picks its own.
        if self.device.type != "cuda" or self.attention != "sdpa":
            return contextlib.nullcontext()

        return sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])

    def _body_layer(self, i, w, h, add, pos, cos, sin, mask, bucket):
        h, q, kv = self._layer_pre(self._pre_dec, h, add, w, cos, sin, self.gemv)
        cache = self.kv[i]
        cache.index_copy_(2, pos, kv.transpose(1, 2))  # this token's key and value, one kernel
        return self._layer_post(self._post_dec, h, self._attend(q, cache, bucket, mask), w, self.gemv)

    def _attend(self, q, cache, bucket, mask):
        """One query token over the first ``bucket`` cache positions -> [1, heads * head_dim].

        ``sdpa``/``matmul``: ``mask`` is additive (0 / -inf); the query heads are grouped by their KV head
        ([1, kv_heads, n_rep, d]) so no K/V copy is made. ``flash``: FlashAttention's variable-length call with
        the used key length (``mask`` = position + 1) read from the device: no mask, keys past it are skipped."""
        n_rep, d = self.heads // self.kv_heads, self.head_dim
        keys, vals = cache[0, :, :bucket], cache[1, :, :bucket]  # [kv_heads, bucket, d]
        if self.attention == "flash":
            o = torch.ops.aten._flash_attention_forward(
                q.reshape(1, self.heads, d),
                keys.transpose(0, 1),
                vals.transpose(0, 1),
                self._cu_q,
                self._cu_k[bucket],
                1,
                bucket,
                0.0,
                False,
                False,
                scale=self.scaling,
                seqused_k=mask,
            )[0]
            return o.reshape(1, -1)
        qg = q.reshape(1, self.kv_heads, n_rep, d)
        if self.attention == "matmul":
            scores = torch.matmul(qg, keys.unsqueeze(0).transpose(-1, -2)) * self.scaling + mask
            o = torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), vals.unsqueeze(0))
        else:
            o = F.scaled_dot_product_attention(
                qg, keys.unsqueeze(0), vals.unsqueeze(0), attn_mask=mask, scale=self.scaling
            )
        return o.reshape(1, -1)

    def _layer_pre(self, fn, h, add, w, cos, sin, gemv=False):
        if self.fast:
            return fn(
                h, add, w.ln1, w.wq, w.bq, w.qkn, cos, sin, self.eps, self.heads, self.kv_heads, self.head_dim, gemv
            )
        return fn(
            h,
            add,
            w.ln1,
            w.wq,
            w.bq,
            w.wk,
            w.bk,
            w.wv,
            w.bv,
            w.qn,
            w.kn,
            cos,
            sin,
            self.eps,
            self.heads,
            self.kv_heads,
            self.head_dim,
        )

    def _layer_post(self, fn, h, o, w, gemv=False):
        if self.fast:
            return fn(h, o, w.wo, w.bo, w.ln2, w.wg, w.wd, self.eps, gemv)
        return fn(h, o, w.wo, w.bo, w.ln2, w.wg, w.wu, w.wd, self.eps)

    def _check_ids(self, ids) -> list[int]:
        try:
            out = list(map(int, ids))  # C-level: a 70k-token prompt checks in ~2 ms, not ~10
        except (TypeError, ValueError) as exc:
            raise EngineError(f"prompt ids must be integers: {exc}") from None
        if not out:
            raise EngineError("empty prompt: the engine needs at least one token")
        if min(out) < 0 or max(out) >= self.vocab_width:
            bad = [t for t in out if not 0 <= t < self.vocab_width]
            raise EngineError(f"token id {bad[0]} outside the model's vocabulary [0, {self.vocab_width})")
        if len(out) > self.max_len:
            raise EngineError(f"prompt of {len(out)} tokens does not fit the cache of {self.max_len} positions")
        return out

    def _mask_bits(self, mask) -> torch.Tensor:
        shape = tuple(mask.allocate().shape)
        buf = self._host_bits.get(shape[-1])
        if buf is None:
            buf = self._host_bits[shape[-1]] = torch.zeros(
                shape, dtype=torch.int32, pin_memory=self.device.type == "cuda"
            )
        return buf

    def _head(self, h):
        """Final norm + LM head (logits in the model's dtype)."""
        x = F.rms_norm(h, (h.shape[-1],), self.norm, self.eps) if self.fast else rms_scale(h, self.norm, self.eps)
        return F.linear(x, self.lm_head)

    def _sample(self, greedy: bool, masked: bool, nucleus: bool = False) -> None:
        """The one sampler (``toolkit.backends.sampling``) on the static buffers -> self._tok."""
        allowed = allowed_from_bitmask(self._bits, self.vocab_width, self._shifts) if masked else None
        if greedy:
            tok = sampling.greedy(self._logits, allowed)
        else:
            tok = sampling.sample(self._logits, self._temp, self._noise, self._top_p if nucleus else None, allowed)
        self._tok.copy_(tok.view(1))
