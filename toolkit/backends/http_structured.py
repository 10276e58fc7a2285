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
- ``refused(error)`` says whether a ``ServerError`` is the server rejecting the parameter (HTTP 400/422).

What it leaves out
- Sending the parameter (``toolkit.backends.http_tokens``), and checking that a server obeyed it: the backend replays
  every returned token through the kit's own matcher, so a server that ignores the parameter is caught there.
- vLLM / SGLang run on CUDA only: these field names follow their documentation and code, not a run here.
"""

from __future__ import annotations

import json

SERVERS_WITH_GRAMMAR = ("vllm", "sglang")


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
