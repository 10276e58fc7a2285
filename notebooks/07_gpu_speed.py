# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · A small model at GPU speed: why batch-1 decoding is overhead-bound
#
# The cost accounting of §14.5.3 ends with a third bill: decoding. Its FLOPs are tiny next to the prefill of a
# long agent context, yet the book notes that decoding is limited by memory traffic, so in wall-clock time it
# can still dominate. This notebook measures that claim on a Qwen3-0.6B-shaped model and finds a third regime
# the bill leaves out: a straightforward implementation is limited by *overhead* — the fixed cost of each of
# the hundreds of small steps that make up one token — long before memory bandwidth matters.
#
# The arithmetic first (the cell after the imports computes it from the saved H200 measurement): at batch 1,
# every new token needs every weight once, so the weights' size divided by the copy bandwidth is a floor on the
# time per token. The arithmetic is 2 FLOPs per weight, which the same chip does far faster. So the step
# *should* be memory-bound. The measurements below show how far each implementation is from it and why.
# Every measured number in this notebook's text is computed from `benchmarks/results/engine_h200.json`.

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import Markdown, display

from toolkit import cost, speed
from toolkit.backends.choose import not_served
from toolkit.backends.engine import Engine
from toolkit.paths import cpu_threads

torch.manual_seed(0)
torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
GPU = torch.cuda.is_available()
print("device here:", torch.cuda.get_device_name() if GPU else "CPU only (the GPU numbers below are the saved ones)")
if line := not_served("the timings (this machine's own device; a server's clock is not this notebook's)"):
    print(line)

saved = speed.saved_gpu_result()
H200_BF16_FLOPS = 989e12  # dense BF16 peak of the H100/H200 spec sheet (same tensor cores), for the comparison only
wb, bw_saved = saved["weight_GB"] * 1e9, saved["copy_bandwidth_GBps"] * 1e9
flop_us = 2 * (wb / 2) / H200_BF16_FLOPS * 1e6  # bf16: weight bytes / 2 = parameters
display(
    Markdown(
        f"At batch 1 the model streams **{saved['weight_GB']:.2f} GB** of weights per token. The saved H200 run "
        f"measured a copy bandwidth of **{saved['copy_bandwidth_GBps'] / 1000:.1f} TB/s**, so one token takes at "
        f"least **{wb / bw_saved * 1e3:.2f} ms**: a floor of **{saved['floor_tokens_per_s']:,} tokens/s**. "
        f"The arithmetic, {2 * wb / 2 / 1e9:.1f} GFLOP per token, takes {flop_us:.1f} µs at the chip's "
        f"{H200_BF16_FLOPS / 1e12:.0f} TFLOPS bf16 peak."
    )
)

# %% [markdown]
# ## 1 · The last GPU measurement saved with the kit
# `benchmarks/engine.py` ran on a lent H200 as one prepared script (`benchmarks/engine_h200.sh`): `model.generate`,
# the engine eager, with CUDA graphs, then the fused paths — torch.compile, and the kit's own Triton kernels
# (`toolkit/backends/engine_triton.py`) — each with the kernels one token runs. The model there had **random
# weights** in Qwen3-0.6B's shape: weights cannot be carried to that machine, and a dense forward pass takes the
# same time whatever its weights are. The tokens it produced mean nothing; the timings are real.

# %%
display(
    Markdown(
        f"**Saved on {saved['date']}** · {saved['machine']} · {saved['software']}  \n"
        f"model: {saved['model']}  \ncopy bandwidth {saved['copy_bandwidth_GBps']:,} GB/s → floor "
        f"**{saved['floor_tokens_per_s']:,} tokens/s** ({saved['weight_GB']} GB of weights per token)  \n"
        f"provenance: {saved.get('provenance', 'not recorded')}"
    )
)
floor = saved["floor_tokens_per_s"]
table = pd.DataFrame(saved["decode"]).sort_values("tokens_per_s").reset_index(drop=True)
table["ms/token"] = (1000 / table["tokens_per_s"]).round(2)
table["% of floor"] = (100 * table["tokens_per_s"] / floor).round(1)
table

