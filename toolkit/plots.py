"""The kit's plotly figures of the loop arithmetic, shared by the widgets and the book.

What it does
- fig 14-10 (context growth per turn and cumulative prefill) and the p^k curves / table 14-11, each as a builder
  and an in-place updater (``update_context_growth``, ``update_decay``) that the slider widgets call; fixed sizes,
  colours and fonts (Noto Sans CJK), labels in Chinese and English.

What it leaves out
- Writing files (``toolkit.book.figures``) and widgets (``toolkit.widgets``).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from toolkit import cost


def _cols(text: str) -> int:
    return sum(2 if ord(c) >= 0x2E80 else 1 for c in text)  # CJK characters are about twice as wide


def wrap(text: str, width: int = 52) -> str:
    """Break a long title into lines of at most ``width`` columns (plotly never wraps text itself), preferring a
    break before an opening parenthesis, then at a space; an existing ``<br>`` is kept and each of its lines is
    wrapped in turn."""
    if "<br>" in text:
        return "<br>".join(wrap(line, width) for line in text.split("<br>"))
    if _cols(text) <= width:
        return text
    fit = max(n for n in range(len(text) + 1) if _cols(text[:n]) <= width)
    cuts = [text.rfind(" (", 0, fit), text.rfind("（", 0, fit)]
    cut = max(cuts) if max(cuts) > fit // 3 else text.rfind(" ", 0, fit)
    if cut <= 0:
        return text
    rest = text[cut:].lstrip(" ")
    return text[:cut] + "<br>" + wrap(rest, width)


def wrap_title(fig: go.Figure, width: int = 52) -> go.Figure:
    """Wrap the figure's title in place (see ``wrap``), so it fits a ~600-px plot in a 1,024-px window, and make the
    top margin tall enough for its lines (plotly's default 100 px holds about two: more overlapped the plot)."""
    if fig.layout.title.text:
        fig.layout.title.text = wrap(fig.layout.title.text, width)
        need = title_margin(fig.layout.title.text)
        if (fig.layout.margin.t or 100) < need:
            fig.update_layout(margin_t=need)
    return fig


def title_margin(title: str, line_px: int = 24, pad: int = 40) -> int:
    """The top margin, in px, that a title of ``title.count('<br>') + 1`` lines needs above the plot."""
    return pad + line_px * (title.count("<br>") + 1)


FONT = "Noto Sans CJK SC, Noto Sans, Arial, sans-serif"


# Fixed colours so regenerated figures look the same: cached = grey, computed = orange, no-cache = red.
C_CACHE, C_COMPUTE, C_NOCACHE, C_CACHED_LINE = "#9aa5b1", "#f28e2b", "#d62728", "#1f77b4"


C_LANES = {"user": "#4e79a7", "host": "#59a14f", "engine": "#f28e2b", "tool": "#b07aa1"}


L = {
    "zh": dict(
        growth_title="图 14-10 Agent 循环的上下文增长（T = {T:,}，Δ = {delta:,}，R = {R}）",
        per_turn="每轮预填充的前缀（词元）",
        cumulative="累计预填充（词元）",
        turn="轮次 k",
        from_cache="前缀缓存命中（不重算）",
        computed="本轮实际计算",
        tool_line="工具定义 T = {T:,}",
        cum_no_cache="无缓存：每轮从头预填充",
        cum_cache="缓存全命中：只算增量",
        ratio="{a:,} / {b:,} = {r:.1f}×<br>T/Δ + (R+1)/2 = {c:.2f} + {h:.1f}",
        ratio_cold="{a:,} / {b:,} = {r:.1f}×（冷启动：首轮也算 T）",
        decay_title="串行 k 步的整体成功率 p<sup>k</sup>",
        steps="步数 k",
        overall="整体成功率",
        table_title="表 14-11 串行多步任务的整体成功率 p<sup>k</sup>",
        p_col="单步成功率 p",
        k_col="{k} 步",
        seq_title="图 14-9 一次工具调用的完整往返：模型只负责生成，解析与执行都在宿主",
        lanes=dict(user="用户", host="宿主", engine="推理引擎 / 模型", tool="工具"),
        mcp_title="图 14-11 MCP 的客户端-服务器架构：宿主里每个客户端连一个服务器",
    ),
    "en": dict(
        growth_title="Fig 14-10 Context growth in an agent loop (T = {T:,}, Δ = {delta:,}, R = {R})",
        per_turn="Prefix prefilled per turn (tokens)",
        cumulative="Cumulative prefill (tokens)",
        turn="turn k",
        from_cache="served from the prefix cache",
        computed="computed this turn",
        tool_line="tool definitions T = {T:,}",
        cum_no_cache="no cache: whole prefix every turn",
        cum_cache="full cache hit: only the new tokens",
        ratio="{a:,} / {b:,} = {r:.1f}×<br>T/Δ + (R+1)/2 = {c:.2f} + {h:.1f}",
        ratio_cold="{a:,} / {b:,} = {r:.1f}× (cold: turn 1 also computes T)",
        decay_title="Overall success of k serial steps, p<sup>k</sup>",
        steps="steps k",
        overall="overall success",
        table_title="Table 14-11 Overall success p<sup>k</sup> of a serial multi-step task",
        p_col="per-step p",
        k_col="{k} steps",
        seq_title="Fig 14-9 One tool call, round trip: the model only generates; the host parses and executes",
        lanes=dict(user="user", host="host", engine="engine / model", tool="tool"),
        mcp_title="Fig 14-11 MCP client–server architecture: one client in the host per server",
    ),
}


def _base_layout(title: str, width: int, height: int, **kw) -> dict:
    return dict(
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=18)),
        width=width,
        height=height,
        font=dict(family=FONT, size=13, color="#222"),
        template="plotly_white",
        margin=dict(l=70, r=30, t=80, b=60),
        **kw,
    )


