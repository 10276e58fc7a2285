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
# # 03 · The host loop: generate, parse, execute, feed back — and what the cache saves
#
# The model only ever generates text. Everything else in a tool call happens in the *host*: it cuts the
# `<tool_call>` block out of the output, checks the arguments, runs the function, and appends the result as a
# `role="tool"` message; then it sends a **new request** whose prompt is the old one plus the call plus the
# result (book §14.5.2 steps 4–6; "Tool Use" §3.1). Nothing waits inside the model between the two requests;
# what makes the second request cheap is a prefix cache that still holds the keys and values of the shared
# beginning (§14.5.8). This notebook runs that loop live and measures, per turn, how many prompt tokens were
# reused and how many had to be computed again.

# %%
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import statistics

import ipywidgets as W
import torch
from IPython.display import Markdown, display

from toolkit import tools
from toolkit.backends.choose import backend_for, cache_note, choose, first_token_probs, is_served, model_line
from toolkit.backends.scripted import ScriptedBackend
from toolkit.calculator import calculator
from toolkit.conversations import LOOP_EXAMPLES
from toolkit.errors import ToolError
from toolkit.loop.examples import example, run_example
from toolkit.loop.loop import RULE, TOOL_CHOICES, run, timestamp_prefix
from toolkit.loop.steps import Executed, Rendered
from toolkit.models import template_for
from toolkit.paths import cpu_threads, results_file
from toolkit.prefix import prefix_stability
from toolkit.qwen import IM_END_ID, TOOL_CALL_ID
from toolkit.settings import LoopConfig
from toolkit.tokenizer import tokenizer_for
from toolkit.widgets.table import Table
from toolkit.widgets.trace import TraceView

torch.manual_seed(0)
torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
MODEL = os.environ.get("TOOLKIT_MODEL", "auto")  # auto: the real offline model if installed, else the stand-in
loaded = choose(MODEL, quiet=True)  # or the server TOOLKIT_BACKEND names (notebook 10)
print(model_line(loaded))
print("model that runs below:", loaded.description)
if not loaded.semantic:
    display(
        Markdown(
            "**This is a random-weight stand-in.** Every number about tokens, cache and time below is "
            "real; the calls and the text it writes mean nothing. Install the real model with "
            "`python -m toolkit models install-real` to see meaningful answers."
        )
    )

# %% [markdown]
# ## 1 · Tools are typed functions; the schema is generated from them
# Each demo tool is written once, as a Python function with type hints and a docstring. The JSON Schema that the
# template writes into the prompt is generated from that function (`transformers.utils.get_json_schema`), so
# the description the model reads and the code the host runs cannot drift apart. "Tool Use" §3.1 calls this the
# tool's four parts: a name, a description, typed parameters, and the function behind them.

# %%
print(json.dumps(tools.TOOLS["get_weather"].schema, ensure_ascii=False, indent=1))
print("needs a person's approval:", {n: t.needs_confirmation for n, t in tools.TOOLS.items()})

# %% [markdown]
# The calculator never calls `eval`: it has its own tokenizer and parser, and refuses anything that is not
# arithmetic, and anything too long, too deep or too large, with a message meant for the model.

# %%
for expr in [
    "250 * 15%",
    "15% of 250",
    "__import__('os')",
    "9**9**9",
    "1e308*1e308",
    "(" * 10_000 + "1" + ")" * 10_000,
]:
    t0 = time.perf_counter()
    try:
        out = calculator(expr)
    except ToolError as e:
        out = f"refused: {e}"
    print(f"{expr[:24]!r:<28} {(time.perf_counter() - t0) * 1e3:6.2f} ms  {out}")

# %% [markdown]
# ## 2 · The loop, written out
# Here is the whole host loop in plain code, from the kit's pieces, before the library's version hides it, in
# the six stages the library's loop names: **decide the turn** (render the messages and the tools' schemas into
# token ids, and pick the grammar the turn decodes under), **generate** until `<|im_end|>`, **parse** the
# `<tool_call>` blocks out of the text, **guard** the calls (here only a cap on calls per turn), **execute** them,
# and **feed back** the call and one `role="tool"` message per result; then go again until a turn has no call. The first turn decodes under the tools' grammar (it must start
# with a call, like `tool_choice="required"`); later turns decode freely. Errors (bad JSON, an unknown tool, wrong
# arguments, a tool that raises) come back from `parse_tool_calls` and `execute` as data, never as exceptions.

