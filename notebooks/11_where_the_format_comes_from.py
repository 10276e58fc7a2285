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
# # 11 · Where the format comes from: teaching the real model to write `<tool_call>`
#
# The chapter's claim (§14.5.2, §14.5.7) is that tool calling is a chat template plus training: the template
# shows the model the tool list and the `<tool_call>` format as text, and training on conversations rendered with
# that template teaches the model to answer in it. Notebook 06 showed the loss mask on a random-weight model.
# Here it happens to the real offline model, Qwen2.5-Coder-0.5B-Instruct — which, as notebook 08 measured, never
# writes the tag on its own: asked with tools, it answers in fenced or bare JSON.
#
# The kit made its own training data (`toolkit.sft.data`: made-up APIs in many domains plus the kit's real tools,
# English and Chinese, one call, a choice among several, parallel calls, no call at all, an answer written from a
# tool result) and fine-tuned low-rank adapters on the model's upper layers, on two CPU cores
# (`python -m toolkit train --model real`), together with the embedding and output rows of `<tool_call>` and
# `</tool_call>`: in these weights the two rows are identical and were never trained, and an adapter on the layers
# alone taught the model the calls' shape but opened them with the wrong token. This notebook shows the same prompt before and after, the loss curve,
# a live mini-run you can watch, and the measured before/after on BFCL and on free-form questions.

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import json

import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import Markdown, display

from toolkit.cliargs import count, from_env
from toolkit.eval.learned import LIKE_FOR_LIKE, compare, markdown, targets
from toolkit.eval.report import load_results
from toolkit.memory import memory_available
from toolkit.models import FULL_MODEL_BYTES, adapter_manifest, apply_adapter, comparison_pair, load
from toolkit.paths import cpu_threads, results_file
from toolkit.sft.format import first_token, greedy, mini_run

torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
torch.manual_seed(0)
BEFORE, AFTER = comparison_pair()  # the base and the adapter model: the float model, or int8 where memory is short
loaded = load(BEFORE)
REAL = loaded.kind == "real-offline" and AFTER is not None
print("model:", loaded.description)
if not REAL:
    print(
        "the live parts of this notebook need the real offline model (make real-model); "
        "with this model only the saved results below are shown"
    )

# %% [markdown]
# ## The same prompt, before and after
#
# One request the training data never contained, with two of the kit's tools. We look at the first token the
# model wants to write after `<|im_start|>assistant\n`, then at what it writes greedily — no grammar, no answer
# prefix, nothing from the host but the rendered prompt.

# %%
from toolkit.tools import TOOLS

probe_tools = [TOOLS["convert_units"].schema, TOOLS["get_weather"].schema]
probe = [{"role": "user", "content": "How many pounds are 12 kilograms?"}]
rows = []
if REAL:
    before = first_token(loaded, probe, probe_tools)
    said_before = greedy(loaded, probe, probe_tools)
    if AFTER == "apply":  # the float model: the adapter merged into the loaded weights
        apply_adapter(loaded)
    else:  # memory is short: the base goes before the int8 build with the adapter comes
        loaded = None
        loaded = load(AFTER)
    print("now:", loaded.description)
    after = first_token(loaded, probe, probe_tools)
    said_after = greedy(loaded, probe, probe_tools)
    for who, ft, said in (("base", before, said_before), ("with the adapter", after, said_after)):
        rows.append(
            {
                "model": who,
                "p(<tool_call>)": round(ft["tool_call"], 4),
                "p(```)": round(ft["fence"], 4),
                "p({)": round(ft["brace"], 4),
                "top first tokens": ", ".join(f"{t!r} {p:.2f}" for t, p in ft["top"][:3]),
                "greedy output": said,
            }
        )
    display(pd.DataFrame(rows))
    display(
        Markdown(
            f"p(`<tool_call>`) as the first token went from **{before['tool_call']:.4f}** to "
            f"**{after['tool_call']:.4f}**; the fence token from {before['fence']:.4f} to {after['fence']:.4f}."
        )
    )

# %% [markdown]
# ## The loss curve of the fine-tune that made the adapter
#
# Read from the saved results file (`benchmarks/results/sft_lora_qwen2.5-coder-0.5b.json`); the adapter's
# manifest says which data, settings and commit produced it.