# %%
fig = go.Figure(
    data=[
        go.Bar(
            x=table["tokens_per_s"],
            y=table["path"],
            orientation="h",
            marker_color="#4C78A8",
            text=[f"{v:,.0f}" for v in table["tokens_per_s"]],
            textposition="outside",
        )
    ],
    layout=dict(
        title=f"Batch-1 decode, Qwen3-0.6B shape, bf16, H200<br>(saved {saved['date']})",
        xaxis=dict(title="tokens/s (log scale)", type="log", range=[1, 3.7]),
        height=460,
        margin=dict(l=420),
        shapes=[
            dict(type="line", x0=floor, x1=floor, yref="paper", y0=0, y1=1, line=dict(color="#E45756", dash="dash"))
        ],
        annotations=[dict(x=3.4, y=1.02, xref="x", yref="paper", showarrow=False, text=f"bandwidth floor {floor:,}/s")],
    ),
)
fig

# %% [markdown]
# ### Reading the ladder
# The numbers in the list below are read from the saved results by the cell that prints it.

# %%
rate = {r["path"]: r["tokens_per_s"] for r in saved["decode"]}
bd = saved["breakdowns"]
gen, eager = rate["model.generate (transformers, dynamic cache)"], rate["engine, eager (one launch per op)"]
graph = rate["engine, CUDA graph, sdpa+mask attention"]
flash, flash_c = (
    rate["engine, CUDA graph, flash attention (default)"],
    rate["engine, CUDA graph + torch.compile, flash"],
)
gemv_c = rate["engine, CUDA graph + torch.compile, matmuls as fused reductions"]
tri_default = rate["kit Triton kernels + PDL, default blocks, 3-kernel attention"]
tri_timed = rate["kit Triton kernels + PDL, timed blocks, 3-kernel attention"]
tri_nopdl = rate["kit Triton kernels, timed blocks, 1-kernel attention"]
tri_fused = rate["kit Triton kernels + PDL, timed blocks, 1-kernel attention"]
att = saved["attention_us_per_layer_1k_keys"]
layers = cfg_layers = 28  # Qwen3-0.6B; checked against the model config in section 2
compiled = bd["engine, CUDA graph + torch.compile, flash"]
triton3 = bd["kit Triton kernels + PDL, timed blocks, 3-kernel attention"]
best = max(rate.values())
display(
    Markdown(f"""
- **`model.generate`, {gen:.0f} tokens/s.** Each token runs hundreds of PyTorch operations from Python, each a
  separate GPU launch, plus the generation machinery around them (cache bookkeeping, logits processors,
  stopping checks). The GPU is idle most of the time, waiting for the host.
- **The engine, eager, {eager:.0f} tokens/s ({1e3 / eager:.1f} ms per token).** A static KV cache allocated once,
  fused q/k/v and gate/up weights and no generation machinery cut the host work, but every operation still
  pays its launch (section 3 counts the operations of one step and their average cost on this machine).
- **CUDA graph, {graph:.0f} tokens/s with masked attention; {flash:.0f} with FlashAttention.** The one-token step
  is recorded once and replayed with a single launch, so the host cost disappears; what remains is the kernels'
  own times and the gaps between them. Masked attention through PyTorch's memory-efficient kernel cannot split a
  single query's work over the keys ({att.get("sdpa + mask (memory-efficient)", float("nan")):.0f} µs per layer
  for 1,024 keys in the per-op probe, {saved["attention_probe"]}); FlashAttention's variable-length call reads the filled
  length from the device and splits the keys ({att.get("flash varlen (device length)", float("nan")):.0f} µs).
- **torch.compile, {flash_c:.0f} tokens/s; with the one-row matmuls written as reductions, {gemv_c:.0f}.**
  Compiling fuses the norms, RoPE and residual adds; still {compiled["kernels"]} kernels a token, and cuBLAS's
  matmul kernels take {compiled["groups"]["matmuls (cuBLAS)"]:,.0f} µs of its {compiled["replay_us"]:,.0f}.
- **The kit's Triton kernels, {tri_default:,.0f} tokens/s with default block shapes, {tri_timed:,.0f} with block
  shapes timed on the GPU.** One kernel per matmul with the norm, bias, SwiGLU or residual fused into it:
  {triton3["kernels"]} kernels a token instead of {compiled["kernels"]}. Programmatic dependent launch lets
  each kernel start loading its weights while the previous one finishes ({tri_nopdl:,.0f} tokens/s without it, with
  one-kernel attention). Attention in one kernel instead of three (RoPE, cache write, split attention and the
  combine): {tri_fused:,.0f} tokens/s, no faster — its blocks wait on each other before the last one combines.

The best row, {best:,.0f} tokens/s, is {best / floor:.0%} of the floor ({best / max(flash_c, 1):.1f}× the
torch.compile path). The next cell splits that step into where its time goes.""")
)

