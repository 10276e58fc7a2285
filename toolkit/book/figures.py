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

import concurrent.futures as cf
import csv
import io
import json
import os
import time
import warnings
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from toolkit import cost
from toolkit.book.claims import write_markdown
from toolkit.book.diagrams import arrow_rows, round_trip_figure, round_trip_trace
from toolkit.book.fonts import embed_font
from toolkit.book.mcp_diagram import mcp_architecture, mcp_figure
from toolkit.plots import context_growth_figure, table_figure


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
    _dump_json(
        out / "table14-11_success.json",
        dict(rows=table_rows, inverse=dict(P=0.9, k=20, required_p=p, steps_per_error=cost.steps_per_error(p))),
    )
    return [
        pair
        for lg in langs
        for pair in (
            (context_growth_figure(g, lg), out / f"fig14-10_context_growth.{lg}"),
            (table_figure(rows, cost.BOOK_KS, lg), out / f"table14-11_success.{lg}"),
        )
    ]


def build_traced(out: Path, langs=("zh", "en")) -> list[tuple[go.Figure, Path]]:
    """fig 14-9 (from a recorded host-loop trace) and fig 14-11 (from the installed SDK): data + pairs."""
    out.mkdir(parents=True, exist_ok=True)
    trace = round_trip_trace()
    _dump_json(out / "fig14-9_round_trip.json", dict(trace=trace, arrows={lg: arrow_rows(trace, lg) for lg in langs}))
    facts = mcp_architecture()
    _dump_json(out / "fig14-11_mcp.json", facts)
    return [
        pair
        for lg in langs
        for pair in (
            (round_trip_figure(trace, lg), out / f"fig14-9_round_trip.{lg}"),
            (mcp_figure(facts, lg), out / f"fig14-11_mcp.{lg}"),
        )
    ]


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
    figs, files, scales = [], [], []
    for fig, stem in todo:
        for fmt in formats:
            figs.append(fig), files.append(stem.with_suffix(stem.suffix + "." + fmt))
            scales.append(2 if fmt == "png" else 1)
    if figs:
        with warnings.catch_warnings():  # plotly always passes kopts; the running server ignores them, as meant
            warnings.filterwarnings("ignore", message="The kopts argument is ignored")
            pio.write_images(
                figs, files, width=[f.layout.width for f in figs], height=[f.layout.height for f in figs], scale=scales
            )
        for f in files:
            if f.suffix == ".svg":
                f.write_text(embed_font(f.read_text(encoding="utf-8")), encoding="utf-8")
    return len(files)


def write_all(out: Path, langs=("zh", "en"), formats=("svg", "png", "pdf"), claims: bool = True) -> dict:
    """Everything ``make figures`` does. One browser session renders while Python records the trace."""
    t0 = time.perf_counter()
    browser = _find_chromium()
    if formats and browser is None:
        raise RuntimeError("no chromium found: run `make system` (apt-get install chromium fonts-noto-cjk)")
    if formats:
        import kaleido  # lazy: only when images are written

        os.environ.setdefault("BROWSER_PATH", browser)
        kaleido.start_sync_server(silence_warnings=True)
    try:
        static = build_static(out, langs)
        with cf.ThreadPoolExecutor(1) as pool:  # chromium renders in its own process while Python works
            jobs = [pool.submit(render_images, static, formats)]
            traced = build_traced(out, langs)
            jobs.append(pool.submit(render_images, traced, formats))
            if claims:
                write_markdown(out / "claims.md")
            n = sum(j.result() for j in jobs)
    finally:
        if formats:
            kaleido.stop_sync_server(silence_warnings=True)
    return dict(figures=len(static) + len(traced), images=n, seconds=time.perf_counter() - t0)
