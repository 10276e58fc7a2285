"""A scripted fake model behind the backend protocol, for deterministic loop tests and figures.

What it does
- :class:`ScriptedBackend` replays fixed assistant texts (one per turn; a callable entry sees the prompt ids),
  tokenized with a real tokenizer, and reports reuse as a perfect prefix cache would. An entry given as a tuple of
  texts is tokenized piece by piece (a model that spells ``<tool_call>`` in ordinary tokens: the tag then
  streams split across tokens). It streams: ``generate(..., on_token=f)`` calls ``f`` with each id in turn.

What it leaves out
- Any model: nothing is computed, which its name says in every trace.
"""

from __future__ import annotations

import time

from toolkit.backends.base import Generation
from toolkit.prefix import shared_prefix
from toolkit.qwen import IM_END_ID, VOCAB_WIDTH


class ScriptedBackend:
    """Replays scripted assistant texts (one per turn), smolagents ``FakeToolCallModel`` style.

    It tokenizes each text with ``tokenizer``, appends ``<|im_end|>`` unless the text already ends in a stop, and
    reports reuse as if it had a perfect prefix cache (shared prefix with its previous prompt + output). A
    callable script entry receives the prompt ids and returns the text, so tests can react to what they see.
    ``delay_s`` makes "generation" take time, for timing-related views.
    """

    def __init__(self, tokenizer, script, name: str = "scripted fake model (no weights)", delay_s: float = 0.0):
        self.tokenizer, self.script, self.name, self.delay_s = tokenizer, list(script), name, delay_s
        self.vocab_width = VOCAB_WIDTH
        self.streams = True  # toolkit.backends.base.Streams
        self.prompts: list[list[int]] = []
        self._seen: list[int] = []
        self._continued = 0  # generate calls that went on with an entry instead of starting one
        self._rest: list[int] | None = None  # what is left of an entry cut at a stop id inside it (a thought's end)

    def reset(self) -> None:
        self._seen, self._rest = [], None

    def peek(self, prompt_ids, *, temperature=0.0, top_p=1.0, seed=0) -> Generation:
        """The first token of the next scripted text, without using the entry up (the loop's call gate)."""
        ids = self._pending(prompt_ids) if self._rest is not None else self._entry_ids(prompt_ids)
        reused = min(shared_prefix(self._seen, prompt_ids), len(prompt_ids) - 1)
        return Generation(ids[:1] or [IM_END_ID], reused, len(prompt_ids) - reused, 0.0, 0.0, "length")

    def _pending(self, prompt_ids) -> list[int]:
        """The rest of a cut entry, less what the caller already put into its prompt (peeked blank lines)."""
        return self._rest[max(0, len(prompt_ids) - len(self._seen) - 1) :]

    def _entry_ids(self, prompt_ids) -> list[int]:
        n = len(self.prompts) - self._continued  # the next script entry
        if n >= len(self.script):
            raise IndexError(f"scripted backend has only {len(self.script)} turn(s); turn {n + 1} was asked")
        entry = self.script[n]
        entry = entry(list(prompt_ids)) if callable(entry) else entry
        pieces = entry if isinstance(entry, tuple) else (entry,)
        return [i for piece in pieces for i in self.tokenizer.encode(piece, add_special_tokens=False)]

    def generate(
        self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, top_p=1.0, seed=0, on_token=None
    ):
        if self._rest is not None:  # the same entry goes on (the loop decoded a thought first, then the rest)
            ids, self._rest = self._pending(prompt_ids), None
            self._continued += 1
        else:
            ids = self._entry_ids(prompt_ids)
        self.prompts.append(list(prompt_ids))
        cut = next((i for i, t in enumerate(ids[:-1]) if t in stop_ids), None)
        if cut is not None:  # a stop id inside the text (e.g. </think> when the loop asked for the thought alone)
            ids, self._rest = ids[: cut + 1], ids[cut + 1 :]
        if not ids or ids[-1] not in stop_ids:
            ids.append(min(stop_ids) if IM_END_ID not in stop_ids else IM_END_ID)
        stopped_by = "stop"
        if len(ids) > max_new_tokens:
            ids, stopped_by = ids[:max_new_tokens], "length"
        reused = min(shared_prefix(self._seen, prompt_ids), len(prompt_ids) - 1)
        self._seen = list(prompt_ids) + ids[:-1]
        time.sleep(self.delay_s)
        for i in ids if on_token is not None else ():
            on_token(i)
        return Generation(ids, reused, len(prompt_ids) - reused, 0.0, self.delay_s, stopped_by)
