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
# # 01 · A tool call, token by token
#
# A model that "calls a tool" does nothing new at inference time. The chat template writes the tool definitions
# into the prompt as ordinary text, the model writes a `<tool_call>` block as ordinary tokens, and the host —
# not the model — parses and runs the call and puts the result back into the conversation for the next request
# (book §14.5.2; "Tool Use" §3.1). This notebook walks the six steps of one round trip on two examples,
# a calculator question (what is 15% of 250?) and a weather question for 北京, with the real Qwen token ids.
#
# Colours in the token views mark *segments*: control tokens, system text, tool definitions, user text,
# assistant text, the tool call, the tool response, and the generation prompt. Hover a token for its id and
# flags; click it to select it.

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import ipywidgets as W
import pandas as pd
import torch
from IPython.display import HTML, Markdown, display

from toolkit.backends.choose import choose, model_line
from toolkit.book.catalog import realistic_tools
from toolkit.conversations import round_trip
from toolkit.loop.examples import run_example
from toolkit.loop.execute import execute
from toolkit.loop.steps import Generated
from toolkit.models import template_for
from toolkit.parse import parse_tool_calls
from toolkit.paths import cpu_threads
from toolkit.prefix import shared_prefix
from toolkit.qwen import VOCAB_WIDTH
from toolkit.render import render
from toolkit.tokenizer import template_text, tokenizer_for
from toolkit.tools import TOOLS
from toolkit.widgets.tokens import TokenView, legend_html, segment_table
from toolkit.widgets.toolcost import ToolCountCost

torch.manual_seed(0)
torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
tok = tokenizer_for("qwen3")
print("tokenizer:", tok.name_or_path, "| vocabulary with added tokens:", len(tok), "| model logit width:", VOCAB_WIDTH)

# %% [markdown]
# ## Step 1 — the tools become text in the system turn
# With `tools=` the Qwen3 template opens the system turn with a `# Tools` section: instructions, then one JSON
# line per tool inside `<tools></tools>`, then the format the model should answer in. It is plain text and it
# costs tokens on every request, because the model keeps no state between requests (§14.5.2 step 1).

# %%
calc = round_trip("calculator")
first = render(calc.first, calc.tools, "qwen3")
print(first.text)
display(HTML(legend_html()))
view1 = TokenView(first)
display(view1)
display(pd.DataFrame(segment_table(first)))

# %% [markdown]
# ## Step 2 — the model writes the call as ordinary tokens
# `<tool_call>` and `</tool_call>` are single *added* tokens, not spelled out letter by letter, and they are not
# *special*: in Qwen only the control tokens such as `<|im_start|>` / `<|im_end|>` carry `special=True`. So the
# call is sampled from the same logits as any other text.

# %%
for text in ("<tool_call>", "</tool_call>", "<|im_start|>", "<|im_end|>", "<tool_response>", "<think>"):
    tid = tok.convert_tokens_to_ids(text)
    at = tok.added_tokens_decoder[tid]
    print(f"{text:<18} id {tid}  special={at.special}")
call_text = render(calc.first + [calc.call], calc.tools, "qwen3", add_generation_prompt=False)
call_tokens = [t for t in call_text.tokens if t.segment == "tool_call"]
print("\nthe call as tokens:", [(t.id, t.text) for t in call_tokens])

# %% [markdown]
# Now a model. `load("auto")` takes the model the kit tests: the real offline Qwen2.5-Coder-0.5B-Instruct with the
# kit's LoRA adapter merged (the one that learned to write `<tool_call>`, notebook 11; `make lab` installs it), in
# int8 where memory is short (Binder), or — only where nothing could be installed — a **random-weight stand-in**
# that has Qwen's shape and vocabulary but no knowledge: its output shows the mechanics only. A hub model such as
# Qwen3-0.6B runs only when named (`TOOLKIT_MODEL=Qwen/Qwen3-0.6B`).
# When `TOOLKIT_BACKEND` names a server (`http://host:port/v1`, notebook 10), the server's model decodes instead:
# the kit still renders the prompt and counts its ids; the ids shown are the kit's encoding of the server's text.
# The host constrains the model to the tool-call format (notebook 02 shows how) and stops at `<|im_end|>`.

