"""Fig 14-11, MCP's host / client / server split, labelled with what the installed SDK uses.

What it does
- ``mcp_architecture`` reads the method names and wire fields from the installed ``mcp`` SDK and the kit's tool
  names; ``mcp_figure`` draws host, clients and servers from those facts, zh and en.

What it leaves out
- Pinned protocol revisions (the figure names none) and any server other than the kit's.
"""

from __future__ import annotations

import json
from importlib.metadata import version

import plotly.graph_objects as go

from toolkit.book.diagrams import sequence_figure
from toolkit.book.typeset import CANVAS_PX, FONT_PX, SANS, rich_lines
from toolkit.mcp.client import Connection
from toolkit.mcp.process import stdio_server
from toolkit.plots import C_LANES, drawing
from toolkit.plots import arrow as arrow_annotation
from toolkit.tools import TOOLS

FONT = f"{SANS}, sans-serif"


# ---------------------------------------------------------------- fig 14-11: MCP architecture
def mcp_architecture() -> dict:
    """The facts fig 14-11 shows, read from the installed SDK and the kit's tool registry.

    The SDK version and protocol revisions are recorded here for provenance only; the figure does not print them
    (§14.5.6 advises against memorising revision numbers)."""
    import mcp.types as mt  # lazy: the SDK loads only for fig 14-11

    tool = mt.Tool(name="x", description="", input_schema={"type": "object"}).model_dump(by_alias=True)
    result = mt.CallToolResult(content=[], is_error=False).model_dump(by_alias=True)
    call = mt.CallToolRequestParams(name="x", arguments={}).model_dump(by_alias=True)
    init = mt.InitializeResult(
        protocol_version=mt.LATEST_PROTOCOL_VERSION,
        capabilities=mt.ServerCapabilities(),
        server_info=mt.Implementation(name="x", version="0"),
    ).model_dump(by_alias=True)
    return dict(
        sdk=f"mcp {version('mcp')}",
        jsonrpc=mt.JSONRPC_VERSION,
        latest_protocol=mt.LATEST_PROTOCOL_VERSION,
        tool_fields=[k for k in ("name", "description", "inputSchema") if k in tool],
        call_fields=[k for k in ("name", "arguments") if k in call],
        result_fields=[k for k in ("content", "isError") if k in result],
        init_result_fields=[k for k in ("protocolVersion", "capabilities", "serverInfo") if k in init],
        kit_tools=sorted(TOOLS),
        transports=["stdio", "Streamable HTTP"],
    )


def transport(text, x, y, name, jsonrpc):
    """The transport's name, attached to its link (a label on the link, boxed)."""
    text(x, y, f"{name} · JSON-RPC {jsonrpc}", 260, bgcolor="white", bordercolor="#999", borderpad=3)


