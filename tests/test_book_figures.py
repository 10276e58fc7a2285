import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from toolkit import cost
from toolkit.book.charts import growth_print_figure, table_latex, table_markdown, table_print_figure, transport_rows
from toolkit.book.diagrams import arrow_rows, round_trip_figure, round_trip_trace
from toolkit.book.export import ExportTimeout, export
from toolkit.book.figures import CAPTIONS, _find_chromium, write_all
from toolkit.book.fonts import embed_font, font_file, svg_text
from toolkit.book.mcp_diagram import mcp_architecture, mcp_figure, mcp_session_events, mcp_session_trace
from toolkit.book.typeset import CANVAS_PX, MIN_PT, PRINT_MM, break_points, print_pt, rich_lines, wrap_plain
from toolkit.commands.figures import cli
from toolkit.mcp.process import pid_alive
from toolkit.plots import context_growth_figure, update_context_growth


def test_growth_figure_is_drawn_from_cost():
    g = cost.growth(10_000, 2048, 30)
    fig = context_growth_figure(g, "zh")
    assert list(fig.data[0].y) == g.from_cache and list(fig.data[1].y) == g.computed
    assert list(fig.data[2].y)[-1] == 1_252_320 and list(fig.data[3].y)[-1] == 61_440
    update_context_growth(fig, cost.growth(5_000, 1000, 10), "zh")
    assert list(fig.data[4].y) == [5_000, 5_000] and list(fig.data[2].x) == list(range(1, 11))


def test_print_growth_figure_shows_the_cold_start_and_defines_its_symbols():
    for lang in ("zh", "en"):
        fig = growth_print_figure(lang=lang)
        texts = {a.name: a.text for a in fig.layout.annotations if a.name}
        assert "20.4×" in texts["ratio"] and "71,440" in texts["ratio"] and "17.5×" in texts["ratio"]
        assert "4.9 + 15.5" in texts["ratio"] and "4.88" not in texts["ratio"]  # the book prints 4.9
        assert "T = 10,000" in texts["setting"] and "Δ = 2,048" in texts["setting"]
        cold = next(d for d in fig.data if list(d.x) == [1])
        assert list(cold.y) == [10_000] and cold.marker.pattern.shape  # turn 1's tool block, hatched
        # one colour, one meaning: the orange of "computed with a cache" is the warm and the cold line's colour
        computed = next(d for d in fig.data if d.type == "bar" and len(d.x) == 30 and d.y[0] == 2048)
        lines = [d for d in fig.data if d.type == "scatter"]
        assert {d.line.color for d in lines if d.y[-1] < 100_000} == {computed.marker.color}
        assert not fig.layout.title.text  # the caption lives outside the image


def test_line_breaks_keep_words_numbers_and_punctuation_together():
    text = "工具定义渲染进系统段，连同问题共 225 个词元（其中工具块 169 个），模板把它放进 user 轮"
    cuts = set(break_points(text))
    for word in ("工具", "定义", "渲染", "系统", "问题", "词元", "模板"):
        i = text.index(word)
        assert i + 1 not in cuts, word  # never inside a word ("模/板")
    assert text.index("，") not in cuts and text.index("）") not in cuts  # no line starts with "，" or "）"
    assert text.index("（") + 1 not in cuts  # no line ends with "（"
    assert text.index("个词元") not in cuts  # "225 个" stays together
    for width in (110, 150, 230):
        lines = wrap_plain(text, width)
        assert "".join(lines).replace(" ", "") == text.replace(" ", "")
        assert all(not ln.endswith("（") and not ln.startswith(("，", "）")) for ln in lines), lines
    rich, _ = rich_lines('runs `get_weather` with `{"city": "北京"}` now', 60)
    spans = re.findall(r"<span[^>]*>(.*?)</span>", rich)
    assert spans == ["get_weather", "{&quot;city&quot;:\u00a0&quot;北京&quot;}".replace("&quot;", '"')], spans


