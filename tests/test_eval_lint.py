"""lint-tools: each rule fires on what it names and stays quiet on a good tool; the CLI's exit codes."""

import json
import subprocess
import sys

from toolkit.eval.lint import RULES, lint
from toolkit.tools import schemas

GOOD = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Fetches the current weather for one city from a fixed table. Do not use for forecasts.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
                "days": {"type": "integer", "minimum": 0, "maximum": 0, "description": "Always 0 (today)"},
            },
            "required": ["city"],
        },
    },
}


def rules(tools):
    return {(f.rule, f.level) for f in lint(tools)}


def test_a_good_tool_has_no_findings():
    assert lint([GOOD]) == []


def _bad(**fn):
    base = json.loads(json.dumps(GOOD["function"]))
    base.update(fn)
    return {"type": "function", "function": base}


def test_each_rule_fires():
    assert ("S1", "error") in rules([_bad(name="get weather!")])
    assert ("G0", "error") in rules([_bad(description="")])
    assert ("G1", "warning") in rules([_bad(description="Handles weather stuff. Do not use for forecasts.")])
    assert ("G2", "warning") in rules([_bad(description="Fetches the current weather for a city.")])
    assert ("G6", "error") in rules([_bad(description="Fetches weather. Do not use for news. " + "x" * 1100)])
    params = json.loads(json.dumps(GOOD["function"]["parameters"]))
    params["properties"]["city"].pop("description")
    assert ("G4", "error") in rules([_bad(parameters=params)])
    params = json.loads(json.dumps(GOOD["function"]["parameters"]))
    params["properties"]["days"] = {"type": "integer", "description": "how many days"}
    params["properties"]["unit"] = {"type": "string", "description": "one of celsius or fahrenheit"}
    found = [f for f in lint([_bad(parameters=params)]) if f.rule == "G3"]
    assert len(found) == 2
    many = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x"} for i in range(7)}}
    assert ("G5", "warning") in rules([_bad(parameters=many)])
    assert ("S2", "error") in rules([_bad(parameters={"type": "object", "properties": {"a": {"type": "strin"}}})])
    assert ("S3", "error") in rules([_bad(parameters={"type": "object", "properties": {}, "required": ["x"]})])
    assert ("S4", "error") in rules([GOOD, GOOD])
    assert ("K1", "warning") in rules([GOOD, _bad(name="get_weathers")])
    assert {r for r, _ in rules([_bad(name="get weather!")])} <= set(RULES)


def test_accepts_mcp_and_bare_shapes_and_never_crashes_on_junk():
    mcp = [
        {
            "name": "get_weather",
            "description": GOOD["function"]["description"],
            "inputSchema": GOOD["function"]["parameters"],
        }
    ]
    assert lint(mcp) == [] and lint({"tools": mcp}) == []
    for junk in (None, 3, "x", [1, None, "y"], [{"function": 5}], {"tools": 7}):
        assert all(f.level in ("error", "warning") for f in lint(junk))


def test_the_kits_own_tools_have_no_errors():
    assert [f for f in lint(schemas()) if f.level == "error"] == []


