"""Stepper: walk through a constrained generation one decoding step at a time (book §14.5.2, 约束解码的角色).

``StepperState(trace)`` is plain data over a :class:`toolkit.grammar.inspect.StepTrace`: the current step, the
allowed-set size of every step, and for the current step the bars to draw (top tokens, probability before and
after the mask), the chosen token and the mass the mask removed. Tests drive it without a browser.
``Stepper(trace)`` is the view: a slider, a caption and one figure (a ``go.Figure`` redrawn through
``toolkit.widgets.plot.FigureView``) with two panels — allowed tokens
per step on a log axis (the whole vocabulary at the top, a single token at the bottom) and the before/after
distribution of the selected step.

Leaves out: comparing two traces in one view (show two steppers), and tokens outside the recorded top-k
(the trace keeps only those).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as W
import plotly.graph_objects as go
from IPython.display import display
from plotly.subplots import make_subplots

from toolkit.plots import wrap
from toolkit.widgets.plot import FigureView

BEFORE, AFTER, CHOSEN = "#9ecae1", "#e6550d", "#31a354"


@dataclass
class StepperState:
    trace: object  # toolkit.grammar.inspect.StepTrace
    step: int = 0

    @property
    def n_steps(self) -> int:
        return len(self.trace.steps)

    @property
    def allowed_sizes(self) -> list[int]:
        return [s.allowed for s in self.trace.steps]

    def go(self, step: int) -> None:
        if not 0 <= step < self.n_steps:
            raise IndexError(f"step {step} outside 0..{self.n_steps - 1}")
        self.step = step

    def bars(self, limit: int = 12) -> dict:
        """The union of the top tokens before and after the mask at the current step, most likely first."""
        s = self.trace.steps[self.step]
        seen, rows = set(), []
        for tid, text, pb, pa in list(s.top_after) + list(s.top_before):
            if tid not in seen:
                seen.add(tid)
                rows.append((tid, text, pb, pa))
        rows = sorted(rows, key=lambda r: -max(r[2], r[3]))[:limit]
        return {
            "ids": [r[0] for r in rows],
            "labels": [f"{r[1]!r} ({r[0]})" for r in rows],
            "before": [r[2] for r in rows],
            "after": [r[3] for r in rows],
            "chosen": [r[0] == s.chosen for r in rows],
        }

    def caption(self) -> str:
        s, t = self.trace.steps[self.step], self.trace
        kind = "greedy" if t.temperature == 0 else f"sampled at T={t.temperature}, seed {t.seed}"
        return (
            f"step {s.index + 1}/{self.n_steps} ({kind}): {s.allowed:,} of {t.vocab_width:,} token ids allowed; "
            f"the mask removed {s.removed_mass:.1%} of the model's probability; chose {s.chosen_text!r} "
            f"(id {s.chosen}) with p={s.p_before:.3g} before, {s.p_after:.3g} after the mask"
        )


class Stepper:
    """Slider + caption + figure over a :class:`StepperState`. ``.widget`` is what a notebook displays."""

    def __init__(self, trace, title: str = "constrained decoding, step by step"):

        self.state = StepperState(trace)
        sizes = self.state.allowed_sizes
        xs = list(range(1, len(sizes) + 1))
        bars = self.state.bars()
        fig = make_subplots(
            rows=2,
            cols=1,
            row_heights=[0.4, 0.6],
            vertical_spacing=0.18,
            subplot_titles=(
                "allowed token ids per step (log scale)",
                "top tokens: probability before vs after the mask",
            ),
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=sizes,
                mode="lines+markers",
                name="allowed",
                line=dict(color="#636363"),
                hovertext=[repr(s.chosen_text) for s in trace.steps],
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(x=[1], y=[sizes[0]], mode="markers", name="this step", marker=dict(size=14, color=AFTER)),
            row=1,
            col=1,
        )
        fig.add_trace(go.Bar(x=bars["labels"], y=bars["before"], name="before mask", marker_color=BEFORE), 2, 1)
        fig.add_trace(
            go.Bar(
                x=bars["labels"], y=bars["after"], name="after mask (renormalised)", marker_color=self._colours(bars)
            ),
            2,
            1,
        )
        fig.update_yaxes(type="log", title_text="tokens", range=[-0.2, 5.4], row=1, col=1)
        fig.update_yaxes(title_text="probability", range=[0, 1.02], row=2, col=1)
        fig.update_xaxes(title_text="step", row=1, col=1)
        # Title, then the legend (one or two rows, by width), then the panels: each has its own band at the top.
        fig.update_layout(
            height=620,
            barmode="group",
            margin=dict(t=150, b=120),
            title=dict(text=wrap(title), yref="container", y=0.99, yanchor="top", pad=dict(t=8)),
            legend=dict(orientation="h", yref="container", y=0.88, yanchor="top"),
        )
        self.plot = FigureView(fig)
        self.figure = self.plot.figure
        self.slider = W.IntSlider(
            value=0,
            min=0,
            max=max(self.state.n_steps - 1, 0),
            description="step",
            continuous_update=True,
            layout=W.Layout(width="95%", max_width="820px"),
        )
        self.caption = W.HTML(self._caption_html())
        self.slider.observe(self._on_step, names="value")
        self.widget = W.VBox([self.slider, self.caption, self.plot.widget])

    @staticmethod
    def _colours(bars) -> list[str]:
        return [CHOSEN if c else AFTER for c in bars["chosen"]]

    def _caption_html(self) -> str:
        return f"<code>{html.escape(self.state.caption())}</code>"

    def _on_step(self, change) -> None:
        self.show(change["new"])

    def show(self, step: int) -> None:
        self.state.go(step)
        bars = self.state.bars()
        with self.figure.batch_update():
            self.figure.data[1].x = [step + 1]
            self.figure.data[1].y = [self.state.allowed_sizes[step]]
            self.figure.data[2].x, self.figure.data[2].y = bars["labels"], bars["before"]
            self.figure.data[3].x, self.figure.data[3].y = bars["labels"], bars["after"]
            self.figure.data[3].marker.color = self._colours(bars)
        self.plot.redraw()
        self.caption.value = self._caption_html()
        if self.slider.value != step:
            self.slider.value = step

    def _ipython_display_(self):
        display(self.widget)
