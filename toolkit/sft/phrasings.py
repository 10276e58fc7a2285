"""How the training data's requests and answers are worded for the kit's own tools, and the no-tool answers.

What it does
- ``kit_call(name, rng, lang)``: a request for the calculator, get_weather or convert_units in English or Chinese,
  with the arguments it asks for; ``answer(name, args, result, lang)``: the final answer written from a real result.
- ``CHITCHAT`` (questions that need no tool, with answers) and ``DECLINE`` (answers when no shown tool fits).

What it leaves out
- Running the tools (``toolkit.sft.data`` does, through ``toolkit.tools.TOOLS``).
"""

from __future__ import annotations

from toolkit.tools import WEATHER_TABLE

# ---------------------------------------------------------------- the kit's own tools: requests and answers
_CITY_ZH = {
    "Paris": "巴黎",
    "London": "伦敦",
    "Tokyo": "东京",
    "New York": "纽约",
    "Berlin": "柏林",
    "Sydney": "悉尼",
    "Singapore": "新加坡",
    "San Francisco": "旧金山",
}
_CITY_EN = {
    "北京": "Beijing",
    "上海": "Shanghai",
    "广州": "Guangzhou",
    "深圳": "Shenzhen",
    "杭州": "Hangzhou",
    "成都": "Chengdu",
}
_UNITS = [
    ("km", "mi", "kilometres", "miles", "公里", "英里"),
    ("mi", "km", "miles", "kilometres", "英里", "公里"),
    ("lb", "kg", "pounds", "kilograms", "磅", "公斤"),
    ("g", "oz", "grams", "ounces", "克", "盎司"),
    ("ft", "m", "feet", "metres", "英尺", "米"),
    ("in", "cm", "inches", "centimetres", "英寸", "厘米"),
    ("l", "gal", "litres", "gallons", "升", "加仑"),
    ("f", "c", "degrees Fahrenheit", "degrees Celsius", "华氏度", "摄氏度"),
    ("c", "k", "degrees Celsius", "kelvin", "摄氏度", "开尔文"),
    ("yd", "m", "yards", "metres", "码", "米"),
    ("ml", "l", "millilitres", "litres", "毫升", "升"),
    ("oz", "g", "ounces", "grams", "盎司", "克"),
]


def city(rng, lang) -> tuple[str, str]:
    """(the value the tool takes, how the request says it)."""
    c = rng.choice(sorted(WEATHER_TABLE))
    if lang == "zh":
        return c, _CITY_ZH.get(c, c)
    return c, _CITY_EN.get(c, c)


def _expression(rng) -> tuple[str, str, str]:
    """(calculator expression, English phrase, Chinese phrase)."""
    a, b, c = rng.randint(3, 999), rng.randint(2, 99), rng.randint(2, 12)
    p = rng.choice((5, 12, 15, 20, 35, 8, 45, 60))
    return rng.choice(
        (
            (f"{a} * {b}", f"{a} times {b}", f"{a}乘以{b}"),
            (f"{a} + {b} * {c}", f"{a} plus {b} times {c}", f"{a}加{b}乘{c}"),
            (f"({a} - {b}) / {c}", f"{a} minus {b}, divided by {c}", f"{a}减{b}再除以{c}"),
            (f"{p}% of {a * 4}", f"{p}% of {a * 4}", f"{a * 4}的{p}%"),
            (f"{c} ** {rng.randint(2, 5)}", None, None),
            (f"{a}.{b} * {c}", f"{a}.{b} multiplied by {c}", f"{a}.{b}乘{c}"),
        )
    )


_CALC_Q = {
    "en": ("What is {p}?", "Can you work out {p}?", "Compute {p}.", "Quick one: {p}?"),
    "zh": ("{p}等于多少？", "帮我算一下{p}。", "{p}是多少？"),
}
_WEATHER_Q = {
    "en": (
        "How's the weather in {c}?",
        "Weather check for {c}, please.",
        "What's it like outside in {c} right now?",
        "Current conditions in {c}?",
    ),
    "zh": ("{c}现在天气如何？", "查一下{c}的天气。", "{c}今天天气好吗？"),
}
_CONVERT_Q = {
    "en": ("Convert {v} {a} to {b}.", "How many {b} is {v} {a}?", "{v} {a} in {b}?"),
    "zh": ("{v}{a}换算成{b}是多少？", "{v}{a}等于多少{b}？"),
}


