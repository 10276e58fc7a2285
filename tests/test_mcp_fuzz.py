"""Both MCP transports fuzzed with generated JSON-RPC (hypothesis, a fixed small budget): huge integers, NaN and
1e999, deep nesting, odd encodings and a wrong type at every position of the envelope. stdio's line reader never
raises and answers with -32700/-32600 or passes a message on; the real stdio server answers every line it must
and keeps serving; the real HTTP server never answers 500 and every JSON reply is a JSON-RPC message. Servers run
on 127.0.0.1 and are stopped by PID (``tests/test_mcp_edges.py``'s fixtures)."""

import itertools
import json
import os
import select
import time

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage
from test_mcp_edges import META, _legacy_session, http_server, raw  # noqa: F401 (fixtures)

from toolkit.mcp import stdio as S
from toolkit.mcp.process import pid_alive

PROBES = itertools.count()
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
LIVE = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

HUGE = "\x00huge"  # stands for a 5,000-digit integer (json.dumps cannot write one: Python's 4,300-digit limit)
huge = st.just(HUGE)
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | huge
    | st.floats()  # NaN and Infinity included: json.dumps writes them as bare words
    | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=12,
)
envelope = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | anything,
        "id": st.integers(min_value=1000, max_value=1999) | anything,
        "method": st.sampled_from(["ping", "tools/list", "tools/call", "initialize", "nope"]) | anything,
        "params": st.just({"name": "calculator", "arguments": {"expression": "1+1"}}) | anything,
    },
)


def _deep(levels: int, opener: str) -> str:
    return '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":' + opener * levels + "1" + "]" * levels + "}}"


def _dumps(message) -> str:
    return json.dumps(message).replace(json.dumps(HUGE), "9" * 5000)


lines = st.one_of(
    envelope.map(lambda m: _dumps(m).encode()),
    envelope.map(lambda m: _dumps(m).encode("utf-16")),
    st.tuples(envelope, st.binary(min_size=1, max_size=3)).map(lambda t: _dumps(t[0]).encode()[:-1] + t[1] + b"}"),
    st.integers(min_value=10, max_value=3000).map(lambda n: _deep(n, "[").encode()),
)


def _is_error_line(data: bytes) -> bool:
    reply = json.loads(data)
    return reply["jsonrpc"] == "2.0" and reply["error"]["code"] in (-32700, -32600) and len(data) < 4096


@FUZZ
@given(lines)
def test_fuzz_stdio_line_reader_answers_or_passes_on(line):
    item = S.parse_line(line.replace(b"\n", b" "))
    assert item is None or isinstance(item, SessionMessage) or _is_error_line(item)


def _replies_until(fd: int, probe: str, timeout: float) -> list[dict] | None:
    """Reply lines read straight from the pipe (a buffered readline after select misses lines that came together)
    up to the one whose id is ``probe``; None when it does not come within ``timeout``."""
    buf, out, end = b"", [], time.monotonic() + timeout
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            reply = json.loads(line)
            if reply.get("id") == probe:
                return out
            out.append(reply)
        if not select.select([fd], [], [], max(0.0, end - time.monotonic()))[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return None
        buf += chunk


@LIVE
@given(lines)
def test_fuzz_the_stdio_server_answers_and_keeps_serving(raw, line):  # noqa: F811 (the fixture)
    """Each generated line, then a ping with a fresh id: the line's error (when stdio's reader refuses it) comes
    before the ping's answer, every reply is JSON-RPC, and the server is still there."""
    line = line.replace(b"\n", b" ")
    expected = S.parse_line(line)
    probe = f"probe-{next(PROBES)}"
    raw.proc.stdin.write(
        line
        + b"\n"
        + json.dumps({"jsonrpc": "2.0", "id": probe, "method": "tools/list", "params": {"_meta": META}}).encode()
        + b"\n"
    )
    raw.proc.stdin.flush()
    replies = _replies_until(raw.proc.stdout.fileno(), probe, 30)
    assert replies is not None, f"no answer to a ping after {line[:80]!r}"
    if isinstance(expected, bytes):
        assert json.loads(expected) in replies, (line[:200], replies)
    for reply in replies:
        assert reply.get("jsonrpc") == "2.0" and ("result" in reply or "error" in reply)
    assert pid_alive(raw.proc.pid)


@LIVE
@given(lines)
def test_fuzz_the_http_server_never_answers_500(http_server, line):  # noqa: F811 (the fixture)
    head = _legacy_session(http_server.url)
    r = httpx2.post(http_server.url, headers=head, content=line, timeout=30)
    assert r.status_code < 500, (r.status_code, r.text[:300])
    if r.headers.get("content-type", "").startswith("application/json") and r.content:
        reply = r.json()
        assert reply.get("jsonrpc") == "2.0" and ("result" in reply or "error" in reply)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert httpx2.post(http_server.url, headers=head, json=ping, timeout=30).status_code == 200