def test_cli_exit_codes(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps([GOOD]))
    bad.write_text(json.dumps([_bad(description="")]))

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "toolkit", "lint-tools", *a],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    r = run(str(good))
    assert r.returncode == 0 and "0 error(s)" in r.stdout
    r = run(str(bad), "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["errors"] == 1
    r = run(str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "no such file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    for content, says in (
        ('{"tools": "notalist"}', "expected a list of tools"),
        ("[1, 2]", "not an object"),
        ("{not json", "is not valid JSON"),
    ):
        junk = tmp_path / "junk.json"
        junk.write_text(content)
        r = run(str(junk))
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for args, says in (
        (["--mcp", "http://127.0.0.1:9/mcp"], "connection refused"),
        (["--mcp", "http://no-such-host.invalid/mcp"], "cannot find the host 'no-such-host.invalid'"),  # RFC 6761
        (["--mcp", "notaurl"], "not a URL"),
        (["--mcp-stdio", "no-such-command-x"], "no such command"),
        (["--mcp-stdio", "cat"], "did not answer as an MCP server"),
    ):
        r = run(*args)
        assert r.returncode == 2 and says in r.stderr and "ExceptionGroup" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_vague_untyped_and_too_short_definitions_are_errors_citing_the_chapter():
    params = json.loads(json.dumps(GOOD["function"]["parameters"]))
    params["properties"]["city"] = {"description": "City name, e.g. Paris"}
    assert ("G7", "error") in rules([_bad(parameters=params)])
    assert ("G8", "error") in rules([_bad(name="do")]) and ("G8", "error") in rules([_bad(name="process_data")])
    assert ("G9", "error") in rules([_bad(description="Gets data.")])
    assert ("G10", "error") in rules([_bad(description="Fetches city weather.")])
    params = json.loads(json.dumps(GOOD["function"]["parameters"]))
    params["properties"]["city"]["description"] = "v"
    assert ("G11", "error") in rules([_bad(parameters=params)])
    params["properties"]["city"]["description"] = "city"
    assert ("G11", "error") in rules([_bad(parameters=params)])
    assert all("§" in RULES[r] for r in ("G7", "G8", "G9", "G10", "G11"))


def test_look_alikes_are_bounded_in_time_and_output():
    """2,000 look-alike names took 33-45 s and printed 779,701 warnings; now a capped list and one summary line."""
    import time

    from toolkit.eval.lint import MAX_K1, look_alikes

    names = [f"get_weather_{i:05d}" for i in range(5_000)]
    t = time.perf_counter()
    found = look_alikes(names)
    took = time.perf_counter() - t
    assert len(found) == MAX_K1 + 1 and found[-1].tool == "(all)" and "5,000 names" in found[-1].message
    assert took < 20, took  # n * 16 comparisons, not n^2 / 2 (printed when slow: the machine may be busy)
    few = look_alikes(["get_weather", "get_weathers", "send_email"])
    assert [(f.tool, f.rule) for f in few] == [("get_weather", "K1")]


def test_cli_text_output_is_bounded(tmp_path):
    many = tmp_path / "many.json"
    many.write_text(json.dumps([_bad(name=f"tool_{i:04d}_x", description="") for i in range(400)]))
    r = subprocess.run(
        [sys.executable, "-m", "toolkit", "lint-tools", str(many)], capture_output=True, text=True, timeout=120
    )
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 1 and len(lines) <= 203 and "more finding(s) not printed" in lines[-2], lines[-3:]


def test_cli_json_output_is_bounded_and_counts_what_it_left_out(tmp_path, monkeypatch, capsys):
    """--json listed every finding (16 MB of tools: hundreds of thousands); now the first MAX_JSON_FINDINGS (made
    small here, in-process, to stay quick), errors first, with totals that agree with the text report's, and a
    megabyte tool name cut to its length."""
    from toolkit.commands import lint_tools

    monkeypatch.setattr(lint_tools, "MAX_JSON_FINDINGS", 40)
    monkeypatch.setattr(lint_tools, "MAX_PRINTED", 20)
    tools = [_bad(name="n" * 1_000_000, description="", parameters={"type": "object", "properties": {}})]
    tools += [_bad(name=f"tool_{i:04d}_x", description="") for i in range(100)]
    many = tmp_path / "many.json"
    many.write_text(json.dumps(tools))

    assert lint_tools.cli([str(many), "--json"]) == 1
    out = capsys.readouterr().out
    assert len(out) < 40 * 1000, len(out)
    report = json.loads(out)
    listed = report["findings"]
    assert len(listed) == 40 and report["left_out"] == report["total"] - 40 > 0, report["total"]
    assert report["total"] == report["errors"] + report["warnings"] == sum(report["by_rule"].values())
    assert report["total"] == len(lint(tools)) and report["tools"] == len(tools)
    levels = [f["level"] for f in listed]
    assert "warning" in [f.level for f in lint(tools)] and levels == sorted(levels, key=lambda v: v != "error")
    limit = lint_tools.MAX_FIELD_CHARS
    assert all(len(f["tool"]) <= limit and len(f["message"]) <= limit for f in listed)
    assert any("1,000,000 characters" in f["tool"] for f in listed)

    assert lint_tools.cli([str(many)]) == 1
    text = capsys.readouterr().out.strip().splitlines()
    assert len(text) == 20 + 2 and "not printed" in text[-2], text[-2:]
    assert text[-1] == f"{len(tools)} tool(s), {report['errors']} error(s), {report['warnings']} warning(s)"
    assert max(map(len, text)) < 2 * limit + 200
