"""The one place that reads a tool's schema and checks arguments against it.

What it does
- ``openai_schema(tool)``: the OpenAI-style ``{"type": "function", "function": {...}}`` schema of any tool-like
  object (``toolkit.tools.Tool``, an MCP tool with ``inputSchema``); ``parameters_of(tool)`` its parameters schema;
  ``function_of(schema)`` the ``function`` part of a schema given OpenAI-style or bare; ``wrap_function(name,
  parameters, description)`` builds one.
- ``check_arguments(tool, args)``: why ``args`` do not fit (jsonschema, and no unknown keys unless the schema
  allows them), or ``None``. The host loop, ``Tool.validate`` and the MCP server all call this one function.

What it leaves out
- Compiling schemas to grammars (``toolkit.grammar.compile``) and generating schemas from Python functions
  (``toolkit.tools.Tool.from_function``).
"""

from __future__ import annotations

from toolkit.errors import bounded_message, describe


def function_of(schema: dict) -> dict:
    """The ``{"name", "description", "parameters"}`` part of a tool schema, OpenAI-style or bare."""
    return schema.get("function", schema)


def wrap_function(name: str, parameters: dict, description: str | None = None) -> dict:
    """An OpenAI-style function schema (``description`` left out when None)."""
    fn: dict = {"name": name}
    if description is not None:
        fn["description"] = description
    fn["parameters"] = parameters
    return {"type": "function", "function": fn}


def parameters_of(tool) -> dict:
    """The parameters schema of a tool-like object (OpenAI ``parameters`` or MCP ``inputSchema``)."""
    schema = getattr(tool, "schema", None) or {}
    fn = function_of(schema)
    return (
        fn.get("parameters")
        or fn.get("inputSchema")
        or schema.get("inputSchema")
        or {"type": "object", "properties": {}}
    )


def openai_schema(tool) -> dict:
    """The schema a chat template renders for a tool-like object (``name``, ``schema``)."""
    schema = getattr(tool, "schema", None) or {}
    if "function" in schema:
        return schema
    return wrap_function(tool.name, parameters_of(tool), schema.get("description", ""))


def check_arguments(tool, args) -> str | None:
    """Why ``args`` do not fit ``tool``'s schema, or None if they do: an object, no unknown keys (unless the schema
    allows them), valid under jsonschema. The reason is bounded (``toolkit.errors``): an over-long value is named
    by its type and length, never echoed whole."""
    import jsonschema  # lazy: its import takes about a second; only validating needs it

    params = parameters_of(tool)
    if not isinstance(args, dict):
        return f"arguments must be a JSON object, got {describe(args)}"
    props = params.get("properties")
    if isinstance(props, dict) and params.get("additionalProperties", False) is False:
        unknown = sorted(set(args) - set(props))
        if unknown:
            names = ", ".join(describe(k, 40) for k in unknown[:5]) + (
                f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
            )
            return bounded_message(f"unexpected argument(s) {names}; allowed: {sorted(props)}")
    try:
        jsonschema.validate(args, params)
    except jsonschema.ValidationError as e:
        where = "/".join(describe(p, 40) if isinstance(p, str) and len(p) > 40 else str(p) for p in e.absolute_path)
        # jsonschema's messages quote the whole offending value ("'xxxx…' is too long"); name it instead
        text = e.message.replace(repr(e.instance), describe(e.instance)) if len(repr(e.instance)) > 80 else e.message
        return bounded_message(f"invalid {where or 'arguments'}: {text}")
    except jsonschema.SchemaError as e:
        return bounded_message(f"the tool's own schema is invalid: {e.message}")
    return None
