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

import decimal
import inspect
import json
import os
import re
import time
import types as pytypes
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


class ToolError(Exception):
    """Bad input or a refused operation; the message is meant to be shown to the model."""


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
        """Raise :class:`ToolError` unless ``args`` is an object the schema accepts (no unknown keys).

        Every message is bounded (:func:`bounded_message`): an over-long value is named by its type and length,
        never echoed whole, so a 10 MB argument cannot come back as a 10 MB error."""
        import jsonschema

        if not isinstance(args, dict):
            raise ToolError(f"{self.name}: arguments must be a JSON object, got {describe(args)}")
        allowed = sorted(self.parameters.get("properties", {}))
        unknown = sorted(set(args) - set(allowed))
        if unknown:
            names = ", ".join(describe(k, 40) for k in unknown[:5]) + (f" and {len(unknown) - 5:,} more"
                                                                        if len(unknown) > 5 else "")
            raise ToolError(bounded_message(f"{self.name}: unexpected argument(s) {names}; allowed: {allowed}"))
        try:
            jsonschema.validate(args, self.parameters)
        except jsonschema.ValidationError as e:
            where = "/".join(describe(p, 40) if isinstance(p, str) and len(p) > 40 else str(p)
                             for p in e.absolute_path)
            # jsonschema's messages quote the whole offending value ("'xxxx…' is too long"); name it instead
            text = e.message.replace(repr(e.instance), describe(e.instance)) if len(repr(e.instance)) > 80 \
                else e.message
            raise ToolError(bounded_message(f"{self.name}: invalid {where or 'arguments'}: {text}")) from None

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
    def from_function(cls, fn: Callable, needs_confirmation: bool = False,
                      bounds: dict[str, dict] | None = None) -> "Tool":
        """Build a tool from a typed function with a Google-style docstring (``Args:`` section).

        ``bounds`` adds keywords the generator cannot express, e.g. ``{"text": {"maxLength": 2000}}``: a grammar
        compiled from the schema then terminates even on a random-weight model.
        """
        schema = function_schema(fn)
        props = schema["function"]["parameters"].get("properties", {})
        for arg, extra in (bounds or {}).items():
            props[arg].update(extra)
        return cls(schema["function"]["name"], fn, schema, needs_confirmation)


# ============================================================== bounded messages
MAX_MESSAGE_CHARS = 300


def describe(value: Any, limit: int = 60) -> str:
    """A short, safe name for a value inside an error: its repr when short, else its type, size and start."""
    if isinstance(value, (str, bytes)):
        text = repr(value)
        if len(text) <= limit:
            return text
        kind = "string" if isinstance(value, str) else "byte string"
        return f"a {kind} of {len(value):,} characters starting {text[:limit // 2]}…"
    if isinstance(value, (list, tuple, dict)):
        text = repr(value)
        if len(text) <= limit:
            return text
        kind, unit = ("an object", "key") if isinstance(value, dict) else ("an array", "item")
        return f"{kind} of {len(value):,} {unit}{'' if len(value) == 1 else 's'} ({len(text):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"a {type(value).__name__} ({len(text):,} characters as text)"