# %%
display(Markdown("Where one token's time goes, per path (kernel µs by group from the profiler; replay timed alone)"))
pd.DataFrame(
    [{"path": name, "kernels a token": b["kernels"], "graph replay µs": round(b["replay_us"])}
     | {g: round(v) for g, v in b["groups"].items()} for name, b in bd.items()]
).fillna(0)  # fmt: skip

# %%
br = {k: v for k, v in triton3["groups"].items() if v > 0}
go.Figure(
    data=[
        go.Bar(
            x=list(br.values()),
            y=list(br.keys()),
            orientation="h",
            marker_color="#72B7B2",
            text=[f"{v:,.0f} µs" for v in br.values()],
            textposition="outside",
        )
    ],
    layout=dict(
        title=f"kit Triton kernels + PDL: {triton3['replay_us']:,.0f} µs per token; the bandwidth floor is "
        f"{1e6 / floor:.0f} µs",
        xaxis=dict(title="µs", range=[0, 1.2 * max(br.values())]),
        yaxis=dict(autorange="reversed"),
        height=330,
        margin=dict(l=330),
    ),
)

# %%
mm_us = triton3["groups"]["one-row matmuls (kit Triton)"]
mm_floor_us = wb / bw_saved * 1e6  # every weight read once at the measured copy speed (the LM head is tied)
att_us = triton3["groups"]["attention"] + triton3["groups"].get("q/k norm + RoPE + cache write (kit Triton)", 0)
display(
    Markdown(
        f"The matrix products are now {mm_us:,.0f} µs: reading all {saved['weight_GB']:.2f} GB of weights once at the "
        f"measured {saved['copy_bandwidth_GBps']:,} GB/s takes {mm_floor_us:.0f} µs, so they run at "
        f"{mm_floor_us / mm_us:.0%} of memory speed ({4 * layers + 1} kernels, each paying a fixed "
        f"start and drain of a few µs). Attention, {att_us:,.0f} µs over {layers} layers, reads almost nothing at "
        "this context length: it is latency, not bandwidth. The rest of the way to the floor "
        f"({floor / best:.1f}×) needs far fewer kernels than one per operation — a persistent kernel that runs a "
        "whole layer, or the whole token, keeping the GPU's blocks busy from one matmul to the next."
    )
)

# %% [markdown]
# ## 2 · The agent workload: token ratio, FLOP ratio, wall clock
# §14.5.3 counts prefill tokens for an agent loop with T = 10,000 tokens of tool definitions and Δ = 2,048 new
# tokens per turn over R = 30 turns: without a prefix cache 1,252,320 tokens, with one 61,440 — a ratio of
# T/Δ + (R+1)/2 = 20.4× (the book's numbers, §14.5.3), which is why §14.5.8 puts the prefix cache first among an
# agent engine's needs. The engine keeps the shared prefix in its cache and prefills only the new tokens.
# Measured on the H200:

# %%
a = saved["agent"]
cfg = speed.qwen3_06b_shape("meta")[0].config  # shapes only: the FLOP count needs no weights
assert cfg.num_hidden_layers == layers


