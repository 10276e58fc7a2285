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
# # 02 · Constrained decoding you can watch
#
# A host can only run a tool call it can parse. Constrained decoding makes parsing certain: the tool's JSON
# Schema is compiled into a grammar, and before every token is chosen the grammar marks which of the model's
# 151,936 token ids may come next; every other logit is set to −∞ (book §14.5.2, "约束解码的角色", building
# on §9.4). This notebook shows that mask at every step of a real generation, with
# [xgrammar](https://github.com/mlc-ai/xgrammar) doing the compiling and masking.
#
# Three things to take away, all from the same section of the book:
# 1. the mask guarantees **shape** — brackets, field names, types, enum members — so the output always parses;
# 2. it does **not** guarantee **meaning**: a wrong city in a well-formed call is still a well-formed call;
# 3. masking one step at a time and renormalising **changes the distribution** (§9.4.5): the answer
#    constrained decoding prefers is not always the one the model itself prefers among the valid answers.

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import json

import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import Markdown, display

from toolkit import constrain as C
from toolkit import models, tools
from toolkit.widgets.stepper import Stepper

torch.manual_seed(0)
torch.set_num_threads(min(2, os.cpu_count() or 1))
loaded = models.load(os.environ.get("TOOLKIT_MODEL", "auto"))  # auto: the real model if installed
model, tok = loaded.model, loaded.tokenizer
V = models.vocab_width(model)
print("model:", loaded.description)
if not loaded.semantic:
    display(Markdown("**This run uses the random-weight stand-in** (the real offline model is not installed: "
                     "`make real-model`). Everything below shows the *mechanics* faithfully — real tokenizer, "
                     "real grammar, real masks — but the model's choices mean nothing."))
print(f"tokenizer entries: {len(tok):,} | model logit width (bitmask width): {V:,}")

# %% [markdown]
# ## 1 · From a JSON Schema to a grammar
# The kit's weather tool declares its arguments as a JSON Schema. xgrammar turns it into an EBNF grammar: each
# rule is a piece of text the output must contain. The grammar below is *compact JSON*, `", "` and `": "` as
# separators, the way Qwen's template writes tool calls. For the random-weight stand-in every string also gets a
# `maxLength`: such a model almost never chooses the closing quote among ~150k tokens on its own, so an unbounded
# string would never end. A real model closes its strings and does not need the bound.

# %%
weather = tools.schemas(["get_weather"])
if not loaded.semantic:
    weather = [C.bounded(t, max_length=16) for t in weather]
args_schema = weather[0]["function"]["parameters"]
print(json.dumps(args_schema, ensure_ascii=False, indent=1))
args_grammar = C.compile_schema(args_schema, tok, V)
print(f"\ngrammar xgrammar produced ({args_grammar.compile_ms:.1f} ms to compile):\n")
print(args_grammar.text)

# %% [markdown]
# A tool *call* has more around it: Qwen writes `<tool_call>`, a newline, `{"name": ..., "arguments": {...}}`,
# a newline and `</tool_call>`. In Qwen's vocabulary `<tool_call>` is **one** token (id 151657), and so is
# `</tool_call>` (151658). A grammar that only spelled them as text would also accept them built from four
# ordinary pieces (`<`, `tool`, `_call`, `>`), which the model never saw in training; the kit's *structural tag*
# binds each marker to its single token id — look for `Token(151657)` in the grammar.

# %%
call_grammar = C.compile_tools(weather, tok, mode="tag", vocab_width=V)
print(call_grammar.text)

# %% [markdown]
# ## 2 · Step through one constrained generation
# The slider walks through the generation. The top panel is the number of token ids the grammar allowed at each
# step, on a log axis: 1 means the grammar dictated the token (the model's preference did not matter); tens of
# thousands means "any character that may appear inside a string". The bottom panel compares the model's own
# distribution (blue) with the renormalised one after the mask (orange; the chosen token in green). The caption
# gives the probability mass the mask removed: when it is large, the model wanted to write something the grammar
# forbids.

# %%
question = "What is the weather in Paris right now? Please answer in fahrenheit."
prompt = C.chat_prompt(tok, question, tools=weather)
tr = C.trace(model, tok, prompt, call_grammar, max_new_tokens=48, temperature=0.0)
print(f"{loaded.name}: {len(prompt)} prompt tokens, {len(tr.ids)} generated in {tr.seconds:.1f} s; "
      f"grammar finished: {tr.terminated}")
print(tr.text)
stepper = Stepper(tr, title=f"constrained decoding, step by step — {loaded.name}")
stepper.widget

# %% [markdown]
# The same trace as a table (for readers without widgets). `removed` is the probability the mask took away.

# %%
pd.DataFrame([{"step": s.index + 1, "token": s.chosen_text, "id": s.chosen, "allowed": s.allowed,
               "p before": round(s.p_before, 4), "p after": round(s.p_after, 4),
               "removed": round(s.removed_mass, 4)} for s in tr.steps])

# %% [markdown]
# ## 3 · The same model and prompt, with and without the grammar
# Without the mask the model writes whatever its weights prefer — the real Qwen2.5-Coder-0.5B usually answers
# with a fenced ```` ```json ```` block instead of Qwen's `<tool_call>` tags, which a strict host parser
# rejects. With the mask, every sample parses and validates (checked with `jsonschema`, not by eye).

# %%
plain = C.generate(model, tok, prompt, None, max_new_tokens=48)
masked = C.generate(model, tok, prompt, call_grammar, max_new_tokens=48)  # xgrammar's own HF integration
assert masked.ids == tr.ids  # the hand-driven trace and xgrammar's LogitsProcessor agree under greedy decoding
samples = C.sample(model, tok, prompt, call_grammar, n=4, temperature=1.0, seed=0, max_new_tokens=48)
rows = [("unconstrained, greedy", plain), ("constrained, greedy", masked)] + [
    (f"constrained, T=1.0 sample {i}", g) for i, g in enumerate(samples)]
