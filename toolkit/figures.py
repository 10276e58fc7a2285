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
import re
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
        seq_title="图 14-9 一次工具调用的完整往返：模型只负责生成，解析与执行都在宿主",
        lanes=dict(user="用户", host="宿主", engine="推理引擎 / 模型", tool="工具"),
        mcp_title="图 14-11 MCP 的客户端-服务器架构：宿主里每个客户端连一个服务器",
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
        seq_title="Fig 14-9 One tool call, round trip: the model only generates; the host parses and executes",
        lanes=dict(user="user", host="host", engine="engine / model", tool="tool"),
        mcp_title="Fig 14-11 MCP client–server architecture: one client in the host per server",
    ),
}


def _base_layout(title: str, width: int, height: int, **kw) -> dict:
    return dict(title=dict(text=title, x=0.01, xanchor="left", font=dict(size=18)), width=width, height=height,
                font=dict(family=FONT, size=13, color="#222"), template="plotly_white",
                margin=dict(l=70, r=30, t=80, b=60), **kw)


# ---------------------------------------------------------------- fig 14-10
def context_growth_figure(g: cost.Growth, lang: str = "en", width: int = 1100, height: int = 500) -> go.Figure:
    """Left: per-turn prefix stacked as cached + computed, with the tool block's size as a dashed line; right:
    cumulative prefill with and without cache. Each panel has its own legend, under it; nothing is drawn over
    the bars. Trace order (0 cached, 1 computed, 2 no-cache total, 3 cached total, 4 tool line) is what
    ``update_context_growth`` relies on."""
    t = L[lang]
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, column_widths=[0.56, 0.44], horizontal_spacing=0.1,
                        subplot_titles=(t["per_turn"], t["cumulative"]))
    fig.add_trace(go.Bar(name=t["from_cache"], x=g.turns, y=g.from_cache, marker_color=C_CACHE,
                         legend="legend"), 1, 1)
    fig.add_trace(go.Bar(name=t["computed"], x=g.turns, y=g.computed, marker_color=C_COMPUTE,
                         legend="legend"), 1, 1)
    fig.add_trace(go.Scatter(name=t["cum_no_cache"], x=g.turns, y=g.cum_no_cache, mode="lines",
                             line=dict(color=C_NOCACHE, width=3), legend="legend2"), 1, 2)
    fig.add_trace(go.Scatter(name=t["cum_cache"], x=g.turns, y=g.cum_cache, mode="lines",
                             line=dict(color=C_CACHED_LINE, width=3), legend="legend2"), 1, 2)
    fig.add_trace(go.Scatter(name=t["tool_line"].format(T=g.T), x=[0.5, g.R + 0.5], y=[g.T, g.T], mode="lines",
                             line=dict(color="#333", dash="dash", width=1.5), legend="legend", visible=g.T > 0,
                             hoverinfo="skip"), 1, 1)
    # stacked entries under each panel: long labels (en) cannot run into the other panel's legend
    under = dict(orientation="v", yanchor="top", y=-0.17, xanchor="left", bgcolor="rgba(0,0,0,0)")
    fig.update_layout(**_base_layout(t["growth_title"].format(T=g.T, delta=g.delta, R=g.R), width, height),
                      barmode="stack", bargap=0.15, legend=dict(under, x=0.0),
                      legend2=dict(under, x=0.604))
    fig.update_xaxes(title_text=t["turn"])
    fig.update_yaxes(tickformat=",", rangemode="tozero")
    fig.add_annotation(name="ratio", xref="x2 domain", yref="y2 domain", x=0.03, y=0.97, xanchor="left",
                       yanchor="top", align="left", showarrow=False, text=_ratio_text(g, lang),
                       bgcolor="rgba(255,255,255,0.85)", bordercolor="#999", borderwidth=1, font=dict(size=13))
    fig.update_layout(margin=dict(b=150), height=height + 40)
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
        fig.data[4].update(name=t["tool_line"].format(T=g.T), x=[0.5, g.R + 0.5], y=[g.T, g.T], visible=g.T > 0)
        fig.layout.title.text = t["growth_title"].format(T=g.T, delta=g.delta, R=g.R)
        for a in fig.layout.annotations:
            if a.name == "ratio":
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
QUESTION_ZH = "北京今天天气怎么样？"


