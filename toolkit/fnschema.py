"""A tool's JSON Schema written from its typed Python signature and Google-style docstring.

What it does
- ``function_schema(fn)`` builds the OpenAI-style function schema with the standard library only (building the
  kit's tools must not import transformers, and through it torch); for the hints the kit uses it equals
  ``transformers.utils.get_json_schema(fn)`` minus its "return" entry (a test checks against the library).

What it leaves out
- Hints beyond scalars, lists, ``Literal``-style "(choices: [...])" docstring notes and optionals.
"""

from __future__ import annotations

import inspect
import json
import re
import types as pytypes
import typing
from collections.abc import Callable
from typing import Any

# ============================================================== schemas from signatures
# The JSON Schema of a tool, written from its signature and Google-style docstring with the standard library only:
# building the kit's tools must not import transformers (and through it torch), which costs seconds. The output
# equals ``transformers.utils.get_json_schema(fn)`` minus its "return" entry for the hints the kit uses; a test
# checks that. Hints it does not know raise TypeError rather than guess.
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


_DOC_SECTION = re.compile(r"^\s*(Args|Arguments|Returns|Raises|Yields|Examples?|Notes?):\s*$", re.M)


_ARG_LINE = re.compile(r"^(\s*)(\w+)(?:\s*\([^()\n]*\))?:\s*(.*)$")


_CHOICES = re.compile(r"\(choices:\s*(.*?)\)\s*$", re.I)


def _hint_schema(hint: Any, where: str) -> dict:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint in (list, tuple):
        return {"type": "array"}
    if hint is dict:
        return {"type": "object"}
    if origin is typing.Literal and args and all(type(a) in _SCALARS for a in args):
        kinds = list(dict.fromkeys(_SCALARS[type(a)] for a in args))
        return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(args)}
    if origin is list:
        return {"type": "array", **({"items": _hint_schema(args[0], where)} if args else {})}
    if origin is dict:
        return {"type": "object", **({"additionalProperties": _hint_schema(args[1], where)} if len(args) == 2 else {})}
    if origin in (typing.Union, pytypes.UnionType):
        parts = [_hint_schema(a, where) for a in args if a is not type(None)]
        if len(parts) == 1:
            out = parts[0]
        elif all(set(p) == {"type"} and isinstance(p["type"], str) for p in parts):
            kinds = sorted({p["type"] for p in parts})
            out = {"type": kinds[0] if len(kinds) == 1 else kinds}
        else:
            out = {"anyOf": parts}
        if type(None) in args:
            out["nullable"] = True
        return out
    raise TypeError(f"{where}: cannot write a JSON Schema for the type hint {hint!r}; write the schema by hand")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {arg: description}) from a Google-style docstring."""
    sections = list(_DOC_SECTION.finditer(doc))
    description = doc[: sections[0].start()].strip() if sections else doc.strip()
    args: dict[str, str] = {}
    for i, m in enumerate(sections):
        if m.group(1) not in ("Args", "Arguments"):
            continue
        body = doc[m.end() : sections[i + 1].start() if i + 1 < len(sections) else len(doc)]
        indent, current = None, None
        for line in body.splitlines():
            if not line.strip():
                continue
            head = _ARG_LINE.match(line)
            if head and (indent is None or len(head.group(1)) <= indent):
                indent, current = len(head.group(1)), head.group(2)
                args[current] = head.group(3).strip()
            elif current is not None:  # a continuation line, indented deeper
                args[current] = f"{args[current]} {line.strip()}".strip()
    return description, args


def function_schema(fn: Callable) -> dict:
    """OpenAI-style ``{"type": "function", "function": {name, description, parameters}}`` for a typed function
    with a Google-style docstring; an argument's ``(choices: [...])`` suffix becomes its ``enum``."""
    name = getattr(fn, "__name__", "operation")
    doc = inspect.getdoc(fn)
    if not doc:
        raise TypeError(f"{name}: a tool needs a docstring (its description)")
    description, arg_docs = _parse_docstring(doc.strip())
    hints = typing.get_type_hints(fn)
    params = [
        p
        for p in inspect.signature(fn).parameters.values()
        if p.name not in ("self", "cls") or p.annotation is not inspect.Parameter.empty
    ]
    props: dict[str, dict] = {}
    for p in params:
        if p.name not in hints:
            raise TypeError(f"{name}: argument {p.name!r} has no type hint")
        if p.name not in arg_docs:
            raise TypeError(f"{name}: the docstring's Args section does not describe {p.name!r}")
        schema = _hint_schema(hints[p.name], f"{name}({p.name})")
        text = arg_docs[p.name]
        choices = _CHOICES.search(text)
        if choices:
            schema["enum"] = [c.strip() if isinstance(c, str) else c for c in json.loads(choices.group(1))]
            text = text[: choices.start()].strip()
        schema["description"] = text
        props[p.name] = schema
    parameters: dict = {"type": "object", "properties": props}
    required = [p.name for p in params if p.default is inspect.Parameter.empty]
    if required:
        parameters["required"] = required
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
