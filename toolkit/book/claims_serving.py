"""§14.5.8 shown on a real server: the claims ``benchmarks/serving.py`` measured against an OpenAI-compatible server
(``transformers serve`` and vLLM's CPU build, both run here), each verdict computed from their saved results
(``benchmarks/results/serving.json``, ``serving_vllm.json``).

What it checks: no request is open while a tool runs (timestamps); a turn ends when the server stops at
``<|im_end|>`` (``finish_reason``), a cut one says ``length``; two ``<tool_call>`` blocks of one answer run
concurrently on the host and come back as one user turn; streaming on and off give the same text; the prefix a later
turn shares with the previous request, the server's own cached-token count where it reports one (vLLM: its hits must
cover the shared prefix to the block), and the drop after compressing history; on vLLM, §14.5.3's prefill with and
without the prefix cache on the (T, Δ, R) workload scaled to fit, in seconds.

One check per claim; the saved runs are read once per ledger run (``serving_runs``).

Leaves out: running the server (the benchmark does; without its results file these claims are absent, not typed);
SGLang (CUDA only).
"""

from __future__ import annotations

import json

from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group, loader
from toolkit.paths import results_file
from toolkit.qwen import IM_END_ID

SECTION = "§14.5.8 on a server"
BOOK_WORKLOAD = (10_000, 2048, 30)  # §14.5.3's (T, Δ, R)
SERVING = Group("serving")


@loader
def serving_runs() -> dict:
    """The saved server runs by kind: ``transformers`` (``serving.json``) and ``vllm`` (``serving_vllm.json``)."""
    runs = {}
    for kind, name in (("transformers", "serving.json"), ("vllm", "serving_vllm.json")):
        path = results_file(name, required=False)
        if path is not None:
            runs[kind] = json.loads(path.read_text(encoding="utf-8"))
    return runs


@loader
def served(serving_runs) -> dict | None:
    """The run the five mechanism claims read: ``transformers serve``'s, else vLLM's."""
    return serving_runs.get("transformers") or serving_runs.get("vllm")


@loader
def served_prefix(serving_runs) -> dict | None:
    """The run the prefix claim reads: vLLM's where there is one (its cache reports hits)."""
    return serving_runs.get("vllm") or serving_runs.get("transformers")


@loader
def vllm_run(serving_runs) -> dict | None:
    return serving_runs.get("vllm")


@loader
def transformers_run(serving_runs) -> dict | None:
    return serving_runs.get("transformers")


def _source(r: dict) -> str:
    m = r["meta"]
    return f"{m['server']}, {m['date'][:10]}, commit {m['commit']}"


@SERVING(
    "served-no-suspend",
    SECTION,
    "The engine does not hold a request while a tool runs: the turn's request ends at the stop token and the next "
    "turn is a new request.",
    supports=("主流引擎并不在工具等待期间挂起请求",),
)
def _idle(served):
    r = served
    if r is None:
        return None
    i = r["idle"]
    req, spans = i["requests"], i["tool_spans"]
    t0 = min([q["t_sent"] for q in req] + [s["start"] for s in spans])
    between = [
        (max((q["t_done"] for q in req if q["t_done"] <= s["start"]), default=None) is not None)
        and any(q["t_sent"] >= s["end"] for q in req)
        for s in spans
    ]
    gaps = [
        (
            round(s["start"] - max(q["t_done"] for q in req if q["t_done"] <= s["start"]), 3),
            round(min(q["t_sent"] for q in req if q["t_sent"] >= s["end"]) - s["end"], 3),
        )
        for s, ok in zip(spans, between)
        if ok
    ]
    return (
        f"{_source(r)}: {len(req)} requests, {len(spans)} tool run(s) of {r['meta']['tool_wait_s']} s; requests open "
        f"while a tool ran: {len(i['overlaps'])}; the tool started/ended (s after the last request closed, s before "
        f"the next opened): {gaps}; wall clock from the first request: "
        f"{[(round(q['t_sent'] - t0, 2), round(q['t_done'] - t0, 2)) for q in req]}",
        *make_verdict(
            bool(spans) and not i["overlaps"] and all(between),
            "a request was open while the tool ran, or no tool ran between two requests in the saved run",
        ),
    )