# %%
man = adapter_manifest()
curve_path = results_file("sft_lora_qwen2.5-coder-0.5b.json", required=False)
if curve_path:
    saved = json.loads(curve_path.read_text())
    losses = saved["curve"]["losses"]
    fig = go.Figure(
        go.Scatter(y=losses, mode="lines+markers", name="group loss"),
        layout=dict(
            title="Fine-tune loss, one group per step",
            xaxis_title="optimizer step (one group)",
            yaxis_title="cross-entropy on trained tokens",
            height=380,
        ),
    )
    fig.show()
    m = saved["manifest"]
    display(
        Markdown(
            f"{m['steps']} steps over {m['data']['examples']} generated conversations (data sha256 "
            f"`{m['data']['sha256'][:12]}…`), rank {m['settings']['rank']} adapters on layers "
            f"{m['settings']['first_layer']}–23, {m['seconds'] / 60:.0f} minutes at "
            f"{m['tokens_per_s']:.0f} tokens/s on {m['machine']['cpus']} cores ({m['machine']['dtype']}); loss "
            f"{m['loss_first10']:.2f} (first 10 steps) → {m['loss_last10']:.2f} (last 10)."
        )
    )
else:
    print("no saved training results in this checkout")

# %% [markdown]
# ## A live mini-run: watch p(`<tool_call>`) move
#
# A fresh copy of the base model, a few LoRA steps on tiny generated groups (four conversations each), and after
# each step the probe's first-token probability of `<tool_call>`. It is sized for a classroom laptop (a few
# minutes on two cores); the adapter above had many more steps.

# %%
TRAINABLE = REAL and AFTER == "apply"  # training needs the float model beside this one
if REAL and not TRAINABLE:
    print(
        f"the live mini-run trains the float model (~{FULL_MODEL_BYTES['float32'] / 2**30:.1f} GB); "
        f"{memory_available() / 2**30:.1f} GB are available here, so it is not run: the loss curve above and the "
        "results below come from the full training run"
    )
if TRAINABLE:
    loaded = None  # the model with the adapter goes before a fresh base is trained (two float copies: 5 GB)
    fresh = load("qwen2.5-coder-0.5b", quiet=True)
    run = mini_run(fresh, probe, probe_tools, steps=from_env("TOOLKIT_MINI_STEPS", 5, count(1, 200)))
    df = pd.DataFrame(run)
    display(df)
    go.Figure(
        go.Scatter(x=df["step"], y=df["p_tool_call"], mode="lines+markers"),
        layout=dict(
            title="p(<tool_call>) after each LoRA step", xaxis_title="step", yaxis_title="p(<tool_call>)", height=340
        ),
    ).show()
    display(
        Markdown(
            f"In {len(run) - 1} steps ({df['seconds'].sum():.0f} s) p(`<tool_call>`) went from "
            f"{run[0]['p_tool_call']:.4f} to {run[-1]['p_tool_call']:.4f}."
        )
    )
    del fresh

# %% [markdown]
# ## Measured before and after: BFCL, like for like
#
# Both results files keep every case's output, so the base model is scored on exactly the cases the adapter
# ran. *Native* mode is the honest one: no grammar, `tool_choice` auto, no forced prefix. The tag rate is the
# share of answers that hold a `<tool_call>` block. *Prompt* mode describes the functions in the system text in
# BFCL's prompt style, with no tools section in the template — a layout the training data never showed. *Constrained*
# mode puts the grammar back over the adapter's answers; the adapter should not do worse there than the base model.
# The published rows are the leaderboard's columns that match what the kit runs (Python simple, non-live
# irrelevance).

