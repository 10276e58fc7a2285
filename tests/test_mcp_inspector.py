"""The kit's MCP server checked by another implementation: the MCP Inspector CLI from npm
(``npx -y @modelcontextprotocol/inspector --cli ...``) lists and calls its tools over stdio and Streamable HTTP.

Skipped, with the reason, only where npx is missing or the npm registry cannot be reached. The HTTP server runs on
127.0.0.1 and is stopped by PID; the stdio server is the Inspector's child and must be gone when it exits."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from toolkit.mcp.process import REPO_ROOT, HTTPServer, pid_alive

INSPECTOR = os.environ.get("TOOLKIT_INSPECTOR", "@modelcontextprotocol/inspector@2.12.0")


@pytest.fixture(scope="module")
def npx(tmp_path_factory):
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed (Node.js); the Inspector CLI cannot run")
    work = tmp_path_factory.mktemp("inspector")
    try:
        probe = subprocess.run(
            ["npm", "view", INSPECTOR, "version"], capture_output=True, text=True, timeout=90, cwd=work
        )
    except subprocess.TimeoutExpired:
        pytest.skip("the npm registry did not answer within 90 s")
    if probe.returncode != 0:
        pytest.skip(f"the npm registry is unreachable: {probe.stderr.strip().splitlines()[-1:]}")
    return work


def inspector(cwd, *args, timeout=240) -> tuple[int, object, str]:
    r = subprocess.run(
        ["npx", "-y", INSPECTOR, "--cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        out = json.loads(r.stdout)
    except ValueError:
        out = r.stdout
    return r.returncode, out, r.stderr


def stdio_target() -> list[str]:
    env = ["-e", f"PYTHONPATH={REPO_ROOT}", "-e", "HF_HUB_OFFLINE=1"]
    return [
        *env,
        "--cwd",
        str(REPO_ROOT),
        "--",
        sys.executable,
        "-m",
        "toolkit",
        "mcp",
        "serve",
        "--stdio",
        "--pid-file",
        "{pid}",
    ]


def test_inspector_over_stdio(npx, tmp_path):
    pid_file = tmp_path / "pid"
    target = [a.replace("{pid}", str(pid_file)) for a in stdio_target()]
    rc, listed, err = inspector(npx, "--method", "tools/list", *target)
    assert rc == 0, err[-2000:]
    from toolkit.tools import TOOLS

    by_name = {t["name"]: t for t in listed["tools"]}
    assert set(by_name) == set(TOOLS)
    assert all(by_name[n]["inputSchema"] == TOOLS[n].parameters for n in TOOLS)
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 15
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(pid)  # the Inspector's child server ended with it

    rc, result, err = inspector(
        npx, "--method", "tools/call", "--tool-name", "calculator", "--tool-arg", "expression=10**18+1", *target
    )
    assert rc == 0, err[-2000:]
    # JavaScript reads JSON numbers as doubles: the Inspector shows 1e18 for the integer, which is why the tool
    # also sends integers beyond 2**53 as an exact string
    assert result["isError"] is False and result["structuredContent"]["exact"] == str(10**18 + 1)
    assert '"result": 1000000000000000001' in result["content"][0]["text"]
    rc, result, _ = inspector(
        npx, "--method", "tools/call", "--tool-name", "calculator", "--tool-arg", "expression=1/0", *target
    )
    assert result["isError"] is True and "division by zero" in result["content"][0]["text"]


def test_inspector_over_http(npx):
    with HTTPServer() as srv:
        rc, listed, err = inspector(npx, srv.url, "--transport", "http", "--method", "tools/list")
        assert rc == 0, err[-2000:]
        assert {t["name"] for t in listed["tools"]} == {"calculator", "get_weather", "convert_units", "write_note"}
        rc, result, err = inspector(
            npx,
            srv.url,
            "--transport",
            "http",
            "--method",
            "tools/call",
            "--tool-name",
            "get_weather",
            "--tool-arg",
            "city=Paris",
        )
        assert rc == 0, err[-2000:]
        assert result["structuredContent"]["city"] == "Paris"
        rc, _, err = inspector(
            npx, srv.url, "--transport", "http", "--method", "tools/call", "--tool-name", "no_such_tool"
        )
        assert rc != 0 and "no_such_tool" in err
    assert not pid_alive(srv.pid)
