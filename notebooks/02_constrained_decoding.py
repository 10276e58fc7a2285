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
import xgrammar as xgr
from IPython.display import Markdown, display

from toolkit import models, tools
from toolkit.backends.choose import choose, is_served, local_for, model_line
from toolkit.errors import ToolError
from toolkit.grammar.check import chat_prompt, check_output
from toolkit.grammar.compile import bounded, compile_schema, compile_tools
from toolkit.grammar.distortion import distortion
from toolkit.grammar.hf import sample
from toolkit.grammar.inspect import score, trace
from toolkit.grammar.served import generate_on
from toolkit.paths import cpu_threads
from toolkit.widgets.stepper import Stepper

torch.manual_seed(0)
torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
decoder = choose(os.environ.get("TOOLKIT_MODEL", "auto"))  # auto: the real model if installed; or TOOLKIT_BACKEND
print(model_line(decoder))
# The masks, per-step probabilities, scores and the distortion read the model's logits: a server returns tokens.
loaded = local_for(decoder, "the grammar masks, per-step probabilities, scores and distortion (the model's logits)")
model, tok = loaded.model, loaded.tokenizer
V = models.vocab_width(model)
print("model:", loaded.description)
if not loaded.semantic:
    display(
        Markdown(
            "**This run uses the random-weight stand-in** (the real offline model is not installed — "
            "`make real-model` — or `TOOLKIT_MODEL=stand-in` was set). Everything below shows the "
            "*mechanics* faithfully — real tokenizer, "
            "real grammar, real masks — but the model's choices mean nothing."
        )
    )
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
    weather = [bounded(t, max_length=16) for t in weather]
args_schema = weather[0]["function"]["parameters"]
print(json.dumps(args_schema, ensure_ascii=False, indent=1))
args_grammar = compile_schema(args_schema, tok, V)
print(f"\ngrammar xgrammar produced ({args_grammar.compile_ms:.1f} ms to compile):\n")
print(args_grammar.text)

# %% [markdown]
# A tool *call* has more around it: Qwen writes `<tool_call>`, a newline, `{"name": ..., "arguments": {...}}`,
# a newline and `</tool_call>`. In Qwen's vocabulary `<tool_call>` is **one** token (id 151657), and so is
# `</tool_call>` (151658). A grammar that only spelled them as text would also accept them built from four
# ordinary pieces (`<`, `tool`, `_call`, `>`), which the model never saw in training; the kit's *structural tag*
# binds each marker to its single token id — look for `Token(151657)` in the grammar.

# %%
call_grammar = compile_tools(weather, tok, mode="tag", vocab_width=V)
print(call_grammar.text)

# %% [markdown]
# ### One masked step, by hand
# Here is all that a grammar does at one step, with xgrammar's own API and nothing of the kit in between: a
# `GrammarMatcher` follows the grammar, `fill_next_token_bitmask` writes one bit per token id (1 = allowed next),
# `apply_token_bitmask_inplace` sets the logits of every other id to −∞, and the choice is made from what is left.
# `accept_token` moves the matcher on. The stepper below does the same at every step (`toolkit.grammar.mask.GrammarMask`
# wraps these calls) and records what each step allowed.

# %%
question = "What is the weather in Paris right now? Please answer in fahrenheit."
prompt = chat_prompt(tok, question, tools=weather)
matcher = xgr.GrammarMatcher(call_grammar.compiled)
bitmask = xgr.allocate_token_bitmask(1, V)
with torch.inference_mode():
    logits = model(input_ids=torch.tensor([prompt]), logits_to_keep=1).logits[:, -1].float()
matcher.fill_next_token_bitmask(bitmask)
masked = logits.clone()
xgr.apply_token_bitmask_inplace(masked, bitmask)
first = int(masked.argmax())
assert matcher.accept_token(first)
print(f"allowed ids: {int(torch.isfinite(masked).sum()):,} of {V:,}; the model's own pick: "
      f"{tok.decode([int(logits.argmax())])!r}, the grammar's pick: {tok.decode([first])!r} (id {first})")  # fmt: skip

# %% [markdown]
# ## 2 · Step through one constrained generation
# The slider walks through the generation. The top panel is the number of token ids the grammar allowed at each
# step, on a log axis: 1 means the grammar dictated the token (the model's preference did not matter); tens of
# thousands means "any character that may appear inside a string". The bottom panel compares the model's own
# distribution (blue) with the renormalised one after the mask (orange; the chosen token in green). The caption
# gives the probability mass the mask removed: when it is large, the model wanted to write something the grammar
# forbids.

