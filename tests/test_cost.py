import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit import cost


@settings(max_examples=200, deadline=None)
@given(T=st.integers(0, 200_000), delta=st.integers(1, 20_000), R=st.integers(1, 300), warm=st.booleans())
def test_walk_matches_closed_form(T, delta, R, warm):
    g = cost.growth(T, delta, R, warm)
    assert g.total_no_cache == cost.total_no_cache(T, delta, R) == sum(T + delta * k for k in range(1, R + 1))
    assert g.total_cache == cost.total_cache(T, delta, R, warm)
    assert math.isclose(g.ratio, cost.ratio_closed(T, delta, R, warm), rel_tol=1e-12)
    # every turn: what is computed plus what the cache serves is the whole prefix
    assert all(c + s == p for c, s, p in zip(g.computed, g.from_cache, g.prefix))
    assert g.prefix == [T + delta * k for k in g.turns]


def test_book_setting():
    g = cost.growth(10_000, 2048, 30)
    assert (g.total_no_cache, g.total_cache) == (1_252_320, 61_440)
    assert round(g.ratio, 1) == 20.4
    assert round(cost.ratio_closed(10_000, 2048, 60), 1) == 35.4
    assert g.prefix[0] == 12_048 and g.prefix[-1] == 71_440
    cold = cost.growth(10_000, 2048, 30, warm=False)
    assert cold.total_cache == 71_440 and cold.ratio < g.ratio
    assert cold.computed[0] == 12_048 and cold.from_cache[0] == 0


def test_rows_are_consistent():
    g = cost.growth(100, 10, 4)
    rows = g.rows()
    assert [r["turn"] for r in rows] == [1, 2, 3, 4]
    assert rows[-1]["cumulative_no_cache"] == g.total_no_cache == 4 * 100 + 10 * 10
    assert g.summary()["constant_term"] == 10.0


@pytest.mark.parametrize("args", [(10, 0, 3), (10, 5, 0), (-1, 5, 3)])
def test_bad_growth_input_is_a_clear_error(args):
    with pytest.raises(ValueError, match="need T"):
        cost.growth(*args)


def test_success_table_and_inverse():
    table = cost.success_table()
    assert [r["p"] for r in table] == [0.99, 0.95, 0.90]
    assert round(table[1][20], 3) == 0.358 and round(table[2][50], 3) == 0.005
    p = cost.required_p(0.9, 20)
    assert round(p, 4) == 0.9947
    assert math.isclose(cost.success(p, 20), 0.9)
    assert round(cost.steps_per_error(p)) == 190
    assert cost.steps_per_error(1.0) == math.inf
    with pytest.raises(ValueError):
        cost.success(1.2, 3)
    with pytest.raises(ValueError):
        cost.required_p(0.9, 0)


@given(P=st.floats(0.01, 0.999), k=st.integers(1, 500))
def test_inverse_round_trips(P, k):
    assert math.isclose(cost.success(cost.required_p(P, k), k), P, rel_tol=1e-9)


def test_flops_and_bandwidth():
    assert cost.decode_flops_per_token(8e9) == 16e9
    assert math.isclose(cost.decode_flops(37e9, 15_000), 1.11e15)
    b = cost.decode_budget("Llama 3 8B", bandwidth=3.35e12)
    assert math.isclose(b.tokens_per_s_bound, 3.35e12 / (8.03e9 * 2))
    assert math.isclose(b.seconds_floor * b.tokens_per_s_bound, 15_000)
    assert math.isclose(cost.arithmetic_intensity(8e9), 1.0)
    # the attention term grows with context; at zero context it vanishes
    assert cost.attention_flops_per_token(32, 4096, 0) == 0
    assert cost.attention_flops_per_token(32, 4096, 10_000) == 4 * 32 * 4096 * 10_000
    with pytest.raises(ValueError):
        cost.bandwidth_tokens_per_s(8e9, 0)


# ---------------------------------------------------------------- the slider views (no browser)
def _move(slider, value):
    """Set a widget value the way a student's drag does (traitlets fires observe). How fast the re-render is
    (target <= 100 ms) is measured by benchmarks/latency.py, not asserted here."""
    slider.value = value


def test_growth_view_sliders_update_figure_in_place():
    from toolkit.widgets.cost import GrowthView

    v = GrowthView()
    fig = v.figure
    before = [list(tr.y) for tr in fig.data]
    for control, value in ((v.sliders["T"], 4000), (v.sliders["delta"], 1024), (v.sliders["R"], 45), (v.warm, False)):
        _move(control, value)
    assert v.figure is fig  # same FigureWidget, updated in place
    want = cost.growth(4000, 1024, 45, warm=False)
    assert [list(tr.y) for tr in fig.data] != before
    assert list(fig.data[0].y) == want.from_cache and list(fig.data[1].y) == want.computed
    assert list(fig.data[2].y) == want.cum_no_cache and list(fig.data[3].y) == want.cum_cache
    ratio = next(a.text for a in fig.layout.annotations if a.name == "ratio")
    assert f"{want.total_no_cache:,}" in ratio and f"{want.ratio:.1f}" in ratio
    assert list(fig.data[4].y) == [4000, 4000]  # the tool-definition line moved
    assert f"{want.total_cache:,}" in v.summary.value


def test_decay_view_table_inverse_and_curve_follow_sliders():
    from toolkit.widgets.cost import DecayView

    v = DecayView()
    y_before = list(v.figure.data[-2].y)
    for control, value in ((v.p, 0.97), (v.k, 33), (v.target, 0.8)):
        _move(control, value)
    assert list(v.figure.data[-2].y) != y_before
    assert list(v.figure.data[-2].y) == [cost.success(0.97, j) for j in range(0, 61)]
    assert v.figure.data[-1].x == (33,) and v.figure.data[-1].y == (cost.success(0.97, 33),)
    assert v.ks == (10, 20, 33, 50) and v.ps == (0.99, 0.95, 0.90, 0.97)
    row = v.rows[-1]
    assert row[33] == cost.success(0.97, 33) and f"{row[33]:.3f}" in v.table.value
    assert v.required == cost.required_p(0.8, 33) and f"{v.required:.4f}" in v.inverse.value


def test_decode_view_presets():
    from toolkit.widgets.cost import DecodeView

    v = DecodeView()
    y0 = list(v.figure.data[0].y)
    for control, value in (
        (v.model, "DeepSeek-V3 (37B active)"),
        (v.precision, "INT4 (0.5 byte)"),
        (v.hardware, "NVIDIA H200 (4.8 TB/s)"),
        (v.tokens, 30_000),
    ):
        _move(control, value)
    assert list(v.figure.data[0].y) != y0
    spec = cost.MODELS["DeepSeek-V3 (37B active)"]
    assert list(v.figure.data[0].y) == [
        cost.bandwidth_tokens_per_s(spec.active_params, bw, 0.5) for bw in cost.HARDWARE.values()
    ]
    assert v.budget.total_flops == cost.decode_flops(37e9, 30_000)
    assert v.budget.tokens_per_s_bound == cost.bandwidth_tokens_per_s(37e9, 4.8e12, 0.5)
    assert "74.0 GFLOPs" in v.text.value
