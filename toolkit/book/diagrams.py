"""Fig 14-9, the round trip of one tool call, drawn from a trace the host loop recorded.

What it does
- ``round_trip_trace(lang)`` records §14.5.2's own example with the host loop (scripted model, real tokenizer,
  real template; the tool really runs and returns the book's values ``{"temp_c": 25, "condition": "晴"}``, in
  English ``"sunny"`` for Beijing); ``round_trip_figure`` draws it as a sequence diagram. The model's call and
  the ``<tool_response>`` turn are shown as the template wrote them, newlines kept, in the monospace face.

What it leaves out
- Any other example; colours and layout are fixed (``toolkit.book.typeset`` sets the print geometry).
"""

from __future__ import annotations

import json

import plotly.graph_objects as go

from toolkit.backends.scripted import ScriptedBackend
from toolkit.book.typeset import CANVAS_PX, FONT_PX, SANS, rich_lines
from toolkit.loop.loop import run
from toolkit.plots import C_LANES, L, arrow, drawing
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import Tool

FONT = f"{SANS}, sans-serif"


# ---------------------------------------------------------------- fig 14-9: the round trip, from a trace
LANES = ("user", "host", "engine", "tool")


# §14.5.2's example in each language: the question, the city the model asks for, and what the tool returns
# (step 5 prints {"temp_c": 25, "condition": "晴"}); the answer is built from the result the prompt carries.
EXAMPLE = {
    "zh": dict(
        question="北京今天天气怎么样？", city="北京", condition="晴", answer="北京今天{condition}，{temp_c}°C。"
    ),
    "en": dict(
        question="What is the weather like in Beijing today?",
        city="Beijing",
        condition="sunny",
        answer="It is {condition} in Beijing today, {temp_c} °C.",
    ),
}


def _book_weather_tool() -> Tool:
    """``get_weather`` as §14.5.2 uses it: a city in, ``temp_c`` and ``condition`` out (a fixed local table)."""
    table = {ex["city"]: (25, ex["condition"]) for ex in EXAMPLE.values()}

    def get_weather(city: str) -> dict:
        """Gets the current weather for a city (the book's example values; a fixed table, not live data).

        Args:
            city: City name, e.g. "北京" or "Beijing".
        """
        temp_c, condition = table[city.strip()]
        return {"temp_c": temp_c, "condition": condition}

    return Tool.from_function(get_weather)


def round_trip_trace(lang: str = "zh") -> dict:
    """Record §14.5.2's example with the host loop; return it as plain data.

    ``toolkit.loop.loop.run`` drives a ``ScriptedBackend`` (a fake model replaying fixed texts, so the figure is
    deterministic): the call is the one §14.5.2 step 2 prints; the tool really runs; every token count comes from
    the offline Qwen3 tokenizer and the Qwen3 template, and the texts shown are the ones the template rendered.
    """
    ex = EXAMPLE[lang]
    tok = tokenizer_for("qwen3")
    args = json.dumps({"city": ex["city"]}, ensure_ascii=False)
    call = f'<tool_call>\n{{"name": "get_weather", "arguments": {args}}}\n</tool_call>'

    def answer(prompt_ids):  # read the result back from the prompt, as a model would
        text = tok.decode(prompt_ids)
        body = json.loads(text.rsplit("<tool_response>", 1)[1].split("</tool_response>", 1)[0])
        return ex["answer"].format(**body)

    backend = ScriptedBackend(tok, [call, answer])
    trace = run(
        backend,
        tok,
        [{"role": "user", "content": ex["question"]}],
        {"get_weather": _book_weather_tool()},
        template="qwen3",
        parallel=False,
    )
    steps = [dict(kind="user", text=ex["question"])]
    for s in trace.steps:
        d = s.to_json()  # steps serialise themselves; a step type the figure does not draw is skipped
        if d["step"] == "Rendered":
            text = s.rendering.text
            steps.append(
                dict(
                    kind="request",
                    turn=d["turn"],
                    prompt_tokens=d["prompt_tokens"],
                    split=d["split"],
                    tool_response_tokens=s.rendering.counts["tool_response"],
                    # the last user turn as the template wrote it (turn 2: the <tool_response> turn)
                    tail=text[text.rfind("<|im_start|>user") :],
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
        "get_weather executed (a fixed local table with the book's values, not live data)",
        example=f"§14.5.2: get_weather, city {ex['city']}",
        model=f"{trace.model}: replays fixed texts, no neural model ran",
        stop=trace.stop.reason,
        steps=steps,
    )


def arrow_rows(trace: dict, lang: str) -> list[dict]:
    """Turn recorded steps into events ``{src, dst, step, label}`` (code in backquotes): §14.5.2's six steps, each
    numbered once. ``src == dst`` is work inside one participant, drawn as a note."""
    zh = lang == "zh"
    out = []

    def add(src, dst, step, label_zh, label_en):
        label = label_zh if zh else label_en
        out.append(dict(src=src, dst=dst, step=step, label=(f"{step} " if step else "") + label))

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
                f"工具定义渲染进系统段，连同问题共 {n} 个词元（其中工具块 {t} 个）",
                f"tool schemas in the system turn: {n} tokens with the question (tool block {t})",
            )
        elif k == "model_output" and "<tool_call>" in s["text"]:
            body = s["text"].split("<|im_end|>")[0].strip()
            add(
                "engine",
                "engine",
                "②",
                f"逐词元生成调用片段（{s['tokens']} 个词元）：`{body}`",
                f"decodes the call token by token ({s['tokens']} tokens): `{body}`",
            )
            add(
                "engine",
                "host",
                "③",
                f"生成 `{s['stop']}` 即停止；请求结束，整段文本返回宿主",
                f"stops at `{s['stop']}`: the request ends, the text returns",
            )
        elif k == "parse":
            args = json.dumps(s["arguments"], ensure_ascii=False)
            add(
                "host",
                "tool",
                "④",
                f"切出 JSON，校验参数，执行 `{s['name']}`，参数 `{args}`",
                f"cuts out the JSON, validates it, runs `{s['name']}` with `{args}`",
            )
        elif k == "tool_result":
            res = json.dumps(s["result"], ensure_ascii=False)
            add("tool", "host", "", f"结果 `{res}`", f"result `{res}`")
        elif k == "request":
            n, r, tr = s["prompt_tokens"], s.get("reused", 0), s.get("tool_response_tokens", 0)
            tail = s["tail"]
            add(
                "host",
                "host",
                "⑤",
                f'结果作为 role="tool" 消息加入列表，模板把它放进一个 user 轮（{tr} 个词元）：`{tail}`',
                f'the result joins the list as a role="tool" message; the template puts it in a user turn '
                f"({tr} tokens): `{tail}`",
            )
            add(
                "host",
                "engine",
                "⑥",
                f"新请求，前缀更长：{n} 个词元，其中 {r} 个命中前缀缓存",
                f"a new request, a longer prefix: {n} tokens, {r} from the prefix cache",
            )
        elif k == "model_output":
            add("engine", "host", "", f"回答（{s['tokens']} 个词元）", f"the answer ({s['tokens']} tokens)")
        elif k == "answer":
            add("host", "user", "", f"“{s['text']}”", f"“{s['text']}”")
    return out