@SERVING(
    "served-stop",
    SECTION,
    "A turn ends when the engine generates <|im_end|>: the server stops there and says so (finish_reason), and "
    "the request is over.",
    answers=("第 3 步生成 <|im_end|> 之后请求就正常结束了",),
)
def _stop(served):
    r = served
    if r is None:
        return None
    s = r["stop"]
    return (
        f"{_source(r)}: stop ids sent {s['stop_ids_sent']}; the last turn's finish_reason {s['finish_reason']!r}, "
        f"server {s['server_completion_tokens']} tokens / kit {s['kit_ids']} ids, the turn as the kit holds it ends "
        f"with {s['turn_ends_with']} (<|im_end|> = {IM_END_ID}), stop token in the returned text: "
        f"{s['text_has_im_end']}; the same prompt cut at max_tokens={s['cut']['max_tokens']}: "
        f"finish_reason {s['cut']['finish_reason']!r}",
        *make_verdict(
            s["finish_reason"] == "stop"
            and s["turn_ends_with"] == [IM_END_ID]
            and not s["text_has_im_end"]
            and s["cut"]["finish_reason"] == "length",
            "the saved turn did not end at <|im_end|> with finish_reason 'stop' (or the cut one did not say 'length')",
        ),
    )


@SERVING(
    "served-parallel",
    SECTION,
    "Several <tool_call> blocks in one answer are plain text from the engine: the host parses them, runs them "
    "concurrently and returns the results together in one user turn.",
    supports=("宿主解析出多个调用后并行执行，再把多条结果合并回灌",),
)
def _parallel(served):
    r = served
    if r is None:
        return None
    p = r["parallel"]
    spans = p["call_spans"]
    return (
        f"{_source(r)}: the model wrote {len(p['model_calls'])} call(s) {[c['name'] for c in p['model_calls']]}; "
        f"the host ran {len(spans)} call(s) at "
        f"{[(s['args'], round(s['start'] - spans[0]['start'], 2), round(s['end'] - spans[0]['start'], 2)) for s in spans]}"
        f" s (concurrent: {p['concurrent']}); {p['tool_messages']} tool results rendered as "
        f"{p['user_turns_after_call']} user turn(s) after the call",
        *make_verdict(
            p["concurrent"] and p["tool_messages"] >= 2 and p["user_turns_after_call"] == 1,
            "the saved run did not run two calls concurrently or did not merge their results into one user turn",
            [
                (
                    p["two_call_answer_written_here"],
                    f"the served model wrote {len(p['model_calls'])} call(s) for the two-city question, so the "
                    "two-call answer the host parsed was written by the benchmark, not by the model",
                )
            ],
        ),
    )


@SERVING(
    "served-stream",
    SECTION,
    "Streaming changes when the tokens arrive, not which tokens: none of the mechanisms above changes.",
    answers=("流式…不改变上面任何一条机制",),
)
def _stream(served):
    r = served
    if r is None:
        return None
    s = r["stream"]
    return (
        f"{_source(r)}: the same prompt, greedy, {s['max_new_tokens']} new tokens: streaming off "
        f"{s['off']['completion_tokens']} tokens in {s['off']['wall_s']} s, on {s['on']['completion_tokens']} tokens, "
        f"first after {s['on']['first_token_s']} s, last after {s['on']['wall_s']} s; same text: {s['same_text']} "
        f"({s['on']['text']!r})",
        *make_verdict(
            s["same_text"] and s["off"]["completion_tokens"] == s["on"]["completion_tokens"],
            "streamed and unstreamed greedy texts differ in the saved run",
            [
                (
                    s["off"]["finish_reason"] == "length",
                    f"one greedy prompt, cut at {s['max_new_tokens']} tokens: a check of sameness, not of every setting",
                )
            ],
        ),
    )


