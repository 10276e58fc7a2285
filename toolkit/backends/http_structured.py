"""Server-side constrained decoding: the structured-output parameter each OpenAI-compatible server takes (§14.5.2).

What it does
- ``fields(kind, grammar)`` is the request body's extra fields that send a kit grammar (``toolkit.grammar.compile.
  Grammar``, read by attribute) to a server of that ``kind``, or None when the server has no such parameter:
  - vLLM (>= 0.12; the older top-level ``guided_json`` / ``guided_grammar`` were removed there):
    ``structured_outputs`` = ``{"json": schema}`` for a JSON-Schema grammar, ``{"structural_tag": ...}`` for the
    kit's tool-call tag (xgrammar's structural-tag JSON, vLLM's default backend being xgrammar), else
    ``{"grammar": EBNF}`` (the EBNF xgrammar printed for the kit's grammar);
  - SGLang: ``json_schema`` (a JSON string), ``structural_tag``, or ``ebnf``;
  - ``transformers serve`` 5.24 and unknown servers: None. Measured here: its ``/v1/completions`` refuses any such
    field with HTTP 422 ("Unexpected fields in the request: {'response_format'}", the same for
    ``structured_outputs``), and its ``/v1/chat/completions`` accepts ``response_format`` and ignores it (the server
    logs "Ignoring unsupported fields"; the answer is free text).
- ``legacy_fields(grammar)``: vLLM's removed ``guided_json`` / ``guided_grammar`` spelling, which vLLM 0.32 accepts
  with HTTP 200 and ignores (measured here): sent only on request (``TokensBackend(structured="legacy")``), to show
  why a server's obedience is replayed, never trusted.
- ``refused(error)`` says whether a ``ServerError`` is the server rejecting the parameter (HTTP 400/422).

What it leaves out
- Sending the parameter (``toolkit.backends.http_tokens``), and checking that a server obeyed it: the backend replays
  every returned token through the kit's own matcher, so a server that ignores the parameter is caught there.
- SGLang (CUDA only): its field names follow its documentation and code, not a run here. vLLM's were run here
  (its CPU build, ``tests/test_backends_vllm.py``).
"""

from __future__ import annotations

import json

SERVERS_WITH_GRAMMAR = ("vllm", "sglang")


def legacy_fields(grammar) -> dict | None:
    """vLLM's old top-level spelling (``guided_json`` / ``guided_grammar``, removed in 0.12). Measured here with
    vLLM 0.32 on CPU: HTTP 200 and the field silently ignored — the kit's replay is what notices. For teaching."""
    if grammar is None:
        return None
    if getattr(grammar, "kind", "") == "schema" and isinstance(getattr(grammar, "schema", None), dict):
        return {"guided_json": grammar.schema}
    text = str(getattr(grammar, "text", "") or "")
    return {"guided_grammar": text} if text else None


def fields(kind: str, grammar) -> dict | None:
    """Extra request fields that carry ``grammar`` to a server of ``kind`` (see the module docstring)."""
    if kind not in SERVERS_WITH_GRAMMAR or grammar is None:
        return None
    gkind = getattr(grammar, "kind", "")
    source = getattr(grammar, "source", None)
    if gkind == "schema" and isinstance(getattr(grammar, "schema", None), dict):
        schema = grammar.schema
        return {"structured_outputs": {"json": schema}} if kind == "vllm" else {"json_schema": json.dumps(schema)}
    if gkind == "tag" and source is not None:
        tag = json.dumps(source)
        return {"structured_outputs": {"structural_tag": tag}} if kind == "vllm" else {"structural_tag": tag}
    text = str(getattr(grammar, "text", "") or "")
    if not text:
        return None
    return {"structured_outputs": {"grammar": text}} if kind == "vllm" else {"ebnf": text}


def refused(error) -> bool:
    """True when ``error`` (a ``ServerError``) is the server rejecting a request field: HTTP 400 or 422."""
    return getattr(error, "kind", "") in ("http_400", "http_422")
