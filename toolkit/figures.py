"""The book's figures, rebuilt from data: ``python -m toolkit figures --out figures [--lang zh|en|both]``.

What it does
- fig 14-9: the round trip as a sequence diagram (user, host, engine/model, tool), drawn from a trace that
  the host loop recorded (``round_trip_trace``), not typed by hand; token counts come from the real tokenizer.
- fig 14-10: context growth per turn (served from the prefix cache vs computed) and cumulative prefill, from
  ``toolkit.cost.growth(10_000, 2048, 30)``.
- fig 14-11: MCP's host / client / server split, labelled with the method names and wire fields the
  installed ``mcp`` SDK uses and the kit's real tool names.
- table 14-11: p^k for p ∈ {0.99, 0.95, 0.90}, k ∈ {10, 20, 50}.
- Each figure is written as SVG, PNG and PDF in Chinese (``.zh``) and English (``.en``) through plotly +
  kaleido + the system chromium, with its data as JSON (and CSV for tables) beside it. Data files carry no
  timings or dates, so two runs give byte-identical data. The figure builders (``context_growth_figure``,
  ``decay_figure``) are what the notebook widgets update in place.

What it leaves out
- Styling for print beyond fixed sizes, colours and fonts (Noto Sans CJK); PDFs/PNGs are not byte-stable
  (chromium stamps them), only the data files are.
- Any figure of the chapter other than these four.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from pathlib import Path

import plotly.graph_objects as go

from . import cost

FONT = "Noto Sans CJK SC, Noto Sans, Arial, sans-serif"
# Fixed colours so regenerated figures look the same: cached = grey, computed = orange, no-cache = red.
C_CACHE, C_COMPUTE, C_NOCACHE, C_CACHED_LINE = "#9aa5b1", "#f28e2b", "#d62728", "#1f77b4"
C_LANES = {"user": "#4e79a7", "host": "#59a14f", "engine": "#f28e2b", "tool": "#b07aa1"}

L = {
    "zh": dict(
        growth_title="图 14-10 Agent 循环的上下文增长（T = {T:,}，Δ = {delta:,}，R = {R}）",
        per_turn="每轮预填充的前缀（词元）", cumulative="累计预填充（词元）", turn="轮次 k",
        from_cache="前缀缓存命中（不重算）", computed="本轮实际计算", tool_line="工具定义 T = {T:,}",
        cum_no_cache="无缓存：每轮从头预填充", cum_cache="缓存全命中：只算增量",
        ratio="{a:,} / {b:,} = {r:.1f}×<br>T/Δ + (R+1)/2 = {c:.2f} + {h:.1f}",
        ratio_cold="{a:,} / {b:,} = {r:.1f}×（冷启动：首轮也算 T）",
        decay_title="串行 k 步的整体成功率 p<sup>k</sup>", steps="步数 k", overall="整体成功率",
        table_title="表 14-11 串行多步任务的整体成功率 p<sup>k</sup>", p_col="单步成功率 p", k_col="{k} 步",
        seq_title="图 14-9 一次工具调用的完整往返（由宿主循环记录的轨迹绘制）",
        lanes=dict(user="用户", host="宿主（host）", engine="推理引擎 / 模型", tool="工具"),
        mcp_title="图 14-11 MCP 的宿主 / 客户端 / 服务器架构",
    ),
    "en": dict(
        growth_title="Fig 14-10 Context growth in an agent loop (T = {T:,}, Δ = {delta:,}, R = {R})",
        per_turn="Prefix prefilled per turn (tokens)", cumulative="Cumulative prefill (tokens)", turn="turn k",
        from_cache="served from the prefix cache", computed="computed this turn",
        tool_line="tool definitions T = {T:,}",
        cum_no_cache="no cache: whole prefix every turn", cum_cache="full cache hit: only the new tokens",
        ratio="{a:,} / {b:,} = {r:.1f}×<br>T/Δ + (R+1)/2 = {c:.2f} + {h:.1f}",
        ratio_cold="{a:,} / {b:,} = {r:.1f}× (cold: turn 1 also computes T)",
        decay_title="Overall success of k serial steps, p<sup>k</sup>", steps="steps k", overall="overall success",
        table_title="Table 14-11 Overall success p<sup>k</sup> of a serial multi-step task", p_col="per-step p",
        k_col="{k} steps",
        seq_title="Fig 14-9 One tool call, round trip (drawn from a trace recorded by the host loop)",
        lanes=dict(user="user", host="host", engine="engine / model", tool="tool"),
        mcp_title="Fig 14-11 MCP: host, clients and servers",
    ),
}


def _base_layout(title: str, width: int, height: int, **kw) -> dict:
    return dict(title=dict(text=title, x=0.01, xanchor="left", font=dict(size=18)), width=width, height=height,
                font=dict(family=FONT, size=13, color="#222"), template="plotly_white",
                margin=dict(l=70, r=30, t=80, b=60), **kw)


# ---------------------------------------------------------------- fig 14-10
def context_growth_figure(g: cost.Growth, lang: str = "en", width: int = 1100, height: int = 500) -> go.Figure:
    """Left: per-turn prefix stacked as cached + computed; right: cumulative prefill with and without cache."""
    t = L[lang]
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, column_widths=[0.56, 0.44], horizontal_spacing=0.1,
                        subplot_titles=(t["per_turn"], t["cumulative"]))
    fig.add_trace(go.Bar(name=t["from_cache"], x=g.turns, y=g.from_cache, marker_color=C_CACHE,
                         legendgroup="a"), 1, 1)
    fig.add_trace(go.Bar(name=t["computed"], x=g.turns, y=g.computed, marker_color=C_COMPUTE,
                         legendgroup="a"), 1, 1)
    fig.add_trace(go.Scatter(name=t["cum_no_cache"], x=g.turns, y=g.cum_no_cache, mode="lines",
                             line=dict(color=C_NOCACHE, width=3)), 1, 2)
    fig.add_trace(go.Scatter(name=t["cum_cache"], x=g.turns, y=g.cum_cache, mode="lines",
                             line=dict(color=C_CACHED_LINE, width=3)), 1, 2)
    fig.update_layout(**_base_layout(t["growth_title"].format(T=g.T, delta=g.delta, R=g.R), width, height),
                      barmode="stack", bargap=0.15,
                      legend=dict(orientation="h", y=-0.16, x=0.0, yanchor="top"))
    fig.update_xaxes(title_text=t["turn"])
    fig.update_yaxes(tickformat=",", rangemode="tozero")
    fig.add_shape(type="line", xref="x", yref="y", x0=0.5, x1=g.R + 0.5, y0=g.T, y1=g.T, name="tool_line",
                  line=dict(color="#333", dash="dash", width=1.5))
    # below the line, mid-panel: there the bars are all "served from cache" grey, so no orange is hidden
    fig.add_annotation(name="tool_line", xref="x", yref="y", x=(g.R + 1) / 2, y=g.T,
                       text=t["tool_line"].format(T=g.T), showarrow=False, xanchor="center", yanchor="top",
                       font=dict(size=12), bgcolor="rgba(255,255,255,0.85)", visible=g.T > 0)
    fig.add_annotation(name="ratio", xref="x2 domain", yref="y2 domain", x=0.03, y=0.97, xanchor="left",
                       yanchor="top", align="left", showarrow=False, text=_ratio_text(g, lang),
                       bgcolor="rgba(255,255,255,0.85)", bordercolor="#999", borderwidth=1, font=dict(size=13))
    fig.update_layout(margin=dict(b=110))
    return fig


def _ratio_text(g: cost.Growth, lang: str) -> str:
    t = L[lang]
    if g.warm:
        return t["ratio"].format(a=g.total_no_cache, b=g.total_cache, r=g.ratio, c=g.T / g.delta, h=(g.R + 1) / 2)
    return t["ratio_cold"].format(a=g.total_no_cache, b=g.total_cache, r=g.ratio)


def update_context_growth(fig, g: cost.Growth, lang: str = "en") -> None:
    """Refresh a figure made by ``context_growth_figure`` in place (works on a FigureWidget)."""
    t = L[lang]
    with fig.batch_update():
        fig.data[0].x, fig.data[0].y = g.turns, g.from_cache
        fig.data[1].x, fig.data[1].y = g.turns, g.computed
        fig.data[2].x, fig.data[2].y = g.turns, g.cum_no_cache
        fig.data[3].x, fig.data[3].y = g.turns, g.cum_cache
        fig.layout.title.text = t["growth_title"].format(T=g.T, delta=g.delta, R=g.R)
        fig.layout.shapes[0].update(x1=g.R + 0.5, y0=g.T, y1=g.T)
        for a in fig.layout.annotations:
            if a.name == "tool_line":
                a.update(x=(g.R + 1) / 2, y=g.T, text=t["tool_line"].format(T=g.T), visible=g.T > 0)
            elif a.name == "ratio":
                a.text = _ratio_text(g, lang)


# ---------------------------------------------------------------- p^k (table 14-11)
def decay_figure(p: float = 0.95, k: int = 20, ps=cost.BOOK_PS, kmax: int = 60, lang: str = "en",
                 width: int = 900, height: int = 460) -> go.Figure:
    """p^k against k for the book's three p plus a chosen ``p``, with the point (k, p^k) marked."""
    t = L[lang]
    ks = list(range(0, kmax + 1))
    data = [go.Scatter(name=f"p = {q}", x=ks, y=[cost.success(q, j) for j in ks], mode="lines",
                       line=dict(width=1.5, dash="dot")) for q in ps]
    data.append(go.Scatter(name=f"p = {p:.3f}", x=ks, y=[cost.success(p, j) for j in ks], mode="lines",
                           line=dict(width=3.5, color="#222")))
    data.append(go.Scatter(name=f"p^k = {cost.success(p, k):.3f}", x=[k], y=[cost.success(p, k)],
                           mode="markers+text", text=[f"{cost.success(p, k):.3f}"], textposition="top right",
                           marker=dict(size=11, color=C_NOCACHE)))
    layout = _base_layout(t["decay_title"], width, height, xaxis=dict(title=t["steps"]),
                          yaxis=dict(title=t["overall"], range=[0, 1.02]))
    return go.Figure(data=data, layout=layout)