# %%
tr = trace(model, tok, prompt, call_grammar, max_new_tokens=48, temperature=0.0)
print(
    f"{loaded.name}: {len(prompt)} prompt tokens, {len(tr.ids)} generated in {tr.seconds:.1f} s; "
    f"grammar finished: {tr.terminated}"
)
print(tr.text)
stepper = Stepper(tr, title=f"constrained decoding, step by step — {loaded.label}")
stepper.widget

# %% [markdown]
# The same trace as a table (for readers without widgets). `removed` is the probability the mask took away.

# %%
pd.DataFrame(
    [
        {
            "step": s.index + 1,
            "token": s.chosen_text,
            "id": s.chosen,
            "allowed": s.allowed,
            "p before": round(s.p_before, 4),
            "p after": round(s.p_after, 4),
            "removed": round(s.removed_mass, 4),
        }
        for s in tr.steps
    ]
)

# %% [markdown]
# Where did the grammar overrule the model? The steps where the mask removed more than half of the model's
# probability, and what the model would have written instead:

# %%
for s in tr.steps:
    if s.removed_mass > 0.5:
        wanted = s.top_before[0]
        print(
            f"step {s.index + 1}: model wanted {wanted[1]!r} (p={wanted[2]:.3f}); the grammar allowed "
            f"{s.allowed:,} token(s) and it wrote {s.chosen_text!r}"
        )

# %% [markdown]
# ## 3 · The same model and prompt, with and without the grammar
# Without the mask the model writes whatever its weights prefer. The real Qwen2.5-Coder-0.5B rarely uses
# Qwen's `<tool_call>` tags on its own: it tends to write the JSON bare or in a ```` ```json ```` fence, which a
# host that parses the template's format rejects. With the mask, every sample parses and validates (checked
# with `jsonschema`, not by eye). With `TOOLKIT_BACKEND` set, the two greedy rows (and section 4's call) are
# decoded by the server, its grammar enforced by the host between requests unless the server takes one itself;
# the sampled rows and everything that reads probabilities run on the local model, and the cells say so.

# %%
plain = generate_on(decoder, tok, prompt, None, max_new_tokens=48)  # local: xgrammar's own HF integration
masked = generate_on(decoder, tok, prompt, call_grammar, max_new_tokens=48)
if is_served(decoder):
    print(f"greedy rows decoded by the server: {model_line(decoder)}", *masked.notes, sep="\n  ")
    print("the server's constrained greedy ids equal the local trace's:", masked.ids == tr.ids)
    local_for(decoder, "the T=1.0 samples (four rows in one batch)")
else:
    assert masked.ids == tr.ids  # the hand-driven trace and xgrammar's LogitsProcessor agree under greedy decoding
samples = sample(model, tok, prompt, call_grammar, n=4, temperature=1.0, seed=0, max_new_tokens=48)
rows = [("unconstrained, greedy", plain), ("constrained, greedy", masked)] + [
    (f"constrained, T=1.0 sample {i}", g) for i, g in enumerate(samples)
]
table = []
for label, g in rows:
    chk = check_output(g.text, call_grammar)
    table.append(
        {
            "decoding": label,
            "output": g.text,
            "parses": chk.parses,
            "validates": chk.valid,
            "why not": chk.error,
            "tokens": len(g.ids),
        }
    )
print("model:", decoder.description if is_served(decoder) else loaded.description)
with pd.option_context("display.max_colwidth", 120):
    display(pd.DataFrame(table))
if is_served(decoder) and not table[1]["validates"]:  # the host stops a turn the server will not continue validly
    print(
        "the server's constrained row stopped before the call was complete: the server decodes without the grammar, "
        "and where its next token was refused and the grammar forced nothing, the host ended the turn "
        "(a server that takes the grammar itself finishes it)"
    )
first = 2 if is_served(decoder) else 1
assert all(r["validates"] for r in table[first:]), "a constrained output failed to validate"

# %% [markdown]
# ## 4 · Valid, and wrong
# The grammar is a *set* of strings, and every call inside the set passes, whatever it means. Here the user
# asks how much of 250 dollars they keep after a 15% tax, with a calculator tool available. The kit's host
# then runs the call and compares the result with the answer to the question actually asked, 250 × (1 − 0.15).
# A small model's call is well-formed — the grammar sees to that — but it can compute something else, such as
# the tax itself, 250 × 0.15: right shape, wrong meaning. The cell prints what the call computed and which of
# the two it is. No grammar can see the difference — it would have to know what the user meant.

# %%
calc_tools = tools.schemas(["get_weather", "calculator"])
if not loaded.semantic:
    calc_tools = [bounded(t, max_length=16) for t in calc_tools]
