"""Plotly figures over saved evaluation results (``benchmarks/results/bfcl_<model>.json``): plain functions from
the results dict to a ``go.Figure``, so tests read their data without a browser.

What it does
- ``accuracy(doc)``: accuracy per category × mode with Wilson 95% error bars, published rows as markers.
- ``taxonomy(doc)``: failure kinds per mode (stacked counts).
- ``pass_k(doc)``: the unbiased pass^k beside the naive p̄^k, per k.
- ``chains(doc)``: measured k-step chain success (Wilson 95% bars) beside the product of measured step rates.
- ``levers(doc, section)``: accuracy per parallel-call lever × category (horizontal bars), the published row of
  each category as a line; ``section="levers_full"`` for the whole-category runs.
- ``descriptions(doc)``: accuracy and tool-block tokens per description variant.
- ``gate(doc)``: per category, the share of cases whose first-step call mass reaches each threshold (the
  first-token gate as a dial), with the default threshold marked.
Titles are wrapped to fit a 1,024-px window. Each returns None when its section is missing, so a notebook can say "not run yet" instead of failing.

What it leaves out
- Styling beyond readable defaults; static export (``toolkit.book.figures`` owns the book's figures).
"""

from __future__ import annotations

from toolkit.eval.bfcl import CATEGORIES, MODES
from toolkit.eval.report import PROMPT_ROW, PUBLISHED
from toolkit.eval.score import KINDS
from toolkit.plots import wrap_title

COLORS = {"prompt": "#4C78A8", "native": "#F58518", "constrained": "#54A24B"}


def _go():
    import plotly.graph_objects as go  # heavy: imported only when a figure is drawn

    return go


def accuracy(doc: dict):
    if "accuracy" not in doc:
        return None
    go = _go()
    rows = doc["accuracy"]["data"]["rows"]
    cats = list(dict.fromkeys(r["category"] for r in rows))
    fig = go.Figure()
    for m in MODES:
        rs = {r["category"]: r for r in rows if r["mode"] == m}
        if not rs:
            continue
        ys = [100 * rs[c]["accuracy"] if c in rs else None for c in cats]
        fig.add_bar(
            name=f"{m}",
            x=cats,
            y=ys,
            marker_color=COLORS[m],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [100 * (rs[c]["high"] - rs[c]["accuracy"]) if c in rs else 0 for c in cats],
                "arrayminus": [100 * (rs[c]["accuracy"] - rs[c]["low"]) if c in rs else 0 for c in cats],
            },
            text=[f"n={rs[c]['n']}" if c in rs else "" for c in cats],
            textposition="outside",
        )
    for (label, vals), sym in zip(PUBLISHED.items(), ("diamond", "x")):
        fig.add_scatter(
            name=label,
            x=cats,
            y=[vals.get(c) for c in cats],
            mode="markers",
            marker={"symbol": sym, "size": 11, "color": "black"},
        )
    fig.update_layout(
        barmode="group",
        yaxis={"title": "accuracy % (Wilson 95% interval)", "range": [0, 105]},
        title=f"BFCL accuracy by category × mode — {doc['accuracy']['meta']['model']}",
        legend={"orientation": "h", "y": -0.2},
        height=460,
    )
    return wrap_title(fig)


def taxonomy(doc: dict):
    if "accuracy" not in doc:
        return None
    go = _go()
    rows = doc["accuracy"]["data"]["rows"]
    kinds = [k for k in KINDS if k != "ok" and any(r["kinds"].get(k) for r in rows)]
    fig = go.Figure()
    xs = [[r["mode"] for r in rows], [r["category"] for r in rows]]
    for k in kinds:
        fig.add_bar(name=KINDS[k], x=xs, y=[r["kinds"].get(k, 0) / r["n"] * 100 for r in rows])
    fig.update_layout(
        barmode="stack",
        yaxis={"title": "% of cases"},
        height=460,
        title="How the failures fail (share of cases per mode and category)",
        legend={"orientation": "h", "y": -0.3},
    )
    return wrap_title(fig)


def pass_k(doc: dict):
    if "pass_k" not in doc:
        return None
    go = _go()
    t = doc["pass_k"]["data"]["table"]
    fig = go.Figure()
    fig.add_scatter(
        name="pass^k (unbiased, per task)", x=[r["k"] for r in t], y=[r["pass_hat_k"] for r in t], mode="lines+markers"
    )
    fig.add_scatter(
        name="p̄^k (naive)",
        x=[r["k"] for r in t],
        y=[r["naive"] for r in t],
        mode="lines+markers",
        line={"dash": "dash"},
    )
    d = doc["pass_k"]["data"]
    fig.update_layout(
        xaxis={"title": "k"},
        yaxis={"title": "P(all k samples succeed)", "range": [0, 1]},
        height=380,
        title=f"pass^k vs p̄^k — {len(d['tasks'])} tasks × {d['samples']} samples, T={d['temperature']}, "
        f"{d['mode']} mode",
    )
    return wrap_title(fig)


DODGE = {"pair, in series": -0.08, "pair, parallel": 0.08}