def update_decay(fig, p: float, k: int, kmax: int = 60) -> None:
    ks = list(range(0, kmax + 1))
    with fig.batch_update():
        fig.data[-2].update(name=f"p = {p:.3f}", x=ks, y=[cost.success(p, j) for j in ks])
        fig.data[-1].update(name=f"p^k = {cost.success(p, k):.3f}", x=[k], y=[cost.success(p, k)],
                            text=[f"{cost.success(p, k):.3f}"])


def table_figure(rows: list[dict], ks, lang: str = "en", width: int = 640, height: int = 230) -> go.Figure:
    t = L[lang]
    header = [t["p_col"]] + [t["k_col"].format(k=k) for k in ks]
    cells = [[f"{r['p']:.2f}" for r in rows]] + [[f"{r[k]:.3f}" for r in rows] for k in ks]
    fig = go.Figure(go.Table(header=dict(values=header, fill_color="#e8ecf1", font=dict(size=15), height=34),
                             cells=dict(values=cells, font=dict(size=15), height=32, fill_color="white",
                                        line_color="#ccc"), columnwidth=[1.4] + [1] * len(ks)))
    fig.update_layout(**_base_layout(t["table_title"], width, height))
    fig.update_layout(margin=dict(l=20, r=20, t=60, b=10))
    return fig


