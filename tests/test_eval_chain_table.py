"""Table 14-11 measured: intervals, the product over a chain's own steps, the bound, and the resumable run."""

import json

import pytest

from toolkit.backends.scripted import ScriptedBackend
from toolkit.eval import chain_table, choices


@pytest.fixture(scope="module")
def tok():
    from toolkit.models import qwen_tokenizer

    return qwen_tokenizer("qwen2.5")


def row(lever, k, ok, n=1, pair=False):
    return {"lever": lever, "k": k, "pair": pair, "strict": ok, "retry": ok, "strict_steps_ok": k * ok,
            "retry_steps_ok": k * ok, "rounds": k}  # fmt: skip


def test_table_intervals_and_products():
    rows = [row("x", 2, True), row("x", 2, False), row("x", 2, True), row("p", 5, True, pair=True)]
    rates = {"x": {"landmark_city": 0.9, "get_weather": 0.5}, "p": {"landmark_city": 1.0, "get_weather": 0.5}}
    t = {(r["lever"], r["k"]): r for r in chain_table.table(rows, rates)}
    x = t[("x", 2)]
    assert x["n"] == 3 and x["ok"] == 2 and x["success"] == pytest.approx(2 / 3)
    assert x["low"] < 2 / 3 < x["high"] and x["product"] == pytest.approx(0.45)
    assert t[("x + retry", 2)]["product"] == x["product"]
    assert t[("p", 5)]["product"] is None  # "difference" was not measured: no product, never a guess
    rates["p"]["difference"] = 0.8
    t = {(r["lever"], r["k"]): r for r in chain_table.table(rows, rates)}
    assert t[("p", 5)]["product"] == pytest.approx(1.0 * 1.0 * 0.5 * 0.5 * 0.8)
    assert chain_table.steps_of(4, pair=True) == ["landmark_city", "landmark_city", "get_weather", "get_weather"]


def test_bound_reads_the_direction_from_the_intervals():
    def r(success, product, n=40):
        from toolkit.eval.stats import wilson

        lo, hi = wilson(round(success * n), n)
        return {"lever": "x", "k": 1, "success": success, "product": product, "low": lo, "high": hi}

    assert chain_table.bound([r(0.2, 0.9), r(0.3, 0.8), r(0.5, 0.5)])["verdict"] == "upper"
    b = chain_table.bound([r(0.9, 0.2), r(0.8, 0.3), r(0.1, 0.9)])
    assert b["verdict"] == "lower" and b["product_below_interval"] == 2 and b["product_above_interval"] == 1
    assert (
        chain_table.bound([r(0.5, 0.55), {"success": 0, "product": None, "low": 0, "high": 1}])["verdict"] == "neither"
    )


def test_measure_resumes_from_its_cache_and_runs_nothing_when_cached_only(tok):
    class Mem(dict):
        def get(self, k):
            return dict.get(self, k)

        def put(self, k, v):
            self[k] = json.loads(json.dumps(v))

    call = '<tool_call>\n{"name": "landmark_city", "arguments": {"landmark": "Eiffel Tower"}}\n</tool_call>'
    backend = ScriptedBackend(tok, [call, "done"] * 100)
    mem, marks = Mem(), choices.LANDMARKS[:1]
    first = list(chain_table.measure(backend, tok, marks, ["constrained", "pair, parallel"], [1, 2], [2], cache=mem))
    kinds = [(r["kind"], r.get("step") or r["k"]) for r in first]
    assert kinds.count(("step", "difference")) == 1 and sum(k == "chain" for k, _ in kinds) == 3
    assert not any(r["cached"] for r in first) and len(mem) == len(first)
    eiffel = [r for r in first if r["kind"] == "chain" and r["k"] == 1 and not r["pair"]][0]
    assert eiffel["strict"] and eiffel["log"][0]["city"] == "Paris"
    again = list(chain_table.measure(None, tok, marks, ["constrained", "pair, parallel"], [1, 2], [2], cache=mem))
    assert [r["cached"] for r in again] == [True] * len(first)  # no backend needed: nothing ran
    more = list(chain_table.measure(None, tok, marks, ["constrained"], [1, 2, 3], cache=mem, cached_only=True))
    assert {r["k"] for r in more if r["kind"] == "chain"} == {1, 2}  # k=3 was never run: left out, not invented
    rates, ns = chain_table.step_rates(first, ["constrained", "pair, parallel"])
    assert rates["pair, parallel"]["landmark_city"] == rates["constrained"]["landmark_city"] == 1.0
    assert "difference" in rates["pair, parallel"] and ns["constrained"]["get_weather"] == 1


def test_plots_draw_intervals_and_levers():
    from toolkit.eval import plots

    rows = chain_table.table([row("x", 2, True), row("x", 2, False)], {"x": {"landmark_city": 1.0, "get_weather": 0.5}})
    fig = plots.chains({"chains": {"data": {"rows": rows}}})
    measured, product = fig.data
    assert list(measured.y) == [0.5] and list(product.y) == [0.5] and "(n=2 per point)" in measured.name
    assert measured.error_y.array[0] == pytest.approx(rows[0]["high"] - 0.5)  # the "+ retry" row is not drawn
    lv = [
        {"lever": "baseline", "category": "parallel", "n": 8, "accuracy": 0.0, "low": 0.0, "high": 0.32},
        {"lever": "hint", "category": "parallel", "n": 8, "accuracy": 0.25, "low": 0.07, "high": 0.59},
    ]
    fig = plots.levers({"levers": {"data": {"rows": lv}}})
    (bars,) = [t for t in fig.data if t.type == "bar"]
    assert bars.name == "parallel (n=8)" and list(bars.y) == ["baseline", "hint"] and list(bars.x) == [0.0, 25.0]
    assert bars.error_x.array[1] == pytest.approx(34.0)
    assert fig.layout.shapes[0].x0 == 53.5 and plots.levers({}) is None  # the published row, as a line
    assert plots.levers({"levers_full": {"data": {"rows": lv}}}, "levers_full").data[0].y == ("baseline", "hint")