def kit_call(kind: str, rng, lang) -> tuple[str, str, dict]:
    """(request text, tool name, arguments) for one of the kit's tools."""
    if kind == "calculator":
        while True:
            e, en, zh = _expression(rng)
            if en:
                break
        return rng.choice(_CALC_Q[lang]).format(p=zh if lang == "zh" else en), "calculator", {"expression": e}
    if kind == "get_weather":
        c, said = city(rng, lang)
        unit = "fahrenheit" if rng.random() < 0.25 else "celsius"
        q = rng.choice(_WEATHER_Q[lang]).format(c=said)
        if unit == "fahrenheit":
            q += "（用华氏度）" if lang == "zh" else " Give it in Fahrenheit."
        return q, "get_weather", {"city": c, "unit": unit}
    a, b, ea, eb, za, zb = rng.choice(_UNITS)
    v = rng.choice((rng.randint(1, 500), round(rng.uniform(0.5, 120), 1)))
    q = rng.choice(_CONVERT_Q[lang]).format(v=v, a=za if lang == "zh" else ea, b=zb if lang == "zh" else eb)
    return q, "convert_units", {"value": v, "from_unit": a, "to_unit": b}


def num(x) -> str:
    return f"{x:,.4f}".rstrip("0").rstrip(".") if isinstance(x, float) else f"{x:,}" if isinstance(x, int) else str(x)


def answer(name: str, args: dict, out: dict, lang: str) -> str:
    """The final answer written from a real tool result."""
    if name == "calculator":
        r = num(out["result"])
        return f"{args['expression']} = {r}。" if lang == "zh" else f"{args['expression']} = {r}."
    if name == "get_weather":
        u = "°C" if out["unit"] == "celsius" else "°F"
        city = out["city"] if lang == "zh" else _CITY_EN.get(out["city"], out["city"])
        if lang == "zh":
            return (
                f"{_CITY_ZH.get(city, city)}现在{out['temperature']}{u}，{out['condition']}，湿度{out['humidity']}%。"
            )
        return f"In {city} it is {out['temperature']}{u} and {out['condition']}, with {out['humidity']}% humidity."
    r = num(out["result"])
    if lang == "zh":
        return f"{num(args['value'])} {args['from_unit']} = {r} {args['to_unit']}。"
    return f"{num(args['value'])} {args['from_unit']} is {r} {args['to_unit']}."