table = []
for label, g in rows:
    chk = C.check_output(g.text, call_grammar)
    table.append({"decoding": label, "output": g.text, "parses": chk.parses, "validates": chk.valid,
                  "why not": chk.error, "tokens": len(g.ids)})
print("model:", loaded.description)
with pd.option_context("display.max_colwidth", 120):
    display(pd.DataFrame(table))
assert all(r["validates"] for r in table[1:]), "a constrained output failed to validate"

# %% [markdown]
# ## 4 · Valid, and wrong
# The grammar is a *set* of strings. Every call inside the set passes, whatever it means. Below are two calls
# for the question above: the right one, and one with the wrong city and the wrong unit. Both are accepted by the
# grammar token for token; only the model's probabilities tell them apart, and the grammar never looks at those.
# Checking that the city is the one the user meant, that the unit is the one they asked for, or that an
# expression computes what they asked, is the host's job after parsing (together with permissions, audit and
# confirmation for risky tools — §14.5.2).

# %%
def call_text(city, unit):
    body = json.dumps({"name": "get_weather", "arguments": {"city": city, "unit": unit}}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


right, wrong = call_text("Paris", "fahrenheit"), call_text("Lyon", "celsius")
for label, text in [("right", right), ("wrong", wrong)]:
    sc = C.score(model, tok, prompt, call_grammar, text)
    chk = C.check_output(text, call_grammar)
    print(f"{label}: grammar accepts every token and ends: {sc.accepted and sc.terminated}; jsonschema valid: "
          f"{chk.valid}; log P model = {sc.logp_model:.2f}, under the mask = {sc.logp_masked:.2f}\n"
          f"  {text.splitlines()[1]}")

# %% [markdown]
# And what did the model actually do? A host-side check of *meaning* (not something a grammar can express):

# %%
got = C.check_output(masked.text, call_grammar).values[0]["arguments"]
print("model:", loaded.name, "| call:", got)
print("city is Paris:", got.get("city", "").strip().lower() == "paris",
      "| unit is fahrenheit:", got.get("unit") == "fahrenheit")
if not loaded.semantic:
    print("(random weights: any city it wrote is meaningless — which is exactly what the grammar cannot see)")

# %% [markdown]
# ## 5 · Distortion: masking step by step is not the same as choosing among valid answers
# Take a schema small enough to list every valid output: an enum of three cities. For each output we compute,
# exactly, (a) its probability under the unconstrained model, renormalised over the valid outputs — "which
# valid answer does the model prefer?" — and (b) its probability under step-wise masking + renormalisation,
# which is what constrained decoding samples from. Every tokenisation of every output is walked (xgrammar
# allows them all), one model forward per node of the tree.
#
# Why they differ: masking renormalises at every step *separately*. If the model's favourite answer is outside
# the enum but starts with the same token as an enum member, that first token keeps all the favourite's mass,
# and the grammar then forces the rest of the member — however unlikely the model finds that continuation.

# %%
if loaded.semantic:
    dq, enum = "Which city is the Golden Gate Bridge in?", ["San Diego", "Oakland", "Sacramento"]
    dprompt = C.chat_prompt(tok, dq, system="Answer with only a JSON string.")
else:
    dq, enum = "Which city?", ["Paris", "Parma", "Pavia", "Perth", "Lyon"]
    dprompt = C.chat_prompt(tok, dq)
enum_grammar = C.compile_schema({"enum": enum}, tok, V)
print(enum_grammar.text)
# The stand-in's forwards are cheap, the real model's are not: a looser cut-off for it (the cut mass is printed).
d = C.distortion(model, tok, dprompt, enum_grammar, eps=1e-3 if loaded.semantic else 1e-4,
                 max_nodes=150 if loaded.semantic else 400)
print(f"model: {loaded.name} | question: {dq!r}")
print(d.table())
print(f"\nthe model puts {d.valid_mass:.2e} of its probability on valid outputs at all; "
      f"{d.nodes} forwards; probability cut as negligible: {d.pruned:.1e}")
print(f"model's preferred valid answer: {d.argmax_model} | constrained decoding's: {d.argmax_masked} | "
      f"greedy constrained output: {d.greedy} | argmax changed: {d.changed}")

# %%
go.Figure(data=[go.Bar(x=[r[0] for r in d.rows], y=[r[1] for r in d.rows], name="model, renormalised over valid",
                       marker_color="#3182bd"),
                go.Bar(x=[r[0] for r in d.rows], y=[r[2] for r in d.rows], name="step-wise masked",
                       marker_color="#e6550d")],
          layout=dict(barmode="group", height=360, width=720, yaxis=dict(title="probability", range=[0, 1]),
                      title=f"{dq} — enum {enum} ({loaded.name})"))

# %% [markdown]
# ## What to remember
# - The mask is computed over the model's full logit width (151,936 here, more than the tokenizer's 151,669
#   entries: the extra rows are padding the mask must forbid too).
# - Constrained output always parses; whether it is *right* is decided after parsing, by the host.
# - Step-wise masking changes which valid answer wins. Cures trade off cost: write schemas whose members do
#   not share first tokens with likely wrong answers, let the model answer freely and validate afterwards, or
#   score whole candidates (as the table above does) when the set is small.
#
# Try: `python -m toolkit constrain --schema my_schema.json --samples 5 --temperature 1.0 --json`.
