"""The kit's demo tools, each defined once as a typed, documented Python function.

What it does
- Every tool's JSON Schema is generated from its signature and docstring by :func:`function_schema` (standard
  library only, so building the tools never imports transformers or torch; a test checks it against
  ``transformers.utils.get_json_schema``). Book §14.5.2 step 1 renders exactly this schema into the prompt;
  "Tool Use" §3.1 lists the four parts of a tool: name, description, parameters, the function. Only bounds the
  generator cannot express (``maxLength``) are added on top, so the schema is never written twice.
- ``calculator`` parses arithmetic with its own tokenizer and recursive-descent parser over ``Decimal`` — never
  ``eval`` — with bounded input length, nesting depth, literal size, exponent, magnitude and time; its
  description states its operators, exactness (28 significant digits) and limits, and tests hold it to them.
- ``get_weather`` reads a fixed local table (deterministic, not live data), ``convert_units`` converts between
  a few length/mass/temperature/volume units, ``write_note`` writes a text file into a sandbox folder and is
  marked ``needs_confirmation=True``: the host runs it only if a person approves (§14.5.2, "constrained decoding
  does not make a call authorised").
- ``Tool.call(args)`` validates ``args`` against the schema and raises :class:`ToolError` with a readable message
  on bad input, at most ``MAX_MESSAGE_CHARS`` long (an over-long value is named by its length, never echoed);
  results are JSON-serialisable dicts.

What it leaves out
- Any network access, real weather, currency rates, or persistence beyond the notes sandbox.
- Symbolic maths: the calculator knows exactly what its description lists (+ - * / ** ^ % × ÷, "of"/"的",
  parentheses, unary signs, decimals, scientific notation); no functions (sqrt, sin), no variables, no bitwise
  operators (``^`` is power, as its description says).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.calculator import MAX_EXPR_CHARS, calculator
from toolkit.errors import ToolError, bounded_message
from toolkit.fnschema import function_schema
from toolkit.paths import cache_dir
from toolkit.schema import check_arguments


@dataclass
class Tool:
    """A callable tool with its OpenAI-style schema ``{"type": "function", "function": {...}}``."""

    name: str
    fn: Callable[..., Any]
    schema: dict
    needs_confirmation: bool = False

    @property
    def description(self) -> str:
        return self.schema["function"].get("description", "")

    @property
    def parameters(self) -> dict:
        return self.schema["function"].get("parameters", {"type": "object", "properties": {}})

    def validate(self, args: Any) -> None:
        """Raise :class:`ToolError` unless ``args`` is an object the schema accepts: ``toolkit.schema``'s check,
        the one the host loop uses. Every message is bounded: an over-long value is named by its type and length,
        never echoed whole, so a 10 MB argument cannot come back as a 10 MB error."""
        why = check_arguments(self, args)
        if why is not None:
            raise ToolError(bounded_message(f"{self.name}: {why}"))

    def call(self, args: dict) -> Any:
        """Validate ``args`` and run the function. Bad input -> :class:`ToolError` (bounded message); other errors
        propagate."""
        self.validate(args)
        try:
            return self.fn(**args)
        except ToolError as e:
            raise ToolError(bounded_message(str(e))) from None
        except (ValueError, TypeError, ArithmeticError) as e:
            raise ToolError(bounded_message(f"{self.name}: {e}")) from None

    @classmethod
    def from_function(
        cls, fn: Callable, needs_confirmation: bool = False, bounds: dict[str, dict] | None = None
    ) -> Tool:
        """Build a tool from a typed function with a Google-style docstring (``Args:`` section).

        ``bounds`` adds keywords the generator cannot express, e.g. ``{"text": {"maxLength": 2000}}``: a grammar
        compiled from the schema then terminates even on a random-weight model.
        """
        schema = function_schema(fn)
        props = schema["function"]["parameters"].get("properties", {})
        for arg, extra in (bounds or {}).items():
            props[arg].update(extra)
        return cls(schema["function"]["name"], fn, schema, needs_confirmation)


# ============================================================== weather
# A fixed table so that every run answers the same: (temperature °C, condition, humidity %).
WEATHER_TABLE = {
    "北京": (25, "sunny", 30),
    "上海": (28, "light rain", 82),
    "广州": (31, "thunderstorms", 88),
    "深圳": (30, "cloudy", 79),
    "杭州": (27, "overcast", 70),
    "成都": (22, "foggy", 85),
    "Paris": (18, "partly cloudy", 64),
    "London": (14, "drizzle", 87),
    "Tokyo": (21, "clear", 55),
    "New York": (16, "windy", 48),
    "Berlin": (12, "cloudy", 71),
    "Sydney": (24, "sunny", 52),
    "Singapore": (32, "humid, showers", 90),
    "San Francisco": (15, "fog", 80),
}


_CITY_ALIASES = {
    "beijing": "北京",
    "peking": "北京",
    "shanghai": "上海",
    "guangzhou": "广州",
    "canton": "广州",
    "shenzhen": "深圳",
    "hangzhou": "杭州",
    "chengdu": "成都",
    "巴黎": "Paris",
    "伦敦": "London",
    "东京": "Tokyo",
    "纽约": "New York",
    "nyc": "New York",
    "柏林": "Berlin",
    "悉尼": "Sydney",
    "新加坡": "Singapore",
    "旧金山": "San Francisco",
    **{c.lower(): c for c in WEATHER_TABLE},
}


def city_aliases(city: str) -> list[str]:
    """Every name the weather tool accepts for ``city`` (the table's own name first): "北京", "Beijing", "Peking"."""
    names = [a for a, c in _CITY_ALIASES.items() if c == city and a != city.lower()]
    return [city] + [a if re.search(r"[^\x00-\x7f]", a) else a.title() for a in names]


def get_weather(city: str, unit: str = "celsius") -> dict:
    """Fetches the current weather for a city from the kit's fixed demo table (not live data).

    Args:
        city: City name in English or Chinese, e.g. "Paris" or "北京".
        unit: Temperature unit for the answer. (choices: ["celsius", "fahrenheit"])
    """
    key = city.strip()
    key = _CITY_ALIASES.get(key.lower(), _CITY_ALIASES.get(key, key))
    if key not in WEATHER_TABLE:
        raise ToolError(f"get_weather: no data for city {city!r}; known cities: {', '.join(WEATHER_TABLE)}")
    if unit not in ("celsius", "fahrenheit"):
        raise ToolError(f"get_weather: unit must be 'celsius' or 'fahrenheit', not {unit!r}")
    temp_c, condition, humidity = WEATHER_TABLE[key]
    temp = temp_c if unit == "celsius" else round(temp_c * 9 / 5 + 32, 1)
    return {
        "city": key,
        "temperature": temp,
        "unit": unit,
        "condition": condition,
        "humidity": humidity,
        "source": "toolkit demo table (fixed, not live)",
    }


# ============================================================== units
# Factor to the dimension's base unit (m, kg, l); temperatures are handled separately.
_UNITS = {
    "length": {
        "m": 1.0,
        "km": 1000.0,
        "cm": 0.01,
        "mm": 0.001,
        "mi": 1609.344,
        "ft": 0.3048,
        "in": 0.0254,
        "yd": 0.9144,
    },
    "mass": {"kg": 1.0, "g": 0.001, "lb": 0.45359237, "oz": 0.028349523125},
    "volume": {"l": 1.0, "ml": 0.001, "gal": 3.785411784},
    "temperature": {"c": None, "f": None, "k": None},
}


UNIT_NAMES = [u for dim in _UNITS.values() for u in dim]


def _to_celsius(v: float, u: str) -> float:
    return {"c": v, "f": (v - 32) * 5 / 9, "k": v - 273.15}[u]


def _from_celsius(v: float, u: str) -> float:
    return {"c": v, "f": v * 9 / 5 + 32, "k": v + 273.15}[u]


def convert_units(value: float, from_unit: str, to_unit: str) -> dict:
    """Converts a value between units of length, mass, volume or temperature.

    Args:
        value: The number to convert.
        from_unit: Unit of the value. (choices: ["m", "km", "cm", "mm", "mi", "ft", "in", "yd", "kg", "g", "lb", "oz", "l", "ml", "gal", "c", "f", "k"])
        to_unit: Unit to convert to, of the same kind. (choices: ["m", "km", "cm", "mm", "mi", "ft", "in", "yd", "kg", "g", "lb", "oz", "l", "ml", "gal", "c", "f", "k"])
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e15:
        raise ToolError(f"convert_units: value must be a finite number with |value| <= 1e15, got {value!r}")
    dims = {u: d for d, table in _UNITS.items() for u in table}
    f, t = from_unit.lower(), to_unit.lower()
    for u, raw in ((f, from_unit), (t, to_unit)):
        if u not in dims:
            raise ToolError(f"convert_units: unknown unit {raw!r}; known: {', '.join(UNIT_NAMES)}")
    if dims[f] != dims[t]:
        raise ToolError(f"convert_units: cannot convert {dims[f]} ({from_unit}) to {dims[t]} ({to_unit})")
    if dims[f] == "temperature":
        result = _from_celsius(_to_celsius(float(value), f), t)
    else:
        result = float(value) * _UNITS[dims[f]][f] / _UNITS[dims[t]][t]
    return {"value": value, "from_unit": f, "to_unit": t, "result": round(result, 10)}


# ============================================================== notes (side effect)
_NOTES_DIR: Path | None = None


def set_notes_dir(path: str | os.PathLike | None) -> None:
    """Choose the sandbox folder ``write_note`` writes into (``None``: env ``TOOLKIT_NOTES_DIR`` or the cache)."""
    global _NOTES_DIR
    _NOTES_DIR = Path(path) if path is not None else None


def notes_dir() -> Path:
    if _NOTES_DIR is not None:
        return _NOTES_DIR
    if os.environ.get("TOOLKIT_NOTES_DIR"):
        return Path(os.environ["TOOLKIT_NOTES_DIR"])
    return cache_dir() / "notes"


def write_note(title: str, text: str) -> dict:
    """Saves a short text note to the kit's notes folder (a side effect: the host asks a person first).

    Args:
        title: Note title; becomes the file name (letters, digits, - and _ are kept).
        text: The note's text.
    """
    slug = re.sub(r"[^\w\-]+", "_", title, flags=re.UNICODE).strip("_.")[:64]
    if not slug:
        raise ToolError("write_note: title must contain at least one letter or digit")
    if len(text) > 4000:
        raise ToolError("write_note: text longer than 4000 characters")
    folder = notes_dir().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    path = (folder / f"{slug}.txt").resolve()
    if path.parent != folder:  # the slug cannot contain separators, but check rather than trust
        raise ToolError("write_note: refusing to write outside the notes folder")
    path.write_text(text, encoding="utf-8")
    return {"saved": path.name, "folder": str(folder), "bytes": len(text.encode("utf-8"))}


# ============================================================== registry
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool.from_function(calculator, bounds={"expression": {"maxLength": MAX_EXPR_CHARS}}),
        Tool.from_function(get_weather, bounds={"city": {"maxLength": 40}}),
        Tool.from_function(convert_units),
        Tool.from_function(
            write_note, needs_confirmation=True, bounds={"title": {"maxLength": 64}, "text": {"maxLength": 4000}}
        ),
    )
}


def schemas(names=None) -> list[dict]:
    """OpenAI-style schemas of the named tools (all by default), in registry order, as fresh copies."""
    chosen = list(TOOLS) if names is None else list(names)
    missing = [n for n in chosen if n not in TOOLS]
    if missing:
        raise KeyError(f"unknown tool(s) {missing}; known: {list(TOOLS)}")
    return [json.loads(json.dumps(TOOLS[n].schema)) for n in chosen]
