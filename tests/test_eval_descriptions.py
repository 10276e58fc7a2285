"""Description variants keep the task and its answer; plots and the results file round-trip."""

import json

from toolkit.eval import bfcl, plots, report
from toolkit.eval.choices import VARIANTS
from toolkit.eval.descriptions import renamed_answer, selected, variants
from toolkit.eval.lint import lint
from toolkit.eval.read import Decoded
from toolkit.eval.run import Result
from toolkit.eval.score import score


def test_variants_change_only_what_they_say():
    for case in bfcl.load("multiple")[:40]:
        vs = variants(case)
        assert set(vs) == set(VARIANTS)
        target = next(iter(case.answers[0]))
        orig = vs["original"]
        for name, tools in vs.items():
            assert [t["function"]["parameters"] for t in tools] == [t["function"]["parameters"] for t in orig]
            assert target in [t["function"]["name"] for t in tools], name
            c = renamed_answer(case, tools)
            (want,) = case.answers[:1]
            args = {
                p: next(v for v in vals if v != "")
                for p, vals in want[target].items()
                if any(v != "" for v in vals)
                and p in next(f for f in c.functions if f["name"] == target)["parameters"]["properties"]
            }
            if not any(isinstance(v, (dict, list)) for v in args.values()):
                assert score(c, Decoded([{target: args}])).ok, (case.id, name)
        if len(orig) > 1:
            assert all(t["function"]["description"].startswith("Handles ") for t in vs["vague"])
            assert all("Do not use it to" in t["function"]["description"] for t in vs["improved"])
            names = [t["function"]["name"] for t in vs["lookalike"]]
            assert all(n.startswith(target) for n in names) and len(set(names)) == len(names)


def test_the_linter_sees_what_the_variants_did():
    case = next(c for c in bfcl.load("multiple") if len(c.functions) >= 2)
    vs = variants(case)
    rules = lambda tools: {f.rule for f in lint(tools)}
    assert "G1" in rules(vs["vague"])
    assert "K1" in rules(vs["lookalike"])
    assert "G2" in rules(vs["original"]) and "G2" not in rules(vs["improved"])


def test_selected():
    case = bfcl.load("multiple")[0]
    target = next(iter(case.answers[0]))
    assert selected([{target: {}}], case) and not selected([{target: {}}, {target: {}}], case)
    assert not selected([{"other": {}}], case) and not selected([], case)


def _doc(tmp_path):
    rs = [
        Result(
            "simple_python_0", "simple_python", m, 0, "", ok, "ok" if ok else "no_call", "", [], 250, 30, 1.0, "stop"
        )
        for m in bfcl.MODES
        for ok in (True, False, False)
    ]
    rows = report.summarize(rs)
    path = tmp_path / "bfcl_test.json"
    report.save_results(path, "accuracy", {"rows": rows}, report.meta("test-model", repo=tmp_path))
    report.save_results(
        path,
        "pass_k",
        {
            "table": [{"k": 1, "pass_hat_k": 0.5, "naive": 0.5, "tasks": 2}],
            "tasks": {"a": [True], "b": [False]},
            "samples": 8,
            "temperature": 0.7,
            "mode": "constrained",
        },
        report.meta("test-model", repo=tmp_path),
    )
    return path


def test_results_file_keeps_sections_and_writes_markdown(tmp_path):
    path = _doc(tmp_path)
    doc = json.loads(path.read_text())
    assert set(doc) == {"accuracy", "pass_k"} and doc["accuracy"]["meta"]["model"] == "test-model"
    assert {"date", "machine", "commit"} <= set(doc["accuracy"]["meta"])
    md = path.with_suffix(".md").read_text()
    assert "| simple_python | 3, **33.3**" in md and "pass^k" in md
    row = doc["accuracy"]["data"]["rows"][0]
    assert row["n"] == 3 and row["correct"] == 1 and row["low"] < 1 / 3 < row["high"]


def test_plots_read_the_saved_results(tmp_path):
    doc = json.loads(_doc(tmp_path).read_text())
    fig = plots.accuracy(doc)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [b.name for b in bars] == list(bfcl.MODES) and abs(bars[0].y[0] - 100 / 3) < 1e-9
    assert plots.taxonomy(doc).data[0].name == "no call when one was needed"
    assert list(plots.pass_k(doc).data[0].y) == [0.5]
    assert plots.chains(doc) is None and plots.descriptions(doc) is None and plots.gate(doc) is None
    doc["gate"] = {
        "meta": {},
        "data": {
            "curve": {"thresholds": [0.5, 0.85], "share": {"parallel": [1.0, 0.5], "irrelevance": [0.5, 0.0]}},
            "masses": {"parallel": {"a": 0.9, "b": 0.6}, "irrelevance": {"x": 0.7, "y": 0.1}},
            "default_threshold": 0.85,
        },
    }
    fig = plots.gate(doc)
    assert [t.name for t in fig.data] == ["parallel (n=2)", "irrelevance (n=2)"]
    assert list(fig.data[0].y) == [100.0, 50.0] and fig.layout.shapes[0].x0 == 0.85


def test_every_saved_results_figure_has_a_title_that_fits_a_narrow_window():
    """A 1,024-px window leaves ~600 px for a figure: each title line stays within 52 columns (the browser test
    checks the drawn text; this checks the data, with the saved results' long model label)."""
    import json
    from pathlib import Path

    from toolkit.plots import _cols

    doc = json.loads((Path(__file__).parents[1] / "benchmarks/results/bfcl_qwen2.5-coder-0.5b.json").read_text())
    figs = (plots.accuracy, plots.taxonomy, plots.pass_k, plots.chains, plots.descriptions, plots.levers, plots.gate)
    drawn = [f(doc) for f in figs]
    titles = [fig.layout.title.text for fig in drawn if fig is not None]
    assert len(titles) >= 3 and any(len(t) > 52 for t in titles)  # long enough to need wrapping
    for t in titles:
        assert all(_cols(line) <= 52 for line in t.split("<br>")), t
