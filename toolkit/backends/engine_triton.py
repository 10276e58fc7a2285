"""Batch-1 decode in Triton for ``toolkit.backends.engine`` (``Engine(model, body=decoder())``): five kernels a
layer where the torch path launches about fourteen, each reading its weights once with enough blocks to fill the GPU.

What it does
- ``gemv``: y = W·x for one token (fp32 accumulation), rows split over many blocks (a one-row matmul is
  memory-bound: the blocks, not the arithmetic, decide its speed). Optional prologue: RMSNorm of x (each block
  recomputes the norm of the small x vector). Optional epilogues: bias; SwiGLU (a block reads a gate row and the
  matching up row and writes silu(g)·u); a residual add into the residual stream, in place.
- ``qk_rope_cache``: one block per head: Qwen3's per-head q/k RMSNorm, RoPE at the position held on the device,
  q written out, k and v written into the cache at that position (replaces norm, roll, multiply-add, stack and
  index_copy).
- ``attend``: one query token over the cache, split over key blocks per KV head (the grouped query heads of a KV
  head share its loads), then a combine kernel: split-KV decoding, as FlashAttention's decode path does.
- ``Decoder`` (``Engine(model, body=decoder())``): buffers and the per-layer sequence (embed; per layer q/k/v,
  attention (one kernel, ``engine_attend``, or three), o, gate/up, down; LM head; position += 1), in CUDA graphs.
- ``pdl=True`` (Hopper): each kernel loads its first weight tile, then waits for the kernel before it
  (``gdc_wait``) and lets the next one launch (programmatic dependent launch), so launches overlap.
- Rounding at the torch fast path's points (matmul inputs and outputs in the model's dtype): in fp32 the greedy
  tokens equal ``model.generate``'s; in bf16 another summation order drifts, as any kernel change does.

What it leaves out
- Prefill (the engine's torch path does it), batches, sampling (the one sampler runs after), quantised weights,
  head_dim that is not a power of two.
- The CPU: it runs there only under Triton's interpreter (``TRITON_INTERPRET=1`` before import; fp32 only — the
  interpreter mishandles bf16), which the tests use to check every kernel against torch.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from toolkit.backends import engine_tune
from toolkit.backends.engine_attend import attend_fused, split_attend, write_partial

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


# ---------------------------------------------------------------- kernels
@triton.jit
def _gemv_kernel(
    x_ptr,
    lnw_ptr,
    w_ptr,
    b_ptr,
    res_ptr,
    y_ptr,
    N,
    K,
    half,
    eps,
    NORM: tl.constexpr,
    BIAS: tl.constexpr,
    SWIGLU: tl.constexpr,
    RES: tl.constexpr,
    PDL: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    dt = w_ptr.dtype.element_ty
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < N
    cols = tl.arange(0, BLOCK_K)
    offs = rows[:, None] * K + cols[None, :]
    m0 = rmask[:, None] & (cols[None, :] < K)
    # The first weight tile does not depend on the kernel before: load it before waiting for that kernel.
    w0 = tl.load(w_ptr + offs, mask=m0, other=0.0)
    u0 = w0
    if SWIGLU:
        u0 = tl.load(w_ptr + half * K + offs, mask=m0, other=0.0)
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    inv = 1.0
    if NORM:
        ss = tl.zeros([BLOCK_K], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            xk = tl.load(x_ptr + k0 + cols, mask=k0 + cols < K, other=0.0).to(tl.float32)
            ss += xk * xk
        inv = tl.rsqrt(tl.sum(ss, axis=0) / K + eps)
    x = tl.load(x_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
    if NORM:  # F.rms_norm: normalise in fp32, scale by the weight, round to the model's dtype
        x = (x * inv * tl.load(lnw_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)).to(dt).to(tl.float32)
    acc = tl.sum(w0.to(tl.float32) * x[None, :], axis=1)
    acc_u = acc
    if SWIGLU:
        acc_u = tl.sum(u0.to(tl.float32) * x[None, :], axis=1)
    for k0 in range(BLOCK_K, K, BLOCK_K):
        ks = k0 + cols
        km = ks < K
        x = tl.load(x_ptr + ks, mask=km, other=0.0).to(tl.float32)
        if NORM:
            x = (x * inv * tl.load(lnw_ptr + ks, mask=km, other=0.0).to(tl.float32)).to(dt).to(tl.float32)
        mk = rmask[:, None] & km[None, :]
        acc += tl.sum(tl.load(w_ptr + offs + k0, mask=mk, other=0.0).to(tl.float32) * x[None, :], axis=1)
        if SWIGLU:
            u = tl.load(w_ptr + half * K + offs + k0, mask=mk, other=0.0)
            acc_u += tl.sum(u.to(tl.float32) * x[None, :], axis=1)
    if BIAS:
        acc += tl.load(b_ptr + rows, mask=rmask, other=0.0).to(tl.float32)
    out = acc.to(dt).to(tl.float32)
    if SWIGLU:  # silu(g) * u, each rounded to the model's dtype as torch does
        g = (out / (1.0 + tl.exp(-out))).to(dt).to(tl.float32)
        out = g * acc_u.to(dt).to(tl.float32)
    if RES:
        out = tl.load(res_ptr + rows, mask=rmask, other=0.0).to(tl.float32) + out
    tl.store(y_ptr + rows, out.to(dt).to(y_ptr.dtype.element_ty), mask=rmask)


@triton.jit
def _qk_rope_cache_kernel(
    qkv_ptr,
    qkn_ptr,
    cos_ptr,
    sin_ptr,
    pos_ptr,
    q_ptr,
    cache_ptr,
    L,
    eps,
    HEADS: tl.constexpr,
    KV: tl.constexpr,
    D: tl.constexpr,
    QKNORM: tl.constexpr,
    PDL: tl.constexpr,
):
    h = tl.program_id(0)  # 0..HEADS-1: q heads; then KV k heads; then KV v heads
    dt = qkv_ptr.dtype.element_ty
    d = tl.arange(0, D)
    dr = (d + D // 2) % D  # roll by half: rotate_half(x) * sin == roll(x, half) * sin with its first half negated
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    pos = tl.load(pos_ptr)
    x = tl.load(qkv_ptr + h * D + d).to(tl.float32)
    if h < HEADS + KV:
        xr = tl.load(qkv_ptr + h * D + dr).to(tl.float32)
        if QKNORM:  # F.rms_norm(qk) (no weight, rounded) * the head's norm weight (rounded)
            inv = tl.rsqrt(tl.sum(x * x, axis=0) / D + eps)
            x = (x * inv).to(dt).to(tl.float32) * tl.load(qkn_ptr + h * D + d).to(tl.float32)
            xr = (xr * inv).to(dt).to(tl.float32) * tl.load(qkn_ptr + h * D + dr).to(tl.float32)
            x = x.to(dt).to(tl.float32)
            xr = xr.to(dt).to(tl.float32)
        c = tl.load(cos_ptr + pos * D + d).to(tl.float32)
        s = tl.load(sin_ptr + pos * D + d).to(tl.float32)
        y = ((x * c).to(dt).to(tl.float32) + xr * s).to(dt)
        if h < HEADS:
            tl.store(q_ptr + h * D + d, y)
        else:
            tl.store(cache_ptr + (h - HEADS) * L * D + pos * D + d, y)
    else:
        tl.store(cache_ptr + (h - HEADS) * L * D + pos * D + d, x.to(dt))  # v: cache[1, h-HEADS-KV, pos]


@triton.jit
def _attend_kernel(
    q_ptr,
    cache_ptr,
    pos_ptr,
    part_ptr,
    L,
    scale,
    KV: tl.constexpr,
    REP: tl.constexpr,
    REP_P: tl.constexpr,
    D: tl.constexpr,
    SPLIT: tl.constexpr,
    NSPLIT: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr,
):
    kvh = tl.program_id(0)
    sp = tl.program_id(1)
    r = tl.arange(0, REP_P)
    d = tl.arange(0, D)
    rmask = r < REP
    heads = kvh * REP + r
    # partials: [heads, NSPLIT, D + 2] fp32 = unnormalised output, running max, running sum
    base = part_ptr + (heads[:, None] * NSPLIT + sp) * (D + 2)
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    n = tl.load(pos_ptr) + 1  # keys 0..pos
    start = sp * SPLIT
    if start >= n:  # nothing to read: an empty partial (weight 0 in the combine)
        empty = tl.zeros([REP_P], dtype=tl.float32)
        write_partial(base, tl.zeros([REP_P, D], dtype=tl.float32), empty - float("inf"), empty, rmask, D, REP_P)
    else:
        q = tl.load(q_ptr + heads[:, None] * D + d[None, :], mask=rmask[:, None], other=0.0).to(tl.float32)
        kbase = cache_ptr + kvh * L * D
        vbase = cache_ptr + (KV + kvh) * L * D
        acc, m, lsum = split_attend(q, kbase, vbase, start, n, scale, D, SPLIT, BLOCK, REP_P, False)
        write_partial(base, acc, m, lsum, rmask, D, REP_P)


@triton.jit
def _combine_kernel(part_ptr, o_ptr, D: tl.constexpr, NSPLIT: tl.constexpr, NSPLIT_P: tl.constexpr, PDL: tl.constexpr):
    h = tl.program_id(0)
    s = tl.arange(0, NSPLIT_P)
    d = tl.arange(0, D)
    smask = s < NSPLIT
    base = part_ptr + (h * NSPLIT + s) * (D + 2)
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    ms = tl.load(base + D, mask=smask, other=float("-inf"))
    ls = tl.load(base + D + 1, mask=smask, other=0.0)
    top = tl.max(ms, axis=0)  # split 0 always holds key 0: finite
    wts = tl.where(smask, tl.exp(ms - top), 0.0)
    acc = tl.load(base[:, None] + d[None, :], mask=smask[:, None], other=0.0)
    o = tl.sum(wts[:, None] * acc, axis=0) / tl.sum(wts * ls, axis=0)
    tl.store(o_ptr + h * D + d, o.to(o_ptr.dtype.element_ty))


# ---------------------------------------------------------------- launch helpers
def pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def launch_options(pdl: bool, num_warps: int) -> dict:
    """A kernel launch's options: the kernels' ``PDL`` switch and, compiled, ``num_warps`` and programmatic
    dependent launch. The interpreter takes neither launch option, and runs without PDL."""
    if INTERPRET:
        return {"PDL": False}
    return {"PDL": bool(pdl), "num_warps": num_warps, "launch_pdl": pdl}


def gemv_blocks(N: int, K: int, sms: int) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_K, num_warps) for an N×K one-row matmul: rows per block chosen so the grid has at least
    about two blocks per multiprocessor (a weight this small is read at full speed only by many blocks at once),
    and a K tile of up to 512 elements (1 KB of bf16 per row: coalesced loads)."""
    block_k = min(512, pow2(K))
    if INTERPRET:  # the interpreter runs blocks one after another: few, large ones
        return min(pow2(N), max(1, 65536 // block_k)), block_k, 4
    block_n = 64
    while block_n > 1 and triton.cdiv(N, block_n) < 2 * sms:
        block_n //= 2
    # 2k..8k elements a tile: enough loads in flight per block, few enough registers per thread
    block_n = min(max(block_n, 2048 // block_k), max(1, 8192 // block_k))
    return block_n, block_k, 4 if block_n * block_k <= 4096 else 8


def gemv(x, w, out, *, ln=None, bias=None, res=None, swiglu=False, eps=1e-6, pdl=False, sms=132, blocks=None):
    """out = [res +] act(W · norm(x) [+ bias]). ``w`` is [N, K] (or [2N, K] gate-then-up for ``swiglu``)."""
    K = w.shape[1]
    N = w.shape[0] // 2 if swiglu else w.shape[0]
    bn, bk, warps = blocks or gemv_blocks(N, K, sms)
    _gemv_kernel[(triton.cdiv(N, bn),)](
        x,
        x if ln is None else ln,
        w,
        x if bias is None else bias,
        out if res is None else res,
        out,
        N,
        K,
        N,
        float(eps),
        NORM=ln is not None,
        BIAS=bias is not None,
        SWIGLU=swiglu,
        RES=res is not None,
        BLOCK_N=bn,
        BLOCK_K=bk,
        **launch_options(pdl, warps),
    )
    return out


def qk_rope_cache(qkv, qkn, cos, sin, pos, q_out, cache, *, heads, kv_heads, head_dim, eps, pdl=False):
    """qkv: [(heads + 2·kv_heads)·head_dim] of one token; cache: one layer's [2, kv_heads, L, head_dim]."""
    _qk_rope_cache_kernel[(heads + 2 * kv_heads,)](
        qkv,
        qkv if qkn is None else qkn,
        cos,
        sin,
        pos,
        q_out,
        cache,
        cache.shape[2],
        float(eps),
        HEADS=heads,
        KV=kv_heads,
        D=head_dim,
        QKNORM=qkn is not None,
        **launch_options(pdl, 1 if head_dim <= 64 else 2),
    )


def attend_plan(bucket: int, kv_heads: int, rep: int, head_dim: int, sms: int = 132) -> tuple[int, int, int]:
    """(SPLIT keys per block, NSPLIT, BLOCK keys per step) for a cache bucket: enough splits that kv_heads ×
    NSPLIT blocks cover the GPU, a step small enough that REP_P × BLOCK × head_dim fp32 products stay in
    registers."""
    block = max(16, min(64, 16384 // (pow2(rep) * head_dim)))
    split = max(block, pow2(triton.cdiv(bucket * kv_heads, sms)))
    split = -(-split // block) * block
    return split, triton.cdiv(bucket, split), block


def attend(q, cache, pos, part, out, *, bucket, kv_heads, rep, head_dim, scale, pdl=False, sms=132):
    """Split-KV decode attention of one token: q [heads·head_dim] over the first ``bucket`` cache positions (keys
    past ``pos`` skipped) -> out [heads·head_dim]. ``part`` is scratch of at least heads × NSPLIT × (head_dim+2)
    fp32."""
    split, nsplit, block = attend_plan(bucket, kv_heads, rep, head_dim, sms)
    options = launch_options(pdl, 4)
    _attend_kernel[(kv_heads, nsplit)](
        q,
        cache,
        pos,
        part,
        cache.shape[2],
        float(scale),
        KV=kv_heads,
        REP=rep,
        REP_P=pow2(rep),
        D=head_dim,
        SPLIT=split,
        NSPLIT=nsplit,
        BLOCK=block,
        **options,
    )
    _combine_kernel[(kv_heads * rep,)](part, out, D=head_dim, NSPLIT=nsplit, NSPLIT_P=pow2(nsplit), **options)


# ---------------------------------------------------------------- the decode body
def decoder(pdl: bool = False, tune: bool = True, fused: bool = True, sms: int | None = None):
    """The factory ``Engine(model, body=decoder())`` takes: the Triton decode body, with programmatic dependent
    launch if ``pdl``, its matmul block shapes timed on the GPU if ``tune`` (``engine_tune``), attention as one
    kernel if ``fused`` (``engine_attend``) else three (RoPE + cache write, split attention, combine)."""
    return lambda engine: Decoder(engine, pdl, tune, fused, sms)


class Decoder:
    """The Triton decode body over an :class:`toolkit.backends.engine.Engine`'s weights, cache and buffers."""

    def __init__(self, engine, pdl: bool = False, tune: bool = True, fused: bool = True, sms: int | None = None):
        e = self.engine = engine
        if e.device.type != "cuda" and not INTERPRET:
            raise ValueError("the Triton decode body needs a CUDA device (or TRITON_INTERPRET=1 on the CPU, for tests)")
        if e.device.type != "cuda" and e.graphs:
            raise ValueError("Triton's interpreter cannot be captured in a CUDA graph: graphs=False")
        if not e.fast:
            raise ValueError("the Triton kernels use the fast path's tables (fast=True)")
        if e.head_dim & (e.head_dim - 1):
            raise ValueError(f"the Triton kernels need a power-of-two head_dim, not {e.head_dim}")
        self.pdl, self.fused = bool(pdl), bool(fused)
        self._shape = dict(kv_heads=e.kv_heads, rep=e.heads // e.kv_heads, head_dim=e.head_dim)
        dev, dt = e.device, e.dtype
        hidden = e.embed.shape[1]
        inter = e.layers[0].wg.shape[0] // 2
        self.rep = e.heads // e.kv_heads
        self.sms = sms or (torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 8)
        self.h = torch.zeros(1, hidden, device=dev, dtype=dt)  # the residual stream
        self.qkv = torch.zeros((e.heads + 2 * e.kv_heads) * e.head_dim, device=dev, dtype=dt)
        self.q = torch.zeros(e.heads * e.head_dim, device=dev, dtype=dt)
        self.att = torch.zeros(e.heads * e.head_dim, device=dev, dtype=dt)
        self.act = torch.zeros(inter, device=dev, dtype=dt)
        most = max(attend_plan(b, e.kv_heads, self.rep, e.head_dim, self.sms)[1] for b in e.buckets)
        self.part = torch.zeros(e.heads * most * (e.head_dim + 2), device=dev, dtype=torch.float32)
        self.count = torch.zeros(e.kv_heads, device=dev, dtype=torch.int32)  # fused attention's split counters
        self.blocks: dict = {}  # role -> (BLOCK_N, BLOCK_K, warps); empty: gemv_blocks' rule
        self.tuned_us: dict = {}
        if tune and dev.type == "cuda":
            self.blocks, self.tuned_us = engine_tune.tune(self, gemv)
        tuned = ", matmul blocks timed here" if self.blocks else ""
        self.label = f"Triton kernels{' + PDL' if pdl else ''} ({self.kernels_per_token()} a token{tuned})"

    def kernels_per_token(self) -> int:
        return (
            1 + (5 if self.fused else 7) * len(self.engine.layers) + 1 + 1
        )  # embed, layers, head, position  # embed, layers, head, position

    def body(self, bucket: int) -> None:
        """Embed ``engine._tok`` at ``engine._pos``, every layer, logits into ``engine._logits``, position += 1."""
        e, pdl, sms, b = self.engine, self.pdl, self.sms, self.blocks
        torch.index_select(e.embed, 0, e._tok, out=self.h)
        h = self.h.view(-1)
        for i, w in enumerate(e.layers):
            gemv(h, w.wq, self.qkv, ln=w.ln1, bias=w.bq, eps=e.eps, pdl=pdl, sms=sms, blocks=b.get("qkv"))
            if self.fused:
                plan = attend_plan(bucket, e.kv_heads, self.rep, e.head_dim, sms)
                attend_fused(
                    self.qkv, w.qkn, e._cos, e._sin, e._pos, e.kv[i], self.part, self.count, self.att,
                    heads=e.heads, kv_heads=e.kv_heads, head_dim=e.head_dim, eps=e.eps, scale=e.scaling, plan=plan,
                    options=launch_options(pdl, 4),
                )  # fmt: skip
            else:
                qk_rope_cache(
                    self.qkv, w.qkn, e._cos, e._sin, e._pos, self.q, e.kv[i], heads=e.heads, kv_heads=e.kv_heads,
                    head_dim=e.head_dim, eps=e.eps, pdl=pdl,
                )  # fmt: skip
                kw = dict(bucket=bucket, scale=e.scaling, pdl=pdl, sms=sms)
                attend(self.q, e.kv[i], e._pos, self.part, self.att, **self._shape, **kw)
            gemv(self.att, w.wo, h, bias=w.bo, res=h, pdl=pdl, sms=sms, blocks=b.get("o"))
            gemv(h, w.wg, self.act, ln=w.ln2, swiglu=True, eps=e.eps, pdl=pdl, sms=sms, blocks=b.get("gate_up"))
            gemv(self.act, w.wd, h, res=h, pdl=pdl, sms=sms, blocks=b.get("down"))
        gemv(h, e.lm_head, e._logits, ln=e.norm, eps=e.eps, pdl=pdl, sms=sms, blocks=b.get("head"))
        e._pos.add_(1)
