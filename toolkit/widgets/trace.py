"""Trace view: the host loop's turns as they happen — what each prompt is made of, what the cache saved, and
how long prefill and decode took (book §14.5.3's second account, measured on one conversation).

``TraceView(model_name)`` is an ipywidgets ``VBox``: a header naming the model (and saying so when it is a
random-weight stand-in), a plotly figure (a ``go.Figure`` redrawn through ``toolkit.widgets.plot.FigureView``)
with three panels per turn — prompt split (tool definitions / history / new tokens), cache (reused / prefilled /
generated) and wall time (prefill / decode / tools) — and a step log. Feed it with
``toolkit.loop.loop.run(..., on_step=view.on_step)`` or ``view.show(trace)``. The plotted numbers are plain data
(``view.rows``, ``panel_data(rows)``) so tests check them without a browser.

Leaves out: token-level detail (``widgets.tokens`` shows a rendering token by token) and comparing two runs in one
figure (the notebook puts two views side by side).
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import plotly.graph_objects as go

from toolkit.loop.steps import turn_rows
from toolkit.widgets.plot import FigureView

# (panel, key, label, colour); panel 1 = prompt split, 2 = cache, 3 = time
SERIES = [
    (1, "tools", "tool definitions", "#fdae6b"),
    (1, "history", "history", "#9ecae1"),
    (1, "new", "new tokens", "#74c476"),
    (2, "reused", "reused from cache", "#6baed6"),
    (2, "prefilled", "prefilled", "#fb6a4a"),
    (2, "generated", "generated", "#9e9ac8"),
    (3, "prefill_ms", "prefill ms", "#fb6a4a"),
    (3, "decode_ms", "decode ms", "#9e9ac8"),
    (3, "tool_ms", "tools ms", "#bdbdbd"),
]
# two short lines each: three one-line titles overlapped in a notebook column (~650 px)
_TITLES = ("prompt tokens:<br>what they are", "prompt tokens:<br>the cache", "wall time per turn<br>(ms, stacked)")


def panel_data(rows: list[dict]) -> dict[str, list]:
    """Per series, one value per turn (missing values are 0): exactly what the bars show."""
    return {key: [r.get(key, 0) or 0 for r in rows] for _, key, _, _ in SERIES} | {"turn": [r["turn"] for r in rows]}


def _figure(rows) -> go.Figure:
    data = panel_data(rows)
    traces = [
        go.Bar(
            x=data["turn"],
            y=data[key],
            name=label,
            marker_color=colour,
            legendgroup=str(panel),
            xaxis=f"x{panel}",
            yaxis=f"y{panel}",
            hovertemplate=f"turn %{{x}}<br>{label}: %{{y}}<extra></extra>",
        )
        for panel, key, label, colour in SERIES
    ]
    layout = go.Layout(
        barmode="stack",
        height=330,
        margin=dict(l=50, r=10, t=60, b=40),
        legend=dict(orientation="h", y=-0.22),
        template="plotly_white",
        xaxis1=dict(domain=[0, 0.3], title="turn", dtick=1),
        xaxis2=dict(domain=[0.35, 0.65], title="turn", dtick=1),
        xaxis3=dict(domain=[0.7, 1.0], title="turn", dtick=1),
        yaxis1=dict(anchor="x1", title="tokens"),
        yaxis2=dict(anchor="x2"),
        yaxis3=dict(anchor="x3"),
        annotations=[
            dict(
                text=t,
                x=(a + b) / 2,
                y=1.02,
                xanchor="center",
                yanchor="bottom",
                xref="paper",
                yref="paper",
                showarrow=False,
            )
            for t, (a, b) in zip(_TITLES, [(0, 0.3), (0.35, 0.65), (0.7, 1.0)])
        ],
    )
    return go.Figure(data=traces, layout=layout)


class TraceView(widgets.VBox):
    """Live view of one host-loop run. ``on_step`` is the ``run(..., on_step=...)`` callback."""

    def __init__(self, model_name: str = "", semantic: bool = True, **kw):
        self.steps: list = []
        self.rows: list[dict] = []
        self.header = widgets.HTML()
        self.plot = FigureView(_figure([]))
        self.fig = self.plot.figure
        self.steps_html = widgets.HTML(layout=widgets.Layout(max_height="260px", overflow="auto"))
        super().__init__([self.header, self.plot.widget, self.steps_html], **kw)
        self.set_model(model_name, semantic)

    def set_model(self, name: str, semantic: bool = True) -> None:
        warn = (
            ""
            if semantic
            else " <b style='color:#b30000'>RANDOM-WEIGHT STAND-IN: shows the mechanics; "
            "the calls and text mean nothing</b>"
        )
        self.header.value = f"<div style='font-family:monospace'>model: {html.escape(name)}{warn}</div>"

    def clear(self) -> None:
        self.steps, self.rows = [], []
        self.steps_html.value = ""
        self._redraw()

    def on_step(self, step) -> None:
        self.steps.append(step)
        self.steps_html.value += f"<div style='font-family:monospace;font-size:12px'>{step.html()}</div>"
        if step.row():  # the step changes its turn's numbers (each step says what it adds: Step.row)
            self._redraw()

    def show(self, trace) -> None:
        """Replace the view with a finished :class:`toolkit.loop.steps.Trace`."""
        self.clear()
        self.set_model(trace.model, "STAND-IN" not in trace.model)
        for s in trace.steps:
            self.on_step(s)

    def _redraw(self) -> None:
        self.rows = turn_rows(self.steps)
        data = panel_data(self.rows)
        with self.fig.batch_update():
            for trace, (_, key, _, _) in zip(self.fig.data, SERIES):
                trace.x, trace.y = data["turn"], data[key]
        self.plot.redraw()
