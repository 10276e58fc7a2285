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
# # 06 · Where tool calling comes from: the training loss mask
#
# Nothing in the network changes when a model learns to call tools: the skill sits in the weights (book
# §14.5.2), and the weights got it from fine-tuning on whole conversations — a question, the model's call, the
# result the tool sent back, the final answer — rendered into one token sequence with the same chat template
# the model will later be served with (§14.5.7).
#
# Not every token of such a sequence was written by the model. The system prompt and the tool definitions come
# from the host, the questions from a person, and the tool results from the *environment*. Supervised
# fine-tuning only scores the model on the positions it is responsible for; every other position gets the
# ignore label `-100` and adds nothing to the loss — the same trick that keeps the prompt out of the loss in
# ordinary instruction tuning (§8.1.2). The chapter warns what happens if the tool results are left in: the model
# is trained to *predict* them, so it learns to write them itself.
#
# This notebook shows the mask on real Qwen token ids, builds a small data set whose tool results really come
# from the kit's tools, fine-tunes a small random-weight model twice — with the mask and without — and measures
# how often each one invents a tool result.

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import html
import random
import time

import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import HTML, Markdown, display

from toolkit import trajectories
from toolkit.backends.choose import not_served
from toolkit.models import stand_in
from toolkit.paths import cpu_threads
from toolkit.qwen import VOCAB_WIDTH
from toolkit.render import render
from toolkit.sft.experiment import experiment
from toolkit.sft.labels import CONVENTION, label
from toolkit.tools import TOOLS
from toolkit.widgets.mask import MaskView

torch.manual_seed(0)
torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
T0 = time.perf_counter()
start = stand_in("qwen3", seed=0)
if line := not_served("training, losses and continuations (a server cannot be fine-tuned)"):
    print(line)
print(
    "model for the training runs: random-weight Qwen3-shaped stand-in,",
    f"{sum(p.numel() for p in start.parameters()) / 1e6:.1f}M parameters, vocabulary {start.config.vocab_size:,},",
    "CPU (toolkit.models.stand_in).",
)
print(
    "It starts from random weights: whatever it learns below is the FORMAT of the conversations, never their "
    "meaning; its numbers and city names are noise."
)
del start

# %% [markdown]
# ## 1 · The convention
#
# Which tokens does the model have to produce? Everything it writes after the host has opened its turn. At
# inference the host ends the prompt with `<|im_start|>assistant\n` (the *generation prompt*) and stops reading
# when the model writes `<|im_end|>`. So the kit labels the assistant's header as prompt (masked) and the stop
# token as output (trained) — a model that never learned to write `<|im_end|>` would not stop. The newline the
# template puts after `<|im_end|>` is written by the template once the model has already stopped, so it is
# masked too.
#
# The trained spans are found from the *message structure*, not by searching the text for tags: for assistant
# message *k*, render the conversation up to *k* with the generation prompt; the model's part starts where that
# prompt ends and runs to its `<|im_end|>`.

# %%
print(CONVENTION)

# %% [markdown]
# ## 2 · One trajectory, token by token
#
# Pick a trajectory: a parallel call (two weather calls in one turn, their two results in one user turn), a
# two-step chain (weather, then a calculator call that uses the temperature), a two-question conversation, and
# a question that needs no tool. Solid green tokens are trained (label = the token id); pale grey ones
# are masked (label = -100). The underline is the token's segment as `toolkit.render` reads it; hover a token
# for its index, id, segment and label. The toggle shows the baseline where *every* token is a target.

# %%
rng = random.Random(11)
picked = {k: trajectories.make(k, rng) for k in ("parallel", "chain", "multi_turn", "no_tool")}
labelled = {name: label(t.messages, t.tools, "qwen3") for name, t in picked.items()}
view = MaskView(labelled)
display(view.widget)

# %% [markdown]
# Per segment, how many tokens each trajectory trains on — both templates. Qwen2.5 has no `<think>` block (and
# writes a default system prompt when the conversation has none); Qwen3 opens the last answer with an empty
# `<think>\n\n</think>\n\n`, which the model writes itself, so it is trained.

# %%
rows = []
for name, t in picked.items():
    for template in ("qwen3", "qwen2.5"):
        ex = label(t.messages, t.tools, template)
        row = {"trajectory": name, "template": template, "tokens": len(ex.ids), "trained": sum(ex.trained)}
        for seg, c in ex.counts().items():
            row[seg] = f"{c['trained']}/{c['trained'] + c['masked']}"
        rows.append(row)
display(pd.DataFrame(rows).fillna("–").set_index(["trajectory", "template"]))