@SERVING(
    "served-prefix",
    SECTION,
    "Each turn is a new request whose prompt starts with the previous one (what a prefix cache reuses); "
    "compressing history changes the prefix and the cache stops matching there.",
    supports=("第 6 步是一个新请求，只是前缀更长", "压缩会改变前缀，从而使缓存失效"),
)
def _prefix(served_prefix):
    r = served_prefix
    if r is None:
        return None
    p = r["prefix"]
    turns = p["turns"]
    block = (r.get("kv_cache") or {}).get("block_size") or 1  # vLLM caches whole blocks
    later = [t for t in turns if t["turn"] > 1]
    return (
        f"{_source(r)}: per turn (prompt tokens, shared with the previous request, server-reported cached): "
        f"{[(t['prompt'], t['shared_with_previous'], t['server_cached']) for t in turns]}; after compressing "
        f"history the prompt shares {p['compressed_shared']} of {p['compressed_prompt']} tokens with the last one "
        f"({p['last_prompt']})",
        *make_verdict(
            bool(later)
            and all(t["shared_with_previous"] >= prev["prompt"] for prev, t in zip(turns, later))
            and p["compressed_shared"] < p["compressed_prompt"]
            and all(t["server_cached"] <= t["prompt"] for t in turns if t["server_cached"] is not None)
            and all(
                t["server_cached"] is None or t["server_cached"] >= (t["shared_with_previous"] // block) * block
                for t in later
            ),
            "a later turn's prompt did not start with the whole previous prompt, compression kept the whole prefix, "
            "or the server's reported hits fell short of the shared prefix (to its block size)",
            [
                (
                    not p["server_reports_cached"],
                    f"{r['meta']['server_kind']} reports no cached tokens (no usage.prompt_tokens_details."
                    "cached_tokens): the shared prefix is counted by the kit, not hits the server reported; vLLM "
                    "(--enable-prompt-tokens-details) and SGLang (--enable-cache-report) report them",
                )
            ],
        ),
    )


@SERVING(
    "served-prefill-cached",
    "§14.5.3 on a server",
    "With a prefix cache each round prefills only its new tokens; without one every round prefills its whole prefix "
    "again — the difference decides whether a long agent loop is affordable.",
    answers=("前缀缓存…是能不能跑的分界",),
)
def _prefill(vllm_run, transformers_run):
    """§14.5.3's judgement that the prefix cache decides whether an agent loop can run at all, measured on vLLM: the
    same R rounds prefilled with the cache and without (every prompt's first token changed), in seconds."""
    v, t = vllm_run, transformers_run
    if not (v or {}).get("workload"):
        return None
    w = v["workload"]
    hits = w["cached_hits"]
    rows = w["cached"]["rows"]
    block = (v.get("kv_cache") or {}).get("block_size") or 1
    # from round 2 on the server reports hits covering the previous prompt, to the block
    aligned = all(h is not None and h >= (prev["prompt"] // block) * block for prev, h in zip(rows, hits[1:]))
    beside = (
        f"; transformers serve (no prefix cache) in the same run: {t['workload']['uncached']['seconds']} s vs "
        f"{t['workload']['cached']['seconds']} s ({t['workload']['ratio_seconds']}x)"
        if t and t.get("workload")
        else ""
    )
    return (
        f"{_source(v)}: (T, Δ, R) = ({w['T']}, {w['delta']}, {w['R']}), R requests with max_tokens=1: uncached "
        f"{w['uncached']['seconds']} s, cached {w['cached']['seconds']} s ({w['ratio_seconds']}x; the token count's "
        f"closed form {w['ratio_closed']}x); cache hits per round {hits} (block {block}){beside}",
        *make_verdict(
            aligned and w["ratio_seconds"] > 1.5,
            "the cached rounds were not clearly faster, or the server's hits did not cover the previous prompts",
            [
                (
                    (w["T"], w["delta"], w["R"]) != BOOK_WORKLOAD or w["ratio_seconds"] < 0.9 * w["ratio_closed"],
                    f"the chapter's workload scaled to a 4,096-token CPU server ({w['T']}, {w['delta']}, {w['R']} "
                    "instead of 10,000, 2,048, 30, where the token ratio is 20.4x): a measured ratio at this scale; "
                    "seconds include one decode step and the request's overhead per round, which the token count "
                    "leaves out, so the measured ratio stays below the closed form",
                )
            ],
        ),
    )


def serving_claims() -> list[Claim]:
    """The claims from the saved server runs: the five from ``serving.json`` (``transformers serve``), the prefix
    claim from vLLM's run (``serving_vllm.json``) where there is one (its cache reports hits), and the prefill
    workload measured on vLLM; none when neither file is present."""
    return SERVING.run()
