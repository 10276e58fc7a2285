"""toolkit.eval.sections: what benchmarks/bfcl.py saves, built from what it ran."""

from types import SimpleNamespace as R

from toolkit.eval.sections import ItemCache, case_rows, lever_cases, lever_rows, pass_k
from toolkit.eval.stats import gate_curve


def test_pass_k_keeps_complete_tasks_only():
    results = [R(id="a", ok=True), R(id="a", ok=True), R(id="b", ok=True), R(id="b", ok=False), R(id="c", ok=True)]
    per_task, table = pass_k(results, 2)
    assert per_task == {"a": [True, True], "b": [True, False]}  # c has one sample of two: left out
    assert [round(r["pass_hat_k"], 3) for r in table] == [0.75, 0.5]


def test_lever_rows_carry_the_baseline_and_the_published_rate():
    run = lambda ok, calls: R(id="x", ok=ok, kind="ok" if ok else "wrong_value", text="t", calls=calls, mode="m")  # noqa: E731
    results = {("baseline", "parallel"): [run(False, [1]), run(False, [1])], ("list", "parallel"): [run(True, [1, 2])]}
    rows = {r["lever"]: r for r in lever_rows(results, {"parallel": 0.8})}
    assert (
        rows["list"]["baseline"] == 0.0
        and rows["list"]["calls_per_case"] == 2
        and rows["list"]["published_prompt"] == 0.8
    )
    assert [c["lever"] for c in lever_cases(results)] == ["baseline", "baseline", "list"]
    rows_of = case_rows([R(id="x", mode="m", ok=True, kind="ok", text="t", calls=[], prompt_tokens=3, new_tokens=4)])
    assert rows_of == [dict(id="x", mode="m", ok=True, kind="ok", text="t", calls=[], prompt_tokens=3, new_tokens=4)]


def test_gate_curve_and_the_item_cache(tmp_path):
    curve = gate_curve({"a": {"1": 0.2, "2": 0.9}}, thresholds=[0.5, 0.1])
    assert curve == {"thresholds": [0.1, 0.5], "share": {"a": [1.0, 0.5]}}
    cache = ItemCache(str(tmp_path), "m", 1, seed=0)
    assert cache.get("k") is None
    cache.put("k", {"ok": True})
    assert cache.get("k") == {"ok": True, "key": "k"}
