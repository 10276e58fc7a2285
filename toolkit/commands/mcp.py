"""``python -m toolkit mcp ...``: serve the kit's tools over MCP, or print the wire log of a demo session.

What it does
- ``serve --stdio`` / ``serve --http --port N`` run ``toolkit.mcp.server`` (HTTP binds 127.0.0.1 only; port 0
  picks a free one and the first stdout line names the URL). ``--demo`` adds ``fetch_page`` and
  ``delete_notes``, ``--test-tools`` adds ``hang``; ``--notes-dir`` chooses the notes sandbox; ``--pid-file``
  writes the server's PID (tests use it to check nothing is left running).
- ``wirelog --stdio|--http [--legacy]`` starts a server, runs one scripted session (discovery, ``tools/list``,
  a good call, a failing call, an unknown tool and an unknown method), stops the server and prints every
  JSON-RPC message both ways (``--hide-meta`` elides the ``_meta`` objects, ``--jsonl`` prints JSON lines).

What it leaves out
- Connecting to third-party servers (``toolkit.mcp.client.Connection`` does that from Python).
"""

from __future__ import annotations

import argparse
import os
import sys

from toolkit import cliargs
from toolkit.tools import set_notes_dir


def _parser() -> argparse.ArgumentParser:
    p = cliargs.Parser(prog="python -m toolkit mcp", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve the kit's tools over MCP")
    how = s.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", action="store_true", help="JSON-RPC over stdin/stdout")
    how.add_argument("--http", action="store_true", help="Streamable HTTP on 127.0.0.1")
    s.add_argument("--port", type=cliargs.port(), default=0, help="HTTP port (0: a free one)")
    s.add_argument("--demo", action="store_true", help="add fetch_page (injection carrier) and delete_notes")
    s.add_argument("--test-tools", action="store_true", help="add hang (a tool that never answers in time)")
    s.add_argument("--notes-dir", type=cliargs.out_dir, help="folder write_note/delete_notes use")
    s.add_argument("--pid-file", type=cliargs.out_file, help="write this server's PID here")
    s.add_argument(
        "--session-idle",
        type=cliargs.number(0.0, 7 * 24 * 3600.0, lo_open=True),
        default=None,
        metavar="SECONDS",
        help="HTTP: close a legacy-era session after this long without a request (default 300)",
    )
    w = sub.add_parser("wirelog", help="run a demo session and print its JSON-RPC messages")
    how = w.add_mutually_exclusive_group(required=True)
    how.add_argument("--stdio", action="store_true")
    how.add_argument("--http", action="store_true")
    w.add_argument("--legacy", action="store_true", help="use the initialize handshake (protocol <= 2025-11-25)")
    w.add_argument("--hide-meta", action="store_true", help="replace every _meta object by …")
    w.add_argument("--jsonl", action="store_true", help="print JSON lines with direction and time")
    return p


def demo_session(conn) -> None:
    """The scripted session ``wirelog`` records; the notebook walks through the same steps one by one."""
    from mcp.shared.exceptions import MCPError  # lazy: the SDK (pydantic) takes ~1 s; usage errors never wait

    conn.list_tools()
    conn.call_tool("calculator", {"expression": "250 * 15%"})
    conn.call_tool("calculator", {"expression": "1 / 0"})  # a tool failure: isError true
    for method, params in (
        ("tools/call", {"name": "no_such_tool", "arguments": {}}),  # -32602
        ("tools/frobnicate", None),
    ):  # -32601
        try:
            conn.request(method, params)
        except MCPError:
            pass


def wirelog(transport: str, legacy: bool = False):
    """Run :func:`demo_session` against a fresh kit server; return (WireLog, protocol version)."""
    from toolkit.mcp.client import Connection  # lazy: the SDK, as in demo_session
    from toolkit.mcp.process import HTTPServer, stdio_server
    from toolkit.mcp.wire import WireLog

    log, mode = WireLog(), ("legacy" if legacy else "auto")
    if transport == "stdio":
        with Connection(stdio_server(), mode=mode, log=log) as conn:
            demo_session(conn)
            version = conn.protocol_version
    else:
        with HTTPServer() as srv, Connection(srv.url, mode=mode, log=log) as conn:
            demo_session(conn)
            version = conn.protocol_version
    return log, version


def cli(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "serve":
        if args.http is False and args.port:
            cliargs.usage_exit("python -m toolkit mcp serve", "--port goes with --http")
        from toolkit.mcp.server import kit_tools, serve_http, serve_stdio  # lazy: the SDK, after the arguments

        if args.pid_file:
            args.pid_file.parent.mkdir(parents=True, exist_ok=True)
            args.pid_file.write_text(str(os.getpid()))
        if args.notes_dir:
            args.notes_dir.mkdir(parents=True, exist_ok=True)
            set_notes_dir(args.notes_dir)
        tools = kit_tools(demo=args.demo, test_tools=args.test_tools)
        if args.stdio:
            serve_stdio(tools)
            return 0
        try:
            serve_http(args.port, tools, **({"session_idle_s": args.session_idle} if args.session_idle else {}))
        except OSError as e:  # e.g. the port is taken: say so instead of a traceback
            print(f"error: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}", file=sys.stderr)
            return 1
        return 0
    log, version = wirelog("stdio" if args.stdio else "http", args.legacy)
    if args.jsonl:
        print(log.jsonl())
        return 0
    print(
        f"# MCP over {'stdio' if args.stdio else 'Streamable HTTP'}, protocol {version}, "
        f"{len(log)} JSON-RPC messages (-> host to server, <- server to host)"
    )
    print(log.text(hide_meta=args.hide_meta))
    if log.http:
        print("\n# HTTP requests and responses carrying them")
        print(log.http_text())
    return 0
