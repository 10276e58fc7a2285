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
# # 04 · What an agent loop costs, and how often it fails
#
# Each tool call is cheap on its own. What grows fast is the loop around it: every turn is a fresh request
# whose prompt repeats the tool definitions and the whole conversation so far, and every turn is one more
# chance to go wrong. This notebook turns the book's arithmetic (§14.5.3 cost, §14.5.4 error compounding) into
# sliders, then checks every number and checkable statement of both chapters with code — the *claims ledger*.
#
# No neural model runs here (one section reads a saved run of the real offline model). The arithmetic is `toolkit.cost`; token counts come from the real Qwen3 tokenizer
# (built offline with the official ids); protocol facts come from the installed `mcp` SDK.

# %%
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from importlib.metadata import version

import pandas as pd
from IPython.display import Markdown, display

from toolkit import cost
from toolkit.book.catalog import realistic_tools
from toolkit.book.claims import check_all, coverage, coverage_line
from toolkit.book.ledger import FAILS
from toolkit.paths import results_file
from toolkit.render import tool_definition_cost
from toolkit.tokenizer import tokenizer_for
from toolkit.widgets.cost import DecayView, DecodeView, GrowthView

tok = tokenizer_for("qwen3")
print("model: none (arithmetic only) | tokenizer:", tok.name_or_path, "| mcp SDK:", version("mcp"))

# %% [markdown]
# ## 1 · The context grows every turn
#
# Call the tool block's size **T** tokens, and say each turn adds **Δ** tokens (the model's call plus the tool's
# result). Turn *k* then sends a prompt of T + Δ·k tokens. Without a prefix cache the engine prefills the whole
# prompt every time; with a cache that always hits, only the Δ new tokens are computed (the engine does not keep
# a request "paused" while a tool runs — it simply finds the old prefix in its cache, §14.5.8).
#
# Summing over R turns gives R·T + Δ·R(R+1)/2 against Δ·R, a ratio of **T/Δ + (R+1)/2**: a constant set by the
# tools plus a term that grows with every turn. The function below walks the loop turn by turn; the closed form
# is computed separately and the tests check that they always agree.

# %%
book = cost.growth(10_000, 2048, 30)
cold = cost.growth(10_000, 2048, 30, warm=False)
pd.DataFrame([book.summary(), cold.summary()], index=["tool block cached before turn 1", "cold first turn"])

# %% [markdown]
# Move the sliders. Grey is what the cache serves, orange what the engine actually computes this turn; without
# a cache the whole bar would be computed. The right panel adds them up. Untick *warm* to make the first
# request pay for the tool block as well — the book's 20.4× (§14.5.3) assumes it was already cached.

# %%
growth_view = GrowthView()
growth_view.widget

# %% [markdown]
# ### How big is T really?
# The book's 10,000 tokens stands for about 50 tools at ~200 tokens each. Measuring realistic schemas (verbs
# first, typed and described parameters, enums and bounds, as the "Tool Use" chapter's §3.1 guidelines ask) with
# the real tokenizer gives a somewhat smaller number per tool; the cost still grows linearly with the count.

# %%
rows = []
for n in (1, 10, 20, 50, 100):
    c = tool_definition_cost(realistic_tools(n), "qwen3")
    rows.append(
        dict(
            tools=n,
            total_tokens=c["total"],
            preamble=c["preamble"],
            per_tool_mean=round((c["total"] - c["preamble"]) / n, 1),
            ratio_at_30_turns=round(cost.growth(c["total"], 2048, 30).ratio, 2),
        )
    )
pd.DataFrame(rows)

# %% [markdown]
# ## 2 · Errors compound: p^k
#
# If each step (pick the right tool, fill the arguments, read the result correctly) succeeds with probability p
# and any failure sinks the task, k serial steps succeed with p^k (§14.5.4). The book calls this an upper-bound
# model: real steps are not independent and some failures are recoverable, but chain length still dominates.
# The table is table 14-11 with your p as an extra row and your k as an extra column; the right side answers
# the inverse question — how good must each step be to reach an overall target?

# %%
decay_view = DecayView()
decay_view.widget

# %%
need = cost.required_p(0.9, 20)
print(
    f"0.9 over 20 steps needs p = {need:.4f} per step: error rate {1 - need:.2%}, "
    f"one error per {cost.steps_per_error(need):.0f} steps"
)

# %% [markdown]
# ### Why a calculator tool exists at all (§14.5.1), measured
# A model writes a product digit by digit, each digit a guess from the tokens before it; exact carrying over
# twelve digits is where that breaks. `benchmarks/multiplication.py` asked the real offline model seeded products
# of two 6-digit numbers through the host loop, once with no tool mounted and once with only the calculator
# (greedy, the loop's defaults). The cell reads that saved run; it does not rerun it (minutes on two cores).