# ---------------------------------------------------------------- no-tool answers
CHITCHAT = {
    "en": (
        ("Good morning!", "Good morning! What can I help you with today?"),
        ("Can you recommend a good habit for focus?", "Try working in 25-minute blocks with short breaks in between."),
        ("What's the chemical symbol for water?", "Water is H2O: two hydrogen atoms and one oxygen atom."),
        ("Who wrote 'Pride and Prejudice'?", "Jane Austen wrote it; it was published in 1813."),
        ("Tell me a fun fact about octopuses.", "An octopus has three hearts and blue blood."),
        ("How do you say thank you in Japanese?", "Arigatou (ありがとう), or more politely arigatou gozaimasu."),
        ("What's the largest ocean on Earth?", "The Pacific Ocean is the largest."),
        ("Can you give me a synonym for 'happy'?", "Cheerful, joyful or content all work."),
        ("Which planet is known as the red planet?", "Mars is called the red planet because of its iron-rich dust."),
        ("Great, that helps. Bye!", "Glad it helped. Goodbye!"),
        ("What does CPU stand for?", "CPU stands for central processing unit."),
        ("Write a one-line motto for a bakery.", "Fresh from our oven to your morning."),
    ),
    "zh": (
        ("你好！", "你好！有什么可以帮你的吗？"),
        ("推荐一本适合入门的编程书。", "可以从《Python编程：从入门到实践》开始，例子多、上手快。"),
        ("一年有几个季节？", "一年有四个季节：春、夏、秋、冬。"),
        ("长城大约有多长？", "明长城全长约8,851.8公里。"),
        ("今天心情不好，怎么办？", "可以先出去走走、深呼吸，或者和信任的朋友聊聊。"),
        ("水的沸点是多少？", "在标准大气压下，水的沸点是100摄氏度。"),
        ("“你好”用英语怎么说？", "“你好”用英语说是 “Hello”。"),
        ("谢谢你的帮助！", "不客气，随时可以再问我。"),
        ("给我讲一个冷笑话。", "为什么数学书总是很忧郁？因为它有太多的问题。"),
        ("熊猫主要吃什么？", "大熊猫主要吃竹子。"),
    ),
}
DECLINE = {
    "en": (
        "None of the functions I have can do that, so I can't help with this request directly.",
        "Sorry, the available tools don't cover this request.",
        "I don't have a function for that. The tools here can't answer this request.",
    ),
    "zh": (
        "抱歉，现有的函数都无法完成这个请求。",
        "我没有能处理这个请求的工具。",
        "现有工具不支持这个请求，我没法直接帮你完成。",
    ),
}


# ---------------------------------------------------------------- mix v3: what v2's host-loop run got wrong
# Questions that need no tool but name a city, a language or a fact (v2 called get_weather for a capital-city question
# and answered a translation request with a greeting it had memorised): answers are short facts.
CHITCHAT_MORE = {
    "en": (
        ("Which country is Berlin in?", "Berlin is the capital of Germany."),
        ("What's the capital of Canada?", "The capital of Canada is Ottawa."),
        ("How do you say goodbye in Spanish?", 'Goodbye in Spanish is "adiós".'),
        ("Translate 'good night' into German.", '"Good night" in German is "Gute Nacht".'),
        ("What language do people speak in Brazil?", "Most people in Brazil speak Portuguese."),
        ("How do you say 'thank you' in Italian?", '"Thank you" in Italian is "grazie".'),
        ("Which continent is Kenya on?", "Kenya is in East Africa."),
        ("What is the capital of Japan?", "Tokyo is the capital of Japan."),
        ("Name the longest river in South America.", "The Amazon is the longest river in South America."),
        ("What currency does the United Kingdom use?", "The United Kingdom uses the pound sterling (GBP)."),
        (
            "Is Sydney the capital of New Zealand?",
            "No. Sydney is in Australia; the capital of New Zealand is Wellington.",
        ),
        ("Give me a word that rhymes with 'light'.", '"Bright" rhymes with "light".'),
        ("How many legs does a spider have?", "A spider has eight legs."),
        ("Say 'good morning' in Chinese.", '"Good morning" in Chinese is 早上好 (zǎoshang hǎo).'),
        ("Who painted the Mona Lisa?", "Leonardo da Vinci painted the Mona Lisa."),
        (
            "Write a short haiku about rain.",
            "Soft rain on the roof,\nthe street lamps blur into gold,\nsleep comes easily.",
        ),
    ),
    "zh": (
        ("法国的首都是哪里？", "法国的首都是巴黎。"),
        ("“早上好”用日语怎么说？", "“早上好”用日语说是“おはようございます”（ohayō gozaimasu）。"),
        ("把“谢谢”翻译成英文。", "“谢谢”的英文是 “thank you”。"),
        ("东京是哪个国家的城市？", "东京是日本的首都。"),
        ("一周有几天？", "一周有七天。"),
        ("月亮绕地球一圈大约要多久？", "大约27.3天（恒星月）。"),
        ("悉尼是澳大利亚的首都吗？", "不是。澳大利亚的首都是堪培拉，悉尼是它最大的城市。"),
        ("写一句关于春天的话。", "春风一到，满城花开。"),
        ("英国用什么货币？", "英国使用英镑（GBP）。"),
        ("“再见”用法语怎么说？", "“再见”用法语说是 “au revoir”。"),
        ("中国最长的河流是哪条？", "长江是中国最长的河流。"),
        ("给我一个表示“快乐”的近义词。", "可以用“愉快”或“高兴”。"),
    ),
}