def bounded_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: no path may echo a huge input whole."""
    if len(text) <= limit:
        return text
    return f"{text[:limit - 60]}… [message cut: it was {len(text):,} characters]"


# ============================================================== schemas from signatures
# The JSON Schema of a tool, written from its signature and Google-style docstring with the standard library only:
# building the kit's tools must not import transformers (and through it torch), which costs seconds. The output
# equals ``transformers.utils.get_json_schema(fn)`` minus its "return" entry for the hints the kit uses; a test
# checks that. Hints it does not know raise TypeError rather than guess.
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_DOC_SECTION = re.compile(r"^\s*(Args|Arguments|Returns|Raises|Yields|Examples?|Notes?):\s*$", re.M)
_ARG_LINE = re.compile(r"^(\s*)(\w+)(?:\s*\([^()\n]*\))?:\s*(.*)$")
_CHOICES = re.compile(r"\(choices:\s*(.*?)\)\s*$", re.I)


def _hint_schema(hint: Any, where: str) -> dict:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint in (list, tuple):
        return {"type": "array"}
    if hint is dict:
        return {"type": "object"}
    if origin is typing.Literal and args and all(type(a) in _SCALARS for a in args):
        kinds = list(dict.fromkeys(_SCALARS[type(a)] for a in args))
        return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(args)}
    if origin is list:
        return {"type": "array", **({"items": _hint_schema(args[0], where)} if args else {})}
    if origin is dict:
        return {"type": "object", **({"additionalProperties": _hint_schema(args[1], where)}
                                     if len(args) == 2 else {})}
    if origin in (typing.Union, pytypes.UnionType):
        parts = [_hint_schema(a, where) for a in args if a is not type(None)]
        if len(parts) == 1:
            out = parts[0]
        elif all(set(p) == {"type"} and isinstance(p["type"], str) for p in parts):
            kinds = sorted({p["type"] for p in parts})
            out = {"type": kinds[0] if len(kinds) == 1 else kinds}
        else:
            out = {"anyOf": parts}
        if type(None) in args:
            out["nullable"] = True
        return out
    raise TypeError(f"{where}: cannot write a JSON Schema for the type hint {hint!r}; write the schema by hand")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {arg: description}) from a Google-style docstring."""
    sections = list(_DOC_SECTION.finditer(doc))
    description = doc[:sections[0].start()].strip() if sections else doc.strip()
    args: dict[str, str] = {}
    for i, m in enumerate(sections):
        if m.group(1) not in ("Args", "Arguments"):
            continue
        body = doc[m.end():sections[i + 1].start() if i + 1 < len(sections) else len(doc)]
        indent, current = None, None
        for line in body.splitlines():
            if not line.strip():
                continue
            head = _ARG_LINE.match(line)
            if head and (indent is None or len(head.group(1)) <= indent):
                indent, current = len(head.group(1)), head.group(2)
                args[current] = head.group(3).strip()
            elif current is not None:  # a continuation line, indented deeper
                args[current] = f"{args[current]} {line.strip()}".strip()
    return description, args


def function_schema(fn: Callable) -> dict:
    """OpenAI-style ``{"type": "function", "function": {name, description, parameters}}`` for a typed function
    with a Google-style docstring; an argument's ``(choices: [...])`` suffix becomes its ``enum``."""
    name = getattr(fn, "__name__", "operation")
    doc = inspect.getdoc(fn)
    if not doc:
        raise TypeError(f"{name}: a tool needs a docstring (its description)")
    description, arg_docs = _parse_docstring(doc.strip())
    hints = typing.get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")
              or p.annotation is not inspect.Parameter.empty]
    props: dict[str, dict] = {}
    for p in params:
        if p.name not in hints:
            raise TypeError(f"{name}: argument {p.name!r} has no type hint")
        if p.name not in arg_docs:
            raise TypeError(f"{name}: the docstring's Args section does not describe {p.name!r}")
        schema = _hint_schema(hints[p.name], f"{name}({p.name})")
        text = arg_docs[p.name]
        choices = _CHOICES.search(text)
        if choices:
            schema["enum"] = [c.strip() if isinstance(c, str) else c for c in json.loads(choices.group(1))]
            text = text[:choices.start()].strip()
        schema["description"] = text
        props[p.name] = schema
    parameters: dict = {"type": "object", "properties": props}
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    if required:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


# ============================================================== calculator
MAX_EXPR_CHARS = 200
MAX_DEPTH = 32          # nested parentheses / unary signs
MAX_LITERAL_DIGITS = 30
MAX_EXPONENT = 1000     # |b| in a ** b
MAX_MAGNITUDE = decimal.Decimal("1e100")
MIN_MAGNITUDE = decimal.Decimal("1e-300")  # smaller non-zero results are refused: a JSON float cannot hold them
PRECISION = 28          # significant digits of the decimal arithmetic
MAX_SECONDS = 0.05

_CTX = decimal.Context(prec=PRECISION, Emax=999_999, Emin=-999_999,
                       traps=[decimal.Overflow, decimal.DivisionByZero, decimal.InvalidOperation])
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)|(?P<op>\*\*|[-+*/%^()×÷])"
                    r"|(?P<of>of\b|的))", re.I)
_SYNONYMS = {"×": "*", "÷": "/", "^": "**", "的": "of"}


def _tokenize(text: str) -> list[str]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            bad = text[pos:].lstrip()[:12]
            raise ToolError(f"calculator: unexpected text {bad!r} at position {pos}; "
                            "only numbers, + - * / ** ^ % × ÷ ( ) and 'of' (的) are allowed")
        tok = m.group("num") or m.group("op") or m.group("of").lower()
        if m.group("num") and len(re.sub(r"[^0-9]", "", tok)) > MAX_LITERAL_DIGITS:
            raise ToolError(f"calculator: number literal longer than {MAX_LITERAL_DIGITS} digits")
        out.append(_SYNONYMS.get(tok, tok))
        pos = m.end()
    return out


