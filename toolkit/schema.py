"""The one place that reads a tool's schema and checks arguments against it.

What it does
- ``openai_schema(tool)``: the OpenAI-style ``{"type": "function", "function": {...}}`` schema of any tool-like
  object (``toolkit.tools.Tool``, an MCP tool, a bare dict); ``parameters_of(tool)`` its parameters schema.
- ``check_arguments(tool, args)``: why ``args`` do not fit (jsonschema, and no unknown keys unless the schema
  allows them), or ``None``. The host loop, ``Tool.validate`` and the MCP server all call this one function.

What it leaves out
- Compiling schemas to grammars (``toolkit.grammar.compile``) and generating schemas from Python functions
  (``toolkit.tools.Tool.from_function``).
"""
from __future__ import annotations


def parameters_of(tool) -> dict:
    schema = getattr(tool, "schema", None) or {}
    fn = schema.get("function", schema)
    return fn.get("parameters") or fn.get("inputSchema") or schema.get("inputSchema") or \
        {"type": "object", "properties": {}}


def openai_schema(tool) -> dict:
    schema = getattr(tool, "schema", None) or {}
    if "function" in schema:
        return schema
    return {"type": "function", "function": {"name": tool.name, "description": schema.get("description", ""),
                                             "parameters": parameters_of(tool)}}


def check_arguments(tool, args) -> str | None:
    """Why ``args`` do not fit ``tool``'s schema (jsonschema + no unknown keys), or None if they do."""
    import jsonschema

    params = parameters_of(tool)
    if not isinstance(args, dict):
        return "arguments must be a JSON object"
    props = params.get("properties")
    if isinstance(props, dict) and params.get("additionalProperties", False) is False:
        unknown = sorted(set(args) - set(props))
        if unknown:
            return f"unexpected argument(s) {unknown}; allowed: {sorted(props)}"
    try:
        jsonschema.validate(args, params)
    except jsonschema.ValidationError as e:
        where = "/".join(map(str, e.absolute_path)) or "arguments"
        return f"invalid {where}: {e.message[:200]}"
    except jsonschema.SchemaError as e:
        return f"the tool's own schema is invalid: {e.message[:200]}"
    return None
