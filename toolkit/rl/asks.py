"""Free-form questions of the loop questions' kinds, generated as RL tasks and judged by the loop questions' judge.

What it does
- ``asks(seed, n)``: ``n`` records ``(question, needed)``, each a :class:`toolkit.eval.questions.Question` (the
  record the strict judge reads: the tool results it needs, whether no tool may run, what the answer must state)
  and the number of calls that cost nothing. The kinds are the loop questions' own — arithmetic, unit conversions,
  one look-up, a look-up then arithmetic, two look-ups combined, a question that needs no tool (a word in another
  language, a capital, a count everybody knows, a line of prose) and a request no mounted tool serves — with this
  module's phrasings and values; the truth comes from the kit's real tools (:mod:`toolkit.tools`).
- :data:`KINDS`: the generators by name, drawn in turn so each kind comes up about as often.

What it leaves out
- Any loop question itself: no question, and no city pair or knowledge item of the three sets, is generated
  (:data:`SKIP`; ``tests/test_rl_asks.py`` checks every set). The calculator-error kind stays held out.
- Paraphrase in the judge: an answer right in words the record does not list earns nothing, as in the evaluation.
"""

from __future__ import annotations

import random

from toolkit.calculator import calculator
from toolkit.eval.questions import REFUSAL_WORDS, Question
from toolkit.tools import WEATHER_TABLE, city_aliases, convert_units, get_weather

# The loop questions' two-city pairs (also never drawn by toolkit.rl.envs), and (kind, city) of their one-city
# look-ups: never generated.
LOOP_PAIRS = [{"Paris", "Tokyo"}, {"Berlin", "New York"}, {"深圳", "上海"}, {"London", "Sydney"}]
LOOP_PAIRS += [{"北京", "London"}, {"成都", "杭州"}]
SKIP = {("fahrenheit", "Tokyo"), ("fahrenheit", "New York"), ("humidity", "Singapore"), ("kelvin", "Berlin")}
SKIP |= {("times", "Singapore"), ("divide", "San Francisco"), ("half", "深圳"), ("weather", "上海")}
SKIP |= {("weather", "Sydney"), ("weather", "广州"), ("weather", "London")}

REFUSE = REFUSAL_WORDS


def _names(city: str) -> tuple[str, str]:
    """A table city's English and Chinese names, from the weather tool's own aliases ("北京" -> Beijing, 北京)."""
    names = city_aliases(city)
    return next(n for n in names if n.isascii()), next(n for n in names if not n.isascii())


def _q(kind: str, text: str, answer: dict, tools=(), no_tools: bool = False, note: str = "") -> Question:
    return Question(f"rl_{kind}", "rl", kind, text, note, answer, tuple(tools), no_tools)


def _num(v: float) -> dict:
    """The value exactly when whole, else to two decimals (three below 1)."""
    if float(v).is_integer():
        return {"number": [v, v]}
    pad = 0.011 if abs(v) >= 1 else 0.0011
    return {"number": [round(v - pad, 4), round(v + pad, 4)]}


def _calc(expr: str) -> float:
    return float(calculator(expr)["result"])


def _pct(rng: random.Random):
    p, x = rng.choice([5, 12, 15, 20, 25, 30, 35, 40, 45, 60, 75]), rng.randrange(80, 4000, 20)
    text = rng.choice(["Calculate {p} percent of {x}.", "请算一下{x}的{p}%。", "What does {p}% of {x} come to?"])
    return _q("pct", text.format(p=p, x=x), _num(_calc(f"{x} * {p} / 100"))), 1


def _arith(rng: random.Random):
    a, b = rng.randint(23, 987), rng.randint(23, 987)
    kind = rng.choice(["mul", "sub", "pow", "root", "mean", "sale"])
    if kind == "mul":
        text, v = rng.choice(["Multiply {a} by {b}.", "帮我算{a}乘以{b}。"]).format(a=a, b=b), a * b
    elif kind == "sub":
        text, v = rng.choice(["Subtract {b} from {a}.", "{a}减去{b}得多少？ 请计算。"]).format(a=a, b=b), a - b
    elif kind == "pow":
        base, e = rng.randint(2, 9), rng.randint(3, 6)
        text, v = rng.choice(["Raise {b} to the power {e}.", "请计算{b}的{e}次方。"]).format(b=base, e=e), base**e
    elif kind == "root":
        r = rng.randint(14, 99)
        text, v = rng.choice(["Find the square root of {n}.", "请求{n}的平方根。"]).format(n=r * r), r
    elif kind == "mean":
        xs = [rng.randint(10, 99) for _ in range(rng.choice([3, 4]))]
        text, v = "Average these numbers: " + ", ".join(map(str, xs)) + ".", sum(xs) / len(xs)
    else:
        price, off = rng.randrange(120, 2000, 10), rng.choice([10, 20, 25, 30, 40])
        text = f"A jacket costs {price} dollars and is {off}% off. What do I pay?"
        v = price * (100 - off) / 100
    return _q("arith", text, _num(float(v))), 1


