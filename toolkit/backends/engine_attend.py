"""One kernel for a decode step's attention in ``toolkit.backends.engine_triton``: RoPE + cache write, split-KV
attention and the combine of the splits, where the unfused path launches three.

What it does
- ``attend_fused``: blocks over (KV head, key split). Each active block computes its grouped query heads' q from
  the q/k/v matmul's output (Qwen3's per-head RMSNorm, RoPE at the device-held position); the block whose split
  holds the position also writes that token's k (normed, rotated) and v into the cache first (a block barrier
  makes them visible to its own loads). Each block writes its split's partial (unnormalised output, max, sum);
  the last block of a KV head to finish — a per-head counter, incremented atomically after a barrier — combines
  the partials into the output and resets the counter for the next layer.
- The same rounding points as the unfused kernels (``engine_triton``): equal outputs to them in fp32 up to the
  order of the combine's sums.

What it leaves out
- A head_dim that is not a power of two; sliding windows; more than one query token.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def _rope_rows(qkv_ptr, qkn_ptr, cos_ptr, sin_ptr, pos, rows, rmask, eps, D: tl.constexpr, QKNORM: tl.constexpr):
    """Rows ``rows`` of q/k ([R, D]): RMSNorm with the head's weight (Qwen3), then RoPE at ``pos``, rounded as torch."""
    dt = qkv_ptr.dtype.element_ty
    d = tl.arange(0, D)
    dr = (d + D // 2) % D
    x = tl.load(qkv_ptr + rows[:, None] * D + d[None, :], mask=rmask[:, None], other=0.0).to(tl.float32)
    xr = tl.load(qkv_ptr + rows[:, None] * D + dr[None, :], mask=rmask[:, None], other=0.0).to(tl.float32)
    if QKNORM:
        inv = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)[:, None]
        w = tl.load(qkn_ptr + rows[:, None] * D + d[None, :], mask=rmask[:, None], other=0.0).to(tl.float32)
        wr = tl.load(qkn_ptr + rows[:, None] * D + dr[None, :], mask=rmask[:, None], other=0.0).to(tl.float32)
        x = ((x * inv).to(dt).to(tl.float32) * w).to(dt).to(tl.float32)
        xr = ((xr * inv).to(dt).to(tl.float32) * wr).to(dt).to(tl.float32)
    c = tl.load(cos_ptr + pos * D + d).to(tl.float32)
    s = tl.load(sin_ptr + pos * D + d).to(tl.float32)
    return ((x * c[None, :]).to(dt).to(tl.float32) + xr * s[None, :]).to(dt)


@triton.jit
def _kv_load(ptr, mask, CG: tl.constexpr):
    if CG:  # from L2: another block (or this one, before a barrier) may have just written it
        return tl.load(ptr, mask=mask, other=0.0, cache_modifier=".cg").to(tl.float32)
    return tl.load(ptr, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def write_partial(base, acc, m, lsum, rmask, D: tl.constexpr, REP_P: tl.constexpr):
    """Store one split's partial per head ([REP_P, 1] pointers ``base``): output, running max, running sum."""
    one = tl.zeros([REP_P, 1], dtype=tl.int32)
    tl.store(base + tl.arange(0, D)[None, :], acc, mask=rmask[:, None])
    tl.store(base + D + one, m[:, None], mask=rmask[:, None])
    tl.store(base + D + 1 + one, lsum[:, None], mask=rmask[:, None])


@triton.jit
def split_attend(
    q,
    kbase,
    vbase,
    start,
    n,
    scale,
    D: tl.constexpr,
    SPLIT: tl.constexpr,
    BLOCK: tl.constexpr,
    REP_P: tl.constexpr,
    CG: tl.constexpr,
):
    """Online softmax of the grouped queries ``q`` [REP_P, D] over keys start..start+SPLIT-1 (those < n) ->
    (unnormalised output, max, sum). The split's first key must be valid, so the max is finite after block one."""
    d = tl.arange(0, D)
    m = tl.full([REP_P], float("-inf"), dtype=tl.float32)
    lsum = tl.zeros([REP_P], dtype=tl.float32)
    acc = tl.zeros([REP_P, D], dtype=tl.float32)
    for k0 in range(0, SPLIT, BLOCK):
        ks = start + k0 + tl.arange(0, BLOCK)
        km = ks < n
        kt = _kv_load(kbase + ks[:, None] * D + d[None, :], km[:, None], CG)
        sc = tl.where(km[None, :], tl.sum(q[:, None, :] * kt[None, :, :], axis=2) * scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, axis=1))
        p = tl.exp(sc - m_new[:, None])
        alpha = tl.exp(m - m_new)
        vt = _kv_load(vbase + ks[:, None] * D + d[None, :], km[:, None], CG)
        lsum = lsum * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * vt[None, :, :], axis=1)
        m = m_new
    return acc, m, lsum