# %% [markdown]
# A check that does not trust the labelling code: the renderer segments the same text independently (by reading
# Qwen's turn structure back). Every system, tool-definition, user and tool-response token must be masked, every
# assistant, `<think>` and `<tool_call>` token trained, and the only trained control tokens must be the
# `<|im_end|>` that close assistant turns.

# %%
for name, t in picked.items():
    for template in ("qwen3", "qwen2.5"):
        ex = label(t.messages, t.tools, template)
        r = render(t.messages, t.tools, template, add_generation_prompt=False)
        by_segment = [
            tok.segment in ("assistant", "think", "tool_call")
            or (tok.text == "<|im_end|>" and r.tokens[tok.index - 1].segment in ("assistant", "think", "tool_call"))
            for tok in r.tokens
        ]
        print(
            f"{name:<10} {template:<8} ids equal: {ex.ids == r.ids}  labels == ids length: "
            f"{len(ex.labels) == len(ex.ids)}  mask == segments, token for token: {ex.trained == by_segment}"
        )

# %% [markdown]
# ## 3 · A small data set with real tool results
#
# §14.5.7 asks for more than single calls: chains that need several calls, and samples where the right move is
# to answer without a tool (so the model does not learn to call for everything). The generator below writes six
# kinds of calculator and weather trajectories. The assistant turns are scripted from a few phrasings; every
# tool message holds what `toolkit.tools` returned when the call was actually executed — recomputed here.
# (`experiment` below builds the same set again from the same seed, plus 40 held-out trajectories from
# another seed.)

# %%
SETTINGS = dict(
    template="qwen3",
    n_train=200,
    n_held_out=40,
    steps=220,
    batch_size=8,
    lr=8e-3,
    seed=0,
    data_seed=1,
    held_out_seed=2,
    max_new_tokens=40,
    samples=1,
    n_probes=30,
)
data = trajectories.dataset(SETTINGS["n_train"], seed=SETTINGS["data_seed"])
print(pd.Series([t.kind for t in data]).value_counts().to_string())
recomputed = all(TOOLS[c["name"]].call(c["arguments"]) == c["result"] for t in data for c in t.calls)
print(
    f"\n{sum(len(t.calls) for t in data)} tool calls, every stored result equals a fresh call of the real tool:",
    recomputed,
)
example = next(t for t in data if t.kind == "chain")
print("\none 'chain' trajectory as it is trained (qwen3 template), from the first user turn on:\n")
text = render(example.messages, example.tools, "qwen3", add_generation_prompt=False).text
print(text[text.index("<|im_start|>user") :])

# %% [markdown]
# ## 4 · Two fine-tunes: with the mask and without
#
# Both runs start from the *same* random stand-in (same seed), see the same batches in the same order, and use
# the same optimiser and learning-rate schedule. The only difference is the labels: the masked run scores the
# model's own tokens; the unmasked run scores every token, tool results included.
#
# One stated shortcut so this fits in about a minute per run on two CPU cores: the softmax covers only the
# token ids that occur somewhere in the data set (a few hundred, tool results included, so the masked model
# *could* write `<tool_response>`) instead of all 151,936; both runs use the same set, and decoding below uses it
# too. The full softmax would need a float32 logit per vocabulary entry at each of a batch's positions — the
# cell after the training run computes how many gigabytes that is per step, more than this notebook's memory
# budget; `fine_tune(..., vocab="full")` does it where a GPU is at hand. (One exact saving is also used: the system prompt and tool definitions every trajectory starts with
# are run once per batch and shared, which gives the same numbers at less cost.)


# %%
def show_progress(name, step, loss):
    if step % 50 == 0 or step == SETTINGS["steps"] - 1:
        print(f"{name:>8} step {step:>3}  loss {loss:7.3f}")


res = experiment(**SETTINGS, progress=show_progress)
print("settings:", res.settings)
full = res.runs["unmasked"]  # scores every token the model could be trained on
positions = full.target_tokens // full.steps
print(
    f"a full softmax would need {VOCAB_WIDTH:,} float32 logits × ~{positions:,} scored positions per batch = "
    f"{VOCAB_WIDTH * positions * 4 / 1e9:.2f} GB per step (the shortcut scores only the data's token ids)"
)

# %%
fig = go.Figure(
    data=[
        go.Scatter(
            y=res.runs[k].losses,
            name=f"{k} ({res.runs[k].target_tokens // res.runs[k].steps} loss positions/step)",
            mode="lines",
        )
        for k in ("masked", "unmasked")
    ],
    layout=dict(
        title="training loss<br>(each run averages over its own loss positions)",
        xaxis_title="step",
        yaxis_title="cross-entropy (nats)",
        yaxis_type="log",
        height=360,
    ),
)
display(fig)

