"""Claims about MCP (§14.5.6, "Tool Use" §3.2), checked against the installed ``mcp`` SDK: one check per claim.

What it does
- The protocol's wire facts from the SDK's own types and version registry; what a client sees of a live in-process
  server (``mcp_probe``) and of the kit's stdio server killed under a call (``crash_probe``), both loaded once per
  ledger run (``toolkit.book.claims_mcp_probe`` runs them).

What it leaves out
- The specification text: protocol facts are what the installed SDK encodes. Isolation is checked twice: in-process
  (a tool raising) and on the kit's stdio server as a subprocess (a tool that kills its process).
"""

from __future__ import annotations

import importlib.util as iu
import inspect
from importlib.metadata import version

import mcp.types as mt
from mcp import Client
from mcp.types import methods
from mcp.types import version as v

from toolkit.book.claims_mcp_probe import CRASH_BOUND_S, INJECTION, probe_server, stdio_crash_probe
from toolkit.book.ledger import make_verdict
from toolkit.book.registry import Group, loader

MCP = Group("mcp")
BOTH = "§14.5.6; Tool Use §3.2"


@loader
def mcp_probe() -> dict:
    """What a client saw of the in-process probe server, per client mode ("legacy", "auto")."""
    return probe_server()


@loader
def crash_probe() -> dict:
    """What the host saw when the kit's stdio server killed itself under a call."""
    return stdio_crash_probe()


def _sdk() -> str:
    return f"mcp {version('mcp')}"


def _client_requests(ver: str) -> list[str]:
    return sorted({m for m, x in methods.CLIENT_REQUESTS if x == ver})


@MCP(
    "jsonrpc",
    BOTH,
    "MCP messages are JSON-RPC 2.0; a tool call is method tools/call with params name and arguments.",
    answers=(
        "消息格式是 JSON-RPC 2.0",
        "tools/call，参数是 name 与 arguments（JSON 示例）",
        "Server(Tool)-Client(Agent) 架构",
        "JSON-RPC 2.0 协议",
    ),
)
def jsonrpc():
    example = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    example["params"] = {"name": "get_weather", "arguments": {"location": "New York"}}
    req = mt.JSONRPCRequest.model_validate(example)
    call = mt.CallToolRequest.model_validate({"method": req.method, "params": req.params})
    return (
        f"{_sdk()}: JSONRPC_VERSION = {mt.JSONRPC_VERSION!r}; the book's example validates as JSONRPCRequest and "
        f"CallToolRequest (name={call.params.name!r}, arguments={call.params.arguments})",
        *make_verdict(
            mt.JSONRPC_VERSION == "2.0" and call.params.name == "get_weather",
            "the SDK speaks another JSON-RPC version or rejects the example",
        ),
    )


@MCP(
    "tools-list-fields",
    BOTH,
    "tools/list returns tools with name, description and inputSchema (the JSON Schema a template renders into the "
    "prompt).",
    answers=(
        "tools/list…每个工具含 name、description 和 inputSchema",
        "inputSchema 就是…第 1 步要渲染进提示的那份 JSON Schema",
        "每条含 name / description / inputSchema，与本地 Tool 完全同构",
        "把远程工具包装成本地工具放到 Agent 的上下文提示中",
    ),
)
def tools_list_fields(mcp_probe):
    keys = mt.Tool(name="t", description="d", input_schema={"type": "object"}).model_dump(by_alias=True)
    listed = mcp_probe["legacy"]["tool_keys"]
    return (
        f"{_sdk()} Tool wire fields: {sorted(keys)}; a live in-process server listed {listed}",
        *make_verdict({"name", "description", "inputSchema"} <= set(listed), "a field is missing from the listing"),
    )


