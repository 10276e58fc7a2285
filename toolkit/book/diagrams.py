"""The book's two diagrams, drawn from recorded data: the round trip (fig 14-9) and MCP's split (fig 14-11).

What it does
- ``round_trip_trace`` records one round trip with the host loop (scripted model, real tokenizer, the calculator
  really runs); ``round_trip_figure`` draws it as a sequence diagram. ``mcp_architecture`` reads the installed SDK's
  method names; ``mcp_figure`` draws host / client / server.

What it leaves out
- Styling for print beyond fixed sizes, colours and fonts.
"""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go

from toolkit.backends.scripted import ScriptedBackend
from toolkit.loop.loop import run
from toolkit.plots import C_LANES, L, arrow, drawing
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import TOOLS

# ---------------------------------------------------------------- fig 14-9: the round trip, from a trace
LANES = ("user", "host", "engine", "tool")


QUESTION_ZH = "北京今天天气怎么样？"


def round_trip_trace() -> dict:
    """Record the book's own example (§14.5.2: get_weather for 北京) with the host loop; return it as plain data.

    ``toolkit.loop.loop.run`` runs with its ``ScriptedBackend`` (a fake model replaying fixed texts, so the figure is
    deterministic): the call is the one §14.5.2 step 2 prints; ``toolkit.tools.get_weather`` really runs (a
    fixed local table); every token count comes from the offline Qwen3 tokenizer and the Qwen3 template. The
    scripted answer is built from the ``<tool_response>`` the host put into the second prompt.
    """
    tok = tokenizer_for("qwen3")
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京"}}\n</tool_call>'

    def answer(prompt_ids):  # read the result back from the prompt, as a model would
        text = tok.decode(prompt_ids)
        body = json.loads(text.rsplit("<tool_response>", 1)[1].split("</tool_response>", 1)[0])
        return f"北京今天 {body['temperature']}°C。"

    backend = ScriptedBackend(tok, [call, answer])
    trace = run(
        backend,
        tok,
        [{"role": "user", "content": QUESTION_ZH}],
        {"get_weather": TOOLS["get_weather"]},
        template="qwen3",
        parallel=False,
    )
    steps = [dict(kind="user", text=QUESTION_ZH)]
    for s in trace.steps:
        d = s.to_json()  # steps serialise themselves; a step type the figure does not draw is skipped
        if d["step"] == "Rendered":
            steps.append(
                dict(
                    kind="request",
                    turn=d["turn"],
                    prompt_tokens=d["prompt_tokens"],
                    split=d["split"],
                    tool_response_tokens=s.rendering.counts["tool_response"],
                )
            )
        elif d["step"] == "Generated":
            steps[-1]["reused"] = d["reused"]  # what the (perfect) prefix cache served for this request
            steps.append(
                dict(
                    kind="model_output",
                    turn=d["turn"],
                    text=d["text"],
                    tokens=d["new_tokens"],
                    stop="<|im_end|>" if d["stopped_by"] == "stop" else d["stopped_by"],
                )
            )
        elif d["step"] == "Parsed":
            steps += [
                dict(kind="parse", name=c["name"], arguments=c["arguments"], error=c["error"]) for c in d["calls"]
            ]
        elif d["step"] == "Executed":
            steps += [
                dict(kind="tool_result", name=r["name"], status=r["status"], result=r["result"]) for r in d["results"]
            ]
        elif d["step"] == "Answered":
            steps.append(dict(kind="answer", text=d["text"]))
    return dict(
        producer="toolkit.loop.loop.run (the kit's host loop), template qwen3, offline Qwen3 tokenizer; "
        "get_weather executed by toolkit.tools (a fixed local table, not live data)",
        example="§14.5.2: get_weather, city 北京",
        model=f"{trace.model}: replays fixed texts, no neural model ran",
        stop=trace.stop.reason,
        steps=steps,
    )


def _wrap(text: str, width: int) -> str:
    """Break ``text`` into lines of about ``width`` columns (a CJK character counts 2) with <br>."""
    lines, line, cols = [], "", 0
    for word in re.split(r"(\s+)", text):
        for piece in [word] if word.isascii() else list(word):
            w = sum(2 if ord(ch) > 0x2E7F else 1 for ch in piece)
            if cols + w > width and line.strip():
                lines.append(line.rstrip())
                line, cols = "", 0
                if piece.isspace():
                    continue
            line += piece
            cols += w
    if line.strip():
        lines.append(line.rstrip())
    return "<br>".join(lines)