def round_trip_trace() -> dict:
    """Record the book's own example (§14.5.2: get_weather for 北京) with the host loop; return it as plain data.

    ``toolkit.host.run`` runs with its ``ScriptedBackend`` (a fake model replaying fixed texts, so the figure is
    deterministic): the call is the one §14.5.2 step 2 prints; ``toolkit.tools.get_weather`` really runs (a
    fixed local table); every token count comes from the offline Qwen3 tokenizer and the Qwen3 template. The
    scripted answer is built from the ``<tool_response>`` the host put into the second prompt.
    """
    from . import host
    from .render import tokenizer_for
    from .tools import TOOLS

    tok = tokenizer_for("qwen3")
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京"}}\n</tool_call>'

    def answer(prompt_ids):  # read the result back from the prompt, as a model would
        text = tok.decode(prompt_ids)
        body = json.loads(text.rsplit("<tool_response>", 1)[1].split("</tool_response>", 1)[0])
        return f"北京今天 {body['temperature']}°C。"

    backend = host.ScriptedBackend(tok, [call, answer])
    trace = host.run(backend, tok, [{"role": "user", "content": QUESTION_ZH}], {"get_weather": TOOLS["get_weather"]},
                     template="qwen3", parallel=False)
    steps = [dict(kind="user", text=QUESTION_ZH)]
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
                         "get_weather executed by toolkit.tools (a fixed local table, not live data)",
                example="§14.5.2: get_weather, city 北京", model=f"{trace.model}: replays fixed texts, no neural "
                "model ran", stop=trace.stop.reason, steps=steps)


def _wrap(text: str, width: int) -> str:
    """Break ``text`` into lines of about ``width`` columns (a CJK character counts 2) with <br>."""
    lines, line, cols = [], "", 0
    for word in re.split(r"(\s+)", text):
        for piece in ([word] if word.isascii() else list(word)):
            w = sum(2 if ord(ch) > 0x2E7F else 1 for ch in piece)
            if cols + w > width and line.strip():
                lines.append(line.rstrip())
                line, cols = "", 0
                if piece.isspace():
                    continue
            line += piece
            cols += w
    if line.strip():
        lines.append(line.rstrip())
    return "<br>".join(lines)


def _arrows(trace: dict, lang: str) -> list[dict]:
    """Turn recorded steps into arrows ``{src, dst, step, label}``: §14.5.2's six steps, each numbered once."""
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
            add("host", "engine", "①", f"工具定义渲染进系统段，连同问题共 {n} 个词元（工具块 {t}）",
                f"tool schemas rendered into the system turn: {n} tokens with the question (tool block {t})")
        elif k == "model_output" and "<tool_call>" in s["text"]:
            call = s["text"].split("<tool_call>", 1)[1].split("</tool_call>", 1)[0].strip()
            add("engine", "engine", "②", f"逐词元生成 <tool_call>{call}</tool_call>，共 {s['tokens']} 个词元",
                f"decodes <tool_call>{call}</tool_call>, {s['tokens']} tokens")
            add("engine", "host", "③", f"生成 {s['stop']} 即停止；请求结束，返回整段文本",
                f"stops at {s['stop']}; the request ends and the text goes back")
        elif k == "parse":
            args = json.dumps(s["arguments"], ensure_ascii=False)
            add("host", "tool", "④", f"切出 JSON，校验参数，执行 {s['name']}({args})",
                f"cuts out the JSON, validates it, runs {s['name']}({args})")
        elif k == "tool_result":
            shown = {k: v for k, v in s["result"].items() if k in ("city", "temperature", "unit", "condition")}
            res = json.dumps(shown, ensure_ascii=False)  # the full result is in the data file
            add("tool", "host", "", f"结果 {res}", f"result {res}")
        elif k == "request":
            n, r, tr = s["prompt_tokens"], s.get("reused", 0), s.get("tool_response_tokens", 0)
            add("host", "host", "⑤", f"结果作为 role=\"tool\" 消息加入列表；模板把它放进 user 轮的 "
                f"<tool_response>（{tr} 个词元）", f"the result joins the list as a role=\"tool\" message; the "
                f"template puts it in a user turn's <tool_response> ({tr} tokens)")
            add("host", "engine", "⑥", f"新请求，前缀更长：{n} 个词元，其中 {r} 个命中前缀缓存",
                f"a new request with a longer prefix: {n} tokens, {r} from the prefix cache")
        elif k == "model_output":
            add("engine", "host", "", f"回答（{s['tokens']} 个词元）", f"answer ({s['tokens']} tokens)")
        elif k == "answer":
            add("host", "user", "", f"“{s['text']}”", f"“{s['text']}”")
    return out


