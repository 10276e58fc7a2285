"""One sequence's grammar state as the small protocol a decoding loop needs.

What it does
- :class:`GrammarMask` (allocate / fill / accept / is_terminated / reset): bitmasks are ``int32[1, ceil(V/32)]`` sized
  from the MODEL's logit width (151,936), not ``len(tokenizer)``; the extra rows are padding the mask forbids.
  ``allowed_mask`` unpacks a bitmask into booleans; ``replay`` checks a finished generation.

What it leaves out
- Jump-forward decoding and speculative masks.
"""

from __future__ import annotations

import numpy as np
import xgrammar as xgr

from toolkit.grammar.compile import Grammar


# ---------------------------------------------------------------- the mask protocol
class GrammarMask:
    """One sequence's grammar state. The loop: ``fill(bm)`` → mask logits → pick token → ``accept(tok)``.

    Bitmasks live on the CPU (xgrammar fills them there); move them to the logits' device to apply.
    """

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        self.vocab_width = grammar.vocab_width
        self.matcher = xgr.GrammarMatcher(grammar.compiled)

    def allocate(self):
        return xgr.allocate_token_bitmask(1, self.vocab_width)

    def fill(self, bitmask) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, 0)

    def accept(self, token_id: int) -> bool:
        return bool(self.matcher.accept_token(int(token_id)))

    def is_terminated(self) -> bool:
        return bool(self.matcher.is_terminated())

    def reset(self) -> None:
        self.matcher.reset()

    @staticmethod
    def apply(logits, bitmask) -> None:
        """Set forbidden logits to -inf in place (``logits``: [1, V] or [V], any device)."""
        xgr.apply_token_bitmask_inplace(logits, bitmask.to(logits.device))

    def allowed(self, bitmask) -> np.ndarray:
        """Boolean array of length V: which token ids the bitmask allows."""
        return allowed_mask(bitmask, self.vocab_width)

    def allowed_count(self, bitmask) -> int:
        return allowed_count(bitmask, self.vocab_width)


def allowed_mask(bitmask, vocab_width: int) -> np.ndarray:
    # Bit j of int32 word i is token 32*i + j; on a little-endian host the bytes come low bits first.
    words = np.ascontiguousarray(bitmask.detach().cpu().numpy().reshape(-1).astype("<i4"))
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_width].astype(bool)


def allowed_count(bitmask, vocab_width: int) -> int:
    return int(allowed_mask(bitmask, vocab_width).sum())


def replay(grammar: Grammar, ids) -> tuple[bool, bool]:
    """Feed ``ids`` into a fresh matcher: (all accepted, terminated). How we check a finished generation."""
    m = GrammarMask(grammar)
    for i in ids:
        if not m.accept(i):
            return False, False
    return True, m.is_terminated()
