"""Host-side safety for MCP tools: which servers and tools the host accepts, how their output enters the
prompt, and who says yes to a risky call (book §14.5.6: descriptions, resources and tool output from an MCP
server are untrusted input; the host pins approved servers and tools and guards high-risk calls).

What it does
- :class:`Allowlist` approves servers by how the host reaches them (the command it launches, or the URL), never
  by the name a server reports about itself (``serverInfo`` is self-reported and unverified). For each server it
  pins the tools a person reviewed to a digest of their definition (name, description, ``inputSchema``): a tool
  the list does not name, or whose definition changed since review ("tool poisoning"), is dropped, with the
  reason kept in ``rejected``.
- Which tools need confirmation is the host's decision (``confirm=`` names); a server's ``destructiveHint`` can
  add a confirmation, never remove one.
- Marking output as untrusted data is ``toolkit.mcp.marking`` (the tool adapter applies it to every result).
- :class:`ConfirmGate` is the ``confirm(call) -> bool`` callback for the host loop: no by default; yes only for
  the exact call (name and arguments) a person approved, once. Every ask is kept, so a notebook button can show
  what is waiting (``toolkit.widgets.mcp``).

What it leaves out
- Detecting injections: marking output lowers the chance a model obeys it; it prevents nothing. The gate is
  what prevents a risky call.
- Credential scoping, file-system sandboxing, per-session isolation, audit and rollback (also in §14.5.6).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolkit.mcp.tool import MCPTool


def tool_digest(tool) -> str:
    """A digest of what the model will read about a tool; key order does not matter (it differs by era)."""
    d = {"name": tool.name, "description": tool.description or "", "inputSchema": tool.input_schema}
    return hashlib.sha256(json.dumps(d, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _identity(target) -> str:
    return getattr(target, "identity", target)


@dataclass
class ServerApproval:
    identity: str  # the command line or URL the host uses
    tools: dict[str, str]  # approved tool name -> digest of the reviewed definition
    confirm: set[str] = field(default_factory=set)


class Allowlist:
    """Approved servers and tools. Build it by pinning what a person reviewed, then filter every listing."""

    def __init__(self):
        self.servers: dict[str, ServerApproval] = {}
        self.rejected: list[tuple[str, str, str]] = []  # (server identity, tool, reason)

    def pin(
        self, target, listed: Iterable, names: Iterable[str] | None = None, confirm: Iterable[str] = ()
    ) -> Allowlist:
        """Approve the server ``target`` (a Connection, command line or URL) and the tools ``names`` (default:
        all) exactly as they are defined in ``listed`` now; ``confirm`` names the ones that need a person's yes."""
        listed = list(listed)
        names = {t.name for t in listed} if names is None else set(names)
        missing = names - {t.name for t in listed}
        if missing:
            raise KeyError(f"cannot approve tools the server did not list: {sorted(missing)}")
        self.servers[_identity(target)] = ServerApproval(
            _identity(target), {t.name: tool_digest(t) for t in listed if t.name in names}, set(confirm)
        )
        return self

    def check(self, target, tool) -> str | None:
        """Why ``tool`` from ``target`` is not approved, or ``None`` if it is."""
        approval = self.servers.get(_identity(target))
        if approval is None:
            return "server not on the allowlist"
        if tool.name not in approval.tools:
            return "tool not approved"
        if approval.tools[tool.name] != tool_digest(tool):
            return "definition changed since it was approved"
        return None

    def needs_confirmation(self, target, tool) -> bool:
        approval = self.servers.get(_identity(target))
        hinted = bool(getattr(tool, "annotations", None) and tool.annotations.destructive_hint)
        return hinted or (approval is not None and tool.name in approval.confirm)

    def approve(self, connection, listed: Iterable) -> dict[str, Any]:
        """The approved subset of a ``tools/list`` answer as host-side tools (``toolkit.mcp.client.MCPTool``)."""
        out = {}
        for tool in listed:
            reason = self.check(connection, tool)
            if reason:
                self.rejected.append((_identity(connection), tool.name, reason))
                continue
            out[tool.name] = MCPTool.from_mcp(tool, connection, self.needs_confirmation(connection, tool))
        return out


def call_parts(call) -> tuple[str, dict]:
    """(name, arguments) of a tool call given as an object with ``name``/``arguments`` or a dict."""
    if isinstance(call, dict):
        fn = call.get("function", call)
        name, args = fn.get("name"), fn.get("arguments", fn.get("args", {}))
    else:
        name = call.name
        args = getattr(call, "arguments", getattr(call, "args", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            pass
    return name, args


def _key(call) -> str:
    name, args = call_parts(call)
    return json.dumps([name, args], sort_keys=True, ensure_ascii=False)


@dataclass
class ConfirmGate:
    """``confirm(call) -> bool``: False unless this exact call was approved; each approval is used once."""

    asked: list[tuple[str, dict, bool]] = field(default_factory=list)  # (name, arguments, answer), in order
    _approved: list[str] = field(default_factory=list)  # approvals not used yet
    _decided_at: dict[str, int] = field(default_factory=dict)  # key -> len(asked) when approved

    def approve(self, call) -> None:
        key = _key(call)
        self._approved.append(key)
        self._decided_at[key] = len(self.asked)

    def __call__(self, call) -> bool:
        key = _key(call)
        ok = key in self._approved
        if ok:
            self._approved.remove(key)
        self.asked.append((*call_parts(call), ok))
        return ok

    @property
    def pending(self) -> list[tuple[str, dict]]:
        """Refused calls asked again or never approved since (what a confirm button should offer), deduplicated."""
        out, seen = [], set()
        for i, (name, args, ok) in enumerate(self.asked):
            key = _key({"name": name, "arguments": args})
            if not ok and i >= self._decided_at.get(key, -1) and key not in seen:
                seen.add(key)
                out.append((name, args))
        return out
