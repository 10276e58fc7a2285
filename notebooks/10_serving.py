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
# # 10 · The same loop against a serving engine: what the engine does and does not do (§14.5.8)
#
# A class of forty runs one server and points every notebook at it. The host loop does not change: the kit still
# renders the prompt, parses `<tool_call>` blocks and runs the tools; only `generate` becomes an HTTP request to an
# OpenAI-compatible server. Book §14.5.8 lists what the engine must do for tool calling: keep no state while a
# tool runs, stop at `<|im_end|>`, hand parallel calls back as text for the host to run, and reuse the prefix of
# the next, longer request. This notebook shows each on a real server process started here on 127.0.0.1 — vLLM
# (its CPU build, where `make vllm` installed it) or else `transformers serve` — or on the server named by
# `TOOLKIT_BACKEND`. The first cell says which one runs; everything below is measured on it.

# %%
import gc
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import pandas as pd
import torch
from IPython.display import display

from toolkit.backends import http, vllm_local
from toolkit.backends.http_tokens import TokensBackend
from toolkit.backends.serve import LocalServer, default_engine, folder_for, model_to_serve
from toolkit.calculator import calculator
from toolkit.loop.examples import example
from toolkit.loop.execute import execute
from toolkit.loop.loop import run
from toolkit.loop.steps import Executed, Generated, Rendered
from toolkit.memory import give_back
from toolkit.models import load, template_for
from toolkit.parse import parse_tool_calls
from toolkit.paths import cpu_threads
from toolkit.prefix import shared_prefix
from toolkit.qwen import IM_END_ID, STOP_IDS
from toolkit.render import render
from toolkit.settings import LoopConfig
from toolkit.streamparse import assemble, stream_events
from toolkit.tools import Tool, get_weather
from toolkit.widgets.capacity import CapacityView

torch.manual_seed(0)
torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
MODEL = os.environ.get("TOOLKIT_MODEL", "auto")  # auto: the real offline model if installed, else the stand-in
URL = http.from_env()  # a classroom server, if TOOLKIT_BACKEND names one
if URL is None:  # a server started here holds the model itself: where memory is short, the int8 build
    MODEL, why = model_to_serve(MODEL)
    if why:
        print("model:", why)
loaded = load(MODEL, quiet=True)
tok, TEMPLATE = loaded.tokenizer, template_for(loaded)
server = None
if URL is None:  # start one here, bound to 127.0.0.1 and stopped by PID in the last cell
    folder, engine = folder_for(loaded), default_engine(loaded)
    loaded.model = None  # before the server starts: it holds its own copy, and where memory is short both do not fit
    gc.collect()
    give_back()  # the freed pages back to the system: glibc would keep them in this kernel
    server = LocalServer(folder, engine=engine, threads=cpu_threads())
    URL = server.url
loaded.model = None  # the kernel no longer needs the weights
info = http.probe(URL)
print(
    "model that runs below:",
    info.model,
    "|",
    loaded.description.split(" [")[0],
    "|",
    "weights:",
    "real" if loaded.semantic else "RANDOM-WEIGHT STAND-IN (mechanics only, never meaning)",
)
print("server:", info.description, "| started here, PID", server.pid if server else "(not ours)")
if server is not None:
    print(f"ready after {server.ready_s:.0f} s; command: {' '.join(server.argv[1:])}")

# %% [markdown]
# ## 1 · The server keeps nothing while a tool runs
#
# The calculator below waits half a second before it answers, like a slow API. Each turn is one request (a few
# when the host enforces the call's grammar by jump-forward, see below); between the turns the host runs the
# tool. The timestamps are the client's wall clock: when the tool runs, no request is open.

# %%
spans = []


def slow_calculator(expression: str) -> dict:
    """Evaluate an arithmetic expression exactly (this copy waits 0.5 s, like a slow remote API).

    Args:
        expression: the arithmetic to evaluate, e.g. "250 * 15%".
    """
    t0 = time.time()
    time.sleep(0.5)
    out = calculator(expression)
    spans.append((t0, time.time()))
    return out