# ---------------------------------------------------------------- fig 14-9: the round trip, from a trace
LANES = ("user", "host", "engine", "tool")


def round_trip_trace() -> dict:
    """Record one calculator round trip with the host loop and return it as plain data (fig 14-9's source).

    ``toolkit.host.loop`` runs with its ``ScriptedBackend`` (a fake model replaying fixed texts, so the figure
    is deterministic); the calculator really runs and every token count comes from the offline Qwen3 tokenizer.
    The scripted answer is built from the ``<tool_response>`` the host put into the second prompt.
    """
    from . import host
    from .render import tokenizer_for

    tok = tokenizer_for("qwen3")
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "250 * 15%"}}\n</tool_call>'

    def answer(prompt_ids):  # read the result back from the prompt, as a model would
        text = tok.decode(prompt_ids)
        body = text.rsplit("<tool_response>", 1)[1].split("</tool_response>", 1)[0]
        return f"250的15%是{json.loads(body)['result']}。"

    backend = host.ScriptedBackend(tok, [call, answer])
    ex = host.example("calculator")
    question = ex["messages"][-1]["content"]
    trace = host.run(backend, tok, ex["messages"], ex["tools"], template="qwen3", parallel=False)
    steps = [dict(kind="user", text=question)]
    for s in trace.steps:
        if isinstance(s, host.Rendered):
            steps.append(dict(kind="request", turn=s.turn, prompt_tokens=len(s.prompt_ids), split=s.split,
                              tool_response_tokens=s.rendering.counts["tool_response"]))
        elif isinstance(s, host.Generated):
            g = s.generation
            steps[-1]["reused"] = g.reused  # what the (perfect) prefix cache served for this request
            steps.append(dict(kind="model_output", turn=s.turn, text=s.text, tokens=len(g.new_ids),
                              stop="<|im_end|>" if g.stopped_by == "stop" else g.stopped_by))
        elif isinstance(s, host.Parsed) and s.calls:
            steps += [dict(kind="parse", name=c.name, arguments=c.arguments, error=c.error) for c in s.calls]
        elif isinstance(s, host.Executed):
            steps += [dict(kind="tool_result", name=r.name, status=r.status, result=r.result) for r in s.results]
        elif isinstance(s, host.Answered):
            steps.append(dict(kind="answer", text=s.text))
    return dict(producer="toolkit.host.run (the kit's host loop), template qwen3, offline Qwen3 tokenizer; "
                         "calculator executed by toolkit.tools",
                model=f"{trace.model}: replays fixed texts, no neural model ran", stop=trace.stop.reason,
                steps=steps)


