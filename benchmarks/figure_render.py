"""Time from a figure cell finishing to its traces on screen, in JupyterLab (headless Chromium), with both CPU
cores busy — per way of drawing an interactive plotly figure, side by side in one run.

Approaches (each a generated notebook of ``--figures`` cells, one figure per cell, like notebook 04):
- ``figurewidget``: ``go.FigureWidget`` (plotly 7: an anywidget carrying the ~5 MB plotly.js bundle per model);
- ``figureview``: ``toolkit.widgets.plot.FigureView``, a ``go.Figure`` drawn by the jupyterlab-plotly mime
  renderer inside an ``ipywidgets.Output`` (plotly.js loaded once per page).

The page polls every 50 ms (in the browser, so Playwright's own latency under load does not count) for each cell's
execution count and for a drawn trace (an SVG ``.trace`` or ``.bars`` inside the cell's ``.js-plotly-plot``).
A figure that shows no trace within ``--wait`` s counts as blank. The burner is one busy-looping process per core,
stopped in ``finally``. Also prints the kernel-side redraw time of each FigureView (ms) after 20 changes.

Leaves out: Voila and a real Binder node (the browser test opens both kinds of page); bqplot/ipympl (not installed).

    python benchmarks/figure_render.py [--figures 3] [--wait 60] [--no-burn] [--only figureview]
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolkit import cliargs  # noqa: E402

CELLS = {
    "figurewidget": "display(go.FigureWidget(decay_figure(0.9{i}, 20)))",
    "figureview": "display(FigureView(decay_figure(0.9{i}, 20)).widget)",
}


def parser():
    """The command line, built before the imports below (nbformat and browser helpers (~1-7 s)): a usage error skips them."""
    ap = cliargs.Parser()
    ap.add_argument("--figures", type=cliargs.count(1), default=3)
    ap.add_argument("--wait", type=cliargs.number(0.0, lo_open=True), default=60)
    ap.add_argument("--no-burn", action="store_true")
    ap.add_argument("--only", type=cliargs.one_of(CELLS, "figure kind"), default=None, help="default: both kinds")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # exits 2 on a bad value, before the imports below

import nbformat  # noqa: E402

from toolkit.paths import provenance, script_module  # noqa: E402  (results name a clean commit or say they do not)

ROOT = Path(__file__).resolve().parents[1]


def _test_module(name: str):
    """A module of tests/ by its file (the tests are not a package; the kit itself is installed)."""
    return script_module(ROOT / "tests" / f"{name}.py")


_browser = _test_module("test_browser")
CHROMIUM, CHROMIUM_ARGS, burn_cpu, start_lab = (
    _browser.CHROMIUM,
    _browser.CHROMIUM_ARGS,
    _browser.burn_cpu,
    _browser.start_lab,
)

SETUP = (
    "from toolkit.plots import decay_figure, context_growth_figure\nfrom toolkit import cost\n"
    "import plotly.graph_objects as go\nfrom toolkit.widgets.plot import FigureView\n"
)
# Each figure cell ends by printing the kernel's wall clock (ms): the moment the cell finished.
DONE = "\nimport time; print(f'__done {time.time() * 1e3:.0f}')"

_POLL = r"""
() => {
  window.__fr = { done: {}, drawn: {} };
  const tick = () => {
    const now = Date.now();
    document.querySelectorAll('.jp-CodeCell').forEach((cell, i) => {
      const area = cell.querySelector('.jp-OutputArea');
      const m = area && /__done (\d+)/.exec(area.textContent);
      if (!(i in window.__fr.done) && m) window.__fr.done[i] = Number(m[1]);
      if (!(i in window.__fr.drawn) && cell.querySelector('.js-plotly-plot .trace, .js-plotly-plot .bars'))
        window.__fr.drawn[i] = now;
    });
  };
  window.__frTimer = setInterval(tick, 50);
}
"""


def notebook(kind: str, n: int, path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP)] + [
        nbformat.v4.new_code_cell(CELLS[kind].format(i=i) + DONE) for i in range(n)
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def measure(server, browser, name: str, n: int, wait: float) -> list[float | None]:
    page = browser.new_page(viewport={"width": 1024, "height": 900})
    try:
        page.goto(f"{server.url}/lab/tree/{name}?reset&token={server.token}")
        page.wait_for_function(
            "p => { const a = window.jupyterapp; if (!a) return false; "
            "for (const w of a.shell.widgets('main')) if (w.context && w.context.path === p) "
            "return w.sessionContext.session && w.sessionContext.session.kernel && "
            "w.sessionContext.session.kernel.status === 'idle'; return false; }",
            arg=name,
            timeout=300_000,
            polling=500,
        )
        page.evaluate(_POLL)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        deadline = time.monotonic() + 300 + wait
        while time.monotonic() < deadline:
            fr = page.evaluate("() => window.__fr")
            if len(fr["done"]) == n and (len(fr["drawn"]) == n or max(fr["done"].values()) / 1e3 + wait < time.time()):
                break
            time.sleep(1)
        fr = page.evaluate("() => window.__fr")
        out = []
        for i in range(1, n + 1):
            d, s = fr["done"].get(str(i)), fr["drawn"].get(str(i))
            out.append(None if d is None or s is None else max(0.0, (s - d) / 1e3))
        return out
    finally:
        page.close()


def kernel_redraw_ms(changes: int = 20) -> list[float]:
    from toolkit import cost
    from toolkit.plots import decay_figure, update_decay
    from toolkit.widgets.plot import FigureView

    v = FigureView(decay_figure(0.95, 20))
    ms = []
    for k in range(changes):
        t0 = time.perf_counter()
        update_decay(v.figure, 0.9 + k / 1000, 20 + k)
        v.redraw()
        ms.append((time.perf_counter() - t0) * 1e3)
    del cost
    return ms


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    kinds = [k for k in CELLS if not a.only or k in a.only]
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="figure-render-"))
    (work / "notebooks").mkdir()
    for k in kinds:
        notebook(k, a.figures, work / "notebooks" / f"{k}.ipynb")
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, check=False, text=True
    ).stdout.strip()
    results = {}
    server = start_lab(work)
    try:
        with sync_playwright() as p, burn_cpu(0 if a.no_burn else os.cpu_count() or 2, seconds=1800):
            b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                for k in kinds:
                    load0 = os.getloadavg()[0]
                    results[k] = (measure(server, b, f"{k}.ipynb", a.figures, a.wait), load0, os.getloadavg()[0])
            finally:
                b.close()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M')} · {platform.node()} · {os.cpu_count()} cores · commit {commit} · "
        f"burner {'off' if a.no_burn else 'on (all cores)'} · figures drawn within {a.wait:.0f} s or blank"
    )
    print(f"{'approach':<14} {'load before/after':>18}  seconds from cell finished to traces, per figure")
    for k, (secs, l0, l1) in results.items():
        cells = "  ".join("blank" if s is None else f"{s:5.1f}" for s in secs)
        print(f"{k:<14} {l0:8.1f} /{l1:6.1f}  {cells}")
    ms = kernel_redraw_ms()
    print(
        f"FigureView kernel-side update+redraw over {len(ms)} changes: median {sorted(ms)[len(ms) // 2]:.1f} ms, "
        f"max {max(ms):.1f} ms"
    )
    out = ROOT / "benchmarks" / "results" / "figure_render.json"
    out.write_text(
        json.dumps(
            {
                "date": time.strftime("%Y-%m-%d %H:%M"),
                "machine": platform.node(),
                "cores": os.cpu_count(),
                **provenance(ROOT),
                "burn": not a.no_burn,
                "seconds_to_traces": {k: v[0] for k, v in results.items()},
                "redraw_ms": ms,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
