"""Block shapes for ``toolkit.backends.engine_triton``'s one-row matmuls, picked by timing on the GPU at hand.

What it does
- For each matmul of a layer (q/k/v, o, gate/up, down) and the LM head, times a few block shapes (rows per block,
  K tile, warps) as the decode body runs them: with the same fused prologue/epilogue, over every layer's weights in
  turn (so the weights come from memory, not the 60 MB L2), captured in one CUDA graph (no launch gaps from
  Python), median of a few replays; keeps the fastest. ``tune(decoder)`` returns ``{role: (BLOCK_N, BLOCK_K,
  warps)}`` and the µs of each role's pick, which ``Decoder`` uses and the benchmark reports.

What it leaves out
- The CPU (the interpreter has no timing worth tuning), the attention kernels (their split is planned from the
  bucket), a persistent cache of picks (Triton caches the compiled kernels; the timing reruns per engine, ~1-2 s).
"""

from __future__ import annotations

import statistics

import torch


def candidates(K: int) -> list[tuple[int, int, int]]:
    """(BLOCK_N, BLOCK_K, warps) to try for a K-wide row: 1k-16k elements a tile, 4 warps up to 4k, else 8."""
    out = []
    for bk in (512, 1024, 2048):
        if bk <= max(512, 1 << max(0, K - 1).bit_length()):
            out += [(bn, bk, 4 if bn * bk <= 4096 else 8) for bn in (1, 2, 4, 8, 16) if 1024 <= bn * bk <= 16384]
    return out


def graph_us(fn, reps: int = 5, warmups: int = 1) -> float:
    """Median µs of ``fn`` captured once in a CUDA graph and replayed ``reps`` times (after ``warmups`` eager calls
    on a side stream, where compilation and autotuning happen)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):  # compiles the variant outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def tune(decoder, gemv) -> tuple[dict[str, tuple[int, int, int]], dict[str, float]]:
    """The fastest block shape per role for ``decoder``'s engine (``engine_triton.Decoder``; ``gemv`` is that
    module's launcher), and its µs (all layers of that role)."""
    e, pdl = decoder.engine, decoder.pdl
    g = torch.Generator(device=e.device).manual_seed(0)

    def scratch(like):  # never the engine's residual stream, cache or logits
        return (torch.randn(like.shape, generator=g, device=e.device) * 0.1).to(like.dtype)

    h, qkv, att, act = scratch(decoder.h.view(-1)), scratch(decoder.qkv), scratch(decoder.att), scratch(decoder.act)
    r, logits = scratch(decoder.h.view(-1)), torch.zeros_like(e._logits)
    kw = dict(eps=e.eps, pdl=pdl)
    roles = {
        "qkv": (
            e.layers[0].wq.shape[1],
            lambda c: [gemv(h, w.wq, qkv, ln=w.ln1, bias=w.bq, blocks=c, **kw) for w in e.layers],
        ),
        "o": (
            e.layers[0].wo.shape[1],
            lambda c: [gemv(att, w.wo, r, bias=w.bo, res=r, blocks=c, **kw) for w in e.layers],
        ),
        "gate_up": (
            e.layers[0].wg.shape[1],
            lambda c: [gemv(h, w.wg, act, ln=w.ln2, swiglu=True, blocks=c, **kw) for w in e.layers],
        ),
        "down": (e.layers[0].wd.shape[1], lambda c: [gemv(act, w.wd, r, res=r, blocks=c, **kw) for w in e.layers]),
        "head": (e.lm_head.shape[1], lambda c: gemv(h, e.lm_head, logits, ln=e.norm, blocks=c, **kw)),
    }
    picks, micros = {}, {}
    for role, (K, run) in roles.items():
        timed = [(graph_us(lambda c=c: run(c)), c) for c in candidates(K)]
        micros[role], picks[role] = min(timed)
    return picks, {k: round(v, 1) for k, v in micros.items()}