def chains(doc: dict):
    """Strict chain success per lever with its Wilson interval (solid) beside the product of step rates (dotted);
    "+ retry" rows are left to the table (they share the strict rows' product)."""
    if "chains" not in doc:
        return None
    go = _go()
    rows = [r for r in doc["chains"]["data"]["rows"] if not r["lever"].endswith("+ retry")]
    fig = go.Figure()
    palette = ("#9D755D", "#54A24B", "#4C78A8", "#E45756", "#B279A2")
    for lever, color in zip(dict.fromkeys(r["lever"] for r in rows), palette):
        rs = [r for r in rows if r["lever"] == lever]
        err = None
        if all("low" in r for r in rs):
            err = {
                "type": "data",
                "symmetric": False,
                "array": [r["high"] - r["success"] for r in rs],
                "arrayminus": [r["success"] - r["low"] for r in rs],
            }
        lo, hi = min(r["n"] for r in rs), max(r["n"] for r in rs)
        dodge = DODGE.get(lever, 0.0)  # pair levers share their k: drawn side by side
        fig.add_scatter(
            name=f"{lever}: measured (n={lo}{'' if lo == hi else f'–{hi}'} per point)",
            x=[r["k"] + dodge for r in rs],
            y=[r["success"] for r in rs],
            mode="lines+markers",
            line={"color": color},
            error_y=err,
        )
        fig.add_scatter(
            name=f"{lever}: product of step rates",
            x=[r["k"] + dodge for r in rs],
            y=[r["product"] for r in rs],
            mode="lines",
            line={"dash": "dot", "color": color},
        )
    fig.update_layout(
        xaxis={"title": "steps k (calls)"},
        yaxis={"title": "chain success", "range": [0, 1.05]},
        height=430,
        title="Table 14-11, measured: k-step chains (95% intervals) vs the product of per-step rates",
    )
    return wrap_title(fig)


CATEGORY_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#9D755D")


def levers(doc: dict, section: str = "levers"):
    """Accuracy per lever (rows) × category (one colour each) with Wilson intervals, horizontal so that many levers
    stay readable; the published Prompt row of each category as a dotted line in its colour."""
    if section not in doc:
        return None
    go = _go()
    rows = doc[section]["data"]["rows"]
    cats = list(dict.fromkeys(r["category"] for r in rows))
    names = list(dict.fromkeys(r["lever"] for r in rows))
    pub = PUBLISHED[PROMPT_ROW]
    fig = go.Figure()
    for i, cat in enumerate(cats):
        rs = {r["lever"]: r for r in rows if r["category"] == cat}
        k = CATEGORIES.index(cat) if cat in CATEGORIES else i  # one colour per category in every figure
        color = CATEGORY_COLORS[k % len(CATEGORY_COLORS)]
        n = sorted({rs[v]["n"] for v in names if v in rs})
        fig.add_bar(
            name=f"{cat} (n={'/'.join(map(str, n))})",
            y=names,
            x=[100 * rs[v]["accuracy"] if v in rs else None for v in names],
            orientation="h",
            marker_color=color,
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [100 * (rs[v]["high"] - rs[v]["accuracy"]) if v in rs else 0 for v in names],
                "arrayminus": [100 * (rs[v]["accuracy"] - rs[v]["low"]) if v in rs else 0 for v in names],
            },
        )
        if pub.get(cat) is not None:
            fig.add_vline(x=pub[cat], line_dash="dot", line_color=color)
    height = 260 + 18 * len(names) * max(1, len(cats))
    bottom = 80 + 22 * ((len(cats) + 1) // 2)  # the axis title, then the legend's rows under it
    fig.update_layout(
        barmode="group",
        xaxis={"title": "accuracy % (dotted: published Qwen2.5-0.5B-Instruct Prompt row)", "range": [0, 105]},
        yaxis={"autorange": "reversed", "automargin": True},
        height=height,
        margin={"b": bottom},
        legend={"orientation": "h", "yanchor": "top", "y": -60 / max(60, height - 110 - bottom)},
        title="Levers for parallel calls on seeded subsets — and what they cost elsewhere"
        if section == "levers"
        else "Levers on whole categories",
    )
    return wrap_title(fig)


def gate(doc: dict):
    """Share of cases per category that the first-token gate would send into a call, against its threshold."""
    if "gate" not in doc:
        return None
    go = _go()
    d = doc["gate"]["data"]
    ts = d["curve"]["thresholds"]
    fig = go.Figure()
    for cat, share in d["curve"]["share"].items():
        n = len(d["masses"][cat])
        fig.add_scatter(name=f"{cat} (n={n})", x=ts, y=[100 * v for v in share], mode="lines+markers")
    t0 = d["default_threshold"]
    fig.add_vline(x=t0, line_dash="dash", annotation_text=f"default {t0:g}", annotation_position="bottom left")
    fig.update_layout(
        xaxis={"title": "gate threshold on the first-step call mass", "range": [0, 1]},
        yaxis={"title": "% of cases the gate sends into a call", "range": [0, 105]},
        height=420,
        title="The first-token gate is a dial: irrelevance should stay low, every other category high",
    )
    return wrap_title(fig)


def descriptions(doc: dict):
    if "descriptions" not in doc:
        return None
    go = _go()
    rows = doc["descriptions"]["data"]["rows"]
    fig = go.Figure()
    fig.add_bar(
        name="accuracy %",
        x=[r["variant"] for r in rows],
        y=[100 * r["accuracy"] for r in rows],
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [100 * (r["high"] - r["accuracy"]) for r in rows],
            "arrayminus": [100 * (r["accuracy"] - r["low"]) for r in rows],
        },
        text=[f"n={r['n']}, {r['tool_tokens']:.0f} tool tokens" for r in rows],
        textposition="outside",
    )
    fig.update_layout(
        yaxis={"title": "selection accuracy %", "range": [0, 110]},
        height=380,
        title="Same tasks, different tool descriptions",
    )
    return wrap_title(fig)
