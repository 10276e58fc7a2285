"""Two views for notebook 09: tokens per turn of an agent pattern's run, and what the number of retrieved passages
k does to recall and to the request's size (book §14.5.5, §14.5.10).

What it does
- :class:`TurnTokensView` over saved pattern runs (``benchmarks/patterns.py``'s ``runs``: plain dicts): a pattern
  and a task dropdown; the figure stacks tokens prefilled and decoded per model turn, one colour per context (the
  main agent, each sub-agent), and its title states the run's totals and outcome. ``select(pattern, task)`` is
  what the dropdowns call; ``totals()`` is the number the title shows, for tests.
- ``isolation_figure(rows)``: the main context's size turn by turn with and without sub-agent isolation.
- ``rerank_figure(rr)``: recall@k with and without reranking, from a saved RAG run.
- :class:`RecallView`: a k slider; ``toolkit.rag.modes.sweep_k`` measures mean recall@k and mean first-request
  tokens for k = 1..``kmax`` once, and the figure marks the chosen k; ``numbers()`` returns the marked values.

What it leaves out
- Running models: both views read plain data (saved runs; retrieval and token counts need no model).
"""

from __future__ import annotations

import ipywidgets as W
import plotly.graph_objects as go
from IPython.display import display
from plotly.subplots import make_subplots

from toolkit.plots import wrap_title
from toolkit.rag.modes import sweep_k
from toolkit.widgets.plot import FigureView

COLOURS = {"main": "#4C78A8", "sub1": "#F58518", "sub2": "#54A24B", "sub3": "#B279A2", "sub4": "#9D755D"}


def turn_figure(run: dict) -> go.Figure:
    turns = run["turns"]
    x = [f"{i + 1}·{t['context']}·{t['kind']}" for i, t in enumerate(turns)]
    fig = go.Figure()
    for ctx in dict.fromkeys(t["context"] for t in turns):
        colour = COLOURS.get(ctx, "#888")
        fig.add_bar(
            x=x,
            y=[t["prefilled"] if t["context"] == ctx else 0 for t in turns],
            name=f"{ctx}: prefilled",
            marker_color=colour,
        )
        fig.add_bar(
            x=x,
            y=[t["decoded"] if t["context"] == ctx else 0 for t in turns],
            name=f"{ctx}: decoded",
            marker_color=colour,
            marker_pattern_shape="/",
            opacity=0.7,
        )
    fig.add_scatter(
        x=x,
        y=[t["prompt"] for t in turns],
        name="prompt length",
        mode="lines+markers",
        line=dict(color="#333", dash="dot"),
    )
    ok = "answered correctly" if run["success"] else "not answered correctly"
    fig.update_layout(
        barmode="stack",
        height=430,
        margin=dict(l=50, r=20, t=80, b=90),
        title=f"{run['pattern']} on {run['task']['id']}: {len(turns)} turns, {run['prefilled']:,} prefilled + "
        f"{run['decoded']:,} decoded tokens ({ok})",
        xaxis_title="model turn · context · kind",
        yaxis_title="tokens",
        legend=dict(orientation="h", y=-0.35),
    )
    return wrap_title(fig)


class TurnTokensView:
    """Pattern and task dropdowns over saved runs; see the module docstring."""

    def __init__(self, runs: list[dict], pattern: str | None = None, task: str | None = None):
        if not runs:
            raise ValueError("no saved runs to show")
        self.runs = runs
        patterns = list(dict.fromkeys(r["pattern"] for r in runs))
        tasks = list(dict.fromkeys(r["task"]["id"] for r in runs))
        # a list of one cannot be changed: shown, disabled
        self.pattern_box = W.Dropdown(
            options=patterns, value=pattern or patterns[0], description="pattern", disabled=len(patterns) < 2
        )
        self.task_box = W.Dropdown(options=tasks, value=task or tasks[0], description="task", disabled=len(tasks) < 2)
        self.plot = FigureView(turn_figure(self.run()))
        for box in (self.pattern_box, self.task_box):
            box.observe(lambda _: self.select(self.pattern_box.value, self.task_box.value), names="value")
        self.widget = W.VBox([W.HBox([self.pattern_box, self.task_box]), self.plot.widget])

    def run(self, pattern: str | None = None, task: str | None = None) -> dict:
        p, t = pattern or self.pattern_box.value, task or self.task_box.value
        found = [r for r in self.runs if r["pattern"] == p and r["task"]["id"] == t]
        if not found:
            raise ValueError(f"no saved run of {p!r} on {t!r}")
        return found[0]

    def select(self, pattern: str, task: str) -> None:
        self.pattern_box.value, self.task_box.value = pattern, task
        fig = turn_figure(self.run(pattern, task))
        self.plot.figure.data = []
        self.plot.figure.add_traces(fig.data)
        self.plot.figure.layout = fig.layout
        self.plot.redraw()

    def totals(self) -> dict:
        r = self.run()
        return {"turns": len(r["turns"]), "prefilled": r["prefilled"], "decoded": r["decoded"]}

    def _ipython_display_(self):
        display(self.widget)


