"""One interactive figure: a plain ``go.Figure`` drawn by plotly's mime renderer inside an ``ipywidgets.Output``.

Why not ``go.FigureWidget``: in plotly 7 it is an anywidget whose model carries plotly's whole ~5 MB JavaScript
bundle, and anywidget gives each model 2 s to load it; on a busy machine (a shared Binder node) the figure stays
blank and drops every later update. Here the page loads plotly.js once, as the ``jupyterlab-plotly`` extension that
the ``plotly`` package installs (JupyterLab, Voila, Binder: no network needed), and each figure is only its JSON.

``FigureView(fig)`` holds the figure (``view.figure``, a plain ``go.Figure`` that tests read without a browser)
and an ``Output`` widget (``view.widget``) whose ``outputs`` are set to the figure's mime bundle. Change the figure
in place, then call ``redraw()``: the new JSON replaces the old in the widget's state, so JupyterLab, Voila and a
reloaded page all draw the current figure. ``last_ms`` is how long the last redraw took in the kernel.
Fixed widths are dropped by default (``responsive=True``) so a figure fits the window it is shown in; ``wrap``
(from ``toolkit.plots``) breaks a long title into lines, which a responsive view does on every redraw, since plotly never wraps text and a 1,024-px window leaves ~600 px for a figure.

Leaves out: events from the browser back to the kernel (clicks, selections, zoom): controls are ipywidgets;
incremental updates (each redraw sends the whole figure, a few kB for the kit's figures).
"""

from __future__ import annotations

import json
import time
import weakref

import ipywidgets as W
import plotly.graph_objects as go
from IPython.display import display
from plotly.io import to_json

from toolkit.plots import wrap_title

MIME = "application/vnd.plotly.v1+json"
# Every live view, so a browser test can ask the kernel what each figure should show right now.
LIVE: weakref.WeakSet[FigureView] = weakref.WeakSet()


def mime_bundle(fig: go.Figure) -> dict:
    """The figure as plotly's JupyterLab renderer reads it (plain JSON: numpy arrays become lists)."""
    return {MIME: json.loads(to_json(fig, validate=False, remove_uids=False))}


class FigureView:
    """A figure in an ``Output`` widget; ``redraw()`` after changing ``figure``. ``widget`` is what to display."""

    def __init__(self, figure: go.Figure, responsive: bool = True, min_height: int | None = None):
        self.figure = figure if isinstance(figure, go.Figure) else go.Figure(figure)
        if responsive:
            # No fixed width: plotly.js sizes the plot to its output area (a 1,024-px window included).
            self.figure.layout.width = None
            self.figure.layout.autosize = True
        height = min_height or self.figure.layout.height or 450
        self.responsive = responsive
        self.widget = W.Output(layout=W.Layout(min_height=f"{height}px", width="100%"))
        self.last_ms = 0.0
        self.redraws = 0
        LIVE.add(self)
        self.redraw()

    def redraw(self) -> None:
        t0 = time.perf_counter()
        if self.responsive:
            wrap_title(self.figure)  # a title set after construction is wrapped too
        self.widget.outputs = ({"output_type": "display_data", "data": mime_bundle(self.figure), "metadata": {}},)
        self.redraws += 1
        self.last_ms = (time.perf_counter() - t0) * 1e3

    def _ipython_display_(self):
        display(self.widget)
