"""The one decode loop: ask for a token, check it against the grammar and the stop ids, repeat.

What it does
- ``decode(stepper, max_new_tokens=..., stop_ids=..., mask=...)`` returns ``(new_ids, stopped_by)`` with
  ``stopped_by`` in ``"stop" | "grammar" | "length"``. Per token: the grammar mask fills its bitmask, the stepper
  picks a token under it (``launch``), the loop reads it (``token``), the matcher accepts it, and a stop id or the
  grammar's end ends the turn. ``HFBackend``, ``Engine`` and ``toolkit.grammar.inspect.trace`` all decode here.
- A stepper may run ``depth`` steps ahead of the host (the engine keeps a few decode steps queued on the GPU while
  the host reads tokens); under a grammar the next mask needs the current token, so ``depth`` is 1 there.

Stepper protocol::

    stepper.depth: int                        # launches the device may run ahead of the host (1 = lock-step)
    stepper.launch(i: int, bitmask) -> None   # pick token i from the current logits under ``bitmask`` (or None)
                                              # and start whatever computes the logits after it
    stepper.token(i: int) -> int              # token i, waiting for it if need be
    stepper.allocate(mask) -> bitmask         # optional: the buffer the mask fills (default mask.allocate())

What it leaves out
- Several sequences at once, speculative decoding, stop strings (only stop token ids).
"""

from __future__ import annotations

from typing import Protocol


class Stepper(Protocol):
    depth: int

    def launch(self, i: int, bitmask) -> None: ...

    def token(self, i: int) -> int: ...


def decode(stepper: Stepper, *, max_new_tokens: int, stop_ids, mask=None) -> tuple[list[int], str]:
    """Run the loop to a stop id, the grammar's end or ``max_new_tokens``; see the module docstring."""
    new: list[int] = []
    stopped, launched = "length", 0
    bitmask = None
    if mask is not None:  # a stepper may hand out its own buffer (the engine's is pinned host memory)
        bitmask = stepper.allocate(mask) if hasattr(stepper, "allocate") else mask.allocate()
    depth = 1 if mask is not None else max(1, int(getattr(stepper, "depth", 1)))
    while len(new) < max_new_tokens:
        if mask is not None and mask.is_terminated():
            stopped = "grammar"
            break
        while launched < max_new_tokens and launched - len(new) < depth:
            if mask is not None:
                mask.fill(bitmask)
            stepper.launch(launched, bitmask)
            launched += 1
        tok = stepper.token(len(new))
        new.append(tok)
        if mask is not None and not mask.accept(tok):
            stopped = "grammar"  # the mask allowed a token its matcher refuses: should not happen
            break
        if tok in stop_ids:
            stopped = "stop"
            break
        if mask is not None and mask.is_terminated():
            stopped = "grammar"
            break
    return new, stopped