slow = {"slow_calculator": Tool.from_function(slow_calculator, bounds={"expression": {"maxLength": 24}})}
ex = example("calculator")
backend = TokensBackend(URL, tok, info=info, max_rounds=3)
kw = LoopConfig.for_model(loaded, template=TEMPLATE, tool_choice="required", max_turns=2, max_new_tokens=40)
trace = run(backend, tok, ex["messages"], slow, config=kw)
t_start = min(s.generation.server["t_sent"] for s in trace.of(Generated))
rows = []
for s in trace.of(Generated):
    for r in s.generation.server["requests"]:
        rows.append(dict(what=f"turn {s.turn}: request", start_s=r["t_sent"] - t_start, end_s=r["t_done"] - t_start))
for a, b in spans:
    rows.append(dict(what="tool runs (host)", start_s=a - t_start, end_s=b - t_start))
timeline = pd.DataFrame(rows).sort_values("start_s").round(2)
display(timeline)
overlap = [
    (r.what, t.what)
    for r in timeline.itertuples()
    if r.what != "tool runs (host)"
    for t in timeline.itertuples()
    if t.what == "tool runs (host)" and r.start_s < t.end_s and t.start_s < r.end_s
]
print("requests open while a tool ran:", overlap or "none")
print("answer:", trace.answer)
for n in backend.notes:
    print("note:", n)

# %% [markdown]
# ## 2 · Stop tokens
#
# The model's turn ends when it emits `<|im_end|>`; the server stops there because the host says so. Here the stop
# ids travel in the request (for `transformers serve` as a generation config; vLLM and SGLang take
# `stop_token_ids`). The server's text leaves the stop token out, so `finish_reason="stop"` is how the host
# learns which way the turn ended — `"length"` means it was cut. vLLM also returns the generated ids themselves
# (`return_token_ids`), stop token included; `transformers serve` returns text, which the kit encodes back.

# %%
g0 = trace.of(Generated)[-1].generation
last = g0.server["requests"][-1]
print(
    "stop ids sent:",
    sorted(STOP_IDS),
    [tok.decode([i], skip_special_tokens=False) for i in sorted(STOP_IDS)],
    "| finish_reason:",
    last["finish_reason"],
    "| the server counted",
    last["usage"]["completion_tokens"],
    "generated tokens (its stop token included);",
    "the server returned those ids" if last.get("ids_from") == "server" else "the kit re-encodes the text to",
    last["completion_ids_kit"],
    "ids" if last.get("ids_from") == "server" else "ids, appending the stop token the text leaves out",
)
print("the turn as the kit holds it ends in:", [tok.decode([i], skip_special_tokens=False) for i in g0.new_ids[-3:]])

# %% [markdown]
# ## 3 · Two calls in one answer: run at the same time, returned in one user turn
#
# A question about two cities. The engine just generates text; if that text holds two `<tool_call>` blocks, it is
# the host that cuts them out and runs them — here concurrently, each weather lookup taking 0.5 s — and the chat
# template puts both results into ONE user turn.

# %%
calls_at = []


def slow_weather(city: str) -> dict:
    """Current weather for a city from the kit's demo table (this copy waits 0.5 s, like a remote API).

    Args:
        city: the city name, e.g. "Paris".
    """
    t0 = time.time()
    time.sleep(0.5)
    calls_at.append((city, t0, time.time()))
    return get_weather(city)


weather = {"slow_weather": Tool.from_function(slow_weather, bounds={"city": {"maxLength": 16}})}
msgs = [{"role": "user", "content": "What is the weather in Paris and in Tokyo today? Look up both cities."}]
kw2 = LoopConfig.for_model(loaded, template=TEMPLATE, tool_choice="required", max_turns=1, max_new_tokens=40)
t2 = run(TokensBackend(URL, tok, info=info, max_rounds=3), tok, msgs, weather, config=kw2)
ran = [r for s in t2.of(Executed) for r in s.results]
print("the model wrote:", repr(t2.of(Generated)[0].text))
print(f"calls in one answer: {len(ran)}", [(r.name, r.arguments, r.status) for r in ran])
if len(calls_at) >= 2:
    (c1, a1, b1), (c2, a2, b2) = sorted(calls_at, key=lambda c: c[1])[:2]
    print(
        f"ran concurrently: {c1} {a1 - a1:.2f}–{b1 - a1:.2f} s, {c2} {a2 - a1:.2f}–{b2 - a1:.2f} s (overlap: {a2 < b1})"
    )
