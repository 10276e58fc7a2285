"""The one tool-call parser: a generation's text in, its free text and ``<tool_call>`` blocks out.

What it does (book §14.5.2 step 4)
- ``parse_tool_calls(text)`` never raises: each block's JSON must be ``{"name": str, "arguments": object}``;
  anything else (malformed JSON, an unclosed tag, a missing name, arguments that are not an object, a block over
  ``MAX_CALL_CHARS``) becomes a :class:`ToolCall` with an ``error`` the model is shown on its next turn.
- Text inside ``<think>…</think>`` (or an unclosed ``<think>`` to the end) stays free text: a ``<tool_call>`` the
  model writes while thinking is shown, never run (the streaming parser, ``toolkit.streamparse``, agrees).
- ``wrote_tag(text)``: whether the text opens a ``<tool_call>`` block at all (the "tag rate" of a model's answers:
  does it write the template's format, right or wrong).

What it leaves out
- Calls written without the tags (fenced or bare JSON): a real host recognises only the template's format; that
  is what constrained decoding is for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


# ================================================================ parsing
@dataclass
class ToolCall:
    index: int
    raw: str  # the text between the tags
    name: str | None = None
    arguments: dict | None = None
    error: dict | None = None  # {"type": "malformed_json"|"unclosed_tag"|"bad_call", "message": ...}
    id: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


TAG = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)
_THINK_OR_TAG = re.compile(r"(<think>.*?(?:</think>|$))|<tool_call>(.*?)(</tool_call>|$)", re.S)


MAX_CALL_CHARS = 20_000


def _as_arguments(value):
    if isinstance(value, str):  # some models JSON-encode the arguments a second time
        value = json.loads(value)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(f"'arguments' must be a JSON object, got {type(value).__name__}")
    return value


def wrote_tag(text: str | None) -> bool:
    """True when ``text`` contains the ``<tool_call>`` opening tag (what a host's parser looks for first)."""
    return "<tool_call>" in (text or "")


def blocks(text: str) -> list[str]:
    """The text inside each closed ``<tool_call>…</tool_call>`` block, stripped (what a schema check validates)."""
    return [m.group(1).strip() for m in TAG.finditer(text) if m.group(2)]


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """Split a generation into its free text and its ``<tool_call>`` blocks. Never raises on any input string.

    Each block's JSON must be ``{"name": str, "arguments": object}``; anything else becomes a call with an
    ``error`` the model is shown, so it can fix itself.
    """
    if not isinstance(text, str):
        return "", [ToolCall(0, repr(text)[:200], error={"type": "bad_call", "message": "output is not text"})]
    calls, content, pos = [], [], 0
    for m in _THINK_OR_TAG.finditer(text):
        if m.group(1) is not None:  # thinking: kept as text, never parsed
            continue
        content.append(text[pos : m.start()])
        pos = m.end()
        raw, i = m.group(2), len(calls)
        call = ToolCall(i, raw, id=f"call_{i + 1}")
        calls.append(call)
        if not m.group(3):
            call.error = {
                "type": "unclosed_tag",
                "message": "<tool_call> was opened but never closed with </tool_call> (output cut off?)",
            }
            continue
        if len(raw) > MAX_CALL_CHARS:
            call.error = {"type": "bad_call", "message": f"tool call longer than {MAX_CALL_CHARS} characters"}
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as e:  # RecursionError: JSON nested thousands deep
            call.error = {"type": "malformed_json", "message": f"tool call is not valid JSON: {str(e)[:160]}"}
            continue
        try:
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
            if not isinstance(obj.get("name"), str) or not obj["name"]:
                raise ValueError("the call needs a string 'name'")
            call.name, call.arguments = obj["name"], _as_arguments(obj.get("arguments", obj.get("parameters")))
        except (ValueError, RecursionError) as e:
            call.name = obj.get("name") if isinstance(obj, dict) and isinstance(obj.get("name"), str) else None
            call.error = {"type": "bad_call", "message": str(e)[:200]}
    content.append(text[pos:])
    return "".join(content).strip(), calls
