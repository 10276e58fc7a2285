"""What a JSON Schema must be before xgrammar sees it, checked without xgrammar or torch.

What it does
- :class:`SchemaError` (one line, no C++ traceback), ``as_schema`` (JSON text or an object) and
  ``validate_schema`` (the meta-schema, by jsonschema: xgrammar silently ignores some mistakes, e.g.
  ``"maxLength": "x"``). ``toolkit.grammar.compile`` uses and re-exports them; ``toolkit.grammar.precheck`` runs
  them before a command imports xgrammar (seconds: it loads torch), so a malformed schema is refused at once.

What it leaves out
- What xgrammar itself rejects or leaves unenforced (``toolkit.grammar.precheck``, ``toolkit.grammar.compile``).
"""

from __future__ import annotations

import json


class SchemaError(ValueError):
    """A schema (or tool list) xgrammar or jsonschema cannot use. ``str(e)`` is one short line."""


def as_schema(schema) -> dict | bool:
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a JSON Schema must be an object (dict), got {type(schema).__name__}")
    return schema


def validate_schema(schema) -> None:
    import jsonschema  # lazy: about 1 s to import, and a file that is not JSON is refused without it

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise SchemaError(f"invalid JSON Schema at {where}: {e.message[:200]}") from None