def _arrows(trace: dict, lang: str) -> list[dict]:
    """Turn recorded steps into arrows ``{src, dst, step, label}``, one per recorded event, in order."""
    zh = lang == "zh"
    out = []

    def add(src, dst, step, label_zh, label_en):
        out.append(dict(src=src, dst=dst, step=step, label=label_zh if zh else label_en))

    for s in trace["steps"]:
        k = s["kind"]
        if k == "user":
            add("user", "host", "", f"“{s['text']}”", f"“{s['text']}”")
        elif k == "request" and s["turn"] == 1:
            n, t = s["prompt_tokens"], s["split"]["tools"]
            add("host", "engine", "①", f"渲染消息 + 工具定义：{n} 词元（其中工具块 {t}）",
                f"render messages + tool schemas: {n} tokens (tool block {t})")
        elif k == "request":
            n, r = s["prompt_tokens"], s.get("reused", 0)
            add("host", "engine", "⑤⑥", f"新请求：结果放在 user 轮的 <tool_response> 里<br>{n} 词元，前缀缓存命中 {r}",
                f"new request, the result inside a user turn's <tool_response><br>{n} tokens, "
                f"{r} from the prefix cache")
        elif k == "model_output" and "<tool_call>" in s["text"]:
            add("engine", "engine", "②③", f"逐词元生成 <tool_call>…</tool_call><br>{s['tokens']} 词元，到 "
                f"{s['stop']} 停止", f"decodes <tool_call>…</tool_call><br>{s['tokens']} tokens, stops at {s['stop']}")
            add("engine", "host", "", "返回整段文本，这次请求结束", "returns the text; this request ends")
        elif k == "model_output":
            add("engine", "host", "", f"回答（{s['tokens']} 词元）：“{s['text']}”",
                f"answer ({s['tokens']} tokens): “{s['text']}”")
        elif k == "parse":
            args = json.dumps(s["arguments"], ensure_ascii=False)
            add("host", "host", "④", f"切出 JSON，按 schema 校验：{s['name']}({args})",
                f"cut out the JSON, check it against the schema: {s['name']}({args})")
            add("host", "tool", "④", f"执行 {s['name']}({args})", f"run {s['name']}({args})")
        elif k == "tool_result":
            res = json.dumps(s["result"], ensure_ascii=False)
            add("tool", "host", "", f"结果（{s['status']}）{res}", f"result ({s['status']}) {res}")
        elif k == "answer":
            add("host", "user", "", f"“{s['text']}”", f"“{s['text']}”")
    return out