# %%
loaded = choose("auto")  # the local model, or the server TOOLKIT_BACKEND names
print(model_line(loaded))
print("MODEL:", loaded.description)
if not loaded.semantic:
    display(
        Markdown(
            "**This is a random-weight stand-in: the tokens below show the mechanics of a call, "
            "not a meaningful answer.**"
        )
    )

# %% [markdown]
# ### The one call a host makes, beside the kit's rendering
# Everything above came from `toolkit.render`. A host that talks to this model renders with one call to the
# tokenizer's own chat template, `apply_chat_template(messages, tools=tools, tokenize=False)`. The cell below makes
# that call for the first request and compares the text byte for byte with the kit's rendering for the same model.
# With the real offline model the template is the one shipped with its weights (Qwen's); the stand-in's tokenizer
# carries the kit's own template, and the cell says which it was.

# %%
model_tok = loaded.tokenizer
by_template = model_tok.apply_chat_template(calc.first, tools=calc.tools, tokenize=False, add_generation_prompt=True)
by_kit = render(calc.first, calc.tools, template_for(loaded), tokenizer=model_tok).text
own = model_tok.chat_template != template_text(template_for(loaded))
print(
    "the tokenizer's chat template:", "the model's own, shipped with it" if own else "the kit's (the model ships none)"
)
print(f"byte-equal: {by_template.encode() == by_kit.encode()} ({len(by_template.encode())} bytes each)")
assert by_template.encode() == by_kit.encode(), "the kit's rendering differs from the model's template"
print(by_template)

# %%
trace = run_example("calculator", loaded, max_turns=2)
generated = trace.of(Generated)[0]
gen_tok = loaded.tokenizer
print("template used for this model:", template_for(loaded))
print("generated ids:", generated.ids)
print("as text:", repr(gen_tok.decode(generated.ids)))

# %% [markdown]
# ## Step 3 — generation stops at `<|im_end|>`
# `<|im_end|>` (id 151645) is the end-of-turn token; the engine stops there and hands the text to the host.
# The request is over — nothing waits inside the engine while the tool runs (§14.5.8).

# %%
print(
    "last generated id:",
    generated.ids[-1],
    "=",
    repr(gen_tok.decode(generated.ids[-1:])),
    "| eos:",
    gen_tok.eos_token,
    gen_tok.convert_tokens_to_ids(gen_tok.eos_token),
)

# %% [markdown]
# ## Step 4 — the host parses, validates and executes
# The host cuts the JSON out from between the tags, checks the arguments against the tool's schema, and runs the
# tool. All of this happens outside the model.

# %%
content, calls = parse_tool_calls(gen_tok.decode(generated.ids, skip_special_tokens=True))
for c in calls:
    print("parsed:", c.name, c.arguments, "error:", c.error)
results = execute(calls, {n: TOOLS[n] for n in ("calculator",)})
for r in results:
    print("executed:", r.status, r.result)
print("the scripted example's call:", calc.call["tool_calls"][0]["function"], "->", calc.executed[0])

# %% [markdown]
# ## Step 5 — the result returns as a `role="tool"` message … inside a *user* turn
# The API has a `tool` role; the token stream does not. Qwen's template wraps each result in
# `<tool_response>…</tool_response>` inside a `user` turn, and consecutive tool results share that one turn.
# The second request ends with the generation prompt `<|im_start|>assistant\n`.

# %%
second = render(calc.second, calc.tools, "qwen3")
print(second.text[len(first.text) - len("<|im_start|>assistant\n") :])
view2 = TokenView(second)
display(view2)

# %% [markdown]
# ## Step 6 — a new request with a longer prefix
# The next turn is a *new* request whose token ids start with all of the previous request's ids. A prefix cache
# can reuse that shared part; anything that changes the beginning (a timestamp in the system prompt) breaks it.

# %%
n_shared = shared_prefix(first, second)
print(
    f"request 1: {len(first)} tokens; request 2: {len(second)} tokens; shared prefix: {n_shared} "
    f"({n_shared / len(second):.0%} of request 2); new tokens: {len(second) - n_shared}"
)
assert second.ids[: len(first)] == first.ids

# %% [markdown]
# ## The same six steps for the weather in 北京

# %%
wx = round_trip("weather")
wfirst, wsecond = render(wx.first, wx.tools, "qwen3"), render(wx.second, wx.tools, "qwen3")
print(wsecond.text.split("</tools>")[-1])
print(f"shared prefix {shared_prefix(wfirst, wsecond)} of {len(wsecond)} tokens")
display(TokenView(wsecond))

