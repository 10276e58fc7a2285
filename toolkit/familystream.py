"""Each family's calls read while they stream: text chunks in, the same events as ``toolkit.streamparse`` out.

What it does
- :class:`FamilyStreamParser` (``family`` as in ``toolkit.families``) takes a generation in chunks of any size and
  yields ``streamparse``'s events: :class:`TextDelta`, :class:`CallStarted` as soon as the family's call opens,
  :class:`CallName` as soon as the name is readable (Mistral ``name[ARGS]``, Llama 3.2 ``[name(``, harmony's
  ``to=functions.NAME`` header, Llama 3.1's ``"name": "…"``), then :class:`CallDone` / :class:`CallError`.
- The one-shot readers decide: Mistral's and Llama's call regions are read by ``toolkit.readers.read_calls`` when
  the stream ends; harmony's messages are read one by one as each closes (``<|call|>``, ``<|end|>``, ``<|return|>``
  or the next ``<|start|>``), so a call is done the moment ``<|call|>`` arrives. ``assemble`` of the events equals
  ``read_calls`` of the whole text for every chunking (``tests/test_familystream.py`` checks it with hypothesis).
  A marker split across chunks is held back, never shown as text. Qwen families use ``streamparse`` itself.

What it leaves out
- Argument deltas for these families (``ArgumentsDelta`` is Qwen's): their arguments arrive whole at ``CallDone``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from toolkit.readers import harmony_messages, kind_of, read_calls
from toolkit.streamparse import CallDone, CallError, CallName, CallStarted, StreamParser, TextDelta

STOPS = {"mistral": ("</s>",), "llama3.1": ("<|eom_id|>", "<|eot_id|>"), "llama3.2": ("<|eom_id|>", "<|eot_id|>")}
OPENS = {
    "mistral": ("[TOOL_CALLS]",),
    "llama3.1": ("<|python_tag|>", "{", "<function="),
    "llama3.2": ("<|python_tag|>", "["),
}
NAMES = {
    "mistral": re.compile(r'\[TOOL_CALLS\][\s▁]*(?:\[?[\s▁]*\{[\s▁]*"name":[\s▁]*"([^"]+)"|([A-Za-z0-9_.\-]+)\[)'),
    "llama3.1": re.compile(r"^\s*(?:<\|python_tag\|>)?\s*(?:\{.*?\"name\":\s*\"([^\"]+)\"|<function=([^>]+)>)", re.S),
    "llama3.2": re.compile(r"^\s*(?:<\|python_tag\|>)?\s*\[\s*([A-Za-z_]\w*)\s*\("),
}
HARMONY_ENDS = ("<|call|>", "<|end|>", "<|return|>")


def _held(buf: str, tags: tuple[str, ...]) -> int:
    """Length of the longest end of ``buf`` that could still grow into one of ``tags``."""
    for n in range(min(len(buf), max(map(len, tags)) - 1), 0, -1):
        if any(t.startswith(buf[-n:]) for t in tags):
            return n
    return 0


class FamilyStreamParser:
    """Feed text chunks of one family's generation; get events. ``finish()`` closes the stream."""

    def __init__(self, family: str = "mistral"):
        self.family, self.kind = family, kind_of(family)
        self.qwen = StreamParser() if self.kind == "qwen" else None
        self.buf, self.all, self.mode, self.index, self.named = "", "", "text", 0, False

    def feed(self, chunk: str) -> list:
        if self.qwen is not None:
            return self.qwen.feed(chunk)
        self.buf += chunk
        self.all += chunk
        out: list = []
        if self.kind == "gpt-oss":
            self._harmony(out, final=False)
        elif self.mode == "text":
            self._text(out)
        elif self.mode == "prose":
            self._prose(out)
        if self.mode == "call":
            self._name(out)
        return out

    def finish(self) -> list:
        if self.qwen is not None:
            return self.qwen.finish()
        out: list = []
        if self.kind == "gpt-oss":
            self._harmony(out, final=True)
        elif self.mode in ("text", "prose"):
            self._emit(out, self.buf)
        elif self.mode == "call":
            text, calls = read_calls(self.all, self.family)
            if self.kind != "mistral" and text:  # a Llama output that opened like a call but was none
                out.append(TextDelta(text))
            self._calls(out, calls)
        self.buf, self.mode = "", "done"
        return out

    # ------------------------------------------------------------ Mistral and Llama: text until the call opens
    def _text(self, out: list) -> None:
        stops, opens = STOPS[self.kind], OPENS[self.kind]
        if self.kind == "mistral":
            hits = [(self.buf.find(t), t) for t in stops + opens if t in self.buf]
            if not hits:
                keep = _held(self.buf, stops + opens)
                self._emit(out, self.buf[: len(self.buf) - keep])
                self.buf = self.buf[len(self.buf) - keep :]
                return
            at, tag = min(hits)
            self._emit(out, self.buf[:at])
            if tag in stops:
                self.buf, self.mode = "", "done"
            else:
                self.buf, self.mode = "", "call"
                out.append(CallStarted(0, "call_1"))
            return
        # Llama: the first non-space characters decide (as the one-shot reader does on the whole output)
        lead = self.buf.lstrip()
        if not lead or any(o.startswith(lead) and o != lead for o in opens + stops):
            return  # not decidable yet
        if lead.startswith(opens):
            self.mode = "call"
            out.append(CallStarted(0, "call_1"))
            return
        self.mode = "prose"
        self._prose(out)

    def _prose(self, out: list) -> None:
        stops = STOPS[self.kind]
        hits = [self.buf.find(t) for t in stops if t in self.buf]
        if hits:
            self._emit(out, self.buf[: min(hits)])
            self.buf, self.mode = "", "done"
            return
        keep = _held(self.buf, stops)
        self._emit(out, self.buf[: len(self.buf) - keep])
        self.buf = self.buf[len(self.buf) - keep :]

    def _name(self, out: list) -> None:
        if self.named:
            return
        m = NAMES[self.kind].search(self.all)
        if m:
            self.named = True
            out.append(CallName(0, next(g for g in m.groups() if g)))

    # ------------------------------------------------------------ harmony: one message at a time
    def _harmony(self, out: list, final: bool) -> None:
        while True:
            ends = [(self.buf.find(t), len(t)) for t in HARMONY_ENDS if t in self.buf]
            start = self.buf.find("<|start|>", 1)
            cuts = [a + n for a, n in ends] + ([start] if start > 0 else [])
            if not cuts:
                if final:
                    self._message(out, self.buf)
                    self.buf = ""
                elif not self.named and "<|message|>" in self.buf:
                    m = re.search(r"to=functions\.([^\s<]+)", self.buf.split("<|message|>")[0])
                    if m:
                        self.named = True
                        out.append(CallStarted(self.index, f"call_{self.index + 1}"))
                        out.append(CallName(self.index, m.group(1)))
                return
            cut = min(cuts)
            self._message(out, self.buf[:cut])
            self.buf = self.buf[cut:]

    def _message(self, out: list, segment: str) -> None:
        text, calls = harmony_messages(segment)
        self._emit(out, text)
        if calls and not self.named:
            out.append(CallStarted(self.index, f"call_{self.index + 1}"))
        self._calls(out, calls)
        self.named = False

    def _calls(self, out: list, calls: list) -> None:
        """Number the one-shot reader's calls in stream order; each gets its start and name events before it is
        done (the first call's were sent already where they could be read early)."""
        for k, c in enumerate(calls):
            c.index = self.index
            if self.kind == "gpt-oss":
                c.id = f"call_{self.index + 1}"
            elif k > 0:
                out.append(CallStarted(c.index, c.id))
            if c.name and (k > 0 or not self.named):
                out.append(CallName(c.index, c.name))
            out.append(CallDone(c) if c.ok else CallError(c))
            self.index += 1

    def _emit(self, out: list, text: str) -> None:
        if text:
            out.append(TextDelta(text))


def family_stream_events(chunks: Iterable[str], family: str) -> Iterator:
    """Every event of a whole stream of one family's text chunks, ``finish`` included."""
    parser = FamilyStreamParser(family)
    for chunk in chunks:
        yield from parser.feed(chunk)
    yield from parser.finish()
