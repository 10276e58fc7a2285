"""§14.5.8 on a real server: what the engine does and does not do in a tool round trip, measured and saved.

Against one OpenAI-compatible server (started here: ``transformers serve`` on 127.0.0.1 with the real offline model,
stopped by PID; or ``--url``), five measurements, each saved with its raw numbers:
- idle: the calculator round trip (the kit's host loop, tokens mode) with a tool that takes 0.5 s; the client's wall
  clock of every request and of the tool — is any request open while the tool runs?
- stop: the stop ids sent, the server's ``finish_reason`` and token counts for a turn that ended at ``<|im_end|>``,
  and for a request cut by ``max_tokens`` (``length``): the host learns from the server how the turn ended.
- parallel: a two-city question under ``tool_choice="required"``; the calls the model wrote, and the host's side of
  a two-call answer — each call's start/end (run concurrently?) and the number of user turns the template renders
  for the results. When the model writes fewer than two calls, the two-call answer is written here, and saved as such.
- stream: the same prompt greedy with streaming off and on: the texts and the server's completion counts.
- prefix: per turn the server's ``usage.prompt_tokens_details.cached_tokens`` (None where it reports none), the
  prefix each turn shares with the previous request, and the shared prefix after compressing history.
Run:  python benchmarks/serving.py [--url URL] [--model qwen2.5-coder-0.5b|stand-in] [--json]
Saves benchmarks/results/serving.json (date, machine, model, server, commit); ``python -m toolkit claims`` reads it.
No timed asserts.

Leaves out: vLLM / SGLang (CUDA only here: the README gives their commands; ``--url`` runs this against them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402

TOOL_WAIT_S = 0.5


SPANS: list[dict] = []  # (tool, arguments, start, end) of every slow tool run, wall clock


def slow_calculator(expression: str) -> dict:
    """Evaluate an arithmetic expression exactly (this copy waits 0.5 s, like a remote API).

    Args:
        expression: the arithmetic to evaluate, e.g. "250 * 15%".
    """
    from toolkit.calculator import calculator

    t0 = time.time()
    try:
        time.sleep(TOOL_WAIT_S)
        return calculator(expression)
    finally:  # a call the tool refuses ran too
        SPANS.append(dict(tool="slow_calculator", args=expression, start=t0, end=time.time()))


def slow_weather(city: str) -> dict:
    """Current weather for a city from the kit's demo table (this copy waits 0.5 s, like a remote API).

    Args:
        city: the city name, e.g. "Paris".
    """
    from toolkit.tools import get_weather

    t0 = time.time()
    try:
        time.sleep(TOOL_WAIT_S)
        return get_weather(city)
    finally:  # a call the tool refuses ran too
        SPANS.append(dict(tool="slow_weather", args=city, start=t0, end=time.time()))


def measure(url, info, tok, template, who, max_new_tokens: int = 64) -> dict:
    """The five measurements; ``who`` is the ``Loaded`` or ``Served`` the loop settings come from."""
    from toolkit.backends.http_tokens import TokensBackend
    from toolkit.loop.examples import example
    from toolkit.loop.execute import execute
    from toolkit.loop.loop import run
    from toolkit.loop.steps import Executed, Generated, Rendered
    from toolkit.parse import parse_tool_calls
    from toolkit.prefix import shared_prefix
    from toolkit.qwen import IM_END_ID, STOP_IDS
    from toolkit.render import render
    from toolkit.settings import LoopConfig
    from toolkit.tools import Tool

    out: dict = {}
    # ---- idle: requests vs tool spans
    SPANS.clear()
    calc = Tool.from_function(slow_calculator, bounds={"expression": {"maxLength": 24}})
    ex = example("calculator")
    backend = TokensBackend(url, tok, info=info)
    kw = LoopConfig.for_model(
        who, template=template, tool_choice="required", max_turns=2, max_new_tokens=max_new_tokens
    )
    trace = run(backend, tok, ex["messages"], {"slow_calculator": calc}, config=kw)
    spans = list(SPANS)
    requests = [
        dict(turn=s.turn, t_sent=r["t_sent"], t_done=r["t_done"], finish_reason=r.get("finish_reason"))
        for s in trace.of(Generated)
        for r in s.generation.server["requests"]
    ]
    overlaps = [
        (q["turn"], i)
        for q in requests
        for i, sp in enumerate(spans)
        if q["t_sent"] < sp["end"] and sp["start"] < q["t_done"]
    ]
    out["idle"] = dict(
        requests=requests,
        tool_spans=spans,
        overlaps=overlaps,
        answer=trace.answer,
        calls_ran=sum(len(s.results) for s in trace.of(Executed)),
        notes=list(backend.notes),
    )
    # ---- stop: a turn ended by <|im_end|>, and one cut by max_tokens
    gens = trace.of(Generated)
    last = gens[-1].generation.server["requests"][-1]
    prompt = trace.of(Rendered)[0].prompt_ids
    cut = TokensBackend(url, tok, info=info, stream=False).complete(prompt, max_new_tokens=2, stop_ids={IM_END_ID})
    out["stop"] = dict(
        stop_ids_sent=sorted(STOP_IDS),
        finish_reason=last["finish_reason"],
        server_completion_tokens=last["usage"].get("completion_tokens"),
        kit_ids=last.get("completion_ids_kit"),
        turn_ends_with=gens[-1].generation.new_ids[-1:],
        im_end_id=IM_END_ID,
        text_has_im_end="<|im_end|>" in (last.get("text") or ""),
        cut=dict(
            max_tokens=2, finish_reason=cut["finish_reason"], completion_tokens=cut["usage"].get("completion_tokens")
        ),
    )
    # ---- parallel: two calls in one answer
    SPANS.clear()
    tools = {"slow_weather": Tool.from_function(slow_weather, bounds={"city": {"maxLength": 16}})}
    msgs = [{"role": "user", "content": "What is the weather in Paris and in Tokyo today? Look up both cities."}]
    kw2 = kw.but("the parallel-calls measurement", max_turns=1, max_new_tokens=max(60, max_new_tokens))
    t2 = run(TokensBackend(url, tok, info=info), tok, msgs, tools, config=kw2)
    model_text = t2.of(Generated)[0].text if t2.of(Generated) else ""
    model_calls = [
        dict(name=r.name, arguments=r.arguments, status=r.status) for s in t2.of(Executed) for r in s.results
    ]
    written_here = len(model_calls) < 2
    if written_here:  # the host's side of a two-call answer, written here: saved as such
        SPANS.clear()
        two = "\n".join(
            "<tool_call>\n" + json.dumps({"name": "slow_weather", "arguments": {"city": c}}) + "\n</tool_call>"
            for c in ("Paris", "Tokyo")
        )
        content, calls = parse_tool_calls(two)
        for i, c in enumerate(calls):
            c.id = f"call_{i + 1}"
        results = execute(calls, tools, parallel=True)
        wire = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        msgs = (
            msgs[:1] + [{"role": "assistant", "content": content, "tool_calls": wire}] + [r.message() for r in results]
        )
    text = render(msgs, None, template=template, tokenizer=tok).text
    tail = text[text.find("<|im_start|>assistant") :]
    spans2 = sorted(SPANS, key=lambda s: s["start"])
    out["parallel"] = dict(
        model_text=model_text,
        model_calls=model_calls,
        two_call_answer_written_here=written_here,
        call_spans=spans2,
        concurrent=len(spans2) >= 2 and spans2[1]["start"] < spans2[0]["end"],
        tool_messages=sum(m["role"] == "tool" for m in msgs),
        user_turns_after_call=tail.count("<|im_start|>user"),
        rendered_tail=tail[:700],
    )
    # ---- stream on vs off
    streams = {}
    for stream in (False, True):
        r = TokensBackend(url, tok, info=info, stream=stream).complete(prompt, max_new_tokens=16, stop_ids={IM_END_ID})
        streams["on" if stream else "off"] = dict(
            text=r["text"],
            finish_reason=r["finish_reason"],
            completion_tokens=r["usage"].get("completion_tokens"),
            wall_s=round(r["wall_s"], 3),
            first_token_s=None if r.get("first_token_s") is None else round(r["first_token_s"], 3),
        )
    out["stream"] = dict(streams, same_text=streams["off"]["text"] == streams["on"]["text"], max_new_tokens=16)
    # ---- prefix: the server's cached counts per turn, the shared prefix, and after compressing history
    prompts = [s.prompt_ids for s in trace.of(Rendered)]
    turns = []
    for i, (p, g) in enumerate(zip(prompts, gens)):
        first = g.generation.server["requests"][0]
        turns.append(
            dict(
                turn=i + 1,
                prompt=len(p),
                server_cached=first["usage"].get("cached_tokens"),
                shared_with_previous=shared_prefix(prompts[i - 1] + gens[i - 1].ids, p) if i else 0,
            )
        )
    compressed = [m for m in ex["messages"] if m["role"] in ("system", "user")][:2]
    compressed[-1] = dict(compressed[-1], content=compressed[-1]["content"] + " (earlier: slow_calculator gave 37.5)")
    cp = render(compressed, [calc.schema], template=template, tokenizer=tok).ids
    out["prefix"] = dict(
        turns=turns,
        compressed_prompt=len(cp),
        compressed_shared=shared_prefix(prompts[-1], cp),
        last_prompt=len(prompts[-1]),
        server_reports_cached=any(t["server_cached"] is not None for t in turns),
    )
    return out


# The chapter's (T, Δ, R) = (10,000, 2,048, 30) scaled to fit a 4,096-token CPU server: the same shape, smaller.
WORKLOAD = dict(T=1024, delta=256, R=8)
SALT_FIRST_ID = 20_000  # ordinary vocabulary ids (20001, 20002, ...): one per uncached round, never a prompt's start


def prefill_workload(url, info, tok, T: int, delta: int, R: int) -> dict:
    """§14.5.3 on the server: R rounds whose prompt grows by Δ tokens after a T-token tool block. Each round is one
    request with ``max_tokens=1`` (its wall time is the prefill, plus one decode step); "cached" sends the rounds in
    order, so each prompt extends the previous one; "uncached" changes the first token of every prompt, so no prefix
    can be reused. The prompt is real text: the template's rendering of the kit's realistic tool schemas (the T
    block), then policy passages as tool results (each Δ)."""
    from toolkit.backends.http_tokens import TokensBackend
    from toolkit.book.catalog import realistic_tools
    from toolkit.cost import ratio_closed, total_cache, total_no_cache
    from toolkit.qwen import IM_END_ID
    from toolkit.rag.corpus import passages as policy_passages
    from toolkit.render import render

    block = render([{"role": "user", "content": "hi"}], realistic_tools(), template="qwen2.5", tokenizer=tok).ids
    while len(block) < T:
        block = block + block
    passages = tok.encode(" ".join(p.text for p in policy_passages()), add_special_tokens=False)
    while len(passages) < delta * R:
        passages = passages + passages
    prompts = [block[:T] + passages[: delta * r] for r in range(1, R + 1)]
    b = TokensBackend(url, tok, info=info, stream=False)
    out = {}
    for how in ("uncached", "cached"):
        rows = []
        for r, ids in enumerate(prompts, 1):
            if how == "uncached":  # a first token no other prompt of this run has: no cached block can match
                ids = [SALT_FIRST_ID + r, *ids[1:]]
            got = b.complete(ids, max_new_tokens=1, stop_ids={IM_END_ID})
            rows.append(
                dict(round=r, prompt=len(ids), cached=got["usage"].get("cached_tokens"), wall_s=round(got["wall_s"], 3))
            )
        out[how] = dict(rows=rows, seconds=round(sum(x["wall_s"] for x in rows), 3))
    warm = False  # the first round's block is prefilled once, not assumed cached
    out.update(
        T=T,
        delta=delta,
        R=R,
        tokens_uncached=sum(len(p) for p in prompts),
        tokens_cached_closed=total_cache(T, delta, R, warm=warm),
        tokens_uncached_closed=total_no_cache(T, delta, R),
        ratio_closed=round(ratio_closed(T, delta, R, warm=warm), 3),
        ratio_seconds=round(out["uncached"]["seconds"] / max(out["cached"]["seconds"], 1e-9), 3),
        cached_hits=[x["cached"] for x in out["cached"]["rows"]],
    )
    return out


def run_engine(engine, a, loaded, tok, who):
    """Start ``engine`` on the real model (or use ``--url``), run the measurements and the workload, stop it."""
    from toolkit.backends.choose import template_of
    from toolkit.backends.http import probe
    from toolkit.backends.serve import LocalServer, folder_for

    server = None
    if a.url:
        url, template = a.url, who.template
    else:
        server = LocalServer(folder_for(loaded), engine=engine, threads=2)
        url, template = server.url, template_of(server.model)
    info = probe(url)
    try:
        data = measure(url, info, tok, template, who, a.max_new_tokens)
        data["workload"] = prefill_workload(url, info, tok, **WORKLOAD) if not a.no_workload else None
        if info.kind == "vllm":
            from toolkit.backends.vllm_local import cache_config

            data["kv_cache"] = cache_config(url)
        data["ready_s"] = round(server.ready_s, 1) if server else None
    finally:
        if server is not None:
            server.stop()
    return info, template, data


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--url", type=cliargs.url, default=None, help="a running server (default: start transformers serve here)"
    )
    p.add_argument(
        "--model",
        type=cliargs.model,
        default="qwen2.5-coder-0.5b",
        help="what to serve when starting one (or stand-in)",
    )
    p.add_argument("--max-new-tokens", type=cliargs.count(1, 4096), default=64)
    p.add_argument(
        "--out", type=cliargs.out_file, default=None, help="results file (default benchmarks/results/serving.json)"
    )
    p.add_argument(
        "--engine",
        choices=("transformers", "vllm", "both"),
        default="both",
        help="which server to start here (both: one after the other, compared; vllm needs `make vllm`)",
    )
    p.add_argument("--no-workload", action="store_true", help="skip the (T, Δ, R) prefill workload")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    from toolkit.backends.choose import choose
    from toolkit.backends.serve import engines_to_run
    from toolkit.eval.report import meta
    from toolkit.models import load

    try:
        engines, note_engines = engines_to_run(a.engine, a.url)
    except ValueError as e:
        p.error(str(e))
    if note_engines:
        print(f"note: {note_engines}")
    loaded = None
    if a.url:
        who = choose(url=a.url)
        tok, what = who.tokenizer, ""
    else:
        loaded = load(a.model, quiet=True)
        tok, who, what = loaded.tokenizer, loaded, loaded.description
    docs = {}
    for engine in engines:
        info, template, data = run_engine(engine, a, loaded, tok, who)
        doc = dict(
            meta=meta(
                info.model,
                ROOT,
                server=info.description,
                server_kind=info.kind,
                loaded=what,
                semantic=who.semantic,
                template=template,
                started_here=not a.url,
                tool_wait_s=TOOL_WAIT_S,
            ),  # fmt: skip
            **data,
        )
        name = "serving_vllm.json" if info.kind == "vllm" else "serving.json"
        path = Path(a.out) if a.out and len(engines) == 1 else ROOT / "benchmarks" / "results" / name
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
        docs[info.kind] = doc
        if a.json:
            print(json.dumps(doc, indent=1, ensure_ascii=False, default=str))
        else:
            report(doc, info, template, path)
    if len(docs) > 1 and not a.json:
        compare(docs)
    return 0


def compare(docs: dict) -> None:
    """vLLM beside transformers serve, measured in this run: ratios."""
    t, v = docs.get("transformers"), docs.get("vllm")
    if not (t and v and t.get("workload") and v.get("workload")):
        return
    tw, vw = t["workload"], v["workload"]
    print(f"\n(T, Δ, R) = ({vw['T']}, {vw['delta']}, {vw['R']}); closed-form token ratio uncached/cached "
          f"{vw['ratio_closed']}x ({vw['tokens_uncached_closed']} vs {vw['tokens_cached_closed']} tokens)")  # fmt: skip
    print(f"{'server':<14}{'uncached s':>12}{'cached s':>10}{'uncached/cached':>17}  cache hits per round")
    for kind, w in (("transformers", tw), ("vllm", vw)):
        print(f"{kind:<14}{w['uncached']['seconds']:>12}{w['cached']['seconds']:>10}{w['ratio_seconds']:>16}x  "
              f"{w['cached_hits']}")  # fmt: skip
    print(f"vLLM / transformers serve, cached workload: {vw['cached']['seconds'] / tw['cached']['seconds']:.3f}x the "
          f"seconds; uncached: {vw['uncached']['seconds'] / tw['uncached']['seconds']:.3f}x")  # fmt: skip


def report(doc: dict, info, template, path) -> None:
    data = doc
    i, s, par, st, pr = data["idle"], data["stop"], data["parallel"], data["stream"], data["prefix"]
    print(f"server: {info.description} | model: {info.model} | template {template}")
    print(f"idle:     {len(i['requests'])} requests, {len(i['tool_spans'])} tool runs, requests open during a tool: "
          f"{len(i['overlaps'])} | answer {i['answer']!r}")  # fmt: skip
    print(f"stop:     finish_reason {s['finish_reason']}, server {s['server_completion_tokens']} tokens / kit "
          f"{s['kit_ids']} ids, turn ends with {s['turn_ends_with']} | cut at 2: {s['cut']['finish_reason']}")  # fmt: skip
    print(f"parallel: model wrote {len(par['model_calls'])} call(s){' (two-call answer written here)' if par['two_call_answer_written_here'] else ''}; "
          f"concurrent {par['concurrent']}; {par['tool_messages']} results -> {par['user_turns_after_call']} user turn(s)")  # fmt: skip
    print(f"stream:   same text {st['same_text']} ({st['off']['completion_tokens']} vs {st['on']['completion_tokens']} "
          f"tokens) {st['on']['text']!r}")  # fmt: skip
    print(f"prefix:   server cached {[t['server_cached'] for t in pr['turns']]}, shared with previous "
          f"{[t['shared_with_previous'] for t in pr['turns']]}, after compressing {pr['compressed_shared']}/{pr['compressed_prompt']}")  # fmt: skip
    w = data.get("workload")
    if w:
        print(f"workload: (T, Δ, R) = ({w['T']}, {w['delta']}, {w['R']}): uncached {w['uncached']['seconds']} s, "
              f"cached {w['cached']['seconds']} s ({w['ratio_seconds']}x; closed form {w['ratio_closed']}x), "
              f"hits {w['cached_hits']}")  # fmt: skip
    if data.get("kv_cache"):
        print(f"kv cache: {data['kv_cache']}")
    print(f"saved {path}")


if __name__ == "__main__":
    raise SystemExit(main())
