"""The book's charts and tables set for print: fig 14-10, table 14-11, the p^k curves, and the stdio/HTTP table.

What it does
- ``growth_print_figure``: fig 14-10 as two stacked panels on the print canvas (``toolkit.book.typeset``): the
  prefix each turn (served from the cache / computed) with turn 1's cold start shown, and the cumulative prefill
  without a cache, with a warm cache and from a cold start. One colour means one thing in both panels: grey is
  served from the cache, orange is computed with a cache, red is computed without one. T, Δ and R are defined in
  the figure itself.
- ``table_print_figure``: table 14-11 as an image (``p`` and ``k`` italic, columns headed ``k = 10``), and
  ``table_markdown`` / ``table_latex`` the same rows typeset as text.
- ``pk_curve_figure``: p^k against k for the book's three p, with table 14-11's cells marked, and the inverse
  question of §14.5.4 (the p that keeps 20 steps at 0.9).
- ``transport_rows`` / ``transport_figure``: "Tool Use" §3.2's stdio vs Streamable HTTP table, the facts read
  from the installed ``mcp`` SDK where it encodes them (entry points, the session header, the media types).

What it leaves out
- Titles: captions live outside the images (``toolkit.book.figures`` writes them beside the data).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from toolkit import cost
from toolkit.book.typeset import CANVAS_PX, FONT_PX, SANS, rich_lines
from toolkit.plots import C_CACHE, C_COMPUTE, C_NOCACHE

FONT = f"{SANS}, sans-serif"


def _layout(width: int, height: int, **kw) -> dict:
    return dict(
        width=width,
        height=height,
        font=dict(family=FONT, size=FONT_PX, color="#222"),
        template="plotly_white",
        margin=dict(l=70, r=16, t=16, b=16),
        **kw,
    )


T_ = {
    "zh": dict(
        setting="T = {T:,}：工具定义的词元数　Δ = {d:,}：每轮新增词元　R = {R}：轮数",
        per_turn="每轮预填充的前缀（词元）",
        cumulative="累计预填充（词元）",
        turn="轮次 k",
        from_cache="前缀缓存命中（不重算）",
        computed="有缓存时本轮计算",
        cold="冷启动：第 1 轮缓存为空，T 也要计算",
        no_cache="无缓存：每轮整段前缀都计算",
        warm="缓存全命中：只算增量",
        cold_line="冷启动：增量 + 第 1 轮的 T",
        ratio="{a:,} / {b:,} = {r:.1f}×<br>T/Δ + (R+1)/2 = {c:.1f} + {h:.1f}<br>冷启动：{a:,} / {bc:,} = {rc:.1f}×",
        p_col="单步成功率 <i>p</i>",
        k_col="<i>k</i> = {k}",
        steps="串行步数 <i>k</i>",
        overall="整体成功率 <i>p</i><sup><i>k</i></sup>",
        inverse="<i>p</i> = {p:.4f}：20 步仍有 0.9",
    ),
    "en": dict(
        setting="T = {T:,}: tool-definition tokens   Δ = {d:,}: new tokens per turn   R = {R}: turns",
        per_turn="Prefix prefilled per turn (tokens)",
        cumulative="Cumulative prefill (tokens)",
        turn="turn k",
        from_cache="served from the prefix cache",
        computed="computed this turn, with a cache",
        cold="cold start: turn 1's cache is empty, T is computed too",
        no_cache="no cache: the whole prefix every turn",
        warm="full cache hit: only the new tokens",
        cold_line="cold start: the new tokens + T on turn 1",
        ratio="{a:,} / {b:,} = {r:.1f}×<br>T/Δ + (R+1)/2 = {c:.1f} + {h:.1f}<br>cold start: {a:,} / {bc:,} = {rc:.1f}×",
        p_col="per-step <i>p</i>",
        k_col="<i>k</i> = {k}",
        steps="serial steps <i>k</i>",
        overall="overall success <i>p</i><sup><i>k</i></sup>",
        inverse="<i>p</i> = {p:.4f}: 20 steps still at 0.9",
    ),
}


# ---------------------------------------------------------------- fig 14-10
def growth_print_figure(T: int = 10_000, delta: int = 2048, R: int = 30, lang: str = "en") -> go.Figure:
    """Fig 14-10 for print (see the module docstring); warm and cold runs both come from ``cost.growth``."""
    t = T_[lang]
    warm, cold = cost.growth(T, delta, R, warm=True), cost.growth(T, delta, R, warm=False)
    fig = make_subplots(
        rows=2, cols=1, vertical_spacing=0.13, subplot_titles=(t["per_turn"], t["cumulative"]), row_heights=[0.5, 0.5]
    )
    cached = [c if k > 1 else 0 for k, c in zip(warm.turns, warm.from_cache)]
    fig.add_trace(go.Bar(name=t["from_cache"], x=warm.turns, y=cached, marker_color=C_CACHE, legend="legend"), 1, 1)
    fig.add_trace(
        go.Bar(
            name=t["cold"],
            x=[1],
            y=[warm.from_cache[0]],
            marker=dict(color=C_CACHE, pattern=dict(shape="/", fgcolor=C_COMPUTE, size=6, solidity=0.4)),
            legend="legend",
        ),
        1,
        1,
    )
    fig.add_trace(
        go.Bar(name=t["computed"], x=warm.turns, y=warm.computed, marker_color=C_COMPUTE, legend="legend"), 1, 1
    )
    line = lambda name, y, color, dash, lg: go.Scatter(  # noqa: E731
        name=name, x=warm.turns, y=y, mode="lines", line=dict(color=color, width=2.5, dash=dash), legend=lg
    )
    fig.add_trace(line(t["no_cache"], warm.cum_no_cache, C_NOCACHE, "solid", "legend2"), 2, 1)
    fig.add_trace(line(t["cold_line"], cold.cum_cache, C_COMPUTE, "dash", "legend2"), 2, 1)
    fig.add_trace(line(t["warm"], warm.cum_cache, C_COMPUTE, "solid", "legend2"), 2, 1)
    legend = dict(
        orientation="v", xanchor="left", x=0.02, yanchor="top", bgcolor="rgba(255,255,255,0.9)", traceorder="normal"
    )
    fig.update_layout(
        **_layout(CANVAS_PX, 860),
        barmode="stack",
        bargap=0.15,
        legend=dict(legend, y=0.975),
        legend2=dict(legend, y=0.42),
    )
    fig.update_layout(margin=dict(l=76, r=16, t=72, b=50))
    fig.update_xaxes(title_text=t["turn"], title_standoff=4, dtick=5)
    fig.update_yaxes(tickformat=",", rangemode="tozero")
    fig.update_yaxes(range=[0, (T + delta * R) * 1.75], row=1, col=1)  # room for the legend above the bars
    fig.update_yaxes(range=[0, warm.total_no_cache * 1.05], row=2, col=1)
    fig.add_annotation(
        name="setting",
        xref="paper",
        yref="paper",
        x=0,
        y=1.0,
        yshift=60,
        xanchor="left",
        yanchor="top",
        showarrow=False,
        text=t["setting"].format(T=T, d=delta, R=R),
    )
    fig.add_annotation(
        name="ratio",
        xref="x2 domain",
        yref="y2 domain",
        x=0.02,
        y=0.36,  # left, above the no-cache curve's first dozen turns and under the legend: it covers no line
        xanchor="left",
        yanchor="bottom",
        align="left",
        showarrow=False,
        text=t["ratio"].format(
            a=warm.total_no_cache,
            b=warm.total_cache,
            r=warm.ratio,
            c=T / delta,
            h=(R + 1) / 2,
            bc=cold.total_cache,
            rc=cold.ratio,
        ),
        bgcolor="rgba(255,255,255,0.9)",
        bordercolor="#999",
        borderwidth=1,
        borderpad=6,
    )
    return fig


# ---------------------------------------------------------------- table 14-11
def table_rows() -> list[dict]:
    return cost.success_table()


def table_print_figure(rows: list[dict], ks=cost.BOOK_KS, lang: str = "en") -> go.Figure:
    t = T_[lang]
    header = [t["p_col"]] + [t["k_col"].format(k=k) for k in ks]
    cells = [[f"{r['p']:.2f}" for r in rows]] + [[f"{r[k]:.3f}" for r in rows] for k in ks]
    fig = go.Figure(
        go.Table(
            header=dict(values=header, fill_color="#e8ecf1", font=dict(size=FONT_PX + 1), height=32),
            cells=dict(values=cells, font=dict(size=FONT_PX + 1), height=30, fill_color="white", line_color="#ccc"),
            columnwidth=[1.4] + [1] * len(ks),
        )
    )
    fig.update_layout(**_layout(CANVAS_PX, 32 + 30 * len(rows) + 16))
    fig.update_layout(margin=dict(l=8, r=8, t=8, b=0))
    return fig


def table_markdown(rows: list[dict], ks=cost.BOOK_KS, lang: str = "en") -> str:
    head = ("单步成功率 *p*" if lang == "zh" else "per-step *p*", *(f"*k* = {k}" for k in ks))
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    lines += ["| " + " | ".join([f"{r['p']:.2f}", *(f"{r[k]:.3f}" for k in ks)]) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def table_latex(rows: list[dict], ks=cost.BOOK_KS, lang: str = "en") -> str:
    """A ``booktabs`` tabular (needs ``\\usepackage{booktabs}``); the caption is the book's, not set here."""
    head = ("单步成功率 $p$" if lang == "zh" else "per-step $p$", *(f"$k = {k}$" for k in ks))
    lines = [
        "\\begin{tabular}{" + "r" * len(head) + "}",
        "\\toprule",
        " & ".join(head) + " \\\\",
        "\\midrule",
        *(" & ".join([f"{r['p']:.2f}", *(f"{r[k]:.3f}" for k in ks)]) + " \\\\" for r in rows),
        "\\bottomrule",
        "\\end{tabular}",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the p^k curves
PK_COLORS = {0.99: "#59a14f", 0.95: "#4e79a7", 0.90: C_NOCACHE}


def pk_curve_figure(lang: str = "en", kmax: int = 60) -> go.Figure:
    """p^k for the book's three p (lines), table 14-11's nine cells (dots), and the p that holds 20 steps at 0.9."""
    t = T_[lang]
    ks = list(range(0, kmax + 1))
    data = []
    for p in cost.BOOK_PS:
        c = PK_COLORS[p]
        data.append(
            go.Scatter(
                name=f"p = {p:.2f}",
                x=ks,
                y=[cost.success(p, k) for k in ks],
                mode="lines",
                line=dict(color=c, width=2.5),
            )
        )
        data.append(
            go.Scatter(
                x=list(cost.BOOK_KS),
                y=[cost.success(p, k) for k in cost.BOOK_KS],
                mode="markers+text",
                marker=dict(color=c, size=8),
                text=[f"{cost.success(p, k):.3f}" for k in cost.BOOK_KS],
                # under the top curve (the dashed inverse runs just above it), over the others
                textposition="bottom left" if p == max(PK_COLORS) else "top right",
                textfont=dict(size=FONT_PX, color=c),
                showlegend=False,
            )
        )
    req = cost.required_p(0.9, 20)
    data.append(
        go.Scatter(
            name=t["inverse"].format(p=req),
            x=ks,
            y=[cost.success(req, k) for k in ks],
            mode="lines",
            line=dict(color="#333", width=1.5, dash="dash"),
        )
    )
    data.append(
        go.Scatter(
            x=[20], y=[0.9], mode="markers", marker=dict(color="#333", size=9, symbol="diamond"), showlegend=False
        )
    )
    fig = go.Figure(data=data)
    fig.update_layout(
        **_layout(CANVAS_PX, 440),
        # lower right, between the p = 0.99 curve and the two lower ones: no line runs through it
        legend=dict(x=0.99, xanchor="right", y=0.47, yanchor="top", bgcolor="rgba(255,255,255,0.9)"),
        xaxis=dict(title=dict(text=t["steps"], standoff=4), range=[0, kmax + 2], dtick=10),
        yaxis=dict(title=t["overall"], range=[0, 1.04], dtick=0.2),
    )
    fig.update_layout(margin=dict(l=70, r=16, t=12, b=50))
    return fig


# ---------------------------------------------------------------- "Tool Use" §3.2: stdio vs Streamable HTTP
def transport_rows(lang: str = "en") -> list[dict]:
    """The two standard transports side by side; what the SDK encodes is read from it, the rest is the spec's."""
    from mcp.client.stdio import StdioServerParameters  # lazy: the SDK loads only for this table
    from mcp.client.streamable_http import MCP_SESSION_ID  # lazy: as above
    from mcp.server.stdio import stdio_server  # lazy: as above
    from mcp.server.streamable_http import CONTENT_TYPE_JSON, CONTENT_TYPE_SSE  # lazy: as above

    launch = "`" + StdioServerParameters.__name__ + "(command, args)`"
    serve = "`" + stdio_server.__name__ + "()`"
    zh = lang == "zh"
    rows = [
        (
            "部署" if zh else "where",
            "本机子进程" if zh else "a local subprocess",
            "远程或本机的 HTTP 服务" if zh else "a remote or local HTTP service",
        ),
        (
            "谁启动服务器" if zh else "who starts the server",
            f"宿主启动它：{launch}" if zh else f"the host launches it: {launch}",
            "服务器独立运行，客户端按 URL 连接" if zh else "it runs on its own; clients connect to a URL",
        ),
        (
            "消息怎样传" if zh else "how messages travel",
            ("stdin/stdout 上每行一条 JSON-RPC 消息" if zh else "one JSON-RPC message per line on stdin/stdout")
            + f"（{serve}）",
            ("一个端点上的 HTTP POST；回复是 " if zh else "HTTP POST to one endpoint; replies as ")
            + f"`{CONTENT_TYPE_JSON}`"
            + (" 或 " if zh else " or ")
            + f"`{CONTENT_TYPE_SSE}`",
        ),
        (
            "会话" if zh else "session",
            "进程的生命期就是会话" if zh else "the process's lifetime is the session",
            (f"`{MCP_SESSION_ID}` 头标识会话" if zh else f"the `{MCP_SESSION_ID}` header names the session"),
        ),
        (
            "客户端数" if zh else "clients",
            "一个（启动它的宿主）" if zh else "one (the host that launched it)",
            "多个" if zh else "many",
        ),
        (
            "认证" if zh else "authentication",
            "沿用进程的环境与权限" if zh else "inherits the process's environment and rights",
            "HTTP 层负责（规范定义了 OAuth 授权）"
            if zh
            else "at the HTTP layer (the spec defines OAuth authorization)",
        ),
    ]
    head = ("", "stdio", "Streamable HTTP")
    return [dict(zip(("aspect", "stdio", "http"), head))] + [dict(zip(("aspect", "stdio", "http"), r)) for r in rows]


def transport_figure(rows: list[dict], lang: str = "en") -> go.Figure:
    """The stdio / Streamable HTTP table drawn as shapes (plotly tables cannot mix a code face into a cell)."""
    cols = [(8, 150), (158, 420), (428, 704)]  # x ranges in px of the three columns
    shapes, ann, y = [], [], 0.0
    for i, row in enumerate(rows):
        cells = [rich_lines(row[key], hi - lo - 12) for key, (lo, hi) in zip(("aspect", "stdio", "http"), cols)]
        h = max(c[0].count("<br>") + 1 for c in cells) * FONT_PX * 1.3 + 12
        if i == 0:
            shapes.append(dict(type="rect", x0=0, x1=712, y0=y - h, y1=y, fillcolor="#e8ecf1", line=dict(width=0)))
        for (text, _), (lo, _hi) in zip(cells, cols):
            ann.append(
                dict(
                    x=lo + 4,
                    y=y - 6,
                    text=f"<b>{text}</b>" if i == 0 or lo == cols[0][0] else text,
                    showarrow=False,
                    xanchor="left",
                    yanchor="top",
                    align="left",
                )
            )
        y -= h
        shapes.append(dict(type="line", x0=0, x1=712, y0=y, y1=y, line=dict(color="#bbb", width=1)))
    layout = _layout(
        CANVAS_PX,
        int(-y) + 8,
        shapes=shapes,
        annotations=ann,
        showlegend=False,
        xaxis=dict(visible=False, range=[0, 712], fixedrange=True),
        yaxis=dict(visible=False, range=[y - 4, 4], fixedrange=True),
    )
    layout["margin"] = dict(l=4, r=4, t=0, b=0)
    return go.Figure(layout=layout)


def rows_markdown(rows: list[dict]) -> str:
    """The transport table as Markdown (code spans kept)."""
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    head, *body = rows
    lines = ["| " + " | ".join(esc(v) for v in head.values()) + " |", "|---|---|---|"]
    lines += ["| " + " | ".join(esc(v) for v in r.values()) + " |" for r in body]
    return "\n".join(lines) + "\n"
