"""Claims about decode FLOPs, memory bandwidth and wall clock (book §14.5.4), checked with ``toolkit.cost``: one
check per claim.

Leaves out: measuring timings (benchmarks do that; the wall-clock claim reads the saved H200 run).
"""

from __future__ import annotations

import math

from toolkit import cost
from toolkit.book.ledger import Claim, make_verdict, rounds_to
from toolkit.book.registry import Group, loader
from toolkit.speed import saved_gpu_result

# Peak dense BF16 throughput and bandwidth of an H100 SXM (vendor spec sheet), for the wall-clock comparison only.
H100_BF16_FLOPS, H100_BW = 989e12, 3.35e12


# Llama 3 8B's KV cache per position: 2 (K, V) × 32 layers × 8 KV heads × 128 dims × 2 bytes (bf16).
LLAMA3_KV_BYTES = 2 * 32 * 8 * 128 * 2


FLOPS = Group("flops")
LLAMA, DEEPSEEK = cost.MODELS["Llama 3 8B"], cost.MODELS["DeepSeek-V3 (37B active)"]
OUT_TOKENS = 30 * 500  # 30 turns × 500 output tokens


@FLOPS(
    "flops-llama",
    "§14.5.3",
    "Decoding one token of Llama 3 8B takes about 2 × parameters ≈ 16 GFLOPs.",
    answers=("解码一个词元约 2 × 激活参数量", "Llama 3 8B 约 16 GFLOPs/词元"),
)
def flops_llama():
    f8, f8x = cost.decode_flops_per_token(8e9), cost.decode_flops_per_token(LLAMA.active_params)
    ctx_mid, ctx_end = 10_000 + 2048 * 15, 10_000 + 2048 * 30
    att_mid = cost.attention_flops_per_token(LLAMA.layers, LLAMA.attn_width, ctx_mid)
    att_end = cost.attention_flops_per_token(LLAMA.layers, LLAMA.attn_width, ctx_end)
    return (
        f"2 × 8e9 = {f8 / 1e9:.1f} GFLOPs (2 × 8.03e9 = {f8x / 1e9:.2f}); attention over the context adds "
        f"{att_mid / 1e9:.1f} GFLOPs at {ctx_mid:,} tokens and {att_end / 1e9:.1f} at {ctx_end:,}",
        *make_verdict(
            rounds_to(f8x / 1e9, 16, 0),
            "2 × 8.03e9 does not round to 16",
            [
                (
                    att_mid / f8x > 0.05,
                    "the 2N rule counts the weights only; at this loop's context lengths attention adds "
                    f"{att_mid / f8x:.0%}–{att_end / f8x:.0%} on top",
                )
            ],
        ),
    )


@FLOPS(
    "flops-deepseek",
    "§14.5.3",
    "DeepSeek-V3 with 37B active parameters takes about 74 GFLOPs per token.",
    answers=("DeepSeek-V3（37B 激活）约 74 GFLOPs/词元",),
    supports=("解码一个词元约 2 × 激活参数量",),
)
def flops_deepseek():
    f37 = cost.decode_flops_per_token(DEEPSEEK.active_params)
    return (
        f"2 × 37e9 = {f37 / 1e9:.0f} GFLOPs (of 671B parameters only the active ones count)",
        *make_verdict(rounds_to(f37 / 1e9, 74, 0), "2 × 37e9 does not round to 74"),
    )


@FLOPS(
    "pflops",
    "§14.5.3",
    "30 turns × 500 output tokens = 15,000 tokens: ≈ 0.24 PFLOPs (Llama 3 8B) and ≈ 1.11 PFLOPs (DeepSeek-V3).",
    answers=("30 轮各输出 500 词元共 1.5 万词元", "约 0.24 和 1.11 PFLOPs"),
)
def pflops():
    t = OUT_TOKENS
    p8, p37 = cost.decode_flops(8e9, t) / 1e15, cost.decode_flops(DEEPSEEK.active_params, t) / 1e15
    return (
        f"{t:,} tokens: {p8:.3f} and {p37:.3f} PFLOPs (with 8.03e9: {cost.decode_flops(LLAMA.active_params, t) / 1e15:.3f})",
        *make_verdict(rounds_to(p8, 0.24, 2) and rounds_to(p37, 1.11, 2), "a total does not round"),
    )


