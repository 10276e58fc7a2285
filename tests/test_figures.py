import shutil
import subprocess
import time

import pytest

from toolkit import cost, figures


def test_growth_figure_is_drawn_from_cost():
    g = cost.growth(10_000, 2048, 30)
    fig = figures.context_growth_figure(g, "zh")
    assert list(fig.data[0].y) == g.from_cache and list(fig.data[1].y) == g.computed
    assert list(fig.data[2].y)[-1] == 1_252_320 and list(fig.data[3].y)[-1] == 61_440
    ratio = next(a.text for a in fig.layout.annotations if a.name == "ratio")
    assert "20.4" in ratio and "1,252,320" in ratio
    assert "上下文" in fig.layout.title.text
    assert "Context growth" in figures.context_growth_figure(g, "en").layout.title.text


def test_round_trip_comes_from_a_recorded_host_trace():
    trace = figures.round_trip_trace()
    assert "toolkit.host.run" in trace["producer"] and "no neural model ran" in trace["model"]
    kinds = [s["kind"] for s in trace["steps"]]
    assert kinds == ["user", "request", "model_output", "parse", "tool_result", "request", "model_output", "answer"]
    req1, req2 = [s for s in trace["steps"] if s["kind"] == "request"]
    assert req2["prompt_tokens"] > req1["prompt_tokens"] and req2["reused"] > req1["prompt_tokens"]
    result = next(s for s in trace["steps"] if s["kind"] == "tool_result")
    assert result["status"] == "ok" and result["result"]["result"] == 37.5  # the calculator really ran
    assert trace["steps"][-1]["text"].endswith("37.5。")
    for lang in ("zh", "en"):
        fig = figures.round_trip_figure(trace, lang)
        texts = " ".join(a.text for a in fig.layout.annotations)
        assert f"{req1['prompt_tokens']}" in texts and f"{req2['reused']}" in texts
        assert "toolkit.host.run" in texts  # the figure says what produced it


def test_mcp_figure_reads_the_sdk():
    facts = figures.mcp_architecture()
    assert facts["jsonrpc"] == "2.0" and facts["tool_fields"] == ["name", "description", "inputSchema"]
    assert facts["result_fields"] == ["content", "isError"] and "calculator" in facts["kit_tools"]
    texts = " ".join(a.text for a in figures.mcp_figure(facts, "zh").layout.annotations)
    assert facts["latest_protocol"] in texts and "宿主" in texts


def test_data_files_are_byte_identical_across_runs(tmp_path):
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        figures.write_all(out, formats=(), claims=True)
        runs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert runs[0].keys() == runs[1].keys()
    assert {"fig14-9_round_trip.json", "fig14-10_context_growth.json", "fig14-10_context_growth.csv",
            "fig14-11_mcp.json", "table14-11_success.json", "table14-11_success.csv", "claims.md"} <= runs[0].keys()
    for name in runs[0]:
        assert runs[0][name] == runs[1][name], name
    csv = runs[0]["table14-11_success.csv"].decode()
    assert "0.358" in csv and "0.005" in csv


def _cjk_font() -> bool:
    if not shutil.which("fc-list"):
        return False
    return "Noto Sans CJK" in subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(figures._find_chromium() is None or not _cjk_font(),
                    reason="needs Debian chromium and fonts-noto-cjk: run `make system`")
def test_full_run_writes_every_format(tmp_path):
    t0 = time.perf_counter()
    assert figures.cli(["--out", str(tmp_path), "--lang", "both"]) == 0
    elapsed = time.perf_counter() - t0
    stems = ["fig14-9_round_trip", "fig14-10_context_growth", "fig14-11_mcp", "table14-11_success"]
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<svg"}
    for stem in stems:
        for lang in ("zh", "en"):
            for fmt, head in magic.items():
                data = (tmp_path / f"{stem}.{lang}.{fmt}").read_bytes()
                assert head in data[:200] and len(data) > 2000, (stem, lang, fmt)
    svg = (tmp_path / "fig14-10_context_growth.zh.svg").read_text(encoding="utf-8")
    assert "上下文" in svg and "Noto Sans CJK" in svg
    assert (tmp_path / "claims.md").read_text(encoding="utf-8").startswith("# Claims ledger")
    print(f"figures: full run {elapsed:.1f} s")
