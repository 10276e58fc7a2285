"""A small GRPO trainer (LoRA with peft): sample a group, reward each member, advantages, one clipped-loss step.

What it does
- ``train_tasks(loaded, tasks, steps, group, ...)``: per step one task of :mod:`toolkit.rl.envs`, ``group``
  episodes rolled out together (:func:`envs.rollout_group` with the batched :class:`toolkit.rl.policy.Sampler`;
  the tools run for real), one reward per episode, its group-relative advantage spread over every token the model
  wrote in the episode: the episode is rendered again and labelled as SFT labels it, so tool results, user turns
  and headers get no gradient (:func:`grpo.trained_logps`).
- ``train(loaded, prompts, reward_fn, steps, group, ...)``: the same update on bare token ids with a reward on the
  completion's ids (a toy task: the smoke test, a first look in notebook 12).
- Both: one update (:func:`update`, the loss of :mod:`grpo` with one iteration per batch, so the old
  log-probabilities are the current ones detached, as TRL's default); a group whose rewards are all equal teaches
  nothing and skips the backward pass (its KL is not measured: ``None``, logged as "no spread, no update"), unless
  ``resample`` draws other tasks until one has a spread (DAPO's dynamic sampling; ``resample_within="family"``
  draws them from the drawn task's own family, so a mix keeps its proportions of trained steps); a task with a
  ``partner`` (:func:`toolkit.rl.envs.paired_decline_tasks`) is rolled out beside it, a group of each, and both groups
  go into one update, each with advantages relative to its own group (a step redraws only where neither group has a
  spread; the row's ``partner`` holds the partner's rewards, ``rewards`` the task's own); the KL
  printed is to the model the run started from (the adapters switched off: one extra forward without gradients;
  the loss has ``beta=0`` unless asked, TRL's default); LoRA on the upper layers only, placed as the kit's SFT places it
  (:func:`toolkit.sft.lora.attach`); a progress line (step, mean reward, KL, tokens/s, ETA); ``results.json``
  with the reward curve, the adapter and the optimizer's state saved every ``save_every`` steps under ``out``; a
  rerun with the same settings resumes from the last save (more ``steps`` than before extend a run) and takes the
  steps an unbroken run would (runs saved before the optimizer's state was: AdamW starts afresh, said in the log);
  ``results.json`` lists each resume (``resumed``: after which step, when, whether AdamW's state came back).
- ``load_adapter(loaded, folder)``: a saved adapter back on the base model.

What it leaves out
- A separate reference model (the KL penalty, ``beta``, is off by default as in TRL; when on, the reference is the
  same model with its adapters switched off), several optimizer iterations per batch, batching across tasks.
- The sampled ids themselves: an episode is trained on its rendering, whose ids can differ from the sampled ones
  where a tokenizer splits the same text another way (``toolkit.backends.drift`` counts how often).
"""

from __future__ import annotations

import datetime
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import PeftModel

from toolkit.models import template_for
from toolkit.qwen import STOP_IDS
from toolkit.rl import grpo
from toolkit.rl.envs import BatchPolicy, Task, rollout_group
from toolkit.rl.policy import Sampler
from toolkit.sft.labels import IGNORE_INDEX, label
from toolkit.sft.lora import LoraSettings
from toolkit.sft.lora import attach as attach_sft


@dataclass
class Row:
    """A sequence to train on: its ids and SFT-style labels (the id where trained, -100 elsewhere)."""

    ids: list[int]
    labels: list[int]


OPTIMIZER_FILE = "optimizer.pt"  # beside adapter/ and results.json: a resumed run continues AdamW's moments


def attach(model, rank: int = 8, first_layer: int | None = None):
    """Fresh LoRA adapters on layers ``first_layer``.. (default: the upper half), everything else frozen."""
    n = model.config.num_hidden_layers
    first = n // 2 if first_layer is None else first_layer
    return attach_sft(model, LoraSettings(rank=rank, alpha=2 * rank, first_layer=first, token_rows=()))


