"""The MCP server's edges, driven with raw bytes rather than the SDK client: malformed stdio lines get JSON-RPC
errors (never silence), every error is bounded whatever the input size (stdio and HTTP), over-long stdio lines are
refused like over-long HTTP bodies, TCP_NODELAY is on, idle legacy sessions expire. Servers run on 127.0.0.1 and
are stopped by PID."""

import json
import os
import re
import select
import signal
import subprocess
import sys
import time

import httpx2
import pytest

from toolkit.mcp import stdio as S
from toolkit.mcp.process import REPO_ROOT, HTTPServer, _child_env, pid_alive
from toolkit.mcp.server import EXPIRED_MARK

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "edges", "version": "0"},
}
BOUND = 600  # bytes: a whole error line, envelope included


def _call(rid, name, arguments) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META},
        }
    ).encode()


class RawStdio:
    """``python -m toolkit mcp serve --stdio`` with raw pipes: write any bytes, read one reply line (or None)."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolkit", "mcp", "serve", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **_child_env()},
            cwd=str(REPO_ROOT),
        )

    def send(self, line: bytes, timeout: float = 30) -> dict | None:
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()
        return self.read(timeout)

    def read(self, timeout: float = 30) -> dict | None:
        if not select.select([self.proc.stdout], [], [], timeout)[0]:
            return None
        raw = self.proc.stdout.readline()
        assert len(raw) <= 4096 or b'"result"' in raw[:200], f"{len(raw):,}-byte reply: {raw[:300]!r}"
        return json.loads(raw)

    def stop(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        assert not pid_alive(self.proc.pid)


@pytest.fixture(scope="module")
def raw():
    srv = RawStdio()
    first = srv.send(
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": META}}).encode(),
        timeout=60,
    )
    assert first and first["id"] == 0 and "result" in first
    yield srv
    srv.stop()


MALFORMED = [  # (line, code, id)
    (b"not json", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 1, ', -32700, None),
    (b"\xff\xfe\x00{}", -32700, None),
    (b'{"jsonrpc":"2.0","id":2,"method":"ping","x":"\xc3\x28"}', -32700, None),  # invalid UTF-8 inside
    (b"[" * 100_000, -32700, None),  # nesting past the parser
    (b'{"jsonrpc":"2.0","id":21,"method":"ping","params":{"a":' + b"[" * 50_000 + b"]" * 50_000 + b"}}", -32700, 21),
    (b"[]", -32600, None),
    (b'[{"jsonrpc":"2.0","id":3,"method":"ping"}]', -32600, None),  # batches
    (b"42", -32600, None),
    (b'"ping"', -32600, None),
    (b"null", -32600, None),
    (b"true", -32600, None),
    (b"{}", -32600, None),
    (b'{"id":4,"method":"ping"}', -32600, 4),  # no "jsonrpc"
    (b'{"jsonrpc":"1.0","id":5,"method":"ping"}', -32600, 5),
    (b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}', -32600, None),  # ids the SDK reads as notes
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":6}', -32600, 6),
    (b'{"jsonrpc":"2.0","id":7,"method":7}', -32600, 7),
    (b'{"jsonrpc":"2.0","id":8,"method":"ping","params":[1,2]}', -32600, 8),
    # JSON over toolkit.untrusted's bounds: a parse error, with the id read back where it is itself in bounds
    (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', -32700, None),
    (_call(22, "calculator", {"expression": "1"})[:-2] + b',"n":' + b"7" * 5000 + b"}}", -32700, 22),
    (_call(23, "calculator", {"expression": "1"})[:-2] + b',"n":' + b"7" * 41 + b"}}", -32700, 23),
    (b'{"jsonrpc":"2.0","id":24,"method":"ping","params":{"a":' + b"[" * 450 + b"]" * 450 + b"}}", -32700, 24),
    (b'{"jsonrpc":"2.0","id":25,"method":"ping","params":{"x":NaN}}', -32700, 25),
    (b'{"jsonrpc":"2.0","id":26,"method":"ping","params":{"x":-Infinity}}', -32700, 26),
    (b'{"jsonrpc":"2.0","id":27,"method":"ping","params":{"x":1e999}}', -32700, 27),
]


@pytest.mark.parametrize("line,code,rid", MALFORMED, ids=lambda v: repr(v[:40]) if isinstance(v, bytes) else None)
def test_malformed_stdio_lines_are_answered(raw, line, code, rid):
    reply = raw.send(line)
    assert reply is not None, "no answer: a client would wait forever"
    assert reply["error"]["code"] == code and reply["id"] == rid, reply
    assert len(json.dumps(reply)) < BOUND
    # and the server is still there for the next good request
    ok = raw.send(_call(99, "calculator", {"expression": "6*7"}))
    assert ok["id"] == 99 and ok["result"]["structuredContent"]["result"] == 42


def test_blank_lines_are_ignored_and_a_notification_gets_no_answer(raw):
    raw.proc.stdin.write(
        b"\n   \n" + json.dumps({"jsonrpc": "2.0", "method": "notifications/whatever"}).encode() + b"\n"
    )
    assert raw.send(_call(100, "calculator", {"expression": "1+1"}))["id"] == 100


def test_over_long_stdio_line_is_refused_with_its_size_and_id(raw):
    big = _call(101, "calculator", {"expression": "9" * 10_000_000})
    reply = raw.send(big, timeout=60)
    assert reply["id"] == 101 and reply["error"]["code"] == -32600
    assert (
        f"{len(big):,} bytes" in reply["error"]["message"] and f"{S.MAX_MESSAGE_BYTES:,}" in reply["error"]["message"]
    )
    status = open(f"/proc/{raw.proc.pid}/status").read()
    rss_mb = int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1]) / 1024
    print(f"server RSS after a 10 MB line: {rss_mb:.0f} MB")
    assert rss_mb < 300  # the line was skipped as it streamed, never held (a held copy costs 10 MB per layer)
    assert raw.send(_call(102, "calculator", {"expression": "2+2"}))["id"] == 102


HOSTILE = {  # issue 40's lines, each meant to end the server: (line, the JSON-RPC code it must get, the id)
    "5,000-digit id": (b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', -32700, None),
    "5,000-digit argument": (
        _call(41, "calculator", {"expression": "1"})[:-3] + b',"n":' + b"7" * 5000 + b"}}}",
        -32700,
        41,
    ),
    "450-deep nesting": (
        _call(42, "calculator", {"expression": "1"})[:-3] + b',"n":' + b"[" * 450 + b"]" * 450 + b"}}}",
        -32700,
        42,
    ),
    "non-UTF-8 bytes": (_call(43, "calculator", {"expression": "1"}).replace(b'"1"', b'"\xff\xfe1"'), -32700, None),
    "NaN": (_call(44, "calculator", {"expression": "1"})[:-3] + b',"n":NaN}}}', -32700, 44),
    "over-long line": (_call(45, "calculator", {"expression": "9" * (S.MAX_MESSAGE_BYTES + 10)}), -32600, 45),
}


def _reply_lines(fd: int, count: int, timeout: float) -> list[dict]:
    """Up to ``count`` reply lines read straight from the pipe (a buffered readline after select would miss lines
    that came together), fewer when they do not come within ``timeout``."""

    buf, out, end = b"", [], time.monotonic() + timeout
    while len(out) < count and select.select([fd], [], [], max(0.0, end - time.monotonic()))[0]:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf and len(out) < count:
            line, buf = buf.split(b"\n", 1)
            assert len(line) < 4096 or b'"result"' in line[:200], f"{len(line):,}-byte reply: {line[:300]!r}"
            out.append(json.loads(line))
    return out


def test_a_batch_of_hostile_lines_is_each_answered_and_the_server_keeps_serving():
    """All of issue 40's hostile lines written at once, each followed by a good request: every hostile line gets
    its JSON-RPC error (the code stdio and HTTP share; refusals are written as read, answers when the tool is done,
    so they may interleave), every good request its answer, and a last request after them all is answered too.
    The server is one of its own, stopped by PID afterwards."""
    srv = RawStdio()
    try:
        batch = b""
        for n, (line, _, _) in enumerate(HOSTILE.values()):
            batch += line + b"\n" + _call(500 + n, "calculator", {"expression": f"{n}*7"}) + b"\n"
        srv.proc.stdin.write(batch)
        srv.proc.stdin.flush()
        replies = _reply_lines(srv.proc.stdout.fileno(), 2 * len(HOSTILE), 120)
        assert len(replies) == 2 * len(HOSTILE), f"{len(replies)} replies to {2 * len(HOSTILE)} lines: {replies}"
        refusals = sorted((r["id"] is None, str(r["id"]), r["error"]["code"]) for r in replies if "error" in r)
        expected = sorted((rid is None, str(rid), code) for _, code, rid in HOSTILE.values())
        assert refusals == expected, (refusals, expected)
        for r in replies:
            assert len(json.dumps(r)) < BOUND or "result" in r, r
            assert "Traceback" not in json.dumps(r), r
        answers = {r["id"]: r["result"]["structuredContent"]["result"] for r in replies if "result" in r}
        assert answers == {500 + n: n * 7 for n in range(len(HOSTILE))}, answers
        last = srv.send(_call(600, "calculator", {"expression": "6*7"}))
        assert last["id"] == 600 and last["result"]["structuredContent"]["result"] == 42
        assert srv.proc.poll() is None, "the server ended"
    finally:
        srv.stop()


HUGE_CALLS = [
    ("calculator", {"expression": "9" * 3_000_000}),
    ("calculator", {"k" * 3_000_000: 1}),
    ("calculator", {f"k{i}": 1 for i in range(200_000)}),
    ("get_weather", {"city": "é" * 500_000}),
    ("convert_units", {"value": 1, "from_unit": "m" * 3_000_000, "to_unit": "km"}),
    ("x" * 3_000_000, {}),
    ("calculator", {"expression": ["9" * 1_000_000]}),
    ("calculator", {"expression": "1+" * 1_000_000 + "1"}),
]


@pytest.mark.parametrize("case", range(len(HUGE_CALLS)))
def test_errors_over_stdio_are_bounded_whatever_the_input(raw, case):
    name, args = HUGE_CALLS[case]
    line = _call(200 + case, name, args)
    assert 1_000_000 < len(line) < S.MAX_MESSAGE_BYTES  # under the size limit: the tool or SDK must answer
    reply = raw.send(line, timeout=60)
    assert reply["id"] == 200 + case
    text = json.dumps(reply)
    assert len(text) < BOUND + 300, text[:500]  # + the _meta envelope of a result
    if "result" in reply:
        said = reply["result"]["content"][0]["text"]
        assert reply["result"]["isError"] is True and re.search(r"[\d,]{5,} (characters|more)", said), said


def test_sdk_echoes_are_bounded_too(raw):
    """The SDK answers an unknown method with the method as ``data``: bounded on the way out."""
    reply = raw.send(
        json.dumps({"jsonrpc": "2.0", "id": 300, "method": "m" * 2_000_000, "params": {"_meta": META}}).encode()
    )
    assert reply["id"] == 300 and reply["error"]["code"] == -32601 and len(json.dumps(reply)) < BOUND


# ------------------------------------------------------------------ units
def test_top_level_id_finds_only_the_top_level_id():
    assert S.top_level_id(b'{"jsonrpc":"2.0","id":7,"method":"x","params":{') == 7
    assert S.top_level_id(b'{"params":{"id":3},"id":"a\\"b","x":') == 'a"b'
    assert S.top_level_id(b'{"params":{"id":3,"x":"\\"id\\":4"') is None
    assert S.top_level_id(b'{"method":"x","params":{"a":"' + b"z" * 70_000) is None


def test_bind_asks_for_tcp_so_asyncio_sets_nodelay():
    import asyncio
    import socket

    from toolkit.mcp.server import bind

    async def accepted_nodelay(sock) -> int:
        got = asyncio.get_running_loop().create_future()

        async def on_conn(reader, writer):
            got.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_conn, sock=sock)
        _, w = await asyncio.open_connection(*sock.getsockname())
        value = await asyncio.wait_for(got, 10)
        w.close()
        server.close()
        return value

    assert asyncio.run(accepted_nodelay(bind(0))) != 0
    assert asyncio.run(accepted_nodelay(bind(0, tcp_nodelay=False))) == 0  # the old socket: Nagle stays on


# ------------------------------------------------------------------ HTTP
@pytest.fixture(scope="module")
def http_server():
    srv = HTTPServer(session_idle=2)
    yield srv
    srv.stop()
    assert not pid_alive(srv.pid)


def _legacy_session(url) -> dict:
    head = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    r = httpx2.post(
        url,
        headers=head,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "edges", "version": "0"},
            },
        },
    )
    assert r.status_code == 200
    head.update({"Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"})
    httpx2.post(url, headers=head, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return head


def _sse_json(r) -> dict:
    if r.headers.get("content-type", "").startswith("application/json"):
        return r.json()
    return json.loads(next(line[6:] for line in r.text.splitlines() if line.startswith("data: ")))


def test_http_errors_are_bounded_including_sdk_echoes(http_server):
    head = _legacy_session(http_server.url)
    for rid, body in enumerate(
        [
            {"method": "m" * 2_000_000},
            {"method": "tools/call", "params": {"name": "x" * 2_000_000, "arguments": {}}},
            {"method": "tools/call", "params": {"name": "calculator", "arguments": {"expression": "9" * 3_000_000}}},
            {"method": "tools/call", "params": {"name": "calculator", "arguments": {"e" * 3_000_000: 1}}},
        ]
    ):
        r = httpx2.post(http_server.url, headers=head, json={"jsonrpc": "2.0", "id": 10 + rid, **body}, timeout=60)
        reply = _sse_json(r)
        assert reply["id"] == 10 + rid and len(json.dumps(reply)) < BOUND + 300, json.dumps(reply)[:400]
    big = httpx2.post(http_server.url, headers=head, content=b"x" * 5_000_000, timeout=60)
    assert big.status_code == 413  # the SDK's 4 MiB body limit, the same limit stdio lines have


def test_idle_legacy_sessions_expire(http_server):
    head = _legacy_session(http_server.url)
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    seen = len(http_server.stderr())
    assert httpx2.post(http_server.url, headers=head, json=ping).status_code == 200
    sid = head["Mcp-Session-Id"]
    # the server was started with a 2 s idle timeout and says when it closes the session: wait for that event
    assert http_server.wait_for_stderr(f"{EXPIRED_MARK}: {sid}", timeout=60, after=seen), http_server.stderr()[-500:]
    assert httpx2.post(http_server.url, headers=head, json=ping).status_code == 404


# ------------------------------------------------------------------ the same answer on every transport and era
def _modern_head() -> dict:
    return {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
    }


SIDE_BY_SIDE = [line for line, _, _ in MALFORMED if len(line) < 1000] + [
    b'{"jsonrpc":"2.0","id":30,"method":"tools/frobnicate","params":{"_meta":%s}}' % json.dumps(META).encode(),
    _call(31, "no_such_tool", {}),
    _call(32, "x" * 1_000_000, {}),
]


@pytest.mark.parametrize("line", SIDE_BY_SIDE, ids=lambda v: repr(v[:40]))
def test_the_same_malformed_request_gets_the_same_answer_on_stdio_and_both_http_eras(raw, http_server, line):
    by_stdio = raw.send(line)
    answers = {"stdio": by_stdio}
    for era, head in (("legacy", _legacy_session(http_server.url)), ("2026-07-28", _modern_head())):
        if era == "2026-07-28" and b'"method":"tools/' in line.replace(b" ", b""):
            msg = json.loads(line)  # the 2026-07-28 client repeats the method (and a tool's name) in headers
            head = {**head, "Mcp-Method": msg["method"]}
            if msg["method"] == "tools/call":
                head["Mcp-Name"] = msg["params"]["name"]
        r = httpx2.post(http_server.url, headers=head, content=line, timeout=60)
        assert r.status_code != 202 or by_stdio is None, f"{era}: a silent 202 where stdio answers"
        answers[era] = _sse_json(r)
    for era, reply in answers.items():
        assert reply is not None and len(json.dumps(reply)) < BOUND, (era, json.dumps(reply)[:300])
        assert "pydantic" not in json.dumps(reply) and "validation error" not in json.dumps(reply).lower(), reply
    keyed = {era: (a["id"], a["error"]["code"]) for era, a in answers.items()}
    assert len(set(keyed.values())) == 1, keyed
    messages = {era: a["error"]["message"] for era, a in answers.items()}
    if b"x" * 1000 not in line:  # a huge name: every transport names its length, in its own bounded words
        assert len(set(messages.values())) == 1, messages


def test_a_utf8_bom_is_read_alike_on_stdio_and_http(raw, http_server):
    """A request that starts with a UTF-8 byte-order mark (RFC 8259 lets a reader ignore it; toolkit.untrusted
    does) is answered on stdio and over HTTP alike, not refused on one of them."""
    line = b"\xef\xbb\xbf" + _call(33, "calculator", {"expression": "6*7"})
    head = {**_modern_head(), "Mcp-Method": "tools/call", "Mcp-Name": "calculator"}
    by_http = _sse_json(httpx2.post(http_server.url, headers=head, content=line, timeout=60))
    for reply in (raw.send(line), by_http):
        assert reply["id"] == 33 and reply["result"]["structuredContent"]["result"] == 42, reply


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_every_http_refusal_is_a_json_rpc_error(http_server, era):
    """A wrong Content-Type (the SDK: plain-text "Invalid Content-Type header"), a missing one, an Accept without JSON
    and SSE (2026-07-28: an empty 406), a foreign Host: each is refused with its status and a bounded JSON-RPC
    -32600 body, in both eras, as the SDK's other refusals are."""
    line = b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}'
    base = _legacy_session(http_server.url) if era == "legacy" else {**_modern_head(), "Mcp-Method": "tools/list"}
    cases = {
        "text/plain": ({**base, "Content-Type": "text/plain"}, 400),
        "no content type": ({k: v for k, v in base.items() if k != "Content-Type"}, 400),
        "form": ({**base, "Content-Type": "application/x-www-form-urlencoded"}, 400),
        "accept html": ({**base, "Accept": "text/html"}, 406),
        "foreign host": ({**base, "Host": "evil.example"}, None),
    }
    for what, (head, status) in cases.items():
        r = httpx2.post(http_server.url, headers=head, content=line, timeout=30)
        assert r.status_code >= 400 and (status is None or r.status_code == status), (what, r.status_code)
        assert r.headers.get("content-type", "").startswith("application/json"), (what, r.headers, r.text[:100])
        reply = r.json()
        assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] == -32600, (what, reply)
        assert 0 < len(reply["error"]["message"]) < 400, (what, reply)