def test_round_trip_is_the_books_example_with_six_numbered_steps():
    for lang in ("zh", "en"):
        trace = round_trip_trace(lang)
        assert "toolkit.loop.loop.run" in trace["producer"] and "no neural model ran" in trace["model"]
        kinds = [s["kind"] for s in trace["steps"]]
        assert kinds == ["user", "request", "model_output", "parse", "tool_result", "request", "model_output", "answer"]
        req1, req2 = [s for s in trace["steps"] if s["kind"] == "request"]
        assert req2["prompt_tokens"] > req1["prompt_tokens"] and req2["reused"] > req1["prompt_tokens"]
        result = next(s for s in trace["steps"] if s["kind"] == "tool_result")
        assert result["status"] == "ok" and result["result"]["temp_c"] == 25  # the tool really ran: §14.5.2's values
        # step 5 as the template wrote it, newlines kept
        assert req2["tail"].startswith("<|im_start|>user\n<tool_response>\n{") and '"temp_c": 25' in req2["tail"]
        events = arrow_rows(trace, lang)
        assert [e["label"][0] for e in events if e["label"][0] in "①②③④⑤⑥"] == list("①②③④⑤⑥")
        fig = round_trip_figure(trace, lang)
        texts = " ".join(a.text for a in fig.layout.annotations)
        assert f"{req1['prompt_tokens']}" in texts and f"{req2['reused']}" in texts
        assert "&lt;tool_call&gt;</span><br>" in texts  # the call's own newline, not a wrap
    zh = round_trip_trace("zh")
    assert next(s for s in zh["steps"] if s["kind"] == "tool_result")["result"] == {"temp_c": 25, "condition": "晴"}


def test_mcp_figures_read_the_sdk_and_a_recorded_session():
    facts = mcp_architecture()
    assert facts["jsonrpc"] == "2.0" and facts["tool_fields"] == ["name", "description", "inputSchema"]
    assert facts["init_result_fields"] == ["protocolVersion", "capabilities", "serverInfo"]
    for lang in ("zh", "en"):
        texts = " ".join(a.text for a in mcp_figure(facts, lang).layout.annotations)
        assert "initialize" in texts and "tools/list" in texts and "tools/call" in texts
        assert facts["latest_protocol"] not in texts and facts["sdk"] not in texts
        assert "stdio · JSON-RPC 2.0" in texts and "Streamable HTTP · JSON-RPC 2.0" in texts
    session = mcp_session_trace()
    methods = [e["message"].get("method") for e in session if e["direction"] == "->"]
    assert methods == ["initialize", "notifications/initialized", "tools/list", "tools/call"]
    events = mcp_session_events(session, "en")
    assert [e["phase"][0] for e in events if "phase" in e] == ["①", "②", "③"]
    assert any("37.5" in e.get("label", "") for e in events)  # the chapter's 250 × 15 % really computed


def test_typeset_table_is_the_same_data_as_the_image():
    rows = cost.success_table()
    md, tex = table_markdown(rows), table_latex(rows)
    assert "*k* = 20" in md and "$k = 20$" in tex and "\\toprule" in tex
    for r in rows:
        for k in cost.BOOK_KS:
            assert f"{r[k]:.3f}" in md and f"{r[k]:.3f}" in tex
    assert "<i>k</i> = 20" in table_print_figure(rows).data[0].header.values


def test_transport_rows_read_the_sdk():
    rows = transport_rows("en")
    text = " ".join(v for r in rows for v in r.values())
    assert "mcp-session-id" in text and "text/event-stream" in text and "StdioServerParameters" in text
    assert rows[0] == {"aspect": "", "stdio": "stdio", "http": "Streamable HTTP"}


FIGURES = Path(__file__).resolve().parent.parent / "figures"


@pytest.mark.parametrize("svg", sorted(FIGURES.glob("*.svg")), ids=lambda p: p.name)
def test_committed_svgs_print_at_7pt_or_more_without_captions(svg):
    """Every text of every committed figure, font size × (130 mm / canvas width), is at least 7 pt."""
    text = svg.read_text(encoding="utf-8")
    width = float(re.search(r'<svg\b[^>]*\bwidth="([\d.]+)"', text).group(1))
    assert width == CANVAS_PX
    sizes = [float(x) for x in re.findall(r"font-size:\s*([\d.]+)px", text)]
    assert sizes, "no text found"
    small = sorted({s for s in sizes if print_pt(s, width) < MIN_PT})
    assert not small, f"{svg.name}: font sizes {small} px print under {MIN_PT} pt at {PRINT_MM} mm"
    drawn = svg_text(text)
    lang = svg.name.split(".")[-2]
    caption = CAPTIONS[svg.name.split(".")[0]][lang]
    assert caption[:12] not in drawn  # captions are outside the image
    if lang == "en":
        cjk = [c for c in drawn if "\u3400" <= c <= "\u9fff"]
        assert not cjk, f"{svg.name}: Chinese in the English figure: {''.join(cjk[:20])}"


