"""What the installed ``mcp`` SDK writes on the wire and what it leaves to the host ("Tool Use" §3.2, §14.5.6).

What it does
- One check per claim: "JSON-RPC 2.0 in UTF-8, whatever the transport" from the SDK's stdio defaults (client
  setting, server wrapping), and the bytes its HTTP stack (starlette responses, SSE events) writes for a message
  with non-ASCII text; "MCP does not by itself solve authentication, least privilege, ... rate limits" from a
  server built with the SDK's defaults, the auth packages it ships and its source.

What it leaves out
- Starting a server or a subprocess (the in-process probe of ``claims_mcp`` does the protocol); the specification
  text (what the SDK encodes is the evidence).
"""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group

MCP_SDK = Group("mcp-sdk")


def _sdk() -> str:
    return f"mcp {version('mcp')}"


def stdio_encodings() -> tuple[str, list[str]]:
    """The SDK's stdio client default encoding, and the encodings its stdio server wraps stdin/stdout with."""
    import mcp.server.stdio as server_stdio  # lazy: the SDK's server stack loads only for these claims
    from mcp.client.stdio import StdioServerParameters  # lazy: as above

    server_src = inspect.getsource(server_stdio.stdio_server)
    return StdioServerParameters(command="server").encoding, sorted(
        set(re.findall(r"encoding=\"([^\"]+)\"", server_src))
    )


@MCP_SDK(
    "utf8-every-transport",
    "Tool Use §3.2",
    "A session is JSON-RPC 2.0 encoded as UTF-8, whatever the transport.",
    answers=("（UTF-8 编码），不分传输方式",),
)
def utf8_every_transport():
    """ "Tool Use" §3.2's "JSON-RPC 2.0, UTF-8, whatever the transport": the SDK's defaults and the bytes its HTTP
    stack writes for a message — no server is started."""
    import mcp.types as mt  # lazy: the SDK loads only for these claims
    from mcp.client.stdio import StdioServerParameters  # lazy: as above
    from sse_starlette.event import ServerSentEvent  # lazy: the SDK's SSE framing (Streamable HTTP streams)
    from starlette.responses import Response  # lazy: the SDK's HTTP responses

    # one message with non-ASCII text, serialised the way the SDK's transports do
    msg = mt.JSONRPCRequest(
        jsonrpc="2.0", id=1, method="tools/call", params={"name": "w", "arguments": {"city": "北京"}}
    )
    text = msg.model_dump_json(by_alias=True, exclude_unset=True)
    utf8, (client_enc, server_enc) = text.encode("utf-8"), stdio_encodings()
    http_body = Response(text, headers={"Content-Type": "application/json"}).body
    sse_bytes = ServerSentEvent(data=text, event="message").encode()
    raw_cjk = "北京" in text  # written as characters, not \u escapes: the encoding decides the bytes
    return (
        f"{_sdk()}: a tools/call message with 北京 serialises to {len(text)} characters "
        f"({'北京 as characters' if raw_cjk else 'non-ASCII escaped'}); stdio client default encoding {client_enc!r} "
        f"(StdioServerParameters.encoding); stdio server wraps stdin/stdout as {server_enc}; Streamable HTTP: a JSON "
        f"response body (starlette Response) is its UTF-8 bytes: {http_body == utf8}; an SSE event carries them: "
        f"{utf8 in sse_bytes}",
        *make_verdict(
            client_enc.lower().replace("_", "-") == "utf-8"
            and server_enc == ["utf-8"]
            and http_body == utf8
            and utf8 in sse_bytes,
            "a transport of the SDK writes another encoding",
            [
                (
                    "encoding" in StdioServerParameters.model_fields,
                    "on stdio the client's encoding is a setting (StdioServerParameters.encoding), UTF-8 by default: "
                    "a client can choose another, so UTF-8 is the SDK's default, not enforced",
                )
            ],
        ),
    )


@MCP_SDK(
    "mcp-governance-not-automatic",
    "§14.5.6",
    "MCP lowers integration cost; it does not by itself solve authentication, least privilege, data residency, rate "
    "limits or confirmation of risky tools.",
    answers=("不自动解决身份认证、最小权限…",),
)
def mcp_governance_not_automatic():
    """§14.5.6's "MCP does not by itself solve authentication, least privilege, ... rate limits": a server built with
    the SDK's defaults, the auth packages it ships and its source."""
    from mcp.server.mcpserver import MCPServer  # lazy: the SDK's server stack loads only for these claims

    root = Path(str(files("mcp")))  # the installed SDK's own folder (its source is what is read)
    auth = sorted(
        {"mcp." + ".".join(p.parent.relative_to(root).parts) for p in root.rglob("*.py") if p.parent.name == "auth"}
    )
    sources = [p.read_text(encoding="utf-8", errors="replace").lower() for p in root.rglob("*.py")]
    rate = sum(bool(re.search(r"rate[ _-]?limit", s)) for s in sources)
    default_auth = MCPServer("probe").settings.auth
    return (
        f"{_sdk()}: a server built with defaults has auth {default_auth!r}; auth packages shipped: "
        f"{', '.join(auth) or 'none'}; files mentioning a rate limit: {rate} of {len(sources)}",
        *make_verdict(
            default_auth is None,
            "a server built with the SDK's defaults already requires authentication",
            [
                (
                    bool(auth),
                    "the SDK does ship OAuth-based authorization for HTTP (the packages above: a server's AuthSettings "
                    "and token verifier, a client's OAuth provider) — opt-in, not automatic; least privilege, data "
                    "residency and confirmation stay the host's job",
                ),
                (rate > 0, f"{rate} SDK files mention a rate limit: whether one is on by default is not checked"),
            ],
        ),
    )


def mcp_sdk_claims() -> list[Claim]:
    return MCP_SDK.run()
