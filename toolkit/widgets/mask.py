"""Mask view: every token of a training trajectory, coloured by whether the loss trains on it.

``MaskData.from_labelled(ex)`` is the plain data (one row per token: id, text, segment, label, trained);
``mask_html(data)`` draws it as HTML (trained tokens solid green — or, with an RL ``advantage``, green for a positive
and red for a negative one, deeper the larger it is — masked ones pale grey, a bottom border
in the token's segment colour, hover shows index, id, segment and label); ``MaskView(examples)`` is an
ipywidgets box with a trajectory picker and a with/without-mask toggle. Tests read ``MaskView.data`` and
``mask_html`` output without a browser.

Leaves out: editing labels, and trajectories of more than a few thousand tokens (one span per token).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import ipywidgets as w
from IPython.display import display

from toolkit.sft.labels import CONVENTION, IGNORE_INDEX, Labelled
from toolkit.widgets.tokens import COLOURS

TRAINED, MASKED = "#238b45", "#ececec"


@dataclass
class MaskData:
    title: str
    template: str
    masked: bool  # False: the no-mask baseline (every token is a target)
    rows: list[dict] = field(default_factory=list)
    advantage: float | None = None  # reinforcement learning: the one advantage every trained token carries

    @classmethod
    def from_labelled(
        cls, ex: Labelled, title: str = "", masked: bool = True, advantage: float | None = None
    ) -> MaskData:
        labels = ex.labels if masked else ex.unmasked_labels()
        rows = [
            dict(index=t.index, id=t.id, text=t.text, segment=t.segment, label=lab, trained=lab != IGNORE_INDEX)
            for t, lab in zip(ex.rendering.tokens, labels)
        ]
        return cls(title, ex.template, masked, rows, advantage)

    def summary(self) -> dict:
        """Token totals and, per segment, how many are trained / masked."""
        seg: dict[str, dict[str, int]] = {}
        for r in self.rows:
            s = seg.setdefault(r["segment"], {"trained": 0, "masked": 0})
            s["trained" if r["trained"] else "masked"] += 1
        n_trained = sum(r["trained"] for r in self.rows)
        return dict(tokens=len(self.rows), trained=n_trained, masked=len(self.rows) - n_trained, segments=seg)


def _advantage_colour(a: float) -> str:
    """Green for a positive advantage, red for a negative one, paler the nearer it is to 0 (full at |a| >= 2)."""
    k = min(1.0, abs(a) / 2)
    hi, lo = ((35, 139, 69), (199, 233, 192)) if a >= 0 else ((203, 24, 29), (252, 187, 161))
    return "#" + "".join(f"{round(lo[i] + (hi[i] - lo[i]) * k):02x}" for i in range(3))


def _chip(r: dict, advantage: float | None = None) -> str:
    shown = html.escape(r["text"]).replace("\n", "\u21b5<br>")
    tip = f"#{r['index']} id={r['id']} {r['text']!r} segment={r['segment']} label={r['label']}"
    if advantage is not None and r["trained"]:
        tip += f" advantage={advantage:+.3f}"
    tip = html.escape(tip, quote=True)
    seg = COLOURS.get(r["segment"], "#999")
    if r["trained"] and advantage is not None:
        style = f"background:{_advantage_colour(advantage)};color:{'#fff' if abs(advantage) > 1 else '#222'};"
    elif r["trained"]:
        style = f"background:{TRAINED};color:#fff;"
    else:
        style = f"background:{MASKED};color:#777;"
    return (
        f'<span class="tk-mask" data-index="{r["index"]}" data-trained="{int(r["trained"])}" title="{tip}" '
        f'style="{style}border-bottom:3px solid {seg};padding:0 1px;margin:0 1px 2px 0;border-radius:2px">'
        f"{shown}</span>"
    )


def legend_html() -> str:
    segs = "".join(
        f'<span style="border-bottom:3px solid {c};margin-right:6px">{html.escape(s)}</span>'
        for s, c in COLOURS.items()
        if s != "generation_prompt"
    )
    return (
        '<div style="font-family:monospace;font-size:12px;margin:4px 0">'
        f'<span style="background:{TRAINED};color:#fff;padding:0 4px">trained (label = id)</span> '
        f'<span style="background:{MASKED};color:#777;padding:0 4px">'
        f"masked (label = {IGNORE_INDEX})</span> &nbsp; segment underline: {segs}</div>"
    )


def mask_html(data: MaskData) -> str:
    s = data.summary()
    head = (
        f"<b>{html.escape(data.title)}</b> [{data.template}, "
        f"{'with the mask' if data.masked else 'WITHOUT the mask: every token is a target'}] "
        f"{s['tokens']} tokens: {s['trained']} trained, {s['masked']} masked"
    )
    if data.advantage is not None:
        head += f"; every trained token carries the advantage {data.advantage:+.3f}"
    body = "".join(_chip(r, data.advantage) for r in data.rows)
    return (
        f'<div style="font-family:monospace;font-size:12px">{head}</div>{legend_html()}'
        f'<div style="font-family:monospace;font-size:12px;line-height:1.9;white-space:normal">{body}</div>'
    )


class MaskView:
    """Pick a trajectory and a mode; the HTML below redraws. ``widget`` is the box to display."""

    def __init__(self, examples: dict[str, Labelled]):
        self.examples = examples
        self.picker = w.Dropdown(options=list(examples), description="trajectory")
        self.mode = w.ToggleButtons(options=["with mask", "without mask"], value="with mask")
        self.note = w.HTML(f'<div style="font-size:12px;max-width:60em">{html.escape(CONVENTION)}</div>')
        self.html = w.HTML()
        self.picker.observe(self._redraw, names="value")
        self.mode.observe(self._redraw, names="value")
        self.widget = w.VBox([w.HBox([self.picker, self.mode]), self.note, self.html])
        self.data: MaskData | None = None
        self._redraw()

    def _redraw(self, _change=None) -> None:
        name = self.picker.value
        self.data = MaskData.from_labelled(self.examples[name], name, masked=self.mode.value == "with mask")
        self.html.value = mask_html(self.data)

    def _ipython_display_(self):
        display(self.widget)
