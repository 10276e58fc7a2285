"""An OpenAI-compatible server (vLLM, SGLang, ``transformers serve``) as the kit sees it: URL, probe, errors (§14.5.8).

What it does
- ``check_url(url)`` validates a base URL (``http://host:port/v1``) without touching the network; ``from_env()``
  reads ``TOOLKIT_BACKEND``; ``probe(url)`` asks ``GET /models`` (short timeout) and returns a :class:`ServerInfo`
  naming the served model and the server kind (transformers | vllm | sglang | openai-compatible).
- Every failure is a :class:`ServerError` with a ``kind`` and a one-line message naming the URL and the request:
  server down, wrong URL, no model loaded, timeout, HTTP 4xx/5xx, a malformed answer. Every request has a timeout
  (the official ``openai`` client, ``max_retries=0``: nothing retries silently).
- :class:`ServedGeneration` is the ``Generation`` a served turn returns, with a ``server`` dict (URL, model, mode,
  usage, the kit's count checks, wall-clock timestamps). The two backends: ``toolkit.backends.http_tokens``
  (the kit renders, ``/v1/completions``) and ``toolkit.backends.http_chat`` (the server renders and parses).

What it leaves out
- Authentication beyond ``OPENAI_API_KEY``; retries; server-side structured output (see ``http_tokens``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from toolkit.backends.base import Generation
from toolkit.qwen import ENDOFTEXT_ID, IM_END_ID, VOCAB_WIDTH
from toolkit.untrusted import redact

ENV = "TOOLKIT_BACKEND"
MODES = ("tokens", "chat")
CONNECT_TIMEOUT_S = 3.0
DEFAULT_TIMEOUT_S = 300.0  # one request's read timeout: a CPU server decodes a few tokens per second
PROBE_TIMEOUT_S = 5.0
MAX_ROUNDS = 6  # requests per turn when the host enforces a grammar by jump-forward
PAD_ID = ENDOFTEXT_ID


class ServerError(Exception):
    """A server problem as one line: ``kind`` is unreachable | timeout | http_<code> | wrong_url | no_model |
    malformed_response | no_structured_output | bad_url."""

    def __init__(self, kind: str, message: str):
        super().__init__(redact(message))  # a password in TOOLKIT_BACKEND's URL is never echoed
        self.kind = kind

    def to_json(self) -> dict:
        return {"error": {"type": self.kind, "message": str(self)}}


# ================================================================ URL and probe
def check_url(url: str) -> str:
    """The base URL without a trailing slash, or ``ValueError`` (one line). No network."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("the server URL is empty; expected e.g. http://127.0.0.1:8000/v1")
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"server URL {redact(url)!r} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"server URL {redact(url)!r} must look like http://HOST:PORT/v1")
    if parts.query or parts.fragment:
        raise ValueError(f"server URL {redact(url)!r} must not carry a query or fragment")
    if not parts.path.endswith("/v1"):
        raise ValueError(
            f"server URL {redact(url)!r} must end in /v1 (the OpenAI-compatible API's base), "
            f"e.g. {redact(parts.scheme + '://' + parts.netloc)}/v1"
        )
    if port is not None and not 0 < port < 65536:
        raise ValueError(f"server URL {redact(url)!r}: port {port} out of range")
    return url


def from_env() -> str | None:
    """The validated URL in ``TOOLKIT_BACKEND`` (None when unset or empty); ``ValueError`` when malformed."""
    value = os.environ.get(ENV, "").strip()
    return check_url(value) if value else None


@dataclass
class ServerInfo:
    url: str
    model: str
    kind: str  # transformers | vllm | sglang | openai-compatible
    models: list[str] = field(default_factory=list)
    context_length: int | None = None  # the served model's max_model_len, where the server lists it (vLLM does)

    @property
    def description(self) -> str:
        return f"{self.model} served by {self.kind} at {redact(self.url)}"


def openai_client(url: str, timeout_s: float):
    """The official ``openai`` client for ``url``: one read timeout, a short connect timeout, no retries."""
    import openai  # lazy: only when a server is used

    timeout = openai.Timeout(timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))
    return openai.OpenAI(base_url=url, api_key=os.environ.get("OPENAI_API_KEY", "none"), timeout=timeout, max_retries=0)


def _detail(e) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        body = body.get("detail") or body.get("message") or body.get("error") or body
    text = body if isinstance(body, str) else json.dumps(body, default=str) if body is not None else str(e)
    return " ".join(str(text).split())[:300]


def call_server(url: str, what: str, fn, timeout_s: float):
    """Run one request; every failure becomes a :class:`ServerError` naming the URL and the request."""
    import openai  # lazy: only when a server is used

    try:
        return fn()
    except openai.APITimeoutError:
        raise ServerError("timeout", f"{what} at {url}: no answer within {timeout_s:g} s") from None
    except openai.APIConnectionError as e:
        cause = e.__cause__ or e
        raise ServerError(
            "unreachable",
            f"{what} at {url}: cannot connect ({type(cause).__name__}: {str(cause)[:120]}); is the server running? "
            "(e.g. `transformers serve MODEL --host 127.0.0.1 --port 8000`)",
        ) from None
    except openai.APIStatusError as e:
        code = e.status_code
        hint = " (wrong URL? the base URL ends in /v1)" if code == 404 else ""
        raise ServerError(f"http_{code}", f"{what} at {url}: HTTP {code}: {_detail(e)}{hint}") from None
    except openai.APIError as e:  # an error event inside a stream (vLLM's engine died mid-turn)
        raise ServerError(
            "server_error", f"{what} at {url}: the server failed: {' '.join(str(e).split())[:200]}"
        ) from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ServerError(
            "malformed_response", f"{what} at {url}: malformed answer ({type(e).__name__}: {e})"
        ) from None


