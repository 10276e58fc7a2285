"""Slider views of the agent-loop arithmetic (book §14.5.3, §14.5.4): context growth, p^k, FLOPs and bandwidth.

- ``GrowthView``: sliders T, Δ, R and a warm/cold toggle drive fig 14-10 (per-turn prefix split into served
  from cache / computed, cumulative prefill with and without the cache, the ratio and its closed form).
- ``DecayView``: sliders p and k drive the p^k curves, a live table 14-11 (the book's rows plus yours, the
  book's columns plus yours) and the inverse question (which per-step p gives overall P over k steps).
- ``DecodeView``: model / hardware / precision presets and a token count give FLOPs per token, total FLOPs and
  the batch-1 bandwidth bound, with a bar per hardware preset.

Each view's state is a plain object from ``toolkit.cost`` (``view.growth``, ``view.rows``, ``view.budget``)
that tests read without a browser; ``view.figure`` is a plain ``go.Figure`` changed in place and redrawn
through ``toolkit.widgets.plot.FigureView`` (plotly's mime renderer in an Output widget, sized to the window);
``view.widget`` is what a notebook displays; ``view.last_ms`` is how long the last update took in the kernel
(new numbers, figure changed, redrawn). Leaves out: partial cache hits, batching, anything the ``toolkit.cost``
docstring leaves out.
"""

from __future__ import annotations

import time

import ipywidgets as W
import plotly.graph_objects as go

from toolkit import cost
from toolkit.plots import context_growth_figure, decay_figure, update_context_growth, update_decay, wrap
from toolkit.widgets.plot import FigureView


def _wrap() -> W.Layout:
    """Controls wrap onto a second line in a narrow window instead of running off its right edge."""
    return W.Layout(flex_flow="row wrap")


class _Timed:
    last_ms: float = 0.0

    def _timed(self, fn):
        t0 = time.perf_counter()
        fn()
        self.last_ms = (time.perf_counter() - t0) * 1e3


class GrowthView(_Timed):
    def __init__(self, T: int = 10_000, delta: int = 2048, R: int = 30, warm: bool = True, lang: str = "en"):
        self.lang = lang
        self.growth = cost.growth(T, delta, R, warm)
        fig = context_growth_figure(self.growth, lang, height=490)
        fig.layout.title.text = wrap(fig.layout.title.text)  # two lines in a narrow window: room above the plots
        fig.layout.margin.t = 110
        self.plot = FigureView(fig)
        self.figure = self.plot.figure
        self.sliders = {
            "T": W.IntSlider(value=T, min=0, max=40_000, step=500, description="T (tool tokens)"),
            "delta": W.IntSlider(value=delta, min=128, max=8192, step=128, description="Δ per turn"),
            "R": W.IntSlider(value=R, min=1, max=100, description="R turns"),
        }
        self.warm = W.Checkbox(value=warm, description="tool block already cached (warm)")
        for w in (*self.sliders.values(), self.warm):
            w.style.description_width = "initial"
            w.observe(self._on_change, names="value")
        self.summary = W.HTML(self._summary_html())
        self.widget = W.VBox(
            [W.HBox(list(self.sliders.values()), layout=_wrap()), self.warm, self.summary, self.plot.widget]
        )

    def _on_change(self, _change=None) -> None:
        self._timed(self._update)

    def _update(self) -> None:
        s = self.sliders
        self.growth = cost.growth(s["T"].value, s["delta"].value, s["R"].value, self.warm.value)
        update_context_growth(self.figure, self.growth, self.lang)
        self.figure.layout.title.text = wrap(self.figure.layout.title.text)
        self.plot.redraw()
        self.summary.value = self._summary_html()

    def _summary_html(self) -> str:
        g = self.growth
        return (
            f"<b>no cache</b> {g.total_no_cache:,} tokens · <b>full cache hit</b> {g.total_cache:,} tokens · "
            f"<b>ratio</b> {g.ratio:.2f}× (closed form {cost.ratio_closed(g.T, g.delta, g.R, g.warm):.2f}; "
            f"constant T/Δ = {g.T / g.delta:.2f})"
        )