def update(model, opt, rows, rewards: list[float], group: int, temperature: float, beta: float = 0.0) -> dict:
    """One GRPO step on ``rows`` (consecutive groups of ``group``): returns loss, KL and trained tokens. ``beta``:
    the weight of the KL penalty to the model the run started from (0: none, TRL's default)."""
    adv = grpo.advantages(rewards, group)
    if not any(abs(a) > 0 for a in adv):
        return {"loss": 0.0, "kl": None, "trained_tokens": 0, "advantages": adv}  # no forward: KL not measured
    with torch.no_grad(), model.disable_adapter():  # the reference: the model the run started from
        ref, _ = grpo.trained_logps(model, rows, temperature)
    model.train()
    logps, mask = grpo.trained_logps(model, rows, temperature)
    loss, _ = grpo.loss(logps, logps.detach(), torch.tensor(adv), mask, ref_logps=ref, beta=beta)
    opt.zero_grad()
    loss.backward()
    opt.step()
    kl = grpo.kl(logps, ref, mask)
    return {"loss": float(loss.detach()), "kl": kl, "trained_tokens": int(mask.sum()), "advantages": adv}


def _start(loaded, settings: dict, rank: int, first_layer: int | None, out, log):
    # the model before the RL adapter goes on: a fresh process attaches a new adapter before it compares with the
    # saved run, one resumed in the same process carries it already; both name the model that was saved
    results = {"model": loaded.describe(unmerged_lora=False), "settings": settings, "steps": []}
    if not isinstance(loaded.model, PeftModel):
        loaded.model = attach(loaded.model, rank, first_layer)
    start = 0
    if out is not None and (saved := saved_run(out)) is not None:
        if saved.get("settings") == settings and saved.get("model") == results["model"]:
            results = saved
            load_adapter(loaded, Path(out) / "adapter")
            start = len(results["steps"])
        else:
            was = saved.get("settings") if isinstance(saved.get("settings"), dict) else {}
            differ = sorted(k for k in set(was) | set(settings) if was.get(k) != settings.get(k))
            differ += ["model"] if saved.get("model") != results["model"] else []
            log(f"{out}: saved with another {', '.join(differ)}; starting over")
    opt = torch.optim.AdamW([p for p in loaded.model.parameters() if p.requires_grad], lr=settings["lr"])
    if start:  # AdamW's moments as saved, so a resumed run takes the steps an unbroken one would
        restored = _restore(opt, Path(out) / OPTIMIZER_FILE)
        log(f"resuming at step {start}" + restored)
        # the file says it was resumed, when, and how (a step's "seconds" count from its own process's start)
        when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")  # as results files date
        results.setdefault("resumed", []).append(
            {"after_step": start, "date": when, "optimizer": restored.strip(" ()") or "saved"}
        )
    return results, start, opt


def saved_run(out) -> dict | None:
    """The run saved under ``out`` (its ``results.json``), or None where there is none. A file that is not a saved
    run is a ValueError in one line, and nothing is overwritten: move it away to start over."""
    path = Path(out) / "results.json"
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is unreadable ({type(e).__name__}): move it away to start over") from None
    if not (isinstance(saved, dict) and isinstance(saved.get("steps"), list)
            and isinstance(saved.get("resumed", []), list)):  # fmt: skip
        raise ValueError(f"{path} is not a saved RL run (no list of steps): move it away to start over")
    return saved


def _restore(opt, state: Path) -> str:
    """Load AdamW's saved state into ``opt``; what the resume line adds where it could not (none, or damaged)."""
    if not state.exists():
        return " (no optimizer state saved: AdamW starts afresh)"
    try:
        opt.load_state_dict(torch.load(state, weights_only=True))
    except Exception as e:  # noqa: BLE001  a truncated or foreign file: one line in the log, the run goes on
        return f" (optimizer state {state.name} unreadable, {type(e).__name__}: AdamW starts afresh)"
    return ""