def workload_flops(T, delta, R, reuse):
    """Prefill FLOPs of R turns (turn k prefills up to T + k·Δ; with reuse only its last Δ tokens)."""
    return sum(speed.prefill_flops(cfg, T + (k - 1) * delta if reuse else 0, T + k * delta) for k in range(1, R + 1))


token_ratio = cost.ratio_closed(a["T"], a["delta"], a["R"])
flop_ratio = workload_flops(a["T"], a["delta"], a["R"], False) / workload_flops(a["T"], a["delta"], a["R"], True)
wall_ratio = a["wall_no_reuse_s"] / a["wall_reuse_s"]
pd.DataFrame(
    {
        "without reuse": [a["tokens_no_reuse"], f"{a['flops_no_reuse']:.3g}", a["wall_no_reuse_s"]],
        "with reuse": [a["tokens_reuse"], f"{a['flops_reuse']:.3g}", a["wall_reuse_s"]],
        "ratio": [f"{token_ratio:.1f}×", f"{flop_ratio:.1f}×", f"{wall_ratio:.1f}×"],
    },
    index=["tokens prefilled", "prefill FLOPs", "wall clock, s (H200, saved)"],
)

# %%
display(
    Markdown(
        "The wall clock follows the FLOPs, not the tokens. Attention makes the difference: prefilling a whole "
        "context of n tokens scores about n²/2 query–key pairs, while a turn that reuses the cache scores Δ·n. At "
        f"these lengths attention is most of the arithmetic, so the reachable ratio is the FLOP ratio "
        f"({flop_ratio:.1f}×), and the measured {wall_ratio:.1f}× is {wall_ratio / flop_ratio:.0%} of it. The token "
        "ratio is the right count of *work items*; the FLOP ratio is the right count of *work*. Both grow with the "
        "number of turns:"
    )
)

# %%
Rs = list(range(1, 61))
go.Figure(
    data=[
        go.Scatter(x=Rs, y=[cost.ratio_closed(a["T"], a["delta"], R) for R in Rs], name="token ratio"),
        go.Scatter(
            x=Rs,
            y=[workload_flops(a["T"], a["delta"], R, False) / workload_flops(a["T"], a["delta"], R, True) for R in Rs],
            name="FLOP ratio",
        ),
        go.Scatter(
            x=[a["R"]],
            y=[wall_ratio],
            mode="markers",
            marker=dict(size=11, color="#E45756"),
            name=f"wall clock, H200 ({saved['date']})",
        ),
    ],
    layout=dict(
        title="Without / with prefix reuse<br>(T = 10,000, Δ = 2,048; Qwen3-0.6B shape)",
        xaxis=dict(title="turns R"),
        yaxis=dict(title="ratio"),
        height=380,
    ),
)

# %% [markdown]
# ## 3 · Measured here, now
# On a machine with a GPU this cell re-measures a short version of section 1 (no torch.compile, to stay
# quick). Without one it measures the same ladder on the CPU with the random-weight stand-in (mechanics only;
# the cell prints its size), and counts the operations one decode step runs: with no GPU to hide behind, each
# operation's fixed cost is plain to see.

# %%
if GPU:
    model, what = speed.qwen3_06b_shape("cuda", torch.bfloat16)
    bw = speed.copy_bandwidth("cuda")
    here_floor = speed.floor_tokens_per_s(model, bw)
    prompt = speed.prompt_ids(256)
    rows = [
        ("model.generate", speed.hf_decode_rate(model, prompt, 8)[0]),
        ("engine, eager", speed.engine_decode_rate(Engine(model, graphs=False, max_len=512), prompt, 16)[0]),
        ("engine, CUDA graph", speed.engine_decode_rate(Engine(model, max_len=512), prompt, 128)[0]),
    ]