class _Parser:
    """expr := term (('+'|'-') term)* ; term := unary (('*'|'/'|'%'|'of') unary)* ;
    unary := ('+'|'-') unary | power ; power := postfix ('**' unary)? ; postfix := atom '%'* ;
    atom := number | '(' expr ')'.  A '%' followed by an operand is modulo, otherwise percent."""

    def __init__(self, tokens: list[str]):
        self.t, self.i, self.depth = tokens, 0, 0
        self.deadline = time.perf_counter() + MAX_SECONDS

    def peek(self, k: int = 0):
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def check(self, value: decimal.Decimal) -> decimal.Decimal:
        if time.perf_counter() > self.deadline:
            raise ToolError(f"calculator: took longer than {MAX_SECONDS * 1000:.0f} ms")
        if not value.is_finite() or abs(value) > MAX_MAGNITUDE:
            raise ToolError(f"calculator: result magnitude exceeds {MAX_MAGNITUDE:.0e}")
        return value

    def enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ToolError(f"calculator: nesting deeper than {MAX_DEPTH}")

    def expr(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            op, rhs = self.take(), self.term()
            value = self.check(_CTX.add(value, rhs) if op == "+" else _CTX.subtract(value, rhs))
        return value

    def term(self):
        value = self.unary()
        while self.peek() in ("*", "/", "%", "of"):
            op, rhs = self.take(), self.unary()
            if op in ("*", "of"):
                value = _CTX.multiply(value, rhs)
            elif rhs == 0:
                raise ToolError("calculator: division by zero")
            else:
                value = _CTX.divide(value, rhs) if op == "/" else _CTX.remainder(value, rhs)
            value = self.check(value)
        return value

    def unary(self):
        if self.peek() in ("+", "-"):
            self.enter()
            sign = self.take()
            value = self.unary()
            self.depth -= 1
            return -value if sign == "-" else value
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() != "**":
            return base
        self.take()
        self.enter()
        exp = self.unary()  # right-associative: 2 ** 3 ** 2 == 2 ** 9
        self.depth -= 1
        if abs(exp) > MAX_EXPONENT:
            raise ToolError(f"calculator: exponent {exp} exceeds the limit of {MAX_EXPONENT}")
        if base == 0 and exp < 0:
            raise ToolError("calculator: zero to a negative power")
        if base < 0 and exp != exp.to_integral_value():
            raise ToolError("calculator: negative base with a fractional exponent")
        # Estimate the size first so the power is never computed when it would be huge (a tiny result, e.g.
        # 2 ** -400, is computed: only the final result has a lower limit).
        if base != 0 and exp * abs(base).log10(_CTX) > 101:
            raise ToolError(f"calculator: result magnitude exceeds {MAX_MAGNITUDE:.0e} "
                            f"(about 1e{int(exp * abs(base).log10(_CTX))})")
        return self.check(_CTX.power(base, exp))

    def postfix(self):
        value = self.atom()
        # A '%' that is not followed by an operand ('(' or a number) is percent: '250*15%', '15% of 250',
        # '10%-5'. Followed by an operand it is modulo: '10 % 3'.
        while self.peek() == "%" and not _starts_operand(self.peek(1)):
            self.take()
            value = self.check(_CTX.divide(value, 100))
        return value

    def atom(self):
        tok = self.take()
        if tok is None:
            raise ToolError("calculator: expression ends too early")
        if tok == "(":
            self.enter()
            value = self.expr()
            if self.take() != ")":
                raise ToolError("calculator: missing ')'")
            self.depth -= 1
            return value
        if tok[0].isdigit() or tok[0] == ".":
            return self.check(decimal.Decimal(tok))
        raise ToolError(f"calculator: expected a number or '(' but found {tok!r}")


def _starts_operand(tok) -> bool:
    return tok is not None and (tok == "(" or tok[0].isdigit() or tok[0] == ".")


def _plain_number(value: decimal.Decimal) -> int | float:
    # Whole numbers come back as JSON integers, every digit the decimal arithmetic holds (up to PRECISION
    # significant digits exact); other results as floats (about 16 significant digits).
    if value == value.to_integral_value():
        return int(value)
    return float(value)


def calculator(expression: str) -> dict:
    """Calculates an arithmetic expression, e.g. "250 * 15%" or "(3 + 4) ** 2 / 7".

    Operators: + - * / ** (power; ^ is the same as **), % (modulo, or percent when no number follows it),
    "X% of Y" (of and 的 multiply), the signs ×÷, parentheses, decimals and 1.5e3 notation. Decimal arithmetic, exact
    to 28 significant digits: whole-number results up to 28 digits are exact integers (beyond 2**53 also as
    the string "exact"), other results are floats. Limits: 200 characters, |result| <= 1e100. Use it for any arithmetic instead of computing in your head.

    Args:
        expression: The arithmetic expression to evaluate, e.g. "250 * 0.15".
    """
    if not isinstance(expression, str):
        raise ToolError(f"calculator: expression must be a string, got {type(expression).__name__}")
    if len(expression) > MAX_EXPR_CHARS:
        raise ToolError(f"calculator: expression longer than {MAX_EXPR_CHARS} characters ({len(expression):,})")
    tokens = _tokenize(expression)
    if not tokens:
        raise ToolError("calculator: empty expression")
    parser = _Parser(tokens)
    try:
        value = parser.expr()
    except decimal.DecimalException as e:
        raise ToolError(f"calculator: arithmetic error ({type(e).__name__})") from None
    if parser.peek() is not None:
        raise ToolError(f"calculator: unexpected {parser.peek()!r} after a complete expression")
    value = value.normalize(_CTX)
    if value != 0 and abs(value) < MIN_MAGNITUDE:
        raise ToolError(f"calculator: result {value:.3e} is closer to zero than {MIN_MAGNITUDE:.0e}, "
                        "the smallest magnitude it returns")
    result = _plain_number(value)
    out = {"expression": expression, "result": result}
    if isinstance(result, int) and abs(result) > 2 ** 53:
        out["exact"] = str(result)  # JSON readers that hold numbers as doubles (JavaScript) lose these digits
    return out


# ============================================================== weather
# A fixed table so that every run answers the same: (temperature °C, condition, humidity %).
WEATHER_TABLE = {
    "北京": (25, "sunny", 30), "上海": (28, "light rain", 82), "广州": (31, "thunderstorms", 88),
    "深圳": (30, "cloudy", 79), "杭州": (27, "overcast", 70), "成都": (22, "foggy", 85),
    "Paris": (18, "partly cloudy", 64), "London": (14, "drizzle", 87), "Tokyo": (21, "clear", 55),
    "New York": (16, "windy", 48), "Berlin": (12, "cloudy", 71), "Sydney": (24, "sunny", 52),
    "Singapore": (32, "humid, showers", 90), "San Francisco": (15, "fog", 80),
}
_CITY_ALIASES = {"beijing": "北京", "peking": "北京", "shanghai": "上海", "guangzhou": "广州", "canton": "广州",
                 "shenzhen": "深圳", "hangzhou": "杭州", "chengdu": "成都", "巴黎": "Paris", "伦敦": "London",
                 "东京": "Tokyo", "纽约": "New York", "nyc": "New York", "柏林": "Berlin", "悉尼": "Sydney",
                 "新加坡": "Singapore", "旧金山": "San Francisco",
                 **{c.lower(): c for c in WEATHER_TABLE}}


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
    return {"city": key, "temperature": temp, "unit": unit, "condition": condition, "humidity": humidity,
            "source": "toolkit demo table (fixed, not live)"}


# ============================================================== units
# Factor to the dimension's base unit (m, kg, l); temperatures are handled separately.
_UNITS = {
    "length": {"m": 1.0, "km": 1000.0, "cm": 0.01, "mm": 0.001, "mi": 1609.344, "ft": 0.3048,
               "in": 0.0254, "yd": 0.9144},
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
    from .models import cache_dir

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
TOOLS: dict[str, Tool] = {t.name: t for t in (
    Tool.from_function(calculator, bounds={"expression": {"maxLength": MAX_EXPR_CHARS}}),
    Tool.from_function(get_weather, bounds={"city": {"maxLength": 40}}),
    Tool.from_function(convert_units),
    Tool.from_function(write_note, needs_confirmation=True,
                       bounds={"title": {"maxLength": 64}, "text": {"maxLength": 4000}}),
)}


def schemas(names=None) -> list[dict]:
    """OpenAI-style schemas of the named tools (all by default), in registry order, as fresh copies."""
    chosen = list(TOOLS) if names is None else list(names)
    missing = [n for n in chosen if n not in TOOLS]
    if missing:
        raise KeyError(f"unknown tool(s) {missing}; known: {list(TOOLS)}")
    return [json.loads(json.dumps(TOOLS[n].schema)) for n in chosen]