# %%
from toolkit.grammar.compile import bounded, compile_tool_choice
from toolkit.grammar.mask import GrammarMask
from toolkit.loop.execute import execute
from toolkit.parse import parse_tool_calls
from toolkit.render import render
from toolkit.schema import openai_schema


def host_loop(backend, tokenizer, messages, tools, template, max_turns=4, max_new_tokens=96, bound=None, max_calls=8):
    schemas = [openai_schema(t) for t in tools.values()]
    call_first = compile_tool_choice(
        [bounded(s, max_length=bound) if bound else s for s in schemas],
        tokenizer,
        "required",
        vocab_width=backend.vocab_width,
    )
    for turn in range(1, max_turns + 1):
        prompt = render(messages, schemas, template=template, tokenizer=tokenizer).ids  # 1 decide the turn:
        mask = GrammarMask(call_first) if turn == 1 else None  # a call first (as "required"), then free text
        g = backend.generate(prompt, max_new_tokens=max_new_tokens, stop_ids={IM_END_ID}, mask=mask)  # 2 generate
        text = tokenizer.decode([t for t in g.new_ids if t != IM_END_ID])
        content, calls = parse_tool_calls(text)  # 3 parse
        print(f"turn {turn}: prompt {len(prompt)} tokens, reused {g.reused}; the model wrote {text!r}")
        if not calls:  # no call: this is the answer
            messages.append({"role": "assistant", "content": text})
            return text
        for i, c in enumerate(calls):  # ids unique over the conversation, as an API's would be
            c.id = f"call_{turn}_{i}"
        calls = calls[:max_calls]  # 4 guard the calls (the library also holds repeats, and answers the skipped)
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in calls
                ],
            }
            if all(c.ok for c in calls)
            else {"role": "assistant", "content": text}
        )
        for r in execute(calls, tools):  # 5 execute
            print(f"   {r.status}: {r.name}({r.arguments}) -> {r.result}")
            messages.append(r.message())  # 6 feed back
    return None


ex_by_hand = example("calculator")
stand_in_settings = {} if loaded.semantic else dict(max_new_tokens=48, bound=8)  # random weights: see below
answer_by_hand = host_loop(
    backend_for(loaded),
    loaded.tokenizer,
    ex_by_hand["messages"],
    ex_by_hand["tools"],
    template_for(loaded),
    **stand_in_settings,
)
print("answer:", repr(answer_by_hand))

# %% [markdown]
# That is the mechanism. The library's `toolkit.loop.loop.loop` is the same six stages, one method each
# (`Host.decide_turn`, `Host.generate`, `Host.parse`, `RepeatGuard.check`, `Host.execute_calls`, `Host.feed_back`),
# plus what a host needs around them: the `tool_choice` rule (under `auto` the model's first token decides call or text), a repeat guard,
# a cap on calls per turn, a token budget, an answer prefix when the model keeps calling, and per-turn
# accounting of the cache (which is what the trace view below draws). It yields one typed step per stage.
# `run_example` calls it with `LoopConfig.for_model(loaded)`, printed below with where each value came from; for a random-weight stand-in it bounds every string to
# 8 characters (a model that writes noise never closes a string) and shortens the turns, as the cell above did.

# %% [markdown]
# ## 3 · The library's loop, live
# The trace view below updates as the loop runs. Per turn it shows what the prompt is made of — the tool
# definitions (the same every turn), the history, and the tokens that are new since the previous request — then
# the cache split (reused vs prefilled, plus generated) and the wall time of prefill, decode and the tools.
#
# The loop's settings are printed first, each with where it came from. `tool_choice` is named as the chat APIs name it: `auto` (text or
# calls — the default), `required`, `none`, or one tool's name. The rule printed with them says how each turn
# is decoded; every turn of the trace records which case it was (`mode`) and why (`rule`). This 0.5B model
# almost never writes the single `<tool_call>` token on its own: when it wants to call it starts with a fence,
# a brace or a `<` (the cell below prints its first-token choices for the calculator question). The host reads
# that first token as "the model starts a call" and decodes the turn under the tools' grammar (notebook 02), so
# the call is well-formed; any other first token starts a free-text answer.

