"""A synchronous MCP client over the official SDK, and remote tools the host loop can drive like local ones.

What it does
- :class:`Connection` runs the SDK's ``mcp.Client`` on a background event loop (an anyio blocking portal), so
  notebook cells, the CLI and the host loop can call ``list_tools()``, ``call_tool()`` and raw ``request()``
  synchronously; every message lands in a ``toolkit.mcp.wire.WireLog``. ``mode="auto"`` (the SDK default) probes
  ``server/discover`` (protocol 2026-07-28) and falls back to the ``initialize`` handshake; ``mode="legacy"``
  forces the handshake (it negotiates 2025-11-25 with this SDK).
- :meth:`Connection.tools` turns the server's ``tools/list`` into ``toolkit.mcp.tool.MCPTool`` objects that the host
  loop (``toolkit.loop``) drives like ``toolkit.tools.Tool``; their schema is ``inputSchema`` as received, and
  results come back marked as untrusted data (``toolkit.mcp.marking``).

What it leaves out
- Resources, prompts, sampling, roots, elicitation and subscriptions; OAuth; resuming a broken HTTP stream.
"""

from __future__ import annotations

import atexit
import sys
import tempfile
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters

from toolkit.mcp.process import READY_MARK
from toolkit.mcp.tool import MCPTool
from toolkit.mcp.wire import WireLog, logged_transport, read_shared


class Connection:
    """One live MCP session (stdio subprocess or Streamable HTTP URL), driven synchronously.

    >>> with Connection(stdio_server()) as c:          # doctest: +SKIP
    ...     c.list_tools(); c.call_tool("calculator", {"expression": "250*15%"})
    """

    def __init__(
        self,
        target: StdioServerParameters | str,
        *,
        mode: str = "auto",
        log: WireLog | None = None,
        timeout: float = 60.0,
        call_timeout: float = 30.0,
        label: str | None = None,
        ready: str | None = "auto",
    ):
        self.target, self.mode, self.timeout, self.call_timeout = target, mode, timeout, call_timeout
        # "auto": wait for READY_MARK when the target is the kit's own stdio server, else do not wait
        is_kit = not isinstance(target, str) and target.args[:4] == ["-m", "toolkit", "mcp", "serve"]
        self.ready = (READY_MARK if is_kit else None) if ready == "auto" else ready
        self.server_pid: int | None = None  # stdio: the PID the kit's server announced (tests check it is gone)
        self.log = log if log is not None else WireLog()
        # identity: how the host reaches the server (what an allowlist trusts); label: a short name for people
        self.identity = target if isinstance(target, str) else " ".join([target.command, *target.args])
        self.label = label or ("stdio" if not isinstance(target, str) else target)
        self._portal_cm = self._portal = self._client_cm = self._client = None
        # the server's stderr (SDK warnings, tracebacks) goes to a file: a notebook's stderr has no descriptor
        self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8")

    # lifecycle -------------------------------------------------------
    def open(self) -> Connection:
        from anyio.from_thread import start_blocking_portal  # lazy: only when a session runs

        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        try:
            transport = logged_transport(
                self.target,
                self.log,
                self._errlog,
                ready=self.ready,
                on_ready=lambda pid: setattr(self, "server_pid", pid),
            )
            client = Client(
                transport,
                mode=self.mode,
                read_timeout_seconds=self.timeout,
                cache=None,  # every list_tools goes on the wire
                client_info=types.Implementation(name="toolcall-kit-host", version="0.1.0"),
            )
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

    def __enter__(self) -> Connection:
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

    def call_tool(self, name: str, arguments: dict | None = None, timeout: float | None = None) -> types.CallToolResult:
        """``tools/call``. A tool failure comes back as a result with ``is_error``; a protocol error (unknown
        tool, bad params) or a timeout raises :class:`MCPError` (timeout: code -32001, raised on this side)."""
        t = self.call_timeout if timeout is None else timeout
        return self._run(lambda: self._client.call_tool(name, arguments or {}, read_timeout_seconds=t))

    def request(self, method: str, params: dict | None = None, timeout: float | None = None) -> dict:
        """Send any JSON-RPC request through the session (same envelope and ``_meta`` as the SDK's own calls);
        returns the raw result, raises :class:`MCPError` for a JSON-RPC error."""
        from pydantic import TypeAdapter  # lazy: only when a session runs

        async def send():
            # a Request whose params stay a plain dict: the SDK's typed params would drop unknown keys
            req = types.Request[dict[str, Any] | None, str](method=method, params=params)
            return await self._client.session.send_request(
                req, TypeAdapter(dict[str, Any]), request_read_timeout_seconds=timeout or self.timeout
            )

        return self._run(send)

    def tools(self, allowlist=None) -> dict[str, MCPTool]:
        """The server's tools as host-side tool objects; with an ``allowlist`` (see ``toolkit.mcp.safety``) only
        approved ones, each marked for confirmation as the allowlist says."""
        listed = self.list_tools()
        if allowlist is not None:
            return allowlist.approve(self, listed)
        return {t.name: MCPTool.from_mcp(t, self) for t in listed}