# Where each participant's own notes go: into the gap beside its lifeline that no arrow uses at that moment.
_NOTE_SIDE = {"host": -1, "engine": +1}


def round_trip_figure(trace: dict, lang: str = "en", width: int = 1200) -> go.Figure:
    t = L[lang]
    arrows = _arrows(trace, lang)
    lane_x = {name: float(i) for i, name in enumerate(LANES)}
    row_h = 70
    height = 130 + row_h * len(arrows)
    y_end = -len(arrows) - 0.2
    cols = 38  # columns of label text that fit between two neighbouring lifelines at this width
    shapes, ann = [], []
    for name, x in lane_x.items():
        shapes.append(dict(type="line", x0=x, x1=x, y0=0.2, y1=y_end, line=dict(color="#bbb", width=2, dash="dot"),
                           layer="below"))
        ann.append(dict(x=x, y=0.5, text=f"<b>{t['lanes'][name]}</b>", showarrow=False,
                        font=dict(size=15, color="white"), bgcolor=C_LANES[name], borderpad=7))
    for i, a in enumerate(arrows, 1):
        y = -i + 0.25
        x0, x1 = lane_x[a["src"]], lane_x[a["dst"]]
        step = f"<b>{a['step']}</b> " if a["step"] else ""
        if x0 == x1:  # work inside one participant: an activation bar and a note in the free gap beside it
            side = _NOTE_SIDE[a["src"]]
            shapes.append(dict(type="rect", x0=x0 - 0.02, x1=x0 + 0.02, y0=y - 0.38, y1=y + 0.38,
                               fillcolor=C_LANES[a["src"]], line=dict(width=0)))
            ann.append(dict(x=x0 + side * 0.06, y=y, text=step + _wrap(a["label"], cols), showarrow=False,
                            xanchor="left" if side > 0 else "right", align="left", font=dict(size=13),
                            bgcolor="#fff8e6", bordercolor=C_LANES[a["src"]], borderpad=4))
            continue
        ann.append(dict(x=x1, y=y - 0.18, ax=x0, ay=y - 0.18, xref="x", yref="y", axref="x", ayref="y", text="",
                        showarrow=True, arrowhead=2, arrowsize=1.3, arrowwidth=2, arrowcolor=C_LANES[a["src"]]))
        # the label sits in one gap between neighbouring lifelines (the one next to the farther participant),
        # so no lifeline runs through its text
        right = max(x0, x1)
        ann.append(dict(x=right - 0.5, y=y - 0.1, text=step + _wrap(a["label"], cols),
                        showarrow=False, xanchor="center", yanchor="bottom", align="center", font=dict(size=13),
                        bgcolor="rgba(255,255,255,0.92)"))
    layout = _base_layout(t["seq_title"], width, height, shapes=shapes, annotations=ann, showlegend=False,
                          xaxis=dict(visible=False, range=[-0.45, 3.45], fixedrange=True),
                          yaxis=dict(visible=False, range=[y_end - 0.1, 0.85], fixedrange=True))
    layout["margin"] = dict(l=10, r=10, t=60, b=10)
    return go.Figure(layout=layout)


