"""``python -m toolkit lint-tools``: lint tool definitions (``toolkit.eval.lint``) from a JSON file or a running MCP
server's ``tools/list``; print the findings (or ``--json``); exit 1 when any is an error, 2 when the tools cannot be read.

Both reports are bounded whatever the file holds (16 MB of tools can make hundreds of thousands of findings): the
text lists the first ``MAX_PRINTED`` findings, ``--json`` the first ``MAX_JSON_FINDINGS`` (errors first, then
warnings) with the totals of all of them (``total``, ``errors``, ``warnings``, ``by_rule``) and ``left_out``, the
count not listed; a tool name or message longer than ``MAX_FIELD_CHARS`` is cut, saying how long it was.

``python -m toolkit lint-tools FILE.json`` or ``--mcp URL`` (Streamable HTTP) or ``--mcp-stdio "command args"``.
A file that is not a list of tool objects (or ``{"tools": [...]}``), a host name that does not resolve, a server
that refuses the connection, a command that does not start, and a peer that does not speak MCP are each one plain
line, exit 2.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from dataclasses import asdict, replace
from urllib.parse import urlsplit

from toolkit import cliargs
from toolkit.errors import bounded_message, describe
from toolkit.untrusted import UntrustedInputError, read_json_file, redact

MAX_FILE_BYTES = 16 * 1024 * 1024
MCP_TIMEOUT_S = 15.0
MAX_PRINTED = 200  # findings printed as text (20,000 tools make tens of thousands)
MAX_JSON_FINDINGS = 1000  # findings listed by --json (about 300 kB at most); the totals count all of them
MAX_FIELD_CHARS = 300  # a tool name or message in either report (a name can be megabytes long)


class CannotRead(Exception):
    """The tools could not be read; the message is the one line the command prints."""


def read_tools_file(path) -> list:
    """The tools in a JSON file: a list of objects, or an object whose ``tools`` is one (a tools/list result)."""
    try:
        data = read_json_file(path, "tools file", MAX_FILE_BYTES)
    except UntrustedInputError as e:
        raise CannotRead(str(e)) from None
    tools = data.get("tools") if isinstance(data, dict) and "tools" in data else data
    if not isinstance(tools, list):
        raise CannotRead(
            f'{path}: expected a list of tools or {{"tools": [...]}}, got {describe(tools if isinstance(data, dict) else data)}'
        )
    bad = [i for i, t in enumerate(tools) if not isinstance(t, dict)]
    if bad:
        raise CannotRead(f"{path}: tool #{bad[0]} is {describe(tools[bad[0]])}, not an object ({len(bad)} such)")
    return tools


def _leaves(e: BaseException) -> list[BaseException]:
    """The real errors inside (nested) exception groups, and their causes."""
    subs = getattr(e, "exceptions", None)  # an ExceptionGroup (Python 3.11+; anyio's backport before)
    if isinstance(subs, (list, tuple)) and subs:
        return [x for sub in subs for x in _leaves(sub)]
    out = [e]
    if e.__cause__ is not None and e.__cause__ is not e:
        out += _leaves(e.__cause__)
    return out


# what the resolver says (glibc, macOS, Windows) when a host name does not resolve
_NO_SUCH_HOST = ("Name or service not known", "nodename nor servname", "name resolution", "getaddrinfo failed",
                 "No address associated with hostname")  # fmt: skip


def why_unreachable(e: BaseException, target: str, stdio: bool) -> str:
    """One plain line for a server that could not be listed: no such host, refused, not started, timed out or not
    MCP."""
    leaves = _leaves(e)
    names = {type(x).__name__ for x in leaves}
    text = " ".join(str(x) for x in leaves)
    if stdio:
        if names & {"FileNotFoundError", "PermissionError"}:
            return f"cannot start {target!r}: no such command (or not executable)"
        if "McpError" in names or "MCPError" in names or "ValidationError" in names or "TimeoutError" in names:
            return f"{target!r} started but did not answer as an MCP server over stdio"
        return f"{target!r} started but did not answer as an MCP server over stdio ({type(leaves[-1]).__name__})"
    if any(s in text for s in _NO_SUCH_HOST):  # httpx says ConnectError for a name that does not resolve too
        return f"cannot find the host {urlsplit(target).hostname!r} of {target} (a typo in the name, or no network?)"
    if "ConnectError" in names or "ConnectionRefusedError" in names or "Connection refused" in text:
        return f"connection refused at {target} (is the server running, on that port?)"
    if names & {"ConnectTimeout", "ReadTimeout", "TimeoutError"}:
        return f"no answer from {target} within {MCP_TIMEOUT_S:g} s"
    for x in leaves:
        status = getattr(getattr(x, "response", None), "status_code", None)
        if status is not None:
            return f"{target} is not an MCP server: it answered HTTP {status}"
    return f"{target} did not answer as an MCP server ({type(leaves[-1]).__name__}: {str(leaves[-1])[:120]})"


def _from_mcp(target: str, stdio: bool) -> list[dict]:
    parts = shlex.split(target) if stdio else []
    if stdio and shutil.which(parts[0]) is None:
        raise CannotRead(f"cannot start {target!r}: no such command")
    from mcp import StdioServerParameters  # lazy: the SDK (pydantic, httpx), ~1-2 s; files never wait for it

    from toolkit.mcp.client import Connection  # lazy: the SDK, as above

    if stdio:
        server = StdioServerParameters(command=parts[0], args=parts[1:])
    else:
        server = target
    try:
        with Connection(server, timeout=MCP_TIMEOUT_S, call_timeout=MCP_TIMEOUT_S) as conn:
            return [
                {"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in conn.list_tools()
            ]
    except Exception as e:  # noqa: BLE001 — a server that is down or speaks something else: say which
        raise CannotRead(why_unreachable(e, target, stdio)) from None


def cli(argv: list[str]) -> int:
    p = cliargs.Parser(
        prog="python -m toolkit lint-tools", description="Check tool definitions against the description guidelines."
    )
    p.add_argument(
        "file", nargs="?", type=cliargs.existing_file, help="a JSON file: a list of tools (OpenAI, bare or MCP style)"
    )
    p.add_argument("--mcp", type=cliargs.url, help="URL of a running MCP server (Streamable HTTP): lint its tools/list")
    p.add_argument("--mcp-stdio", help="command line of an MCP server to start over stdio: lint its tools/list")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if sum(bool(x) for x in (a.file, a.mcp, a.mcp_stdio)) != 1:
        p.error("give exactly one of FILE, --mcp URL, --mcp-stdio COMMAND")
    if a.mcp_stdio is not None:
        try:
            if not shlex.split(a.mcp_stdio):
                p.error("--mcp-stdio is empty")
        except ValueError as e:
            p.error(f"--mcp-stdio: {e}")
    try:
        tools = read_tools_file(a.file) if a.file else _from_mcp(a.mcp or a.mcp_stdio, stdio=bool(a.mcp_stdio))
    except CannotRead as e:
        print(f"lint-tools: cannot read tools: {redact(str(e))}", file=sys.stderr)  # a URL's password never echoed
        return 2
    from toolkit.eval.lint import RULES, lint  # lazy: jsonschema (~1-6 s), once the tools are read

    findings = lint(tools)
    errors = sum(f.level == "error" for f in findings)
    ranked = sorted(findings, key=lambda f: f.level != "error")  # errors first, then warnings (a stable sort)
    if a.json:
        listed = [_bounded(f) for f in ranked[:MAX_JSON_FINDINGS]]
        by_rule = {}
        for f in findings:
            by_rule[f.rule] = by_rule.get(f.rule, 0) + 1
        report = {
            "findings": [asdict(f) for f in listed],
            "total": len(findings),
            "left_out": len(findings) - len(listed),
            "errors": errors,
            "warnings": len(findings) - errors,
            "by_rule": by_rule,
            "tools": len(tools),
            "rules": RULES,
        }
        print(json.dumps(report, ensure_ascii=False, indent=1))
    else:
        shown = ranked[:MAX_PRINTED]
        for f in map(_bounded, shown):
            print(f"{f.level:<7} {f.rule}  {f.tool}: {f.message}   [{RULES[f.rule]}]")
        if len(findings) > len(shown):
            print(
                f"… {len(findings) - len(shown):,} more finding(s) not printed "
                f"(--json lists {MAX_JSON_FINDINGS:,} and counts them all)"
            )
        print(f"{len(tools)} tool(s), {errors} error(s), {len(findings) - errors} warning(s)")
    return 1 if errors else 0


def _bounded(f):
    """The finding with its tool name and message cut to ``MAX_FIELD_CHARS``, saying how long they were."""
    return replace(
        f, tool=bounded_message(f.tool, MAX_FIELD_CHARS), message=bounded_message(f.message, MAX_FIELD_CHARS)
    )
