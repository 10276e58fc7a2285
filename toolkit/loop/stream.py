"""One turn of the host loop read while it streams: new token ids in, ``toolkit.streamparse`` events out (§14.5.8).

What it does
- :class:`TurnStream` turns a turn's new ids into text as they arrive (incremental detokenization: a piece is
  sent once it no longer ends in half a UTF-8 character, so ``é`` or ``中`` split over two byte-level tokens comes
  out whole) and feeds that text to one :class:`toolkit.streamparse.StreamParser`; each event goes to
  ``on_event(turn, event)`` at once (``LoopConfig.on_event``).
- The text the loop writes for the model before it decodes (a thinking model's ``<think>`` block, decoded first by
  ``toolkit.loop.think``, and a forced answer prefix) is fed first (:meth:`TurnStream.text`).
- A backend that streams (``toolkit.backends.base.Streams``) calls :meth:`TurnStream.token` with each id while it
  decodes; for one that does not (the HTTP backends) :meth:`TurnStream.end` feeds the turn's ids one by one after
  it ends, so every backend gives the same events. ``end`` also checks the streamed text against the turn's text
  and sends any rest, then closes the parser (a call still open becomes a ``CallError``: the turn was cut).
- The calls the events carry equal the loop's own one-shot parse (``Parsed``) of the same text, call for call
  (``tests/test_loop_stream.py``), since the stream parser decides each block with ``toolkit.parse``. Their ids
  are per turn (``call_1``...); ``Parsed`` numbers calls over the whole conversation.

What it leaves out
- Streaming the thought while the model thinks (``think_first`` decodes it in a call of its own; its text is sent
  as one piece when the turn's decode starts) and streaming from the HTTP backends (they collect a server's chunks
  inside one ``generate``).
- Acting on a call before its turn ends: the loop still runs calls after the turn (``Executed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from toolkit.backends.base import Streams
from toolkit.qwen import STOP_IDS
from toolkit.streamparse import StreamParser


class TurnStream:
    """Events of one turn, sent to ``on_event(turn, event)`` as the text grows; ``events`` keeps them all."""

    def __init__(self, tokenizer, turn: int, on_event: Callable | None, stop_ids: Iterable[int] = STOP_IDS):
        self.tokenizer, self.turn, self.on_event, self.stop_ids = tokenizer, turn, on_event, set(stop_ids)
        self.parser, self.events, self.sent = StreamParser(), [], []
        self.ids: list[int] = []
        self.prefix = self.read = 0  # ids[prefix:read] is text already sent; ids[read:] is not sent yet
        self.live = False  # whether any id came while the backend decoded
        self.exact = True

    @classmethod
    def open(cls, tokenizer, turn: int, on_event, backend, first: str = "") -> tuple[TurnStream | None, dict]:
        """A turn's stream (None without ``on_event``), fed ``first`` (thought, forced prefix), and the keyword
        arguments that make ``backend.generate`` stream into it (``{}`` for a backend that does not stream)."""
        if on_event is None:
            return None, {}
        stream = cls(tokenizer, turn, on_event)
        stream.text(first)
        return stream, {"on_token": stream.token} if isinstance(backend, Streams) and backend.streams else {}

    def _emit(self, events) -> None:
        for e in events:
            self.events.append(e)
            if self.on_event is not None:
                self.on_event(self.turn, e)

    def text(self, text: str) -> None:
        """Text the turn has before (or without) decoding: a thought decoded first, a forced prefix."""
        if text:
            self.sent.append(text)
            self._emit(self.parser.feed(text))

    def token(self, token_id: int) -> None:
        """One new id from the backend; a stop id ends the text (the loop's text leaves it out)."""
        self.live = True
        if token_id in self.stop_ids:
            return
        self.ids.append(int(token_id))
        done = self.tokenizer.decode(self.ids[self.prefix : self.read], skip_special_tokens=False)
        now = self.tokenizer.decode(self.ids[self.prefix :], skip_special_tokens=False)
        if now.endswith("\ufffd") or not now.startswith(done):
            return  # half a character (or a cleanup that rewrote earlier text): wait for the next id
        self.prefix, self.read = self.read, len(self.ids)
        self.text(now[len(done) :])

    def end(self, new_ids: list[int], text: str) -> list:
        """The turn is over: ``new_ids`` are its ids, ``text`` the loop's text of it. Replays the ids of a backend
        that did not stream, sends what the stream still lacks of ``text``, closes the parser; returns all events."""
        if not self.live:
            for i in new_ids:
                self.token(i)
        streamed = "".join(self.sent)
        self.exact = text.startswith(streamed)  # False: the streamed text went astray (never seen; the tests check)
        if self.exact:
            self.text(text[len(streamed) :])
        self._emit(self.parser.finish())
        return self.events