def round_trip_figure(trace: dict, lang: str = "en", width: int = 1150) -> go.Figure:
    t = L[lang]
    arrows = _arrows(trace, lang)
    lane_x = {name: float(i) for i, name in enumerate(LANES)}
    height = 150 + 58 * len(arrows) + 60
    y_end = -len(arrows) - 0.4
    shapes, ann = [], []
    for name, x in lane_x.items():
        shapes.append(dict(type="line", x0=x, x1=x, y0=0.2, y1=y_end, line=dict(color="#bbb", width=2, dash="dot")))
        ann.append(dict(x=x, y=0.45, text=f"<b>{t['lanes'][name]}</b>", showarrow=False, font=dict(size=15,
                    color="white"), bgcolor=C_LANES[name], borderpad=7))
    for i, a in enumerate(arrows, 1):
        y = -i + 0.3
        x0, x1 = lane_x[a["src"]], lane_x[a["dst"]]
        text = (f"<b>{a['step']}</b> " if a["step"] else "") + a["label"]
        if x0 == x1:  # work inside one participant: an activation bar and a note beside its lifeline
            shapes.append(dict(type="rect", x0=x0 - 0.025, x1=x0 + 0.025, y0=y - 0.35, y1=y + 0.35,
                               fillcolor=C_LANES[a["src"]], line=dict(width=0)))
            ann.append(dict(x=x0 + 0.05, y=y, text=text, showarrow=False, xanchor="left", align="left",
                            font=dict(size=12), bgcolor="#fff8e6", bordercolor=C_LANES[a["src"]], borderpad=4))
            continue
        ann.append(dict(x=x1, y=y, ax=x0, ay=y, xref="x", yref="y", axref="x", ayref="y", text="",
                        showarrow=True, arrowhead=2, arrowsize=1.3, arrowwidth=2, arrowcolor=C_LANES[a["src"]]))
        ann.append(dict(x=min(x0, x1) + 0.04, y=y + 0.07, text=text, showarrow=False, xanchor="left",
                        yanchor="bottom", align="left", font=dict(size=12)))
    ann.append(dict(x=-0.3, y=y_end - 0.1, xanchor="left", yanchor="top", showarrow=False, align="left",
                    font=dict(size=11, color="#555"),
                    text=("轨迹来源：" if lang == "zh" else "trace recorded by: ") + trace["producer"] + "<br>" +
                    ("模型：" if lang == "zh" else "model: ") + trace["model"]))
    layout = _base_layout(t["seq_title"], width, height, shapes=shapes, annotations=ann, showlegend=False,
                          xaxis=dict(visible=False, range=[-0.35, 3.45], fixedrange=True),
                          yaxis=dict(visible=False, range=[y_end - 0.9, 0.8], fixedrange=True))
    layout["margin"] = dict(l=20, r=20, t=60, b=10)
    return go.Figure(layout=layout)


# ---------------------------------------------------------------- fig 14-11: MCP architecture
def mcp_architecture() -> dict:
    """The facts fig 14-11 shows, read from the installed SDK and the kit's tool registry."""
    import mcp.types as mt
    from importlib.metadata import version

    from .tools import TOOLS

    tool = mt.Tool(name="x", description="", input_schema={"type": "object"}).model_dump(by_alias=True)
    result = mt.CallToolResult(content=[], is_error=False).model_dump(by_alias=True)
    return dict(sdk=f"mcp {version('mcp')}", jsonrpc=mt.JSONRPC_VERSION,
                latest_protocol=mt.LATEST_PROTOCOL_VERSION,
                tool_fields=[k for k in ("name", "description", "inputSchema") if k in tool],
                result_fields=[k for k in ("content", "isError") if k in result],
                kit_tools=sorted(TOOLS), transports=["stdio", "Streamable HTTP"])


