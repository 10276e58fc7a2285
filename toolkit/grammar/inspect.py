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

import torch

from toolkit.backends.decode import decode
from toolkit.backends.sampling import choose, generator
from toolkit.grammar.compile import Grammar, stop_ids_of
from toolkit.grammar.hf import decode_text
from toolkit.grammar.mask import GrammarMask, allowed_count
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
    return [
        (int(i), token_text(tokenizer, int(i)), float(before[i]), float(after[i]))
        for v, i in zip(vals, idx)
        if float(v) > 0
    ]


def trace(
    model,
    tokenizer,
    prompt_ids,
    grammar: Grammar | None,
    max_new_tokens: int = 48,
    temperature: float = 0.0,
    seed: int = 0,
    top_k: int = 10,
) -> StepTrace:
    """Decode one sequence, driving the grammar matcher ourselves, and record every step (see :class:`TokenStep`).

    ``temperature=0`` is greedy (the shown probabilities are then at temperature 1); otherwise sampling from the
    masked distribution at ``temperature`` with a seeded generator. ``grammar=None`` decodes unconstrained.
    """
    width = vocab_width(model)
    if grammar is not None and grammar.vocab_width != width:
        raise ValueError(f"grammar was compiled for vocab width {grammar.vocab_width}, model has {width}")
    stops = set(grammar.stop_token_ids if grammar else stop_ids_of(tokenizer))
    rec = _Recorder(model, tokenizer, list(prompt_ids), temperature, seed, top_k, width, grammar is not None)
    t0 = time.perf_counter()
    with torch.no_grad():
        out_ids, stopped = decode(
            rec, max_new_tokens=max_new_tokens, stop_ids=stops, mask=_Strict(grammar) if grammar else None
        )
    secs = time.perf_counter() - t0
    return StepTrace(
        len(prompt_ids),
        out_ids,
        rec.steps,
        decode_text(tokenizer, out_ids, stops),
        stopped != "length",
        temperature,
        seed,
        width,
        grammar is not None,
        secs,
    )


class _Strict(GrammarMask):
    def accept(self, token_id: int) -> bool:
        if not super().accept(token_id):
            raise RuntimeError(f"matcher refused token {token_id} it had allowed")
        return True


class _Recorder:
    """A stepper of the one decode loop that runs the model itself and records each step's distributions.

    Same call shape as transformers' generate (attention mask over everything so far): keeps greedy decoding
    bit-identical between ``trace`` and ``toolkit.grammar.hf.generate``; the token is picked by the one sampler."""

    depth = 1

    def __init__(self, model, tokenizer, prompt_ids, temperature, seed, top_k, width, constrained):
        self.model, self.tokenizer, self.prompt = model, tokenizer, prompt_ids
        self.temperature, self.top_k, self.width, self.constrained = temperature, top_k, width, constrained
        self.gen = generator(seed)
        self.dev = next(model.parameters()).device
        self.past, self.tokens, self.steps = None, [], []

    def launch(self, i: int, bitmask) -> None:
        ids = self.prompt if i == 0 else [self.tokens[-1]]
        attn = torch.ones(1, len(self.prompt) + i, dtype=torch.long, device=self.dev)
        out = self.model(
            input_ids=torch.tensor([ids], device=self.dev),
            attention_mask=attn,
            cache=self.past,
            use_cache=True,
            logits_to_keep=1,
        )
        self.past = out.past_key_values
        logits = out.logits[:, -1, :].float()
        t = self.temperature or 1.0
        before = torch.softmax(logits / t, -1)[0].cpu()
        if bitmask is not None:
            allowed = allowed_count(bitmask, self.width)
            masked = logits.clone()
            GrammarMask.apply(masked, bitmask)
        else:
            allowed, masked = self.width, logits
        after = torch.softmax(masked / t, -1)[0].cpu()
        tok = int(choose(masked.cpu() if self.temperature > 0 else masked, self.temperature, gen=self.gen)[0])
        removed = float(1.0 - before[after > 0].sum()) if bitmask is not None else 0.0
        tk = self.tokenizer
        self.steps.append(
            TokenStep(
                i,
                allowed,
                _top(tk, before, before, after, self.top_k),
                _top(tk, after, before, after, self.top_k),
                max(removed, 0.0),
                tok,
                token_text(tk, tok),
                float(before[tok]),
                float(after[tok]),
            )
        )
        self.tokens.append(tok)

    def token(self, i: int) -> int:
        return self.tokens[i]


@dataclass
class Score:
    """One whole output, teacher-forced: its log-probability under the model and under step-wise masking."""

    logp_model: float
    logp_masked: float  # -inf if the grammar refused a token
    accepted: bool  # every token accepted by the grammar
    terminated: bool  # ... and the grammar ended exactly there


def score(model, tokenizer, prompt_ids, grammar: Grammar, text: str) -> Score:
    """Score ``text`` followed by a stop (any of the grammar's stop ids: their probabilities add up) in one
    forward: how likely is it with and without the mask?"""
    ids = tokenizer.encode(text, add_special_tokens=False)
    stops = list(grammar.stop_token_ids)
    dev = next(model.parameters()).device
    with torch.no_grad():
        # Only the rows that predict ``ids`` and the stop after them (the last len(ids)+1 positions).
        out = model(torch.tensor([list(prompt_ids) + ids], device=dev), logits_to_keep=len(ids) + 1)
        logits = out.logits[0].float()
    m = GrammarMask(grammar)
    bm = m.allocate()
    lp_model = lp_masked = 0.0
    for row, tid in zip(logits, ids + [stops]):
        m.fill(bm)
        masked = row.clone().unsqueeze(0)
        m.apply(masked, bm)
        pick = torch.as_tensor(tid if isinstance(tid, list) else [tid], device=row.device)
        lp_model += float(torch.logsumexp(torch.log_softmax(row, -1)[pick], 0))
        lp_masked += float(torch.logsumexp(torch.log_softmax(masked[0], -1)[pick], 0))
        if not m.accept(tid[0] if isinstance(tid, list) else tid):
            return Score(lp_model, float("-inf"), False, False)
    return Score(lp_model, lp_masked, True, m.is_terminated())