UNIT_WORDS = {"km": ("kilometres", "公里"), "mi": ("miles", "英里"), "m": ("metres", "米"), "ft": ("feet", "英尺")}
UNIT_WORDS |= {"in": ("inches", "英寸"), "cm": ("centimetres", "厘米"), "kg": ("kilograms", "公斤")}
UNIT_WORDS |= {"lb": ("pounds", "磅"), "g": ("grams", "克"), "l": ("litres", "升"), "gal": ("gallons", "加仑")}
UNIT_WORDS |= {"ml": ("millilitres", "毫升"), "c": ("degrees Celsius", "摄氏度"), "f": ("degrees Fahrenheit", "华氏度")}
UNIT_PAIRS = [("km", "mi"), ("mi", "km"), ("m", "ft"), ("ft", "m"), ("in", "cm"), ("kg", "lb"), ("lb", "kg")]
UNIT_PAIRS += [("g", "lb"), ("l", "gal"), ("gal", "l"), ("ml", "l"), ("c", "f"), ("f", "c")]


def _units(rng: random.Random):
    f, t = rng.choice(UNIT_PAIRS)
    v = rng.choice([2, 3, 4, 6, 7, 12, 15, 25, 40, 50, 64, 80, 120, 250])
    got = convert_units(v, f, t)["result"]
    (fe, fz), (te, tz) = UNIT_WORDS[f], UNIT_WORDS[t]
    text = rng.choice([f"Please convert {v} {fe} into {te}.", f"请把{v}{fz}换算成{tz}。"])
    return _q("units", text, _num(got), [{"name": "convert_units", "result": [got - 0.01, got + 0.01]}]), 1


def _city(rng: random.Random, kind: str) -> str:
    while (kind, city := rng.choice(list(WEATHER_TABLE))) in SKIP:
        pass
    return city


def _lookup(rng: random.Random):
    kind = rng.choice(["weather", "humidity", "fahrenheit", "kelvin"])
    city = _city(rng, kind)
    w = get_weather(city)
    need = [{"name": "get_weather", "city": city}]
    en, zh = _names(city)
    if kind == "weather":
        text = rng.choice([f"Check the current weather in {en} for me.", f"帮我查一下{zh}现在的天气。"])
        cond = [w["condition"], w["condition"].replace(",", " ").split()[-1]]
        return _q(kind, text, {"any": [{"number": [w["temperature"]] * 2}, {"words": cond}]}, need), 1
    if kind == "humidity":
        text = rng.choice([f"What is the humidity in {en} right now?", f"{zh}此刻湿度多少？请查询。"])
        return _q(kind, text, {"number": [w["humidity"]] * 2}, need), 1
    unit = "f" if kind == "fahrenheit" else "k"
    v = convert_units(w["temperature"], "c", unit)["result"]
    text = rng.choice(
        [f"Look up {en}'s temperature and give it in {'Fahrenheit' if unit == 'f' else 'kelvin'}."]
        + [f"查{zh}的气温，并换算成{'华氏度' if unit == 'f' else '开尔文'}。"]
    )
    return _q(kind, text, _num(v), need), 2


def _then_math(rng: random.Random):
    kind = rng.choice(["times", "divide", "half"])
    city = _city(rng, kind)
    (en, zh), t = _names(city), get_weather(city)["temperature"]
    need = [{"name": "get_weather", "city": city}]
    if kind == "half":
        text, v = rng.choice([f"Halve the temperature in {en} right now.", f"{zh}当前温度除以2是多少？"]), t / 2
    else:
        k = rng.choice([2, 4, 5, 10]) if kind == "divide" else rng.choice([2, 4, 5, 7])
        v = t / k if kind == "divide" else t * k
        op = ("divided by", "除以") if kind == "divide" else ("times", "乘以")
        text = rng.choice([f"Look up {en} and give its temperature {op[0]} {k}.", f"查{zh}现在的气温，再{op[1]}{k}。"])
    return _q(kind, text, _num(v), need), 2


