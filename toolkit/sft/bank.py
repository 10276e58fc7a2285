"""The function bank the training-data generator draws from: made-up APIs in many domains, each with a JSON
Schema and request phrasings in English and Chinese.

What it does
- :data:`BANK` holds :class:`Fn` entries: a name, a description, parameters built from small typed slot makers
  (:func:`text`, :func:`integer`, :func:`number`, :func:`choice` for enums, :func:`many` for arrays, :func:`group`
  for nested objects, :func:`flag` for booleans) and request templates (``en``/``zh``) whose ``{slot}`` marks say
  where a value is mentioned. A template that mentions an optional parameter puts it in the call; one that does
  not leaves it out, so the model learns that optional means "only when asked". ``{slot=value}`` sets a value
  without printing it (a boolean the phrasing implies).
- Every slot draws a value and says it in the request's language (``Draw.value`` goes in the call, ``Draw.say``
  in the text), so the arguments are exactly what the request asked for.

What it leaves out
- Any text from BFCL (the names and phrasings here were written for the kit; ``tests/test_sft_data.py`` checks
  that no BFCL function name or question occurs in the generated set) and any real API behind the names: only the
  kit's own tools (``toolkit.tools``) are ever executed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Draw:
    value: Any  # what goes into the call's arguments
    en: str  # how an English request says it
    zh: str  # how a Chinese request says it

    def say(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


@dataclass
class Slot:
    schema: dict
    draw: Callable[[random.Random], Draw]
    optional: bool = False


@dataclass
class Fn:
    name: str
    description: str
    slots: dict[str, Slot]
    en: list[str]
    zh: list[str]
    domain: str = ""
    fields: list[str] = field(default_factory=list)  # filled in by __post_init__: the slot names templates use

    def __post_init__(self):
        for lang, ts in (("en", self.en), ("zh", self.zh)):
            for t in ts:
                used = set(re.findall(r"\{(\w+)(?:=[^}]*)?\}", t))
                missing = [k for k, s in self.slots.items() if not s.optional and k not in used]
                unknown = used - set(self.slots)
                if missing or unknown:
                    raise ValueError(f"{self.name} {lang} template {t!r}: missing {missing}, unknown {sorted(unknown)}")

    def schema(self) -> dict:
        props = {k: dict(s.schema) for k, s in self.slots.items()}
        required = [k for k, s in self.slots.items() if not s.optional]
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": props, "required": required},
            },
        }


# ---------------------------------------------------------------- slot makers
def _pairs(values) -> list[tuple[Any, str, str]]:
    out = []
    for v in values:
        if isinstance(v, tuple):
            out.append(v if len(v) == 3 else (v[0], v[1], v[1]))
        else:
            out.append((v, str(v), str(v)))
    return out


def text(desc: str, values, optional: bool = False, **kw) -> Slot:
    """A string chosen from ``values`` (each ``value`` or ``(value, english, chinese)``)."""
    vals = _pairs(values)
    return Slot({"type": "string", "description": desc, **kw}, lambda r: Draw(*r.choice(vals)), optional)


def choice(desc: str, values, optional: bool = False) -> Slot:
    """A string enum: the schema lists the values."""
    vals = _pairs(values)
    schema = {"type": "string", "enum": [v[0] for v in vals], "description": desc}
    return Slot(schema, lambda r: Draw(*r.choice(vals)), optional)


def integer(desc: str, lo: int, hi: int, optional: bool = False, unit: tuple[str, str] = ("", "")) -> Slot:
    def draw(r):
        v = r.randint(lo, hi)
        return Draw(v, f"{v}{unit[0]}", f"{v}{unit[1]}")

    return Slot({"type": "integer", "description": desc}, draw, optional)


def number(desc: str, lo: float, hi: float, digits: int = 1, optional: bool = False, unit=("", "")) -> Slot:
    def draw(r):
        v = round(r.uniform(lo, hi), digits)
        return Draw(v, f"{v:g}{unit[0]}", f"{v:g}{unit[1]}")

    return Slot({"type": "number", "description": desc}, draw, optional)


def many(desc: str, item: Slot, lo: int = 2, hi: int = 3, optional: bool = False) -> Slot:
    """An array of distinct items, said as "a, b and c" / "a、b和c"."""

    def draw(r):
        k, seen, out = r.randint(lo, hi), set(), []
        for _ in range(40):
            d = item.draw(r)
            if repr(d.value) not in seen:
                seen.add(repr(d.value))
                out.append(d)
            if len(out) == k:
                break
        en = ", ".join(d.en for d in out[:-1]) + f" and {out[-1].en}" if len(out) > 1 else out[0].en
        zh = "、".join(d.zh for d in out[:-1]) + f"和{out[-1].zh}" if len(out) > 1 else out[0].zh
        return Draw([d.value for d in out], en, zh)

    return Slot({"type": "array", "items": dict(item.schema), "description": desc}, draw, optional)


def group(desc: str, parts: dict[str, Slot], en: str, zh: str, optional: bool = False) -> Slot:
    """A nested object; ``en``/``zh`` say it with ``{part}`` marks."""

    def draw(r):
        ds = {k: s.draw(r) for k, s in parts.items()}
        return Draw(
            {k: d.value for k, d in ds.items()},
            en.format(**{k: d.en for k, d in ds.items()}),
            zh.format(**{k: d.zh for k, d in ds.items()}),
        )

    schema = {
        "type": "object",
        "description": desc,
        "properties": {k: dict(s.schema) for k, s in parts.items()},
        "required": list(parts),
    }
    return Slot(schema, draw, optional)


def flag(desc: str) -> Slot:
    """A boolean, always optional: a template sets it with ``{name=true}``."""
    return Slot({"type": "boolean", "description": desc}, lambda r: Draw(True, "", ""), True)


# ---------------------------------------------------------------- shared value lists
CITIES = [
    ("Lisbon", "Lisbon", "里斯本"),
    ("Nairobi", "Nairobi", "内罗毕"),
    ("Osaka", "Osaka", "大阪"),
    ("Toronto", "Toronto", "多伦多"),
    ("Cairo", "Cairo", "开罗"),
    ("Lima", "Lima", "利马"),
    ("Oslo", "Oslo", "奥斯陆"),
    ("Seoul", "Seoul", "首尔"),
    ("Madrid", "Madrid", "马德里"),
    ("Hanoi", "Hanoi", "河内"),
    ("Vienna", "Vienna", "维也纳"),
    ("Denver", "Denver", "丹佛"),
    ("Kunming", "Kunming", "昆明"),
    ("Xi'an", "Xi'an", "西安"),
    ("Wuhan", "Wuhan", "武汉"),
    ("Reykjavik", "Reykjavik", "雷克雅未克"),
]
PEOPLE = ["Ana Souza", "Li Wei", "Kenji Mori", "Fatima Noor", "Omar Haddad", "Zhang Min", "Priya Raman", "Lukas Berg"]
LANGS = [
    ("fr", "French", "法语"),
    ("de", "German", "德语"),
    ("es", "Spanish", "西班牙语"),
    ("ja", "Japanese", "日语"),
    ("zh", "Chinese", "中文"),
    ("ko", "Korean", "韩语"),
    ("it", "Italian", "意大利语"),
]
CURRENCIES = [
    ("EUR", "euros", "欧元"),
    ("USD", "US dollars", "美元"),
    ("JPY", "yen", "日元"),
    ("GBP", "pounds", "英镑"),
    ("CNY", "yuan", "人民币"),
    ("CHF", "Swiss francs", "瑞士法郎"),
    ("CAD", "Canadian dollars", "加元"),
]
DATES = [
    (
        f"2027-{m:02d}-{d:02d}",
        f"{['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'][m - 1]} {d}, 2027",
        f"2027年{m}月{d}日",
    )
    for m in range(1, 13)
    for d in (3, 9, 14, 21, 27)
]
TICKERS = ["NVQX", "ORBT", "KLMN", "ZEPH", "TRVL", "MNRA", "QBIT", "HLXA"]
FOODS = [
    ("tofu", "tofu", "豆腐"),
    ("salmon", "salmon", "三文鱼"),
    ("lentils", "lentils", "扁豆"),
    ("rice", "rice", "米饭"),
    ("eggplant", "eggplant", "茄子"),
    ("mushrooms", "mushrooms", "蘑菇"),
    ("chickpeas", "chickpeas", "鹰嘴豆"),
]
ELEMENTS = [
    ("Fe", "iron", "铁"),
    ("Cu", "copper", "铜"),
    ("Na", "sodium", "钠"),
    ("Au", "gold", "金"),
    ("He", "helium", "氦"),
    ("Si", "silicon", "硅"),
    ("Zn", "zinc", "锌"),
]
PLANETS = [
    ("Mars", "Mars", "火星"),
    ("Venus", "Venus", "金星"),
    ("Jupiter", "Jupiter", "木星"),
    ("Saturn", "Saturn", "土星"),
    ("Mercury", "Mercury", "水星"),
    ("Neptune", "Neptune", "海王星"),
]
TEAMS = ["Harbor City Gulls", "Ridgeview Rams", "Northfield Owls", "Lakeside Comets", "Stonebridge Foxes"]
BOOKS = [
    ("The Silent Orchard", "The Silent Orchard", "《寂静果园》"),
    ("Rivers of Glass", "Rivers of Glass", "《玻璃之河》"),
    ("A Map of Small Hours", "A Map of Small Hours", "《小时地图》"),
    ("Copper Lanterns", "Copper Lanterns", "《铜灯》"),
]
GENRES = [
    ("jazz", "jazz", "爵士"),
    ("classical", "classical", "古典"),
    ("rock", "rock", "摇滚"),
    ("folk", "folk", "民谣"),
    ("electronic", "electronic", "电子"),
]
FILES = ["report_q3.pdf", "budget.xlsx", "notes/todo.md", "photos/trip.zip", "draft_v2.docx", "data/sales.csv"]
EMAILS = ["ana@example.org", "li.wei@example.com", "kenji@example.net", "fatima@example.org", "omar@example.com"]
AIRPORTS = [
    ("LIS", "Lisbon", "里斯本"),
    ("NBO", "Nairobi", "内罗毕"),
    ("KIX", "Osaka", "大阪"),
    ("YYZ", "Toronto", "多伦多"),
    ("CAI", "Cairo", "开罗"),
    ("ICN", "Seoul", "首尔"),
    ("MAD", "Madrid", "马德里"),
    ("VIE", "Vienna", "维也纳"),
]
SHAPES = [("hexagon", "hexagon", "正六边形"), ("pentagon", "pentagon", "正五边形"), ("octagon", "octagon", "正八边形")]


# ---------------------------------------------------------------- the bank
BANK: list[Fn] = [
    # finance
    Fn(
        "quote_share_price",
        "Returns the latest traded price of a listed company's shares, by ticker symbol.",
        {
            "ticker": text("Ticker symbol of the share, e.g. ORBT.", TICKERS),
            "exchange": choice(
                "Exchange to query; defaults to the primary listing.", ["NASDAQ", "NYSE", "LSE"], optional=True
            ),
        },
        [
            "What's {ticker} trading at right now?",
            "Get me the latest share price of {ticker}.",
            "How much is one {ticker} share on the {exchange}?",
        ],
        ["{ticker}现在股价是多少？", "帮我查一下{ticker}的最新股价。", "{ticker}在{exchange}的股价是多少？"],
        "finance",
    ),
    Fn(
        "fx_convert_amount",
        "Converts an amount of money from one currency to another at today's rate.",
        {
            "amount": number("Amount of money to convert.", 5, 5000, 2),
            "source_currency": choice("ISO code of the currency the amount is in.", CURRENCIES),
            "target_currency": choice("ISO code of the currency to convert to.", CURRENCIES),
        },
        [
            "Convert {amount} {source_currency} into {target_currency}.",
            "How many {target_currency} do I get for {amount} {source_currency}?",
        ],
        ["把{amount}{source_currency}换成{target_currency}。", "{amount}{source_currency}能换多少{target_currency}？"],
        "finance",
    ),
    Fn(
        "loan_monthly_installment",
        "Computes the fixed monthly payment of an amortised loan.",
        {
            "principal": integer("Amount borrowed.", 1000, 500000),
            "annual_rate_percent": number("Yearly interest rate in percent.", 1, 12, 2),
            "months": integer("Number of monthly payments.", 6, 360),
        },
        [
            "What's the monthly payment on a {principal} loan at {annual_rate_percent}% a year over {months} months?",
            "I borrow {principal} at {annual_rate_percent} percent annual interest for {months} months. Monthly installment?",
        ],
        ["贷款{principal}元，年利率{annual_rate_percent}%，分{months}个月还，每月还多少？"],
        "finance",
    ),
    Fn(
        "compound_growth_value",
        "Future value of a deposit that earns compound interest.",
        {
            "deposit": number("Starting amount.", 100, 20000, 0),
            "rate_percent": number("Interest per period in percent.", 0.5, 9, 1),
            "periods": integer("How many compounding periods.", 2, 40),
            "contribution": number("Amount added at the end of every period.", 10, 500, 0, optional=True),
        },
        [
            "If I put {deposit} in at {rate_percent}% per period for {periods} periods, what will it be worth?",
            "Future value of {deposit} growing at {rate_percent}% for {periods} periods, adding {contribution} each period?",
        ],
        [
            "{deposit}元按每期{rate_percent}%复利存{periods}期，最后有多少？",
            "本金{deposit}，每期利率{rate_percent}%，共{periods}期，每期再存{contribution}，终值是多少？",
        ],
        "finance",
    ),
    # travel
    Fn(
        "search_flight_offers",
        "Searches one-way flight offers between two airports on a date.",
        {
            "origin": choice("IATA code of the departure airport.", AIRPORTS),
            "destination": choice("IATA code of the arrival airport.", AIRPORTS),
            "date": text("Departure date, YYYY-MM-DD.", DATES),
            "cabin": choice(
                "Cabin class.",
                [
                    ("economy", "economy", "经济舱"),
                    ("business", "business", "商务舱"),
                    ("first", "first class", "头等舱"),
                ],
                optional=True,
            ),
            "passengers": integer("Number of travellers.", 1, 6, optional=True),
        },
        [
            "Find flights from {origin} to {destination} on {date}.",
            "Any {cabin} flights {origin} to {destination} on {date} for {passengers} people?",
            "I need to fly from {origin} to {destination} on {date}.",
        ],
        [
            "查一下{date}从{origin}飞{destination}的航班。",
            "{date}从{origin}到{destination}，{passengers}个人，{cabin}，有哪些航班？",
        ],
        "travel",
    ),
    Fn(
        "reserve_hotel_room",
        "Books a hotel room in a city for a stay.",
        {
            "city": text("City to stay in.", CITIES),
            "check_in": text("Arrival date, YYYY-MM-DD.", DATES),
            "nights": integer("Number of nights.", 1, 14),
            "guest": group(
                "Who the booking is for.",
                {"name": text("Full name.", PEOPLE), "adults": integer("Adults in the room.", 1, 4)},
                "{name} ({adults} adults)",
                "{name}（{adults}位成人）",
                optional=True,
            ),
        },
        [
            "Book a hotel in {city} from {check_in} for {nights} nights.",
            "Reserve a room in {city}, arriving {check_in}, {nights} nights, for {guest}.",
        ],
        [
            "帮我订{city}的酒店，{check_in}入住，住{nights}晚。",
            "在{city}订一间房，{check_in}入住{nights}晚，入住人{guest}。",
        ],
        "travel",
    ),
    Fn(
        "train_timetable_lookup",
        "Lists train departures between two stations.",
        {
            "from_station": text("Departure station.", CITIES),
            "to_station": text("Arrival station.", CITIES),
            "after": text(
                "Earliest departure time, HH:MM (24 h).", ["07:30", "09:00", "12:15", "16:40", "18:05"], optional=True
            ),
        },
        [
            "When are the trains from {from_station} to {to_station}?",
            "Trains {from_station} → {to_station} leaving after {after}?",
        ],
        ["从{from_station}到{to_station}有哪些火车？", "{after}以后从{from_station}去{to_station}的火车有哪些？"],
        "travel",
    ),
    Fn(
        "visa_requirement_check",
        "Says whether a citizen of one country needs a visa to visit another.",
        {
            "citizenship": text(
                "Country of the traveller's passport.",
                [
                    ("Brazil", "Brazil", "巴西"),
                    ("India", "India", "印度"),
                    ("Kenya", "Kenya", "肯尼亚"),
                    ("Canada", "Canada", "加拿大"),
                ],
            ),
            "destination_country": text(
                "Country to visit.",
                [
                    ("Japan", "Japan", "日本"),
                    ("Portugal", "Portugal", "葡萄牙"),
                    ("Peru", "Peru", "秘鲁"),
                    ("Egypt", "Egypt", "埃及"),
                ],
            ),
            "stay_days": integer("Planned length of stay in days.", 3, 90, optional=True),
        },
        [
            "Does a {citizenship} passport holder need a visa for {destination_country}?",
            "I'm from {citizenship}, going to {destination_country} for {stay_days} days. Visa needed?",
        ],
        [
            "{citizenship}护照去{destination_country}需要签证吗？",
            "我是{citizenship}人，要去{destination_country}待{stay_days}天，需要签证吗？",
        ],
        "travel",
    ),
    # geometry / math
    Fn(
        "regular_polygon_area",
        "Area of a regular polygon from its number of sides and side length.",
        {
            "sides": integer("Number of equal sides (3 or more).", 3, 12),
            "side_length": number("Length of one side.", 0.5, 40, 1),
        },
        [
            "Area of a regular polygon with {sides} sides of length {side_length}?",
            "What's the area of a regular {sides}-sided shape whose sides are {side_length} long?",
        ],
        ["边数为{sides}、边长{side_length}的正多边形面积是多少？"],
        "geometry",
    ),
    Fn(
        "cone_volume",
        "Volume of a right circular cone.",
        {
            "radius": number("Radius of the base.", 0.5, 30, 1),
            "height": number("Height of the cone.", 1, 50, 1),
            "unit": choice(
                "Length unit of the inputs.",
                [("cm", "cm", "厘米"), ("m", "m", "米"), ("in", "inches", "英寸")],
                optional=True,
            ),
        },
        [
            "Volume of a cone with radius {radius} and height {height}?",
            "A cone is {height} {unit} tall with a {radius} {unit} radius. Its volume?",
        ],
        [
            "底面半径{radius}、高{height}的圆锥体积是多少？",
            "一个圆锥高{height}{unit}，底面半径{radius}{unit}，体积多大？",
        ],
        "geometry",
    ),
    Fn(
        "gcd_of_integers",
        "Greatest common divisor of a list of whole numbers.",
        {"numbers": many("The whole numbers.", integer("A whole number.", 12, 999), 2, 4)},
        ["What's the greatest common divisor of {numbers}?", "Find the GCD of {numbers}."],
        ["{numbers}的最大公约数是多少？"],
        "math",
    ),
    Fn(
        "solve_quadratic_roots",
        "Real roots of a*x^2 + b*x + c = 0.",
        {
            "a": integer("Coefficient of x squared (not 0).", 1, 9),
            "b": integer("Coefficient of x.", -20, 20),
            "c": integer("Constant term.", -30, 30),
        },
        ["Solve {a}x^2 + {b}x + {c} = 0.", "Roots of the quadratic with a={a}, b={b}, c={c}?"],
        ["解方程 {a}x² + {b}x + {c} = 0。", "a={a}，b={b}，c={c}的二次方程的根是什么？"],
        "math",
    ),
    Fn(
        "binomial_probability",
        "Probability of exactly k successes in n independent trials.",
        {
            "trials": integer("Number of trials n.", 2, 50),
            "successes": integer("Number of successes k.", 0, 10),
            "p_success": number("Probability of success in one trial (0 to 1).", 0.05, 0.95, 2),
        },
        [
            "Chance of exactly {successes} successes in {trials} trials with p = {p_success}?",
            "Binomial probability: n={trials}, k={successes}, p={p_success}.",
        ],
        ["{trials}次试验、每次成功概率{p_success}，恰好成功{successes}次的概率是多少？"],
        "math",
    ),
    Fn(
        "integer_prime_decomposition",
        "Prime factorisation of a positive integer.",
        {"n": integer("The integer to factor (2 or more).", 12, 99999)},
        ["Factor {n} into primes.", "What are the prime factors of {n}?"],
        ["把{n}分解质因数。", "{n}的质因数有哪些？"],
        "math",
    ),
    # science
    Fn(
        "element_molar_mass",
        "Molar mass in g/mol of a chemical element by symbol.",
        {"symbol": choice("Element symbol.", ELEMENTS)},
        ["What's the molar mass of {symbol}?", "Molar mass of {symbol} please."],
        ["{symbol}的摩尔质量是多少？"],
        "chemistry",
    ),
    Fn(
        "ideal_gas_pressure",
        "Pressure of an ideal gas from moles, temperature and volume (PV = nRT).",
        {
            "moles": number("Amount of gas in mol.", 0.1, 10, 2),
            "temperature_k": number("Temperature in kelvin.", 200, 600, 0),
            "volume_l": number("Volume in litres.", 0.5, 50, 1),
        },
        [
            "Pressure of {moles} mol of gas at {temperature_k} K in {volume_l} L?",
            "Ideal gas: n={moles} mol, T={temperature_k} K, V={volume_l} L. What's P?",
        ],
        ["{moles}摩尔气体在{temperature_k}K、{volume_l}升体积下压强是多少？"],
        "physics",
    ),
    Fn(
        "projectile_range",
        "Horizontal range of a projectile launched on flat ground, no air resistance.",
        {
            "speed_m_s": number("Launch speed in m/s.", 2, 80, 1),
            "angle_deg": integer("Launch angle in degrees.", 5, 85),
            "gravity": number("Gravitational acceleration in m/s^2; Earth if omitted.", 1.6, 24.8, 1, optional=True),
        },
        [
            "How far does a ball go if thrown at {speed_m_s} m/s at {angle_deg} degrees?",
            "Range of a projectile: {speed_m_s} m/s, {angle_deg}°, g = {gravity}.",
        ],
        [
            "以{speed_m_s}米/秒、{angle_deg}度角抛出，水平射程多远？",
            "初速{speed_m_s}m/s，角度{angle_deg}°，重力加速度{gravity}，射程是多少？",
        ],
        "physics",
    ),
    Fn(
        "planet_fact_sheet",
        "Basic facts about a planet of the solar system.",
        {
            "planet": choice("Planet name.", PLANETS),
            "fields": many(
                "Which facts to return.",
                choice("A fact.", ["mass", "radius", "moons", "day_length"]),
                1,
                3,
                optional=True,
            ),
        },
        ["Tell me about {planet}.", "Give me the {fields} of {planet}."],
        ["介绍一下{planet}。", "告诉我{planet}的{fields}。"],
        "astronomy",
    ),
    # health / food
    Fn(
        "bmi_from_measurements",
        "Body-mass index from weight and height.",
        {
            "weight_kg": number("Weight in kilograms.", 35, 150, 1),
            "height_cm": integer("Height in centimetres.", 140, 210),
        },
        ["What's my BMI? I'm {height_cm} cm and weigh {weight_kg} kg.", "BMI for {weight_kg} kg at {height_cm} cm?"],
        ["我身高{height_cm}厘米，体重{weight_kg}公斤，BMI是多少？"],
        "health",
    ),
    Fn(
        "recipe_finder",
        "Finds recipes that use the given ingredients.",
        {
            "ingredients": many("Ingredients to use.", text("An ingredient.", FOODS), 1, 3),
            "max_minutes": integer("Longest total cooking time in minutes.", 10, 90, optional=True),
            "vegetarian": flag("Only vegetarian recipes."),
        },
        [
            "What can I cook with {ingredients}?",
            "Find a recipe with {ingredients} that takes under {max_minutes} minutes.",
            "Vegetarian recipes with {ingredients}, please.{vegetarian=true}",
        ],
        [
            "用{ingredients}能做什么菜？",
            "找一个用{ingredients}、{max_minutes}分钟内能做好的菜谱。",
            "有没有用{ingredients}的素食菜谱？{vegetarian=true}",
        ],
        "food",
    ),
    Fn(
        "nutrition_per_serving",
        "Calories and macronutrients of a food portion.",
        {"food": text("Food name.", FOODS), "grams": integer("Portion size in grams.", 20, 600)},
        ["How many calories are in {grams} g of {food}?", "Nutrition facts for {grams} grams of {food}."],
        ["{grams}克{food}有多少热量？"],
        "food",
    ),
    # calendar / communication
    Fn(
        "schedule_meeting",
        "Creates a calendar meeting with attendees.",
        {
            "title": text("Meeting title.", ["Budget review", "Sprint planning", "Design critique", "Quarterly sync"]),
            "date": text("Day of the meeting, YYYY-MM-DD.", DATES),
            "start_time": text("Start time, HH:MM (24 h).", ["09:00", "10:30", "13:00", "15:45"]),
            "attendees": many("Email addresses of the invitees.", text("An email address.", EMAILS), 1, 3),
            "duration_min": integer("Length in minutes.", 15, 120, optional=True),
        },
        [
            "Set up a '{title}' meeting on {date} at {start_time} with {attendees}.",
            "Schedule '{title}' for {duration_min} minutes on {date} at {start_time}; invite {attendees}.",
        ],
        [
            "{date} {start_time}安排一个“{title}”会议，邀请{attendees}。",
            "安排“{title}”，{date} {start_time}开始，{duration_min}分钟，参会人{attendees}。",
        ],
        "calendar",
    ),
    Fn(
        "send_text_message",
        "Sends a short text message to a phone number.",
        {
            "phone": text(
                "Recipient's phone number in international format.",
                ["+351912345678", "+254700111222", "+8613800138000", "+14165550199"],
            ),
            "message": text(
                "The message text.",
                [
                    ("Running 10 minutes late", "Running 10 minutes late", "我会晚到10分钟"),
                    ("Dinner at 7?", "Dinner at 7?", "7点吃晚饭？"),
                    ("Call me back", "Call me back", "回我电话"),
                ],
            ),
        },
        ['Text {phone}: "{message}".', 'Send "{message}" to {phone}.'],
        ["给{phone}发短信：“{message}”。"],
        "communication",
    ),
    Fn(
        "translate_sentence",
        "Translates text into another language.",
        {
            "text": text(
                "The text to translate.",
                [
                    ("Where is the station?", "Where is the station?", "车站在哪里？"),
                    ("Good morning, everyone", "Good morning, everyone", "大家早上好"),
                    ("The museum opens at nine", "The museum opens at nine", "博物馆九点开门"),
                ],
            ),
            "target_language": choice("ISO 639-1 code of the language to translate into.", LANGS),
            "formal": flag("Use the formal register."),
        },
        [
            'Translate "{text}" into {target_language}.',
            'How do I say "{text}" in {target_language}, formally?{formal=true}',
        ],
        ["把“{text}”翻译成{target_language}。", "“{text}”用{target_language}正式地怎么说？{formal=true}"],
        "language",
    ),
    # files / devices
    Fn(
        "share_file_link",
        "Creates a share link for a file in cloud storage.",
        {
            "path": text("Path of the file.", FILES),
            "expires_days": integer("Days until the link expires.", 1, 30, optional=True),
            "permission": choice(
                "What the recipient may do.", [("view", "view", "查看"), ("edit", "edit", "编辑")], optional=True
            ),
        },
        ["Make a share link for {path}.", "Share {path} with {permission} rights, link valid {expires_days} days."],
        ["给{path}生成一个分享链接。", "分享{path}，权限{permission}，链接{expires_days}天有效。"],
        "files",
    ),
    Fn(
        "thermostat_set_target",
        "Sets the target temperature of a smart thermostat in a room.",
        {
            "room": text(
                "Room name.",
                [("living room", "living room", "客厅"), ("bedroom", "bedroom", "卧室"), ("office", "office", "书房")],
            ),
            "celsius": number("Target temperature in °C.", 16, 27, 1),
            "mode": choice(
                "Heating or cooling mode.",
                [("heat", "heating", "制热"), ("cool", "cooling", "制冷"), ("auto", "auto", "自动")],
                optional=True,
            ),
        },
        ["Set the {room} to {celsius} degrees.", "Put the {room} thermostat on {mode} at {celsius}°C."],
        ["把{room}温度调到{celsius}度。", "{room}空调调成{mode}，{celsius}度。"],
        "home",
    ),
    # media / sports / books
    Fn(
        "playlist_generator",
        "Builds a music playlist of a genre and length.",
        {
            "genre": choice("Music genre.", GENRES),
            "tracks": integer("Number of songs.", 5, 40),
            "decade": choice("Decade the songs come from.", ["1960s", "1980s", "1990s", "2010s"], optional=True),
        },
        ["Make me a {genre} playlist with {tracks} songs.", "I want {tracks} {genre} tracks from the {decade}."],
        ["给我做一个{tracks}首歌的{genre}歌单。", "来{tracks}首{decade}的{genre}歌曲。"],
        "music",
    ),
    Fn(
        "league_table_position",
        "Current league position and points of a sports team.",
        {
            "team": text("Team name.", TEAMS),
            "season": text("Season, e.g. 2026-27.", ["2025-26", "2026-27"], optional=True),
        },
        ["Where are the {team} in the table?", "What was the {team}' league position in {season}?"],
        ["{team}现在排第几？", "{team}在{season}赛季排名第几？"],
        "sports",
    ),
    Fn(
        "library_book_availability",
        "Whether a library branch has a copy of a book available.",
        {
            "title": text("Book title.", BOOKS),
            "branch": text(
                "Library branch.",
                [
                    ("Central", "Central", "总馆"),
                    ("Eastside", "Eastside", "东区分馆"),
                    ("Harbor", "Harbor", "港口分馆"),
                ],
                optional=True,
            ),
        },
        ["Is {title} available at the library?", "Does the {branch} branch have {title} on the shelf?"],
        ["图书馆有{title}可以借吗？", "{branch}有没有{title}？"],
        "books",
    ),
    Fn(
        "cinema_schedule_for_film",
        "Showtimes of a film at cinemas in a city on a date.",
        {
            "film": text("Film title.", ["Glass Harbor", "Night Ferry", "The Ninth Orchard", "Paper Comets"]),
            "city": text("City.", CITIES),
            "date": text("Day, YYYY-MM-DD.", DATES, optional=True),
        },
        ["When is {film} playing in {city}?", "Showtimes for {film} in {city} on {date}?"],
        ["{film}在{city}什么时候放映？", "{date}{city}的{film}有哪些场次？"],
        "movies",
    ),
    # shopping / logistics
    Fn(
        "track_parcel_status",
        "Current status of a parcel by carrier and tracking number.",
        {
            "carrier": choice("Shipping company.", ["SwiftPost", "BlueCrate", "ParcelOwl"]),
            "tracking_number": text("Tracking number.", ["SP4471902", "BC88120457", "PO55031", "SP9008812"]),
        },
        ["Where is my {carrier} parcel {tracking_number}?", "Track {tracking_number} with {carrier}."],
        ["{carrier}的快递{tracking_number}到哪了？"],
        "logistics",
    ),
    Fn(
        "shipping_cost_quote",
        "Quotes the cost of shipping a box.",
        {
            "weight_kg": number("Weight of the box in kg.", 0.2, 30, 1),
            "dimensions_cm": group(
                "Box size in centimetres.",
                {
                    "length": integer("Length.", 10, 120),
                    "width": integer("Width.", 10, 80),
                    "height": integer("Height.", 5, 80),
                },
                "{length}×{width}×{height} cm",
                "{length}×{width}×{height}厘米",
            ),
            "destination_country": text(
                "Country it goes to.",
                [("Chile", "Chile", "智利"), ("Norway", "Norway", "挪威"), ("Vietnam", "Vietnam", "越南")],
            ),
            "express": flag("Express delivery."),
        },
        [
            "How much to ship a {weight_kg} kg box of {dimensions_cm} to {destination_country}?",
            "Express shipping quote: {weight_kg} kg, {dimensions_cm}, to {destination_country}.{express=true}",
        ],
        [
            "寄一个{weight_kg}公斤、{dimensions_cm}的箱子到{destination_country}要多少钱？",
            "加急寄{weight_kg}公斤、{dimensions_cm}的包裹去{destination_country}多少钱？{express=true}",
        ],
        "logistics",
    ),
    Fn(
        "product_price_compare",
        "Compares a product's price across online shops.",
        {
            "product": text(
                "Product name.",
                [
                    ("noise-cancelling headphones", "noise-cancelling headphones", "降噪耳机"),
                    ("espresso machine", "espresso machine", "意式咖啡机"),
                    ("e-reader", "e-reader", "电子书阅读器"),
                ],
            ),
            "max_price": integer("Highest price to include.", 50, 900, optional=True),
        },
        ["Compare prices for an {product}.", "Find the {product} under {max_price}."],
        ["比较一下{product}的价格。", "找{max_price}元以内的{product}。"],
        "shopping",
    ),
    # real estate / work / education
    Fn(
        "rent_estimate",
        "Estimated monthly rent for a flat in a city.",
        {
            "city": text("City.", CITIES),
            "bedrooms": integer("Number of bedrooms.", 1, 4),
            "furnished": flag("Furnished flat."),
        },
        [
            "What's typical rent for a {bedrooms}-bedroom flat in {city}?",
            "Rent for a furnished {bedrooms}-bedroom place in {city}?{furnished=true}",
        ],
        ["{city}{bedrooms}居室的房租大概多少？", "{city}带家具的{bedrooms}居室月租多少？{furnished=true}"],
        "real estate",
    ),
    Fn(
        "timezone_difference",
        "Hours between the local times of two cities.",
        {"city_a": text("First city.", CITIES), "city_b": text("Second city.", CITIES)},
        ["What's the time difference between {city_a} and {city_b}?", "How many hours ahead is {city_b} of {city_a}?"],
        ["{city_a}和{city_b}时差几个小时？"],
        "time",
    ),
    Fn(
        "count_workdays_between",
        "Working days between two dates (weekends excluded).",
        {
            "start_date": text("First day, YYYY-MM-DD.", DATES),
            "end_date": text("Last day, YYYY-MM-DD.", DATES),
            "country_holidays": text(
                "Country whose public holidays are skipped.",
                [("PT", "Portugal", "葡萄牙"), ("JP", "Japan", "日本"), ("KE", "Kenya", "肯尼亚")],
                optional=True,
            ),
        },
        [
            "How many working days are there from {start_date} to {end_date}?",
            "Workdays between {start_date} and {end_date}, skipping {country_holidays} holidays?",
        ],
        [
            "{start_date}到{end_date}之间有几个工作日？",
            "{start_date}到{end_date}，除去{country_holidays}的节假日，有多少工作日？",
        ],
        "time",
    ),
    Fn(
        "grade_average",
        "Weighted average of a student's marks.",
        {
            "scores": many("The marks.", integer("A mark.", 40, 100), 2, 4),
            "weights": many("Weight of each mark, in the same order.", integer("A weight.", 1, 5), 2, 4, optional=True),
        },
        ["What's the average of the marks {scores}?", "Average my grades {scores} with weights {weights}."],
        ["成绩{scores}的平均分是多少？", "成绩{scores}，权重{weights}，加权平均是多少？"],
        "education",
    ),
    Fn(
        "word_definition",
        "Dictionary definition of an English word.",
        {
            "word": text("The word.", ["serendipity", "ephemeral", "laconic", "quixotic", "gregarious"]),
            "include_examples": flag("Also return example sentences."),
        },
        ["What does '{word}' mean?", "Define '{word}' with example sentences.{include_examples=true}"],
        ["“{word}”是什么意思？", "解释一下“{word}”，并给出例句。{include_examples=true}"],
        "language",
    ),
    Fn(
        "air_quality_index",
        "Current air-quality index of a city.",
        {
            "city": text("City.", CITIES),
            "pollutant": choice(
                "Which pollutant to report.",
                [("pm25", "PM2.5", "PM2.5"), ("pm10", "PM10", "PM10"), ("o3", "ozone", "臭氧")],
                optional=True,
            ),
        },
        ["How's the air quality in {city}?", "What's the {pollutant} level in {city} today?"],
        ["{city}空气质量怎么样？", "{city}今天{pollutant}是多少？"],
        "environment",
    ),
    Fn(
        "sunrise_sunset_times",
        "Sunrise and sunset times in a city on a date.",
        {"city": text("City.", CITIES), "date": text("Day, YYYY-MM-DD.", DATES)},
        ["When does the sun rise and set in {city} on {date}?", "Sunrise/sunset for {city}, {date}."],
        ["{date}{city}几点日出、几点日落？"],
        "environment",
    ),
    Fn(
        "parking_spot_finder",
        "Free parking spots near an address.",
        {
            "address": text(
                "Street address.", ["12 Harbour Road", "88 Maple Avenue", "5 Station Square", "230 King Street"]
            ),
            "radius_m": integer("Search radius in metres.", 100, 2000, optional=True),
            "ev_charging": flag("Only spots with EV charging."),
        },
        [
            "Find parking near {address}.",
            "Any parking with EV charging within {radius_m} m of {address}?{ev_charging=true}",
        ],
        ["{address}附近有停车位吗？", "{address}周围{radius_m}米内有带充电桩的车位吗？{ev_charging=true}"],
        "transport",
    ),
]
