"""toolkit.tools: schemas generated from the functions, a calculator that refuses hostile input fast, the
weather table, unit conversion, and the sandboxed side-effect tool."""

import json
import re

import jsonschema
import pytest

from toolkit import calculator as calculator_module
from toolkit import tools
from toolkit.calculator import _TOKEN, MAX_EXPR_CHARS, calculator
from toolkit.errors import MAX_MESSAGE_CHARS, ToolError, bounded_message, describe
from toolkit.fnschema import function_schema
from toolkit.tools import TOOLS, Tool, convert_units, get_weather, schemas, write_note

HOSTILE = [
    "__import__('os')",
    "__import__('os').system('ls')",
    "open('/etc/passwd').read()",
    "exec('1')",
    "eval('1')",
    "os.system('rm -rf /')",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: 1",
    "[1, 2, 3]",
    "{'a': 1}",
    "1 if 1 else 2",
    "x + 1",
    "a = 1",
    "import os",
    "globals()",
    "locals()",
    "getattr(1, 'real')",
    "1; 2",
    "1, 2",
    "'abc' * 3",
    '"1" + "2"',
    "1.real",
    "True + 1",
    "None",
    "~1",
    "1 << 100000",
    "1 >> 1",
    "1 & 1",
    "1 | 1",
    "1 == 1",
    "1 < 2",
    "not 1",
    "1 // 0",
    "abs(-1)",
    "pow(2, 10)",
    "sqrt(4)",
    "9**9**9",
    "10**10**10",
    "2**100000",
    "(9**9)**99",
    "99999**999",
    "1e308*1e308",
    "1e308",
    "1e101",
    "-1e200",
    "10**101",
    "1/0",
    "5 % 0",
    "0**-1",
    "(-8)**0.5",
    "((1)",
    "(1))",
    "1 +",
    "* 2",
    "",
    "   ",
    "()",
    "1..2",
    "1e",
    "١٢٣",
    "1_000",
    "0x10",
    "0b1",
    "1j",
    "\x00",
    "1\n+\n__import__('os')",
    "2 ** -2000",
    "1" * 31,
    "9" * 200 + "+1",
    "(" * 10_000 + "1" + ")" * 10_000,
    "-" * 150 + "1",
    "(" * 33 + "1" + ")" * 33,
    "1+" * 5_000 + "1",
    "x" * 10_000_000,
    "1" * 10_000_000,
    "(" * 5_000_000,
]


def test_at_least_fifty_hostile_inputs():
    assert len(HOSTILE) >= 50


@pytest.mark.parametrize("expr", HOSTILE, ids=lambda e: repr(e[:30]) + (f"..({len(e)})" if len(e) > 30 else ""))
def test_hostile_calculator_input_is_rejected(expr):
    # How fast (target <= 100 ms each) is measured by benchmarks/latency.py, not asserted here.
    with pytest.raises(ToolError) as e:
        TOOLS["calculator"].call({"expression": expr}) if len(expr) <= 200 else calculator(expr)
    assert str(e.value).startswith("calculator") and len(str(e.value)) < 400


@pytest.mark.parametrize(
    "expr,want",
    [
        ("250 * 0.15", 37.5),
        ("250*15%", 37.5),
        ("15% of 250", 37.5),
        ("250的15%", 37.5),
        ("(3 + 4) ** 2 / 7", 7),
        ("2 ** 3 ** 2", 512),
        ("-2 ** 2", -4),
        ("(-2) ** 2", 4),
        ("0.1 + 0.2", 0.3),
        ("10 % 3", 1),
        ("7 / 2", 3.5),
        ("2^10", 1024),
        ("1e3 + 1", 1001),
        (".5 * 4", 2),
        ("-(-(3))", 3),
        ("3 × 4 ÷ 2", 6),
        ("100 - 10%", 99.9),
        ("2 ** 0.5", 1.4142135623730951),
        ("1/3", 1 / 3),
    ],
)
def test_calculator_values(expr, want):
    assert calculator(expr)["result"] == pytest.approx(want, rel=1e-15)


def test_calculator_limits_are_exact_at_the_edge():
    assert calculator("(" * 32 + "1" + ")" * 32)["result"] == 1
    assert calculator("10 ** 100")["result"] == pytest.approx(1e100)
    assert calculator("10 ** 17 + 1")["result"] == 10**17 + 1  # exact: Decimal, not float
    assert calculator("2 ** 300 / 2 ** 299")["result"] == 2
    with pytest.raises(ToolError, match="exponent"):
        calculator("1 ** 1001")
    assert calculator("1" * 30)["result"] == pytest.approx(float("1" * 30))


