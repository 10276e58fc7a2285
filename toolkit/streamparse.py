"""Reading ``<tool_call>`` blocks while they stream: text deltas in, events out (book §14.5.8).

What it does
- :class:`StreamParser` takes the generation's text in chunks of any size (``feed``) and yields events:
  :class:`TextDelta` (free text, thinking included), :class:`CallStarted`, :class:`CallName` (as soon as the name's
  string has closed), :class:`ArgumentsDelta` (the raw text of the ``arguments`` value as it arrives),
  :class:`CallDone` and :class:`CallError` (a malformed block, or a stream cut mid-call at ``finish``).
- The one-shot parser is the reference: each finished block is decoded by ``toolkit.parse.parse_tool_calls`` itself,
  so :func:`assemble` of the events equals ``parse_tool_calls`` of the whole text for every chunking
  (``tests/test_streamparse.py`` checks it with hypothesis). A tag split across chunks is held back, never leaked
  as text; a ``<tool_call>`` inside ``<think>…</think>`` is shown as text, never parsed.
- :func:`stream_events` runs a whole list of chunks through one parser (what the loop and notebook 10 use).

What it leaves out
- Formats other than the hermes/Qwen ``<tool_call>{json}</tool_call>`` one (``toolkit.familystream`` reads the
  other families' calls as they stream, with these same events).
- Validation against the tool's schema (``toolkit.schema`` does that after ``CallDone``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from toolkit.parse import ToolCall, parse_tool_calls

OPEN, CLOSE, THINK, UNTHINK = "<tool_call>", "</tool_call>", "<think>", "</think>"
ARG_KEYS = ("arguments", "parameters")


# ================================================================ events
@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class CallStarted:
    index: int
    id: str


@dataclass(frozen=True)
class CallName:
    index: int
    name: str


@dataclass(frozen=True)
class ArgumentsDelta:
    index: int
    delta: str


@dataclass(frozen=True)
class CallDone:
    call: ToolCall


@dataclass(frozen=True)
class CallError:
    call: ToolCall  # call.error says what went wrong: the model sees it on its next turn


def _held(buf: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of ``buf`` that could still grow into one of ``tags`` (kept back, not emitted)."""
    for n in range(min(len(buf), max(map(len, tags)) - 1), 0, -1):
        if any(t.startswith(buf[-n:]) for t in tags):
            return n
    return 0


class _Json:
    """Scans a call's JSON body as it grows: spots the top-level ``name`` string and the span of the first
    ``arguments`` (or ``parameters``) value. It only reports what it sees; the one-shot parser decides the call."""

    def __init__(self):
        self.pos, self.depth, self.in_str, self.esc, self.str_start = 0, 0, False, False, 0
        self.key, self.after_colon, self.name = None, False, None
        self.arg_key, self.arg_start, self.arg_end, self.arg_sent = None, None, None, 0

    def scan(self, body: str) -> tuple[str | None, str]:
        """Scan ``body`` up to its end; return (a name that just closed or None, new text of the arguments)."""
        new_name = None
        for i in range(self.pos, len(body)):
            ch = body[i]
            if self.in_str:
                if self.esc:
                    self.esc = False
                elif ch == "\\":
                    self.esc = True
                elif ch == '"':
                    self.in_str = False
                    if self.depth == 1:
                        text = _string(body[self.str_start : i + 1])
                        if not self.after_colon:
                            self.key = text
                        elif self.key == "name" and self.name is None and text is not None:
                            self.name = new_name = text
                continue
            if self.arg_key and self.arg_start is None and self.arg_end is None and not ch.isspace():
                self.arg_start = i
            if ch == '"':
                self.in_str, self.str_start = True, i
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                self.depth -= 1
                if self.depth == 0:
                    self._end_args(i)
            elif ch == ":" and self.depth == 1:
                self.after_colon = True
                if self.key in ARG_KEYS and self.arg_key is None:
                    self.arg_key = self.key
            elif ch == "," and self.depth == 1:
                self.after_colon, self.key = False, None
                self._end_args(i)
        self.pos = len(body)
        if self.arg_start is None:
            return new_name, ""
        end = self.arg_end if self.arg_end is not None else len(body)
        delta, self.arg_sent = body[max(self.arg_start, self.arg_sent) : end], max(end, self.arg_sent)
        return new_name, delta

    def _end_args(self, i: int) -> None:
        if self.arg_start is not None and self.arg_end is None:
            self.arg_end = i