else:
    from toolkit.models import stand_in

    model = stand_in()
    n_params = sum(p.numel() for p in model.parameters())
    what = f"RANDOM-WEIGHT STAND-IN (toolkit.models.stand_in, {n_params / 1e6:.1f}M params): mechanics only"
    bw = speed.copy_bandwidth("cpu")
    here_floor = speed.floor_tokens_per_s(model, bw)
    prompt = speed.prompt_ids(64)
    rows = [
        ("model.generate", speed.hf_decode_rate(model, prompt, 8)[0]),
        ("engine, eager", speed.engine_decode_rate(Engine(model, max_len=256), prompt, 16)[0]),
    ]
print("model:", what)
print(f"copy bandwidth {bw / 1e9:,.1f} GB/s → floor {here_floor:,.0f} tokens/s")
pd.DataFrame(
    [(n, round(r, 1), round(1000 / r, 2), round(100 * r / here_floor, 1)) for n, r in rows],
    columns=["path", "tokens/s", "ms/token", "% of floor"],
)

# %%
from torch.profiler import ProfilerActivity, profile  # noqa: E402

e = Engine(model, max_len=512, graphs=False)
e.generate(prompt, max_new_tokens=2, stop_ids=set())
with profile(activities=[ProfilerActivity.CUDA] if GPU else [ProfilerActivity.CPU]) as prof:
    e.step(len(prompt))  # one decode step, eager
    if GPU:
        torch.cuda.synchronize()
if GPU:  # kernels that ran on the device
    n_ops = sum(x.count for x in prof.key_averages() if x.device_time_total > 0)
else:  # operations that call no other operation: what a CPU step actually executes
    n_ops = sum(1 for ev in prof.events() if not ev.cpu_children)
step_ms = 1000 / rows[1][1]
print(
    f"one eager decode step runs {n_ops} {'GPU kernels' if GPU else 'CPU operations'}; "
    f"{step_ms:.1f} ms per token → {1000 * step_ms / n_ops:.0f} µs per operation on average"
)
key = (lambda x: x.device_time_total) if GPU else (lambda x: x.self_cpu_time_total)
top = sorted(prof.key_averages(), key=key, reverse=True)[:3]
total = sum(key(x) for x in prof.key_averages())
for x in top:
    print(f"  {100 * key(x) / total:5.1f}%  {x.count:4d}×  {x.key[:70]}")

# %% [markdown]
# On a GPU the eager step is a few hundred kernels, each costing its launch whatever its size; a graph replay
# pays that once per token. On the CPU there is no launch to save: the time is spread over the operations
# listed, with the matrix products first — above all the output layer (one row per vocabulary entry), which
# holds most of the stand-in's parameters. (CPU timings on a shared machine move from run to run; the shape of
# the split is what to read.)

# %%
if not GPU:
    head = model.get_output_embeddings().weight.numel()
    print(
        f"output layer: {model.config.vocab_size:,} rows, {head / 1e6:.1f}M of the stand-in's "
        f"{n_params / 1e6:.1f}M parameters ({head / n_params:.0%})"
    )
cf = saved["constrained_fraction"]
display(
    Markdown(
        f"Saved H200 run: a grammar mask kept {min(cf.values()):.0%}–{max(cf.values()):.0%} of "
        "unconstrained decode speed (" + ", ".join(f"{k}: {v:.1%}" for k, v in cf.items()) + ")."
    )
)

# %% [markdown]
# ## Takeaways
# - At batch 1 the floor is set by memory bandwidth, but reaching it is a matter of removing overhead:
#   launches (CUDA graphs remove them), kernels that cannot use the chip for one row (attention and matmul
#   choices), and the number of separate kernels (fusion).
# - Reuse of the cached prefix pays off in wall clock as the FLOP count predicts; counting tokens overstates
#   the gain at long contexts because attention grows with the square of the context.
# - A grammar mask costs almost nothing here (the cell above prints the saved H200 fraction): the host fills the
#   next mask while the GPU computes the next step, and the mask is applied inside the sampling graph.
# - What the engine is, and what it leaves out, is in `toolkit/backends/engine.py`'s docstring; the full measurements
#   with their dates are in `benchmarks/results/engine_h200.md` (the numbers this notebook reads: `toolkit/data/engine_h200.json`,
#   a verbatim copy of the benchmark's `benchmarks/results/engine_h200.json`).