calc_grammar = compile_tools(calc_tools, tok, mode="tag", vocab_width=V)
tax_q = "I earn 250 dollars; my tax is 15%. How much do I keep?"
tax_prompt = chat_prompt(tok, tax_q, tools=calc_tools)
tax = generate_on(decoder, tok, tax_prompt, calc_grammar, max_new_tokens=48)
chk = check_output(tax.text, calc_grammar)
print("model:", decoder.name, "| parses:", chk.parses, "| validates:", chk.valid)
print(tax.text)
call = chk.values[0] if chk.values else {"name": None}
if call["name"] is None:
    print("no complete call within the token budget")
elif call["name"] == "calculator":
    try:
        result = tools.TOOLS["calculator"].call(call["arguments"])
    except ToolError as e:  # a well-formed call can still be refused by the tool itself
        result = {"error": str(e)}
    kept, tax_amount = 250 * (1 - 0.15), 250 * 0.15
    got = result.get("result")
    print(
        f"tool result: {result} | the question asks for 250 * (1 - 0.15) = {kept} | meaning right: "
        f"{got == kept} | computed the tax (250 * 0.15 = {tax_amount}) instead: {got == tax_amount}"
    )
else:
    print(f"the model called {call['name']!r}: a valid call to the wrong tool for this question")
if not loaded.semantic:
    print("(random weights: whatever it wrote is meaningless — which is exactly what the grammar cannot see)")

# %% [markdown]
# Both the model's call and the right one are inside the grammar. Scoring each whole call (teacher-forced
# through the mask) shows that the grammar accepts both to the last token; only the model's own probabilities
# prefer one, and the grammar never looks at meaning. Checking that an expression computes what was asked,
# that a city is the one the user meant or a unit the one they asked for is the host's job after parsing,
# together with permissions, audit and confirmation for risky tools (§14.5.2).


# %%
def calc_call(expression):
    body = json.dumps({"name": "calculator", "arguments": {"expression": expression}})
    return f"<tool_call>\n{body}\n</tool_call>"


candidates = [("the model's call", tax.text), ("the right call", calc_call("250 * (1 - 0.15)"))]
for label, text in candidates:
    sc = score(model, tok, tax_prompt, calc_grammar, text)
    print(
        f"{label:>16}: accepted by the grammar to the end: {sc.accepted and sc.terminated}; "
        f"log P under the mask = {sc.logp_masked:.2f}\n{'':>18}{text.splitlines()[1]}"
    )

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
    dprompt = chat_prompt(tok, dq, system="Answer with only a JSON string.")
else:
    dq, enum = "Which city?", ["Paris", "Parma", "Pavia", "Perth", "Lyon"]
    dprompt = chat_prompt(tok, dq)
enum_grammar = compile_schema({"enum": enum}, tok, V)
print(enum_grammar.text)
# The stand-in's forwards are cheap, the real model's are not: a looser cut-off for it (the cut mass is printed).
d = distortion(
    model, tok, dprompt, enum_grammar, eps=1e-3 if loaded.semantic else 1e-4, max_nodes=150 if loaded.semantic else 400
)
print(f"model: {loaded.name} | question: {dq!r}")
print(d.table())
print(
    f"\nthe model puts {d.valid_mass:.2e} of its probability on valid outputs at all; "
    f"{d.nodes} forwards; probability cut as negligible: {d.pruned:.1e}"
)
print(
    f"model's preferred valid answer: {d.argmax_model} | constrained decoding's: {d.argmax_masked} | "
    f"greedy constrained output: {d.greedy} | argmax changed: {d.changed}"
)

# %%
go.Figure(
    data=[
        go.Bar(
            x=[r[0] for r in d.rows],
            y=[r[1] for r in d.rows],
            name="model, renormalised over valid",
            marker_color="#3182bd",
        ),
        go.Bar(x=[r[0] for r in d.rows], y=[r[2] for r in d.rows], name="step-wise masked", marker_color="#e6550d"),
    ],
    layout=dict(
        barmode="group",
        height=360,
        yaxis=dict(title="probability", range=[0, 1]),
        xaxis=dict(title="the enum's values"),
        title=f"{dq}<br><sup>{loaded.label}</sup>",
    ),
)

# %% [markdown]
# ## What to remember
# - The mask is computed over the model's full logit width (151,936 for Qwen). The kit's offline tokenizer has
#   151,669 entries; the rows past them are padding that the mask must forbid too, so the bitmask is sized
#   from the model, never from `len(tokenizer)`.
# - Constrained output always parses; whether it is *right* is decided after parsing, by the host.
# - Step-wise masking changes which valid answer wins. Cures trade off cost: write schemas whose members do
#   not share first tokens with likely wrong answers, let the model answer freely and validate afterwards, or
#   score whole candidates (as the table above does) when the set is small.
#
# Try: `python -m toolkit constrain --schema my_schema.json --samples 5 --temperature 1.0 --json`.