def _string(literal: str) -> str | None:
    try:
        value = json.loads(literal)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


# ================================================================ the parser
class StreamParser:
    """Feed text chunks; get events. ``finish()`` at the end of the stream closes what is still open."""

    def __init__(self):
        self.mode, self.buf, self.body, self.index, self.json = "text", "", "", 0, None

    def feed(self, chunk: str) -> list:
        self.buf += chunk
        out: list = []
        while True:
            if self.mode == "text":
                hits = [(self.buf.find(t), t) for t in (THINK, OPEN) if t in self.buf]
                if not hits:
                    keep = _held(self.buf, (THINK, OPEN))
                    self._text(out, self.buf[: len(self.buf) - keep])
                    self.buf = self.buf[len(self.buf) - keep :]
                    return out
                at, tag = min(hits)
                if tag == THINK:
                    self._text(out, self.buf[: at + len(THINK)])
                    self.buf, self.mode = self.buf[at + len(THINK) :], "think"
                else:
                    self._text(out, self.buf[:at])
                    self.buf, self.mode, self.body, self.json = self.buf[at + len(OPEN) :], "call", "", _Json()
                    out.append(CallStarted(self.index, f"call_{self.index + 1}"))
            elif self.mode == "think":
                at = self.buf.find(UNTHINK)
                if at < 0:
                    keep = _held(self.buf, (UNTHINK,))
                    self._text(out, self.buf[: len(self.buf) - keep])
                    self.buf = self.buf[len(self.buf) - keep :]
                    return out
                self._text(out, self.buf[: at + len(UNTHINK)])
                self.buf, self.mode = self.buf[at + len(UNTHINK) :], "text"
            else:
                at = self.buf.find(CLOSE)
                if at < 0:
                    keep = _held(self.buf, (CLOSE,))
                    self._body(out, self.buf[: len(self.buf) - keep])
                    self.buf = self.buf[len(self.buf) - keep :]
                    return out
                self._body(out, self.buf[:at])
                self.buf, self.mode = self.buf[at + len(CLOSE) :], "text"
                self._done(out, OPEN + self.body + CLOSE)

    def finish(self) -> list:
        """End of stream: held-back text goes out; a call still open becomes a ``CallError`` (cut off)."""
        out: list = []
        if self.mode == "call":
            self._body(out, self.buf)
            self._done(out, OPEN + self.body)
        else:
            self._text(out, self.buf)
        self.buf, self.mode = "", "text"
        return out

    def _text(self, out: list, text: str) -> None:
        if text:
            out.append(TextDelta(text))

    def _body(self, out: list, text: str) -> None:
        if not text:
            return
        self.body += text
        name, delta = self.json.scan(self.body)
        if name is not None:
            out.append(CallName(self.index, name))
        if delta:
            out.append(ArgumentsDelta(self.index, delta))

    def _done(self, out: list, block: str) -> None:
        call = parse_tool_calls(block)[1][0]  # the one-shot parser decides what the block is
        call.index, call.id = self.index, f"call_{self.index + 1}"
        out.append(CallDone(call) if call.ok else CallError(call))
        self.index += 1


def stream_events(chunks: Iterable[str]) -> Iterator:
    """Every event of a whole stream of text chunks, ``finish`` included."""
    parser = StreamParser()
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.finish()


def assemble(events: Iterable) -> tuple[str, list[ToolCall]]:
    """Events back to what ``parse_tool_calls`` returns: (free text stripped, calls)."""
    text, calls = [], []
    for e in events:
        if isinstance(e, TextDelta):
            text.append(e.text)
        elif isinstance(e, CallDone | CallError):
            calls.append(e.call)
    return "".join(text).strip(), calls
