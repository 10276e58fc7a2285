"""An MCP client path that records every JSON-RPC message on the wire, usable from plain synchronous code.

What it does
- :class:`WireLog` keeps each message exactly as it crossed the transport, in order, with its direction
  (``->`` host to server, ``<-`` server to host) and a timestamp; for Streamable HTTP it also keeps the HTTP
  request/response lines and the MCP headers (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Session-Id``).
- :func:`logged_transport` wraps any SDK transport (``stdio_client`` or ``streamable_http_client``) and taps its
  read and write streams, so what is logged is what the SDK's session really sent and received, not a
  re-creation of it.
- :class:`Connection` drives the SDK's ``mcp.Client`` on a background event loop (an anyio blocking portal), so
  notebook cells, the CLI and the host loop can call ``list_tools()``, ``call_tool()`` and raw ``request()``
  synchronously. ``mode="auto"`` (the SDK default) probes ``server/discover`` (protocol 2026-07-28) and falls back
  to the ``initialize`` handshake; ``mode="legacy"`` forces the handshake (negotiates 2025-11-25 here).
- :meth:`Connection.tools` turns the server's ``tools/list`` into host-side tool objects (:class:`MCPTool`: ``name``,
  ``schema``, ``needs_confirmation``, ``call(args)``) that ``toolkit.host`` drives like local tools. The
  ``schema`` is built from ``inputSchema`` as received, so rendering it shows exactly what the server sent.
- ``stdio_server(...)`` and :class:`HTTPServer` start the kit's own server as a subprocess (HTTP on a free
  127.0.0.1 port) and stop it by PID.

What it leaves out
- Resources, prompts, sampling, roots, elicitation and subscriptions; OAuth; resuming a broken HTTP stream.
- Reading the bytes on the pipe or socket themselves: the tap sits one layer up, on parsed JSON-RPC messages
  (for stdio these are exactly one JSON line each way; HTTP framing is summarised in ``WireLog.http``).
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

__all__ = ["WireEntry", "WireLog", "logged_transport", "Connection", "MCPTool", "MCPError", "HTTPServer",
           "stdio_server", "function_schema", "result_text", "pid_alive"]

TO_SERVER, TO_HOST = "->", "<-"
READY_MARK = "toolcall-kit MCP server ready"   # the kit's stdio server prints this (and its PID) to stderr
REPO_ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ the log
@dataclass
class WireEntry:
    seq: int
    t: float                 # seconds since the log started
    direction: str           # "->" host to server, "<-" server to host
    message: dict            # the JSON-RPC message as serialised on the wire
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
        msg = _without_meta(self.message) if hide_meta else self.message
        text = f"{self.direction} {json.dumps(msg, ensure_ascii=False)}"
        return text if width is None or len(text) <= width else text[: width - 1] + "…"


@dataclass
class HTTPEvent:
    t: float
    line: str                # "POST /mcp" or "200 application/json"
    headers: dict


def _without_meta(obj):
    """The message with every ``_meta`` object replaced by "…" (2026-07-28 puts one on every request)."""
    if isinstance(obj, dict):
        return {k: ("…" if k == "_meta" else _without_meta(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_without_meta(v) for v in obj]
    return obj


@dataclass
class WireLog:
    """Every JSON-RPC message of a session, both ways, in the order the transport saw them."""

    entries: list[WireEntry] = field(default_factory=list)
    http: list[HTTPEvent] = field(default_factory=list)
    t0: float = field(default_factory=time.perf_counter)

    def record(self, direction: str, message: dict, transport: str = "") -> None:
        self.entries.append(WireEntry(len(self.entries), time.perf_counter() - self.t0, direction, message,
                                      transport))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def clear(self) -> None:
        self.entries.clear()
        self.http.clear()

    def since(self, start: int) -> "WireLog":
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
        reply = next((e.message for e in self.entries[req.seq:] if e.direction == TO_HOST
                      and e.kind in ("result", "error") and e.message.get("id") == req.message["id"]), None)
        return req.message, reply

    def text(self, hide_meta: bool = False, width: int | None = None) -> str:
        return "\n".join(e.line(hide_meta, width) for e in self.entries)

    def http_text(self) -> str:
        return "\n".join(f"{e.line:<28} {json.dumps(e.headers)}" for e in self.http)

    def jsonl(self) -> str:
        return "\n".join(json.dumps({"seq": e.seq, "t": round(e.t, 4), "dir": e.direction,
                                     "transport": e.transport, "message": e.message}, ensure_ascii=False)
                         for e in self.entries)


def _dump(item: Any) -> dict:
    if isinstance(item, SessionMessage):
        # the same call the SDK's stdio transport uses to write a line, so the log equals the bytes sent
        return json.loads(item.message.model_dump_json(by_alias=True, exclude_unset=True))
    return {"unparsed": repr(item)}  # the transport hands parse failures up as exceptions


class _TapRead:
    def __init__(self, inner, log: WireLog, transport: str):
        self._inner, self._log, self._transport = inner, log, transport

    async def receive(self):
        item = await self._inner.receive()
        self._log.record(TO_HOST, _dump(item), self._transport)
        return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        import anyio

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self):
        await self._inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    def __getattr__(self, name):  # e.g. ``last_context``, which the SDK reads if present
        return getattr(self._inner, name)


class _TapWrite:
    def __init__(self, inner, log: WireLog, transport: str):
        self._inner, self._log, self._transport = inner, log, transport

    async def send(self, item, /):
        self._log.record(TO_SERVER, _dump(item), self._transport)
        await self._inner.send(item)

    async def aclose(self):
        await self._inner.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    def __getattr__(self, name):
        return getattr(self._inner, name)


def read_shared(f) -> str:
    """All text written so far to a file a child process shares with us, without moving the shared offset
    (a seek would make the child's next write land in the wrong place)."""
    out, pos = b"", 0
    while chunk := os.pread(f.fileno(), 1 << 16, pos):
        out, pos = out + chunk, pos + len(chunk)
    return out.decode("utf-8", "replace")


async def _wait_ready(errlog, marker: str, timeout: float) -> int | None:
    """Wait until the server's stderr shows ``marker``; return the PID it announces (if any)."""
    import anyio

    with anyio.fail_after(timeout):
        while marker not in (text := read_shared(errlog)):
            await anyio.sleep(0.05)
    line = text[text.index(marker):].splitlines()[0]
    digits = "".join(ch for ch in line.rsplit("pid", 1)[-1] if ch.isdigit())
    return int(digits) if digits else None


@asynccontextmanager
async def logged_transport(target: StdioServerParameters | str, log: WireLog, errlog=None,
                           ready: str | None = None, ready_timeout: float = 120.0, on_ready=None):
    """An SDK transport for ``target`` (stdio parameters or an http URL) whose streams record into ``log``.

    ``ready``: for stdio, first wait until the server's stderr (``errlog``, a real file) shows this text, then
    call ``on_ready(pid)``; the kit's server prints ``toolkit.mcp.server.READY``."""
    if isinstance(target, StdioServerParameters):
        from mcp.client.stdio import stdio_client

        async with stdio_client(target, errlog=errlog or sys.stderr) as (read, write):
            if ready:
                pid = await _wait_ready(errlog, ready, ready_timeout)
                if on_ready:
                    on_ready(pid)
            yield _TapRead(read, log, "stdio"), _TapWrite(write, log, "stdio")
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    t0 = log.t0

    def keep(headers) -> dict:
        return {k: v for k, v in headers.items() if k.lower().startswith("mcp") or k.lower() in
                ("content-type", "origin")}

    async def on_request(request):
        log.http.append(HTTPEvent(time.perf_counter() - t0, f"{request.method} {request.url.path}",
                                  keep(request.headers)))

    async def on_response(response):
        log.http.append(HTTPEvent(time.perf_counter() - t0,
                                  f"  {response.status_code} {response.headers.get('content-type', '')}",
                                  keep(response.headers)))

    http = create_mcp_http_client()
    http.event_hooks = {"request": [on_request], "response": [on_response]}
    async with http, streamable_http_client(target, http_client=http) as (read, write):
        yield _TapRead(read, log, "http"), _TapWrite(write, log, "http")


# ------------------------------------------------------------------ synchronous connection
def function_schema(tool: types.Tool) -> dict:
    """The OpenAI-style function schema a chat template expects, built from an MCP tool as received."""
    fn: dict = {"name": tool.name}
    if tool.description is not None:
        fn["description"] = tool.description
    fn["parameters"] = tool.input_schema
    return {"type": "function", "function": fn}


def result_text(result: types.CallToolResult) -> str:
    """The text a model would read from a tool result (text blocks joined; other blocks named)."""
    parts = [c.text if getattr(c, "type", None) == "text" else f"[{getattr(c, 'type', '?')} content]"
             for c in result.content]
    return "\n".join(parts)


class Connection:
    """One live MCP session (stdio subprocess or Streamable HTTP URL), driven synchronously.

    >>> with Connection(stdio_server()) as c:          # doctest: +SKIP
    ...     c.list_tools(); c.call_tool("calculator", {"expression": "250*15%"})
    """

    def __init__(self, target: StdioServerParameters | str, *, mode: str = "auto", log: WireLog | None = None,
                 timeout: float = 60.0, call_timeout: float = 30.0, label: str | None = None,
                 ready: str | None = "auto"):
        self.target, self.mode, self.timeout, self.call_timeout = target, mode, timeout, call_timeout
        # "auto": wait for READY_MARK when the target is the kit's own stdio server, else do not wait
        is_kit = not isinstance(target, str) and target.args[:4] == ["-m", "toolkit", "mcp", "serve"]
        self.ready = (READY_MARK if is_kit else None) if ready == "auto" else ready
        self.server_pid: int | None = None   # stdio: the PID the kit's server announced (tests check it is gone)
        self.log = log if log is not None else WireLog()
        # identity: how the host reaches the server (what an allowlist trusts); label: a short name for people
        self.identity = target if isinstance(target, str) else " ".join([target.command, *target.args])
        self.label = label or ("stdio" if not isinstance(target, str) else target)
        self._portal_cm = self._portal = self._client_cm = self._client = None
        # the server's stderr (SDK warnings, tracebacks) goes to a file: a notebook's stderr has no descriptor
        self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8")

    # lifecycle -------------------------------------------------------
    def open(self) -> "Connection":
        from anyio.from_thread import start_blocking_portal

        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            transport = logged_transport(self.target, self.log, self._errlog, ready=self.ready,
                                         on_ready=lambda pid: setattr(self, "server_pid", pid))
            client = Client(transport, mode=self.mode,
                            read_timeout_seconds=self.timeout, cache=None,  # every list_tools goes on the wire
                            client_info=types.Implementation(name="toolcall-kit-host", version="0.1.0"))
            self._client_cm = self._portal.wrap_async_context_manager(client)
            self._client = self._client_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(*sys.exc_info())
            self._portal = None
            raise
        # a forgotten connection would keep its event-loop thread (and a stdio server) alive at exit
        atexit.register(self.close)
        return self

    def close(self) -> None:
        """End the session: stdio closes the server's stdin (the SDK kills it if it lingers), HTTP sends DELETE."""
        atexit.unregister(self.close)
        if self._client_cm is not None:
            try:
                self._client_cm.__exit__(None, None, None)
            finally:
                self._client_cm = self._client = None
                self._portal_cm.__exit__(None, None, None)
                self._portal = None

    def __enter__(self) -> "Connection":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def is_open(self) -> bool:
        return self._client is not None

    def _run(self, fn, *args):
        if self._client is None:
            raise RuntimeError("connection is not open (use `with Connection(...)` or .open())")
        return self._portal.call(fn, *args)

    # what the handshake / discovery settled ---------------------------------
    @property
    def protocol_version(self) -> str:
        return self._client.protocol_version

    @property
    def server_info(self) -> types.Implementation | None:
        return self._client.server_info

    def server_stderr(self) -> str:
        return read_shared(self._errlog)

    # MCP methods ----------------------------------------------------------
    def list_tools(self) -> list[types.Tool]:
        async def all_pages():
            tools, cursor = [], None
            while True:
                page = await self._client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    return tools
        return self._run(all_pages)

    def call_tool(self, name: str, arguments: dict | None = None, timeout: float | None = None
                  ) -> types.CallToolResult:
        """``tools/call``. A tool failure comes back as a result with ``is_error``; a protocol error (unknown
        tool, bad params) or a timeout raises :class:`MCPError` (timeout: code -32001, raised on this side)."""
        t = self.call_timeout if timeout is None else timeout
        return self._run(lambda: self._client.call_tool(name, arguments or {}, read_timeout_seconds=t))

    def request(self, method: str, params: dict | None = None, timeout: float | None = None) -> dict:
        """Send any JSON-RPC request through the session (same envelope and ``_meta`` as the SDK's own calls);
        returns the raw result, raises :class:`MCPError` for a JSON-RPC error."""
        from pydantic import TypeAdapter

        async def send():
            # a Request whose params stay a plain dict: the SDK's typed params would drop unknown keys
            req = types.Request[dict[str, Any] | None, str](method=method, params=params)
            return await self._client.session.send_request(req, TypeAdapter(dict[str, Any]),
                                                            request_read_timeout_seconds=timeout or self.timeout)
        return self._run(send)

    def tools(self, allowlist=None) -> dict[str, "MCPTool"]:
        """The server's tools as host-side tool objects; with an ``allowlist`` (see ``toolkit.mcp.safety``) only
        approved ones, each marked for confirmation as the allowlist says."""
        listed = self.list_tools()
        if allowlist is not None:
            return allowlist.approve(self, listed)
        return {t.name: MCPTool.from_mcp(t, self) for t in listed}


@dataclass
class MCPTool:
    """A remote tool that looks like a local ``toolkit.tools.Tool`` to the host loop."""

    name: str
    schema: dict
    needs_confirmation: bool
    connection: Connection
    definition: types.Tool
    server: str = ""

    @classmethod
    def from_mcp(cls, tool: types.Tool, connection: Connection, needs_confirmation: bool | None = None
                 ) -> "MCPTool":
        hinted = bool(tool.annotations and tool.annotations.destructive_hint)
        return cls(tool.name, function_schema(tool), hinted if needs_confirmation is None else needs_confirmation,
                   connection, tool, connection.label)

    @property
    def description(self) -> str:
        return self.schema["function"].get("description", "")

    @property
    def parameters(self) -> dict:
        return self.schema["function"]["parameters"]

    def call(self, args: dict) -> dict:
        """Run the tool on the server; return its output marked as untrusted data (``safety.untrusted``).

        A tool failure (``isError``), a protocol error or a timeout raises ``toolkit.tools.ToolError``, which the
        host loop turns into an error result the model reads."""
        from toolkit.mcp.safety import untrusted
        from toolkit.tools import ToolError

        try:
            result = self.connection.call_tool(self.name, args)
        except MCPError as e:
            kind = "timed out" if e.code == types.REQUEST_TIMEOUT else f"protocol error {e.code}"
            raise ToolError(f"{self.name}: {kind}: {e.error.message}") from None
        if result.is_error:
            raise ToolError(f"{self.name} failed (untrusted text from MCP server {self.server}): "
                            f"{result_text(result)}")
        # structuredContent when the server sent it (no JSON inside a JSON string), else the text blocks
        content = result.structured_content if result.structured_content is not None else result_text(result)
        return untrusted(content, server=self.server, tool=self.name)


# ------------------------------------------------------------------ starting the kit's own server
def _server_args(demo: bool, test_tools: bool, notes_dir: str | os.PathLike | None) -> list[str]:
    args = ["--demo"] if demo else []
    args += ["--test-tools"] if test_tools else []
    args += ["--notes-dir", str(notes_dir)] if notes_dir else []
    return args


def _child_env() -> dict[str, str]:
    # the SDK passes only a few safe variables to a stdio server; the kit must still import and stay offline
    env = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                                             os.environ.get("PYTHONPATH")]))}
    for key in ("TOOLKIT_CACHE", "TOOLKIT_NOTES_DIR", "HF_HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def stdio_server(demo: bool = False, test_tools: bool = False, notes_dir=None, pid_file=None
                 ) -> StdioServerParameters:
    """How to launch ``python -m toolkit mcp serve --stdio`` as the host's subprocess."""
    args = ["-m", "toolkit", "mcp", "serve", "--stdio", *_server_args(demo, test_tools, notes_dir)]
    args += ["--pid-file", str(pid_file)] if pid_file else []
    return StdioServerParameters(command=sys.executable, args=args, env=_child_env(), cwd=str(REPO_ROOT))


