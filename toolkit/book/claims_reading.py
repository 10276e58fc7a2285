"""Statements a second, independent reading of both chapters found unchecked (issue 27), checked here.

What it does
- §14.5.4 "shortening the chain lowers the base of the exponent": the arithmetic says it lowers k, the exponent.
- "Tool Use" §3.1: the one-line token sequence drops the newlines the template writes (they are tokens too),
  rendered by the installed real model's own template when it is there.
- "Tool Use" §3.2: tools/list entries "completely isomorphic" to local tools: the same three pieces of information,
  converted without loss by the kit's server, but not the same shape (no ``{"type": "function"}`` wrapper,
  ``inputSchema`` for ``parameters``, and fields a local definition has no place for).
- "Tool Use" §3.2: MCP covers a tool's definition, discovery, call and communication: each is a part of the SDK.
- §14.5.5 "message passing itself loses information": the values of the tool results a sub-agent saw, against
  the summary it handed back, on the saved real-model pattern runs (``benchmarks/patterns.py``).
One check per statement.

What it leaves out
- The §14.5.7 training statements (the training ledger checks them) and statements that need measurements the
  kit does not have (each has its reason in the inventory).
"""

from __future__ import annotations

import mcp.types as mt

from toolkit import cost
from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.claims_tool_use import real_rendering
from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group
from toolkit.mcp.server import mcp_tool
from toolkit.render import render
from toolkit.tools import TOOLS

READING = Group("reading")


@READING(
    "shorten-lowers-base",
    "§14.5.4",
    "Shortening the chain (several tools in one call instead of in series) makes the base of the exponent smaller.",
    answers=("缩短链路（一次多调几个工具而不是串起来）把指数的底数变少",),
)
def shorten_lowers_base():
    p, k, k_short = 0.95, 20, 10
    before, after = cost.success(p, k), cost.success(p, k_short)
    base_same = cost.success(p, k_short) == p**k_short  # shortening changes k; p is what it was
    return (
        f"p = {p}: {k} serial steps → p^k = {before:.3f}; the same work in {k_short} steps → {after:.3f}; the "
        f"per-step p (the base) is unchanged ({base_same}), the exponent k went from {k} to {k_short}",
        *make_verdict(
            not base_same,
            "a wording slip: shortening the chain lowers the exponent k, not the base p (the base is what "
            "verification and retries raise)",
        ),
    )


@READING(
    "one-line-newlines",
    "Tool Use §3.1",
    "The one-line token sequence is the token stream, only written on one line.",
    answers=("从 token 序列的角度来看…（一行的词元序列）",),
)
def one_line_newlines(conversation, real_tokenizer):
    msgs, tools = conversation
    real = real_rendering(msgs, tools, real_tokenizer)
    text = real if real is not None else render(msgs, tools, "qwen2.5", add_generation_prompt=False).text
    where = "the installed model's own template" if real is not None else "the kit's Qwen2.5 template"
    newlines = text.count("\n")
    return (
        f"{where} writes {newlines} newlines for the chapter's messages (after each role, around <tools>, "
        "<tool_call> and <tool_response>); the one-line form has none, and writes 'system:' for 'system\\n'",
        *make_verdict(
            newlines == 0,
            f"the newlines are characters of the prompt and become tokens ({newlines} here); a one-line form "
            "that drops them is not the token stream the model reads",
        ),
    )


@READING(
    "tools-isomorphic",
    "Tool Use §3.2",
    "A tools/list entry is completely isomorphic to a local tool definition.",
    supports=("每条含 name / description / inputSchema，与本地 Tool 完全同构",),
)
def tools_isomorphic():
    local = TOOLS["calculator"].schema
    remote = mcp_tool(TOOLS["calculator"]).model_dump(by_alias=True, exclude_none=True)
    fn = local["function"]
    lossless = (remote["name"], remote["description"], remote["inputSchema"]) == (
        fn["name"],
        fn["description"],
        fn["parameters"],
    )
    named = ("name", "description", "inputSchema")
    extra = sorted(f.alias or n for n, f in mt.Tool.model_fields.items() if (f.alias or n) not in named)
    return (
        f"the kit's calculator: local {sorted(local)} with function {sorted(fn)}; as an MCP Tool {sorted(remote)}; "
        f"name, description and parameters ↔ inputSchema carried over unchanged: {lossless}; MCP Tool fields with "
        f"no local counterpart: {extra}",
        *make_verdict(
            lossless,
            "the conversion loses or changes a field",
            [
                (
                    bool(extra) or "type" in local,
                    "the same information, not the same shape: no {'type': 'function'} wrapper, 'inputSchema' "
                    f"for 'parameters', and {', '.join(extra)} have no place in a local definition",
                )
            ],
        ),
    )


