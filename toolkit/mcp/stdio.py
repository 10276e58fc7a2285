"""The server side of MCP's stdio transport, strict about what it reads: every line gets an answer or is a message.

What it does
- :func:`stdio_transport` yields the (read, write) stream pair the SDK's ``Server.run`` expects, like
  ``mcp.server.stdio.stdio_server``, but reads stdin as bytes in bounded chunks and checks each line itself
  through ``toolkit.untrusted`` (the kit's one bounded reader, as for files and HTTP bodies): a line that is not
  UTF-8, not JSON, or JSON over a bound (an integer of more than 40 digits, ``NaN``/``Infinity``/``1e999``,
  nesting deeper than 64 levels) gets JSON-RPC ``-32700`` (parse error); well-formed JSON that is not one
  JSON-RPC 2.0 message (a batch array, a bare value, an object without ``"jsonrpc": "2.0"``, a bad id) gets
  ``-32600`` (invalid request). The SDK's own transport hands these to the session as exceptions, which answers
  nothing, so a client waits forever.
- A line longer than ``MAX_MESSAGE_BYTES`` (4 MiB, the SDK's limit for an HTTP body) is skipped as it streams
  in, never held whole, and answered with ``-32600`` naming its size; the request id is recovered from the
  line's first bytes where it stands at the top level (the SDK writes ``id`` before ``params``).
- Every error message is bounded (``toolkit.tools.bounded_message``) and says how long the input was; errors the
  SDK writes pass through :func:`bounded_error` on their way out.
- When stdin closes, the requests already read are still answered (bounded by ``DRAIN_S``) before the session ends.
- While serving, file descriptor 0 reads the null device and 1 writes to stderr, so a stray ``print`` in a tool
  cannot corrupt the protocol stream (the SDK's transport does the same); both are restored afterwards.

What it leaves out
- Windows handles; message batching (removed from MCP in revision 2025-06-18, so a batch is an invalid request).
"""

from __future__ import annotations

import json
import os
import re
import sys
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from toolkit.errors import bounded_message
from toolkit.untrusted import UntrustedInputError, parse_json

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # the SDK's DEFAULT_MAX_REQUEST_BODY_SIZE for Streamable HTTP
CHUNK = 1 << 16
MAX_ERROR_DATA_CHARS = 300
DRAIN_S = 30.0  # after stdin closes: how long requests already read may take to be answered before the server ends
_ID_HEAD = re.compile(rb'\s*"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


def error_line(code: int, message: str, request_id=None) -> bytes:
    err = types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=bounded_message(message))
    )
    return err.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def bounded_error(message):
    """The same JSON-RPC message, with an error's ``message`` and ``data`` bounded (the SDK echoes some inputs:
    "Method not found" carries the whole method name as ``data``)."""
    if not isinstance(message, types.JSONRPCError):
        return message
    err = message.error
    data = err.data
    if data is not None and len(json.dumps(data, default=str)) > MAX_ERROR_DATA_CHARS:
        data = bounded_message(data if isinstance(data, str) else json.dumps(data, default=str), MAX_ERROR_DATA_CHARS)
    if len(err.message) <= MAX_ERROR_DATA_CHARS and data is err.data:
        return message
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=message.id,
        error=types.ErrorData(code=err.code, message=bounded_message(err.message), data=data),
    )


def _valid_id(value):
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None


def top_level_id(head: bytes):
    """The ``id`` of a JSON-RPC object from its first bytes, if it appears there at the top level; else None."""
    depth, in_str, esc = 0, False, False
    for i, ch in enumerate(head):
        if in_str:
            if esc:
                esc = False
            elif ch == 0x5C:  # backslash
                esc = True
            elif ch == 0x22:  # closing quote
                in_str = False
            continue
        if ch == 0x22:
            if depth == 1 and (m := _ID_HEAD.match(head, i)) and head[m.end() : m.end() + 40].lstrip()[:1] in b",}":
                try:
                    return _valid_id(json.loads(m.group(1)))
                except ValueError:
                    return None
            in_str = True
        elif ch in b"{[":
            depth += 1
        elif ch in b"}]":
            depth -= 1
    return None