else:  # the host's side on a two-call answer, labelled as written here (the small model wrote fewer calls)
    print(
        f"this model wrote {len(ran)} call(s). Below: the host's side of a two-call answer WRITTEN HERE (not by the "
        "model), as a model that makes parallel calls writes it: parsed, run concurrently, merged into one user turn."
    )
    blocks = [{"name": "slow_weather", "arguments": {"city": c}} for c in ("Paris", "Tokyo")]
    two = "\n".join(f"<tool_call>\n{json.dumps(b)}\n</tool_call>" for b in blocks)
    calls_at.clear()
    content, calls = parse_tool_calls(two)
    for i, c in enumerate(calls):
        c.id = f"call_{i + 1}"
    results = execute(calls, weather, parallel=True)
    (c1, a1, b1), (c2, a2, b2) = sorted(calls_at, key=lambda c: c[1])[:2]
    print(
        f"ran concurrently: {c1} {a1 - a1:.2f}–{b1 - a1:.2f} s, {c2} {a2 - a1:.2f}–{b2 - a1:.2f} s (overlap: {a2 < b1})"
    )
    wire = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    msgs = msgs[:1] + [{"role": "assistant", "content": content, "tool_calls": wire}] + [r.message() for r in results]
tool_msgs = [m for m in msgs if m["role"] == "tool"]
text = render(msgs, None, template=kw2.template, tokenizer=tok).text
tail = text[text.find("<|im_start|>assistant") :]
print(f"{len(tool_msgs)} tool result(s) -> user turns after the call: {tail.count('<|im_start|>user')}")  # one
print(tail[:600])

# %% [markdown]
# ## 4 · Streaming changes how the tokens arrive, not which tokens
#
# The same prompt, greedy, once as one JSON answer and once streamed (server-sent events). The text is the same;
# streaming only lets the host see the first token earlier.

# %%
prompt = trace.of(Rendered)[0].prompt_ids
streams = {}
for stream in (False, True):
    b = TokensBackend(URL, tok, info=info, stream=stream)
    streams[stream] = b.complete(prompt, max_new_tokens=8, stop_ids={IM_END_ID})
print("same text:", streams[False]["text"] == streams[True]["text"], "|", repr(streams[True]["text"]))
print(
    f"whole answer after {streams[False]['wall_s']:.2f} s (not streamed) | first token after "
    f"{streams[True]['first_token_s']:.2f} s, last after {streams[True]['wall_s']:.2f} s (streamed)"
)

# %% [markdown]
# A host that streams reads the call while it arrives: `toolkit.streamparse` turns the server's chunks into events —
# text, a call started, its name as soon as the name's string closes, the arguments' text as it comes, the call
# done. Put back together, the events give exactly what the one-shot parser reads from the whole text.

# %%
live = TokensBackend(URL, tok, info=info, stream=True).complete(prompt, max_new_tokens=64, stop_ids={IM_END_ID})
events = list(stream_events(live["chunks"]))
display(
    pd.DataFrame([{"#": i, "event": type(e).__name__, "content": repr(e)[:90]} for i, e in enumerate(events)]).head(25)
)
content, calls = assemble(events)
whole = parse_tool_calls(live["text"])
print(
    f"{len(live['chunks'])} chunks -> {len(events)} events; calls from the events {[(c.name, c.arguments) for c in calls]}"
)
print("events put back together == the one-shot parse of the whole text:", (content, calls) == whole)