def probe(url: str, timeout_s: float = PROBE_TIMEOUT_S, model: str | None = None) -> ServerInfo:
    """``GET /models``: which model the server serves. ``model`` picks one when it lists several."""
    url = check_url(url)
    client = openai_client(url, timeout_s)
    page = call_server(url, "GET /models", lambda: client.models.list(), timeout_s)
    try:
        entries = [m.model_dump() for m in page.data]
    except (AttributeError, TypeError) as e:
        raise ServerError("malformed_response", f"GET /models at {url}: not a model list ({e})") from None
    ids = [str(m.get("id")) for m in entries if m.get("id")]
    if model is not None:
        if model not in ids:
            raise ServerError("no_model", f"{url} does not serve {model!r}; it lists {ids or 'no model'}")
        chosen = model
    else:
        loaded = [str(m["id"]) for m in entries if (m.get("status") or {}).get("value") == "loaded"]
        if not (loaded or ids):
            raise ServerError("no_model", f"{url} lists no model: start the server with one (transformers serve MODEL)")
        chosen = (loaded or ids)[0]
    owners = {str(m.get("owned_by", "")).lower() for m in entries}
    kind = (
        "vllm"
        if "vllm" in owners
        else "sglang"
        if "sglang" in owners
        else "transformers"
        if any("status" in m for m in entries)
        else "openai-compatible"
    )
    card = next((m for m in entries if str(m.get("id")) == chosen), {})
    ctx = card.get("max_model_len")
    return ServerInfo(url, chosen, kind, ids, ctx if isinstance(ctx, int) and not isinstance(ctx, bool) else None)


# ================================================================ what a served turn returns
@dataclass
class ServedGeneration(Generation):
    """A ``Generation`` plus what the server said: URL, model, mode, endpoint, usage, the count checks, timestamps
    (``t_sent``/``t_done``: wall clock, seconds), and in chat mode the server's parsed calls."""

    server: dict = field(default_factory=dict)


def extra_field(obj, name: str):
    """A field the OpenAI client's models do not declare (vLLM's ``token_ids``, ``prompt_logprobs``), or None."""
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def usage_of(resp) -> dict:
    u = getattr(resp, "usage", None)
    if u is None:
        return {}
    d = u.model_dump() if hasattr(u, "model_dump") else dict(u)
    details = d.get("prompt_tokens_details") or {}
    return {
        "prompt_tokens": d.get("prompt_tokens"),
        "completion_tokens": d.get("completion_tokens"),
        "cached_tokens": details.get("cached_tokens") if isinstance(details, dict) else None,
    }


class ServedBackend:
    """What both modes share: the client, the model, the stop-id request fields, timing."""

    mode = ""

    def __init__(
        self,
        url: str,
        tokenizer,
        *,
        model: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        stream: bool = False,
        info: ServerInfo | None = None,
    ):
        self.info = info or probe(url, model=model)
        self.url, self.model, self.tokenizer = self.info.url, self.info.model, tokenizer
        self.timeout_s, self.stream = float(timeout_s), bool(stream)
        self.vocab_width = VOCAB_WIDTH
        self.context_length = self.info.context_length  # None where the server does not say
        self.client = openai_client(self.url, self.timeout_s)
        self.notes: list[str] = []
        self.turns: list[dict] = []  # the ``server`` dict of every request, in order

    @property
    def name(self) -> str:
        return f"{self.info.description} ({self.mode} mode)"

    def reset(self) -> None:  # the server keeps no conversation state between requests
        pass

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def _sampling(self, max_new_tokens, stop_ids, temperature, top_p, seed) -> tuple[dict, dict]:
        """(OpenAI fields, extra fields) for one request. The stop ids travel as the server understands them."""
        kw = dict(model=self.model, max_tokens=int(max_new_tokens), temperature=float(temperature), seed=int(seed))
        if temperature > 0 and top_p < 1.0:
            kw["top_p"] = float(top_p)
        extra: dict = {}
        stops = sorted(int(i) for i in stop_ids)
        if self.info.kind == "transformers":  # its only way to set stop ids: a whole GenerationConfig as JSON
            gc = dict(eos_token_id=stops or [IM_END_ID], pad_token_id=PAD_ID, max_new_tokens=int(max_new_tokens))
            gc.update(do_sample=temperature > 0, **({"temperature": float(temperature)} if temperature > 0 else {}))
            extra["generation_config"] = json.dumps(gc)
        elif self.info.kind in ("vllm", "sglang") and stops:
            extra["stop_token_ids"] = stops
        if self.info.kind == "vllm":
            extra["return_token_ids"] = True  # the generated ids themselves: nothing is re-tokenized on the kit's side
        if self.stream and self.info.kind != "transformers":
            kw["stream_options"] = {"include_usage": True}  # the OpenAI way to get usage (cached tokens) when streaming
        return kw, extra