@FLOPS(
    "decode-vs-prefill-tokens",
    "§14.5.3",
    "Decoded tokens are two orders of magnitude fewer than the 1.25M prefilled ones.",
    answers=("解码的词元数小两个数量级",),
)
def decode_vs_prefill_tokens():
    g, t = cost.growth(), OUT_TOKENS
    fold = g.total_no_cache / t
    return (
        f"{g.total_no_cache:,} / {t:,} = {fold:.0f}× (10^{math.log10(fold):.2f}); against the cached prefill "
        f"({g.total_cache:,}) only {g.total_cache / t:.1f}×",
        *make_verdict(
            round(math.log10(fold)) == 2,
            "not about two orders of magnitude",
            [
                (
                    fold < 100,
                    f"{fold:.0f}× rounds to two orders (10^{math.log10(fold):.2f}); it compares with the uncached "
                    "prefill only",
                )
            ],
        ),
    )


@FLOPS(
    "decode-memory-bound",
    "§14.5.3",
    "Decoding is limited by memory bandwidth, not compute.",
    answers=("解码是访存受限的",),
)
def decode_memory_bound():
    ai = cost.arithmetic_intensity(LLAMA.active_params)
    ridge = H100_BF16_FLOPS / H100_BW
    batch_at_ridge = ridge / ai
    return (
        f"batch-1 BF16 decode does {ai:.1f} FLOP per byte of weights read; an H100 SXM needs {ridge:.0f} FLOP/byte "
        f"(989 TFLOPS / 3.35 TB/s) to be compute-bound, i.e. a batch of ~{batch_at_ridge:.0f} sequences",
        *make_verdict(
            ai < ridge / 10,
            "intensity is near the ridge point",
            [
                (
                    batch_at_ridge < 512,
                    f"for one sequence; a serving batch of ~{batch_at_ridge:.0f} sequences reaches the ridge point "
                    "(fewer once KV reads are counted per sequence)",
                )
            ],
        ),
    )


def spec_sheet_bounds() -> tuple[float, float, float, float]:
    """Wall clock, batch 1, one H100 SXM, spec-sheet bounds for the book's loop on Llama 3 8B: decode seconds, the
    part of it reading the KV cache, prefill seconds uncached and cached. Decode reads the weights and the whole KV
    cache per token; prefill costs 2N FLOPs per token plus causal attention over the prefix (KV reads are hidden)."""
    T, D, R, out_tok = 10_000, 2048, 30, 500
    w_bytes, L_, W = LLAMA.active_params * 2, LLAMA.layers, LLAMA.attn_width
    dec_s = kv_s = pre_unc = pre_c = 0.0
    for k in range(1, R + 1):
        ctx = T + D * k
        kv = LLAMA3_KV_BYTES * (ctx + out_tok / 2)  # mean KV size while this turn's 500 tokens are decoded
        dec_s += out_tok * (w_bytes + kv) / H100_BW
        kv_s += out_tok * kv / H100_BW
        pre_unc += 2 * LLAMA.active_params * ctx + 4 * L_ * W * ctx * ctx / 2
        pre_c += 2 * LLAMA.active_params * D + 4 * L_ * W * D * (ctx - D / 2)
    return dec_s, kv_s, pre_unc / H100_BF16_FLOPS, pre_c / H100_BF16_FLOPS


@loader
def engine_h200() -> dict | None:
    """The kit's engine measured on an H200 (``toolkit/data/engine_h200.json``), or None."""
    return saved_gpu_result()


