"""``python -m toolkit lint-tools``: lint tool definitions (``toolkit.eval.lint``) from a JSON file or a running MCP
server's ``tools/list``; print the findings (or ``--json``); exit 1 when any is an error, 2 when the tools cannot be read.

``python -m toolkit lint-tools FILE.json`` or ``--mcp URL`` (Streamable HTTP) or ``--mcp-stdio "command args"``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import asdict
from pathlib import Path

from toolkit.eval.lint import RULES, lint
from toolkit.mcp.client import Connection


def _from_mcp(target: str, stdio: bool) -> list[dict]:
    if stdio:
        from mcp import StdioServerParameters  # lazy: only when a server is linted

        parts = shlex.split(target)
        target = StdioServerParameters(command=parts[0], args=parts[1:])
    with Connection(target) as conn:
        return [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema} for t in conn.list_tools()
        ]


def cli(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m toolkit lint-tools", description="Check tool definitions against the description guidelines."
    )
    p.add_argument("file", nargs="?", help="a JSON file: a list of tools (OpenAI, bare or MCP style)")
    p.add_argument("--mcp", help="URL of a running MCP server (Streamable HTTP): lint its tools/list")
    p.add_argument("--mcp-stdio", help="command line of an MCP server to start over stdio: lint its tools/list")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if sum(bool(x) for x in (a.file, a.mcp, a.mcp_stdio)) != 1:
        p.print_usage(sys.stderr)
        print("give exactly one of FILE, --mcp URL, --mcp-stdio COMMAND", file=sys.stderr)
        return 2
    try:
        if a.file:
            tools = json.loads(Path(a.file).read_text(encoding="utf-8"))
        else:
            tools = _from_mcp(a.mcp or a.mcp_stdio, stdio=bool(a.mcp_stdio))
    except (OSError, ValueError) as e:
        print(f"lint-tools: cannot read tools: {str(e)[:200]}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 — a server that is down or speaks something else
        print(f"lint-tools: cannot list tools: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        return 2
    findings = lint(tools)
    errors = sum(f.level == "error" for f in findings)
    if a.json:
        print(
            json.dumps(
                {"findings": [asdict(f) for f in findings], "errors": errors, "rules": RULES},
                ensure_ascii=False,
                indent=1,
            )
        )
    else:
        for f in findings:
            print(f"{f.level:<7} {f.rule}  {f.tool}: {f.message}   [{RULES[f.rule]}]")
        n = len(tools) if isinstance(tools, list) else len(tools.get("tools", [])) if isinstance(tools, dict) else 0
        print(f"{n} tool(s), {errors} error(s), {len(findings) - errors} warning(s)")
    return 1 if errors else 0
