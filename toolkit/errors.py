"""``ToolError`` and bounded error messages: what a tool or the host says back when input is bad.

What it does
- ``ToolError``: bad input or a refused operation, with a message meant to be shown to the model;
  ``error_result(kind, message)``: the result a failed call returns to the model.
- ``describe(value)`` names a value safely inside a message (its repr when short, else type, size and start);
  ``bounded_message(text)`` cuts a message to ``MAX_MESSAGE_CHARS`` saying how long it was: no path echoes a huge
  input whole.

What it leaves out
- Implementation errors: they propagate as ordinary exceptions.
"""

from __future__ import annotations

from typing import Any


class ToolError(Exception):
    """Bad input or a refused operation; the message is meant to be shown to the model."""


def error_result(kind: str, message: str) -> dict:
    """What a failed call returns to the model: ``{"error": {"type": kind, "message": message}}`` (the host loop's
    shape, and the training data's, so the model sees the same thing in both)."""
    return {"error": {"type": kind, "message": message}}


# ============================================================== bounded messages
MAX_MESSAGE_CHARS = 300


def describe(value: Any, limit: int = 60) -> str:
    """A short, safe name for a value inside an error: its repr when short, else its type, size and start."""
    if isinstance(value, (str, bytes)):
        text = repr(value)
        if len(text) <= limit:
            return text
        kind = "string" if isinstance(value, str) else "byte string"
        return f"a {kind} of {len(value):,} characters starting {text[: limit // 2]}…"
    if isinstance(value, (list, tuple, dict)):
        text = repr(value)
        if len(text) <= limit:
            return text
        kind, unit = ("an object", "key") if isinstance(value, dict) else ("an array", "item")
        return f"{kind} of {len(value):,} {unit}{'' if len(value) == 1 else 's'} ({len(text):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"a {type(value).__name__} ({len(text):,} characters as text)"


def bounded_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was: no path may echo a huge input whole."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 60]}… [message cut: it was {len(text):,} characters]"