# ---------------------------------------------------------------- fig 14-11: MCP architecture
def mcp_architecture() -> dict:
    """The facts fig 14-11 shows, read from the installed SDK and the kit's tool registry.

    The SDK version and protocol revisions are recorded here for provenance only; the figure does not print them
    (§14.5.6 advises against memorising revision numbers)."""
    import mcp.types as mt
    from importlib.metadata import version

    from .tools import TOOLS

    tool = mt.Tool(name="x", description="", input_schema={"type": "object"}).model_dump(by_alias=True)
    result = mt.CallToolResult(content=[], is_error=False).model_dump(by_alias=True)
    call = mt.CallToolRequestParams(name="x", arguments={}).model_dump(by_alias=True)
    return dict(sdk=f"mcp {version('mcp')}", jsonrpc=mt.JSONRPC_VERSION,
                latest_protocol=mt.LATEST_PROTOCOL_VERSION,
                tool_fields=[k for k in ("name", "description", "inputSchema") if k in tool],
                call_fields=[k for k in ("name", "arguments") if k in call],
                result_fields=[k for k in ("content", "isError") if k in result],
                kit_tools=sorted(TOOLS), transports=["stdio", "Streamable HTTP"])


def mcp_figure(facts: dict, lang: str = "en", width: int = 1100, height: int = 520) -> go.Figure:
    """Host (with the host loop and one MCP client per server), the engine beside it as in fig 14-9, servers."""
    zh = lang == "zh"
    shapes, ann = [], []

    def box(x0, y0, x1, y1, color, text, fill="white", size=14):
        shapes.append(dict(type="rect", x0=x0, y0=y0, x1=x1, y1=y1, line=dict(color=color, width=2),
                           fillcolor=fill, layer="below"))
        if text:
            ann.append(dict(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=text, showarrow=False, font=dict(size=size)))

    def arrow(x0, y, x1, color, label, above=True):
        ann.append(dict(x=x1, y=y, ax=x0, ay=y, xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True,
                        arrowhead=2, arrowwidth=2, arrowcolor=color))
        ann.append(dict(x=(x0 + x1) / 2, y=y + (1.2 if above else -1.2), text=label, showarrow=False,
                        font=dict(size=13), yanchor="bottom" if above else "top"))

    # the engine stands apart from the host, as in fig 14-9: the host sends prompts, the engine returns tokens
    box(1, 64, 17, 86, C_LANES["engine"], ("推理引擎 / 模型<br>只负责生成词元" if zh else
                                           "engine / model<br>only generates tokens"), fill="#fdf1e6")
    box(29, 4, 58, 95, C_LANES["host"], "", fill="#f3f9f1")
    ann.append(dict(x=30.5, y=93.5, xanchor="left", yanchor="top", showarrow=False, font=dict(size=15),
                    text="<b>" + ("宿主（LLM 应用）" if zh else "Host (the LLM application)") + "</b>"))
    box(32, 64, 55, 84, C_LANES["host"], ("宿主循环<br>渲染提示 · 解析调用 · 执行" if zh else
                                          "host loop<br>render · parse calls · execute"))
    arrow(31.5, 79, 17.5, C_LANES["host"], "提示<br>（含工具 schema）" if zh else "prompt<br>(tool schemas)")
    arrow(17.5, 70, 31.5, C_LANES["engine"], "生成的文本" if zh else "generated text", above=False)
    ys = [(42, 56), (10, 24)]
    names = facts["kit_tools"]
    half = (len(names) + 1) // 2
    servers = [("MCP 服务器：本套件的工具" if zh else "MCP server: the kit's tools") + "<br><i>" +
               ", ".join(names[:half]) + ",<br>" + ", ".join(names[half:]) + "</i>",
               ("MCP 服务器：远程服务" if zh else "MCP server: a remote service") +
               "<br><i>tools · resources · prompts</i>"]
    req = ("tools/list<br>tools/call {" + ", ".join(facts["call_fields"]) + "}")
    resp = ("{" + ", ".join(facts["tool_fields"]) + "}<br>{" + ", ".join(facts["result_fields"]) + "}")
    for (y0, y1), label, transport in zip(ys, servers, facts["transports"]):
        box(32, y0, 55, y1, C_LANES["host"], ("MCP 客户端" if zh else "MCP client") + f"<br>{transport}")
        box(76, y0 - 2, 99, y1 + 2, C_LANES["tool"], label, fill="#f7f1f6", size=13)
        arrow(55.5, y1 - 3, 75.5, C_LANES["host"], req)
        arrow(75.5, y0 + 3, 55.5, C_LANES["tool"], resp, above=False)
    shapes.append(dict(type="line", x0=43.5, y0=64, x1=43.5, y1=56, line=dict(color="#999", width=2)))
    shapes.append(dict(type="line", x0=30.8, y0=74, x1=30.8, y1=17, line=dict(color="#999", width=2)))
    for y in (74, 17):
        shapes.append(dict(type="line", x0=30.8, y0=y, x1=32, y1=y, line=dict(color="#999", width=2)))
    ann.append(dict(x=87.5, y=94, showarrow=False, font=dict(size=13, color="#444"), yanchor="top",
                    text=(f"JSON-RPC {facts['jsonrpc']}<br>" + ("传输：" if zh else "transports: ") +
                          ("、" if zh else ", ").join(facts["transports"]))))
    layout = _base_layout(L[lang]["mcp_title"], width, height, shapes=shapes, annotations=ann, showlegend=False,
                          xaxis=dict(visible=False, range=[0, 100], fixedrange=True),
                          yaxis=dict(visible=False, range=[2, 97], fixedrange=True))
    layout["margin"] = dict(l=10, r=10, t=55, b=5)
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


