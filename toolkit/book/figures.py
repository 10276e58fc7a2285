"""The book's figures, rebuilt from data: ``python -m toolkit figures --out figures [--lang zh|en|both]``.

What it does
- fig 14-9: the round trip as a sequence diagram, drawn from a trace the host loop recorded
  (``toolkit.book.diagrams``); fig 14-10: context growth, warm and cold (``toolkit.book.charts``); fig 14-11:
  MCP's host / client / server split with ``initialize``, ``tools/list`` and ``tools/call``
  (``toolkit.book.mcp_diagram``); table 14-11 as an image and typeset as Markdown and LaTeX; the p^k curves;
  and for "Tool Use" §3.2 the three phases of one recorded MCP session and the stdio / Streamable HTTP table.
- Each figure is written as SVG, PNG (300 dpi at the 130 mm text width) and PDF in Chinese (``.zh``) and English
  (``.en``), with its data and caption as JSON beside it (captions are not drawn into the images; all of them are
  also in ``captions.md``). Data files carry no timings or dates: two runs give byte-identical data.
- Image export runs in a bounded child process (``toolkit.book.export``): past ``timeout`` seconds it is stopped
  with a one-line error, after the data files are written.

What it leaves out
- PDFs/PNGs are not byte-stable (chromium stamps them), only the data files are.
- Any figure of the chapters other than these.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path

import plotly.graph_objects as go

from toolkit import cost
from toolkit.book import charts
from toolkit.book.claims import write_markdown
from toolkit.book.diagrams import arrow_rows, round_trip_figure, round_trip_trace
from toolkit.book.export import export
from toolkit.book.fonts import embed_font, font_style, svg_text
from toolkit.book.mcp_diagram import mcp_architecture, mcp_figure, mcp_sequence_figure, mcp_session_trace
from toolkit.book.typeset import CANVAS_PX, PRINT_MM

CAPTIONS = {
    "fig14-9_round_trip": dict(
        zh="图 14-9 一次工具调用的完整往返：模型只负责生成，解析与执行都在宿主",
        en="Fig 14-9 One tool call, round trip: the model only generates; the host parses and executes",
    ),
    "fig14-10_context_growth": dict(
        zh="图 14-10 Agent 循环里上下文怎样逐轮变长，前缀缓存省掉了哪一块（T = 1 万词元，Δ = 2048，R = 30）",
        en="Fig 14-10 How the context grows turn by turn in an agent loop, and what the prefix cache saves "
        "(T = 10,000 tokens, Δ = 2,048, R = 30)",
    ),
    "fig14-11_mcp": dict(
        zh="图 14-11 MCP 的客户端-服务器架构：宿主里每个客户端连一个服务器",
        en="Fig 14-11 MCP's client–server architecture: one client in the host per server",
    ),
    "table14-11_success": dict(
        zh="表 14-11 串行多步任务的整体成功率 p^k", en="Table 14-11 Overall success p^k of a serial multi-step task"
    ),
    "pk_curve": dict(
        zh="串行 k 步的整体成功率 p^k：表 14-11 的九个格子是三条曲线上的点；虚线是 20 步仍保持 0.9 所需的 p",
        en="Overall success p^k of k serial steps: table 14-11's nine cells are points on three curves; the "
        "dashed line is the p that keeps 20 steps at 0.9",
    ),
    "tooluse3-2_mcp_phases": dict(
        zh="Tool Use §3.2 MCP 的三个阶段：一次真实的 stdio 会话（本套件的服务器）记录下来的消息",
        en="Tool Use §3.2 MCP's three phases: the messages of one real stdio session with the kit's server",
    ),
    "tooluse3-2_transports": dict(
        zh="Tool Use §3.2 两种标准传输：stdio 与 Streamable HTTP",
        en="Tool Use §3.2 The two standard transports: stdio and Streamable HTTP",
    ),
}


def png_scale(dpi: int = 300) -> float:
    """PNG scale so the canvas prints at ``dpi`` across the book's text width."""
    return round(dpi * PRINT_MM / 25.4 / CANVAS_PX, 3)


# ---------------------------------------------------------------- writing
def _dump_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _dump_csv(path: Path, rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue(), encoding="utf-8")


def _dump_figure_data(out: Path, stem: str, **data) -> None:
    _dump_json(out / f"{stem}.json", dict(caption=CAPTIONS[stem], **data))


