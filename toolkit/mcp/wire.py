"""The wire log: every JSON-RPC message of an MCP session, tapped from the SDK's transport streams.

What it does
- :class:`WireLog` keeps each message exactly as it crossed the transport, in order, with its direction
  (``->`` host to server, ``<-`` server to host) and a timestamp; for Streamable HTTP it also keeps the HTTP
  request/response lines and the MCP headers (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Session-Id``).
- :func:`logged_transport` wraps the SDK's own transports (``stdio_client`` or ``streamable_http_client``) and taps
  their read and write streams, so the log holds what the SDK's session really sent and received, serialised the
  way the stdio transport writes it, not a re-creation.

What it leaves out
- The bytes on the pipe or socket themselves: the tap sits one layer up, on parsed JSON-RPC messages (for stdio
  that is exactly one JSON line each way; HTTP framing is summarised in ``WireLog.http``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

TO_SERVER, TO_HOST = "->", "<-"


# ------------------------------------------------------------------ the log
@dataclass
class WireEntry:
    seq: int
    t: float  # seconds since the log started
    direction: str  # "->" host to server, "<-" server to host
    message: dict  # the JSON-RPC message as serialised on the wire
    transport: str = ""

    @property
    def kind(self) -> str:
        m = self.message
        if "method" in m:
            return "request" if "id" in m else "notification"
        return "error" if "error" in m else "result" if "result" in m else "unparsed"

    @property
    def method(self) -> str | None:
        return self.message.get("method")

    def line(self, hide_meta: bool = False, width: int | None = None) -> str:
        msg = without_meta(self.message) if hide_meta else self.message
        text = f"{self.direction} {json.dumps(msg, ensure_ascii=False)}"
        return text if width is None or len(text) <= width else text[: width - 1] + "…"


@dataclass
class HTTPEvent:
    t: float
    line: str  # "POST /mcp" or "200 application/json"
    headers: dict


def without_meta(obj):
    """The message with every ``_meta`` object replaced by "…" (2026-07-28 puts one on every request)."""
    if isinstance(obj, dict):
        return {k: ("…" if k == "_meta" else without_meta(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_meta(v) for v in obj]
    return obj


@dataclass
class WireLog:
    """Every JSON-RPC message of a session, both ways, in the order the transport saw them."""

    entries: list[WireEntry] = field(default_factory=list)
    http: list[HTTPEvent] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)

    def record(self, direction: str, message: dict, transport: str = "") -> None:
        self.entries.append(WireEntry(len(self.entries), time.perf_counter() - self.t0, direction, message, transport))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def clear(self) -> None:
        self.entries.clear()
        self.http.clear()

    def since(self, start: int) -> WireLog:
        """A view of the messages from index ``start`` on (e.g. ``n = len(log)`` before a step, then ``since(n)``)."""
        return WireLog(self.entries[start:], [], self.t0)

    def methods(self) -> list[str]:
        """The methods the host sent, in order (requests and notifications)."""
        return [e.method for e in self.entries if e.direction == TO_SERVER and e.method]

    def exchange(self, method: str, nth: int = 0) -> tuple[dict, dict | None]:
        """The ``nth`` request of ``method`` and the reply with the same id (``None`` if none came)."""
        reqs = [e for e in self.entries if e.direction == TO_SERVER and e.method == method and e.kind == "request"]
        if len(reqs) <= nth:
            raise KeyError(f"no request #{nth} for {method!r}; sent: {self.methods()}")
        req = reqs[nth]
        reply = next(
            (
                e.message
                for e in self.entries[req.seq :]
                if e.direction == TO_HOST and e.kind in ("result", "error") and e.message.get("id") == req.message["id"]
            ),
            None,
        )
        return req.message, reply

    def text(self, hide_meta: bool = False, width: int | None = None) -> str:
        return "\n".join(e.line(hide_meta, width) for e in self.entries)

    def http_text(self) -> str:
        return "\n".join(f"{e.line:<28} {json.dumps(e.headers)}" for e in self.http)

    def jsonl(self) -> str:
        return "\n".join(
            json.dumps(
                {"seq": e.seq, "t": round(e.t, 4), "dir": e.direction, "transport": e.transport, "message": e.message},
                ensure_ascii=False,
            )
            for e in self.entries
        )


def _dump(item: Any) -> dict:
    if isinstance(item, SessionMessage):
        # the same call the SDK's stdio transport uses to write a line, so the log equals the bytes sent
        return json.loads(item.message.model_dump_json(by_alias=True, exclude_unset=True))
    return {"unparsed": repr(item)}  # the transport hands parse failures up as exceptions


class _Tap:
    """A stream wrapper that logs what passes through it; everything else goes to the wrapped stream."""

    def __init__(self, inner, log: WireLog, transport: str):
        self._inner, self._log, self._transport = inner, log, transport

    async def aclose(self):
        await self._inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    def __getattr__(self, name):  # e.g. ``last_context``, which the SDK reads if present
        return getattr(self._inner, name)


class _TapRead(_Tap):
    async def receive(self):
        item = await self._inner.receive()
        self._log.record(TO_HOST, _dump(item), self._transport)
        return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        import anyio  # lazy: only the transport in use is loaded

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


class _TapWrite(_Tap):
    async def send(self, item, /):
        self._log.record(TO_SERVER, _dump(item), self._transport)
        await self._inner.send(item)


def read_shared(f) -> str:
    """All text written so far to a file a child process shares with us, without moving the shared offset
    (a seek would make the child's next write land in the wrong place)."""
    out, pos = b"", 0
    while chunk := os.pread(f.fileno(), 1 << 16, pos):
        out, pos = out + chunk, pos + len(chunk)
    return out.decode("utf-8", "replace")


async def _wait_ready(errlog, marker: str, timeout: float) -> int | None:
    """Wait until the server's stderr shows ``marker``; return the PID it announces (if any)."""
    import anyio  # lazy: only the transport in use is loaded

    with anyio.fail_after(timeout):
        while marker not in (text := read_shared(errlog)):
            await anyio.sleep(0.05)
    line = text[text.index(marker) :].splitlines()[0]
    digits = "".join(ch for ch in line.rsplit("pid", 1)[-1] if ch.isdigit())
    return int(digits) if digits else None


@asynccontextmanager
async def logged_transport(
    target: StdioServerParameters | str,
    log: WireLog,
    errlog=None,
    ready: str | None = None,
    ready_timeout: float = 120.0,
    on_ready=None,
):
    """An SDK transport for ``target`` (stdio parameters or an http URL) whose streams record into ``log``.

    ``ready``: for stdio, first wait until the server's stderr (``errlog``, a real file) shows this text, then
    call ``on_ready(pid)``; the kit's server prints ``toolkit.mcp.server.READY``."""
    if isinstance(target, StdioServerParameters):
        async with stdio_client(target, errlog=errlog or sys.stderr) as (read, write):
            if ready:
                pid = await _wait_ready(errlog, ready, ready_timeout)
                if on_ready:
                    on_ready(pid)
            yield _TapRead(read, log, "stdio"), _TapWrite(write, log, "stdio")
        return

    t0 = log.t0

    def keep(headers) -> dict:
        return {
            k: v for k, v in headers.items() if k.lower().startswith("mcp") or k.lower() in ("content-type", "origin")
        }

    async def on_request(request):
        log.http.append(
            HTTPEvent(time.perf_counter() - t0, f"{request.method} {request.url.path}", keep(request.headers))
        )

    async def on_response(response):
        log.http.append(
            HTTPEvent(
                time.perf_counter() - t0,
                f"  {response.status_code} {response.headers.get('content-type', '')}",
                keep(response.headers),
            )
        )

    http = create_mcp_http_client()
    http.event_hooks = {"request": [on_request], "response": [on_response]}
    async with http, streamable_http_client(target, http_client=http) as (read, write):
        yield _TapRead(read, log, "http"), _TapWrite(write, log, "http")