class _Clock:
    """A clock that moves ``step`` seconds each time it is read: a thread paused by a busy machine (wall clock) or
    a runaway computation (CPU clock)."""

    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def test_a_paused_thread_gets_the_right_answer_not_a_timeout(monkeypatch):
    # A one-CPU classroom machine can pause the kernel's thread for seconds between two reads of the wall clock;
    # the answer must not depend on that (it did: a notebook failed on "took longer than 50 ms").
    monkeypatch.setattr(calculator_module.time, "perf_counter", _Clock(10.0))
    monkeypatch.setattr(calculator_module.time, "monotonic", _Clock(10.0))
    monkeypatch.setattr(calculator_module.time, "time", _Clock(10.0))
    assert calculator("(3 + 4) ** 2 / 7 + 250 * 15%")["result"] == 44.5


def test_the_cpu_time_limit_still_stops_a_runaway(monkeypatch):
    monkeypatch.setattr(calculator_module.time, "thread_time", _Clock(calculator_module.MAX_CPU_SECONDS / 3))
    with pytest.raises(ToolError, match=r"^calculator: took more than \d+ ms of CPU time$"):
        calculator("1 + 2 + 3 + 4 + 5")
    assert calculator("1")["result"] == 1  # one read after the start stays inside the limit


def test_schema_is_generated_from_the_function_not_written_by_hand():
    fn = TOOLS["get_weather"].schema["function"]
    assert fn["name"] == "get_weather"
    assert fn["description"] == get_weather.__doc__.strip().splitlines()[0]
    assert fn["parameters"]["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert fn["parameters"]["required"] == ["city"]
    assert "return" not in fn
    assert TOOLS["calculator"].parameters["properties"]["expression"]["maxLength"] == MAX_EXPR_CHARS
    for s in schemas():  # every schema is itself a valid JSON Schema
        jsonschema.Draft202012Validator.check_schema(s["function"]["parameters"])


def test_schemas_shape_and_selection():
    all_ = schemas()
    assert [s["function"]["name"] for s in all_] == list(TOOLS)
    assert all(s["type"] == "function" and set(s["function"]) == {"name", "description", "parameters"} for s in all_)
    assert [s["function"]["name"] for s in schemas(["convert_units"])] == ["convert_units"]
    all_[0]["function"]["name"] = "mutated"
    assert schemas()[0]["function"]["name"] != "mutated"  # copies, not the registry's dicts
    with pytest.raises(KeyError, match="nope"):
        schemas(["nope"])


def test_tool_call_validates_arguments():
    calc = TOOLS["calculator"]
    with pytest.raises(ToolError, match="expression"):
        calc.call({})
    with pytest.raises(ToolError, match="unexpected"):
        calc.call({"expression": "1", "extra": 2})
    with pytest.raises(ToolError, match="JSON object"):
        calc.call(["1+1"])
    with pytest.raises(ToolError, match="type"):
        calc.call({"expression": 5})
    with pytest.raises(ToolError, match="unit"):
        TOOLS["get_weather"].call({"city": "Paris", "unit": "kelvin"})


def test_weather_table_is_deterministic_and_aliased():
    a = get_weather("北京")
    assert a == get_weather("Beijing") == get_weather("  beijing ")
    assert (a["temperature"], a["unit"], a["condition"]) == (tools.WEATHER_TABLE["北京"][0], "celsius", "sunny")
    f = get_weather("Paris", "fahrenheit")
    assert f["temperature"] == pytest.approx(tools.WEATHER_TABLE["Paris"][0] * 9 / 5 + 32)
    assert get_weather("东京")["city"] == "Tokyo"
    with pytest.raises(ToolError, match="known cities"):
        get_weather("Atlantis")
    json.dumps(a)  # JSON-serialisable


@pytest.mark.parametrize(
    "v,f,t,want",
    [
        (1, "km", "m", 1000),
        (100, "c", "f", 212),
        (32, "f", "c", 0),
        (0, "c", "k", 273.15),
        (1, "mi", "km", 1.609344),
        (1, "lb", "g", 453.59237),
        (1, "gal", "l", 3.785411784),
        (12, "in", "ft", 1),
    ],
)
def test_convert_units(v, f, t, want):
    assert TOOLS["convert_units"].call({"value": v, "from_unit": f, "to_unit": t})["result"] == pytest.approx(want)


def test_convert_units_refuses_mixed_dimensions_and_bad_values():
    with pytest.raises(ToolError, match="cannot convert"):
        convert_units(1, "kg", "m")
    with pytest.raises(ToolError, match="finite"):
        convert_units(float("nan"), "m", "km")
    with pytest.raises(ToolError, match="finite"):
        convert_units(1e300, "m", "km")
    with pytest.raises(ToolError):
        TOOLS["convert_units"].call({"value": "1", "from_unit": "m", "to_unit": "km"})


def test_write_note_stays_in_the_sandbox(tmp_path):
    tools.set_notes_dir(tmp_path)
    try:
        out = write_note("../../etc/passwd", "hello")
        assert out["saved"] == "etc_passwd.txt" and (tmp_path / "etc_passwd.txt").read_text() == "hello"
        assert list(tmp_path.iterdir()) == [tmp_path / "etc_passwd.txt"]
        assert write_note("购物 清单", "牛奶")["saved"] == "购物_清单.txt"
        with pytest.raises(ToolError, match="title"):
            write_note("../..", "x")
        with pytest.raises(ToolError):
            TOOLS["write_note"].call({"title": "t", "text": "x" * 5000})
    finally:
        tools.set_notes_dir(None)
    assert TOOLS["write_note"].needs_confirmation and not TOOLS["calculator"].needs_confirmation


def test_from_function_on_a_new_tool():
    def shout(text: str, times: int = 1) -> dict:
        """Repeats text loudly.

        Args:
            text: What to shout.
            times: How many times.
        """
        return {"out": text.upper() * times}

    t = Tool.from_function(shout, bounds={"text": {"maxLength": 5}})
    assert t.name == "shout" and t.description == "Repeats text loudly."
    assert t.parameters["properties"]["times"]["type"] == "integer"
    assert t.call({"text": "ab", "times": 2}) == {"out": "ABAB"}
    with pytest.raises(ToolError, match="too long"):
        t.call({"text": "abcdef"})


# ------------------------------------------------------------------ schemas without transformers
def test_schemas_match_transformers_get_json_schema():
    """The stdlib generator writes what transformers' generator writes, for the kit's tools and other hints."""
    from typing import Literal

    from transformers.utils import get_json_schema

    def many(
        a: int,
        b: float,
        c: bool,
        d: list[int],
        e: dict[str, float],
        f: str | None = None,
        g: Literal["x", "y"] = "x",
        h: int | str = 1,
        k: list = None,
    ) -> dict:
        """Does many things.

        Second paragraph of the description.

        Args:
            a: An integer.
            b: A float that is described
                over two lines.
            c: A flag.
            d: Some integers.
            e: A mapping.
            f: Maybe a string.
            g: A literal.
            h: A union.
            k: A bare list. (choices: [1, 2])

        Returns:
            Nothing useful.
        """

    for fn in [t.fn for t in TOOLS.values()] + [many]:
        want = get_json_schema(fn)
        want["function"].pop("return", None)
        got = function_schema(fn)
        assert json.dumps(got) == json.dumps(want), fn.__name__  # key order too: it is rendered into prompts
    for t in TOOLS.values():  # the registry = generated schema + the declared bounds only
        bare = json.loads(json.dumps(t.schema))
        for prop in bare["function"]["parameters"]["properties"].values():
            prop.pop("maxLength", None)
        assert bare == function_schema(t.fn)


def test_function_schema_refuses_what_it_cannot_write():
    class Custom:
        pass

    def bad(x: Custom) -> None:
        """Bad.

        Args:
            x: A custom object.
        """

    def undocumented(x: int) -> None:
        """No Args section."""

    for fn, match in ((bad, "type hint"), (undocumented, "does not describe 'x'")):
        with pytest.raises(TypeError, match=match):
            function_schema(fn)


def test_building_the_tools_imports_neither_torch_nor_transformers():
    import subprocess
    import sys

    code = (
        "import sys, toolkit.tools, toolkit.mcp.server, toolkit.mcp.stdio; "
        "print(sorted(m for m in ('torch', 'transformers', 'xgrammar') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ bounded errors
BIG = 10_000_000


def _huge_inputs():
    """Arguments whose error would echo megabytes if any path quoted the input whole."""
    big = "x" * BIG
    yield "calculator", {"expression": big}
    yield "calculator", {"expression": "9" * BIG}
    yield "calculator", {big: 1}
    yield "calculator", {f"k{i}": 1 for i in range(100_000)}
    yield "calculator", {"expression": [big]}
    yield "calculator", {"expression": {"a": big}}
    yield "calculator", {"expression": list(range(1_000_000))}
    yield "get_weather", {"city": big}
    yield "get_weather", {"city": "Paris", "unit": big}
    yield "get_weather", {"city": "é" * BIG}
    yield "convert_units", {"value": 1, "from_unit": big, "to_unit": "m"}
    yield "convert_units", {"value": 10**5000, "from_unit": "m", "to_unit": "km"}
    yield "convert_units", {"value": big, "from_unit": "m", "to_unit": "km"}
    yield "write_note", {"title": big, "text": "x"}
    yield "write_note", {"title": "t", "text": big}


@pytest.mark.parametrize("case", range(15))
def test_every_tool_error_is_bounded_and_says_how_long_the_input_was(case):
    name, args = list(_huge_inputs())[case]
    with pytest.raises(ToolError) as e:
        TOOLS[name].call(args)
    msg = str(e.value)
    assert msg.startswith(name) and len(msg) <= MAX_MESSAGE_CHARS, msg[:500]
    if any(isinstance(v, str) and len(v) >= BIG for v in [*args, *args.values()]):
        assert "10,000,000" in msg  # the length is named, the value is not echoed


def test_bounded_message_and_describe():
    assert bounded_message("short") == "short"
    cut = bounded_message("y" * 5000)
    assert len(cut) <= MAX_MESSAGE_CHARS and "5,000 characters" in cut
    assert describe("abc") == "'abc'"
    assert "1,000 characters" in describe("a" * 1000) and len(describe("a" * 1000)) < 120
    assert describe(list(range(10**4))) == "an array of 10,000 items (58,890 characters)"


# ------------------------------------------------------------------ the calculator does what its description says
def test_calculator_description_names_every_operator_it_accepts():
    desc = TOOLS["calculator"].description
    # the operator class of the calculator's own tokenizer: whatever it accepts, the description must name
    op_class = re.search(r"\(\?P<op>\\\*\\\*\|\[(.*?)\]\)", _TOKEN.pattern).group(1)
    accepted = (set(op_class) - set("()")) | {"**", "of", "的"}
    assert {"^", "×", "÷", "%"} <= accepted
    for op in sorted(accepted):
        assert op in desc, op
        calculator(f"50% {op} 8" if op in ("of", "的") else f"2 {op} 3")
    assert "parentheses" in desc
    for op in ["//", "&", "|", "<<", "~", "!", "sqrt(4)", "pi"]:  # what it does not name, it refuses
        with pytest.raises(ToolError):
            calculator(f"2 {op} 3" if len(op) <= 2 else op)


@pytest.mark.parametrize(
    "expr,want",
    [
        ("2^10", 2**10),
        ("2 ^ 3 ^ 2", 2**9),
        ("-2^2", -4),  # ^ is ** exactly (documented)
        ("10**18+1", 10**18 + 1),
        ("10**18-1", 10**18 - 1),  # exact whole numbers past 2**53
        ("2**64", 2**64),
        ("9" * 28 + "+0", int("9" * 28)),  # up to 28 significant digits
        ("123456789012345678901234567 * 10", 1234567890123456789012345670),
        ("2**-400", 2.0**-400),
        ("0.5**900", 0.5**900),  # tiny results are computed
        ("10**100", 10**100),
        ("-(10**100)", -(10**100)),  # the magnitude limit itself is allowed
        ("10**-300", 1e-300),
    ],
)
def test_calculator_boundaries(expr, want):
    got = calculator(expr)["result"]
    assert type(got) is type(want) and got == pytest.approx(want, rel=1e-15)
    if isinstance(want, int):
        assert got == want  # exact, not approximately
        exact = calculator(expr).get("exact")
        assert exact == (str(want) if abs(want) > 2**53 else None)  # for readers that parse doubles


@pytest.mark.parametrize(
    "expr,match",
    [
        ("10**100 * 10", "exceeds 1e\\+100"),
        ("2**333", "exceeds"),
        ("10**101", "exceeds"),
        ("10**-301", "closer to zero than 1e-300"),
        ("2**-1001", "exponent"),
        ("0.1**1000", "closer to zero"),
        ("2**1001", "exponent"),
        ("x" * 201, "longer than 200 characters \\(201\\)"),
    ],
)
def test_calculator_refuses_past_its_stated_limits(expr, match):
    with pytest.raises(ToolError, match=match):
        calculator(expr)


def test_calculator_rounds_past_28_digits_as_described():
    # 10**30 + 1 needs 31 digits: decimal arithmetic keeps 28, as the description says
    assert calculator("10**30 + 1")["result"] == 10**30
    assert "28 significant digits" in TOOLS["calculator"].description
    assert calculator("1/3")["result"] == pytest.approx(1 / 3, rel=1e-15)