def build_static(out: Path, langs=("zh", "en")) -> list[tuple[go.Figure, Path]]:
    """fig 14-10, table 14-11 and the p^k curves (pure arithmetic): write their data, return (figure, stem) pairs."""
    out.mkdir(parents=True, exist_ok=True)
    g, cold = cost.growth(10_000, 2048, 30), cost.growth(10_000, 2048, 30, warm=False)
    _dump_figure_data(out, "fig14-10_context_growth", summary=g.summary(), cold=cold.summary(), turns=g.rows())
    _dump_csv(out / "fig14-10_context_growth.csv", g.rows())
    rows = cost.success_table()
    table_rows = [
        {
            "p": r["p"],
            **{f"k={k}": round(r[k], 6) for k in cost.BOOK_KS},
            **{f"k={k} (3 d.p.)": f"{r[k]:.3f}" for k in cost.BOOK_KS},
        }
        for r in rows
    ]
    _dump_csv(out / "table14-11_success.csv", table_rows)
    p = cost.required_p(0.9, 20)
    _dump_figure_data(
        out,
        "table14-11_success",
        rows=table_rows,
        inverse=dict(P=0.9, k=20, required_p=p, steps_per_error=cost.steps_per_error(p)),
    )
    for lg in langs:
        (out / f"table14-11_success.{lg}.md").write_text(charts.table_markdown(rows, lang=lg), encoding="utf-8")
        (out / f"table14-11_success.{lg}.tex").write_text(charts.table_latex(rows, lang=lg), encoding="utf-8")
    curves = {f"{q:.2f}": [round(cost.success(q, k), 6) for k in range(61)] for q in cost.BOOK_PS}
    _dump_figure_data(out, "pk_curve", k=list(range(61)), curves=curves, required_p_20_steps_0_9=p)
    return [
        pair
        for lg in langs
        for pair in (
            (charts.growth_print_figure(lang=lg), out / f"fig14-10_context_growth.{lg}"),
            (charts.table_print_figure(rows, lang=lg), out / f"table14-11_success.{lg}"),
            (charts.pk_curve_figure(lg), out / f"pk_curve.{lg}"),
        )
    ]


def build_traced(out: Path, langs=("zh", "en")) -> list[tuple[go.Figure, Path]]:
    """fig 14-9 (recorded host-loop traces), fig 14-11 (the installed SDK), the MCP phases (a recorded stdio
    session) and the transport table: write their data, return (figure, stem) pairs."""
    out.mkdir(parents=True, exist_ok=True)
    traces = {lg: round_trip_trace(lg) for lg in langs}
    _dump_figure_data(out, "fig14-9_round_trip", traces=traces, events={lg: arrow_rows(traces[lg], lg) for lg in langs})
    facts = mcp_architecture()
    _dump_figure_data(out, "fig14-11_mcp", facts=facts)
    session = mcp_session_trace()
    _dump_figure_data(out, "tooluse3-2_mcp_phases", session=session)
    transports = {lg: charts.transport_rows(lg) for lg in langs}
    _dump_figure_data(out, "tooluse3-2_transports", rows=transports)
    for lg in langs:
        (out / f"tooluse3-2_transports.{lg}.md").write_text(charts.rows_markdown(transports[lg]), encoding="utf-8")
    return [
        pair
        for lg in langs
        for pair in (
            (round_trip_figure(traces[lg], lg), out / f"fig14-9_round_trip.{lg}"),
            (mcp_figure(facts, lg), out / f"fig14-11_mcp.{lg}"),
            (mcp_sequence_figure(session, lg), out / f"tooluse3-2_mcp_phases.{lg}"),
            (charts.transport_figure(transports[lg], lg), out / f"tooluse3-2_transports.{lg}"),
        )
    ]


def build_all(out: Path, langs=("zh", "en")) -> list[tuple[go.Figure, Path]]:
    """Write every data file (and captions.md) and return the (figure, stem) pairs still to be rendered."""
    todo = build_static(out, langs) + build_traced(out, langs)
    lines = ["# Captions", "", "The figures carry no titles; their captions, as the book sets them:", ""]
    for stem, cap in CAPTIONS.items():
        lines += [f"- `{stem}`", *(f"  - {lg}: {cap[lg]}" for lg in langs)]
    (out / "captions.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return todo


def _find_chromium() -> str | None:
    for p in (os.environ.get("BROWSER_PATH"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if p and Path(p).exists():
            return p
    return None


def render_images(todo, browser: str, formats=("svg", "png", "pdf"), timeout: float = 300.0) -> int:
    """Render figures to image files in one bounded export (``toolkit.book.export``); embed fonts in the SVGs."""
    jobs = [
        dict(
            figure=fig.to_json(),
            file=str(stem.with_suffix(stem.suffix + "." + fmt)),
            width=fig.layout.width,
            height=fig.layout.height,
            scale=png_scale() if fmt == "png" else 1,
        )
        for fig, stem in todo
        for fmt in formats
    ]
    n = export(jobs, browser, timeout)
    svgs = {Path(j["file"]): None for j in jobs if j["file"].endswith(".svg")}
    for f in svgs:
        svgs[f] = f.read_text(encoding="utf-8")
    for lang in {f.suffixes[-2] for f in svgs}:  # one font subset per language: subsetting CJK takes seconds
        group = {f: t for f, t in svgs.items() if f.suffixes[-2] == lang}
        style = font_style("".join(svg_text(t) for t in group.values()))
        for f, text in group.items():
            f.write_text(embed_font(text, style), encoding="utf-8")
    return n


def write_all(
    out: Path, langs=("zh", "en"), formats=("svg", "png", "pdf"), claims: bool = True, timeout: float = 300.0
) -> dict:
    """Everything ``make figures`` does: the data files first, then one bounded image export."""
    t0 = time.perf_counter()
    browser = _find_chromium()
    if formats and browser is None:
        raise RuntimeError("no chromium found: run `make system` (apt-get install chromium fonts-noto-cjk)")
    todo = build_all(out, langs)
    if claims:
        write_markdown(out / "claims.md")
    t_data = time.perf_counter() - t0
    n = render_images(todo, browser, formats, timeout) if formats else 0
    return dict(figures=len(todo), images=n, seconds=time.perf_counter() - t0, data_seconds=t_data)
