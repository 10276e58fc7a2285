"""Training conversations with the kit's own tools, built on their real results (§14.5.2).

What it does
- ``assistant_calls(calls)``: the assistant message that makes ``calls`` (the template renders it as ``<tool_call>``
  blocks).
- ``run(msgs, calls, todo)`` appends those calls and what the real tools (``toolkit.tools.TOOLS``) return for them:
  a result in the training data is a fact, never scripted.
- The multi-step kinds of ``toolkit.sft.data``: ``chain`` (two look-ups compared, or a look-up then a calculation),
  ``tool_error`` (``fix``: the calculator refuses an expression, its real error comes back and the model retries;
  the failed call is shown, not trained), ``chain_calc`` (weather numbers combined through the calculator) and
  ``indirect`` (a weather question that does not say "weather", or asks for °F).

What it leaves out
- The made-up APIs of ``toolkit.sft.bank`` (never executed; ``toolkit.sft.data`` ends their conversations at the
  call) and the choice of kind and language (``toolkit.sft.data.group``).
"""

from __future__ import annotations

import json

from toolkit.errors import ToolError, error_result
from toolkit.sft.phrasings import FAHRENHEIT_Q, INDIRECT_WEATHER_Q, answer, city, fixable, indirect_answer, num
from toolkit.tools import TOOLS


def assistant_calls(calls: list[dict]) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls
        ],
    }


def run(msgs: list[dict], calls: list[dict], todo: list[tuple[str, dict]]) -> list[dict]:
    """Append the assistant's calls and the real tools' results to ``msgs``; return the results."""
    batch = [{"name": n, "arguments": a} for n, a in todo]
    calls.extend(batch)
    msgs.append(assistant_calls(batch))
    outs = []
    for n, a in todo:
        out = TOOLS[n].call(a)  # the real tool: its result is a fact, never scripted
        outs.append(out)
        msgs.append({"role": "tool", "name": n, "content": json.dumps(out, ensure_ascii=False)})
    return outs


def chain(rng, lang, calls, with_calculator: bool = True) -> list[dict]:
    """Two weather look-ups then a comparison, or a look-up then a calculation on its result."""
    msgs: list[dict] = []
    (c1, s1), (c2, s2) = city(rng, lang), city(rng, lang)
    while c2 == c1:
        c2, s2 = city(rng, lang)
    if rng.random() < 0.5 or not with_calculator:
        q = (
            f"{s1}和{s2}哪个更暖和？"
            if lang == "zh"
            else rng.choice((f"Is {s1} warmer than {s2} today?", f"Compare today's temperatures in {s1} and {s2}."))
        )
        msgs.append({"role": "user", "content": q})
        w1, w2 = run(
            msgs,
            calls,
            [("get_weather", {"city": c1, "unit": "celsius"}), ("get_weather", {"city": c2, "unit": "celsius"})],
        )
        d = w1["temperature"] - w2["temperature"]
        n1, n2 = (s1, s2)
        if lang == "zh":
            a = f"{n1}{w1['temperature']}°C，{n2}{w2['temperature']}°C，" + (
                "两地一样暖和。" if d == 0 else f"{n1 if d > 0 else n2}更暖和，高{abs(d)}度。"
            )
        else:
            a = f"{n1} is {w1['temperature']}°C and {n2} is {w2['temperature']}°C, so " + (
                "they are equally warm." if d == 0 else f"{n1 if d > 0 else n2} is warmer by {abs(d)} degrees."
            )
        msgs.append({"role": "assistant", "content": a})
        return msgs
    k = rng.randint(2, 9)
    q = (
        f"把{s1}现在的气温（摄氏）加上{k}是多少？"
        if lang == "zh"
        else f"What do I get if I add {k} to the current temperature in {s1} (Celsius)?"
    )
    msgs.append({"role": "user", "content": q})
    (w,) = run(msgs, calls, [("get_weather", {"city": c1, "unit": "celsius"})])
    e = f"{w['temperature']} + {k}"
    (r,) = run(msgs, calls, [("calculator", {"expression": e})])
    a = (
        f"{s1}现在{w['temperature']}°C，加上{k}等于{num(r['result'])}。"
        if lang == "zh"
        else f"It is {w['temperature']}°C in {s1}; adding {k} gives {num(r['result'])}."
    )
    msgs.append({"role": "assistant", "content": a})
    return msgs


def calc(msgs, calls, expression: str) -> dict:
    (r,) = run(msgs, calls, [("calculator", {"expression": expression})])
    return r