def test_requests_read_before_stdin_closes_are_all_answered():
    """`printf '…' | python -m toolkit mcp serve --stdio`: stdin ends right after the last request. Every request
    read gets its answer before the server exits (the session used to end first and drop the ones still pending)."""
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "0"}}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *[{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": _args(i)} for i in range(4)],
        {"jsonrpc": "2.0", "id": 20, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 21, "method": "no/such"},
    ]
    data = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit", "mcp", "serve", "--stdio"],
        input=data,
        capture_output=True,
        timeout=120,
        cwd=REPO_ROOT,
        env={**os.environ, **_child_env()},
    )
    answers = {json.loads(line)["id"] for line in proc.stdout.splitlines() if line.strip()}
    assert answers == {1, 10, 11, 12, 13, 20, 21}, (answers, proc.stderr[-400:])
    assert proc.returncode == 0, proc.stderr[-400:]


def _args(i: int) -> dict:
    return {"name": "calculator", "arguments": {"expression": f"{i} + 1"}}


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":'
        + b"7" * 5000
        + b"}}}",
        b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":NaN}}',
    ],
)
def test_huge_integers_and_nan_are_a_parse_error_not_a_crash(line):
    reply = json.loads(S.parse_line(line))
    assert reply["error"]["code"] == -32700, reply