def measured_fractions(gpu: dict) -> dict:
    """What fraction of its bound the kit's engine reached on the saved H200 run: prefill FLOP/s over the dense
    BF16 peak (the H200's compute is the H100 SXM's), decode tokens/s over the measured bandwidth floor."""
    a = gpu["agent"]
    best = max(r["tokens_per_s"] for r in gpu["decode"])
    return dict(
        prefill=a["flops_no_reuse"] / a["wall_no_reuse_s"] / H100_BF16_FLOPS,
        prefill_reused=a["flops_reuse"] / a["wall_reuse_s"] / H100_BF16_FLOPS,
        decode=best / gpu["floor_tokens_per_s"],
        best=best,
    )


def _bounds_text(dec_s, kv_s, pre_unc_s, pre_c_s) -> str:
    return (
        f"Llama 3 8B, one H100 SXM, batch 1, spec-sheet bounds: decode ≥ {dec_s:.0f} s ({kv_s:.0f} s of it reading "
        f"the KV cache); prefill with causal attention ≥ {pre_unc_s:.0f} s uncached / {pre_c_s:.1f} s cached"
    )


@FLOPS(
    "decode-wall-clock",
    "§14.5.3",
    "In wall-clock time decode often dominates despite its few tokens.",
    answers=("墙钟时间上往往反而是它占大头",),
)
def decode_wall_clock(engine_h200, bounds=None):
    """§14.5.3's "decode dominates wall clock": the spec-sheet bounds for Llama 3 8B (``bounds``, default
    ``spec_sheet_bounds()``), scaled by the fractions of those bounds the kit's engine measured on an H200, not by
    an assumption."""
    gpu, (dec_s, kv_s, pre_unc_s, pre_c_s) = engine_h200, bounds or spec_sheet_bounds()
    base = _bounds_text(dec_s, kv_s, pre_unc_s, pre_c_s)
    if gpu is None:
        why = "no saved GPU measurement (toolkit/data/engine_h200.json) to say how close to its bounds each phase gets"
        return base + "; " + why, *make_verdict(gpu is None, why, [(gpu is None, why)])
    f = measured_fractions(gpu)
    dec_m, unc_m, c_m = dec_s / f["decode"], pre_unc_s / f["prefill"], pre_c_s / f["prefill_reused"]
    src = f"{gpu['machine'].split(' (')[0]}, {gpu['date']}, {gpu['model'].split(' built')[0].lower()} in Qwen3-0.6B's shape"
    return (
        f"{base}. Measured on the kit's engine ({src}, batch 1): prefill reached {f['prefill']:.0%} of peak FLOPs "
        f"({f['prefill_reused']:.0%} with reuse), decode {f['best']:.0f} tokens/s = {f['decode']:.0%} of the "
        f"bandwidth floor; at those fractions decode {dec_m:.0f} s vs prefill {unc_m:.0f} s uncached / {c_m:.1f} s "
        f"cached; decode at its bound ({dec_s:.0f} s) vs prefill at the measured fraction: {unc_m:.0f} s / {c_m:.1f} s",
        *make_verdict(
            dec_m > c_m and dec_s > c_m,
            "cached prefill takes longer than decode",
            [
                (
                    unc_m > dec_s,
                    f"with the prefix cache; without it the answer turns on how well decode uses the bandwidth: at "
                    f"the {f['decode']:.0%} measured it still dominates ({dec_m:.0f} s vs {unc_m:.0f} s), at its bound "
                    f"the uncached prefill ({unc_m:.0f} s) overtakes it ({dec_s:.0f} s)",
                ),
                (
                    "8B" not in gpu["model"],
                    "the fractions come from a 0.6B model (random weights) at batch 1 on an H200, applied to Llama 3 "
                    "8B on an H100: a larger model keeps both phases busier, so they bracket the answer rather than "
                    "give it",
                ),
            ],
        ),
    )


def wall_clock_claim(dec_s, kv_s, pre_unc_s, pre_c_s, gpu: dict | None) -> Claim:
    """The decode-wall-clock claim on given bounds and a given GPU record (a test's evidence)."""
    return decode_wall_clock(gpu, bounds=(dec_s, kv_s, pre_unc_s, pre_c_s))


def flops_claims() -> list[Claim]:
    return FLOPS.run()
