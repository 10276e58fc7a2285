"""What a JSON Schema must be before xgrammar sees it, checked without xgrammar or torch.

What it does
- :class:`SchemaError` (one line, no C++ traceback), ``read_schema_file`` (size, UTF-8, JSON, an object), ``as_schema`` (JSON text or an object) and
  ``validate_schema`` (the meta-schema, by jsonschema: xgrammar silently ignores some mistakes, e.g.
  ``"maxLength": "x"``). ``toolkit.grammar.compile`` uses and re-exports them; ``toolkit.grammar.precheck`` runs
  them before a command imports xgrammar (seconds: it loads torch), so a malformed schema is refused at once.

What it leaves out
- What xgrammar itself rejects or leaves unenforced (``toolkit.grammar.precheck``, ``toolkit.grammar.compile``).
"""

from __future__ import annotations

import json
import os

MAX_SCHEMA_BYTES = 1 << 20


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


def read_schema_file(path: str) -> dict | bool:
    """A schema from a file the user names; every problem is a one-line :class:`SchemaError`."""
    try:
        size = os.stat(path).st_size
        if os.path.isdir(path):
            raise SchemaError(f"{path} is a folder, not a schema file")
        if size > MAX_SCHEMA_BYTES:
            raise SchemaError(f"schema file is {size:,} bytes; the limit is {MAX_SCHEMA_BYTES:,}")
        with open(path, "rb") as f:
            data = f.read(MAX_SCHEMA_BYTES + 1)
    except OSError as e:
        raise SchemaError(f"cannot read schema file {path}: {e.strerror or e}") from None
    if len(data) > MAX_SCHEMA_BYTES:  # a pipe or a special file has no size to stat
        raise SchemaError(f"schema file is over {MAX_SCHEMA_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SchemaError(f"schema file is not UTF-8 text (byte {e.start} of {len(data):,}): is it binary?") from None

    def not_json(constant):
        raise SchemaError(f"schema is not valid JSON: {constant} is not a JSON value")

    try:
        schema = json.loads(text, parse_constant=not_json)
    except json.JSONDecodeError as e:
        raise SchemaError(f"schema is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SchemaError("schema is nested too deeply to read") from None
    if not isinstance(schema, dict):
        raise SchemaError(f"a JSON Schema file must hold an object, got {type(schema).__name__}")
    return schema
