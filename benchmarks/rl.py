"""§14.5.7, learning from reward, measured: a GRPO run on the real offline model, and the policy before and after.

Two sections, both resumable, both saved under ``benchmarks/results/rl/`` with date, machine, model and commit:

  nice python benchmarks/rl.py train --start lora --family multi --steps 30 --group 4
      GRPO (``toolkit.rl.train.train_tasks``) from the shipped SFT adapter (``--start lora``) or the base model
      (``--start base``) on one task family; the adapter goes to the cache, the reward curve to
      ``train_<start>_<family>.json``. A killed run continues from its last save. ``--engine vllm``: the rollouts
      sampled on the kit's vLLM server (``toolkit.rl.served``; ``make vllm``), ``train_<start>_<family>_vllm.json``.
  nice python benchmarks/rl.py eval --start lora --family multi [--rl] --n 24
      Greedy episodes on held-out tasks (seeds the training never draws) before and, with ``--rl``, after the
      run: mean reward, tasks met, calls per task, failed and unneeded calls; ``eval_<start>_<family>.json``.
      ``--temperature 1 --samples 2``: sampled episodes, the same random draws before and after
      (``toolkit.rl.evaluate``); ``eval_<start>_<family>_sampled.json``. ``--engine vllm``: the adapter of the
      ``--engine vllm`` training run (``..._vllm.json``).
  nice python benchmarks/rl.py rollouts --family multi --n 2
      The rollouts' cost with and without the kept prefix (``toolkit.rl.policy.Sampler(keep_prefix=...)``): the
      same groups (same seeds) run both ways, one after the other; seconds, prompt tokens not prefilled again,
      and whether the episodes came out the same; ``rollouts_<start>_<family>.json``.

Leaves out: BFCL and the loop questions before/after (a ``lora`` run's adapter is model
``qwen2.5-coder-0.5b+lora+rl`` there, a ``base`` run's ``qwen2.5-coder-0.5b+rl``, ``$TOOLKIT_RL_ADAPTER`` naming it:
``benchmarks/loop_questions.py --pass lora-rl|base-rl``, ``benchmarks/bfcl.py --model``;
``results/rl/README.md``), any timed assert. The engines side by side: ``benchmarks/rl_engines.py``. The stand-in
is refused: a random-weight model earns no reward to learn from.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from toolkit import cliargs  # noqa: E402
from toolkit.backends.http import ServerError  # noqa: E402
from toolkit.backends.vllm_local import state as vllm_state  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "rl"
FAMILIES = [
    "call",
    "decline",
    "multi",
    "calc",
    "warmer",
    "all",
    "mix",
    "ask",
    "blend",
    "askcall",
    "askmix",
    "askpair",
]  # toolkit.rl.envs.FAMILIES (its import is slow)
STARTS = {"lora": "qwen2.5-coder-0.5b+lora", "base": "qwen2.5-coder-0.5b"}


def _run_name(a) -> str:
    """A run's name: the family, then what sets it apart (``-resample3``, ``-family``, ``-seed1``, ``-vllm``), so
    runs never share files. Seed 0 adds nothing, so the runs saved before seeds were named keep their names."""
    name = a.family + (f"-resample{a.resample}" if a.resample else "")
    name += f"-{a.resample_within}" if a.resample_within else ""
    name += f"-seed{a.seed}" if a.seed else ""
    return name + ("-vllm" if a.engine == "vllm" else "")


def _adapter_dir(start: str, family: str) -> Path:
    from toolkit.paths import cache_dir

    return cache_dir() / "rl" / f"bench-{start}-{family}"


def _load(start: str, threads: int):
    import torch

    from toolkit.models import load

    torch.set_num_threads(threads)
    loaded = load(STARTS[start], dtype="float32", quiet=True)
    if not loaded.semantic:
        raise SystemExit("the real offline model is not installed: this benchmark needs it (make real-model)")
    return loaded


def train(a) -> int:
    from toolkit.eval.report import meta
    from toolkit.rl.envs import tasks as tasks_for
    from toolkit.rl.train import saved_run, train_tasks

    out = _adapter_dir(a.start, _run_name(a))
    try:  # before any model loads: a damaged save is one line, and nothing is overwritten
        saved_run(out)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    loaded = _load(a.start, a.threads)
    tasks = tasks_for(a.family, 0, a.tasks)
    print(f"model: {loaded.description}\n{a.family}: {len(tasks)} tasks, adapter -> {out}", flush=True)
    how = dict(steps=a.steps, group=a.group, lr=a.lr, max_new=a.max_new, seed=a.seed, out=out, beta=a.beta)
    how["resample"] = a.resample
    how["resample_within"] = a.resample_within
    if a.engine == "vllm":  # rollouts on the kit's vLLM server, the adapter handed over each step (toolkit.rl.served)
        from toolkit.rl.served import ServedSampler

        with ServedSampler(loaded, max_new=a.max_new, temperature=1.0, threads=a.threads) as served:
            res = train_tasks(loaded, tasks, policy=served, **how)
            res["engine"] = {"name": "vllm", "argv": served.server.argv[2:], "handovers": served.handovers}
            res["engine"]["handover_s"] = round(served.handover_s, 2)
    else:
        res = train_tasks(loaded, tasks, **how) | {"engine": {"name": "transformers"}}
    doc = meta(loaded.description, ROOT, section="train", start=a.start, family=a.family, adapter=str(out)) | res
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"train_{a.start}_{_run_name(a).replace('-vllm', '_vllm')}.json"
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    curve = [s["mean_reward"] for s in res["steps"]]
    k = max(1, len(curve) // 4)
    print(f"mean reward {sum(curve[:k]) / k:+.3f} (first {k}) -> {sum(curve[-k:]) / k:+.3f} (last {k}); -> {path}")
    return 0


def eval_(a) -> int:
    from toolkit.eval.report import load_results, meta
    from toolkit.rl.envs import EVAL_SEED
    from toolkit.rl.envs import tasks as tasks_for
    from toolkit.rl.evaluate import evaluate
    from toolkit.rl.train import load_adapter

    folder = _adapter_dir(a.start, _run_name(a)) / "adapter"  # the adapter of that engine's training run
    if a.rl and not (folder / "adapter_config.json").exists():  # before any model loads
        train_cmd = f"benchmarks/rl.py train --start {a.start} --family {a.family} --engine {a.engine}"
        print(f"no RL adapter at {folder}: run `{train_cmd}`")
        return 2
    loaded = _load(a.start, a.threads)
    tasks = tasks_for(a.family, EVAL_SEED, a.n)[: a.n]
    suffix = ("_sampled" if a.temperature > 0 else "") + ("_vllm" if a.engine == "vllm" else "")
    path = OUT / f"eval_{a.start}_{a.family}{suffix}.json"
    doc = load_results(path) or meta(loaded.description, ROOT, section="eval", start=a.start, family=a.family)
    which = "after" if a.rl else "before"
    if a.rl:
        load_adapter(loaded, folder)
        loaded.model.eval()
    print(f"model: {loaded.description} ({which} RL)\n{len(tasks)} held-out {a.family} tasks", flush=True)
    ran = loaded.description + (f" + RL adapter {folder}" if a.rl else "")
    how = {"max_new": a.max_new, "temperature": a.temperature, "samples": a.samples, "seed": a.seed}
    res = evaluate(loaded, tasks, batch=4 if a.temperature == 0 else 12, **how)
    doc[which] = res | {"commit": meta("", ROOT)["commit"], "model": ran, "settings": how}
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    for k in ("before", "after"):
        if k in doc:
            print(f"{k:6s} " + "  ".join(f"{n} {v}" for n, v in doc[k]["summary"].items()))
    print(f"-> {path}")
    return 0


def rollouts(a) -> int:
    from toolkit.eval.report import meta
    from toolkit.rl.envs import EVAL_SEED, rollout_group
    from toolkit.rl.envs import tasks as tasks_for
    from toolkit.rl.policy import Sampler

    loaded = _load(a.start, a.threads)
    tasks = tasks_for(a.family, EVAL_SEED, a.n)[: a.n]
    print(f"model: {loaded.description}\n{len(tasks)} groups of {a.group}, max {a.max_new} new tokens", flush=True)
    rows, texts = [], {}
    for keep in (False, True):
        sampler = Sampler(loaded, max_new=a.max_new, temperature=1.0, seed=a.seed, keep_prefix=keep)
        t0 = time.perf_counter()
        eps = [e for t in tasks for e in rollout_group(sampler, [t] * a.group)]
        secs = time.perf_counter() - t0
        texts[keep] = [e.messages for e in eps]
        rows.append({"keep_prefix": keep, "seconds": round(secs, 1), "sampled_tokens": sampler.tokens})
        rows[-1] |= {"batches": sampler.calls, "prompt_tokens_reused": getattr(sampler, "prefix_reused", 0)}
        print("  ".join(f"{k} {v}" for k, v in rows[-1].items()), flush=True)
    same = texts[False] == texts[True]
    ratio = rows[0]["seconds"] / max(rows[1]["seconds"], 1e-9)
    print(f"without / with the kept prefix: {ratio:.2f}x; episodes identical: {same}")
    doc = meta(loaded.description, ROOT, section="rollouts", start=a.start, family=a.family)
    doc |= {"rows": rows, "ratio": round(ratio, 2), "episodes_identical": same, "load": list(os.getloadavg())}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"rollouts_{a.start}_{a.family}.json"
    path.write_text(json.dumps(doc, indent=1))
    print(f"-> {path}")
    return 0


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("section", choices=["train", "eval", "rollouts"])
    p.add_argument("--start", choices=list(STARTS), default="lora")
    p.add_argument("--family", choices=FAMILIES, default="multi")
    p.add_argument("--steps", type=cliargs.count(1, 10_000), default=30)
    p.add_argument("--group", type=cliargs.count(2, 64), default=4)
    p.add_argument("--tasks", type=cliargs.count(1, 10_000), default=16)
    p.add_argument("--lr", type=cliargs.number(0.0, 1.0, lo_open=True), default=2e-4)
    p.add_argument("--beta", type=cliargs.number(0.0, 10.0), default=0.0, help="train: KL penalty (0: none)")
    p.add_argument(
        "--resample",
        type=cliargs.count(0, 16),
        default=0,
        help="train: other tasks drawn where a group has no spread (eval --rl: that run's adapter)",
    )
    p.add_argument(
        "--resample-within",
        choices=["family"],
        default=None,
        help="train: draw the other tasks from the step's own family, keeping the mix's proportions",
    )
    p.add_argument("--max-new", type=cliargs.count(1, 1024), default=96)
    p.add_argument(
        "--seed",
        type=cliargs.count(0, 2**31 - 1),
        default=0,
        help="train: the task order and the sampling (a replicate, another run's folder); eval --rl: that run's adapter",
    )
    p.add_argument("--n", type=cliargs.count(1, 1_000), default=24, help="eval, rollouts: held-out tasks")
    p.add_argument("--temperature", type=cliargs.number(0.0, 5.0), default=0.0, help="eval: 0 greedy")
    p.add_argument("--samples", type=cliargs.count(1, 64), default=1, help="eval: episodes per task")
    p.add_argument("--rl", action="store_true", help="eval: with the RL adapter (else the starting model)")
    p.add_argument("--threads", type=cliargs.count(1, 1024), default=2)
    p.add_argument(
        "--engine",
        choices=["transformers", "vllm"],
        default="transformers",
        help="train: the rollouts' sampler; eval --rl: the adapter that engine's training run made",
    )
    a = p.parse_args(argv)
    if a.resample_within and not a.resample:  # else it would be ignored without a word
        p.error("--resample-within needs --resample N (N > 0): it says where the redrawn tasks come from")
    if a.section == "train" and a.engine == "vllm":  # before any model loads
        usable, why = vllm_state()
        if not usable:
            p.error(f"--engine vllm: {why}")
    try:
        return {"train": train, "eval": eval_, "rollouts": rollouts}[a.section](a)
    except ServerError as e:  # the rollouts' server died or refused mid-run: the checkpoints so far are kept
        raise SystemExit(f"{e}; rerun the same command to continue from the last saved step") from None


if __name__ == "__main__":
    raise SystemExit(main())