# %%
ex0 = example("calculator")
ids0 = render(
    ex0["messages"], tools.schemas(list(ex0["tools"])), template=template_for(loaded), tokenizer=loaded.tokenizer
).ids
first0 = first_token_probs(loaded, ids0, k=6, tokens=(TOOL_CALL_ID,))  # on a vLLM server: its log-probabilities
print(
    f"p(<tool_call> as one token) = {first0['named'][TOOL_CALL_ID]:.2e}; top first tokens:",
    [(t, round(p, 3)) for t, p in first0["top"]],
    f"| computed by {first0['source']}",
)

# %%
print("settings:", LoopConfig.for_model(loaded).describe())
print("rule:", RULE)
view = TraceView(loaded.description, loaded.semantic)
display(view)
trace = run_example("calculator", loaded, on_step=view.on_step)
print("stop reason:", trace.stop.reason, "| answer:", trace.answer)
for r in trace.of(Rendered):
    print(f"turn {r.turn} [{r.mode}]: {r.rule}")

# %% [markdown]
# The message list after the loop is the API's view of the same conversation (compare "Tool Use" §3.1): the
# assistant message carries a structured `tool_calls` entry, the tool message carries the result as text.

# %%
for m in trace.messages:
    print(json.dumps(m, ensure_ascii=False))

# %%
if is_served(loaded):
    print(cache_note(loaded))
Table(
    trace.turns(),
    columns=[
        "turn",
        "mode",
        "prompt",
        "tools",
        "history",
        "new",
        "reused",
        "prefilled",
        "generated",
        "prefill_ms",
        "decode_ms",
        "constrained",
        "forced_prefix",
    ],
)

# %% [markdown]
# In turn 2 the prompt grew by the call and the result, yet only a few dozen tokens were prefilled: the rest was
# still in the cache. The reused count is a little *smaller* than turn 1's prompt plus its output, because the
# host stores the call as structured data and the template writes it back out; wherever its spelling or
# tokenization differs from what the model produced, the cache stops matching.
#
# ### What each tool choice allows
# Each mode is a grammar over the whole vocabulary (`toolkit.grammar.compile.compile_tool_choice`). The table asks
# each one whether it accepts five possible outputs, by replaying their tokens through xgrammar (no model
# runs here). Under `auto`, text is allowed, but a started call must fit a schema; `required` and a named tool
# must start with a call (then behave like `auto`); `none` masks out the `<tool_call>` token.

# %%
from toolkit.grammar.mask import replay

tok = loaded.tokenizer


def _call(name, **args):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


outputs = {
    "text": "Bonjour !",
    "get_weather(Paris)": _call("get_weather", city="Paris"),
    "calculator(1+1)": _call("calculator", expression="1+1"),
    "text, then a call": "Let me check. " + _call("get_weather", city="Paris"),
    "get_weather(town=…) (bad argument)": _call("get_weather", town="Paris"),
}
all_schemas = tools.schemas()
modes = {
    "auto": ("auto", all_schemas),
    "required": ("required", all_schemas),
    "none": ("none", []),
    "get_weather (named)": ("required", tools.schemas(["get_weather"])),
}
grid = {}
for label, (kind, sch) in modes.items():
    g = compile_tool_choice(sch, tok, kind, vocab_width=backend_for(loaded).vocab_width)
    grid[label] = {
        o: "accepted" if replay(g, tok.encode(t, add_special_tokens=False) + [IM_END_ID])[1] else "—"
        for o, t in outputs.items()
    }
Table([{"output": o, **{label: grid[label][o] for label in grid}} for o in outputs])

# %% [markdown]
# `tool_choice` binds the turn that answers the user. After a tool result the next turn is `auto` again (agent
# SDKs reset it the same way), otherwise a forced call would force another call forever. A question that needs
# two calls can make both: after the first result the model may open another call, and the host only starts
# the answer for it when its previous turn made nothing but repeated calls, or when the turn limit is reached.
#
# Try the other examples (a weather question; a two-city question where both calls may come in one turn and
# run in parallel in the host), or ask your own question with the same defaults:
# `python -m toolkit loop "Which is warmer, Paris or Tokyo?" --tool-choice auto`.