def mcp_figure(facts: dict, lang: str = "en", width: int = CANVAS_PX) -> go.Figure:
    """The engine above the host; inside the host the loop and one client per server; each client's link to its
    server carries its transport's name, and each message pair of the first link has its own arrows and labels:
    ``initialize``, ``tools/list``, ``tools/call`` (the three phases of "Tool Use" §3.2). Coordinates are px."""
    zh = lang == "zh"
    shapes, ann = [], []

    def box(x0, y0, x1, y1, color, fill="white", dash="solid"):
        shapes.append(
            dict(
                type="rect",
                x0=x0,
                y0=-y0,
                x1=x1,
                y1=-y1,
                line=dict(color=color, width=2, dash=dash),
                fillcolor=fill,
                layer="below",
            )
        )

    def text(x, y, label, max_px, xanchor="center", yanchor="middle", bold=False, height_of=False, **kw):
        rich, _ = rich_lines(label, max_px)
        if bold:
            rich = "<br>".join(f"<b>{line}</b>" for line in rich.split("<br>"))
        align = "left" if xanchor == "left" else "center"
        ann.append(dict(x=x, y=-y, text=rich, showarrow=False, xanchor=xanchor, yanchor=yanchor, align=align, **kw))
        return (rich.count("<br>") + 1) * FONT_PX * 1.3 if height_of else None

    def arrow(x0, y0, x1, y1, color):
        ann.append(arrow_annotation(x0, -y0, x1, -y1, color, arrowsize=1.1))

    # the engine, and the prompt / text between it and the host loop
    box(8, 8, 260, 58, C_LANES["engine"], fill="#fdf1e6")
    text(134, 33, "推理引擎 / 模型：只负责生成词元" if zh else "engine / model: only generates tokens", 240)
    arrow(60, 168, 60, 60, C_LANES["host"])
    text(68, 100, "提示（含工具 schema）" if zh else "prompt (with tool schemas)", 140, xanchor="left")
    arrow(220, 60, 220, 168, C_LANES["engine"])
    text(228, 100, "生成的文本" if zh else "generated text", 120, xanchor="left")
    # the host: its loop and one client per server
    text(
        16,
        138,
        "宿主（LLM 应用）" if zh else "host (the LLM application)",
        280,
        xanchor="left",
        yanchor="top",
        bold=True,
    )
    box(24, 170, 244, 220, C_LANES["host"])
    text(
        134, 195, "宿主循环：渲染提示、解析调用、执行工具" if zh else "host loop: renders, parses calls, executes", 200
    )
    # link 1 (stdio): three message pairs, each with its own arrows and labels
    fields = lambda names: ", ".join(f"`{n}`" for n in names)  # noqa: E731
    pairs = [
        ("`initialize`", fields(facts["init_result_fields"])),
        ("`tools/list`", "`tools:` " + fields(facts["tool_fields"])),
        ("`tools/call` " + fields(facts["call_fields"]), fields(facts["result_fields"])),
    ]
    gap = (260, 516)
    mid = sum(gap) / 2
    y = 262
    transport(text, mid, y, facts["transports"][0], facts["jsonrpc"])
    y += 30
    top1 = y - 44
    for req, resp in pairs:
        y += text(mid, y, req, gap[1] - gap[0] - 16, yanchor="bottom", height_of=True)
        arrow(gap[0] - 14, y + 2, gap[1] - 2, y + 2, C_LANES["host"])
        y += 8 + text(mid, y + 8, resp, gap[1] - gap[0] - 16, yanchor="top", height_of=True)
        arrow(gap[1] - 2, y + 12, gap[0] - 14, y + 12, C_LANES["tool"])
        y += 40
    bottom1 = y - 18
    # link 2 (Streamable HTTP): the same methods
    y += 20
    top2 = y
    transport(text, mid, y + 10, facts["transports"][1], facts["jsonrpc"])
    same = "同样的三个方法" if zh else "the same three methods"
    text(mid, y + 50, same, 220, yanchor="bottom")
    arrow(gap[0] - 14, y + 52, gap[1] - 2, y + 52, C_LANES["host"])
    arrow(gap[1] - 2, y + 70, gap[0] - 14, y + 70, C_LANES["tool"])
    bottom2 = y + 90
    for n, (y0, y1) in enumerate([(top1, bottom1), (top2, bottom2)], 1):
        shapes.append(
            dict(type="line", x0=40, y0=-(y0 + y1) / 2, x1=60, y1=-(y0 + y1) / 2, line=dict(color="#999", width=2))
        )
        box(60, y0, gap[0] - 16, y1, C_LANES["host"])
        text((44 + gap[0]) / 2, (y0 + y1) / 2, ("MCP 客户端 " if zh else "MCP client ") + str(n), 160)
    shapes.append(dict(type="line", x0=40, y0=-220, x1=40, y1=-(top2 + bottom2) / 2, line=dict(color="#999", width=2)))
    box(8, 125, gap[0], bottom2 + 16, C_LANES["host"], fill="#f3f9f1")
    shapes.insert(0, shapes.pop())  # the host's frame goes under everything inside it
    names = ", ".join(f"`{n}`" for n in facts["kit_tools"])
    box(gap[1], top1, 704, bottom1, C_LANES["tool"], fill="#f7f1f6")
    text(
        (gap[1] + 704) / 2,
        (top1 + bottom1) / 2,
        ("MCP 服务器：本套件的工具 " if zh else "MCP server: the kit's tools ") + names,
        170,
    )
    box(gap[1], top2, 704, bottom2, C_LANES["tool"], fill="#f7f1f6")
    text(
        (gap[1] + 704) / 2,
        (top2 + bottom2) / 2,
        ("MCP 服务器：远程服务 " if zh else "MCP server: a remote service ") + "`tools` · `resources` · `prompts`",
        170,
    )
    layout_h = int(bottom2) + 40
    fig = drawing("", width, layout_h, shapes, ann, [0, width - 16], [-layout_h + 16, 0], dict(l=8, r=8, t=8, b=8))
    return fig.update_layout(font=dict(family=FONT, size=FONT_PX))


