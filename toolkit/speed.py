"""Measuring batch-1 decode speed honestly: copy bandwidth, the bandwidth floor, tokens/s of ``model.generate``
and of ``toolkit.backends.engine``, prefill FLOPs with attention, and the last saved GPU result (book §14.5.3, §14.5.8).

What it does
- ``qwen3_06b_shape(device, dtype)``: a model built from Qwen3-0.6B's published config with random weights
  (what runs on a lent GPU, where weights cannot be carried); its description says so.
- ``bench_model``: the model a benchmark names (the shaped one, the stand-in, or a loadable model).
- ``copy_bandwidth(device)``: bytes read + written per second by a large device-to-device copy (median);
  ``floor_tokens_per_s``: bandwidth / bytes of weights, the most a batch-1 decode step can do.
- ``hf_decode_rate`` and ``engine_decode_rate``: decode tokens/s (prefill excluded) and the tokens produced.
- ``prefill_flops``: the arithmetic of prefilling positions ``start..end-1`` (2 × dense parameters per token plus
  attention over every earlier position, via ``toolkit.cost``), for the with/without-reuse FLOP ratio.
- ``agent_record`` (each round's prompt tokens, tokens prefilled, wall s and FLOPs with and without reuse, their
  sums and ratios: the results file's ``agent``) and ``agent_lines`` (its markdown table) for ``benchmarks/engine.py``.
- ``replay_us`` (one body-graph replay timed with CUDA events) and ``kernel_profile`` (one body step's kernels,
  grouped by ``kernel_group``: matmuls, attention, fused pointwise, the kit's Triton kernels) for ``benchmarks/engine.py``.
- ``saved_gpu_result()``: the last H200 run of ``benchmarks/engine.py`` (package data ``toolkit/data/engine_h200.json``,
  the benchmark's own results file copied verbatim), read by ``gpu_view`` into what notebook 07 and the ledger use:
  rates by path, each path's kernels by group, the agent table (from the file's ``agent``, or its markdown where
  an older file has none), the constrained fractions.

What it leaves out
- Batch > 1; KV-cache bytes in the floor; per-kernel probes of single ops (``benchmarks/engine_probe.py``).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

import torch

from toolkit import cost, models
from toolkit.paths import data_file
from toolkit.qwen import ENDOFTEXT_ID, IM_END_ID
from toolkit.stand_in import stand_in

# Qwen3-0.6B's published config values (facts), written here because the hub cannot be reached.
QWEN3_06B = dict(
    vocab_size=151_936,
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    tie_word_embeddings=True,
    rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0},
    max_position_embeddings=40_960,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    bos_token_id=ENDOFTEXT_ID,
    eos_token_id=IM_END_ID,
)
RESULTS = data_file("engine_h200.json")  # package data: found from a wheel as from a checkout
PROBE = data_file("engine_h200_probe.json")  # the per-op probe of 2026-11-29 (attention variants)


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def qwen3_06b_shape(device="cuda", dtype=torch.bfloat16, seed: int = 0):
    """(model, description): random weights in Qwen3-0.6B's shape, initialised directly on ``device``."""
    from transformers import AutoModelForCausalLM, Qwen3Config  # lazy: only for the shaped model

    torch.manual_seed(seed)
    with torch.device(device):  # 0.6B random numbers drawn on the CPU first would take a while
        model = AutoModelForCausalLM.from_config(Qwen3Config(**QWEN3_06B), dtype=dtype).eval()
    return model, (
        f"RANDOM WEIGHTS built from the Qwen3-0.6B config (hidden 1024, 28 layers, 16/8 heads, head_dim "
        f"128, vocab 151,936, tied) in {str(dtype).removeprefix('torch.')}: speed only, no meaning"
    )


def bench_model(kind: str, device, shape: str = "qwen3-0.6b-shape"):
    """(model, description) for a benchmark: ``shape`` (Qwen3-0.6B's shape, random weights, bf16 on a GPU), the
    stand-in, or any model ``toolkit.models.load`` takes (its description names model, adapter, precision)."""
    if kind == shape:
        return qwen3_06b_shape(device, torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32)
    if kind == "stand-in":
        return stand_in(device=str(device)), "RANDOM-WEIGHT STAND-IN (toolkit.stand_in, 9.8M params): mechanics only"
    loaded = models.load(kind, device=str(device), quiet=True)
    return loaded.model, loaded.description


