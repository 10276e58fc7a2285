"""Issue 38, item 2: TRL's ``GRPOTrainer`` itself on this CPU, on the kit's calculator family, beside the kit's trainer.

What it measures, in one run on this machine (float32, the shipped SFT adapter merged, a fresh LoRA of the kit's
shape from :func:`toolkit.rl.train.attach`):
- TRL 1.16's ``GRPOTrainer`` (pinned) with ``environment_factory``: one environment per rollout whose one method,
  ``calculator``, runs the kit's calculator tool for real (the host loop's executor); TRL renders the method as a
  tool, parses the model's ``<tool_call>`` with its own Qwen response template, runs it and feeds the result back.
  The tool's description is the kit's schema's. The reward is the kit's (the scoring that ends an episode of
  :func:`toolkit.rl.envs.rollout_group`, on the final text and the environment's recorded calls), so both trainers
  pay for the same thing.
- Per step: seconds, mean reward, TRL's logged KL and completion length. Rollouts run on the trainer's own model
  (``model.generate``): TRL's vLLM modes need a GPU (colocate) or NCCL weight transfer (server).
- Beside it, in the same process: the kit's own trainer (:func:`toolkit.rl.train.train_tasks`, its transformers
  sampler) on the same tasks, steps and group size, seconds per step. (The kit's vLLM rollouts were 1.47x faster
  than its transformers sampler on the same machine: ``benchmarks/rl_engines.py``.)

Leaves out: training to convergence, evaluation of the adapter (it is thrown away), the free-form (``ask``) and
single-call families (their tools are JSON Schemas the generator made up; TRL takes tools as Python functions).
Saves ``benchmarks/results/rl/trl_calc.json`` with date, machine, model and commit; prints a table. Never asserts a
time.

Run: python benchmarks/rl_trl.py --steps 3 --tasks 8 --max-new 192
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL; said above
from toolkit import cliargs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "rl"
KIT_MAX_NEW = 48  # new tokens per turn in the kit's calc runs (TRL's budget counts every turn and tool result)


def _environment():
    """A class TRL instantiates once per rollout: the kit's calculator as a method, its calls recorded. TRL writes a
    tool's schema from its method's docstring, so the docstring is the kit's own schema in that form."""
    from toolkit.loop.execute import execute
    from toolkit.parse import ToolCall
    from toolkit.tools import TOOLS

    class KitCalculator:
        def reset(self, **row):
            self.results = []
            return None

        def calculator(self, expression: str) -> str:
            call = ToolCall(index=0, raw="", name="calculator", arguments={"expression": expression})
            result = execute([call], {"calculator": TOOLS["calculator"]}, parallel=False)[0]
            self.results.append(result)
            return json.dumps(result.result, ensure_ascii=False, default=str)

    schema = TOOLS["calculator"].schema["function"]
    arg = schema["parameters"]["properties"]["expression"]["description"]
    KitCalculator.calculator.__doc__ = f"{schema['description']}\n\nArgs:\n    expression: {arg}\n"
    return KitCalculator


def _reward(completions, environments, value, question, **_):
    """The kit's reward for each rollout (the scoring :func:`toolkit.rl.envs.rollout_group` ends an episode with):
    its final text, and the calls its environment ran."""
    from toolkit.rl.envs import Task, finish_episode

    out = []
    for msgs, env, v, q in zip(completions, environments, value, question, strict=True):
        text = (msgs[-1].get("content") or "") if msgs else ""
        task = Task("calc", [{"role": "user", "content": q}], [], truth={"value": v, "needed": 1})
        out.append(finish_episode(task, [], env.results, text).reward)
    return out


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=cliargs.count(1, 100), default=3)
    p.add_argument("--tasks", type=cliargs.count(1, 200), default=8, help="calc tasks (each step takes one)")
    p.add_argument("--group", type=cliargs.count(2, 16), default=4)
    p.add_argument(
        "--max-new",
        type=cliargs.count(8, 1024),
        default=192,
        help="TRL: tokens per rollout, every turn and tool result (96 cuts most calculator episodes short)",
    )
    p.add_argument("--threads", type=cliargs.count(1, 1024), default=2)
    a = p.parse_args(argv)

    import torch  # lazy: heavy, after the arguments are checked
    import transformers  # lazy: as torch
    import trl  # lazy: as torch
    from datasets import Dataset  # lazy: as torch

    from toolkit.eval.report import meta
    from toolkit.models import load
    from toolkit.rl.envs import tasks as tasks_for
    from toolkit.rl.train import attach, train_tasks

    torch.set_num_threads(a.threads)
    loaded = load("qwen2.5-coder-0.5b+lora", dtype="float32", quiet=True)
    if not loaded.semantic:
        raise SystemExit("the real offline model is not installed: this benchmark needs it (make real-model)")
    print(f"model: {loaded.description}; trl {trl.__version__}, transformers {transformers.__version__}", flush=True)
    tasks = tasks_for("calc", 0, a.tasks)
    rows = [{"prompt": t.messages, "value": t.truth["value"], "question": t.question} for t in tasks]
    model = attach(loaded.model, 8, None)
    cfg = trl.GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-probe-"),  # nothing is saved there (save_strategy "no")
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=a.group,
        num_generations=a.group,
        max_completion_length=a.max_new,
        max_steps=a.steps,
        learning_rate=4e-4,
        temperature=1.0,
        beta=0.0,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        max_tool_calling_iterations=4,
        seed=0,
    )
    times, t0 = [], [time.perf_counter()]

    class Clock(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            now = time.perf_counter()
            times.append(round(now - t0[0], 2))
            t0[0] = now

    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=loaded.tokenizer,
        reward_funcs=_reward,
        args=cfg,
        train_dataset=Dataset.from_list(rows),
        environment_factory=_environment(),
        callbacks=[Clock()],
    )
    t0[0] = time.perf_counter()
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    steps = [
        {"step": i + 1, "seconds": s} | {k: h.get(k) for k in ("reward", "kl", "completions/mean_length", "loss")}
        for i, (s, h) in enumerate(zip(times, logs))
    ]
    # the kit's own trainer on the same tasks, steps and group, in this process and on this machine: a fresh model
    # (TRL's copy carries its LoRA), the kit's transformers sampler, the per-turn budget of the kit's calc runs
    kit_model = load("qwen2.5-coder-0.5b+lora", dtype="float32", quiet=True)
    res = train_tasks(kit_model, tasks, steps=a.steps, group=a.group, lr=4e-4, max_new=KIT_MAX_NEW, log=print)
    secs = [st["seconds"] for st in res["steps"]]
    kit = [
        {"step": st["step"], "seconds": round(b - a_, 2), "reward": st["mean_reward"], "kl": st["kl"]}
        for st, a_, b in zip(res["steps"], [0.0] + secs, secs)
    ]
    how = {"steps": a.steps, "tasks": a.tasks, "group": a.group, "max_new": a.max_new, "threads": a.threads}
    how["kit_max_new_per_turn"] = KIT_MAX_NEW
    doc = meta(loaded.description, ROOT, section="trl", trl=trl.__version__, settings=how) | {
        "steps": steps,
        "kit": kit,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "trl_calc.json"
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    print("\n| trainer | steps | median s/step |\n|---|---|---|")
    for name, rows in (("TRL GRPOTrainer (environment_factory, model.generate)", steps), ("kit (Sampler)", kit)):
        med = sorted(r["seconds"] for r in rows)[len(rows) // 2] if rows else float("nan")
        print(f"| {name} | {len(rows)} | {med:.1f} |")
    for r in steps + kit:
        print(r)
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