@MCP(
    "is-error",
    "§14.5.6",
    "A tool's own failure comes back as a normal result with isError = true (the model sees it); protocol failures "
    "are JSON-RPC errors.",
    answers=("content 是结果内容，isError 标记工具自身是否出错", "工具执行出错…isError…协议层出错…JSON-RPC 错误"),
    supports=("Server(Tool)-Client(Agent) 架构", "call_tool…Server 执行，把结果回流"),
)
def is_error(mcp_probe):
    res = mt.CallToolResult(content=[], is_error=True).model_dump(by_alias=True)
    lg = mcp_probe["legacy"]
    return (
        f"{_sdk()}, in-process server: a tool raising ZeroDivisionError → result with isError {lg['error']} (fields "
        f"{sorted(res)}); on the wire an unknown method → JSON-RPC error {lg['no_method']}, tools/call without a "
        f"name → {lg['no_name']}. An unknown tool name → isError {lg['unknown']} from this SDK's MCPServer; the "
        "2025-06-18 specification lists an unknown tool as a protocol error (-32602), which the kit's own server "
        "(toolkit.mcp.server) returns: a deviation of the SDK, not of the book",
        *make_verdict(
            lg["error"]
            and mcp_probe["auto"]["error"]
            and lg["no_method"] == mt.METHOD_NOT_FOUND
            and lg["no_name"] == mt.INVALID_PARAMS,
            "a tool failure was not isError, or a protocol failure was not a JSON-RPC error",
        ),
    )


@MCP(
    "primitives",
    BOTH,
    "Servers offer three kinds of things: tools, resources and prompts, and declare which in their capabilities.",
    answers=("三类原语是 resources、prompts、tools",),
    supports=("Server 回响应，声明自己支持的能力（tools / resources / prompts）",),
)
def primitives(mcp_probe):
    caps, declared = set(mt.ServerCapabilities.model_fields), mcp_probe["legacy"]["server_caps"]
    return (
        f"ServerCapabilities fields: {sorted(caps)}; the probe server declared {declared}",
        *make_verdict(
            {"tools", "resources", "prompts"} <= caps and "tools" in declared,
            "a primitive is missing from the capabilities",
        ),
    )


def _transports() -> dict[str, bool]:
    names = (("stdio", "mcp.client.stdio"), ("Streamable HTTP", "mcp.client.streamable_http"))
    return {name: iu.find_spec(mod) is not None for name, mod in (*names, ("HTTP+SSE", "mcp.client.sse"))}


@MCP(
    "transports",
    BOTH,
    "The standard transports are stdio and Streamable HTTP.",
    answers=("标准传输只有两种：stdio 与 Streamable HTTP", "stdio 与 Streamable HTTP 两种传输方式"),
)
def transports():
    have = _transports()
    return (
        f"{_sdk()} client transports present: {have}",
        *make_verdict(
            have["stdio"] and have["Streamable HTTP"],
            "one is missing",
            [(have["HTTP+SSE"], "the SDK still ships an HTTP+SSE transport as well (see sse-deprecated)")],
        ),
    )


@MCP(
    "sse-deprecated",
    "§14.5.6",
    "HTTP+SSE was replaced by Streamable HTTP and is deprecated, kept only for backward compatibility.",
    answers=("HTTP+SSE 传输已被…取代并标为弃用",),
)
def sse_deprecated():
    import mcp.client.sse as csse  # lazy: the SDK's SSE stack loads only when this claim runs
    import mcp.server.sse as ssse  # lazy: the SDK's SSE stack loads only when this claim runs
    import mcp.shared.exceptions as exc  # lazy: as above

    marked = "deprecat" in (inspect.getsource(csse) + inspect.getsource(ssse)).lower()
    return (
        f"{_sdk()}: mcp.client.sse and mcp.server.sse present; the word 'deprecated' in their source: {marked}; the "
        f"SDK's warning class MCPDeprecationWarning exists: {hasattr(exc, 'MCPDeprecationWarning')}",
        *make_verdict(
            _transports()["Streamable HTTP"],
            "Streamable HTTP is missing",
            [
                (
                    not marked,
                    "the deprecation is the specification's (its text is not installed here to read); this SDK ships "
                    "HTTP+SSE on both sides without marking it deprecated, so it cannot confirm the claim",
                )
            ],
        ),
    )