def weight_bytes(model) -> int:
    """Bytes of (unique) parameters: what one decode step reads at least once (tied embeddings counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def copy_bandwidth(device, nbytes: int | None = None, repeats: int = 10) -> float:
    """Bytes read + written per second by a device-to-device copy of ``nbytes`` (median of ``repeats``)."""
    device = torch.device(device)
    n = nbytes or ((1 << 30) if device.type == "cuda" else (1 << 27))
    a = torch.ones(n // 2, dtype=torch.bfloat16, device=device)
    b = torch.empty_like(a)
    b.copy_(a)  # warm-up: first touch of the pages
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        b.copy_(a)
        sync(device)
        times.append(time.perf_counter() - t0)
    return 2 * n / statistics.median(times)


def floor_tokens_per_s(model, bandwidth: float) -> float:
    """The bandwidth floor: every weight streamed once per token (``toolkit.cost.bandwidth_tokens_per_s``)."""
    return cost.bandwidth_tokens_per_s(weight_bytes(model), bandwidth, bytes_per_param=1.0)


def prompt_ids(n: int, seed: int = 1, vocab: int = 151_643) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (n,), generator=g).tolist()


def hf_decode_rate(model, prompt: list[int], n: int) -> tuple[float, list[int]]:
    """``model.generate`` greedy: (n - 1) / (t(n tokens) - t(1 token)), and its n tokens."""
    dev = next(model.parameters()).device
    ids = torch.tensor([prompt], device=dev)
    kw = dict(attention_mask=torch.ones_like(ids), do_sample=False, eos_token_id=None, pad_token_id=0)

    def run(k):
        sync(dev)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=k, min_new_tokens=k, **kw)
        sync(dev)
        return time.perf_counter() - t0, out[0, len(prompt) :].tolist()

    run(2)  # warm-up
    t1, _ = run(1)
    tn, toks = run(n)
    return (n - 1) / max(tn - t1, 1e-9), toks


def engine_decode_rate(engine, prompt: list[int], n: int, repeats: int = 3) -> tuple[float, list[int]]:
    """Median decode tokens/s of ``engine`` ((n - 1) body steps over ``decode_s``, fresh prefill each time)."""
    engine.prepare(len(prompt) + n + 1)  # graphs captured outside the timing
    engine.generate(prompt, max_new_tokens=min(n, 8), stop_ids=set())  # warm-up
    rates, toks = [], []
    for _ in range(repeats):
        engine.reset()
        g = engine.generate(prompt, max_new_tokens=n, stop_ids=set())
        rates.append((len(g.new_ids) - 1) / g.decode_s)
        toks = g.new_ids
    return statistics.median(rates), toks


def prefill_flops(config, start: int, end: int, dense_params: int | None = None) -> float:
    """FLOPs to prefill positions ``start..end-1`` over a cache holding ``0..start-1``: matmuls (2 per dense
    parameter per token) plus attention (position i scores and mixes i + 1 keys)."""
    width = config.num_attention_heads * (
        getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    )
    if dense_params is None:  # decoder layers only: the embedding is a lookup, the LM head runs for one token
        h, i, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers
        kv = config.num_key_value_heads * (width // config.num_attention_heads)
        dense_params = L * (h * (width + 2 * kv) + width * h + 3 * h * i)
    pairs = (end * (end + 1) - start * (start + 1)) // 2  # sum of (i + 1) for i in start..end-1
    # attention_flops_per_token is linear in the context, so passing the summed context gives the total.
    return cost.decode_flops(dense_params, end - start) + cost.attention_flops_per_token(
        config.num_hidden_layers, width, pairs
    )


def saved_gpu_result(path=RESULTS, probe=PROBE) -> dict | None:
    """The last GPU run committed with the kit, or None if there is none: ``benchmarks/engine.py``'s results file
    (a copy is package data) read into the fields notebook 07 and the ledger use (``gpu_view``). ``path``/``probe``:
    file paths or ``importlib.resources`` traversables."""
    p = path if hasattr(path, "is_file") else Path(path)
    if not p.is_file():
        return None
    raw = json.loads(p.read_text(encoding="utf-8"))
    q = probe if hasattr(probe, "is_file") else Path(probe)
    return gpu_view(raw, json.loads(q.read_text(encoding="utf-8")) if q.is_file() else None)


PATHS = {  # the benchmark's row names -> the names notebook 07 shows
    "model.generate": "model.generate (transformers, dynamic cache)",
    "engine eager": "engine, eager (one launch per op)",
    "engine CUDA graph sdpa attention": "engine, CUDA graph, sdpa+mask attention",
    "engine CUDA graph": "engine, CUDA graph, flash attention (default)",
    "compile": "engine, CUDA graph + torch.compile, flash",
    "compile gemv": "engine, CUDA graph + torch.compile, matmuls as fused reductions",
    "triton+pdl untuned 3-kernel attention": "kit Triton kernels + PDL, default blocks, 3-kernel attention",
    "triton+pdl 3-kernel attention": "kit Triton kernels + PDL, timed blocks, 3-kernel attention",
    "triton": "kit Triton kernels, timed blocks, 1-kernel attention",
    "triton+pdl": "kit Triton kernels + PDL, timed blocks, 1-kernel attention",
}


AGENT_VIEW = ("T", "delta", "R", "tokens_reuse", "tokens_no_reuse", "flops_reuse", "flops_no_reuse")
AGENT_VIEW += ("wall_reuse_s", "wall_no_reuse_s")  # gpu_view's agent fields


def agent_record(T: int, delta: int, R: int, rounds: dict, *, decode_per_round: int, mode: str, budget_s: float):
    """The agent workload's numbers for the results file: each round run with and without reuse (``rounds``:
    {reuse: [(prompt tokens, tokens prefilled, wall s, prefill FLOPs), ...]}), then over the rounds both ran (the
    time budget may stop the slower one early) the sums and the ratios without / with."""
    k = min(len(rounds[True]), len(rounds[False]))
    (f1, w1, fl1), (f0, w0, fl0) = (
        [sum(x[i] for x in rounds[reuse][:k]) for i in (1, 2, 3)] for reuse in (True, False)
    )
    each = [dict(round=r, reuse=reuse, prompt_tokens=p, prefilled=n, wall_s=w, flops=fl)
            for reuse in (True, False) for r, (p, n, w, fl) in enumerate(rounds[reuse], 1)]  # fmt: skip
    ratios = dict(tokens=f0 / f1, flops=fl0 / fl1, wall=w0 / w1, closed=cost.ratio_closed(T, delta, k))
    return dict(
        T=T, delta=delta, R=R, decode_per_round=decode_per_round, mode=mode, budget_s=budget_s, rounds_compared=k,
        rounds=each, tokens_reuse=f1, tokens_no_reuse=f0, flops_reuse=fl1, flops_no_reuse=fl0, wall_reuse_s=w1,
        wall_no_reuse_s=w0, ratios=ratios,
    )  # fmt: skip


def agent_lines(a: dict) -> list[str]:
    """The agent workload's markdown table, from ``agent_record``'s dict."""
    T, D, R, k, r = a["T"], a["delta"], a["R"], a["rounds_compared"], a["ratios"]
    out = [
        f"## Agent workload: T={T:,} prefix tokens, +Δ={D:,} per round, R={R} rounds ({a['decode_per_round']} "
        f"token(s) decoded per round; context up to {T + R * D:,}; {a['mode']})",
        "",
    ]
    if k < R:
        out += [
            f"Only the first {k} of {R} rounds ran within the {a['budget_s']:.0f} s budget; ratios are over those "
            f"rounds (token ratio for {k} rounds: {r['closed']:.1f}×).",
            "",
        ]
    return out + [
        "| | tokens prefilled | prefill FLOPs | wall s |",
        "| --- | ---: | ---: | ---: |",
        f"| with reuse (prefill only the new Δ) | {a['tokens_reuse']:,} | {a['flops_reuse']:.3g} | "
        f"{a['wall_reuse_s']:.3f} |",
        f"| without reuse (prefill everything) | {a['tokens_no_reuse']:,} | {a['flops_no_reuse']:.3g} | "
        f"{a['wall_no_reuse_s']:.3f} |",
        f"| **ratio** without / with | **{r['tokens']:.1f}×** | **{r['flops']:.1f}×** | **{r['wall']:.1f}×** |",
        "",
        f"Token ratio T/Δ + (R+1)/2 = {cost.ratio_closed(T, D, R):.1f}×. The FLOP ratio is lower because a full "
        "prefill's attention grows with the square of the context while a reused round's grows linearly: that "
        "ratio is what a compute-bound prefill can reach.",
        "",
    ]


def _agent(lines: list[str]) -> dict | None:
    """The agent workload's sizes and table, read from the run's markdown."""
    head = next((x for x in lines if x.startswith("## Agent workload: T=")), None)
    rows = {x.split("|")[1].strip()[:12]: x.split("|")[2:5] for x in lines if x.startswith("| with")}
    if head is None or not {"with reuse (", "without reus"} <= set(rows):
        return None
    nums = re.findall(r"T=([\d,]+) prefix tokens, \+Δ=([\d,]+) per round, R=(\d+)", head)[0]
    T, delta, R = (int(n.replace(",", "")) for n in nums)
    (tr, fr, wr), (tn, fn, wn) = ([c.strip() for c in rows[k]] for k in ("with reuse (", "without reus"))
    out = dict(T=T, delta=delta, R=R, tokens_reuse=int(tr.replace(",", "")), tokens_no_reuse=int(tn.replace(",", "")))
    out.update(flops_reuse=float(fr), flops_no_reuse=float(fn), wall_reuse_s=float(wr), wall_no_reuse_s=float(wn))
    return out


def gpu_view(raw: dict, probe: dict | None = None) -> dict:
    """The fields notebook 07 reads, computed from one ``benchmarks/engine.py`` results file: rates by path, the
    kernel breakdown of the fastest path and of torch.compile's, the agent table, the constrained fractions;
    ``probe``: the earlier per-op probe (attention variants), which this run did not repeat."""
    rates = {PATHS.get(k, k): v for k, v in raw["rates"].items() if not k.startswith("engine cuda")}
    variants = {k: v for k, v in raw.get("variants", {}).items() if "tokens_per_s" in v}
    rates.update({PATHS.get(k, k): v["tokens_per_s"] for k, v in variants.items()})
    best = max(variants, key=lambda k: variants[k]["tokens_per_s"]) if variants else None
    breakdowns = {}
    for label, v in variants.items():
        groups = {g: d["us"] for g, d in v["kernels"].items()}
        n, us = sum(d["kernels"] for d in v["kernels"].values()), sum(groups.values())
        gaps = {"graph replay − kernel time (gaps; < 0 where PDL overlaps kernels)": round(v["body_replay_us"] - us)}
        breakdowns[PATHS.get(label, label)] = dict(kernels=n, replay_us=v["body_replay_us"], groups=groups | gaps)
    lines = raw.get("markdown", [])
    if "agent" in raw:  # benchmarks/engine.py saves the agent workload's numbers
        agent = raw["agent"] and {k: raw["agent"][k] for k in AGENT_VIEW}
    else:  # a results file written before it did (the committed engine_h200.json): read its markdown table back
        agent = _agent(lines)
    heads = [x.split("(", 1)[1].split(";")[0] for x in lines if x.startswith("## Constrained vs unconstrained (")]
    ratios = raw.get("targets", {}).get("constrained", {}).get("ratios", [])
    return dict(
        date=raw["date"][:10], machine=raw["machine"], software=raw["software"], model=raw["model"],
        commit=raw.get("commit"),
        provenance=f"written by benchmarks/engine.py on the lent machine at commit {raw.get('commit')} "
        "(benchmarks/results/engine_h200.json; copied verbatim into toolkit/data/)",
        copy_bandwidth_GBps=round(raw["bandwidth_gb_s"]), weight_GB=raw["weights_gb"],
        floor_tokens_per_s=round(raw["floor_tokens_per_s"]),
        decode=[{"path": k, "tokens_per_s": v} for k, v in rates.items()],
        best_path=PATHS.get(best, best), breakdowns=breakdowns, agent=agent,
        constrained_fraction=dict(zip(heads, ratios)), targets=raw.get("targets", {}),
        attention_us_per_layer_1k_keys=(probe or {}).get("attention_us_per_layer_1k_keys", {}),
        attention_probe=f"benchmarks/engine_probe.py, {(probe or {}).get('date', 'not saved')}",
    )  # fmt: skip


# ---------------------------------------------------------------- a decode step on a GPU
def replay_us(e, bucket: int, pos: int, reps: int = 50) -> float:
    """Median µs of one body-graph replay (one token through every layer) at ``pos``, timed with CUDA events."""
    graph = e._body_graphs[bucket]
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e._pos.fill_(pos)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    e.reset()
    return sorted(times)[reps // 2]


def kernel_group(name: str) -> str:
    n = name.lower()
    if "gemv" in n:
        return "one-row matmuls (kit Triton)"
    if any(k in n for k in ("gemm", "cutlass", "nvjet", "cublas", "sm90_", "gemv2", "splitk")):
        return "matmuls (cuBLAS)"
    if any(k in n for k in ("flash", "attend", "combine", "fmha", "attention")):
        return "attention"
    if "rope" in n:
        return "q/k norm + RoPE + cache write (kit Triton)"
    if n.startswith("triton_"):
        return "fused pointwise (torch.compile)"
    return "other (norms, adds, copies, embedding)"


def kernel_profile(e, bucket: int, pos: int) -> dict:
    """Kernels of one eager body step (the graph replays the same ones), grouped: count and µs of kernel time."""
    from torch.profiler import ProfilerActivity, profile  # lazy: only where kernels are profiled (a GPU)

    e._pos.fill_(pos)
    with torch.no_grad():
        e._body(bucket)  # warm
    torch.cuda.synchronize()
    e._pos.fill_(pos)
    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
        e._body(bucket)
        torch.cuda.synchronize()
    e.reset()
    groups: dict[str, list] = {}
    for x in prof.key_averages():
        if x.device_time_total > 0:
            g = groups.setdefault(kernel_group(x.key), [0, 0.0])
            g[0] += x.count
            g[1] += x.device_time_total
    return {k: {"kernels": v[0], "us": round(v[1], 1)} for k, v in sorted(groups.items(), key=lambda kv: -kv[1][1])}


def breakdown_lines(details: dict, pos: int) -> list[str]:
    """Markdown table: per decode path, the body replay µs, its kernels and their µs by group."""
    out = [
        f"### Where a token's time goes (one body step at position {pos}; kernel µs from torch.profiler)",
        "",
        "| path | body graph replay µs | kernels | kernel µs | by group (kernels, µs) |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for label, d in details.items():
        if "kernels" in d:
            n = sum(g["kernels"] for g in d["kernels"].values())
            us = sum(g["us"] for g in d["kernels"].values())
            groups = "; ".join(f"{k}: {g['kernels']}, {g['us']:,.0f}" for k, g in d["kernels"].items())
            out.append(f"| {label} | {d['body_replay_us']:,.0f} | {n} | {us:,.0f} | {groups} |")
    return out + [""]


def engine_targets(rates: dict, floor: float, agent: dict | None, ratios: list) -> tuple[dict, list[str]]:
    """Issue 42's targets from one run: decode ≥ 1,600 tokens/s and ≥ 50% of the floor; the agent workload's
    wall ratio ≥ 95% of its FLOP ratio (``agent``: ``agent_record``'s dict); constrained ≥ 95% of
    unconstrained. Returns (a dict for the results file, markdown lines)."""
    engine_rates = [v for k, v in rates.items() if k.startswith("engine")]
    best = max(engine_rates) if engine_rates else float("nan")
    met = best >= max(1600, floor / 2)
    targets = {"decode": {"best": round(best, 1), "pct_of_floor": round(100 * best / floor, 1), "met": met}}
    lines = ["## Against the targets (issue 42)", ""]
    lines.append(
        f"- decode ≥ 1,600 tokens/s and ≥ 50% of the floor ({floor / 2:,.0f}): best engine row {best:,.0f} "
        f"tokens/s ({100 * best / floor:.0f}% of floor) → {'met' if met else 'NOT met'}"
    )
    if agent:
        wall, closed, flop = (agent["ratios"][k] for k in ("wall", "closed", "flops"))
        share = wall / flop
        targets["agent"] = dict(wall_ratio=round(wall, 2), token_ratio=round(closed, 2))
        targets["agent"].update(flop_ratio=round(flop, 2), share=round(share, 3), met=share >= 0.95)
        lines.append(
            f"- agent workload wall ratio ≥ 95% of its FLOP ratio: {wall:.1f}× of {flop:.1f}× = "
            f"{100 * share:.0f}% (token ratio {closed:.1f}×) → {'met' if share >= 0.95 else 'NOT met'}"
        )
    if ratios:
        targets["constrained"] = {"ratios": [round(r, 4) for r in ratios], "met": min(ratios) >= 0.95}
        lines.append(
            f"- constrained ≥ 95% of unconstrained: {', '.join(f'{100 * r:.1f}%' for r in ratios)} → "
            f"{'met' if min(ratios) >= 0.95 else 'NOT met'}"
        )
    return targets, lines + [""]


def variant_detail(e, rate: float, setup: float, same: int, of: int, floor: float, pos: int) -> dict:
    """One decode path's row for the results file: rate, % of floor, tokens equal to the eager path's (``same``
    of ``of``), one body replay's µs and its kernels by group at ``pos``."""
    bucket = e._bucket(pos + 1)
    return dict(
        mode=e.mode,
        tokens_per_s=round(rate, 1),
        pct_of_floor=round(100 * rate / floor, 1),
        setup_s=round(setup, 1),
        same_tokens_as_eager=same,
        of=of,
        body_replay_us=round(replay_us(e, bucket, pos), 1),
        kernels=kernel_profile(e, bucket, pos),
        blocks=getattr(e._custom, "blocks", None),
        tuned_us=getattr(e._custom, "tuned_us", None),
    )
