"""The kit's MCP server, measured: start time, kept-alive HTTP latency with and without TCP_NODELAY, and what a
10 MB argument costs (reply size, server RSS before and after), and the first tools/call on a fresh server
against the second, idle and with every core busy.

    python benchmarks/mcp_server.py [--calls 200] [--starts 5]

Prints one table and saves ``benchmarks/results/mcp_server-<date>.json`` with date, machine, commit. No
asserts: the tests check behaviour, this reports numbers side by side from one run.
Every server is started on 127.0.0.1 and stopped by PID.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402
from toolkit.paths import provenance  # noqa: E402  (results name a clean commit or say they do not)

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
}


def http_server(nodelay: bool):
    code = f"import sys; from toolkit.mcp.server import serve_http; serve_http(0, tcp_nodelay={nodelay})"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    line = proc.stdout.readline()
    return proc, line.split("on ", 1)[1].split()[0]


def stop(proc) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kept_alive_ms(url: str, calls: int) -> list[float]:
    import httpx

    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "calculator", "arguments": {"expression": "2+2"}, "_meta": META},
    }
    head = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "calculator",
    }
    out = []
    with httpx.Client(timeout=30) as c:  # one client: one kept-alive TCP connection
        for i in range(calls + 5):
            body["id"] = i
            t0 = time.perf_counter()
            r = c.post(url, json=body, headers=head)
            dt = (time.perf_counter() - t0) * 1e3
            assert r.status_code == 200, r.text[:200]
            if i >= 5:  # warm-up
                out.append(dt)
    return out


def stdio_start_s(n: int) -> list[float]:
    """Seconds from spawn to the server's first answer (server/discover) over stdio."""

    req = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}) + "\n"
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [sys.executable, "-m", "toolkit", "mcp", "serve", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=ENV,
            cwd=ROOT,
        )
        p.stdin.write(req.encode())
        p.stdin.flush()
        line = p.stdout.readline()
        out.append(time.perf_counter() - t0)
        assert b'"result"' in line, line[:200]
        p.stdin.close()
        p.wait(10)
    return out


def first_calls_ms(n: int, busy: bool) -> dict:
    """Milliseconds of the first and the second tools/call on a fresh stdio server (after its ready line and
    server/discover), ``n`` starts; ``busy``: with one CPU-burning process per core, stopped by PID after."""
    burners = []
    if busy:
        burn = "import time\nt = time.time() + 600\nwhile time.time() < t: pass"
        burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(os.cpu_count() or 1)]
    call = lambda rid: json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
         "params": {"name": "calculator", "arguments": {"expression": "250 * 15%"}, "_meta": META}}
    ).encode() + b"\n"  # fmt: skip
    first, second = [], []
    try:
        for _ in range(n):
            p = subprocess.Popen(
                [sys.executable, "-m", "toolkit", "mcp", "serve", "--stdio"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=ENV,
                cwd=ROOT,
            )
            p.stderr.readline()  # the ready line: a host that waits for it sends its first request now
            disc = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": META}}
            p.stdin.write(json.dumps(disc).encode() + b"\n")
            p.stdin.flush()
            p.stdout.readline()
            for rid, into in ((1, first), (2, second)):
                t0 = time.perf_counter()
                p.stdin.write(call(rid))
                p.stdin.flush()
                line = p.stdout.readline()
                into.append((time.perf_counter() - t0) * 1000)
                assert b'"isError":false' in line.replace(b" ", b""), line[:200]
            p.stdin.close()
            p.wait(10)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    return {"first_ms": round(statistics.median(first), 1), "second_ms": round(statistics.median(second), 1)}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def big_argument() -> dict:
    """A 10 MB expression over stdio: reply size and the server's RSS before and after."""
    p = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "mcp", "serve", "--stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
        cwd=ROOT,
    )

    def ask(msg: dict) -> bytes:
        p.stdin.write(json.dumps(msg).encode() + b"\n")
        p.stdin.flush()
        return p.stdout.readline()

    ask({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": META}})
    ask(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "calculator", "arguments": {"expression": "1+1"}, "_meta": META},
        }
    )
    before = rss_mb(p.pid)
    out = {}
    for label, size in (("3 MB (under the 4 MiB limit)", 3_000_000), ("10 MB", 10_000_000)):
        t0 = time.perf_counter()
        reply = ask(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "calculator", "arguments": {"expression": "9" * size}, "_meta": META},
            }
        )
        out[label] = {
            "reply_bytes": len(reply),
            "seconds": round(time.perf_counter() - t0, 3),
            "reply_start": reply[:160].decode("utf-8", "replace"),
        }
    time.sleep(0.5)
    after = rss_mb(p.pid)
    p.stdin.close()
    p.wait(10)
    return {"rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1), "calls": out}


def main() -> None:
    ap = cliargs.Parser()
    ap.add_argument("--calls", type=cliargs.count(1), default=200)
    ap.add_argument("--starts", type=cliargs.count(1), default=5)
    a = ap.parse_args()
    res: dict = {"latency_ms": {}}
    for nodelay in (False, True):
        proc, url = http_server(nodelay)
        try:
            ms = kept_alive_ms(url, a.calls)
        finally:
            stop(proc)
        res["latency_ms"]["TCP_NODELAY on" if nodelay else "TCP_NODELAY off"] = {
            "median": round(statistics.median(ms), 2),
            "p90": round(sorted(ms)[int(0.9 * len(ms))], 2),
        }
    starts = stdio_start_s(a.starts)
    res["stdio_start_s"] = {"median": round(statistics.median(starts), 3), "max": round(max(starts), 3)}
    res["first_call"] = {"idle": first_calls_ms(a.starts, busy=False), "busy": first_calls_ms(a.starts, busy=True)}
    res["big_argument"] = big_argument()
    res.update(
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=platform.node(),
        cpus=os.cpu_count(),
        load=os.getloadavg(),
        **provenance(ROOT),
        model="none (no model runs)",
    )

    lat = res["latency_ms"]
    off, on = lat["TCP_NODELAY off"]["median"], lat["TCP_NODELAY on"]["median"]
    print(f"kept-alive HTTP tools/call, {a.calls} calls on one connection (median / p90 ms):")
    for k, v in lat.items():
        print(f"  {k:<16} {v['median']:8.2f} {v['p90']:8.2f}")
    print(f"  ratio off/on     {off / on:8.1f}x")
    print(
        f"stdio start to first answer, {a.starts} starts: median {res['stdio_start_s']['median']} s, "
        f"max {res['stdio_start_s']['max']} s (load {res['load'][0]:.2f} on {res['cpus']} CPUs)"
    )
    for state, v in res["first_call"].items():
        print(
            f"first tools/call on a fresh stdio server ({state}, median of {a.starts}): {v['first_ms']} ms; "
            f"second: {v['second_ms']} ms; ratio {v['first_ms'] / v['second_ms']:.1f}x"
        )
    big = res["big_argument"]
    for label, v in big["calls"].items():
        print(
            f"{label} argument over stdio: reply {v['reply_bytes']:,} bytes in {v['seconds']} s: "
            f"{v['reply_start'][:120]}"
        )
    print(f"server RSS before {big['rss_before_mb']} MB, after {big['rss_after_mb']} MB")
    out = ROOT / "benchmarks" / "results" / f"mcp_server-{res['date'][:10]}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    print(f"saved {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