def fix(rng, lang, calls) -> list[dict]:
    """A calculator request whose obvious expression the calculator refuses: half the time the first call fails, the
    real error comes back and the model retries with an expression it takes (the failed call is shown, not trained:
    ``train=False``); the other half the model writes the working expression straight away."""
    q, bad, good = fixable(rng, lang)
    msgs: list[dict] = [{"role": "user", "content": q}]
    if rng.random() < 0.5:
        try:
            TOOLS["calculator"].call({"expression": bad})
            raise AssertionError(f"the calculator took {bad!r}")  # the phrasings promise it does not
        except ToolError as e:
            err = error_result("tool_error", str(e)[:300])  # what the host loop returns for it
        wrong = assistant_calls([{"name": "calculator", "arguments": {"expression": bad}}])
        msgs += [dict(wrong, train=False), {"role": "tool", "name": "calculator", "content": json.dumps(err)}]
    r = calc(msgs, calls, good)
    msgs.append({"role": "assistant", "content": answer("calculator", {"expression": good}, r, lang)})
    return msgs


def chain_calc(rng, lang, calls) -> list[dict]:
    """Weather numbers combined through the calculator, not in the model's head: the difference or the average of
    two cities, or one city's temperature times, plus or minus a number."""
    (c1, s1), (c2, s2) = city(rng, lang), city(rng, lang)
    while c2 == c1:
        c2, s2 = city(rng, lang)
    zh = lang == "zh"
    how = rng.choice(("difference", "average", "one"))
    if how == "one":
        k = rng.randint(2, 12)
        op, en, cn = rng.choice(((" * ", "multiplied by", "乘以"), (" - ", "minus", "减去"), (" + ", "plus", "加上")))
        q = (
            f"{s1}现在的气温（摄氏度）{cn}{k}是多少？"
            if zh
            else rng.choice(
                (
                    f"What is the temperature in {s1} in Celsius {en} {k}?",
                    f"Look up {s1}'s temperature (°C) and give me that {en} {k}.",
                )
            )
        )
        msgs: list[dict] = [{"role": "user", "content": q}]
        (w,) = run(msgs, calls, [("get_weather", {"city": c1, "unit": "celsius"})])
        e = f"{w['temperature']}{op}{k}"
        r = calc(msgs, calls, e)
        a = (
            f"{s1}现在{w['temperature']}°C，{cn}{k}等于{num(r['result'])}。"
            if zh
            else f"It is {w['temperature']}°C in {s1}; {w['temperature']} {en} {k} is {num(r['result'])}."
        )
        return msgs + [{"role": "assistant", "content": a}]
    if how == "difference":
        q = (
            rng.choice((f"{s1}的气温比{s2}高多少度？", f"{s1}和{s2}今天温差几度？"))
            if zh
            else rng.choice(
                (
                    f"How many degrees apart are {s1} and {s2} right now?",
                    f"By how much does the temperature in {s1} differ from {s2}?",
                )
            )
        )
    else:
        q = (
            rng.choice((f"{s1}和{s2}的平均温度是多少？", f"算一下{s1}、{s2}两地气温的平均值。"))
            if zh
            else rng.choice(
                (f"What's the mean temperature of {s1} and {s2} today?", f"Average the temperatures of {s1} and {s2}.")
            )
        )
    msgs = [{"role": "user", "content": q}]
    w1, w2 = run(
        msgs,
        calls,
        [("get_weather", {"city": c1, "unit": "celsius"}), ("get_weather", {"city": c2, "unit": "celsius"})],
    )
    t1, t2 = w1["temperature"], w2["temperature"]
    e = f"{t1} - {t2}" if how == "difference" else f"({t1} + {t2}) / 2"
    r = num(calc(msgs, calls, e)["result"])
    if how == "difference":
        a = (
            f"{s1}{t1}°C，{s2}{t2}°C，{t1} - {t2} = {r}，相差{num(abs(t1 - t2))}度。"
            if zh
            else f"{s1} is {t1}°C and {s2} is {t2}°C: {t1} - {t2} = {r}, so they are {num(abs(t1 - t2))} degrees apart."
        )
    else:
        a = (
            f"{s1}{t1}°C，{s2}{t2}°C，平均气温是{r}°C。"
            if zh
            else f"{s1} is {t1}°C and {s2} is {t2}°C, so the average is {r}°C."
        )
    return msgs + [{"role": "assistant", "content": a}]


def indirect(rng, lang, calls) -> list[dict]:
    """A weather question that does not say "weather" (an umbrella, a jacket, a run), or one that asks for °F."""
    c, said = city(rng, lang)
    if rng.random() < 0.65:
        q, rain = rng.choice(INDIRECT_WEATHER_Q[lang])
        msgs: list[dict] = [{"role": "user", "content": q.format(c=said)}]
        (w,) = run(msgs, calls, [("get_weather", {"city": c, "unit": "celsius"})])
        return msgs + [{"role": "assistant", "content": indirect_answer(w, said, lang, rain)}]
    msgs = [{"role": "user", "content": rng.choice(FAHRENHEIT_Q[lang]).format(c=said)}]
    args = {"city": c, "unit": "fahrenheit"}
    (w,) = run(msgs, calls, [("get_weather", args)])
    return msgs + [{"role": "assistant", "content": answer("get_weather", args, w, lang)}]