# Lifelines in px across the canvas (the plot area is the canvas less 8 px each side): the engine's and the
# host's notes go right of their lifeline, over a participant that is idle at that moment.
LANE_X = {"user": 30, "host": 150, "engine": 296, "tool": 668}


LINE_PX = FONT_PX * 1.3  # plotly's line spacing


def _height(rich: str) -> float:
    return (rich.count("<br>") + 1) * LINE_PX


def round_trip_figure(trace: dict, lang: str = "en", width: int = CANVAS_PX) -> go.Figure:
    """Fig 14-9: the sequence diagram of ``round_trip_trace``."""
    heads = {name: (x, L[lang]["lanes"][name], C_LANES[name]) for name, x in LANE_X.items()}
    return sequence_figure(arrow_rows(trace, lang), heads, width)


def sequence_figure(events: list[dict], lanes: dict, width: int = CANVAS_PX) -> go.Figure:
    """A sequence diagram laid out top-down in px. ``lanes``: name -> (x, heading, colour); ``events``: dicts with
    ``src``/``dst`` (an arrow, its label above it in the gap next to the farther participant so no lifeline
    crosses it; ``src == dst``: a note right of the lifeline with an activation bar) or ``phase`` (a band across
    the diagram naming what follows). Labels mark code with backquotes (``toolkit.book.typeset.rich_lines``)."""
    plot_w = width - 16
    xs = {name: v[0] for name, v in lanes.items()}
    shapes, ann = [], []
    y = -44.0  # px from the top of the plot area, growing downwards as negative data y
    for ev in events:
        y -= 10
        if "phase" in ev:
            rich, _ = rich_lines(ev["phase"], plot_w - 20)
            h = _height(rich) + 6
            shapes.append(
                dict(
                    type="rect", x0=0, x1=plot_w, y0=y - h, y1=y, fillcolor="#eef1f5", line=dict(width=0), layer="below"
                )
            )
            ann.append(
                dict(x=6, y=y - 3, text=f"<b>{rich}</b>", showarrow=False, xanchor="left", yanchor="top", align="left")
            )
            y -= h
            continue
        x0, x1 = xs[ev["src"]], xs[ev["dst"]]
        color = lanes[ev["src"]][2]
        if x0 == x1:  # a note: to the right of the lifeline, with an activation bar
            rich, _ = rich_lines(ev["label"], plot_w - x0 - 17)
            h = _height(rich) + 8
            ann.append(
                dict(
                    x=x0 + 7,
                    y=y,
                    text=rich,
                    showarrow=False,
                    xanchor="left",
                    yanchor="top",
                    align="left",
                    font=dict(size=FONT_PX),
                    bgcolor="#fff8e6",
                    bordercolor=color,
                    borderpad=4,
                )
            )
            shapes.append(dict(type="rect", x0=x0 - 4, x1=x0 + 4, y0=y - h, y1=y, fillcolor=color, line=dict(width=0)))
            y -= h + 6
            continue
        lo, hi = sorted((x0, x1))
        near = max(v for v in xs.values() if v < hi)
        rich, _ = rich_lines(ev["label"], hi - near - 16)
        y -= _height(rich) + 2
        ann.append(
            dict(
                x=(near + hi) / 2,
                y=y + 2,
                text=rich,
                showarrow=False,
                xanchor="center",
                yanchor="bottom",
                align="center",
                font=dict(size=FONT_PX),
            )
        )
        ann.append(arrow(x0, y, x1, y, color, arrowsize=1.2))
        y -= 8
    y_end = y - 10
    for x, heading, color in lanes.values():
        shapes.append(
            dict(
                type="line", x0=x, x1=x, y0=-24, y1=y_end, line=dict(color="#bbb", width=1.5, dash="dot"), layer="below"
            )
        )
        ann.append(
            dict(
                x=x,
                y=-12,
                text=f"<b>{heading}</b>",
                showarrow=False,
                font=dict(size=FONT_PX + 1, color="white"),
                bgcolor=color,
                borderpad=5,
            )
        )
    height = int(-y_end) + 16
    fig = drawing("", width, height, shapes, ann, [0, plot_w], [y_end, 0], dict(l=8, r=8, t=8, b=8))
    return fig.update_layout(font=dict(family=FONT, size=FONT_PX))
