"""GRPO's arithmetic, visible: group-relative advantages, spread over the model's own tokens, and the clipped loss.

What it does
- ``advantages(rewards, group)``: each trajectory's reward minus its group's mean, divided by the group's standard
  deviation (+1e-4) — the group-relative advantage of GRPO (TRL's ``scale_rewards="group"``); a group whose
  rewards are all equal teaches nothing (advantage 0); ``has_spread(rewards, group)`` says whether any group can teach.
- ``token_mask(episode_messages, tools, tokenizer)``: which tokens of a rendered trajectory are the model's own,
  from the SFT labels (:func:`toolkit.sft.labels.label`): tool results, user turns and headers are masked exactly
  as in SFT, so the environment's words never get a gradient.
- ``loss(logps, old_logps, adv, mask, ref_logps=None, beta=0.0, eps=0.2, loss_type="dapo")``: the PPO-style
  clipped surrogate per token, ``-min(ρ·A, clip(ρ, 1-ε, 1+ε)·A)`` with ``ρ = exp(logp - old_logp)``, plus ``β`` times
  the k3 KL estimate to a reference; averaged over all trained tokens of the batch (``dapo``), or per sequence then
  over sequences (``grpo``). Returns the loss and the mean KL.
- ``kl(logps, ref_logps, mask)``: the k3 estimate of the KL to a reference, per trained token (what the trainer
  prints: how far the adapter has moved the model from where it started).
- ``sequence_logps(model, ids)``: each token's log-probability under ``model`` (the logits one position earlier).
- ``trained_logps(model, rows, temperature)``: the same for the model's own tokens of rendered trajectories only
  (SFT's labelled rows), through SFT's forward pass (the group's shared prompt runs once, the output head only at
  trained positions): ``(logps, mask)`` padded to ``(rows, longest)``, the tokens in order.

What it leaves out
- Sampling and the training loop: see the trainer; importance sampling across engines; entropy masking.
"""

from __future__ import annotations

import torch

from toolkit.sft.labels import IGNORE_INDEX, label
from toolkit.sft.lora import group_pieces


def advantages(rewards: list[float], group: int) -> list[float]:
    """Group-relative advantages for ``rewards`` laid out as consecutive groups of ``group``."""
    if group < 2 or len(rewards) % group:
        raise ValueError(f"rewards ({len(rewards)}) must come in whole groups of at least 2 (group={group})")
    r = torch.tensor(rewards, dtype=torch.float64).view(-1, group)
    a = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)
    return a.flatten().tolist()


def has_spread(rewards: list[float], group: int | None = None) -> bool:
    """Whether any run of ``group`` consecutive rewards (all of them if ``group`` is None) holds two that differ: a
    group GRPO can learn from. A group whose members all scored the same has no advantage to spread."""
    group = group or max(1, len(rewards))
    return any(len(set(rewards[i : i + group])) > 1 for i in range(0, len(rewards), group))


def token_mask(messages: list[dict], tools: list[dict] | None, tokenizer, template: str = "qwen2.5"):
    """(ids, mask): a trajectory's token ids and True where the model wrote the token (the SFT labels)."""
    lab = label(messages, tools, template, tokenizer=tokenizer)
    return lab.ids, lab.trained


def sequence_logps(model, ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(token_t | tokens_<t) for t >= 1, shape (batch, len - 1), at the sampling temperature (as TRL)."""
    logits = model(input_ids=ids).logits[:, :-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def trained_logps(model, rows, temperature: float = 1.0):
    """(logps, mask): per row, the log-probabilities of its trained tokens in order, padded with mask False."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    pieces, _ = group_pieces(model, rows)
    per_row: dict[int, torch.Tensor] = {}
    for idx, hidden, target in pieces:
        keep = target != IGNORE_INDEX
        logits = base.lm_head(hidden[keep]).float() / temperature
        lp = torch.log_softmax(logits, -1).gather(-1, target[keep][:, None]).squeeze(-1)
        for j, part in zip(idx, lp.split(keep.sum(1).tolist())):
            per_row[j] = part
    parts = [per_row[j] for j in range(len(rows))]
    logps = torch.nn.utils.rnn.pad_sequence(parts, batch_first=True)
    mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(p), dtype=torch.bool) for p in parts], batch_first=True)
    return logps, mask


def kl(logps, ref_logps, mask) -> float:
    """The k3 estimate of KL(policy || reference) per trained token, averaged over the batch's trained tokens."""
    d = (ref_logps - logps).detach()
    m = mask.to(d.dtype)
    return float(((torch.exp(d) - d - 1) * m).sum() / m.sum().clamp(min=1))


def loss(logps, old_logps, adv, mask, ref_logps=None, beta: float = 0.0, eps: float = 0.2, loss_type: str = "dapo"):
    """GRPO's clipped surrogate (+ β·KL); ``logps``, ``old_logps``, ``mask``: (batch, tokens); ``adv``: (batch,)."""
    mask = mask.to(logps.dtype)
    ratio = torch.exp(logps - old_logps)
    a = adv[:, None].to(logps.dtype)
    per_token = -torch.min(ratio * a, torch.clamp(ratio, 1 - eps, 1 + eps) * a)
    kl = torch.zeros_like(logps)
    if ref_logps is not None and beta:
        kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
        per_token = per_token + beta * kl
    if loss_type == "grpo":
        value = ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
    elif loss_type in ("dapo", "bnpo"):
        value = (per_token * mask).sum() / mask.sum().clamp(min=1)
    else:
        raise ValueError(f"loss_type must be grpo, dapo or bnpo, not {loss_type!r}")
    return value, float((kl * mask).sum().detach() / mask.sum().clamp(min=1))
