"""MCP end to end against real server subprocesses: stdio and Streamable HTTP on 127.0.0.1, both protocol eras,
error semantics, the Origin check, a hung tool, and that every server is gone afterwards (checked by PID)."""

import json

import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from toolkit.errors import ToolError
from toolkit.mcp.client import Connection
from toolkit.mcp.process import HTTPServer, pid_alive, stdio_server
from toolkit.mcp.tool import MCPTool
from toolkit.mcp.wire import WireLog
from toolkit.tools import TOOLS, schemas

KIT = ["calculator", "get_weather", "convert_units", "write_note"]


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    return tmp_path_factory.mktemp("notes")


@pytest.fixture(scope="module")
def stdio(notes):
    """One stdio server (kit + demo + test tools) for the module; closing it must end the process."""
    conn = Connection(stdio_server(demo=True, test_tools=True, notes_dir=notes), call_timeout=20)
    conn.open()
    assert conn.server_pid and pid_alive(conn.server_pid)
    yield conn
    pid = conn.server_pid
    conn.close()
    assert not pid_alive(pid), f"stdio server pid {pid} still running after close"


@pytest.fixture(scope="module")
def http_server(notes):
    srv = HTTPServer(demo=True, test_tools=True, notes_dir=notes)
    assert srv.url.startswith("http://127.0.0.1:") and srv.url.endswith("/mcp")
    yield srv
    srv.stop()
    assert not pid_alive(srv.pid), f"HTTP server pid {srv.pid} still running after stop"


@pytest.fixture(scope="module")
def http(http_server):
    with Connection(http_server.url, call_timeout=20) as conn:
        yield conn