def test_embedded_font_covers_every_character(tmp_path):
    if font_file(400) is None:
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
    assert len(fonts) == 3 and "font-family: 'FigureText'" in out
    for data in fonts:
        cmap = TTFont(io.BytesIO(base64.b64decode(data))).getBestCmap()
        assert {ord(c) for c in "图 14-9 宿主 & host"} <= set(cmap)


def _cjk_font() -> bool:
    if not shutil.which("fc-list"):
        return False
    return "Noto Sans CJK" in subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout


FULL_RUN_NEEDS = "needs Debian chromium and fonts-noto-cjk: run `make system`"
IMAGES = {".png", ".pdf", ".svg"}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, request):
    """One `python -m toolkit figures` run (every figure, both languages, every format, the ledger), shared: the
    format checks read its files, and the byte-identity check compares its data files with one more data-only run
    (a second full ledger costs ~40 s). None where chromium or the CJK font is missing, or where slow tests are
    deselected (`make test-fast`: the image export alone is slow)."""
    if _find_chromium() is None or not _cjk_font() or "not slow" in (request.config.getoption("markexpr") or ""):
        return None
    out = tmp_path_factory.mktemp("figures-full")
    t0 = time.perf_counter()
    rc = cli(["--out", str(out), "--lang", "both"])
    return out, rc, time.perf_counter() - t0


def test_data_files_are_byte_identical_across_runs(tmp_path, full_run):
    runs = []
    for name in ("a", "b")[: 1 if full_run else 2]:
        out = tmp_path / name
        write_all(out, formats=(), claims=True)
        runs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    if full_run:  # its data files beside the images: the same writer, the same inputs
        runs.append({p.name: p.read_bytes() for p in sorted(full_run[0].iterdir()) if p.suffix not in IMAGES})
    assert runs[0].keys() == runs[1].keys()
    assert {
        "fig14-9_round_trip.json",
        "fig14-10_context_growth.json",
        "fig14-10_context_growth.csv",
        "fig14-11_mcp.json",
        "table14-11_success.json",
        "table14-11_success.csv",
        "table14-11_success.zh.md",
        "table14-11_success.en.tex",
        "pk_curve.json",
        "tooluse3-2_mcp_phases.json",
        "tooluse3-2_transports.json",
        "captions.md",
        "claims.md",
    } <= runs[0].keys()
    for name in runs[0]:
        assert runs[0][name] == runs[1][name], name
    csv = runs[0]["table14-11_success.csv"].decode()
    assert "0.358" in csv and "0.005" in csv


@pytest.mark.slow
@pytest.mark.skipif(_find_chromium() is None or not _cjk_font(), reason=FULL_RUN_NEEDS)
def test_full_run_writes_every_format(full_run):
    tmp_path, rc, elapsed = full_run
    assert rc == 0
    stems = list(CAPTIONS)
    magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<svg"}
    for stem in stems:
        for lang in ("zh", "en"):
            for fmt, head in magic.items():
                data = (tmp_path / f"{stem}.{lang}.{fmt}").read_bytes()
                assert head in data[:200] and len(data) > 2000, (stem, lang, fmt)
    svg = (tmp_path / "fig14-10_context_growth.zh.svg").read_text(encoding="utf-8")
    # the Chinese axis title is text in the SVG (the caption lives outside the image, in captions.md), and the
    # font is embedded: readable without the font installed
    assert "轮次" in svg and "@font-face" in svg and "base64," in svg
    assert "上下文" in (tmp_path / "captions.md").read_text(encoding="utf-8")
    assert (tmp_path / "claims.md").read_text(encoding="utf-8").startswith("# Claims ledger")
    print(f"figures: full run {elapsed:.1f} s")


def test_a_hung_export_is_stopped_with_one_line(tmp_path):
    """The export child is killed past its timeout (a 'browser' that never answers), with one clear line."""
    fake, pids = tmp_path / "chromium", tmp_path / "pids"
    fake.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 600\n")
    fake.chmod(0o755)
    job = dict(figure='{"data": [], "layout": {}}', file=str(tmp_path / "x.png"), width=100, height=100, scale=1)
    t0 = time.perf_counter()
    with pytest.raises(ExportTimeout) as e:
        export([job], str(fake), timeout=8)
    assert time.perf_counter() - t0 < 30 and "did not finish in 8 s" in str(e.value) and "\n" not in str(e.value)
    # The 'browser' is gone too, though kaleido's wrapper put it in a session of its own.
    started = [int(p) for p in pids.read_text().split()]
    assert started
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(pid_alive(p) for p in started):
        time.sleep(0.2)
    assert not [p for p in started if pid_alive(p)], started