# %%
base_path = results_file("bfcl_qwen2.5-coder-0.5b.json", required=False)
lora_path = results_file("bfcl_qwen2.5-coder-0.5b+lora.json", required=False)
if base_path and lora_path:
    cmp = compare(load_results(base_path), load_results(lora_path))
    table = pd.DataFrame(
        [
            {
                "mode": r["mode"],
                "category": r["category"],
                "n": r["adapter"]["n"],
                "base %": round(100 * r["base"]["accuracy"], 1),
                "adapter %": round(100 * r["adapter"]["accuracy"], 1),
                "adapter 95% CI": f"{100 * r['adapter']['low']:.0f}–{100 * r['adapter']['high']:.0f}",
                "base tag rate %": round(100 * r["base"]["tag_rate"], 1),
                "adapter tag rate %": round(100 * r["adapter"]["tag_rate"], 1),
            }
            for r in cmp["rows"]
        ]
    )
    display(table)
    display(pd.DataFrame(LIKE_FOR_LIKE).T.drop(columns="source"))
    t = pd.DataFrame(targets(cmp))
    display(t)
    missed = t[~t["met"]]
    display(
        Markdown(
            f"Native mode: a `<tool_call>` block where a call is due in **{100 * cmp['adapter_tag_rate_due']:.1f}%** "
            f"of the cases with the adapter vs {100 * cmp['base_tag_rate_due']:.1f}% without. "
            f"{len(t) - len(missed)} of {len(t)} targets met"
            + (
                "; missed: " + "; ".join(f"{r.target} by {-r.gap:.1f} points" for r in missed.itertuples())
                if len(missed)
                else ""
            )
            + "."
        )
    )
    prompt_rows = [r for r in cmp["rows"] if r["mode"] == "prompt" and r["category"] != "irrelevance"]
    if prompt_rows:
        n_p = sum(r["adapter"]["n"] for r in prompt_rows)
        declined = sum(r["adapter"]["kinds"].get("no_call", 0) for r in prompt_rows)
        base_declined = sum(r["base"]["kinds"].get("no_call", 0) for r in prompt_rows)
        display(
            Markdown(
                f"Prompt mode, where a call is due: the adapter answers with text (no call) in **{declined} of "
                f"{n_p}** cases, the base model in {base_declined}. Training taught the format *and* the layout: "
                "with no tools section in the template, the adapter reads the request as one its tools cannot serve."
            )
        )
    print(markdown(cmp).split("paired, on the same cases")[1])
else:
    print("the saved BFCL results (base and adapter) are not in this checkout")

# %% [markdown]
# The run above samples a few seeded cases per category, so its intervals are wide. The adapter was also run on
# *every* case of the five categories in native mode and, in constrained mode, on every case of the categories
# where its sampled constrained score sat below the base model's (on the same cases, or over the whole category);
# the base model's saved run covers every case too, so the comparison below is paired over whole categories.

# %%
full_rows, full_targets = [], []
for name in ("full/bfcl_qwen2.5-coder-0.5b+lora.json", "full/constrained/bfcl_qwen2.5-coder-0.5b+lora.json"):
    p = results_file(name, required=False)
    if base_path and p:
        full = compare(load_results(base_path), load_results(p))
        full_rows += [
            {
                "mode": r["mode"],
                "category": r["category"],
                "n": r["adapter"]["n"],
                "base %": round(100 * r["base"]["accuracy"], 1),
                "adapter %": round(100 * r["adapter"]["accuracy"], 1),
                "adapter 95% CI": f"{100 * r['adapter']['low']:.1f}–{100 * r['adapter']['high']:.1f}",
            }
            for r in full["rows"]
        ]
        full_targets += targets(full)
if full_rows:
    display(pd.DataFrame(full_rows))
    display(pd.DataFrame(full_targets))
else:
    print("the full-category BFCL runs are not in this checkout")

# %% [markdown]
# ## Free-form questions through the host loop
#
# `benchmarks/loop_questions.py` asks the loop questions written before training (never trained on). The base
# model runs with the kit's crutches (first-token gate, answer prefix, call caps: an older, smaller question set)
# and with none of them, like for like with the adapter, which runs with none. The `fresh` set was written later,
# after the adapter's first loop results had been read, so nothing in its data was shaped by these questions.

# %%
rows = []
for name, label in (
    ("loop_questions_after.json", "base, kit defaults"),
    ("loop_questions_base-free.json", "base, no crutches"),
    ("loop_questions_lora.json", "adapter, no crutches"),
    ("loop_questions_base-free_fresh.json", "base, no crutches"),
    ("loop_questions_lora_fresh.json", "adapter, no crutches"),
):
    p = results_file(name, required=False)
    if p:
        d = json.loads(p.read_text())
        secs = [r["seconds"] for r in d["rows"]]
        rows.append(
            {
                "run": label,
                "questions": d.get("question_set", "main"),
                "model": d["model"],
                "met": f"{d['met']}/{d['total']}",
                "median s per question": sorted(secs)[len(secs) // 2] if secs else None,
                "settings": json.dumps(d["settings"], default=str)[:120],
            }
        )
display(pd.DataFrame(rows))
