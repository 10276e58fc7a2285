"""Re-tokenization drift: the ids a model generated vs the ids its turn gets when the host re-renders it as text.

What it does
- ``turn_drift(prev_prompt, generated, next_prompt, tokenizer)``: what a prefix cache holds after a turn is
  ``prev_prompt + generated``; the next request is ``next_prompt`` (the host re-rendered the conversation). The
  result says where the two stop matching (``at``: index inside the generated ids, None when they match), the
  ids and their text on both sides from there, whether the TEXT differs too or only its tokenization
  (``same_text``: the generated body without its stop token vs the re-rendered body), and the cost: tokens a perfect prefix cache must prefill again (``recompute``) beyond the new
  ones (``extra``).
- ``splice(prev_prompt, generated, next_prompt)``: the fix training and serving stacks converge on — keep the
  generated ids and send ids, not text: the next prompt is ``prev_prompt + generated`` (its stop token, which may
  be ``<|endoftext|>``, written as the template's ``<|im_end|>``) followed by what the re-rendering adds after the
  model's turn, so the cache matches up to the new tokens.
- ``trajectory_drift(prompts, generations, tokenizer)``: ``turn_drift`` for every turn of a host-loop run
  (``Rendered.prompt`` and ``Generated.ids`` per turn).

What it leaves out
- Templates that drop earlier content (Qwen3's ``<think>`` before the last query): there the prefix breaks for
  another reason, which ``toolkit.prefix`` measures. Whether a server accepts ids is the server's business
  (``toolkit.backends.http_tokens`` says when it does not).
"""

from __future__ import annotations

from toolkit.prefix import shared_prefix
from toolkit.qwen import IM_END_ID, STOP_IDS


def _end_of_turn(ids: list[int], start: int) -> int | None:
    """Index just past the first ``<|im_end|>`` at or after ``start`` (None if there is none)."""
    for i in range(start, len(ids)):
        if ids[i] == IM_END_ID:
            return i + 1
    return None


def turn_drift(prev_prompt, generated, next_prompt, tokenizer, show: int = 6) -> dict:
    """Where the cached ids (``prev_prompt + generated``) and the next prompt stop matching; see the module doc."""
    prev, gen, nxt = list(prev_prompt), list(generated), list(next_prompt)
    cached = prev + gen
    shared = shared_prefix(cached, nxt)
    at = None if shared >= len(cached) else shared - len(prev)
    end = _end_of_turn(nxt, len(prev))
    body = gen[:-1] if gen and gen[-1] in STOP_IDS else gen
    rerendered = nxt[len(prev) : (end - 1 if end else len(nxt))]
    out = dict(
        prompt=len(prev),
        generated=len(gen),
        next_prompt=len(nxt),
        shared=shared,
        at=at,
        recompute=len(nxt) - shared,
        extra=max(0, len(cached) - shared),
        rerendered=len(rerendered),
        same_text=tokenizer.decode(body, skip_special_tokens=False)
        == tokenizer.decode(rerendered, skip_special_tokens=False),
    )
    if at is not None and at >= 0:
        g, r = gen[at : at + show], nxt[shared : shared + show]
        out.update(
            generated_ids=g,
            reencoded_ids=r,
            generated_pieces=[tokenizer.decode([i], skip_special_tokens=False) for i in g],
            reencoded_pieces=[tokenizer.decode([i], skip_special_tokens=False) for i in r],
        )
    return out


def splice(prev_prompt, generated, next_prompt) -> list[int]:
    """The next prompt with the model's own ids kept: ``prev_prompt + generated`` (ending in ``<|im_end|>``) and
    then what the re-rendered conversation has after the model's turn."""
    prev, gen, nxt = list(prev_prompt), list(generated), list(next_prompt)
    if gen and gen[-1] in STOP_IDS:
        gen = gen[:-1]  # the stop the model sampled (<|im_end|> or <|endoftext|>): the template writes <|im_end|>
    gen = gen + [IM_END_ID]
    end = _end_of_turn(nxt, len(prev))
    if nxt[: len(prev)] != prev or end is None:
        raise ValueError("the next prompt does not extend the previous one up to the model's turn: nothing to splice")
    return prev + gen + nxt[end:]


def trajectory_drift(prompts, generations, tokenizer) -> list[dict]:
    """``turn_drift`` for turns 1..n-1 of a run (turn t's output against turn t+1's prompt), numbered from 1."""
    rows = []
    for t in range(len(prompts) - 1):
        row = turn_drift(prompts[t], generations[t], prompts[t + 1], tokenizer)
        row["turn"] = t + 1
        rows.append(row)
    return rows
