"""A remote MCP tool as a host-side tool the loop drives like ``toolkit.tools.Tool``.

What it does
- :class:`MCPTool` (``name``, ``schema``, ``needs_confirmation``, ``call(args)``) over any connection with
  ``call_tool``; its schema is built from ``inputSchema`` as received (``function_schema``); results come back
  marked untrusted (``toolkit.mcp.marking``); a tool failure, protocol error or timeout raises ``ToolError``.

What it leaves out
- The connection itself (``toolkit.mcp.client``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from toolkit.errors import ToolError, bounded_message
from toolkit.mcp.marking import untrusted
from toolkit.schema import wrap_function


def function_schema(tool: types.Tool) -> dict:
    """The OpenAI-style function schema a chat template expects, built from an MCP tool as received."""
    return wrap_function(tool.name, tool.input_schema, tool.description)


def result_text(result: types.CallToolResult) -> str:
    """The text a model would read from a tool result (text blocks joined; other blocks named)."""
    parts = [
        c.text if getattr(c, "type", None) == "text" else f"[{getattr(c, 'type', '?')} content]" for c in result.content
    ]
    return "\n".join(parts)


@dataclass
class MCPTool:
    """A remote tool that looks like a local ``toolkit.tools.Tool`` to the host loop."""

    name: str
    schema: dict
    needs_confirmation: bool
    connection: Any  # a toolkit.mcp.client.Connection (anything with call_tool)
    definition: types.Tool
    server: str = ""

    @classmethod
    def from_mcp(cls, tool: types.Tool, connection, needs_confirmation: bool | None = None) -> MCPTool:
        hinted = bool(tool.annotations and tool.annotations.destructive_hint)
        return cls(
            tool.name,
            function_schema(tool),
            hinted if needs_confirmation is None else needs_confirmation,
            connection,
            tool,
            connection.label,
        )

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
        try:
            result = self.connection.call_tool(self.name, args)
        except MCPError as e:
            kind = "timed out" if e.code == types.REQUEST_TIMEOUT else f"protocol error {e.code}"
            raise ToolError(bounded_message(f"{self.name}: {kind}: {e.error.message}")) from None
        if result.is_error:  # a third-party server may send any length: bounded like the kit's own errors
            raise ToolError(
                bounded_message(
                    f"{self.name} failed (untrusted text from MCP server {self.server}): {result_text(result)}"
                )
            )
        # structuredContent when the server sent it (no JSON inside a JSON string), else the text blocks
        content = result.structured_content if result.structured_content is not None else result_text(result)
        return untrusted(content, server=self.server, tool=self.name)
