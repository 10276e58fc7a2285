"""Decoding through xgrammar's own transformers integration (``xgrammar.contrib.hf``): the library path.

What it does
- ``generate`` / ``sample`` (n rows, batched) call ``model.generate`` with xgrammar's ``LogitsProcessor`` (or no
  grammar, for comparison) under explicit settings (``generation_kwargs``), and check termination by replaying.

What it leaves out
- Our own decode loop (``toolkit.backends.decode``); the tests check the two agree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from xgrammar.contrib.hf import LogitsProcessor

from toolkit.grammar.compile import Grammar, stop_ids_of
from toolkit.grammar.mask import replay


def decode_text(tokenizer, ids, stops) -> str:
    body = ids[:-1] if ids and ids[-1] in stops else ids
    return tokenizer.decode([i for i in body if i < len(tokenizer)], skip_special_tokens=False)


# ---------------------------------------------------------------- decoding: xgrammar's transformers integration
@dataclass
class Sampled:
    ids: list  # generated ids (stop token included when produced)
    text: str
    terminated: bool  # constrained: a fresh matcher replaying ``ids`` ends terminated; else a stop token came
    seconds: float
    constrained: bool
    notes: list = field(default_factory=list)  # what a served backend said (toolkit.grammar.served)

    @property
    def tokens_per_s(self) -> float:
        return len(self.ids) / self.seconds if self.seconds else float("nan")


def generation_kwargs(tokenizer, max_new_tokens: int, temperature: float, stops) -> dict:
    """Explicit settings, so a model folder's own generation_config (Qwen ships top_k=20, top_p=0.8,
    repetition_penalty=1.05) cannot silently change what "greedy" or "temperature T" means here."""
    kw = dict(
        max_new_tokens=max_new_tokens,
        eos_token_id=list(stops),
        pad_token_id=tokenizer.pad_token_id,
        repetition_penalty=1.0,
        min_new_tokens=0,
    )
    if temperature > 0:  # top_k=0 / top_p=1.0: sample from the whole (masked) distribution
        kw.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
    else:
        kw.update(do_sample=False)
    return kw


def generate(
    model,
    tokenizer,
    prompt_ids,
    grammar: Grammar | None = None,
    max_new_tokens: int = 48,
    temperature: float = 0.0,
    seed: int = 0,
) -> Sampled:
    """``model.generate`` with xgrammar's own LogitsProcessor (a fresh one per call: it cannot be reset): one sample."""
    return sample(model, tokenizer, prompt_ids, grammar, 1, temperature, seed, max_new_tokens)[0]


def sample(
    model,
    tokenizer,
    prompt_ids,
    grammar: Grammar | None,
    n: int,
    temperature: float = 1.0,
    seed: int = 0,
    max_new_tokens: int = 48,
) -> list[Sampled]:
    """``n`` samples in one batched ``model.generate`` (one matcher per row inside xgrammar's processor)."""
    stops = list(grammar.stop_token_ids if grammar else stop_ids_of(tokenizer))
    procs = []
    if grammar is not None:
        procs = [LogitsProcessor(grammar.compiled)]
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)] * n, device=dev)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            logits_processor=procs,
            **generation_kwargs(tokenizer, max_new_tokens, temperature, stops),
        )
    secs = time.perf_counter() - t0
    gens = []
    for row in out[:, ids.shape[1] :].tolist():
        cut = next((k + 1 for k, t in enumerate(row) if t in stops), len(row))  # drop the padding after a stop
        new = row[:cut]
        if grammar is not None:
            ok, term = replay(grammar, new)
            term = ok and term
        else:
            term = bool(new) and new[-1] in stops
        gens.append(Sampled(new, decode_text(tokenizer, new, set(stops)), term, secs / n, grammar is not None))
    return gens