# %% [markdown]
# ## Qwen3 and Qwen2.5 side by side
# Same messages, two templates. Qwen2.5 adds a default system prompt when none is given, and its vocabulary has
# no `<tool_response>` token — the tag costs four ordinary tokens there, one in Qwen3.

# %%
q3, q25 = render(wx.second, wx.tools, "qwen3"), render(wx.second, wx.tools, "qwen2.5")
rows = [dict(segment=s, qwen3=q3.counts[s], qwen2_5=q25.counts[s]) for s in q3.counts if q3.counts[s] or q25.counts[s]]
rows.append(dict(segment="TOTAL", qwen3=len(q3), qwen2_5=len(q25)))
display(pd.DataFrame(rows).set_index("segment"))
t25 = tokenizer_for("qwen2.5")
print(
    "<tool_response> in Qwen3:",
    tok.encode("<tool_response>", add_special_tokens=False),
    "| in Qwen2.5:",
    t25.encode("<tool_response>", add_special_tokens=False),
)
tail = lambda r: r.text.split("</tools>")[-1]
display(
    W.HBox(
        [
            W.VBox([W.HTML("<b>Qwen3</b>"), W.HTML(f"<pre>{tail(q3)}</pre>")]),
            W.VBox([W.HTML("<b>Qwen2.5</b>"), W.HTML(f"<pre>{tail(q25)}</pre>")]),
        ]
    )
)

# %% [markdown]
# ## What the tool definitions cost, every turn
# Each request re-renders every mounted tool (§14.5.3, first cost). Move the slider: the count is measured by
# rendering that many realistic tool definitions (`toolkit.book.catalog`) with the real tokenizer.

# %%
cost_view = ToolCountCost(tools=realistic_tools(100), template="qwen3", n=10)
display(cost_view.widget)
print(cost_view.summary())

# %% [markdown]
# ## One conversation, several families
# The same tools, question, call, result and answer, rendered by each model family's **own official package**:
# Qwen through the kit's templates, Mistral through `mistral-common` (its tokenizer files ship in the wheel),
# Llama (`llama3.1`, `llama3.2`) through `llama-models`, gpt-oss through `openai-harmony` (its o200k vocabulary rebuilt offline,
# `toolkit.o200k`). No family adds model structure: each only decides where the tools go as text, how the call is
# spelled, which token ends it, and how the result comes back. A family whose package is missing says so in one line.

# %%
from toolkit.families import render_all
from toolkit.families import rows as family_rows

families = render_all("weather")
table = pd.DataFrame(family_rows(families)).set_index("family")
display(table[["package", "tokens", "special_tokens", "tool_set_tokens", "stop"]])
display(table[["tools_go", "result_returns"]])

# %% [markdown]
# The call each family's model writes for the same question, up to and with the token that ends its turn
# (the host runs the tool when it sees that token), and the tokens it is made of (★ marks a special token):

# %%
for name, r in families.items():
    if isinstance(r, str):
        print(r)
        continue
    toks = r.call_tokens()
    pieces = " ".join(("★" if t["special"] else "") + repr(t["token"]) for t in toks)
    print(f"{name:18} {r.call!r}\n{'':18} {len(toks)} tokens: {pieces}\n")

# %% [markdown]
# ## Reading each family's call back, also while it streams
# The kit's one parser has a reader per family (`toolkit.readers`): Mistral's `[TOOL_CALLS]`, `llama3.1`'s JSON after
# `<|python_tag|>`, `llama3.2`'s pythonic list (read with `ast`, never run), harmony's `to=functions.NAME` message.
# The streaming reader (`toolkit.familystream`) gives the same calls for any chunking; here each call arrives one
# character at a time, and the name is known before the call is done.

# %%
from toolkit.familystream import family_stream_events
from toolkit.readers import read_calls
from toolkit.streamparse import CallDone, CallName

read_rows = []
for name, r in families.items():
    if isinstance(r, str):
        continue
    text, calls = read_calls(r.call, name)
    events = list(family_stream_events(list(r.call), name))
    kinds = [type(e).__name__ for e in events if isinstance(e, CallName | CallDone)]
    read_rows.append(
        dict(family=name, name=calls[0].name, arguments=calls[0].arguments, ok=calls[0].ok, streamed=" → ".join(kinds))
    )
display(pd.DataFrame(read_rows).set_index("family"))