def mcp_figure(facts: dict, lang: str = "en", width: int = 1150, height: int = 560) -> go.Figure:
    zh = lang == "zh"
    shapes, ann = [], []

    def box(x0, y0, x1, y1, color, text, fill="white", size=13, dash=None):
        shapes.append(dict(type="rect", x0=x0, y0=y0, x1=x1, y1=y1, line=dict(color=color, width=2, dash=dash),
                           fillcolor=fill, layer="below"))
        if text:
            ann.append(dict(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=text, showarrow=False, font=dict(size=size)))

    def arrow(x0, y, x1, color, label, above=True):
        ann.append(dict(x=x1, y=y, ax=x0, ay=y, xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True,
                        arrowhead=2, arrowwidth=2, arrowcolor=color))
        ann.append(dict(x=(x0 + x1) / 2, y=y + (1.0 if above else -1.0), text=label, showarrow=False,
                        font=dict(size=11), yanchor="bottom" if above else "top"))

    # the host: the LLM application that holds the model loop and one client per server
    box(2, 8, 39.5, 92, C_LANES["host"], "", fill="#f3f9f1")
    ann.append(dict(x=4, y=89, xanchor="left", yanchor="top", showarrow=False, font=dict(size=15),
                    text="<b>" + ("宿主 Host（LLM 应用）" if zh else "Host (the LLM application)") + "</b>"))
    box(5, 60, 37, 80, C_LANES["engine"], ("模型 / 推理引擎<br>工具 schema 渲染进提示（§14.5.2 第 1 步）" if zh else
                                           "model / engine<br>tool schemas rendered into the prompt (§14.5.2 step 1)"))
    ys = [(40, 52), (14, 26)]
    names = facts["kit_tools"]
    half = (len(names) + 1) // 2
    servers = [(("MCP 服务器：kit 工具" if zh else "MCP server: the kit's tools") + "<br><i>" +
                ", ".join(names[:half]) + ",<br>" + ", ".join(names[half:]) + "</i>", "stdio"),
               (("MCP 服务器：远程服务" if zh else "MCP server: a remote service") + "<br><i>tools · resources · prompts</i>",
                "Streamable HTTP")]
    for (y0, y1), (label, transport) in zip(ys, servers):
        box(20, y0, 37, y1, C_LANES["host"], ("MCP 客户端" if zh else "MCP client") + f"<br>({transport})")
        box(70, y0 - 2, 98, y1 + 2, C_LANES["tool"], label, fill="#f7f1f6")
        arrow(38, y1 - 3, 69.5, C_LANES["host"], "tools/list, tools/call {name, arguments}")
        arrow(69.5, y0 + 3, 38, C_LANES["tool"], "tools/list → {" + ", ".join(facts["tool_fields"]) +
              "}<br>tools/call → {" + ", ".join(facts["result_fields"]) + "}", above=False)
    ann.append(dict(x=13, y=40, text=("宿主循环" if zh else "host loop"), showarrow=False, font=dict(size=12),
                    xanchor="right"))
    shapes.append(dict(type="line", x0=14, y0=58, x1=14, y1=20, line=dict(color="#999", width=2)))
    for y in (46, 20):
        shapes.append(dict(type="line", x0=14, y0=y, x1=20, y1=y, line=dict(color="#999", width=2)))
    ann.append(dict(x=50, y=2, showarrow=False, font=dict(size=11, color="#555"), text=(
        f"JSON-RPC {facts['jsonrpc']} · " + ("传输" if zh else "transports") + f": {', '.join(facts['transports'])}"
        + " · " + ("已安装 SDK" if zh else "installed SDK") + f" {facts['sdk']}, " +
        ("最新协议修订" if zh else "latest protocol revision") + f" {facts['latest_protocol']}")))
    layout = _base_layout(L[lang]["mcp_title"], width, height, shapes=shapes, annotations=ann, showlegend=False,
                          xaxis=dict(visible=False, range=[0, 100]), yaxis=dict(visible=False, range=[0, 95]))
    layout["margin"] = dict(l=10, r=10, t=60, b=10)
    return go.Figure(layout=layout)


# ---------------------------------------------------------------- writing
def _dump_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _dump_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def build_static(out: Path, langs=("zh", "en")) -> list[tuple[go.Figure, Path]]:
    """fig 14-10 and table 14-11 (pure arithmetic): write their data, return (figure, stem) pairs to render."""
    out.mkdir(parents=True, exist_ok=True)
    g = cost.growth(10_000, 2048, 30)
    _dump_json(out / "fig14-10_context_growth.json", dict(summary=g.summary(), turns=g.rows()))
    _dump_csv(out / "fig14-10_context_growth.csv", g.rows())
    rows = cost.success_table()
    table_rows = [{"p": r["p"], **{f"k={k}": round(r[k], 6) for k in cost.BOOK_KS},
                   **{f"k={k} (3 d.p.)": f"{r[k]:.3f}" for k in cost.BOOK_KS}} for r in rows]
    _dump_csv(out / "table14-11_success.csv", table_rows)
    p = cost.required_p(0.9, 20)
    _dump_json(out / "table14-11_success.json", dict(
        rows=table_rows, inverse=dict(P=0.9, k=20, required_p=p, steps_per_error=cost.steps_per_error(p))))
    return [pair for lg in langs for pair in ((context_growth_figure(g, lg), out / f"fig14-10_context_growth.{lg}"),
                                              (table_figure(rows, cost.BOOK_KS, lg), out / f"table14-11_success.{lg}"))]


