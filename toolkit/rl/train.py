"""A small GRPO loop (LoRA with peft): sample a group per prompt, reward it, advantages, the loss of :mod:`grpo`.

What it does
- ``train(loaded, prompts, reward_fn, steps, group, ...)``: per step, for one prompt (token ids) it samples ``group``
  completions with the model's own ``generate``, scores each with ``reward_fn(completion_ids) -> float``, turns
  the rewards into group-relative advantages and takes one optimizer step on :func:`toolkit.rl.grpo.loss` (one
  iteration per batch, so the old log-probabilities are the current ones detached, as in TRL). Only completion
  tokens are trained. Prints a progress line (step, mean reward, KL, tokens/s, ETA), writes ``results.json``
  with the reward curve, and saves the adapter every ``save_every`` steps (resumable: a run restarts from the
  last saved step of ``out``).
- ``load_adapter(loaded, folder)``: the saved adapter back on the base model.

What it leaves out
- Multi-turn episodes with tool results inside the trained sequence (their mask is :func:`grpo.token_mask`; the
  loop here trains single completions), a reference model (``beta=0``, TRL's default), batching across prompts.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model

from toolkit.rl import grpo


def attach(model, r: int = 8, targets="all-linear"):
    return get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, lora_dropout=0.0))


def _sample(model, prompt: list[int], group: int, max_new: int, temperature: float, eos: int | None):
    ids = torch.tensor([prompt] * group)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=temperature,
            top_k=0,
            max_new_tokens=max_new,
            pad_token_id=eos,
            eos_token_id=eos,
        )
    comp = out[:, len(prompt) :]
    mask = torch.ones_like(comp, dtype=torch.bool)
    if eos is not None:  # tokens after the first stop token are padding
        after = (comp == eos).int().cumsum(1) - (comp == eos).int()
        mask = after == 0
    return out, comp, mask


def train(
    loaded,
    prompts: list[list[int]],
    reward_fn: Callable[[list[int]], float],
    steps: int = 10,
    group: int = 8,
    lr: float = 1e-4,
    max_new: int = 32,
    temperature: float = 1.0,
    seed: int = 0,
    out: Path | None = None,
    save_every: int = 5,
    log: Callable[[str], None] = print,
) -> dict:
    """Run GRPO for ``steps`` steps; returns (and saves under ``out``) the results with the reward curve."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = loaded.model if isinstance(loaded.model, PeftModel) else attach(loaded.model)
    loaded.model = model
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    results = {"steps": [], "seed": seed, "group": group, "lr": lr, "max_new": max_new, "model": loaded.name}
    start = 0
    if out is not None and (Path(out) / "results.json").exists():
        results = json.loads((Path(out) / "results.json").read_text())
        start = len(results["steps"])
        load_adapter(loaded, Path(out) / "adapter")
        model = loaded.model
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
        rng = random.Random(seed + start)
        torch.manual_seed(seed + start)
        log(f"resuming at step {start}")
    eos = getattr(loaded.tokenizer, "eos_token_id", None)
    t0 = time.perf_counter()
    for step in range(start, steps):
        prompt = rng.choice(prompts)
        model.eval()
        full, comp, mask = _sample(model, prompt, group, max_new, temperature, eos)
        rewards = [reward_fn([t for t, m in zip(c.tolist(), k.tolist()) if m]) for c, k in zip(comp, mask)]
        adv = torch.tensor(grpo.advantages(rewards, group), dtype=torch.float32)
        model.train()
        logps = grpo.sequence_logps(model, full, temperature)[:, len(prompt) - 1 :]
        value, kl = grpo.loss(logps, logps.detach(), adv, mask)
        opt.zero_grad()
        value.backward()
        opt.step()
        n_tok = int(mask.sum())
        secs = time.perf_counter() - t0
        done = step + 1 - start
        row = {"step": step + 1, "mean_reward": sum(rewards) / len(rewards), "kl": kl, "loss": float(value)}
        row |= {"tokens": n_tok, "seconds": round(secs, 2)}
        results["steps"].append(row)
        eta = secs / done * (steps - step - 1)
        log(
            f"step {step + 1}/{steps}  mean reward {row['mean_reward']:.3f}  KL {kl:.4f}  "
            f"{sum(r['tokens'] for r in results['steps'][start:]) / secs:.1f} tok/s  ETA {eta:.0f} s"
        )
        if out is not None and ((step + 1) % save_every == 0 or step + 1 == steps):
            save(model, Path(out), results)
    return results


def save(model, out: Path, results: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out / "adapter")
    (out / "results.json").write_text(json.dumps(results, indent=1))


def load_adapter(loaded, folder: Path):
    """Put the adapter saved in ``folder`` on ``loaded``'s base model (trainable, to continue a run)."""
    base = loaded.model.get_base_model() if isinstance(loaded.model, PeftModel) else loaded.model
    if isinstance(loaded.model, PeftModel):
        base = loaded.model.unload()
    loaded.model = PeftModel.from_pretrained(base, folder, is_trainable=True)
    return loaded
