"""Slider view: how many tokens the tool definitions add to every request, measured for N mounted tools.

``ToolCountCost`` keeps plain state (``n``, ``points``: measured (N, tokens) pairs) and a figure
(``figure``, a ``go.Figure`` redrawn through ``toolkit.widgets.plot.FigureView``): the measured curve of tool-definition tokens against N with the current N highlighted. Each value is measured by
rendering N tool definitions with the real tokenizer (cached per N), not extrapolated.

Leaves out: which tools a real agent would mount; the catalogue in ``toolkit.book.catalog`` stands in for them.
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as W
import plotly.graph_objects as go

from toolkit.render import tool_definition_cost
from toolkit.widgets.plot import FigureView


class ToolCountCost:
    def __init__(self, tools: list[dict], template: str = "qwen3", n: int = 10, turns: int = 30):
        self.tools, self.template, self.turns = tools, template, turns
        self._measure = lru_cache(maxsize=None)(self._measure_uncached)
        grid = sorted({0, 1, 2, 5, 10, 20, 50, len(tools)} & set(range(len(tools) + 1)))
        self.points = [(k, self._measure(k)) for k in grid]
        self.slider = W.IntSlider(value=n, min=0, max=len(tools), description="tools", continuous_update=False)
        xs, ys = zip(*self.points)
        self.plot = FigureView(
            go.Figure(
                data=[
                    go.Scatter(x=list(xs), y=list(ys), mode="lines+markers", name="measured"),
                    go.Scatter(
                        x=[n],
                        y=[self._measure(n)],
                        mode="markers",
                        marker=dict(size=14, color="#d62728"),
                        name="current",
                    ),
                ],
                layout=go.Layout(
                    title=self._title(n),
                    xaxis_title="tools mounted",
                    yaxis_title="tokens added to every request",
                    height=340,
                    margin=dict(l=60, r=20, t=50, b=50),
                ),
            )
        )
        self.figure = self.plot.figure
        self.label = W.HTML(self.summary_html(n))
        self.slider.observe(self._on_change, names="value")
        self.widget = W.VBox([self.slider, self.plot.widget, self.label])

    def _measure_uncached(self, k: int) -> int:
        return tool_definition_cost(self.tools[:k], self.template, per_tool=False)["total"] if k else 0

    @property
    def n(self) -> int:
        return self.slider.value

    def tokens(self, k: int | None = None) -> int:
        return self._measure(self.n if k is None else k)

    def _title(self, k: int) -> str:
        return f"{k} tools → {self._measure(k):,} tokens per request ({self.template} template)"

    def summary(self, k: int | None = None) -> str:
        k = self.n if k is None else k
        t = self._measure(k)
        per = f"{t / k:.0f} per tool" if k else "no tool block at all"
        return (
            f"{k} tools: {t:,} tokens on every request ({per}); over {self.turns} turns that is "
            f"{t * self.turns:,} tokens of tool definitions sent to the model."
        )

    def summary_html(self, k: int) -> str:
        return f"<span style='font-family:monospace'>{self.summary(k)}</span>"

    def _on_change(self, change) -> None:
        k = change["new"]
        if all(k != p[0] for p in self.points):
            self.points = sorted(self.points + [(k, self._measure(k))])
        xs, ys = zip(*self.points)
        with self.figure.batch_update():
            self.figure.data[0].x, self.figure.data[0].y = list(xs), list(ys)
            self.figure.data[1].x, self.figure.data[1].y = [k], [self._measure(k)]
            self.figure.layout.title.text = self._title(k)
        self.plot.redraw()
        self.label.value = self.summary_html(k)
