"""toolkit/widgets/plot.py and the views built on it, checked as widget state without a browser: what the Output
widget carries is exactly the view's current figure, after every control move, and no figure has a fixed width."""

import plotly.graph_objects as go
import pytest

from toolkit.widgets.plot import LIVE, MIME, FigureView, mime_bundle


def _drawn(view: FigureView) -> dict:
    (out,) = view.widget.outputs
    assert out["output_type"] == "display_data"
    return out["data"][MIME]


def test_figure_view_draws_the_current_figure_only_after_redraw():
    view = FigureView(go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout=dict(title="t", width=1200, height=300)))
    assert view in LIVE
    drawn = _drawn(view)
    assert drawn["data"][0]["y"] == [3, 4] and drawn["layout"]["title"]["text"] == "t"
    assert "width" not in drawn["layout"] and drawn["layout"]["autosize"] is True  # fits its output area
    assert view.widget.layout.min_height == "300px"  # the page keeps the figure's room while it draws
    view.figure.data[0].y = [5, 6]
    assert _drawn(view)["data"][0]["y"] == [3, 4]  # not redrawn yet: the page still shows the old figure
    view.redraw()
    assert _drawn(view)["data"][0]["y"] == [5, 6] and view.redraws == 2 and view.last_ms >= 0
    fixed = FigureView(go.Figure(layout=dict(width=420)), responsive=False)
    assert _drawn(fixed)["layout"]["width"] == 420


def test_mime_bundle_is_plain_json():
    import json

    import numpy as np

    bundle = mime_bundle(go.Figure(go.Bar(x=[0, 1, 2], y=np.array([1.5, 2.5, 3.5]))))
    assert json.loads(json.dumps(bundle)) == bundle
    y = bundle[MIME]["data"][0]["y"]  # plotly 6+ sends numpy arrays as typed arrays, which plotly.js decodes
    assert np.frombuffer(__import__("base64").b64decode(y["bdata"]), dtype=y["dtype"]).tolist() == [1.5, 2.5, 3.5]


def _views():
    from toolkit.book.catalog import realistic_tools
    from toolkit.widgets.cost import DecayView, DecodeView, GrowthView
    from toolkit.widgets.toolcost import ToolCountCost

    g, d, b = GrowthView(), DecayView(), DecodeView()
    t = ToolCountCost(tools=realistic_tools(12), template="qwen3", n=3)
    return [(g, g.sliders["T"], 4000), (d, d.k, 33), (b, b.model, "DeepSeek-V3 (37B active)"), (t, t.slider, 5)]


@pytest.mark.parametrize("i", range(4), ids=["growth", "decay", "decode", "toolcount"])
def test_each_view_redraws_its_figure_on_a_control_move(i):
    view, control, value = _views()[i]
    before = _drawn(view.plot)
    control.value = value
    after = _drawn(view.plot)
    assert after != before
    assert after == mime_bundle(view.figure)[MIME]  # exactly the plain figure tests read
    assert "width" not in after["layout"]


def test_wrap_breaks_long_titles_before_a_parenthesis():
    from toolkit.plots import wrap

    assert wrap("short title") == "short title"
    assert (
        wrap("Fig 14-10 Context growth in an agent loop (T = 10,000, Δ = 2,048, R = 30)")
        == "Fig 14-10 Context growth in an agent loop<br>(T = 10,000, Δ = 2,048, R = 30)"
    )
    zh = wrap("图 14-10 Agent 循环的上下文增长（T = 10,000，Δ = 2,048，R = 30）")
    assert zh == "图 14-10 Agent 循环的上下文增长<br>（T = 10,000，Δ = 2,048，R = 30）"  # CJK counts double
    assert all(len(line) <= 52 for line in wrap("word " * 40).split("<br>"))
    assert wrap("x" * 80) == "x" * 80  # nowhere to break: left as is
    two = wrap("Recall@k, BM25 alone vs reranked by Qwen2.5-Coder-0.5B-Instruct<br>cost 729 tokens")
    assert two.endswith("<br>cost 729 tokens") and all(len(line) <= 52 for line in two.split("<br>"))  # each line


def test_wrapped_title_gets_a_top_margin_for_its_lines():
    import plotly.graph_objects as go

    from toolkit.plots import title_margin, wrap_title

    long = wrap_title(go.Figure(layout_title_text="word " * 40))  # 4 lines of at most 52 columns
    lines = long.layout.title.text.count("<br>") + 1
    assert lines >= 4 and long.layout.margin.t == title_margin(long.layout.title.text) > 100
    short = wrap_title(go.Figure(layout_title_text="short"))
    assert short.layout.margin.t is None  # plotly's default kept when it is enough
    roomy = wrap_title(go.Figure(layout_title_text="word " * 40, layout_margin_t=300))
    assert roomy.layout.margin.t == 300  # never shrunk


def test_stepper_redraws_the_selected_step():
    from types import SimpleNamespace as N

    from toolkit.widgets.stepper import Stepper

    steps = [
        N(
            index=i,
            allowed=[151_936, 1, 12][i % 3],
            top_after=[(1, "a", 0.5, 0.9), (2, "b", 0.2, 0.1)],
            top_before=[(3, "c", 0.3, 0.0)],
            chosen=1 if i else 2,
            chosen_text="a",
            removed_mass=0.5,
            p_before=0.5,
            p_after=0.9,
        )
        for i in range(5)
    ]
    view = Stepper(N(steps=steps, temperature=0, seed=0, vocab_width=151_936), title="a long title " * 6)
    assert all(len(line) <= 52 for line in view.figure.layout.title.text.split("<br>"))
    view.slider.value = 2
    drawn = _drawn(view.plot)
    assert drawn["data"][1]["x"] == [3] and drawn["data"][1]["y"] == [12]  # the marker moved to step 3
    assert drawn == mime_bundle(view.figure)[MIME] and "width" not in drawn["layout"]
