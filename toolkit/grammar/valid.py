"""What a JSON Schema must be before xgrammar sees it, checked without xgrammar or torch.

What it does
- :class:`SchemaError` (one line, no C++ traceback), ``read_schema_file`` (``toolkit.untrusted``'s bounded read, then an object), ``as_schema`` (JSON text or an object, nesting bounded), ``min_tokens`` (a floor on any
  value's tokens: ``minItems`` 10^6 cannot fit a budget of 64) and
  ``validate_schema`` (the meta-schema, by jsonschema: xgrammar silently ignores some mistakes, e.g.
  ``"maxLength": "x"``). ``toolkit.grammar.compile`` uses and re-exports them; ``toolkit.grammar.precheck`` runs
  them before a command imports xgrammar (seconds: it loads torch), so a malformed schema is refused at once.

What it leaves out
- What xgrammar itself rejects or leaves unenforced (``toolkit.grammar.precheck``, ``toolkit.grammar.compile``).
"""

from __future__ import annotations

from toolkit.untrusted import MAX_DEPTH, UntrustedInputError, depth, parse_json, read_json_file

MAX_SCHEMA_BYTES = 1 << 20


class SchemaError(ValueError):
    """A schema (or tool list) xgrammar or jsonschema cannot use. ``str(e)`` is one short line."""


def as_schema(schema) -> dict | bool:
    if isinstance(schema, (str, bytes)):
        try:
            schema = parse_json(schema, "schema", MAX_SCHEMA_BYTES)
        except UntrustedInputError as e:
            raise SchemaError(str(e)) from None
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a JSON Schema must be an object (dict), got {type(schema).__name__}")
    if depth(schema) > MAX_DEPTH:  # an object built in Python skips parse_json's bound; jsonschema recurses per level
        raise SchemaError(f"schema nested {depth(schema)} levels deep (the limit is {MAX_DEPTH})")
    return schema


MAX_TOKEN_CHARS = 256  # no token of a byte-level BPE vocabulary the kit loads is longer (Qwen's longest: 256 spaces)


def min_tokens(schema) -> int:
    """A floor on the tokens any value of ``schema`` takes: the largest ``minItems`` or ``minProperties`` (each item
    is at least one token) or ``minLength`` / :data:`MAX_TOKEN_CHARS` anywhere in it. A schema whose floor is over
    the decoding budget can never be satisfied: ``constrain`` refuses it before a model loads."""
    floor, stack = 0, [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, per in (("minItems", 1), ("minProperties", 1), ("minLength", MAX_TOKEN_CHARS)):
            n = node.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                floor = max(floor, -(-n // per))
        stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
    return floor


def validate_schema(schema) -> None:
    import jsonschema  # lazy: about 1 s to import, and a file that is not JSON is refused without it

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise SchemaError(f"invalid JSON Schema at {where}: {e.message[:200]}") from None
    except RecursionError:
        raise SchemaError("schema nested too deeply for the meta-schema check") from None


def read_schema_file(path: str) -> dict | bool:
    """A schema from a file the user names, read by ``toolkit.untrusted`` (a regular file, size, UTF-8, JSON with
    bounded nesting, integers and no non-finite number); every problem is a one-line :class:`SchemaError`."""
    try:
        schema = read_json_file(path, "schema file", MAX_SCHEMA_BYTES)
    except UntrustedInputError as e:
        raise SchemaError(str(e)) from None
    if not isinstance(schema, dict):
        raise SchemaError(f"a JSON Schema file must hold an object, got {type(schema).__name__}")
    return schema