def arrow(x0, y0, x1, y1, color: str, **style) -> dict:
    """A plotly annotation drawing an arrow from (x0, y0) to (x1, y1) in data coordinates (the sequence diagrams)."""
    return dict(
        x=x1,
        y=y1,
        ax=x0,
        ay=y0,
        xref="x",
        yref="y",
        axref="x",
        ayref="y",
        text="",
        showarrow=True,
        arrowhead=2,
        **style,
        arrowwidth=2,
        arrowcolor=color,
    )


def drawing(title: str, width: int, height: int, shapes, annotations, xrange, yrange, margin: dict) -> go.Figure:
    """A figure of only shapes and annotations on hidden, fixed axes (the sequence and architecture diagrams)."""
    layout = _base_layout(
        title,
        width,
        height,
        shapes=shapes,
        annotations=annotations,
        showlegend=False,
        xaxis=dict(visible=False, range=xrange, fixedrange=True),
        yaxis=dict(visible=False, range=yrange, fixedrange=True),
    )
    layout["margin"] = margin
    return go.Figure(layout=layout)


def _line(name: str, x, y, color: str, legend: str, **kw) -> go.Scatter:
    return go.Scatter(name=name, x=x, y=y, mode="lines", line=dict(color=color, width=3), legend=legend, **kw)