@triton.jit
def _attend_fused_kernel(
    qkv_ptr,
    qkn_ptr,
    cos_ptr,
    sin_ptr,
    pos_ptr,
    cache_ptr,
    part_ptr,
    count_ptr,
    out_ptr,
    L,
    eps,
    scale,
    HEADS: tl.constexpr,
    KV: tl.constexpr,
    REP: tl.constexpr,
    REP_P: tl.constexpr,
    D: tl.constexpr,
    QKNORM: tl.constexpr,
    SPLIT: tl.constexpr,
    NSPLIT: tl.constexpr,
    NSPLIT_P: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr,
):
    kvh = tl.program_id(0)
    sp = tl.program_id(1)
    r = tl.arange(0, REP_P)
    d = tl.arange(0, D)
    rmask = r < REP
    heads = kvh * REP + r
    base = part_ptr + (heads[:, None] * NSPLIT + sp) * (D + 2)  # [REP_P, 1]: this split's partial per head
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
    pos = tl.load(pos_ptr)
    n = pos + 1
    start = sp * SPLIT
    kbase = cache_ptr + kvh * L * D
    vbase = cache_ptr + (KV + kvh) * L * D
    if start >= n:  # no key here: an empty partial (weight 0 in the combine)
        empty = tl.zeros([REP_P], dtype=tl.float32)
        write_partial(base, tl.zeros([REP_P, D], dtype=tl.float32), empty - float("inf"), empty, rmask, D, REP_P)
    else:
        if pos < start + SPLIT:  # this split holds the new token: write its k and v first
            kv_row = tl.full([1], HEADS, tl.int32) + kvh
            k = _rope_rows(qkv_ptr, qkn_ptr, cos_ptr, sin_ptr, pos, kv_row, kv_row >= 0, eps, D, QKNORM)
            tl.store(kbase + pos * D + d[None, :], k)
            v = tl.load(qkv_ptr + (HEADS + KV + kvh) * D + d)
            tl.store(vbase + pos * D + d, v)
            tl.debug_barrier()
        q = _rope_rows(qkv_ptr, qkn_ptr, cos_ptr, sin_ptr, pos, heads, rmask, eps, D, QKNORM).to(tl.float32)
        acc, m, lsum = split_attend(q, kbase, vbase, start, n, scale, D, SPLIT, BLOCK, REP_P, True)
        write_partial(base, acc, m, lsum, rmask, D, REP_P)
    tl.debug_barrier()  # every thread's partial is written before the block counts itself done
    done = tl.atomic_add(count_ptr + kvh, 1)  # acq_rel: the last block sees every other block's partial
    if done == NSPLIT - 1:
        s = tl.arange(0, NSPLIT_P)
        mask2 = rmask[:, None] & (s[None, :] < NSPLIT)
        pb = part_ptr + (heads[:, None] * NSPLIT + s[None, :]) * (D + 2)  # [REP_P, NSPLIT_P]
        ms = tl.load(pb + D, mask=mask2, other=float("-inf"), cache_modifier=".cg")
        ls = tl.load(pb + D + 1, mask=mask2, other=0.0, cache_modifier=".cg")
        top = tl.where(rmask, tl.max(ms, axis=1), 0.0)  # split 0 always holds key 0: finite for real heads
        wts = tl.where(mask2, tl.exp(ms - top[:, None]), 0.0)
        parts = tl.load(pb[:, :, None] + d[None, None, :], mask=mask2[:, :, None], other=0.0, cache_modifier=".cg")
        o = tl.sum(wts[:, :, None] * parts, axis=1) / tl.sum(wts * ls, axis=1)[:, None]
        tl.store(out_ptr + heads[:, None] * D + d[None, :], o.to(out_ptr.dtype.element_ty), mask=rmask[:, None])
        tl.atomic_xchg(count_ptr + kvh, 0)  # ready for the next layer


def attend_fused(
    qkv, qkn, cos, sin, pos, cache, part, count, out, *, heads, kv_heads, head_dim, eps, scale, plan, options
):
    """qkv: one token's [(heads + 2·kv_heads)·head_dim]; cache: one layer's [2, kv_heads, L, head_dim]; ``plan`` =
    (SPLIT, NSPLIT, BLOCK) from ``engine_triton.attend_plan``; ``count``: int32 [kv_heads] zeros (left zero);
    ``options``: the launch's (PDL, warps) from ``engine_triton.launch_options``."""
    split, nsplit, block = plan
    rep = heads // kv_heads
    _attend_fused_kernel[(kv_heads, nsplit)](
        qkv,
        qkv if qkn is None else qkn,
        cos,
        sin,
        pos,
        cache,
        part,
        count,
        out,
        cache.shape[2],
        float(eps),
        float(scale),
        HEADS=heads,
        KV=kv_heads,
        REP=rep,
        REP_P=1 << max(0, rep - 1).bit_length(),
        D=head_dim,
        QKNORM=qkn is not None,
        SPLIT=split,
        NSPLIT=nsplit,
        NSPLIT_P=1 << max(0, nsplit - 1).bit_length(),
        BLOCK=block,
        **options,
    )