@MCP(
    "initialize-era",
    "Tool Use §3.2",
    "Every connection starts with an initialize request (protocolVersion, capabilities, clientInfo); the server "
    "answers with its capabilities; then the client lists tools and calls them.",
    answers=(
        "Client 发 initialize 请求，含 protocolVersion、capabilities、clientInfo",
        "Server 回响应，声明自己支持的能力（tools / resources / prompts）",
    ),
)
def initialize_era(mcp_probe):
    handshake, modern = _client_requests(v.LATEST_HANDSHAKE_VERSION), _client_requests(v.LATEST_PROTOCOL_VERSION)
    init_fields = sorted(f.alias or n for n, f in mt.InitializeRequestParams.model_fields.items())
    lg = mcp_probe["legacy"]
    return (
        f"{_sdk()}: InitializeRequestParams wire fields {init_fields}; initialize exists for revisions "
        f"{v.OLDEST_SUPPORTED_VERSION}…{v.LATEST_HANDSHAKE_VERSION} ({'initialize' in handshake}); the live "
        f"legacy-mode client negotiated {lg['version']} and read server capabilities {lg['server_caps']}; latest "
        f"{v.LATEST_PROTOCOL_VERSION} has initialize: {'initialize' in modern}, server/discover: "
        f"{'server/discover' in modern} (auto mode negotiated {mcp_probe['auto']['version']})",
        *make_verdict(
            "initialize" in handshake
            and {"protocolVersion", "capabilities", "clientInfo"} <= set(init_fields)
            and bool(lg["server_caps"]),
            "initialize or one of its named fields is missing",
            [
                (
                    "initialize" not in modern,
                    f"true of the handshake revisions up to {v.LATEST_HANDSHAKE_VERSION}; the latest revision "
                    f"{v.LATEST_PROTOCOL_VERSION} drops initialize for an optional server/discover and per-request "
                    "_meta",
                )
            ],
        ),
    )


@MCP(
    "sdk-names",
    "Tool Use §3.2",
    "The phases are list_tools (or list_resources / list_prompts) and call_tool.",
    answers=("list_tools（或 list_resources / list_prompts）", "call_tool…Server 执行，把结果回流"),
)
def sdk_names():
    wire = {"list_tools": "tools/list", "call_tool": "tools/call"}
    wire |= {"list_resources": "resources/list", "list_prompts": "prompts/list"}
    all_methods = {m for m, _ in methods.CLIENT_REQUESTS}
    py = {n: hasattr(Client, n) for n in wire}
    return (
        f"{_sdk()} Python Client methods present: {py}; the JSON-RPC methods on the wire: "
        f"{', '.join(f'{w} ({w in all_methods})' for w in wire.values())}",
        *make_verdict(
            all(py.values()) and all(w in all_methods for w in wire.values()),
            "a name is missing from the SDK",
            [
                (
                    not any(n in all_methods for n in wire),
                    "list_tools / call_tool are the Python SDK's method names; on the wire they are tools/list and "
                    "tools/call (as §14.5.6 writes them)",
                )
            ],
        ),
    )


@MCP(
    "only-discover-call",
    "§14.5.6",
    "Between client and server there are only two kinds of messages: discovering tools and calling them.",
    answers=("两者之间只有“发现工具”与“调用工具”两类消息",),
)
def only_discover_call():
    n_req = {ver: _client_requests(ver) for ver in ("2025-11-25", v.LATEST_PROTOCOL_VERSION)}
    old = n_req["2025-11-25"]
    tool_methods = [m for m in old if m.startswith("tools/")]
    return (
        f"{_sdk()}: client requests in revision 2025-11-25: {len(old)} ({', '.join(old)}); in "
        f"{v.LATEST_PROTOCOL_VERSION}: {len(n_req[v.LATEST_PROTOCOL_VERSION])}; tool methods: {tool_methods}",
        *make_verdict(
            tool_methods == ["tools/call", "tools/list"],
            "tools are not discovered and called by two methods",
            [
                (
                    len(old) > 2,
                    f"true of tools (tools/list, tools/call); the protocol itself has {len(old)} client requests in "
                    "2025-11-25 (handshake, ping, resources, prompts, completion, logging) plus notifications",
                )
            ],
        ),
    )