def _log_step(results, row, start, steps, sampler, t0, log, out, save_every, model, opt):
    results["steps"].append(row)
    secs = time.perf_counter() - t0
    done, step = row["step"] - start, row["step"]
    log(
        f"step {step}/{steps}  {row.get('family', 'toy'):8s} mean reward {row['mean_reward']:+.3f}  "
        + (f"(partner {sum(p['rewards']) / len(p['rewards']):+.3f})  " if (p := row.get("partner")) else "")
        + (f"KL {row['kl']:.3g}  " if row["kl"] is not None else "no spread, no update  ")
        + f"{getattr(sampler, 'tokens', 0) / max(secs, 1e-9):.1f} tok/s  ETA {secs / done * (steps - step):.0f} s"
    )
    if out is not None and (step % save_every == 0 or step == steps):
        save(results, Path(out), model, opt)


def train_tasks(
    loaded,
    tasks: list[Task],
    steps: int = 20,
    group: int = 4,
    lr: float = 2e-4,
    max_new: int = 96,
    temperature: float = 1.0,
    seed: int = 0,
    rank: int = 8,
    first_layer: int | None = None,
    out: Path | None = None,
    save_every: int = 5,
    log: Callable[[str], None] = print,
    policy: BatchPolicy | None = None,
    beta: float = 0.0,
    resample: int = 0,
    resample_within: str | None = None,
) -> dict:
    """GRPO on episodes (see the module docstring). Returns (and saves under ``out``) the results. ``policy``: a
    scripted batch policy in place of the model's own sampling (tests); ``beta``: the KL penalty's weight;
    ``resample``: where a group's rewards are all equal, up to this many other tasks are drawn and rolled out
    instead (DAPO's dynamic sampling), so that the step has a spread to learn from; ``resample_within="family"``
    draws them from the same family as the step's own task (else from every task, where the family whose groups
    most often have a spread wins most steps)."""
    if group < 2:
        raise ValueError(f"group must be at least 2 (advantages are relative to the group), not {group}")
    if not tasks:
        raise ValueError("no tasks to train on")
    if resample_within not in (None, "family"):
        raise ValueError(f"resample_within must be None or 'family', not {resample_within!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0: GRPO learns from the spread of sampled episodes, not {temperature}")
    settings = {"group": group, "lr": lr, "max_new": max_new, "temperature": temperature}
    settings |= {"seed": seed, "rank": rank, "first_layer": first_layer}
    settings |= {"tasks": sorted({t.family for t in tasks}), "n_tasks": len(tasks)}
    if beta:  # only when set, so the saved runs without a penalty still resume
        settings["beta"] = beta
    if resample:
        settings["resample"] = resample
    if resample_within:
        settings["resample_within"] = resample_within
    if paired := sum(t.partner is not None for t in tasks):  # only when some are, as above
        settings["paired"] = paired
    results, start, opt = _start(loaded, settings, rank, first_layer, out, log)
    rng = random.Random(seed)
    order = [rng.choice(tasks) for _ in range(steps)]  # fixed by the seed, so a resumed run sees the same tasks
    sampler = policy or Sampler(loaded, max_new=max_new, temperature=temperature, seed=seed * 1_000_003 + start)
    template = template_for(loaded)
    torch.manual_seed(seed + start)
    t0 = time.perf_counter()
    for step in range(start, steps):
        task = order[step]
        ts = time.perf_counter()
        episodes = rollout_group(sampler, _members(task, group))
        extra = random.Random(seed * 7919 + step)  # the step's own draws: a resumed run draws the same
        tried, drawn = 0, task
        pool = [t for t in tasks if t.family == task.family] if resample_within else tasks
        while tried < resample and not grpo.has_spread([e.reward for e in episodes], group):
            tried, task = tried + 1, extra.choice(pool)
            episodes = rollout_group(sampler, _members(task, group))
        roll_s = time.perf_counter() - ts
        rewards = [e.reward for e in episodes]
        rows = [label(e.messages, e.task.tools, template, tokenizer=loaded.tokenizer) for e in episodes]
        up = update(loaded.model, opt, rows, rewards, group, temperature, beta)
        own, mates = episodes[:group], episodes[group:]
        row = {"step": step + 1, "family": task.family, "mean_reward": sum(rewards[:group]) / group}
        row |= {"rewards": rewards[:group], "met": sum(e.met for e in own), "calls": [len(e.results) for e in own]}
        if mates:  # the partner's group, trained in the same update
            row["partner"] = {
                "family": task.partner.family,
                "rewards": rewards[group:],
                "met": sum(e.met for e in mates),
            }
        if resample:
            row["resampled"] = tried
            row["drawn"] = drawn.family
        row |= {k: up[k] for k in ("loss", "kl", "trained_tokens")}
        row |= {"sampled_tokens": getattr(sampler, "tokens", 0), "rollout_s": round(roll_s, 2)}
        row["prefix_reused"] = getattr(sampler, "prefix_reused", 0)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        _log_step(results, row, start, steps, sampler, t0, log, out, save_every, loaded.model, opt)
    return results


