"""Prompts for schema-following, and checking an output against its schema.

What it does
- ``chat_prompt`` renders a one-turn chat with the tokenizer's own template; ``check`` parses an output (bare JSON,
  or every ``<tool_call>`` block) and validates it with jsonschema; ``check_output`` does so for a grammar's schema.

What it leaves out
- Repairing outputs: an invalid output is reported, not fixed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import jsonschema

from toolkit.grammar.compile import Grammar
from toolkit.parse import blocks
from toolkit.render import render


# ---------------------------------------------------------------- prompts and checking outputs
def chat_prompt(tokenizer, user: str, tools=None, system: str | None = None) -> list[int]:
    """Token ids of a one-turn chat rendered with the tokenizer's own template, ending in the generation prompt."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return list(render(messages, tools=tools, template="native", tokenizer=tokenizer).ids)


@dataclass
class Check:
    """Did an output parse, and does it validate? ``values``: the parsed JSON (one per call for tool tags)."""

    parses: bool
    valid: bool
    values: list = field(default_factory=list)
    error: str = ""


def check(text: str, schema: dict, tool_tags: bool = False) -> Check:
    """Parse ``text`` (bare JSON, or every ``<tool_call>`` block if ``tool_tags``) and validate with jsonschema."""
    pieces = blocks(text) if tool_tags else [text.strip()]
    if not pieces:
        return Check(False, False, [], "no <tool_call>…</tool_call> block")
    values = []
    for piece in pieces:
        try:
            values.append(json.loads(piece))
        except json.JSONDecodeError as e:
            return Check(False, False, values, f"not JSON: {e.msg} at column {e.colno}")
    for v in values:
        err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(v))
        if err is not None:
            return Check(True, False, values, f"schema: {err.message[:160]}")
    return Check(True, True, values)


def check_output(text: str, grammar: Grammar) -> Check:
    return check(text, grammar.schema, tool_tags=grammar.kind == "tag")