# Weather questions that do not say "weather": the answer needs the look-up all the same.
INDIRECT_WEATHER_Q = {  # (question, whether rain is what it asks about)
    "en": (
        ("Do I need an umbrella in {c} today?", True),
        ("Should I take a jacket if I go out in {c}?", False),
        ("Is it a good day for a run in {c}?", False),
        ("Heading to {c} later. Will it be hot?", False),
        ("Can I hang my washing outside in {c} today?", True),
    ),
    "zh": (
        ("今天在{c}出门要带伞吗？", True),
        ("{c}今天要穿外套吗？", False),
        ("今天去{c}跑步合适吗？", False),
        ("我下午到{c}，那边热不热？", False),
    ),
}
FAHRENHEIT_Q = {
    "en": (
        "How warm is it in {c} in °F?",
        "Temperature in {c}, Fahrenheit please.",
        "What's {c} at right now in degrees Fahrenheit?",
    ),
    "zh": ("{c}现在多少华氏度？", "用华氏度告诉我{c}的气温。"),
}


def indirect_answer(out: dict, said: str, lang: str, rain: bool) -> str:
    """An answer to an indirect weather question, written from the real look-up (condition and temperature); where
    the question is about rain, whether the report has any."""
    u = "°C" if out["unit"] == "celsius" else "°F"
    wet = any(w in out["condition"].lower() for w in ("rain", "storm", "shower", "drizzle", "snow"))
    if lang == "zh":
        tip = ("有雨，记得带伞。" if wet else "没有雨。") if rain else ""
        return f"{said}现在{out['temperature']}{u}，{out['condition']}，湿度{out['humidity']}%。{tip}"
    tip = (" Rain is in the report." if wet else " There is no rain in the report.") if rain else ""
    return f"{said} is {out['temperature']}{u} and {out['condition']} right now ({out['humidity']}% humidity).{tip}"


# Calculator requests the calculator's grammar does not take as written: (request, first attempt that fails, the
# expression that works). v2 called sqrt(...) and "$..." and gave up on the error.
def fixable(rng, lang) -> tuple[str, str, str]:
    """(request, an expression the calculator refuses, the one it takes) for one of a few kinds of request."""
    n = rng.choice((rng.randint(2, 60) ** 2, rng.randint(2, 40) ** 2, rng.randint(10, 9999)))
    bill = f"{rng.randint(12, 240)}.{rng.randint(0, 99):02d}"
    pct = rng.choice((10, 12, 15, 18, 20, 22, 25))
    k = rng.randint(2, 9)
    cube = rng.randint(2, 20) ** 3
    kinds = (
        ((f"Square root of {n}?", f"{n}的平方根是多少？"), f"sqrt({n})", f"{n} ** 0.5"),
        ((f"I need the cube root of {cube}.", f"{cube}的立方根是多少？"), f"cbrt({cube})", f"{cube} ** (1/3)"),
        (
            (f"A {pct}% tip on a ${bill} dinner comes to how much?", f"账单${bill}，给{pct}%的小费是多少？"),
            f"{pct}% of ${bill}",
            f"{pct}% of {bill}",
        ),
        (
            (f"Split ${bill} between {k} people: how much each?", f"${bill}平分给{k}个人，每人多少？"),
            f"${bill} / {k}",
            f"{bill} / {k}",
        ),
        ((f"What is {k} squared plus {n}?", f"{k}的平方加{n}等于多少？"), f"{k}² + {n}", f"{k} ** 2 + {n}"),
    )
    (en, zh), bad, good = rng.choice(kinds)
    return (zh if lang == "zh" else en), bad, good