class HTTPServer:
    """``python -m toolkit mcp serve --http --port 0`` as a subprocess; ``url`` once it listens, ``stop()`` by PID."""

    def __init__(self, demo: bool = False, test_tools: bool = False, notes_dir=None, startup_timeout: float = 60):
        cmd = [sys.executable, "-m", "toolkit", "mcp", "serve", "--http", "--port", "0",
               *_server_args(demo, test_tools, notes_dir)]
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                     env={**os.environ, **_child_env()}, cwd=str(REPO_ROOT))
        self.pid = self.proc.pid
        atexit.register(self.stop)  # never leave a server behind when the notebook or test process ends
        self.url = self._wait_for_url(startup_timeout)

    def _wait_for_url(self, timeout: float) -> str:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.stop()
            raise TimeoutError(f"MCP HTTP server did not start within {timeout} s")
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.stop()
            raise RuntimeError(f"MCP HTTP server failed to start: {line!r} {self.stderr()[-2000:]}")
        return line.split("on ", 1)[1].split()[0]

    def stderr(self) -> str:
        return read_shared(self._stderr)

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM, then SIGKILL if it lingers; returns the exit code."""
        atexit.unregister(self.stop)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self) -> "HTTPServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID still exists (a zombie we have not reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: a zombie still answers kill(0); its state letter says it is dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