# %% [markdown]
# ## 5 · Prefix-cache hits, and what compressing history costs
#
# Each turn's prompt starts with the previous one. A server with a prefix cache computes only the new tokens and
# says how many it reused (vLLM `usage.prompt_tokens_details.cached_tokens` with
# `--enable-prompt-tokens-details`, SGLang the same field). `transformers serve` has no prefix cache and reports
# none. Below, beside the server's field, is the kit's own count: the prefix each prompt shares with the previous
# request — what a perfect cache could reuse. vLLM caches whole blocks (its block size is read from its
# `/metrics`), so its hits are that count rounded down to a block. Compressing history (here: replacing the tool
# round trip by a one-line summary) shortens the prompt but changes the text early on, and the cache stops
# matching there.

# %%
prompts = [s.prompt_ids for s in trace.of(Rendered)]
cached = [s.generation.server["usage"].get("cached_tokens") for s in trace.of(Generated)]
rows = []
for i, p in enumerate(prompts):
    hit = shared_prefix(prompts[i - 1] + trace.of(Generated)[i - 1].ids, p) if i else 0
    rows.append(dict(turn=i + 1, prompt=len(p), reusable=hit, server_cached=cached[i]))
history = ex["messages"]
compressed = [m for m in history if m["role"] in ("system", "user")][:2]
compressed[-1] = dict(compressed[-1], content=compressed[-1]["content"] + " (earlier: slow_calculator gave 37.5)")
cp = render(compressed, [t.schema for t in slow.values()], template=kw.template, tokenizer=tok).ids
rows.append(dict(turn="compressed", prompt=len(cp), reusable=shared_prefix(prompts[-1], cp), server_cached=None))
hits = pd.DataFrame(rows)
display(hits)
print(
    "server reports cached tokens:",
    any(c is not None for c in cached),
    f"({info.kind}: {'no prefix cache, no field' if info.kind == 'transformers' else 'see the column'})",
)
if info.kind == "vllm":
    kv = vllm_local.cache_config(URL)
    print(
        f"vLLM's block size {kv['block_size']} tokens; its KV cache holds {kv['kv_cache_tokens']:,} tokens in "
        f"{kv['kv_cache_bytes'] / 2**30:.1f} GiB"
    )
for t, turn in enumerate(trace.of(Generated), 1):
    print(f"turn {t}:", turn.cache_line().strip() or "(this server reports no cache hits)")

# %% [markdown]
# What the host had to do itself on this server, from the backend's own notes: whether the server took the call's
# grammar (vLLM takes the kit's grammar as `structured_outputs` and the kit replays every token through its own
# matcher; a server that takes none gets the grammar enforced on the host by jump-forward: forced tokens appended,
# the server's tokens kept while the grammar allows them), and whether it took token ids or the rendered text.

# %%
for n in backend.notes:
    print("note:", n)
print(
    "prompt sent as:",
    sorted({r["prompt_format"] for s in trace.of(Generated) for r in s.generation.server["requests"]}),
    "| generated ids from:",
    sorted(
        {r.get("ids_from", "re-encoded text") for s in trace.of(Generated) for r in s.generation.server["requests"]}
    ),
)

# %% [markdown]
# ## 6 · How many students fit on one server
#
# A prefix cache holds every live session's keys and values. For the chapter's workload (T tool-definition tokens,
# Δ new tokens per turn, R turns) a session at its longest holds T + Δ·R tokens; the calculator below counts how
# many such sessions fit in a GPU's memory after the weights — each with its own copy of the tool block, or with
# the block stored once and shared — and the decode rate all of them together get at most (every step streams the
# weights once for the whole batch, plus each session's cache). `benchmarks/classroom.py` measures N = 1, 4, 16
# concurrent host loops against the server started above.

# %%
capacity_view = CapacityView()
display(capacity_view.widget)
r = capacity_view.result
print(
    f"{r.model} on {capacity_view.controls['memory'].value:.0f} GB: {r.sessions} sessions "
    f"({r.sessions_shared} with the tool block shared)"
)

# %%
if server is not None:
    pid = server.pid
    server.stop()
    print(f"server PID {pid} stopped:", not server.alive())
