import re
import shutil
import subprocess
import time

import pytest

from toolkit import cost
from toolkit.book.diagrams import arrow_rows, round_trip_figure, round_trip_trace
from toolkit.book.figures import _find_chromium, write_all
from toolkit.book.fonts import _font_file, embed_font, svg_text
from toolkit.book.mcp_diagram import mcp_architecture, mcp_figure
from toolkit.commands.figures import cli
from toolkit.plots import context_growth_figure, update_context_growth


def test_growth_figure_is_drawn_from_cost():
    g = cost.growth(10_000, 2048, 30)
    fig = context_growth_figure(g, "zh")
    assert list(fig.data[0].y) == g.from_cache and list(fig.data[1].y) == g.computed
    assert list(fig.data[2].y)[-1] == 1_252_320 and list(fig.data[3].y)[-1] == 61_440
    ratio = next(a.text for a in fig.layout.annotations if a.name == "ratio")
    assert "20.4" in ratio and "1,252,320" in ratio
    assert "上下文" in fig.layout.title.text
    assert "Context growth" in context_growth_figure(g, "en").layout.title.text
    # one legend per panel; the tool-block line is a legend entry, not a label over the bars
    assert [d.legend or "legend" for d in fig.data] == ["legend", "legend", "legend2", "legend2", "legend"]
    assert list(fig.data[4].y) == [g.T, g.T] and "10,000" in fig.data[4].name
    assert [a.name for a in fig.layout.annotations if a.name] == ["ratio"] and not fig.layout.shapes
    update_context_growth(fig, cost.growth(5_000, 1000, 10), "zh")
    assert list(fig.data[4].y) == [5_000, 5_000] and list(fig.data[2].x) == list(range(1, 11))


def test_round_trip_is_the_books_beijing_example_with_six_numbered_steps():
    trace = round_trip_trace()
    assert "toolkit.loop.loop.run" in trace["producer"] and "no neural model ran" in trace["model"]
    assert "北京" in trace["example"]
    kinds = [s["kind"] for s in trace["steps"]]
    assert kinds == ["user", "request", "model_output", "parse", "tool_result", "request", "model_output", "answer"]
    req1, req2 = [s for s in trace["steps"] if s["kind"] == "request"]
    assert req2["prompt_tokens"] > req1["prompt_tokens"] and req2["reused"] > req1["prompt_tokens"]
    call = next(s for s in trace["steps"] if s["kind"] == "parse")
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "北京"}
    result = next(s for s in trace["steps"] if s["kind"] == "tool_result")
    assert result["status"] == "ok" and result["result"]["city"] == "北京"  # get_weather really ran
    for lang in ("zh", "en"):
        arrows = arrow_rows(trace, lang)
        assert [a["step"] for a in arrows if a["step"]] == ["①", "②", "③", "④", "⑤", "⑥"]  # each once, in order
        fig = round_trip_figure(trace, lang)
        texts = " ".join(a.text for a in fig.layout.annotations)
        assert f"{req1['prompt_tokens']}" in texts and f"{req2['reused']}" in texts
    zh = " ".join(a.text for a in round_trip_figure(trace, "zh").layout.annotations)
    prose = re.sub(r"<[^>]*>|\{[^}]*\}|[A-Za-z_]+\(|\b[a-z_]+=|[A-Za-z]*\d+[A-Za-z]*", " ", zh)
    english = [w for w in re.findall(r"[A-Za-z]{3,}", prose) if w not in ("JSON", "role", "tool", "user")]
    assert english == [], english  # zh text is Chinese (tokens, JSON and code names aside)


def test_round_trip_labels_stay_between_lifelines():
    trace = round_trip_trace()
    fig = round_trip_figure(trace, "zh")
    for a in fig.layout.annotations:
        if a.showarrow is False and a.y is not None and a.y < 0:  # labels and notes, not the lane headers
            if a.xanchor == "center":
                assert abs(a.x - round(a.x - 0.5) - 0.5) < 1e-9, a.text  # centred in a gap
            else:
                assert abs(a.x - round(a.x)) > 0.04, a.text  # a note starts beside its lifeline


def test_mcp_figure_reads_the_sdk_and_pins_no_revision():
    facts = mcp_architecture()
    assert facts["jsonrpc"] == "2.0" and facts["tool_fields"] == ["name", "description", "inputSchema"]
    assert facts["result_fields"] == ["content", "isError"] and "calculator" in facts["kit_tools"]
    assert facts["call_fields"] == ["name", "arguments"]
    for lang in ("zh", "en"):
        texts = " ".join(a.text for a in mcp_figure(facts, lang).layout.annotations)
        assert facts["latest_protocol"] not in texts and facts["sdk"] not in texts and "20" not in texts
    zh = " ".join(a.text for a in mcp_figure(facts, "zh").layout.annotations)
    assert "宿主" in zh and "推理引擎" in zh and "kit" not in zh


def test_embedded_font_covers_every_character(tmp_path):
    if _font_file(400) is None:
        pytest.skip("needs fonts-noto-cjk: run `make system`")
    import base64
    import io

    from fontTools.ttLib import TTFont

    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg"><text style="font-family: \'Noto Sans CJK SC\', Arial">'
        "图 14-9 <tspan>宿主 &amp; host</tspan></text></svg>"
    )
    out = embed_font(svg)
    assert svg_text(out) == "图 14-9 宿主 & host"
    fonts = re.findall(r"base64,([A-Za-z0-9+/=]+)", out)
    assert len(fonts) == 2 and "font-family: 'FigureText'" in out
    for data in fonts:
        cmap = TTFont(io.BytesIO(base64.b64decode(data))).getBestCmap()
        assert {ord(c) for c in "图 14-9 宿主 & host"} <= set(cmap)


def test_data_files_are_byte_identical_across_runs(tmp_path):
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        write_all(out, formats=(), claims=True)
        runs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert runs[0].keys() == runs[1].keys()
    assert {
        "fig14-9_round_trip.json",
        "fig14-10_context_growth.json",
        "fig14-10_context_growth.csv",
        "fig14-11_mcp.json",
        "table14-11_success.json",
        "table14-11_success.csv",
        "claims.md",
    } <= runs[0].keys()
    for name in runs[0]:
        assert runs[0][name] == runs[1][name], name
    csv = runs[0]["table14-11_success.csv"].decode()
    assert "0.358" in csv and "0.005" in csv


def _cjk_font() -> bool:
    if not shutil.which("fc-list"):
        return False
    return "Noto Sans CJK" in subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(
    _find_chromium() is None or not _cjk_font(), reason="needs Debian chromium and fonts-noto-cjk: run `make system`"
)
def test_full_run_writes_every_format(tmp_path):
    t0 = time.perf_counter()
    assert cli(["--out", str(tmp_path), "--lang", "both"]) == 0
    elapsed = time.perf_counter() - t0
    stems = ["fig14-9_round_trip", "fig14-10_context_growth", "fig14-11_mcp", "table14-11_success"]
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<svg"}
    for stem in stems:
        for lang in ("zh", "en"):
            for fmt, head in magic.items():
                data = (tmp_path / f"{stem}.{lang}.{fmt}").read_bytes()
                assert head in data[:200] and len(data) > 2000, (stem, lang, fmt)
    svg = (tmp_path / "fig14-10_context_growth.zh.svg").read_text(encoding="utf-8")
    assert "上下文" in svg and "@font-face" in svg and "base64," in svg  # readable without the font installed
    assert (tmp_path / "claims.md").read_text(encoding="utf-8").startswith("# Claims ledger")
    print(f"figures: full run {elapsed:.1f} s")