def parse_line(line: bytes, max_bytes: int = MAX_MESSAGE_BYTES) -> SessionMessage | bytes | None:
    """One stdin line (or HTTP body) -> a message for the session, an error reply (bytes) to write back, or None
    (blank). The bytes are read by ``toolkit.untrusted.parse_json``, the kit's one bounded reader: not UTF-8, not
    JSON, an integer over its digit limit, ``NaN``/``Infinity``/``1e999`` or nesting past its depth limit is
    ``-32700`` (parse error); for the last three the text was JSON, so the id is recovered from its head."""
    if not line.strip():
        return None
    size = f"a {len(line):,}-byte line"
    try:
        obj = parse_json(line, size, max_bytes=max_bytes)
    except UntrustedInputError as e:
        rid = None if e.kind in ("encoding", "syntax") else top_level_id(line[:CHUNK])
        if e.kind == "size":
            return error_line(types.INVALID_REQUEST, f"Invalid Request: {e}", rid)
        return error_line(types.PARSE_ERROR, f"Parse error: {e}", rid)
    if isinstance(obj, list):
        return error_line(
            types.INVALID_REQUEST,
            f"Invalid Request: batch arrays are not supported ({len(obj):,} "
            "elements); send one JSON-RPC object per line",
        )
    if not isinstance(obj, dict):
        return error_line(
            types.INVALID_REQUEST,
            f"Invalid Request: a JSON-RPC message must be an object, got {type(obj).__name__} ({size})",
        )
    rid = _valid_id(obj.get("id"))
    if "id" in obj and rid is None:
        # The SDK would read {"id": {...}, "method": ...} as a notification and answer nothing
        return error_line(
            types.INVALID_REQUEST,
            f"Invalid Request: id must be a string or an integer, not {type(obj['id']).__name__} ({size})",
        )
    try:
        message = types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except ValidationError as e:
        first = e.errors()[0] if e.error_count() else {}
        where = ".".join(str(p) for p in first.get("loc", ())[1:3]) or "message"
        why = 'jsonrpc must be "2.0"' if obj.get("jsonrpc") != "2.0" else f"{where}: {first.get('msg', e)}"
        return error_line(
            types.INVALID_REQUEST,
            f"Invalid Request: not a JSON-RPC 2.0 request, notification or response ({why}; {size})",
            rid,
        )
    except RecursionError:
        return error_line(types.INVALID_REQUEST, f"Invalid Request: nested too deeply ({size})", rid)
    return SessionMessage(message)


def _claim(fd: int, diversion: int) -> int:
    """A private duplicate of ``fd`` for the protocol; ``fd`` itself now points at ``diversion``."""
    import fcntl

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    return private


@asynccontextmanager
async def stdio_transport(
    stdin_fd: int | None = None, stdout_fd: int | None = None, max_bytes: int = MAX_MESSAGE_BYTES
):
    """(read, write) streams over stdin/stdout (or the given descriptors) for ``Server.run``."""
    restore = []
    if stdin_fd is None:
        sys.stdout.flush()
        null = os.open(os.devnull, os.O_RDONLY)
        stdin_fd = _claim(0, null)
        os.close(null)
        stdout_fd = _claim(1, 2)
        restore = [(stdin_fd, 0), (stdout_fd, 1)]
    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)
    out_lock = anyio.Lock()
    pending: set = set()  # ids of requests handed to the session and not answered yet

    async def deliver(item: SessionMessage) -> None:
        if isinstance(item.message, types.JSONRPCRequest):
            pending.add(item.message.id)
        await read_writer.send(item)

    async def emit(data: bytes) -> None:
        async with out_lock:
            view = memoryview(data)
            while view:
                n = await anyio.to_thread.run_sync(os.write, stdout_fd, view)
                view = view[n:]

    async def reader() -> None:
        buf = bytearray()
        skipping = 0  # > 0 while discarding an over-long line: bytes seen so far
        head = b""
        async with read_writer:
            while True:
                chunk = await anyio.to_thread.run_sync(os.read, stdin_fd, CHUNK, abandon_on_cancel=True)
                if not chunk:
                    break
                start = 0
                while start < len(chunk):
                    nl = chunk.find(b"\n", start)
                    piece = chunk[start : nl if nl >= 0 else len(chunk)]
                    start = len(chunk) if nl < 0 else nl + 1
                    if skipping:
                        skipping += len(piece)
                    elif len(buf) + len(piece) > max_bytes:
                        head = bytes((buf + piece)[:CHUNK])
                        skipping = len(buf) + len(piece)
                        buf.clear()
                    else:
                        buf += piece
                    if nl < 0:
                        continue
                    if skipping:
                        await emit(
                            error_line(
                                types.INVALID_REQUEST,
                                f"Invalid Request: message of {skipping:,} "
                                f"bytes exceeds the limit of {max_bytes:,} bytes",
                                top_level_id(head),
                            )
                        )
                        skipping, head = 0, b""
                        continue
                    item = parse_line(bytes(buf), max_bytes)
                    buf.clear()
                    if isinstance(item, bytes):
                        await emit(item)
                    elif item is not None:
                        await deliver(item)
            if skipping:
                await emit(
                    error_line(
                        types.INVALID_REQUEST,
                        f"Invalid Request: message of {skipping:,} bytes exceeds the limit of {max_bytes:,} bytes",
                        top_level_id(head),
                    )
                )
            elif buf.strip():  # a last line without its newline
                item = parse_line(bytes(buf), max_bytes)
                if isinstance(item, bytes):
                    await emit(item)
                elif item is not None:
                    await deliver(item)
            # stdin closed: closing the read stream now ends the session, and requests still running (or not yet
            # dispatched) would never be answered (`printf '…' | serve` lost its last request); wait for them, bounded
            with anyio.move_on_after(DRAIN_S):
                while pending:
                    await anyio.sleep(0.005)

    async def writer() -> None:
        async with write_reader:
            async for message in write_reader:
                reply = bounded_error(message.message)
                await emit(reply.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                if isinstance(reply, (types.JSONRPCResponse, types.JSONRPCError)):
                    pending.discard(reply.id)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_stream, write_stream
    finally:
        for private, fd in restore:
            try:
                os.dup2(private, fd)
                os.close(private)
            except OSError:
                pass