# %%
mult_file = results_file("multiplication.json", required=False)  # benchmarks/results (toolkit.paths)
if mult_file is None:
    print("no saved run: `python benchmarks/multiplication.py` (needs the real offline model) writes it")
else:
    mult = json.loads(mult_file.read_text(encoding="utf-8"))
    display(
        pd.DataFrame(
            [
                {
                    "a × b": f"{r['a']} × {r['b']}",
                    "exact product": r["product"],
                    "no tool: answer": (r["alone"]["answer"] or "")[:40],
                    "no tool: exact": r["alone"]["exact"],
                    "calculator: exact": r["tool"]["exact"],
                    "calculator calls (ran / repeats not run)": f"{sum(c.endswith('->ok') for c in r['tool']['calls'])}"
                    f" / {sum(c.endswith('->repeated') for c in r['tool']['calls'])}",
                }
                for r in mult["rows"]
            ]
        )
    )
    sm = mult["summary"]
    display(
        Markdown(
            f"**{mult['model'].split(' [')[0]}**, {sm['n']} products of {mult['digits']}-digit numbers "
            f"(seed {mult['seed']}, {mult['date'][:10]}, commit {mult['commit']}): exact without a tool "
            f"**{sm['alone_exact']}/{sm['n']}**, with the calculator **{sm['tool_exact']}/{sm['n']}** "
            f"(it called the calculator in {sm['tool_called']} of {sm['n']})."
        )
    )

# %% [markdown]
# ## 3 · Decode FLOPs and the memory-bandwidth floor
#
# Decoding one token costs about 2 × (active parameters) floating-point operations: one multiply and one add
# per weight (§14.5.3, using §3.8.8's rule). For a mixture-of-experts model only the active experts count. At
# batch 1 each decoded token must also stream every active weight from memory once, so memory bandwidth divided
# by the bytes of those weights bounds tokens per second from above — which is why decode, not prefill, often
# dominates the wall clock. Pick a model, a precision and a device.

# %%
decode_view = DecodeView()
decode_view.widget

# %%
llama = cost.MODELS["Llama 3 8B"]
for ctx in (12_048, 40_720, 71_440):
    att = cost.attention_flops_per_token(llama.layers, llama.attn_width, ctx)
    print(
        f"Llama 3 8B at {ctx:>6,} tokens of context: weights {2 * llama.active_params / 1e9:.1f} GFLOPs + "
        f"attention {att / 1e9:.1f} GFLOPs per decoded token"
    )

# %% [markdown]
# The 2N rule leaves out attention over the context. In an agent loop the context reaches tens of thousands of
# tokens, where that term is as large as the weights' share or larger — one of the caveats the ledger records.
#
# ## 4 · The claims ledger
#
# The chapters' checkable statements are listed in `toolkit/data/claims_inventory.tsv`, each mapped to a ledger
# entry or marked "not checkable here" with its reason; the cell prints the coverage. Each ledger entry restates
# a claim in our words with its section and checks it by running code: the arithmetic above, the tokenizer's
# flags, the kit's chat templates, BFCL's public tool definitions, the host loop, and an in-process MCP server
# from the installed SDK. Verdicts and caveats are computed; a verdict other than "holds" always says why.
# `python -m toolkit claims` prints the same ledger; `python -m toolkit figures` also writes it to
# `figures/claims.md` next to the regenerated figures.

# %%
ledger = check_all()
table = pd.DataFrame(
    [dict(section=c.section, claim=c.claim, evidence=c.evidence, verdict=c.verdict, why=c.why) for c in ledger]
)
print(table["verdict"].value_counts().to_string())
print(coverage_line(coverage(ledger)))
with pd.option_context("display.max_colwidth", 400):
    display(table)

# %% [markdown]
# The ones that do not hold, with the evidence and the reason:

# %%
for c in ledger:
    if c.verdict == FAILS:
        display(Markdown(f"**{c.claim}** ({c.section})  \nevidence: {c.evidence}  \nwhy: {c.why}"))

# %% [markdown]
# ## 5 · The book's figures, from data
#
# `make figures` (or `python -m toolkit figures --out figures`) regenerates figs 14-9, 14-10, 14-11 and table
# 14-11 in Chinese and English as SVG, PNG and PDF, each with its data as JSON/CSV beside it. Fig 14-9 is drawn
# from a trace the host loop records (with a scripted fake model, so it is reproducible), and fig 14-10 from the
# same `toolkit.cost.growth` the slider above uses. Two runs write byte-identical data files.