def arrow_rows(trace: dict, lang: str) -> list[dict]:
    """Turn recorded steps into arrows ``{src, dst, step, label}``: §14.5.2's six steps, each numbered once."""
    zh = lang == "zh"
    out = []

    def add(src, dst, step, label_zh, label_en):
        out.append(dict(src=src, dst=dst, step=step, label=label_zh if zh else label_en))

    for s in trace["steps"]:
        k = s["kind"]
        if k == "user":
            add("user", "host", "", f"“{s['text']}”", f"“{s['text']}”")
        elif k == "request" and s["turn"] == 1:
            n, t = s["prompt_tokens"], s["split"]["tools"]
            add(
                "host",
                "engine",
                "①",
                f"工具定义渲染进系统段，连同问题共 {n} 个词元（工具块 {t}）",
                f"tool schemas rendered into the system turn: {n} tokens with the question (tool block {t})",
            )
        elif k == "model_output" and "<tool_call>" in s["text"]:
            call = s["text"].split("<tool_call>", 1)[1].split("</tool_call>", 1)[0].strip()
            add(
                "engine",
                "engine",
                "②",
                f"逐词元生成 <tool_call>{call}</tool_call>，共 {s['tokens']} 个词元",
                f"decodes <tool_call>{call}</tool_call>, {s['tokens']} tokens",
            )
            add(
                "engine",
                "host",
                "③",
                f"生成 {s['stop']} 即停止；请求结束，返回整段文本",
                f"stops at {s['stop']}; the request ends and the text goes back",
            )
        elif k == "parse":
            args = json.dumps(s["arguments"], ensure_ascii=False)
            add(
                "host",
                "tool",
                "④",
                f"切出 JSON，校验参数，执行 {s['name']}({args})",
                f"cuts out the JSON, validates it, runs {s['name']}({args})",
            )
        elif k == "tool_result":
            shown = {k: v for k, v in s["result"].items() if k in ("city", "temperature", "unit", "condition")}
            res = json.dumps(shown, ensure_ascii=False)  # the full result is in the data file
            add("tool", "host", "", f"结果 {res}", f"result {res}")
        elif k == "request":
            n, r, tr = s["prompt_tokens"], s.get("reused", 0), s.get("tool_response_tokens", 0)
            add(
                "host",
                "host",
                "⑤",
                f'结果作为 role="tool" 消息加入列表；模板把它放进 user 轮的 <tool_response>（{tr} 个词元）',
                f'the result joins the list as a role="tool" message; the '
                f"template puts it in a user turn's <tool_response> ({tr} tokens)",
            )
            add(
                "host",
                "engine",
                "⑥",
                f"新请求，前缀更长：{n} 个词元，其中 {r} 个命中前缀缓存",
                f"a new request with a longer prefix: {n} tokens, {r} from the prefix cache",
            )
        elif k == "model_output":
            add("engine", "host", "", f"回答（{s['tokens']} 个词元）", f"answer ({s['tokens']} tokens)")
        elif k == "answer":
            add("host", "user", "", f"“{s['text']}”", f"“{s['text']}”")
    return out


# Where each participant's own notes go: into the gap beside its lifeline that no arrow uses at that moment.
_NOTE_SIDE = {"host": -1, "engine": +1}


def round_trip_figure(trace: dict, lang: str = "en", width: int = 1200) -> go.Figure:
    t = L[lang]
    arrows = arrow_rows(trace, lang)
    lane_x = {name: float(i) for i, name in enumerate(LANES)}
    row_h = 70
    height = 130 + row_h * len(arrows)
    y_end = -len(arrows) - 0.2
    cols = 38  # columns of label text that fit between two neighbouring lifelines at this width
    shapes, ann = [], []
    for name, x in lane_x.items():
        shapes.append(
            dict(type="line", x0=x, x1=x, y0=0.2, y1=y_end, line=dict(color="#bbb", width=2, dash="dot"), layer="below")
        )
        ann.append(
            dict(
                x=x,
                y=0.5,
                text=f"<b>{t['lanes'][name]}</b>",
                showarrow=False,
                font=dict(size=15, color="white"),
                bgcolor=C_LANES[name],
                borderpad=7,
            )
        )
    for i, a in enumerate(arrows, 1):
        y = -i + 0.25
        x0, x1 = lane_x[a["src"]], lane_x[a["dst"]]
        step = f"<b>{a['step']}</b> " if a["step"] else ""
        if x0 == x1:  # work inside one participant: an activation bar and a note in the free gap beside it
            side = _NOTE_SIDE[a["src"]]
            shapes.append(
                dict(
                    type="rect",
                    x0=x0 - 0.02,
                    x1=x0 + 0.02,
                    y0=y - 0.38,
                    y1=y + 0.38,
                    fillcolor=C_LANES[a["src"]],
                    line=dict(width=0),
                )
            )
            ann.append(
                dict(
                    x=x0 + side * 0.06,
                    y=y,
                    text=step + _wrap(a["label"], cols),
                    showarrow=False,
                    xanchor="left" if side > 0 else "right",
                    align="left",
                    font=dict(size=13),
                    bgcolor="#fff8e6",
                    bordercolor=C_LANES[a["src"]],
                    borderpad=4,
                )
            )
            continue
        ann.append(arrow(x0, y - 0.18, x1, y - 0.18, C_LANES[a["src"]], arrowsize=1.3))
        # the label sits in one gap between neighbouring lifelines (the one next to the farther participant),
        # so no lifeline runs through its text
        right = max(x0, x1)
        ann.append(
            dict(
                x=right - 0.5,
                y=y - 0.1,
                text=step + _wrap(a["label"], cols),
                showarrow=False,
                xanchor="center",
                yanchor="bottom",
                align="center",
                font=dict(size=13),
                bgcolor="rgba(255,255,255,0.92)",
            )
        )
    margin = dict(l=10, r=10, t=60, b=10)
    return drawing(t["seq_title"], width, height, shapes, ann, [-0.45, 3.45], [y_end - 0.1, 0.85], margin)
