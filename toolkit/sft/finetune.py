"""A short CPU fine-tune of the stand-in, with or without the SFT loss mask.

What it does
- ``fine_tune(examples, masked=...)`` trains a fresh random-weight Qwen-shaped stand-in for a fixed number of steps;
  two exact savings (a shared prefix run once per batch, only the embedding rows the data uses trained) keep a run
  near 30 CPU-seconds; tests check both give the same numbers as the plain computation.

What it leaves out
- A full-vocabulary softmax by default (``vocab="full"`` does it); packing, LoRA, RL.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from toolkit.models import stand_in, stand_in_config
from toolkit.sft.labels import IGNORE_INDEX, Labelled
from toolkit.tokenizer import tokenizer_for


# ====================================================================== fine-tune
@dataclass
class Run:
    """One fine-tune: the trained model, the output vocabulary it was trained over, and its loss curve."""

    masked: bool
    model: object
    vocab: list[int]  # output ids the softmax covers (all 151,936 when vocab="full")
    losses: list[float]
    seconds: float  # wall clock
    steps: int
    target_tokens: int  # loss positions seen over the whole run
    settings: dict = field(default_factory=dict)
    cpu_seconds: float = 0.0  # this process's CPU time: comparable across busy and idle machines

    @property
    def name(self) -> str:
        return "masked" if self.masked else "unmasked"


@contextmanager
def threads(n: int | None):
    """Run torch with ``n`` threads inside the block (``None``: leave as is), then restore.

    The kit's tensors here are tiny; on a shared machine a second thread made an elementwise multiply ~20x
    slower (threads spinning against other processes), so the functions below default to one."""
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def flavor_of(template: str) -> str:
    return "qwen2.5" if template == "qwen2.5" else "qwen3"


def data_vocab(examples: list[Labelled]) -> list[int]:
    """Every id that occurs anywhere in the rendered examples (prompt, tool results and outputs alike)."""
    return sorted({i for ex in examples for i in ex.ids})


def fresh_model(flavor: str, seed: int, model_kw: dict | None):
    from transformers import AutoModelForCausalLM  # lazy: needed by real models only

    if not model_kw:
        return stand_in(flavor, seed=seed)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(stand_in_config(flavor, **model_kw), dtype=torch.float32)
    with torch.no_grad():  # same wide embedding init as the stand-in
        model.get_input_embeddings().weight.normal_(0.0, 1.0)
    return model.eval()


def batch_of(examples: list[Labelled], idx, masked: bool, pad_id: int):
    rows = [examples[i] for i in idx]
    width = max(len(r.ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for j, r in enumerate(rows):
        n = len(r.ids)
        ids[j, :n] = torch.tensor(r.ids)
        labels[j, :n] = torch.tensor(r.labels if masked else r.unmasked_labels())
        attn[j, :n] = 1
    return ids, labels, attn


class VocabHead:
    """The run's working copy of the tied embedding, holding only the rows of ``vocab``.

    Ids outside ``vocab`` never occur in the batches, so their rows would get zero gradient and (Adam, no weight
    decay) zero update: training the small copy and writing it back is exactly the same as training the full
    matrix, without touching 151,936 rows every step. Logits cover ``vocab`` only (module docstring).
    """

    def __init__(self, model, vocab: list[int]):
        self.model, self.vocab = model, torch.tensor(vocab, dtype=torch.long)
        self.column = torch.full((model.config.vocab_size,), -1, dtype=torch.long)
        self.column[self.vocab] = torch.arange(len(vocab))
        full = model.get_input_embeddings().weight
        self.weight = torch.nn.Parameter(full.detach()[self.vocab].clone())

    def hidden(self, ids, attn=None, **kw):
        embeds = self.weight[self.column[ids].clamp(min=0)]  # padding may be outside vocab; attn hides it
        return self.model.model(inputs_embeds=embeds, attention_mask=attn, **kw)

    def logits(self, hidden):
        return hidden @ self.weight.T

    def body_parameters(self):
        skip = {id(self.model.get_input_embeddings().weight), id(self.model.get_output_embeddings().weight)}
        return [p for p in self.model.parameters() if id(p) not in skip]

    def write_back(self) -> None:
        with torch.no_grad():
            self.model.get_input_embeddings().weight[self.vocab] = self.weight


def shared_prefix_len(ids, attn) -> int:
    """Leading positions where every row of the batch holds the same (real) token."""
    same = ((ids == ids[:1]) & (attn == 1)).all(0)
    return int(same.long().cumprod(0).sum())


def loss_on(head: VocabHead, ids, labels, attn, share_prefix: bool = True):
    """Mean next-token cross-entropy over positions whose label is not ``IGNORE_INDEX``.

    Every trajectory opens with the same system prompt and tool definitions (~390 tokens). With ``share_prefix``
    that common prefix is run once and its keys/values repeated for the batch; the hidden states are the same
    numbers as running every row in full (a test checks loss and gradients), at about 40% of the cost.
    """

    n = shared_prefix_len(ids, attn) if share_prefix and len(ids) > 1 else 0
    if n >= 2:
        pre = head.hidden(ids[:1, :n], attn[:1, :n], use_cache=True)
        pre.cache.batch_repeat_interleave(len(ids))
        rest = head.hidden(ids[:, n:], attn, cache=pre.cache, use_cache=True).last_hidden_state
        hidden = torch.cat([pre.last_hidden_state.expand(len(ids), -1, -1), rest], 1)
    else:
        hidden = head.hidden(ids, attn).last_hidden_state
    target = labels[:, 1:]
    keep = target != IGNORE_INDEX
    logits = head.logits(hidden[:, :-1][keep])
    return F.cross_entropy(logits, head.column[target[keep]]), int(keep.sum())


def fine_tune(
    examples: list[Labelled],
    masked: bool,
    steps: int = 120,
    batch_size: int = 8,
    lr: float = 3e-3,
    seed: int = 0,
    vocab: str | list[int] = "data",
    model_kw: dict | None = None,
    n_threads: int | None = 1,
    progress=None,
) -> Run:
    """Train a fresh stand-in (same seed -> same start for both runs) on ``examples`` with or without the mask.

    ``vocab="data"`` restricts the softmax to :func:`data_vocab` (see the module docstring); a list gives the
    ids explicitly; ``"full"`` uses all 151,936. ``progress(step, loss)`` is called every step if given.
    """
    template = examples[0].template
    model = fresh_model(flavor_of(template), seed, model_kw)
    ids_vocab = (
        list(range(model.config.vocab_size))
        if vocab == "full"
        else data_vocab(examples)
        if vocab == "data"
        else sorted(vocab)
    )
    head = VocabHead(model, ids_vocab)
    params = head.body_parameters() + [head.weight]
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(params, lr=lr)
    # Short warm-up, then linear decay: the random start has very large logits (wide embedding init).
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10) * max(0.1, 1 - s / steps))
    pad = tokenizer_for(template).pad_token_id
    model.train()
    losses, seen, order, t0, c0 = [], 0, [], time.perf_counter(), time.process_time()
    with threads(n_threads):
        for step in range(steps):
            if len(order) < batch_size:
                order += torch.randperm(len(examples), generator=g).tolist()
            idx, order = order[:batch_size], order[batch_size:]
            loss, n = loss_on(head, *batch_of(examples, idx, masked, pad))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            seen += n
            if progress:
                progress(step, losses[-1])
    head.write_back()
    model.eval()
    return Run(
        masked,
        model,
        ids_vocab,
        losses,
        time.perf_counter() - t0,
        steps,
        seen,
        dict(
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            vocab=len(ids_vocab),
            template=template,
            model_kw=model_kw or "stand-in default",
            threads=n_threads,
            params=sum(p.numel() for p in model.parameters()),
        ),
        time.process_time() - c0,
    )