# %%
pick = W.Dropdown(options=sorted(LOOP_EXAMPLES), value="two_cities", description="example")
choice_ = W.Dropdown(
    options=["auto", "required", "none", "get_weather", "calculator"], value="auto", description="tool_choice"
)
go_ = W.Button(description="run")


def _run(_):
    view.clear()
    ex_tools = example(pick.value)["tools"]
    tc = choice_.value if choice_.value in TOOL_CHOICES or choice_.value in ex_tools else "auto"
    run_example(pick.value, loaded, on_step=view.on_step, tool_choice=tc)


go_.on_click(_run)
display(W.HBox([pick, choice_, go_]))

# %% [markdown]
# ### Eight free-form questions, before and after these defaults
# `benchmarks/loop_questions.py` asks the real offline model eight questions it has not seen in this kit's
# examples (arithmetic, a unit conversion, weather, two comparisons that need two calls, two that need no tool;
# Chinese and English) with all four demo tools mounted. A checker per question, written before any run,
# decides "met". "before" is the loop's old defaults (a call forced on turn 1, up to four calls per turn, the
# answer started after every tool result); "after" is the defaults printed above. The cell reads the saved
# results; it does not rerun them (that takes tens of minutes on two cores).

# %%
saved = {}
for which in ("before", "after"):
    f = results_file(f"loop_questions_{which}.json", required=False)  # benchmarks/results (toolkit.paths)
    if f is not None:
        saved[which] = json.loads(f.read_text(encoding="utf-8"))
if saved:
    bench = {}  # question -> its row: met and seconds, before and after
    for w, res in saved.items():
        for r in res["rows"]:
            capped = " (capped)" if r["why"].startswith("capped") else ""
            row = bench.setdefault(r["id"], {"question": r["id"]})
            row[f"{w} met"], row[f"{w} s"] = "met" if r["met"] else "not met" + capped, r["seconds"]
    display(Table(bench.values(), columns=["question"] + [f"{w} {c}" for w in saved for c in ("met", "s")]))
    lines = [
        f"- **{w}** ({res['date']}, commit {res['commit']}, {res['model'].split(' [')[0]}, "
        f"{res['machine']['cpus']} CPUs shared, load {res['machine']['load_avg_at_end'][0]:.1f} at the end"
        f"{', each task capped at %g s' % res['cap_s'] if res.get('cap_s') else ''}): "  # noqa: UP031
        f"{res['met']}/{res['total']} met"
        f"{'' if res.get('complete', True) else ' (INCOMPLETE: %d of %d questions ran)' % (res['total'], len(res['asked']))}"  # noqa: UP031
        f", median {statistics.median(r['seconds'] for r in res['rows']):.0f} s "
        f"per task (range {min(r['seconds'] for r in res['rows']):.0f}–{max(r['seconds'] for r in res['rows']):.0f} s)"
        for w, res in saved.items()
    ]
    display(Markdown("\n".join(lines)))
else:
    print("no saved results: run `python benchmarks/loop_questions.py --pass after`")

# %% [markdown]
# ## 4 · What the model gets wrong becomes a message, not a crash
# A host must survive bad output: JSON that does not parse, a tool that does not exist, arguments that fail the
# schema, a tool that raises or hangs, a call that changes something and was not approved (§14.5.9 lists these
# failure modes). Each becomes a structured error result that the model reads on its next turn. To show every
# path deterministically this cell uses a **scripted fake model** (no weights: it replays fixed texts).

# %%
tok25 = tokenizer_for("qwen2.5")  # the cached copy that §6 renders with too (each copy ~0.1 GB)
paris = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
script = [
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+"}\n</tool_call>',  # bad JSON
    '<tool_call>\n{"name": "search_web", "arguments": {"q": "news"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "write_note", "arguments": {"title": "todo", "text": "milk"}}\n</tool_call>',
    paris + "\n" + paris + "\n" + paris,  # the same call three times in one turn
    paris,  # and again in the next turn
    "Paris: 18 °C, partly cloudy.",
]
fake = ScriptedBackend(tok25, script)
scripted = run(fake, tok25, [{"role": "user", "content": "hi"}], tools.TOOLS, template="qwen2.5", max_turns=6)
for s in scripted.of(Executed):
    for r in s.results:
        print(f"turn {s.turn}: {r.status:<8} {r.name}: {json.dumps(r.result, ensure_ascii=False)[:110]}")