def _members(task: Task, group: int) -> list[Task]:
    """A step's rollouts: ``group`` of the task, then ``group`` of its partner where it has one."""
    return [task] * group + ([task.partner] * group if task.partner else [])


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
    rank: int = 8,
    first_layer: int | None = None,
    out: Path | None = None,
    save_every: int = 5,
    log: Callable[[str], None] = print,
) -> dict:
    """GRPO on token ids with ``reward_fn(completion_ids) -> float`` (stop token left out)."""
    if group < 2:
        raise ValueError(f"group must be at least 2 (advantages are relative to the group), not {group}")
    settings = {"group": group, "lr": lr, "max_new": max_new, "temperature": temperature}
    settings |= {"seed": seed, "rank": rank, "first_layer": first_layer, "prompts": len(prompts)}
    results, start, opt = _start(loaded, settings, rank, first_layer, out, log)
    rng = random.Random(seed)
    order = [rng.randrange(len(prompts)) for _ in range(steps)]
    sampler = Sampler(loaded, max_new=max_new, temperature=temperature, seed=seed * 1_000_003 + start)
    torch.manual_seed(seed + start)
    t0 = time.perf_counter()
    for step in range(start, steps):
        prompt = list(prompts[order[step]])
        gens = sampler.sample([prompt] * group)
        rewards = [float(reward_fn([i for i in g.new_ids if i not in STOP_IDS])) for g in gens]
        rows = [Row(prompt + g.new_ids, [IGNORE_INDEX] * len(prompt) + list(g.new_ids)) for g in gens]
        up = update(loaded.model, opt, rows, rewards, group, temperature)
        row = {"step": step + 1, "mean_reward": sum(rewards) / group, "rewards": rewards}
        row |= {k: up[k] for k in ("loss", "kl", "trained_tokens")} | {"sampled_tokens": sampler.tokens}
        row["seconds"] = round(time.perf_counter() - t0, 2)
        _log_step(results, row, start, steps, sampler, t0, log, out, save_every, loaded.model, opt)
    return results


def save(results: dict, out: Path, model, opt=None) -> None:
    """The adapter, the optimizer's state (when given: AdamW's moments, about twice the adapter's size) and the
    results so far; ``results.json`` last, so a run killed mid-save resumes from the save before."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out / "adapter")
    if opt is not None:
        torch.save(opt.state_dict(), out / OPTIMIZER_FILE)
    (out / "results.json").write_text(json.dumps(results, indent=1))


def load_adapter(loaded, folder: Path):
    """Put the adapter saved in ``folder`` on ``loaded``'s base model (trainable, to continue a run)."""
    base = loaded.model.unload() if isinstance(loaded.model, PeftModel) else loaded.model
    loaded.model = PeftModel.from_pretrained(base, folder, is_trainable=True)
    return loaded