def build_traced(out: Path, langs=("zh", "en")) -> list[tuple[go.Figure, Path]]:
    """fig 14-9 (from a recorded host-loop trace) and fig 14-11 (from the installed SDK): data + pairs."""
    out.mkdir(parents=True, exist_ok=True)
    trace = round_trip_trace()
    _dump_json(out / "fig14-9_round_trip.json", dict(trace=trace, arrows={lg: _arrows(trace, lg) for lg in langs}))
    facts = mcp_architecture()
    _dump_json(out / "fig14-11_mcp.json", facts)
    return [pair for lg in langs for pair in ((round_trip_figure(trace, lg), out / f"fig14-9_round_trip.{lg}"),
                                              (mcp_figure(facts, lg), out / f"fig14-11_mcp.{lg}"))]


def build_all(out: Path, langs=("zh", "en")) -> list[tuple[go.Figure, Path]]:
    """Write every data file and return the (figure, stem) pairs still to be rendered to images."""
    return build_static(out, langs) + build_traced(out, langs)


def _find_chromium() -> str | None:
    for p in (os.environ.get("BROWSER_PATH"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if p and Path(p).exists():
            return p
    return None


def render_images(todo, formats=("svg", "png", "pdf")) -> int:
    """Render figures to image files through kaleido and the system chromium (never downloads a browser)."""
    import plotly.io as pio

    figs, files, scales = [], [], []
    for fig, stem in todo:
        for fmt in formats:
            figs.append(fig), files.append(stem.with_suffix(stem.suffix + "." + fmt))
            scales.append(2 if fmt == "png" else 1)
    if figs:
        import warnings

        with warnings.catch_warnings():  # plotly always passes kopts; the running server ignores them, as meant
            warnings.filterwarnings("ignore", message="The kopts argument is ignored")
            pio.write_images(figs, files, width=[f.layout.width for f in figs],
                             height=[f.layout.height for f in figs], scale=scales)
    return len(files)


def write_all(out: Path, langs=("zh", "en"), formats=("svg", "png", "pdf"), claims: bool = True) -> dict:
    """Everything ``make figures`` does. One browser session renders while Python records the trace."""
    import concurrent.futures as cf

    t0 = time.perf_counter()
    browser = _find_chromium()
    if formats and browser is None:
        raise RuntimeError("no chromium found: run `make system` (apt-get install chromium fonts-noto-cjk)")
    if formats:
        import kaleido

        os.environ.setdefault("BROWSER_PATH", browser)
        kaleido.start_sync_server(silence_warnings=True)
    try:
        static = build_static(out, langs)
        with cf.ThreadPoolExecutor(1) as pool:  # chromium renders in its own process while Python works
            jobs = [pool.submit(render_images, static, formats)]
            traced = build_traced(out, langs)
            jobs.append(pool.submit(render_images, traced, formats))
            if claims:
                from .claims import write_markdown

                write_markdown(out / "claims.md")
            n = sum(j.result() for j in jobs)
    finally:
        if formats:
            kaleido.stop_sync_server(silence_warnings=True)
    return dict(figures=len(static) + len(traced), images=n, seconds=time.perf_counter() - t0)


def cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit figures", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="figures", help="output folder (default: figures)")
    ap.add_argument("--lang", choices=("zh", "en", "both"), default="both")
    ap.add_argument("--formats", default="svg,png,pdf", help="comma-separated image formats; '' for data only")
    ap.add_argument("--no-claims", action="store_true", help="do not write claims.md into --out")
    args = ap.parse_args(argv)
    langs = ("zh", "en") if args.lang == "both" else (args.lang,)
    formats = tuple(f for f in args.formats.split(",") if f)
    try:
        r = write_all(Path(args.out), langs, formats, claims=not args.no_claims)
    except RuntimeError as e:
        print(f"figures: {e}", file=sys.stderr)
        return 1
    print(f"wrote {r['figures']} figures as {r['images']} images, with their data, into {args.out}/ "
          f"in {r['seconds']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
