"""Checking a user's JSON Schema before any model loads.

What it does
- ``precheck`` (after ``toolkit.grammar.valid.read_schema_file``: size limit, JSON): the meta-schema, unresolvable ``$ref``s (one line each),
  and the keywords xgrammar does not enforce (``unenforced``: ``not``, ``if/then``, most ``format`` values,
  lookaround patterns, ...) named in one line — an error, or a warning when the caller allows them.

What it leaves out
- Enforcing those keywords: the grammar cannot; ``toolkit.grammar.check`` validates outputs afterwards.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

import referencing.exceptions
from referencing import Registry
from referencing.jsonschema import DRAFT202012, specification_with

from toolkit.grammar.compile import schema_ebnf
from toolkit.grammar.valid import SchemaError, as_schema, validate_schema

# ---------------------------------------------------------------- checking a schema before any model loads
# What xgrammar 0.2.9 leaves unenforced, measured on this version (a grammar built with and without the keyword is
# the same, and an instance the keyword forbids is accepted) and read from its own warnings. A sampled output can
# break these; ``precheck`` names them before a model is loaded.
UNENFORCED_KEYWORDS = {
    "not": "ignored",
    "if": "ignored",
    "then": "ignored",
    "else": "ignored",
    "dependentRequired": "ignored",
    "dependentSchemas": "ignored",
    "dependencies": "ignored",
    "unevaluatedProperties": "ignored",
    "unevaluatedItems": "ignored",
    "contains": "ignored",
    "minContains": "ignored",
    "maxContains": "ignored",
    "$dynamicRef": "not followed",
    "$dynamicAnchor": "not followed",
    "$recursiveRef": "not followed",
}


ENFORCED_FORMATS = {
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
}


_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


_SUBSCHEMA_ONE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)


_LOOKAROUND = re.compile(r"\(\?(?:=|!|<=|<!)")


def _subschemas(node: dict, path: str):
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield sub, f"{path}/{key}/{name}"
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield sub, f"{path}/{key}/{i}"
    for key in _SUBSCHEMA_ONE:
        if key in node:
            yield node[key], f"{path}/{key}"


def _walk(schema):
    """Every (subschema, JSON-pointer path) of ``schema``, iteratively (no recursion limit to hit)."""
    stack = [(schema, "#")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            yield node, path
            stack.extend(reversed(list(_subschemas(node, path))))


def unenforced(schema) -> list[str]:
    """Where ``schema`` uses what xgrammar 0.2.9 does not enforce: ``["#/properties/a: not (ignored)", ...]``."""
    found = []
    for node, path in _walk(schema):
        for key, why in UNENFORCED_KEYWORDS.items():
            if key in node:
                found.append(f"{path}: {key} ({why})")
        if node.get("uniqueItems") is True:
            found.append(f"{path}: uniqueItems (ignored)")
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in ENFORCED_FORMATS:
            found.append(f"{path}: format {fmt!r} (not checked)")
        pattern = node.get("pattern")
        if isinstance(pattern, str) and _LOOKAROUND.search(pattern):
            found.append(f"{path}: pattern lookaround (ignored)")
        ref = node.get("$ref")
        if isinstance(ref, str) and not (ref == "#" or ref.startswith("#/")):
            found.append(f"{path}: $ref {ref[:60]!r} (only '#/...' pointers are followed)")
        elif isinstance(ref, str) and len(node) > 1 and set(node) - {"$ref", "description", "title", "$comment"}:
            found.append(f"{path}: keywords beside $ref (ignored)")
    return found


def check_refs(schema) -> None:
    """Raise :class:`SchemaError` (one line) for the first ``$ref`` / ``$dynamicRef`` that cannot be resolved."""
    dialect = schema.get("$schema") if isinstance(schema.get("$schema"), str) else ""
    resource = specification_with(dialect, default=DRAFT202012).create_resource(schema)
    base = resource.id() or "urn:toolkit:schema"
    resolver = Registry().with_resource(base, resource).resolver(base)  # no retrieval: remote refs fail
    for node, path in _walk(schema):
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            ref = node.get(key)
            if ref is None:
                continue
            if not isinstance(ref, str):
                raise SchemaError(f"{key} at {path} must be a string, not {type(ref).__name__}")
            try:
                resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                raise SchemaError(f"unresolvable {key} {ref[:80]!r} at {path}") from None
            except Exception as e:  # a malformed pointer, say
                raise SchemaError(f"unresolvable {key} {ref[:80]!r} at {path}: {type(e).__name__}") from None


def _xgrammar_warnings(schema) -> list[str]:
    """Convert with xgrammar and return the warnings it prints (from C++, to file descriptor 2) on the way."""

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            schema_ebnf(schema, False)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read(1 << 16).decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        if "Warning:" in line:
            msg = line.split("Warning:", 1)[1].strip()
            if msg not in out:
                out.append(msg[:160])
    return out


def precheck(schema, allow_unenforced: bool = False) -> list[str]:
    """Check a schema the way ``compile_schema`` will, without a tokenizer or a model: JSON Schema validity,
    resolvable references, what xgrammar would reject, and what it would leave unenforced.

    Raises :class:`SchemaError` (one line). Unenforced parts raise too unless ``allow_unenforced``; then they
    are returned as warnings."""
    try:
        schema = as_schema(schema)
        if isinstance(schema, bool):
            return []
        validate_schema(schema)
        check_refs(schema)
        found = unenforced(schema)
        if found and not allow_unenforced:  # say so now, before importing xgrammar (seconds: it loads torch)
            raise SchemaError(_unenforced_line(found))
        covered = (
            "Lookahead" if any("lookaround" in f for f in found) else "\0",
            "URI should" if any("$ref" in f for f in found) else "\0",
        )
        found += [f"xgrammar: {w}" for w in _xgrammar_warnings(schema) if not w.startswith(covered)]
    except RecursionError:
        raise SchemaError("schema is nested too deeply") from None
    if found and not allow_unenforced:
        raise SchemaError(_unenforced_line(found))
    return found


def _unenforced_line(found: list[str]) -> str:
    shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
    return f"xgrammar does not enforce: {shown} (--allow-unenforced samples anyway)"
