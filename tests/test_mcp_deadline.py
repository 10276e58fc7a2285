"""The HTTP server's deadline for partial requests (toolkit/mcp/deadline.py): a connection that sends nothing,
half a head or half a body gets 408 with a JSON-RPC -32600 body and is closed within the deadline; a whole request
is answered and its connection kept. uvicorn runs in a thread of this test, on 127.0.0.1, with a 1 s deadline."""

import asyncio
import json
import socket
import threading
import time

import pytest
import uvicorn

from toolkit.mcp.deadline import deadline_protocol
from toolkit.mcp.server import bind

DEADLINE_S = 1.0


Short = deadline_protocol(DEADLINE_S)


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(scope="module")
def server():
    sock = bind(0)
    srv = uvicorn.Server(uvicorn.Config(app, http=Short, log_level="error", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(srv.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.02)
    yield sock.getsockname()
    srv.should_exit = True
    thread.join(10)
    assert not thread.is_alive()


def _read_all(s: socket.socket, limit_s: float) -> tuple[bytes, float]:
    t, data = time.perf_counter(), b""
    s.settimeout(limit_s)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data, time.perf_counter() - t
        data += chunk


HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"


@pytest.mark.parametrize("sent", [b"", HEAD[:30], HEAD, HEAD + b"\r\n" + b'{"jsonrpc": "2.0",'], ids=str)
def test_partial_requests_get_408_and_are_closed(server, sent):
    conns = [socket.create_connection(server) for _ in range(10)]
    for c in conns:
        c.sendall(sent)
    for c in conns:
        data, took = _read_all(c, DEADLINE_S + 5)
        c.close()
        assert data.startswith(b"HTTP/1.1 408"), data[:100]
        assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"]["code"] == -32600
        assert took < DEADLINE_S + 3


def _get(c: socket.socket) -> bytes:
    c.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    c.settimeout(5)
    data = b""
    while not data.endswith(b"ok"):
        chunk = c.recv(65536)
        assert chunk, data
        data += chunk
    return data


def test_a_whole_request_is_answered_and_its_connection_kept(server):
    with socket.create_connection(server) as c:
        assert _get(c).startswith(b"HTTP/1.1 200") and _get(c).startswith(b"HTTP/1.1 200")
        time.sleep(DEADLINE_S + 0.5)  # idle between requests is keep-alive's (5 s), not the partial deadline's
        assert _get(c).startswith(b"HTTP/1.1 200")
