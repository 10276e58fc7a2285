"""One sequence's grammar state as the small protocol a decoding loop needs.

What it does
- :class:`GrammarMask` (allocate / fill / accept / is_terminated / reset): bitmasks are ``int32[1, ceil(V/32)]`` sized
  from the MODEL's logit width (151,936), not ``len(tokenizer)``; the extra rows are padding the mask forbids.
  ``allowed_mask`` unpacks a bitmask into booleans; ``replay`` checks a finished generation; ``longest_call`` drives
  a tool-call grammar as the slowest decoder would and counts its tokens (``toolkit.grammar.budget`` bounds them);
  ``slowest_next`` is that decoder's choice of one token (a test backend decodes whole turns with it).

What it leaves out
- Jump-forward decoding and speculative masks.
"""

from __future__ import annotations

import numpy as np
import xgrammar as xgr

from toolkit.grammar.compile import Grammar
from toolkit.qwen import TOOL_CALL_END_ID, TOOL_CALL_ID


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


def longest_call(grammar, tokenizer, limit: int) -> int | None:
    """Tokens the slowest decoder spends on one call under ``grammar`` (from ``<tool_call>`` to ``</tool_call>``,
    both counted); None if the call is still open after ``limit`` tokens."""
    sizes = token_sizes(tokenizer, grammar.vocab_width)
    m = GrammarMask(grammar)
    bm = m.allocate()
    m.fill(bm)
    if not m.allowed(bm)[TOOL_CALL_ID] or not m.accept(TOOL_CALL_ID):
        raise ValueError("the grammar does not let a call start with <tool_call>")
    last = None
    for n in range(2, limit + 1):
        m.fill(bm)
        choice = slowest_next(m.allowed(bm), sizes, last)
        m.accept(choice)
        last = choice
        if choice == TOOL_CALL_END_ID:
            return n
    return None


def slowest_next(allowed: np.ndarray, sizes: dict, last: int | None) -> int:
    """The slowest decoder's next token inside a call, among ``allowed`` (see :func:`longest_call`); ``sizes`` is
    :func:`token_sizes` of the tokenizer, ``last`` the token before."""
    hits = sizes["prefer"][allowed[sizes["prefer"]]]
    if last == sizes["backslash"] and sizes["u"] is not None and allowed[sizes["u"]]:
        return sizes["u"]  # \uXXXX: the longest escape
    if hits.size:
        return int(hits[0])
    keep = allowed & ~sizes["quote"]
    keep[TOOL_CALL_END_ID] = False
    pool = keep if keep.any() else allowed
    return int(np.argmin(np.where(pool, sizes["len"], np.iinfo(np.int64).max)))


_SIZES: dict = {}


def token_sizes(tokenizer, width: int) -> dict:
    """Each token's byte length (byte-level BPE: the GPT-2 byte alphabet), the one-byte tokens, and the tokens
    holding a double quote; cached per tokenizer."""
    key = (id(tokenizer), width)
    if key not in _SIZES:
        _SIZES[key] = _measure(tokenizer, width)
    return _SIZES[key]


def _measure(tokenizer, width: int) -> dict:
    table = {c: b for b, c in _bytes_to_unicode().items()}
    length, quote, single = np.full(width, 10**6, dtype=np.int64), np.zeros(width, dtype=bool), {}
    for tok, i in tokenizer.get_vocab().items():
        if i >= width:
            continue
        try:
            raw = bytes(table[c] for c in tok)
        except KeyError:  # an added/special token: one token, not text
            continue
        length[i], quote[i] = len(raw), b'"' in raw
        if len(raw) == 1:
            single[raw[0]] = i
    length[TOOL_CALL_END_ID] = 1
    # an escape first, then the bytes that make the most tokens per character: 4-byte leads, continuations
    order = [0x5C, *range(0xF0, 0xF5), *range(0x80, 0xC0)]
    prefer = np.array([single[b] for b in order if b in single])
    return {"len": length, "quote": quote, "prefer": prefer, "backslash": single.get(0x5C), "u": single.get(0x75)}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters, which byte-level BPE vocabularies are written in."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))
