"""toolkit.tools: schemas generated from the functions, a calculator that refuses hostile input fast, the
weather table, unit conversion, and the sandboxed side-effect tool."""
import json

import jsonschema
import pytest

from toolkit import tools
from toolkit.tools import TOOLS, Tool, ToolError, calculator, convert_units, get_weather, schemas, write_note

HOSTILE = [
    "__import__('os')", "__import__('os').system('ls')", "open('/etc/passwd').read()", "exec('1')", "eval('1')",
    "os.system('rm -rf /')", "().__class__.__bases__[0].__subclasses__()", "lambda: 1", "[1, 2, 3]",
    "{'a': 1}", "1 if 1 else 2", "x + 1", "a = 1", "import os", "globals()", "locals()", "getattr(1, 'real')",
    "1; 2", "1, 2", "'abc' * 3", '"1" + "2"', "1.real", "True + 1", "None", "~1", "1 << 100000", "1 >> 1",
    "1 & 1", "1 | 1", "1 == 1", "1 < 2", "not 1", "1 // 0", "abs(-1)", "pow(2, 10)", "sqrt(4)",
    "9**9**9", "10**10**10", "2**100000", "(9**9)**99", "99999**999", "1e308*1e308", "1e308", "1e101", "-1e200",
    "10**101", "1/0", "5 % 0", "0**-1", "(-8)**0.5", "((1)", "(1))", "1 +", "* 2", "", "   ", "()", "1..2",
    "1e", "١٢٣", "1_000", "0x10", "0b1", "1j", "\x00", "1\n+\n__import__('os')", "2 ** -2000",
    "1" * 31, "9" * 200 + "+1",
    "(" * 10_000 + "1" + ")" * 10_000, "-" * 150 + "1", "(" * 33 + "1" + ")" * 33, "1+" * 5_000 + "1",
    "x" * 10_000_000, "1" * 10_000_000, "(" * 5_000_000,
]


def test_at_least_fifty_hostile_inputs():
    assert len(HOSTILE) >= 50


@pytest.mark.parametrize("expr", HOSTILE, ids=lambda e: repr(e[:30]) + (f"..({len(e)})" if len(e) > 30 else ""))
def test_hostile_calculator_input_is_rejected(expr):
    # How fast (target <= 100 ms each) is measured by benchmarks/latency.py, not asserted here.
    with pytest.raises(ToolError) as e:
        TOOLS["calculator"].call({"expression": expr}) if len(expr) <= 200 else calculator(expr)
    assert str(e.value).startswith("calculator") and len(str(e.value)) < 400


@pytest.mark.parametrize("expr,want", [
    ("250 * 0.15", 37.5), ("250*15%", 37.5), ("15% of 250", 37.5), ("250的15%", 37.5), ("(3 + 4) ** 2 / 7", 7),
    ("2 ** 3 ** 2", 512), ("-2 ** 2", -4), ("(-2) ** 2", 4), ("0.1 + 0.2", 0.3), ("10 % 3", 1), ("7 / 2", 3.5),
    ("2^10", 1024), ("1e3 + 1", 1001), (".5 * 4", 2), ("-(-(3))", 3), ("3 × 4 ÷ 2", 6), ("100 - 10%", 99.9),
    ("2 ** 0.5", 1.4142135623730951), ("1/3", 1 / 3),
])
def test_calculator_values(expr, want):
    assert calculator(expr)["result"] == pytest.approx(want, rel=1e-15)


def test_calculator_limits_are_exact_at_the_edge():
    assert calculator("(" * 32 + "1" + ")" * 32)["result"] == 1
    assert calculator("10 ** 100")["result"] == pytest.approx(1e100)
    assert calculator("10 ** 17 + 1")["result"] == 10 ** 17 + 1  # exact: Decimal, not float
    assert calculator("2 ** 300 / 2 ** 299")["result"] == 2
    with pytest.raises(ToolError, match="exponent"):
        calculator("1 ** 1001")
    assert calculator("1" * 30)["result"] == pytest.approx(float("1" * 30))


def test_schema_is_generated_from_the_function_not_written_by_hand():
    fn = TOOLS["get_weather"].schema["function"]
    assert fn["name"] == "get_weather"
    assert fn["description"] == get_weather.__doc__.strip().splitlines()[0]
    assert fn["parameters"]["properties"]["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert fn["parameters"]["required"] == ["city"]
    assert "return" not in fn
    assert TOOLS["calculator"].parameters["properties"]["expression"]["maxLength"] == tools.MAX_EXPR_CHARS
    for s in schemas():  # every schema is itself a valid JSON Schema
        jsonschema.Draft202012Validator.check_schema(s["function"]["parameters"])


def test_schemas_shape_and_selection():
    all_ = schemas()
    assert [s["function"]["name"] for s in all_] == list(TOOLS)
    assert all(s["type"] == "function" and set(s["function"]) == {"name", "description", "parameters"}
               for s in all_)
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


@pytest.mark.parametrize("v,f,t,want", [(1, "km", "m", 1000), (100, "c", "f", 212), (32, "f", "c", 0),
                                        (0, "c", "k", 273.15), (1, "mi", "km", 1.609344), (1, "lb", "g", 453.59237),
                                        (1, "gal", "l", 3.785411784), (12, "in", "ft", 1)])
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
