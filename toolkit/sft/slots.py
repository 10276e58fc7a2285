"""The pieces the training-data bank is written with: typed slots that draw a value and say it in English and
Chinese, the function entry (:class:`Fn`) that checks its request templates, and shared value lists.

What it does
- Slot makers :func:`text`, :func:`integer`, :func:`number`, :func:`choice` (enums), :func:`many` (arrays),
  :func:`group` (nested objects) and :func:`flag` (booleans): each gives a JSON Schema and a ``draw(rng)`` that
  returns a :class:`Draw` (the value for the call, and how an English or a Chinese request says it).
- :class:`Fn`: a function's schema and its request templates; a template must mention every required parameter.

What it leaves out
- The functions themselves (``toolkit.sft.bank``) and the conversations (``toolkit.sft.data``).
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