last = scripted.of(Rendered)[-1]
print(f"turn {last.turn} [{last.mode}]: {last.rule}")
print("stopped:", scripted.stop.reason, "| answer:", scripted.answer)

# %% [markdown]
# The same call again — in the same turn or a later one — is the "loop" failure of §14.5.9. The repeat guard
# works per call: the first one runs, every identical one gets a `repeated_call` note with the first one's result, and
# after a turn of nothing but repeats the host starts the answer (tools off). The other guards are a maximum
# number of turns and a token budget; each run records why it stopped.
#
# ## 5 · A timestamp at the top of the system prompt
# §14.5.8 warns that anything which changes the *start* of the prompt — such as the current time written into
# the system prompt — makes every request's prefix different, so the cache can keep almost nothing. The switch
# below puts a clock line at the very start of the system prompt, re-rendered on every turn.


# %%
def reuse_run(stamp: bool):
    return run_example("calculator", loaded, system_prefix=timestamp_prefix if stamp else None)


stamp_traces = {stamp: reuse_run(stamp) for stamp in (False, True)}
if is_served(loaded):
    print(cache_note(loaded))
rows = []
for stamp, t in stamp_traces.items():
    r = t.turns()[-1]
    rows.append(
        dict(
            timestamp=stamp,
            turn=r["turn"],
            prompt=r["prompt"],
            reused=r["reused"],
            prefilled=r["prefilled"],
            prefill_ms=r["prefill_ms"],
            answer=t.answer,
        )
    )
Table(rows)

# %%
stamp_box = W.Checkbox(value=False, description="timestamp at start of system prompt")
stamp_view = TraceView(loaded.description, loaded.semantic)


def _restamp(change):
    stamp_view.clear()
    run_example(
        "calculator", loaded, on_step=stamp_view.on_step, system_prefix=timestamp_prefix if change["new"] else None
    )


stamp_box.observe(_restamp, names="value")
display(W.VBox([stamp_box, stamp_view]))
stamp_view.show(stamp_traces[stamp_box.value])  # the run above; ticking the box runs the loop again, live

# %% [markdown]
# With the clock line, turn 2 reuses only the tokens before the first digit that changed, and prefills the
# whole rest again — tool definitions included. Put volatile facts at the end of the prompt, not the start.
#
# ## 6 · Does the template itself keep the prefix? Qwen3 vs Qwen2.5
# A cache helps only if each new prompt *extends* what the previous request left behind. Qwen3's template drops
# the `<think>` part of assistant turns that came before the latest user question. Within one question (a
# tool call and its result) the history is unchanged; but when the user asks something new, the earlier
# reasoning disappears from the rendering and the cache is good only up to the first rewritten turn. Qwen2.5
# writes no reasoning and never rewrites. (Rendering only, both with the real token ids; no model runs here.)

# %%
stab = prefix_stability("qwen3") + prefix_stability("qwen2.5")
Table(stab)

# %%
for template in dict.fromkeys(r["template"] for r in stab):  # each template's request that keeps the least
    r = min((r for r in stab if r["template"] == template), key=lambda r: r["kept"])
    print(
        f"{template:>8}: at request {r['request']} (after a {r['after']} message) {r['shared']}/{r['cached']} cached "
        f"tokens are still a prefix; {r['recompute']} tokens must be prefilled"
    )

# %% [markdown]
# ## 7 · The bill over many turns
# §14.5.3 sizes this for an agent with 10,000 tokens of tool definitions that adds 2,048 tokens per turn over
# 30 turns: prefilling everything every turn costs T/Δ + (R+1)/2 ≈ 20.4 times the tokens of prefilling only
# what is new. `benchmarks/prefix_reuse.py` runs that workload (scaled down on a CPU) on this backend, with and
# without reuse, and prints both ratios side by side.

# %%
T, D, R = 10_000, 2048, 30
without = sum(T + D * k for k in range(1, R + 1))
print(
    f"prefill tokens without reuse {without:,}, with reuse {D * R:,}: ratio {without / (D * R):.1f}; "
    f"formula T/Δ + (R+1)/2 = {T / D + (R + 1) / 2:.1f}"
)
