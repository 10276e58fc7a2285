"""The one decode loop: ask for a token, check it against the grammar and the stop ids, repeat.

What it does
- ``decode(stepper, max_new_tokens=..., stop_ids=..., mask=...)`` returns ``(new_ids, stopped_by)`` with
  ``stopped_by`` in ``"stop" | "grammar" | "length"``. Per token: the grammar mask fills its bitmask, the stepper
  picks a token under it (``launch``), the loop reads it (``token``), the matcher accepts it, and a stop id or the
  grammar's end ends the turn. ``HFBackend``, ``Engine`` and ``toolkit.grammar.inspect.trace`` all decode here.
  ``on_token`` is called with each token as the loop reads it: what a backend streams (``toolkit.backends.base``).
- ``decode_rows(stepper, rows=..., ...)`` is the same loop over several sequences at once (one grammar mask per
  row, or none): each step the stepper picks one token per row; a row that stops keeps its tokens and the loop
  runs until every row has stopped. ``decode`` is ``decode_rows`` with one row. ``HFBackend.generate_batch``
  (BFCL runs) and ``toolkit.sft.probes.continue_batch`` decode here.
- A stepper may run ``depth`` steps ahead of the host (the engine keeps a few decode steps queued on the GPU while
  the host reads tokens); under a grammar the next mask needs the current token, so ``depth`` is 1 there.

Stepper protocol (one row; a several-row stepper takes a list of bitmasks and returns a list of tokens)::

    stepper.depth: int                        # launches the device may run ahead of the host (1 = lock-step)
    stepper.launch(i: int, bitmask) -> None   # pick token i from the current logits under ``bitmask`` (or None)
                                              # and start whatever computes the logits after it
    stepper.token(i: int) -> int              # token i, waiting for it if need be
    stepper.allocate(mask) -> bitmask         # optional: the buffer the mask fills (default mask.allocate())

In a several-row launch a row that has stopped gets ``None`` as its bitmask (its token is ignored).

What it leaves out
- Speculative decoding, stop strings (only stop token ids), dropping finished rows from a batch (they idle until
  the last row stops).
"""

from __future__ import annotations

from typing import Protocol


class Stepper(Protocol):
    depth: int

    def launch(self, i: int, bitmask) -> None: ...

    def token(self, i: int) -> int: ...


class _OneRow:
    """A one-row stepper seen as a several-row one (lists of one bitmask and one token); ``on_token`` sees each token
    as the loop reads it."""

    def __init__(self, stepper, on_token=None):
        self.stepper, self.on_token = stepper, on_token
        self.depth = getattr(stepper, "depth", 1)
        if hasattr(stepper, "allocate"):
            self.allocate = stepper.allocate

    def launch(self, i: int, bitmasks) -> None:
        self.stepper.launch(i, None if bitmasks is None else bitmasks[0])

    def token(self, i: int) -> list[int]:
        tok = self.stepper.token(i)
        if self.on_token is not None:
            self.on_token(tok)
        return [tok]


def decode(stepper: Stepper, *, max_new_tokens: int, stop_ids, mask=None, on_token=None) -> tuple[list[int], str]:
    """Run the loop to a stop id, the grammar's end or ``max_new_tokens``; see the module docstring. ``on_token(id)``
    is called with each new token as soon as the loop has it (streaming: ``toolkit.loop.stream``)."""
    masks = None if mask is None else [mask]
    return decode_rows(
        _OneRow(stepper, on_token), rows=1, max_new_tokens=max_new_tokens, stop_ids=stop_ids, masks=masks
    )[0]


def decode_rows(stepper, *, rows: int, max_new_tokens: int, stop_ids, masks=None) -> list[tuple[list[int], str]]:
    """The loop over ``rows`` sequences; ``masks``: one grammar mask (or None) per row, or None for all free.
    Returns one ``(new_ids, stopped_by)`` per row."""
    new: list[list[int]] = [[] for _ in range(rows)]
    stopped = ["length"] * rows
    live = [True] * rows
    bitmasks = None
    if masks is not None and any(m is not None for m in masks):
        # a stepper may hand out its own buffer (the engine's is pinned host memory)
        alloc = getattr(stepper, "allocate", None)
        bitmasks = [None if m is None else (alloc(m) if alloc else m.allocate()) for m in masks]
    else:
        masks = None
    depth = 1 if masks is not None else max(1, int(getattr(stepper, "depth", 1)))

    def end(r: int, why: str) -> None:
        stopped[r], live[r] = why, False

    step = launched = 0
    while step < max_new_tokens:
        for r in range(rows):
            if live[r] and masks is not None and masks[r] is not None and masks[r].is_terminated():
                end(r, "grammar")
        if not any(live):
            break
        while launched < max_new_tokens and launched - step < depth:
            if masks is not None:
                for r in range(rows):
                    if live[r] and masks[r] is not None:
                        masks[r].fill(bitmasks[r])
                stepper.launch(launched, [b if live[r] else None for r, b in enumerate(bitmasks)])
            else:
                stepper.launch(launched, None)
            launched += 1
        toks = stepper.token(step)
        step += 1
        for r in range(rows):
            if not live[r]:
                continue
            tok = toks[r]
            new[r].append(tok)
            m = masks[r] if masks is not None else None
            if m is not None and not m.accept(tok):
                end(r, "grammar")  # the mask allowed a token its matcher refuses: should not happen
            elif tok in stop_ids:
                end(r, "stop")
            elif m is not None and m.is_terminated():
                end(r, "grammar")
    return list(zip(new, stopped))
