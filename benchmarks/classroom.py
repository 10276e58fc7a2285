"""A classroom against one server: N concurrent host loops (N = 1, 4, 16) on loopback, bounded, nothing lost.

Each session is one student running the calculator round trip (the kit's host loop, tokens mode, the call's grammar
enforced on the host) against the same OpenAI-compatible server. Per N the script prints the wall time, the
aggregate generated tokens per second, p50/p95 turn latency (one turn = all requests of one model turn), requests,
errors (each a ServerError kind) and lost sessions (a session that ended without the loop's last step: must be 0),
and beside it what ``toolkit.cost.capacity`` predicts for this server's model from the measured batch-1 rate.

Run:  python benchmarks/classroom.py                          # starts transformers serve (real model) on 127.0.0.1
      python benchmarks/classroom.py --url http://127.0.0.1:8000/v1 --sessions 1,4,16
      python benchmarks/classroom.py --model stand-in          # mechanics only (random weights, served)
      python benchmarks/classroom.py --check benchmarks/results/classroom-2026-12-01.json   # the comparison only
Flags: --max-new-tokens (per turn, default 32), --turns 1|2, --timeout (per request, s), --deadline (per N, s), --json.
Saves benchmarks/results/classroom-<date>.json (date, machine, model, server, commit). No timed asserts.

The capacity check (printed after every run, and by --check for a saved one): ``toolkit.cost.calibrated_rates``
calibrated to the measured N=1 rate, the aggregate tokens/s it predicts for N sessions on a server that batches them
and on one that runs one request at a time, beside the measured rate. What a CPU box cannot measure: how many
sessions fit in a GPU's KV-cache memory (``toolkit.cost.capacity``'s other half) — there is no GPU here, and
``transformers serve`` keeps no prefix cache to fill.

Leaves out: many server processes, GPUs (vLLM's continuous batching is what makes N > 1 cheap there;
``transformers serve`` without ``--continuous-batching`` runs one request at a time, which the numbers show).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402


def session(url, info, tok, template, max_new_tokens, timeout_s, turns=2) -> dict:
    """One student: the calculator round trip; returns per-turn latencies, tokens and any error."""
    from toolkit.backends.http import ServerError
    from toolkit.backends.http_tokens import TokensBackend
    from toolkit.loop.examples import example
    from toolkit.loop.loop import run
    from toolkit.loop.steps import Generated, Stopped

    ex = example("calculator")
    out = dict(turns=[], tokens=0, requests=0, error=None, finished=False)
    try:
        b = TokensBackend(url, tok, info=info, timeout_s=timeout_s, max_rounds=3)
        trace = run(b, tok, ex["messages"], ex["tools"], template=template, tool_choice="required", max_turns=turns,
                    max_new_tokens=max_new_tokens)  # fmt: skip
        for s in trace.of(Generated):
            srv = s.generation.server
            out["turns"].append(srv["t_done"] - srv["t_sent"])
            out["tokens"] += len(s.ids)
            out["requests"] += srv["rounds"]
        out["finished"] = bool(trace.of(Stopped))
    except ServerError as e:
        out["error"] = e.kind
        out["finished"] = True  # ended with a one-line error the student sees: not lost
    return out


CAPACITY_MODELS = {"qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B", "qwen3-0.6b": "Qwen3-0.6B"}  # toolkit.cost.KV_SHAPES


def capacity_check(res: dict) -> dict:
    """Measured aggregate tokens/s per N beside what ``toolkit.cost.calibrated_rates`` predicts from the N=1 row."""
    from toolkit.cost import calibrated_rates
    from toolkit.loop.examples import example
    from toolkit.render import render
    from toolkit.schema import openai_schema
    from toolkit.tokenizer import qwen_tokenizer

    rows = res["rows"]
    one = next((r for r in rows if r["sessions"] == 1 and r["tokens_per_s"] > 0), None)
    key = next((v for k, v in CAPACITY_MODELS.items() if k in (res["model"] + res["server"]).lower()), None)
    if one is None or key is None:
        return dict(why="no N=1 row with tokens" if one is None else f"no KV shape for {res['model']!r}", rows=[])
    ex = example("calculator")  # the session's prompt: the calculator question with its tools, as session() runs it
    prompt = render(ex["messages"], [openai_schema(t) for t in ex["tools"].values()], tokenizer=qwen_tokenizer(
        "qwen2.5"), template="qwen2.5").ids  # fmt: skip
    context = len(prompt) + res["max_new_tokens"] / 2  # the mean KV length while it decodes
    pred = calibrated_rates(key, one["tokens_per_s"], [r["sessions"] for r in rows], context)
    out = [
        dict(
            sessions=r["sessions"],
            measured=r["tokens_per_s"],
            batched=round(p["batched"], 3),
            serial=round(p["serial"], 3),
            measured_over_serial=round(r["tokens_per_s"] / p["serial"], 2),
            measured_over_batched=round(r["tokens_per_s"] / p["batched"], 3),
            closer=(
                "serial"
                if abs(math.log(r["tokens_per_s"] / p["serial"])) <= abs(math.log(r["tokens_per_s"] / p["batched"]))
                else "batched"
            )
            if r["tokens_per_s"] > 0
            else "-",
            load_avg_1_5_15=r.get("load_avg_1_5_15"),
        )
        for r, p in zip(rows, pred)
    ]
    return dict(
        model=key,
        prompt_tokens=len(prompt),
        context_tokens=context,
        effective_bandwidth_gb_s=round(pred[0]["bandwidth"] / 1e9, 3),
        rows=out,
        not_measured_here=(
            "KV-cache memory on a GPU (how many sessions fit there): no GPU here; this server's own KV capacity "
            "(from its /metrics) is checked against toolkit.cost below"
            if res.get("server_kind") == "vllm"
            else "KV-cache memory on a GPU (how many sessions fit, with and without prefix sharing): no GPU here, "
            "and transformers serve keeps no prefix cache; the batched column assumes a server that batches the "
            "sessions' decode steps (vLLM, SGLang, --continuous-batching), which this run's server did not"
        ),
    )


def print_check(chk: dict) -> None:
    if not chk["rows"]:
        print(f"capacity check: not possible ({chk['why']})")
        return
    print(
        f"capacity check ({chk['model']}, {chk['context_tokens']:.0f} tokens of KV per session, effective bandwidth "
        f"{chk['effective_bandwidth_gb_s']} GB/s from the N=1 rate): aggregate tokens/s, measured vs predicted"
    )
    print(f"{'N':>3}{'measured':>10}{'predicted, batched':>20}{'predicted, serial':>19}{'meas/serial':>13}{'closer':>9}"
          "  load avg")  # fmt: skip
    for r in chk["rows"]:
        print(f"{r['sessions']:>3}{r['measured']:>10}{r['batched']:>20}{r['serial']:>19}{r['measured_over_serial']:>13}"
              f"{r['closer']:>9}  {r['load_avg_1_5_15'] or 'not recorded'}")  # fmt: skip
    print(f"not measured here: {chk['not_measured_here']}")


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


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
    p.add_argument("--sessions", type=cliargs.counts, default="1,4,16")
    p.add_argument("--max-new-tokens", type=cliargs.count(1, 4096), default=32)
    p.add_argument("--turns", type=cliargs.count(1, 2), default=2, help="1: the call turn only; 2: call and answer")
    p.add_argument("--timeout", type=cliargs.number(0.0, lo_open=True), default=600.0)
    p.add_argument(
        "--deadline",
        type=cliargs.number(0.0, lo_open=True),
        default=1800.0,
        help="seconds per N before the rest are abandoned",
    )
    p.add_argument(
        "--engine",
        choices=("transformers", "vllm", "both"),
        default="both",
        help="which server to start here (both: one after the other, compared; vllm needs `make vllm`)",
    )
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--check",
        type=cliargs.existing_file,
        default=None,
        metavar="RESULTS",
        help="print the capacity check of a saved run; no server",
    )
    a = p.parse_args(argv)
    if a.check:
        try:
            saved = json.loads(Path(a.check).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            p.error(f"--check {a.check}: {e}")
        chk = capacity_check(saved)
        print(json.dumps(chk, indent=1)) if a.json else print_check(chk)
        return 0
    ns = a.sessions
    if any(n < 1 or n > 64 for n in ns):
        p.error("--sessions: each N between 1 and 64 (loopback, bounded)")
    from toolkit.backends.serve import engines_to_run

    try:
        engines, note_engines = engines_to_run(a.engine, a.url)
    except ValueError as e:
        p.error(str(e))
    if note_engines:
        print(f"note: {note_engines}")

    from toolkit.backends.choose import template_of
    from toolkit.backends.http import check_url, probe
    from toolkit.models import load, template_for
    from toolkit.tokenizer import qwen_tokenizer

    loaded, note = None, ""
    if a.url:
        template = template_of(probe(check_url(a.url)).model)  # the served folder's config.json, else the model's name
        tok = qwen_tokenizer(template)
    else:
        loaded = load(a.model, quiet=True)
        tok, template = loaded.tokenizer, template_for(loaded)
        note = loaded.description
    results = {}
    for engine in engines:
        res = run_engine(engine, a, loaded, tok, template, note)
        results[res["server_kind"]] = res
        show(res, a.json)
        name = "classroom_vllm" if res["server_kind"] == "vllm" else "classroom"
        out = ROOT / "benchmarks" / "results" / f"{name}-{res['date'][:10]}.json"
        out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"saved {out.relative_to(ROOT)}")
    if {"transformers", "vllm"} <= set(results) and not a.json:
        t, v = results["transformers"]["rows"], results["vllm"]["rows"]
        print("\nvLLM / transformers serve, aggregate tokens/s measured in this run: " + ", ".join(
            f"N={x['sessions']}: {y['tokens_per_s'] / x['tokens_per_s']:.2f}x" for x, y in zip(t, v)
            if x["tokens_per_s"] > 0))  # fmt: skip
    return 0


def run_engine(engine, a, loaded, tok, template, note) -> dict:
    """Start ``engine`` (or use ``--url``), run every N, stop it; the result dict (with vLLM's KV-cache check)."""
    from toolkit.backends.http import probe
    from toolkit.backends.serve import LocalServer, folder_for
    from toolkit.cost import capacity

    server = None
    if a.url:
        url = a.url
    else:
        server = LocalServer(folder_for(loaded), engine=engine, threads=os.cpu_count() or 2)
        url = server.url
    info = probe(url)
    rows, kv = [], None
    try:
        for n in a.sessions:
            rows.append(one_n(n, url, info, tok, template, a))
        if info.kind == "vllm":
            from toolkit.backends.vllm_local import cache_config

            kv = cache_config(url)
    finally:
        if server is not None:
            server.stop()
    from toolkit.eval.report import meta  # date, machine, model and commit, as every saved benchmark result

    res = meta(
        note or info.model,
        ROOT,
        server=info.description,
        server_kind=info.kind,
        ready_s=round(server.ready_s, 1) if server else None,
        server_dtype=server.argv[server.argv.index("--dtype") + 1] if server and "--dtype" in server.argv else None,
        max_new_tokens=a.max_new_tokens,
        turns=a.turns,
        rows=rows,
        capacity_note=capacity.__doc__.splitlines()[0],
    )
    res["capacity_check"] = capacity_check(res)
    if kv:
        res["kv_cache"] = kv
        res["kv_check"] = kv_check(kv, res)
    return res


def one_n(n, url, info, tok, template, a) -> dict:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=n) as pool:
        futs = [pool.submit(session, url, info, tok, template, a.max_new_tokens, a.timeout, a.turns) for _ in range(n)]
        done, pending = wait(futs, timeout=a.deadline)
    wall = time.perf_counter() - t0
    res = [f.result() for f in done]
    lat = [t for r in res for t in r["turns"]]
    toks = sum(r["tokens"] for r in res)
    errors = {}
    for r in res:
        if r["error"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    return dict(
        sessions=n,
        wall_s=round(wall, 2),
        tokens=toks,
        tokens_per_s=round(toks / wall, 2),
        p50_turn_s=round(pct(lat, 0.5), 2),
        p95_turn_s=round(pct(lat, 0.95), 2),
        requests=sum(r["requests"] for r in res),
        errors=errors,
        lost=len(pending) + sum(not r["finished"] for r in res),
        load_avg_1_5_15=[round(x, 2) for x in os.getloadavg()],  # a shared machine's other work
    )


def kv_check(kv: dict, res: dict) -> dict:
    """vLLM's own KV-cache capacity (its /metrics) beside ``toolkit.cost``'s formula for the same bytes: tokens that
    fit, and sessions of this run's length (vLLM hands out whole blocks)."""
    from toolkit.cost import KV_SHAPES, kv_bytes_per_token

    key = next((v for k, v in CAPACITY_MODELS.items() if k in (res["model"] + res["server"]).lower()), None)
    if key is None or not kv.get("kv_cache_bytes"):
        return dict(why="no KV shape for this model, or no KV bytes reported")
    _, *shape = KV_SHAPES[key]
    value_bytes = 4 if res.get("server_dtype") == "float32" else 2  # vLLM's KV cache takes the model's dtype
    per_token = kv_bytes_per_token(*shape, bytes_per_value=value_bytes)
    # the calculator prompt + what a session generates (its second turn's prompt holds the first turn and the result)
    session_tokens = res["capacity_check"].get("prompt_tokens", 0) + 2 * res["max_new_tokens"] * res["turns"]
    blocks = -(-session_tokens // kv["block_size"])
    return dict(
        model=key,
        kv_bytes=kv["kv_cache_bytes"],
        bytes_per_token_kit=per_token,
        tokens_vllm=kv["kv_cache_tokens"],
        tokens_kit=int(kv["kv_cache_bytes"] // per_token),
        session_tokens=session_tokens,
        sessions_vllm=kv["blocks"] // blocks,
        sessions_kit=int(kv["kv_cache_bytes"] // (session_tokens * per_token)),
    )


def show(res: dict, as_json: bool) -> None:
    rows = res["rows"]
    if as_json:
        print(json.dumps(res, indent=1))
        return
    one = rows[0]["tokens_per_s"] if rows and rows[0]["sessions"] == 1 else None
    print(f"model: {res['model']} | server: {res['server']} (ready after {res['ready_s']} s)")
    print(
        f"{'N':>3}{'wall s':>9}{'tokens':>8}{'tok/s':>8}{'p50 turn s':>12}{'p95 turn s':>12}{'requests':>10}  errors  lost"
    )
    for r in rows:
        print(f"{r['sessions']:>3}{r['wall_s']:>9}{r['tokens']:>8}{r['tokens_per_s']:>8}{r['p50_turn_s']:>12}"
              f"{r['p95_turn_s']:>12}{r['requests']:>10}  {r['errors'] or '-'}  {r['lost']}")  # fmt: skip
    if one:
        print("aggregate rate vs N=1: " + ", ".join(f"N={r['sessions']}: {r['tokens_per_s'] / one:.2f}x" for r in rows))
    print_check(res["capacity_check"])
    k = res.get("kv_check")
    if k and "why" not in k:
        print(f"KV cache ({k['kv_bytes'] / 2**30:.1f} GiB): vLLM holds {k['tokens_vllm']:,} tokens, toolkit.cost "
              f"predicts {k['tokens_kit']:,} ({k['bytes_per_token_kit']:.0f} B/token); sessions of "
              f"{k['session_tokens']} tokens: vLLM {k['sessions_vllm']}, kit {k['sessions_kit']}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
