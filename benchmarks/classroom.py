"""A classroom against one server: N concurrent host loops (N = 1, 4, 16) on loopback, bounded, nothing lost.

Each session is one student running the calculator round trip (the kit's host loop, tokens mode, the call's grammar
enforced on the host) against the same OpenAI-compatible server. Per N the script prints the wall time, the
aggregate generated tokens per second, p50/p95 turn latency (one turn = all requests of one model turn), requests,
errors (each a ServerError kind) and lost sessions (a session that ended without the loop's last step: must be 0),
and beside it what ``toolkit.cost.capacity`` predicts for this server's model from the measured batch-1 rate.

Run:  python benchmarks/classroom.py                          # starts transformers serve (real model) on 127.0.0.1
      python benchmarks/classroom.py --url http://127.0.0.1:8000/v1 --sessions 1,4,16
      python benchmarks/classroom.py --model stand-in          # mechanics only (random weights, served)
Flags: --max-new-tokens (per turn, default 32), --turns 1|2, --timeout (per request, s), --deadline (per N, s), --json.
Saves benchmarks/results/classroom-<date>.json (date, machine, model, server, commit). No timed asserts.

Leaves out: many server processes, GPUs (vLLM's continuous batching is what makes N > 1 cheap there;
``transformers serve`` without ``--continuous-batching`` runs one request at a time, which the numbers show).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


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


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default=None, help="a running server (default: start transformers serve here)")
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="what to serve when starting one (or stand-in)")
    p.add_argument("--sessions", default="1,4,16")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--turns", type=int, choices=(1, 2), default=2, help="1: the call turn only; 2: call and answer")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--deadline", type=float, default=1800.0, help="seconds per N before the rest are abandoned")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    ns = [int(x) for x in a.sessions.split(",")]
    if any(n < 1 or n > 64 for n in ns):
        p.error("--sessions: each N between 1 and 64 (loopback, bounded)")

    from toolkit.backends.http import check_url, probe
    from toolkit.backends.serve import LocalServer, folder_for
    from toolkit.cost import capacity
    from toolkit.models import load, template_for
    from toolkit.tokenizer import qwen_tokenizer

    server, note = None, ""
    if a.url:
        url = check_url(a.url)
        tok = qwen_tokenizer("qwen3" if "qwen3" in probe(url).model.lower() else "qwen2.5")
        template = "qwen3" if "qwen3" in probe(url).model.lower() else "qwen2.5"
    else:
        loaded = load(a.model, quiet=True)
        tok, template = loaded.tokenizer, template_for(loaded)
        note = loaded.description
        server = LocalServer(folder_for(loaded), threads=os.cpu_count() or 2)
        loaded.model = None
        url = server.url
    info = probe(url)
    rows = []
    try:
        for n in ns:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=n) as pool:
                futs = [
                    pool.submit(session, url, info, tok, template, a.max_new_tokens, a.timeout, a.turns)
                    for _ in range(n)
                ]
                done, pending = wait(futs, timeout=a.deadline)
            wall = time.perf_counter() - t0
            res = [f.result() for f in done]
            lat = [t for r in res for t in r["turns"]]
            toks = sum(r["tokens"] for r in res)
            errors = {}
            for r in res:
                if r["error"]:
                    errors[r["error"]] = errors.get(r["error"], 0) + 1
            rows.append(
                dict(
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
            )
    finally:
        if server is not None:
            server.stop()
    one = rows[0]["tokens_per_s"] if rows and rows[0]["sessions"] == 1 else None
    from toolkit.eval.report import meta  # date, machine, model and commit, as every saved benchmark result

    res = meta(
        note or info.model,
        ROOT,
        server=info.description,
        max_new_tokens=a.max_new_tokens,
        turns=a.turns,
        rows=rows,
        capacity_note=capacity.__doc__.splitlines()[0],
    )
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"model: {res['model']} | server: {info.description}")
        print(
            f"{'N':>3}{'wall s':>9}{'tokens':>8}{'tok/s':>8}{'p50 turn s':>12}{'p95 turn s':>12}{'requests':>10}  errors  lost"
        )
        for r in rows:
            print(f"{r['sessions']:>3}{r['wall_s']:>9}{r['tokens']:>8}{r['tokens_per_s']:>8}{r['p50_turn_s']:>12}"
                  f"{r['p95_turn_s']:>12}{r['requests']:>10}  {r['errors'] or '-'}  {r['lost']}")  # fmt: skip
        if one:
            print(
                "aggregate rate vs N=1: "
                + ", ".join(f"N={r['sessions']}: {r['tokens_per_s'] / one:.2f}x" for r in rows)
            )
    out = ROOT / "benchmarks" / "results" / f"classroom-{res['date'][:10]}.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"saved {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