# ------------------------------------------------------------------ discovery and round trips
def test_stdio_discovery_is_the_2026_envelope(stdio):
    assert stdio.protocol_version == "2026-07-28"
    req, reply = stdio.log.exchange("server/discover")
    assert req["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert "2026-07-28" in reply["result"]["supportedVersions"]
    assert "initialize" not in stdio.log.methods()  # the 2026 revision has no handshake
    assert stdio.server_info.name == "toolcall-kit"


def test_tools_list_carries_the_kit_schemas_unchanged(stdio):
    listed = {t.name: t for t in stdio.list_tools()}
    assert set(KIT) <= set(listed) and {"fetch_page", "delete_notes", "hang"} <= set(listed)
    for name in KIT:
        assert listed[name].input_schema == TOOLS[name].parameters
        assert listed[name].description == TOOLS[name].description
    assert listed["write_note"].annotations.destructive_hint is True
    assert listed["calculator"].annotations.destructive_hint is False
    # the same schema text on the wire as in the registry (key order included)
    _, reply = stdio.log.exchange("tools/list", nth=len([m for m in stdio.log.methods() if m == "tools/list"]) - 1)
    wire = {t["name"]: t["inputSchema"] for t in reply["result"]["tools"]}
    assert json.dumps(wire["convert_units"]) == json.dumps(TOOLS["convert_units"].parameters)


def test_schema_from_tools_list_renders_to_the_same_prompt(stdio):
    from toolkit.render import render

    remote = stdio.tools()
    msgs = [{"role": "user", "content": "250的15%是多少？"}]
    local_text = render(msgs, schemas(KIT)).text
    mcp_text = render(msgs, [remote[n].schema for n in KIT]).text
    assert mcp_text == local_text


def test_call_round_trip_stdio(stdio):
    r = stdio.call_tool("calculator", {"expression": "250 * 15%"})
    assert r.is_error is False and r.structured_content == {"expression": "250 * 15%", "result": 37.5}
    req, reply = stdio.log.exchange("tools/call", nth=0)
    assert req["params"]["name"] == "calculator" and req["params"]["arguments"] == {"expression": "250 * 15%"}
    assert reply["result"]["content"][0]["type"] == "text"
    assert json.loads(reply["result"]["content"][0]["text"])["result"] == 37.5


def test_tool_failure_is_a_result_with_is_error(stdio):
    r = stdio.call_tool("calculator", {"expression": "1 / 0"})
    assert r.is_error is True and "division by zero" in r.content[0].text
    # invalid arguments are also the tool's failure (revision 2025-11-25): the model reads and corrects them
    r = stdio.call_tool("get_weather", {"city": 7})
    assert r.is_error is True and "city" in r.content[0].text


def test_protocol_errors_are_jsonrpc_errors(stdio):
    with pytest.raises(MCPError) as e:
        stdio.request("tools/frobnicate")
    assert e.value.code == types.METHOD_NOT_FOUND == -32601
    with pytest.raises(MCPError) as e:
        stdio.request("tools/call", {"name": "no_such_tool", "arguments": {}})
    assert e.value.code == types.INVALID_PARAMS == -32602
    with pytest.raises(MCPError) as e:
        stdio.request("tools/call", {"arguments": {}})  # no name: malformed params
    assert e.value.code == -32602
    replies = [x.message for x in stdio.log if x.kind == "error"]
    assert {m["error"]["code"] for m in replies} >= {-32601, -32602}
    assert all("result" not in m for m in replies)


def test_hung_tool_times_out_on_the_client_and_the_session_survives(stdio):
    before = len(stdio.log)
    with pytest.raises(MCPError) as e:
        stdio.call_tool("hang", {"seconds": 600}, timeout=1.0)
    assert e.value.code == types.REQUEST_TIMEOUT  # raised on this side; nothing like it crosses the wire
    new = [x.message for x in list(stdio.log)[before:]]
    call_id = next(m["id"] for m in new if m.get("method") == "tools/call")
    assert any(m.get("method") == "notifications/cancelled" and m["params"]["requestId"] == call_id for m in new)
    assert stdio.call_tool("calculator", {"expression": "2+2"}).structured_content["result"] == 4
    # through the host-side adapter the timeout becomes a ToolError the model can read
    hang = MCPTool.from_mcp(next(t for t in stdio.list_tools() if t.name == "hang"), stdio)
    stdio.call_timeout = 1.0
    try:
        with pytest.raises(ToolError, match="timed out"):
            hang.call({"seconds": 600})
    finally:
        stdio.call_timeout = 20


def test_legacy_handshake_still_works_over_stdio():
    with Connection(stdio_server(), mode="legacy") as conn:
        pid = conn.server_pid
        assert conn.protocol_version == "2025-11-25"
        assert conn.log.methods()[:2] == ["initialize", "notifications/initialized"]
        req, reply = conn.log.exchange("initialize")
        assert req["params"]["protocolVersion"] == "2025-11-25"
        assert reply["result"]["serverInfo"]["name"] == "toolcall-kit"
        listed = conn.list_tools()
        r = conn.call_tool("calculator", {"expression": "250 * 15%"})
        assert r.structured_content["result"] == 37.5
        assert "_meta" not in conn.log.exchange("tools/call")[0]["params"]  # no per-request envelope
    assert not pid_alive(pid)
    # same schema values; this era's wire model re-orders keys (properties, required, type), so the rendered
    # prompt text differs by key order only
    for t in listed:
        assert t.input_schema == TOOLS[t.name].parameters
    assert list(listed[0].input_schema) != list(TOOLS[listed[0].name].parameters)


# ------------------------------------------------------------------ Streamable HTTP
def test_http_round_trip_and_headers(http):
    assert http.protocol_version == "2026-07-28"
    r = http.call_tool("convert_units", {"value": 10, "from_unit": "km", "to_unit": "mi"})
    assert r.is_error is False and abs(r.structured_content["result"] - 6.2137119224) < 1e-6
    assert {t.name for t in http.list_tools()} >= set(KIT)
    posts = [e for e in http.log.http if e.line.startswith("POST")]
    assert posts and all(e.headers.get("mcp-protocol-version") == "2026-07-28" for e in posts)
    assert any(
        e.headers.get("mcp-method") == "tools/call" and e.headers.get("mcp-name") == "convert_units" for e in posts
    )
    assert http.call_tool("calculator", {"expression": "1/0"}).is_error is True
    with pytest.raises(MCPError) as e:
        http.request("tools/frobnicate")
    assert e.value.code == -32601


def test_http_legacy_session(http_server):
    with Connection(http_server.url, mode="legacy") as conn:
        assert conn.protocol_version == "2025-11-25"
        assert conn.call_tool("calculator", {"expression": "3*4"}).structured_content["result"] == 12
        session_ids = {e.headers.get("mcp-session-id") for e in conn.log.http if "mcp-session-id" in e.headers}
    assert len(session_ids) == 1  # the 2025 HTTP transport keeps a session; the 2026 one is stateless
    assert any(e.line.startswith("DELETE") for e in conn.log.http)  # closing ends the session


def test_foreign_origin_is_refused(http_server):
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "browser-page", "version": "0"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    head = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "server/discover",
    }
    foreign = httpx2.post(http_server.url, json=body, headers={**head, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    other_port = httpx2.post(http_server.url, json=body, headers={**head, "Origin": "http://127.0.0.1:8888"})
    assert other_port.status_code == 403  # a local page on another port (e.g. Jupyter) is foreign too
    own = http_server.url.rsplit("/", 1)[0]
    ok = httpx2.post(http_server.url, json=body, headers={**head, "Origin": own})
    assert ok.status_code == 200 and "2026-07-28" in ok.json()["result"]["supportedVersions"]


def test_http_hung_tool_times_out(http):
    with pytest.raises(MCPError) as e:
        http.call_tool("hang", {"seconds": 600}, timeout=1.0)
    assert e.value.code == types.REQUEST_TIMEOUT
    assert http.call_tool("calculator", {"expression": "1+1"}).structured_content["result"] == 2


def test_http_server_binds_loopback_only(http_server):
    import socket
    from pathlib import Path

    port = int(http_server.url.split(":")[2].split("/")[0])
    # the kernel's table of listening TCP sockets: local address 0100007F is 127.0.0.1 (little-endian hex)
    listening = [
        line.split()[1]
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
        if line.split()[3] == "0A" and int(line.split()[1].split(":")[1], 16) == port
    ]
    assert listening == [f"0100007F:{port:04X}"]
    tcp6 = Path("/proc/net/tcp6")
    assert not [
        line
        for line in (tcp6.read_text().splitlines()[1:] if tcp6.exists() else [])
        if line.split()[3] == "0A" and int(line.split()[1].split(":")[1], 16) == port
    ]
    ips = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)} - {"127.0.0.1"}
    for ip in ips:  # any non-loopback address of this machine must not reach the server
        with socket.socket() as s:
            s.settimeout(1)
            assert s.connect_ex((ip, port)) != 0