# The SVGs carry their own font: the text's characters, subset from Noto Sans CJK SC (regular and bold), are
# embedded as base64 OpenType in an @font-face rule, so the figures read the same where the font is not installed.
FONT_DIRS = ("/usr/share/fonts/opentype/noto", "/usr/share/fonts/noto-cjk", "/usr/share/fonts/opentype/noto-cjk")
FONT_FILES = {400: "NotoSansCJK-Regular.ttc", 700: "NotoSansCJK-Bold.ttc"}
FONT_FACE = "Noto Sans CJK SC"
EMBEDDED_FAMILY = "FigureText"


def _font_file(weight: int) -> Path | None:
    for d in FONT_DIRS:
        p = Path(d) / FONT_FILES[weight]
        if p.exists():
            return p
    return None


def svg_text(svg: str) -> str:
    """Every character drawn as text in a plotly SVG (tags stripped, entities decoded)."""
    import html

    bodies = re.findall(r"<text\b[^>]*>(.*?)</text>", svg, flags=re.S)
    return html.unescape("".join(re.sub(r"<[^>]+>", "", b) for b in bodies))


def embed_font(svg: str) -> str:
    """Subset the CJK font to the characters ``svg`` draws and embed it; text then names the embedded family first.

    Raises ``RuntimeError`` if the font files are missing (``make system`` installs fonts-noto-cjk)."""
    import base64
    import logging

    from fontTools import subset
    from fontTools.ttLib import TTCollection

    logging.getLogger("fontTools").setLevel(logging.WARNING)  # it logs every table it subsets at INFO

    chars = "".join(sorted(set(svg_text(svg)) - {"\n"}))
    faces = []
    for weight in FONT_FILES:
        path = _font_file(weight)
        if path is None:
            raise RuntimeError(f"font {FONT_FILES[weight]} not found in {FONT_DIRS}: run `make system`")
        font = next(f for f in TTCollection(str(path)).fonts if f["name"].getDebugName(1) == FONT_FACE)
        opts = subset.Options()
        opts.name_IDs, opts.notdef_outline, opts.layout_features = ["*"], True, ["kern", "liga", "locl"]
        sub = subset.Subsetter(opts)
        sub.populate(text=chars)
        sub.subset(font)
        buf = io.BytesIO()
        font.save(buf)
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        faces.append(f"@font-face{{font-family:'{EMBEDDED_FAMILY}';font-weight:{weight};"
                     f"src:url(data:font/otf;base64,{data}) format('opentype');}}")
    style = "<style>" + "".join(faces) + "</style>"
    svg = svg.replace("font-family: 'Noto Sans CJK SC'", f"font-family: '{EMBEDDED_FAMILY}', 'Noto Sans CJK SC'")
    svg = svg.replace('font-family="Noto Sans CJK SC', f'font-family="{EMBEDDED_FAMILY}, Noto Sans CJK SC')
    head = re.search(r"<svg\b[^>]*>", svg)
    return svg[:head.end()] + style + svg[head.end():]


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
        for f in files:
            if f.suffix == ".svg":
                f.write_text(embed_font(f.read_text(encoding="utf-8")), encoding="utf-8")
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