# ---------------------------------------------------------------- fig 14-10
def context_growth_figure(g: cost.Growth, lang: str = "en", width: int = 1100, height: int = 500) -> go.Figure:
    """Left: per-turn prefix stacked as cached + computed, with the tool block's size as a dashed line; right:
    cumulative prefill with and without cache. Each panel has its own legend, under it; nothing is drawn over
    the bars. Trace order (0 cached, 1 computed, 2 no-cache total, 3 cached total, 4 tool line) is what
    ``update_context_growth`` relies on."""
    t = L[lang]

    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.56, 0.44],
        horizontal_spacing=0.1,
        subplot_titles=(t["per_turn"], t["cumulative"]),
    )
    fig.add_trace(go.Bar(name=t["from_cache"], x=g.turns, y=g.from_cache, marker_color=C_CACHE, legend="legend"), 1, 1)
    fig.add_trace(go.Bar(name=t["computed"], x=g.turns, y=g.computed, marker_color=C_COMPUTE, legend="legend"), 1, 1)
    fig.add_trace(_line(t["cum_no_cache"], g.turns, g.cum_no_cache, C_NOCACHE, "legend2"), 1, 2)
    fig.add_trace(_line(t["cum_cache"], g.turns, g.cum_cache, C_CACHED_LINE, "legend2"), 1, 2)
    fig.add_trace(
        go.Scatter(
            name=t["tool_line"].format(T=g.T),
            x=[0.5, g.R + 0.5],
            y=[g.T, g.T],
            mode="lines",
            line=dict(color="#333", dash="dash", width=1.5),
            legend="legend",
            visible=g.T > 0,
            hoverinfo="skip",
        ),
        1,
        1,
    )
    # stacked entries under each panel: long labels (en) cannot run into the other panel's legend
    under = dict(orientation="v", yanchor="top", y=-0.17, xanchor="left", bgcolor="rgba(0,0,0,0)")
    fig.update_layout(
        **_base_layout(t["growth_title"].format(T=g.T, delta=g.delta, R=g.R), width, height),
        barmode="stack",
        bargap=0.15,
        legend=dict(under, x=0.0),
        legend2=dict(under, x=0.604),
    )
    fig.update_xaxes(title_text=t["turn"])
    fig.update_yaxes(tickformat=",", rangemode="tozero")
    fig.add_annotation(
        name="ratio",
        xref="x2 domain",
        yref="y2 domain",
        x=0.03,
        y=0.97,
        xanchor="left",
        yanchor="top",
        align="left",
        showarrow=False,
        text=_ratio_text(g, lang),
        bgcolor="rgba(255,255,255,0.85)",
        bordercolor="#999",
        borderwidth=1,
        font=dict(size=13),
    )
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
def decay_figure(
    p: float = 0.95, k: int = 20, ps=cost.BOOK_PS, kmax: int = 60, lang: str = "en", width: int = 900, height: int = 460
) -> go.Figure:
    """p^k against k for the book's three p plus a chosen ``p``, with the point (k, p^k) marked."""
    t = L[lang]
    ks = list(range(0, kmax + 1))
    data = [
        go.Scatter(
            name=f"p = {q}", x=ks, y=[cost.success(q, j) for j in ks], mode="lines", line=dict(width=1.5, dash="dot")
        )
        for q in ps
    ]
    data.append(
        go.Scatter(
            name=f"p = {p:.3f}",
            x=ks,
            y=[cost.success(p, j) for j in ks],
            mode="lines",
            line=dict(width=3.5, color="#222"),
        )
    )
    data.append(
        go.Scatter(
            name=f"p^k = {cost.success(p, k):.3f}",
            x=[k],
            y=[cost.success(p, k)],
            mode="markers+text",
            text=[f"{cost.success(p, k):.3f}"],
            textposition="top right",
            marker=dict(size=11, color=C_NOCACHE),
        )
    )
    layout = _base_layout(
        t["decay_title"], width, height, xaxis=dict(title=t["steps"]), yaxis=dict(title=t["overall"], range=[0, 1.02])
    )
    return go.Figure(data=data, layout=layout)


def update_decay(fig, p: float, k: int, kmax: int = 60) -> None:
    ks = list(range(0, kmax + 1))
    with fig.batch_update():
        fig.data[-2].update(name=f"p = {p:.3f}", x=ks, y=[cost.success(p, j) for j in ks])
        fig.data[-1].update(
            name=f"p^k = {cost.success(p, k):.3f}", x=[k], y=[cost.success(p, k)], text=[f"{cost.success(p, k):.3f}"]
        )


def table_figure(rows: list[dict], ks, lang: str = "en", width: int = 640, height: int = 230) -> go.Figure:
    t = L[lang]
    header = [t["p_col"]] + [t["k_col"].format(k=k) for k in ks]
    cells = [[f"{r['p']:.2f}" for r in rows]] + [[f"{r[k]:.3f}" for r in rows] for k in ks]
    fig = go.Figure(
        go.Table(
            header=dict(values=header, fill_color="#e8ecf1", font=dict(size=15), height=34),
            cells=dict(values=cells, font=dict(size=15), height=32, fill_color="white", line_color="#ccc"),
            columnwidth=[1.4] + [1] * len(ks),
        )
    )
    fig.update_layout(**_base_layout(t["table_title"], width, height))
    fig.update_layout(margin=dict(l=20, r=20, t=60, b=10))
    return fig
