"""Fig 14-11, MCP's host / client / server split, labelled with what the installed SDK uses.

What it does
- ``mcp_architecture`` reads the method names and wire fields from the installed ``mcp`` SDK and the kit's tool
  names; ``mcp_figure`` draws host, clients and servers from those facts, zh and en.

What it leaves out
- Pinned protocol revisions (the figure names none) and any server other than the kit's.
"""

from __future__ import annotations

from importlib.metadata import version

import plotly.graph_objects as go

from toolkit.plots import C_LANES, L, drawing
from toolkit.plots import arrow as arrow_annotation
from toolkit.tools import TOOLS


# ---------------------------------------------------------------- fig 14-11: MCP architecture
def mcp_architecture() -> dict:
    """The facts fig 14-11 shows, read from the installed SDK and the kit's tool registry.

    The SDK version and protocol revisions are recorded here for provenance only; the figure does not print them
    (§14.5.6 advises against memorising revision numbers)."""
    import mcp.types as mt  # lazy: the SDK loads only for fig 14-11

    tool = mt.Tool(name="x", description="", input_schema={"type": "object"}).model_dump(by_alias=True)
    result = mt.CallToolResult(content=[], is_error=False).model_dump(by_alias=True)
    call = mt.CallToolRequestParams(name="x", arguments={}).model_dump(by_alias=True)
    return dict(
        sdk=f"mcp {version('mcp')}",
        jsonrpc=mt.JSONRPC_VERSION,
        latest_protocol=mt.LATEST_PROTOCOL_VERSION,
        tool_fields=[k for k in ("name", "description", "inputSchema") if k in tool],
        call_fields=[k for k in ("name", "arguments") if k in call],
        result_fields=[k for k in ("content", "isError") if k in result],
        kit_tools=sorted(TOOLS),
        transports=["stdio", "Streamable HTTP"],
    )


def mcp_figure(facts: dict, lang: str = "en", width: int = 1100, height: int = 560) -> go.Figure:
    """Host (with the host loop and one MCP client per server), the engine beside it as in fig 14-9, servers."""
    zh = lang == "zh"
    shapes, ann = [], []

    def box(x0, y0, x1, y1, color, text, fill="white", size=14):
        shapes.append(
            dict(
                type="rect", x0=x0, y0=y0, x1=x1, y1=y1, line=dict(color=color, width=2), fillcolor=fill, layer="below"
            )
        )
        if text:
            ann.append(dict(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=text, showarrow=False, font=dict(size=size)))

    def arrow(x0, y, x1, color, label, above=True, label_x=None):
        ann.append(arrow_annotation(x0, y, x1, y, color))
        ann.append(
            dict(
                x=(x0 + x1) / 2 if label_x is None else label_x,
                y=y + (1.2 if above else -1.2),
                text=label,
                showarrow=False,
                font=dict(size=13),
                yanchor="bottom" if above else "top",
            )
        )

    # the engine stands apart from the host, as in fig 14-9: the host sends prompts, the engine returns tokens
    box(
        1,
        64,
        17,
        86,
        C_LANES["engine"],
        ("推理引擎 / 模型<br>只负责生成词元" if zh else "engine / model<br>only generates tokens"),
        fill="#fdf1e6",
    )
    box(29, 4, 58, 95, C_LANES["host"], "", fill="#f3f9f1")
    ann.append(
        dict(
            x=30.5,
            y=93.5,
            xanchor="left",
            yanchor="top",
            showarrow=False,
            font=dict(size=15),
            text="<b>" + ("宿主（LLM 应用）" if zh else "Host (the LLM application)") + "</b>",
        )
    )
    box(
        32,
        64,
        55,
        84,
        C_LANES["host"],
        ("宿主循环<br>渲染提示 · 解析调用 · 执行" if zh else "host loop<br>render · parse calls · execute"),
    )
    arrow(31.5, 79, 17.5, C_LANES["host"], "提示<br>（含工具 schema）" if zh else "prompt<br>(tool schemas)")
    arrow(17.5, 70, 31.5, C_LANES["engine"], "生成的文本" if zh else "generated text", above=False)
    ys = [(42, 56), (10, 24)]
    names = facts["kit_tools"]
    half = (len(names) + 1) // 2
    servers = [
        ("MCP 服务器：本套件的工具" if zh else "MCP server: the kit's tools")
        + "<br><i>"
        + ", ".join(names[:half])
        + ",<br>"
        + ", ".join(names[half:])
        + "</i>",
        ("MCP 服务器：远程服务" if zh else "MCP server: a remote service") + "<br><i>tools · resources · prompts</i>",
    ]
    req = "tools/list<br>tools/call {" + ", ".join(facts["call_fields"]) + "}"
    tool_fields = [f + "," for f in facts["tool_fields"][:-1]] + facts["tool_fields"][-1:]
    # the tool fields on two lines, so the reply fits between the host's edge (x 58) and the server's (x 76)
    resp = (
        "{"
        + " ".join(tool_fields[:2])
        + "<br>"
        + " ".join(tool_fields[2:])
        + "}<br>{"
        + ", ".join(facts["result_fields"])
        + "}"
    )
    for (y0, y1), label, transport in zip(ys, servers, facts["transports"]):
        box(32, y0, 55, y1, C_LANES["host"], ("MCP 客户端" if zh else "MCP client") + f"<br>{transport}")
        box(76, y0 - 2, 99, y1 + 2, C_LANES["tool"], label, fill="#f7f1f6", size=13)
        arrow(55.5, y1 - 3, 75.5, C_LANES["host"], req, label_x=67)  # labels centred between the two boxes
        arrow(75.5, y0 + 3, 55.5, C_LANES["tool"], resp, above=False, label_x=67)
    shapes.append(dict(type="line", x0=43.5, y0=64, x1=43.5, y1=56, line=dict(color="#999", width=2)))
    shapes.append(dict(type="line", x0=30.8, y0=74, x1=30.8, y1=17, line=dict(color="#999", width=2)))
    for y in (74, 17):
        shapes.append(dict(type="line", x0=30.8, y0=y, x1=32, y1=y, line=dict(color="#999", width=2)))
    ann.append(
        dict(
            x=87.5,
            y=94,
            showarrow=False,
            font=dict(size=13, color="#444"),
            yanchor="top",
            text=(
                f"JSON-RPC {facts['jsonrpc']}<br>"
                + ("传输：" if zh else "transports: ")
                + ("、" if zh else ", ").join(facts["transports"])
            ),
        )
    )
    return drawing(L[lang]["mcp_title"], width, height, shapes, ann, [0, 100], [-5, 97], dict(l=10, r=10, t=55, b=5))