class DecayView(_Timed):
    def __init__(self, p: float = 0.95, k: int = 20, target: float = 0.9, kmax: int = 60, lang: str = "en"):
        self.kmax, self.lang = kmax, lang
        self.p = W.FloatSlider(value=p, min=0.80, max=0.999, step=0.001, readout_format=".3f", description="p per step")
        self.k = W.IntSlider(value=k, min=1, max=kmax, description="k steps")
        self.target = W.FloatSlider(value=target, min=0.5, max=0.99, step=0.01, description="wanted overall P")
        for w in (self.p, self.k, self.target):
            w.style.description_width = "initial"
            w.observe(self._on_change, names="value")
        self.plot = FigureView(decay_figure(p, k, kmax=kmax, lang=lang, height=420))
        self.figure = self.plot.figure
        self.table = W.HTML()
        self.inverse = W.HTML()
        self._refresh_text()
        self.widget = W.VBox(
            [
                W.HBox([self.p, self.k, self.target], layout=_wrap()),
                self.plot.widget,
                W.HBox([self.table, self.inverse], layout=_wrap()),
            ]
        )

    @property
    def ps(self) -> tuple:
        return tuple(dict.fromkeys((*cost.BOOK_PS, round(self.p.value, 3))))

    @property
    def ks(self) -> tuple:
        return tuple(sorted(set((*cost.BOOK_KS, self.k.value))))

    @property
    def rows(self) -> list[dict]:
        """Table 14-11 with the chosen p as an extra row and the chosen k as an extra column."""
        return cost.success_table(self.ps, self.ks)

    @property
    def required(self) -> float:
        return cost.required_p(self.target.value, self.k.value)

    def _on_change(self, _change=None) -> None:
        self._timed(self._update)

    def _update(self) -> None:
        update_decay(self.figure, self.p.value, self.k.value, self.kmax)
        self.plot.redraw()
        self._refresh_text()

    def _refresh_text(self) -> None:
        ks, mine_p, mine_k = self.ks, round(self.p.value, 3), self.k.value
        head = "".join(f"<th>{k} steps</th>" for k in ks)
        body = ""
        for r in self.rows:
            cells = "".join(
                f"<td style='{'font-weight:bold' if (r['p'] == mine_p or k == mine_k) else ''}'>{r[k]:.3f}</td>"
                for k in ks
            )
            body += f"<tr><td>{r['p']:.3f}</td>{cells}</tr>"
        self.table.value = (
            f"<table style='border-collapse:collapse'><tr><th>p</th>{head}</tr>{body}</table>"
            "<small>table 14-11 (§14.5.4) plus your p and k, in bold</small>"
        )
        need = self.required
        self.inverse.value = (
            f"<div style='margin-left:2em'>For overall <b>{self.target.value:.2f}</b> over "
            f"<b>{self.k.value}</b> steps each step needs p = {self.target.value:.2f}^(1/"
            f"{self.k.value}) = <b>{need:.4f}</b>:<br>at most one error per "
            f"{cost.steps_per_error(need):.0f} steps.</div>"
        )


_PRECISION = {"BF16 (2 bytes)": 2.0, "INT8 (1 byte)": 1.0, "INT4 (0.5 byte)": 0.5}


class DecodeView(_Timed):
    def __init__(
        self,
        model: str = "Llama 3 8B",
        hardware: str = "NVIDIA H100 SXM (3.35 TB/s)",
        precision: str = "BF16 (2 bytes)",
        tokens: int = 15_000,
    ):
        self.model = W.Dropdown(options=list(cost.MODELS), value=model, description="model")
        self.hardware = W.Dropdown(options=list(cost.HARDWARE), value=hardware, description="hardware")
        self.precision = W.Dropdown(options=list(_PRECISION), value=precision, description="weights")
        self.tokens = W.IntSlider(value=tokens, min=500, max=200_000, step=500, description="decoded tokens")
        for w in (self.model, self.hardware, self.precision, self.tokens):
            w.style.description_width = "initial"
            w.observe(self._on_change, names="value")
        self.budget = self._budget()
        names = list(cost.HARDWARE)
        self.plot = FigureView(
            go.Figure(
                data=[
                    go.Bar(
                        x=names,
                        y=self._bounds(),
                        marker_color=self._colors(),
                        text=self._labels(),
                        textposition="outside",
                        cliponaxis=False,
                    )
                ],
                layout=dict(
                    title=self._title(),
                    height=400,
                    template="plotly_white",
                    yaxis=dict(title="batch-1 decode bound (tokens/s)", type="log"),
                    margin=dict(l=70, r=20, t=80, b=110),
                ),
            )
        )
        self.figure = self.plot.figure
        self.text = W.HTML(self._html())
        self.widget = W.VBox(
            [
                W.HBox([self.model, self.hardware], layout=_wrap()),
                W.HBox([self.precision, self.tokens], layout=_wrap()),
                self.text,
                self.plot.widget,
            ]
        )

    def _budget(self) -> cost.DecodeBudget:
        return cost.decode_budget(
            self.model.value, self.tokens.value, cost.HARDWARE[self.hardware.value], _PRECISION[self.precision.value]
        )

    def _bounds(self) -> list[float]:
        spec = cost.MODELS[self.model.value]
        return [
            cost.bandwidth_tokens_per_s(spec.active_params, bw, _PRECISION[self.precision.value])
            for bw in cost.HARDWARE.values()
        ]

    def _colors(self) -> list[str]:
        return ["#f28e2b" if h == self.hardware.value else "#9aa5b1" for h in cost.HARDWARE]

    def _labels(self) -> list[str]:
        return [f"{b:,.0f}" for b in self._bounds()]

    def _title(self) -> str:
        return f"{self.model.value}, {self.precision.value}<br>tokens/s bound = bandwidth / bytes per token"

    def _html(self) -> str:
        b, spec = self.budget, cost.MODELS[self.model.value]
        return (
            f"<b>{b.flops_per_token / 1e9:.1f} GFLOPs per token</b> (2 × {spec.active_params / 1e9:.2f}B active) "
            f"· {b.tokens:,} tokens → <b>{b.total_flops / 1e15:.3f} PFLOPs</b> · each token reads "
            f"{cost.bytes_per_token(spec.active_params, b.bytes_per_param) / 1e9:.1f} GB of weights → at most "
            f"<b>{b.tokens_per_s_bound:,.0f} tokens/s</b>"
            f" on {self.hardware.value} at batch 1, so ≥ {b.seconds_floor:,.1f} s for all tokens"
            + (f"<br><small>{spec.note}</small>" if spec.note else "")
        )

    def _on_change(self, _change=None) -> None:
        self._timed(self._update)

    def _update(self) -> None:
        self.budget = self._budget()
        with self.figure.batch_update():
            self.figure.data[0].update(y=self._bounds(), marker_color=self._colors(), text=self._labels())
            self.figure.layout.title.text = self._title()
        self.plot.redraw()
        self.text.value = self._html()
