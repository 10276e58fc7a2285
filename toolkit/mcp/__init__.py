"""MCP end to end with the official ``mcp`` SDK: the kit's tools served over stdio and Streamable HTTP, a client
that logs every JSON-RPC message, and the host-side safety around remote tools (book §14.5.6, "Tool Use" §3.2).

Modules: ``server`` (SDK low-level Server over ``toolkit.tools``), ``wire`` (the wire log, tapped from the SDK's
transport streams), ``client`` (synchronous ``Connection``), ``tool`` (``MCPTool`` for the host loop), ``marking``
(untrusted-output marking), ``safety`` (allowlist, confirmation gate), ``process`` (start and stop the kit's server
subprocess, PID checks), ``demo`` (injection carrier, risky and hung tools). The CLI is ``toolkit.commands.mcp``.
Nothing is imported here, so ``import toolkit.mcp`` stays cheap.

Leaves out: resources, prompts, sampling, elicitation, subscriptions, auth.
"""
