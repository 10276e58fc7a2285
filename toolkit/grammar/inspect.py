"""Looking inside constrained decoding: a step-by-step trace and whole-output scores.

What it does
- ``trace`` decodes one sequence driving the matcher itself and records, per step, how many tokens were allowed,
  the top-k before/after the mask, the probability mass the mask removed, and the chosen token.
- ``score`` gives a whole output's log-probability with and without the mask (teacher-forced, one forward).

What it leaves out
- Batches; ``trace`` decodes one sequence, one token per step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from toolkit.grammar.compile import Grammar, _stop_ids
from toolkit.grammar.hf import _decode_text
from toolkit.grammar.mask import GrammarMask
from toolkit.models import vocab_width


def token_text(tokenizer, tid: int) -> str:
    """How one token reads (ids past the tokenizer's end are padding rows of the logit matrix)."""
    if tid >= len(tokenizer):
        return f"<pad#{tid}>"
    return tokenizer.decode([tid])


# ---------------------------------------------------------------- decoding: the step trace
@dataclass
class TokenStep:
    index: int
    allowed: int  # how many of the V token ids the mask allowed (V when unconstrained)
    top_before: list  # [(id, text, p_before, p_after)]: top-k of the model's own distribution
    top_after: list  # [(id, text, p_before, p_after)]: top-k after masking and renormalising
    removed_mass: float  # probability the mask took away (0 when the model only wanted allowed tokens)
    chosen: int
    chosen_text: str
    p_before: float  # the chosen token's probability before the mask
    p_after: float


@dataclass
class StepTrace:
    prompt_len: int
    ids: list  # generated ids, stop token included when there was one
    steps: list
    text: str
    terminated: bool  # the grammar reached its end (constrained) / a stop token was produced (unconstrained)
    temperature: float
    seed: int
    vocab_width: int
    constrained: bool
    seconds: float = 0.0

    @property
    def allowed_sizes(self) -> list[int]:
        return [s.allowed for s in self.steps]


def _top(tokenizer, by, before, after, k):
    vals, idx = by.topk(k)
    return [(int(i), token_text(tokenizer, int(i)), float(before[i]), float(after[i]))
            for v, i in zip(vals, idx) if float(v) > 0]


def trace(model, tokenizer, prompt_ids, grammar: Grammar | None, max_new_tokens: int = 48,
          temperature: float = 0.0, seed: int = 0, top_k: int = 10) -> StepTrace:
    """Decode one sequence, driving the grammar matcher ourselves, and record every step (see :class:`TokenStep`).

    ``temperature=0`` is greedy (the shown probabilities are then at temperature 1); otherwise sampling from the
    masked distribution at ``temperature`` with a seeded generator. ``grammar=None`` decodes unconstrained.
    """
    import torch

    width = vocab_width(model)
    if grammar is not None and grammar.vocab_width != width:
        raise ValueError(f"grammar was compiled for vocab width {grammar.vocab_width}, model has {width}")
    stops = set(grammar.stop_token_ids if grammar else _stop_ids(tokenizer))
    mask = GrammarMask(grammar) if grammar else None
    bitmask = mask.allocate() if mask else None
    gen = torch.Generator().manual_seed(seed)
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)], device=dev)
    steps, out_ids, past, terminated = [], [], None, False
    t0 = time.perf_counter()
    with torch.no_grad():
        for i in range(max_new_tokens):
            # Same call shape as transformers' generate (attention mask over everything so far): keeps greedy
            # decoding bit-identical between the two paths.
            attn = torch.ones(1, len(prompt_ids) + len(out_ids), dtype=torch.long, device=dev)
            out = model(input_ids=ids, attention_mask=attn, cache=past, use_cache=True, logits_to_keep=1)
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            before = torch.softmax(logits / (temperature or 1.0), -1)[0].cpu()
            if mask is not None:
                mask.fill(bitmask)
                allowed = mask.allowed_count(bitmask)
                masked = logits.clone()
                mask.apply(masked, bitmask)
            else:
                allowed, masked = width, logits
            after = torch.softmax(masked / (temperature or 1.0), -1)[0].cpu()
            if temperature > 0:
                tok = int(torch.multinomial(after, 1, generator=gen))
            else:
                tok = int(masked[0].argmax())
            removed = float(1.0 - before[after > 0].sum()) if mask is not None else 0.0
            steps.append(TokenStep(i, allowed, _top(tokenizer, before, before, after, top_k),
                              _top(tokenizer, after, before, after, top_k),
                              max(removed, 0.0), tok, token_text(tokenizer, tok), float(before[tok]),
                              float(after[tok])))
            out_ids.append(tok)
            if mask is not None:
                if not mask.accept(tok):
                    raise RuntimeError(f"matcher refused token {tok} it had allowed (step {i})")
                if mask.is_terminated():
                    terminated = True
                    break
            elif tok in stops:
                terminated = True
                break
            ids = torch.tensor([[tok]], device=dev)
    secs = time.perf_counter() - t0
    return StepTrace(len(prompt_ids), out_ids, steps, _decode_text(tokenizer, out_ids, stops), terminated,
                     temperature, seed, width, grammar is not None, secs)


@dataclass
class Score:
    """One whole output, teacher-forced: its log-probability under the model and under step-wise masking."""

    logp_model: float
    logp_masked: float  # -inf if the grammar refused a token
    accepted: bool  # every token accepted by the grammar
    terminated: bool  # ... and the grammar ended exactly there


def score(model, tokenizer, prompt_ids, grammar: Grammar, text: str) -> Score:
    """Score ``text`` (plus the stop token) in one forward: how likely is it with and without the mask?"""
    import torch

    ids = tokenizer.encode(text, add_special_tokens=False) + [grammar.stop_token_ids[0]]
    dev = next(model.parameters()).device
    with torch.no_grad():
        # Only the rows that predict ``ids`` (the last len(ids)+1 positions, minus the very last).
        out = model(torch.tensor([list(prompt_ids) + ids], device=dev), logits_to_keep=len(ids) + 1)
        logits = out.logits[0, :-1].float()
    m = GrammarMask(grammar)
    bm = m.allocate()
    lp_model = lp_masked = 0.0
    for row, tid in zip(logits, ids):
        lp_model += float(torch.log_softmax(row, -1)[tid])
        m.fill(bm)
        masked = row.clone().unsqueeze(0)
        m.apply(masked, bm)
        lp_masked += float(torch.log_softmax(masked[0], -1)[tid])
        if not m.accept(tid):
            return Score(lp_model, float("-inf"), False, False)
    return Score(lp_model, lp_masked, True, m.is_terminated())