def isolation_figure(rows: list[dict]) -> go.Figure:
    """The main context's prompt length turn by turn, sub-agents isolated vs shared (one pair of lines per task)."""
    fig = go.Figure()
    for i, row in enumerate(rows):
        for key, dash in (("isolated", "solid"), ("shared", "dot")):
            fig.add_scatter(
                x=list(range(1, len(row[key]) + 1)),
                y=row[key],
                name=f"{row['task']}: {key}",
                mode="lines+markers",
                line=dict(dash=dash, color=list(COLOURS.values())[i % 5]),
            )
    peaks = [(max(r["isolated"] or [0]), max(r["shared"] or [0])) for r in rows]
    fig.update_layout(
        height=400,
        margin=dict(l=50, r=20, t=80, b=50),
        legend=dict(orientation="h", y=-0.2),
        title=f"Main context per main turn, sub-agents isolated (solid) vs shared (dotted)<br>{len(rows)} task(s): "
        f"mean peak {sum(a for a, _ in peaks) / len(peaks):,.0f} vs {sum(b for _, b in peaks) / len(peaks):,.0f} "
        "tokens"
        if rows
        else "Main context per main turn: no saved sub-agent runs (run benchmarks/patterns.py)",
        xaxis=dict(title="main agent's turn", dtick=1),
        yaxis_title="prompt tokens (main context)",
    )
    return wrap_title(fig)


def rerank_figure(rr: dict) -> go.Figure:
    """Recall@k of BM25 alone vs BM25's top ``depth`` reranked (``benchmarks/patterns.py --what rag``'s
    ``rerank_recall``), grouped by k; the title names the reranker and its cost per question."""
    ks = [str(k) for k in rr["ks"]]
    fig = go.Figure()
    for key, name in (("recall_bm25", "BM25"), ("recall_rerank", f"BM25 top {rr['depth']} → reranked")):
        vals = [rr[key][k] for k in ks]
        fig.add_bar(x=[f"recall@{k}" for k in ks], y=vals, name=name, text=[f"{v:.2f}" for v in vals])
    fig.update_layout(
        height=380,
        barmode="group",
        margin=dict(l=50, r=20, t=80, b=50),
        legend=dict(orientation="h", y=-0.2),
        yaxis=dict(range=[0, 1.1], title="mean recall@k"),
        title=f"Recall@k, BM25 alone vs reranked by {rr['reranker'].split(' (')[0].split(' [')[0]}<br>reranking cost "
        f"{rr['tokens'] / rr['n']:,.0f} prompt tokens and {rr['seconds'] / rr['n']:.1f} s per question "
        f"({rr['n_scored']} questions scored)",
    )
    return wrap_title(fig)


def recall_figure(rows: list[dict], k: int) -> go.Figure:
    ks = [r["k"] for r in rows]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(x=ks, y=[r["recall"] for r in rows], name="recall@k", mode="lines+markers")
    fig.add_scatter(
        x=ks, y=[r["tokens"] for r in rows], name="first-request tokens", mode="lines+markers", secondary_y=True
    )
    row = next(r for r in rows if r["k"] == k)
    fig.add_vline(x=k, line_dash="dot")
    fig.update_layout(
        height=400,
        margin=dict(l=50, r=50, t=80, b=50),
        legend=dict(orientation="h", y=-0.2),
        title=f"k = {k}: recall@k {row['recall']:.2f}, {row['tokens']:.0f} tokens in the first request "
        f"(mean over {row['n']} questions)",
    )
    fig.update_xaxes(title_text="passages retrieved (k)", dtick=1)
    fig.update_yaxes(title_text="recall@k", range=[0, 1.05], secondary_y=False)
    fig.update_yaxes(title_text="tokens", secondary_y=True)
    return wrap_title(fig)


class RecallView:
    """A k slider over retrieval recall and request size; see the module docstring."""

    def __init__(self, tokenizer, questions, k: int = 3, kmax: int = 8, template: str = "qwen2.5"):
        self.rows = sweep_k(range(1, kmax + 1), tokenizer, questions, template)
        self.slider = W.IntSlider(value=k, min=1, max=kmax, description="k")
        self.plot = FigureView(recall_figure(self.rows, k))
        self.slider.observe(lambda ch: self.set_k(ch["new"]), names="value")
        self.widget = W.VBox([self.slider, self.plot.widget])

    def set_k(self, k: int) -> None:
        self.slider.value = k
        fig = recall_figure(self.rows, k)
        self.plot.figure.layout = fig.layout
        self.plot.redraw()

    def numbers(self) -> dict:
        return next(r for r in self.rows if r["k"] == self.slider.value)

    def _ipython_display_(self):
        display(self.widget)