def _pair(rng: random.Random):
    while True:
        a, b = rng.sample(list(WEATHER_TABLE), 2)
        ta, tb = get_weather(a)["temperature"], get_weather(b)["temperature"]
        if {a, b} not in LOOP_PAIRS and ta != tb:
            return a, b, ta, tb


def _two(rng: random.Random):
    ca, cb, ta, tb = _pair(rng)  # the table's names: the judge's
    (a, za), (b, zb) = _names(ca), _names(cb)
    need = [{"name": "get_weather", "city": ca}, {"name": "get_weather", "city": cb}]
    kind = rng.choice(["gap", "sum", "mean", "colder"])
    if kind == "gap":
        text = rng.choice([f"Find the temperature gap between {a} and {b} today.", f"{za}和{zb}温差几度？"])
        return _q(kind, text, {"number": [abs(ta - tb)] * 2}, need), 2
    if kind == "sum":
        return _q(kind, f"Look up {a} and {b} and add their temperatures.", {"number": [ta + tb] * 2}, need), 2
    if kind == "mean":
        text = rng.choice([f"Average the current temperatures of {a} and {b}.", f"{za}与{zb}的平均温度？"])
        return _q(kind, text, _num((ta + tb) / 2), need), 2
    cold, warm = (ca, cb) if ta < tb else (cb, ca)
    words = (
        ["colder", "cooler", "lower", "更冷", "更凉", "更低"],
        ["warmer", "hotter", "higher", "更暖", "更热", "更高"],
    )
    spec = {"compare": {"more": cold, "than": warm, "more_words": words[0], "less_words": words[1]}}
    text = rng.choice([f"Of {a} and {b}, where is it colder now?", f"{za}、{zb}，哪里现在更冷？"])
    return _q(kind, text, spec, need), 2


# (question, words one of which the answer must state, or the number it must state): none is a loop question's
# item (Australia's capital, hello in French, good evening in Spanish, thank you in Japanese, the largest continent).
KNOWN = [
    ("Canada's capital is which city?", ["ottawa"]),
    ("Tell me the capital of Italy.", ["rome", "roma"]),
    ("Name the capital of Japan.", ["tokyo", "东京"]),
    ("Egypt has which capital city?", ["cairo"]),
    ("法国的首都是哪座城市？", ["巴黎", "paris"]),
    ("德国的首都是哪里？", ["柏林", "berlin"]),
    ("How do you say 'thank you' in German?", ["danke"]),
    ("What is 'water' in Spanish?", ["agua"]),
    ("Translate 'good night' into French.", ["bonne nuit"]),
    ("'猫'用英语怎么说？", ["cat"]),
    ("How many days does a leap year have?", 366),
    ("How many legs does a spider have?", 8),
    ("一周有几天？", 7),
    ("Which planet is closest to the Sun?", ["mercury", "水星"]),
    ("太阳从哪个方向升起？", ["东"]),
]
CHAT = [
    ("Good morning! How are you?", "any"),
    ("给我讲一句鼓励人的话。", "zh"),
    ("Tell me a fun fact about cats.", "any"),
]
CHAT += [("用一句话描述大海。", "zh"), ("Bye, have a nice day!", "any")]
REQUESTS = ["Set a timer for ten minutes.", "Play my workout playlist.", "Turn on the living-room lights."]
REQUESTS += ["帮我点一份外卖。", "Book me a table for two tonight.", "给我妈妈发一条短信说我到了。"]


def _no_tool(rng: random.Random):
    r = rng.random()
    if r < 0.55:
        text, want = rng.choice(KNOWN)
        spec = {"words": want} if isinstance(want, list) else {"number": [want, want]}
        return _q("known", text, spec, no_tools=True), 0
    if r < 0.8:
        text, lang = rng.choice(CHAT)
        return _q("chat", text, {"prose": lang}, no_tools=True), 0
    return _q("refuse", rng.choice(REQUESTS), {"words": REFUSE}, no_tools=True), 0


KINDS = {"pct": _pct, "arith": _arith, "units": _units, "lookup": _lookup, "then_math": _then_math, "two": _two}
KINDS["no_tool"] = _no_tool


def asks(seed: int, n: int) -> list[tuple[Question, int]]:
    """``n`` questions drawn under ``seed`` (the kinds in turn), each with the number of calls that cost nothing."""
    rng, names = random.Random(f"asks-{seed}"), list(KINDS)
    return [KINDS[names[i % len(names)]](rng) for i in range(n)]