@READING(
    "mcp-four-parts",
    "Tool Use §3.2",
    "MCP covers a tool's definition, discovery, call and communication.",
    answers=("包含工具的定义、发现、调用、通信等等方面",),
)
def mcp_four_parts():
    from mcp.client import stdio, streamable_http  # lazy: the SDK's transports load only for this claim

    parts = {
        "definition": hasattr(mt, "Tool") and "inputSchema" in {f.alias or n for n, f in mt.Tool.model_fields.items()},
        "discovery": hasattr(mt, "ListToolsRequest"),
        "call": hasattr(mt, "CallToolRequest") and hasattr(mt, "CallToolResult"),
        "communication": hasattr(mt, "JSONRPCRequest") and bool(stdio.stdio_client) and bool(streamable_http),
    }
    return (
        "the installed SDK: " + "; ".join(f"{k} {v}" for k, v in parts.items()) + " (Tool with inputSchema; "
        "ListToolsRequest; CallToolRequest/CallToolResult; JSON-RPC messages over the stdio and Streamable "
        "HTTP transports)",
        *make_verdict(all(parts.values()), "a part is missing from the SDK"),
    )


def leaves(value) -> list[str]:
    """The scalar values of a tool result, as text (what a summary would have to repeat to pass them on)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return [] if value is None or isinstance(value, bool) else [str(value)]


def handoff_counts(doc: dict) -> tuple[int, int, int, list[str]]:
    """Over the sub-agent runs: values of the helpers' tool results kept and lost in their summaries, the number of
    summaries, and the dropped values (what the delegated task itself already said does not count)."""
    kept = lost = handoffs = 0
    dropped: list[str] = []
    for run in (r for r in doc["runs"] if r["pattern"] == "subagent"):
        steps = run["steps"]
        for summary in (s for s in steps if s["kind"] == "summary"):
            handoffs += 1
            seen = {
                v
                for s in steps
                if s["kind"] == "call" and s.get("context") == summary["context"] and s["status"] == "ok"
                for v in leaves(s["result"])
            }
            task = summary.get("task", "").lower()
            seen = {v for v in seen if v.lower() not in task}  # what the delegated task itself already said
            gone = sorted(v for v in seen if v.lower() not in summary["text"].lower())
            kept, lost = kept + len(seen) - len(gone), lost + len(gone)
            dropped += gone
    return kept, lost, handoffs, dropped


@READING(
    "handoff-loses",
    "§14.5.5 multi-agent",
    "Passing messages between agents itself loses information.",
    answers=("代价是消息传递本身会丢信息",),
)
def handoff_loss_claim(patterns_doc):
    """§14.5.5: what a sub-agent's summary carries of the tool results it saw, on the saved real-model runs."""
    if patterns_doc is None:
        return None
    kept, lost, handoffs, dropped = handoff_counts(patterns_doc)
    m, n = patterns_doc["meta"], kept + lost
    numbers = [v for v in dropped if v.lstrip("-").replace(".", "", 1).isdigit()]
    return (
        f"{m['model'].split(' [')[0]}, {m['date'][:10]}, commit {m['commit']}: the sub-agent pattern's {handoffs} "
        f"summaries carried {kept} of the {n} values their tool results held (matched as text); dropped: "
        f"{sorted(set(dropped))[:6]}, {len(numbers)} of them numbers",
        *make_verdict(
            lost > 0,
            "every value the helpers saw reached the coordinator",
            [
                (
                    n < 50,
                    f"{n} values from {handoffs} delegations, matched as text (a paraphrase counts as lost); "
                    "the pattern that returns the helper's whole transcript loses nothing by construction, at the "
                    "cost the subagent-isolation entry measures",
                ),
                (
                    lost > 0 and not numbers,
                    "every number came through; what was dropped is text (descriptions and the results' own notes, "
                    "e.g. where the data come from)",
                ),
            ],
        ),
    )


def reading_claims() -> list[Claim]:
    return READING.run()