@MCP(
    "versions-perishable",
    "§14.5.6",
    "Protocol revision numbers and field sets change; check the current revision instead of memorising them.",
    answers=("修订版本号与具体字段集合是易过期事实",),
)
def versions_perishable():
    handshake, modern = _client_requests(v.LATEST_HANDSHAKE_VERSION), _client_requests(v.LATEST_PROTOCOL_VERSION)
    known = v.KNOWN_PROTOCOL_VERSIONS
    return (
        f"{_sdk()} knows {len(known)} revisions ({known[0]} … {v.LATEST_PROTOCOL_VERSION}); client requests "
        f"added/removed by the latest: +{sorted(set(modern) - set(handshake))} "
        f"−{sorted(set(handshake) - set(modern))}",
        *make_verdict(len(known) > 1 and handshake != modern, "a single revision, or the request set never changed"),
    )


@MCP("mcp-2024", "§14.5.6", "MCP dates from 2024.", answers=("Anthropic 在 2024 年提出",))
def mcp_2024():
    first = v.KNOWN_PROTOCOL_VERSIONS[0]
    return f"oldest revision the SDK knows: {first}", *make_verdict(
        first.startswith("2024"), "the first revision is not from 2024"
    )


@MCP(
    "decoupling-security",
    "Tool Use §3.2; §14.5.6",
    "Decoupling isolates the tool: a crashing tool does not break the system — while server output stays untrusted "
    "input.",
    answers=(
        "工具描述、资源内容和工具输出都应视为不可信输入",
        "解耦——Agent Runtime 与 Tool Excute 解耦",
        "安全——Tool 挂掉…并不影响整体系统安全",
    ),
)
def decoupling_security(mcp_probe, crash_probe):
    lg, crash = mcp_probe["legacy"], crash_probe
    survived = lg["after"] == (False, "0.25") and mcp_probe["auto"]["after"] == (False, "0.25")
    verbatim = INJECTION in lg["page"]
    bounded = crash["error"] is not None and "\n" not in crash["error"] and crash["seconds"] < CRASH_BOUND_S
    return (
        f"in-process server: a tool raising RuntimeError → isError {lg['crashed']}, the next call on the same session "
        f"→ {lg['after']}; the kit's stdio server as a subprocess, a tool that SIGKILLs its process: the host got "
        f"{crash['error']!r} within {CRASH_BOUND_S:g} s (bounded: {bounded}), server process gone "
        f"{crash['server_gone']}, the dead session's next call → {crash['dead_session']!r}, a new session → "
        f"{crash['fresh']}; a tool's output carrying an instruction reached the client verbatim: {verbatim}",
        *make_verdict(
            lg["crashed"] and survived and bounded and crash["server_gone"] and crash["fresh"] is not None,
            "a crash broke the session or the host (see the evidence)",
            [
                (
                    crash["dead_session"] != "answered",
                    "a crash inside the process is contained by the session; a crash of the process ends the "
                    "session: the host survives with a one-line error, but must start the server again",
                ),
                (
                    verbatim,
                    "isolation holds for failures, but decoupling does not make output safe: the injected text "
                    "arrives unchanged, so §14.5.6's 'treat server output as untrusted' still applies "
                    "(toolkit.mcp.safety marks it)",
                ),
            ],
        ),
    )


def mcp_claims():
    """This group's claims (the ledger runs every group at once: ``toolkit.book.claims.check_all``)."""
    return MCP.run()