# ------------------------------------------------------------------ the wire log and the CLI
def test_wire_log_records_both_directions_in_order():
    log = WireLog()
    log.record("->", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {"x": 1}}})
    log.record("<-", {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})
    log.record("->", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    assert [e.kind for e in log] == ["request", "result", "notification"]
    assert log.exchange("tools/list")[1] == {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    assert '"_meta": "…"' in log.text(hide_meta=True) and '"x": 1' in log.text()
    assert [json.loads(line)["dir"] for line in log.jsonl().splitlines()] == ["->", "<-", "->"]
    with pytest.raises(KeyError):
        log.exchange("tools/call")


def test_cli_prints_a_stdio_wire_log(capsys):
    from toolkit.commands.mcp import cli

    assert cli(["wirelog", "--stdio", "--hide-meta"]) == 0
    out = capsys.readouterr().out
    assert "protocol 2026-07-28" in out
    lines = [line for line in out.splitlines() if line.startswith(("->", "<-"))]
    methods = [json.loads(line[3:]).get("method") for line in lines if line.startswith("->")]
    assert methods == ["server/discover", "tools/list", "tools/call", "tools/call", "tools/call", "tools/frobnicate"]
    assert '"isError": true' in out and '"code": -32601' in out and '"code": -32602' in out


def test_cli_serve_reports_a_taken_port(capsys):
    import socket

    from toolkit.commands.mcp import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert cli(["serve", "--http", "--port", str(taken.getsockname()[1])]) == 1
    assert "cannot listen on 127.0.0.1" in capsys.readouterr().err