# ---------------------------------------------------------------- "Tool Use" §3.2: the three phases, recorded
def mcp_session_trace() -> list[dict]:
    """One real session with the kit's MCP server over stdio (``initialize``, ``tools/list``, one ``tools/call``
    of the chapter's own example, 250 × 15 %), as the client's wire log recorded it, timestamps dropped."""
    try:
        with Connection(stdio_server(), mode="legacy", timeout=180, call_timeout=180) as c:  # a loaded machine is slow
            c.list_tools()
            c.call_tool("calculator", {"expression": "250 * 0.15"})
    except Exception as e:  # the SDK's MCPError, a dead server: one line for the figures command
        raise RuntimeError(f"recording the MCP session for the Tool Use 3.2 figure failed: {e}") from None
    return [dict(direction=e.direction, message=e.message) for e in c.log]


def mcp_session_events(session: list[dict], lang: str = "en") -> list[dict]:
    """The wire log as diagram events: the three phases of "Tool Use" §3.2, each message one arrow."""
    zh = lang == "zh"
    phase_of = {
        "initialize": "① initialize：握手，协商版本与能力"
        if zh
        else "① initialize: the handshake, version and capabilities",
        "tools/list": "② list tools：发现工具" if zh else "② list tools: discovery",
        "tools/call": "③ call tool：调用，结果回流" if zh else "③ call tool: the call and its result",
    }
    out, pending = [], {}
    for entry in session:
        m = entry["message"]
        if entry["direction"] == "->":
            method = m.get("method", "")
            if method in phase_of:
                out.append(dict(phase=phase_of[method]))
                out.append(
                    dict(src="host", dst="client", label=("宿主请求" if zh else "the host asks") + f" `{method}`")
                )
            params = m.get("params")
            if method == "tools/call":
                shown = ", ".join(f"`{k}: {json.dumps(v, ensure_ascii=False)}`" for k, v in params.items())
            else:
                shown = ", ".join(f"`{k}`" for k in params) if params else ""
            label = f"`{method}`" + (f" {shown}" if shown else "")
            if "id" not in m:
                label += "（通知，无回复）" if zh else " (a notification: no reply)"
            out.append(dict(src="client", dst="server", label=label))
            if "id" in m:
                pending[m["id"]] = method
        else:
            method = pending.get(m.get("id"), "")
            result = m.get("result", m.get("error", {}))
            if method == "tools/list":
                tools = result.get("tools", [])
                each = ", ".join(f"`{k}`" for k in (tools[0] if tools else {}))
                shown = f"`tools:` {len(tools)} × " + each
            elif method == "tools/call":
                texts = [c.get("text", "") for c in result.get("content", [])]
                shown = (
                    "`content:` "
                    + ", ".join(f"`{t}`" for t in texts)
                    + f", `isError: {json.dumps(result.get('isError'))}`"
                )
            else:
                shown = ", ".join(f"`{k}`" for k in result)
            out.append(dict(src="server", dst="client", label=shown))
            after = {
                "tools/list": "转成本地工具，渲染进提示" if zh else "turned into local tools, rendered into the prompt",
                "tools/call": "结果作为 tool 消息回到宿主循环"
                if zh
                else "the result returns to the host loop as a tool message",
                "initialize": "",
            }[method]
            if after:
                out.append(dict(src="client", dst="host", label=after))
    return out


def mcp_sequence_figure(session: list[dict], lang: str = "en", width: int = CANVAS_PX) -> go.Figure:
    zh = lang == "zh"
    lanes = {
        "host": (60, "宿主 / Agent" if zh else "host / agent", C_LANES["host"]),
        "client": (210, "MCP 客户端" if zh else "MCP client", C_LANES["engine"]),
        "server": (590, "MCP 服务器（stdio）" if zh else "MCP server (stdio)", C_LANES["tool"]),
    }
    return sequence_figure(mcp_session_events(session, lang), lanes, width)
