"""A thinking model's ``<think>`` block in the host loop (Qwen3): decoded first, shown, never parsed.

What it does
- ``think_first(backend, prompt, ...)``: when the model's first token is ``<think>`` (151667), the block is decoded
  freely up to ``</think>`` (151668) and the whitespace after it, and the model's next token is peeked there: that
  token, not ``<think>``, is what the loop's first-token gate decides on. Returns the block's ids (the turn's prompt
  continues after them) and the peek.
- ``split_think(text)``: a turn's text cut into its leading think block(s) and the rest. The parser only ever sees
  the rest, so a ``<tool_call>`` written while thinking is neither run nor counted as the answer; an unclosed block
  (the turn ran out while thinking) is all thought.
- ``enable_thinking`` goes to the template through ``LoopConfig.thinking`` (``Host.render``): Qwen3's template writes
  an empty ``<think>\\n\\n</think>\\n\\n`` into the generation prompt when it is ``False``, so the model answers at once.

What it leaves out
- Thinking before a forced call (``tool_choice="required"`` or a tool's name): the call grammar starts the turn, so
  the model does not think there (as a server's ``tool_choice`` does).
- Budgets for the thought alone: the block gets the turn's ``max_new_tokens``; a cut thought ends the turn.
"""

from __future__ import annotations

import re

from toolkit.backends.base import Generation, Peeks
from toolkit.qwen import STOP_IDS

THINK_ID, THINK_END_ID = 151667, 151668


_BLOCK = re.compile(r"\s*<think>.*?(</think>\s*|$)", re.S)


def split_think(text: str) -> tuple[str, str]:
    """(the leading think block(s), the rest): what the model thought, and what the parser and the user read."""
    pos = 0
    while m := _BLOCK.match(text, pos):
        if m.end() == pos:
            break
        pos = m.end()
    return text[:pos], text[pos:]


def peek(backend, prompt, temperature, seed, top_p=1.0) -> Generation:
    """The model's own next token (no mask): the backend's ``peek`` where it has one (``toolkit.backends.base.Peeks``),
    otherwise a one-token generate."""
    if isinstance(backend, Peeks):
        return backend.peek(prompt, temperature=temperature, top_p=top_p, seed=seed)
    return backend.generate(prompt, max_new_tokens=1, stop_ids=set(), temperature=temperature, top_p=top_p, seed=seed)


def think_first(backend, tokenizer, prompt: list[int], cfg, turn: int) -> tuple[list[int], Generation]:
    """The think block the model writes before anything else (ids; empty when it does not think) and the peek of
    the token after it, decoded with ``cfg``'s sampling (``LoopConfig``; turn ``turn`` draws with ``seed + turn``)
    and at most ``cfg.max_new_tokens`` thought tokens. A block that does not close is returned without its stop
    token, with a peek of ``<|im_end|>``: the turn goes on from the open block as text."""
    temperature, seed, top_p = cfg.temperature, cfg.seed + turn, cfg.top_p
    peeked = peek(backend, prompt, temperature, seed, top_p)
    if not peeked.new_ids or peeked.new_ids[0] != THINK_ID:
        return [], peeked
    g = backend.generate(
        prompt,
        max_new_tokens=cfg.max_new_tokens,
        stop_ids={THINK_END_ID, *STOP_IDS},
        temperature=temperature,
        top_p=top_p,
        seed=seed,
    )
    thought = list(g.new_ids)
    if not thought or thought[-1] != THINK_END_ID:  # cut while thinking: the turn goes on from the open block
        thought = [t for t in thought if t not in STOP_IDS]
        return thought, Generation([STOP_IDS[0]], g.reused, g.prefilled, g.prefill_s, g.decode_s, g.stopped_by)
    for _ in range(4):  # the blank line after </think> belongs to the block
        nxt = peek(backend, prompt + thought, temperature, seed, top_p)
        if not nxt.new_ids or tokenizer.decode(nxt.new_ids[:1]).strip():
            break
        thought += nxt.new_ids[:1]
    # the thought's prefill and decode count in the turn's numbers (the loop adds the peek to its generation)
    return thought, Generation(nxt.new_ids, g.reused, g.prefilled, g.prefill_s + nxt.prefill_s, g.decode_s, "think")