# %% [markdown]
# The two losses are averages over different positions, so their heights are not comparable; what each run
# *learned* is measured on 40 held-out trajectories (a different seed) below.
#
# ## 5 · What each run learned
#
# Each held-out trajectory with a call is cut right after the model's `</tool_call><|im_end|>` and the newline,
# and the trained model is left to continue for 40 tokens *without* a stop token: greedily, and once sampled at
# temperature 1. In real serving the host would stop at `<|im_end|>` and run the tool; here we look at what the
# model would write if nobody stopped it. Does it open a user turn and write a `<tool_response>` itself?
#
# The teacher-forced numbers (negative log-likelihood per token, lower = more expected) tell the same story from
# another side: the unmasked model has learned to *predict* tool results; the masked one was never asked to.

# %%
table = pd.DataFrame(res.table()).set_index("")
display(table)


# %%
def examples(name, mode="greedy", n=3):
    """A few continuations of one run, escaped so that tags such as <tool_response> stay visible."""
    rows = [r for r in res.measurements[name].rows if r["mode"] == mode][:n]
    out = []
    for r in rows:
        p = res.probes[r["probe"]]
        made_up = (
            f" — its own 'tool result': <code>{html.escape(r['invented'][:80])}</code>" if r["tool_response"] else ""
        )
        out.append(
            f"<b>{name}, {mode}, held-out probe {r['probe']} ({p.kind})</b> — real tool result: "
            f"<code>{html.escape(p.real_results[0][:80])}</code>{made_up}"
            "<pre style='white-space:pre-wrap;background:#f6f6f6'>"
            f"{html.escape(repr(p.prompt_text[-60:]))}   ⟵ end of the prompt\n"
            f"{html.escape(repr(r['continuation']))}   ⟵ the model's continuation</pre>"
        )
    return "".join(out)


display(
    HTML(
        examples("unmasked")
        + examples("masked")
        + examples("unmasked", "sampled", 2)
        + examples("masked", "sampled", 2)
    )
)

# %% [markdown]
# ## 6 · Verdict

# %%
mg, ug = res.measurements["masked"].rate("greedy"), res.measurements["unmasked"].rate("greedy")
ms, us = res.measurements["masked"].rate("sampled"), res.measurements["unmasked"].rate("sampled")
matches = res.measurements["unmasked"].count("greedy", "matches_real")[0]
if ug > mg and us > ms:
    verdict = (
        f"**As §14.5.7 predicts.** Without the mask the model writes a `<tool_response>` of its own after "
        f"its call in {ug:.0%} of greedy continuations ({us:.0%} sampled); with the mask, {mg:.0%} "
        f"({ms:.0%} sampled). {matches} of the unmasked model's invented results equal what the tool really "
        "returned — they are made up (and with a random-weight stand-in they are format, not content)."
    )
else:
    verdict = (
        f"**Not the direction §14.5.7 predicts in this run:** unmasked {ug:.0%} greedy / {us:.0%} sampled, "
        f"masked {mg:.0%} / {ms:.0%}. With so few steps the unmasked model may not yet have learned the "
        "turn that follows a call; more steps (or a larger stand-in) would be the next thing to try."
    )
own_m, own_u = res.nll["masked"]["model_output"], res.nll["unmasked"]["model_output"]
verdict += (
    f"\n\nOn the tokens the model *should* write (its calls and answers), held-out NLL is {own_m:.2f} "
    f"nats/token with the mask and {own_u:.2f} without: "
    + (
        "the masked run, whose every gradient step went to those tokens, learned them better."
        if own_m < own_u
        else "here the masked run did not learn its own turns better."
    )
)
display(Markdown(verdict))
print(f"notebook time so far: {time.perf_counter() - T0:.0f} s")

# %% [markdown]
# Why: the unmasked run was scored on every token it was shown, so it was trained to predict that after a call
# come `<|im_end|>`, a user turn and a `<tool_response>` with something shaped like the tool's JSON. Nothing in
# its training said that those tokens come from elsewhere. Served with a stop at `<|im_end|>` this might go unnoticed; served without one, or asked
# to continue a transcript, it fabricates the environment's side of the conversation. The masked model was only
# ever scored on its own turns, so it has no reason to write the other side.
#
# How strong the effect is depends on the starting seed and the number of steps: a model this small is still
# learning the turn structure at 220 steps. `experiment(seed=1)` (or `template="qwen2.5"`, where
# `<tool_response>` is four ordinary tokens instead of one) runs the whole comparison again.
#
# **What this leaves out.** A real model (the stand-in learns layout, not arithmetic or weather); the full
# 151,936-way softmax (stated above); reinforcement learning in an environment, the other half of §14.5.7 (see
# §14.6); data hygiene for real trajectories — consent, minimising and redacting what tools returned, marking side
# effects — which §14.5.7 also requires before production traces may be trained on.
