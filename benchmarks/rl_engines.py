"""Issue 38: a GRPO step's rollouts sampled by the kit's transformers sampler and by the kit's vLLM server, side by side.

What it measures, in one run on this machine (float32 in both, so both sample the same policy):
1. transformers: ``toolkit.rl.policy.Sampler`` (the kit's one decode loop, a group's rows in one batch, the shared
   prompt prefilled once) on the model the trainer holds: the shipped SFT adapter merged, plus a fresh RL LoRA
   (``toolkit.rl.train.attach``).
2. vLLM (CPU build, ``make vllm``): ``toolkit.rl.served.ServedSampler``, the same SFT-merged weights on the kit's
   vLLM server with LoRA enabled, and every step the trainer's new RL adapter handed over: saved (peft) and loaded
   at run time (``/v1/load_lora_adapter``), the previous one unloaded. The rollouts are the same episodes
   (``toolkit.rl.envs.rollout_group``, the kit's tools run for real), the policy's text from ``/v1/completions``.
Each "step" moves the RL adapter's weights by a small fixed random amount (the same in both engines), so the
sampler must drop what it kept and vLLM must load new weights, as in training; no gradient is taken (the update's
cost does not depend on the sampler). A check at the end makes the adapter large and compares greedy first turns:
trainer vs vLLM with the adapter vs vLLM without it, so a server that ignored the adapter would show.

``--rescore`` adds the check's agreement (:func:`agreement`) to a saved file. Saves
``benchmarks/results/rl/engines_<family>.json`` with date, machine, model and commit; prints the table and the
ratio. Never asserts a time.

Run: nice python benchmarks/rl_engines.py --family calc --n 4 --group 4 --steps 3 --max-new 48
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"  # read by the vLLM server this script starts
from toolkit import cliargs  # noqa: E402
from toolkit.backends.vllm_local import state as vllm_state  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "rl"
FAMILIES = ["call", "decline", "multi", "calc", "warmer"]


def agreement(first_turns: dict) -> dict:
    """Per task, how many leading characters of the trainer's greedy text each server text shares (leading spaces
    left out). A far-moved adapter makes garbage whose near-tied tokens split float32 engines after a few tokens, so
    exact equality says little; a shared start, against none without the adapter, says which weights ran."""
    import os.path

    mine = [t.lstrip() for t in first_turns["trainer"]]
    return {
        f"common_prefix_chars_{k}": [len(os.path.commonprefix([x, y.lstrip()])) for x, y in zip(mine, first_turns[k])]
        for k in ("vllm_with_adapter", "vllm_without_adapter")
    }


def rescore(path: Path) -> int:
    doc = json.loads(path.read_text())
    doc["check"] |= agreement(doc["check"]["first_turns"])
    path.write_text(json.dumps(doc, indent=1))
    print({k: v for k, v in doc["check"].items() if k != "first_turns"})
    return 0


def _lora_params(model):
    return [p for n, p in model.named_parameters() if "lora_B" in n or "lora_A" in n]


def _move(model, step: int, scale: float) -> None:
    """The step's fixed random move of the RL adapter (the same in both engines: seeded by the step)."""
    import torch

    g = torch.Generator().manual_seed(1000 + step)
    with torch.no_grad():
        for p in _lora_params(model):
            p.add_(torch.randn(p.shape, generator=g) * scale)


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--family", choices=FAMILIES, default="calc")
    p.add_argument("--n", type=cliargs.count(1, 100), default=4, help="tasks per step (one group each)")
    p.add_argument("--group", type=cliargs.count(2, 32), default=4)
    p.add_argument("--steps", type=cliargs.count(1, 50), default=3)
    p.add_argument("--max-new", type=cliargs.count(1, 512), default=48)
    p.add_argument("--move", type=cliargs.number(0.0, 1.0), default=2e-4, help="each step's random move of the LoRA")
    p.add_argument("--check-move", type=cliargs.number(0.0, 1.0), default=0.1, help="the check's move of the LoRA")
    p.add_argument("--threads", type=cliargs.count(1, 64), default=2)
    p.add_argument("--rescore", action="store_true", help="only add the check's agreement to the saved file")
    a = p.parse_args(argv)
    if a.rescore:
        return rescore(OUT / f"engines_{a.family}.json")
    usable, why = vllm_state()
    if not usable:  # before any model loads
        p.error(why)

    import torch

    from toolkit.eval.report import meta
    from toolkit.models import load, template_for
    from toolkit.qwen import STOP_IDS
    from toolkit.render import render
    from toolkit.rl.envs import EVAL_SEED, rollout_group
    from toolkit.rl.envs import tasks as tasks_for
    from toolkit.rl.policy import Sampler
    from toolkit.rl.served import ServedSampler
    from toolkit.rl.train import attach

    torch.set_num_threads(a.threads)
    loaded = load("qwen2.5-coder-0.5b+lora", dtype="float32", quiet=True)
    if not loaded.semantic:
        raise SystemExit("the real offline model is not installed: this benchmark needs it (make real-model)")
    loaded.model = attach(loaded.model)
    loaded.model.eval()
    start = {id(p): p.detach().clone() for p in _lora_params(loaded.model)}
    template, tok = template_for(loaded), loaded.tokenizer
    tasks = tasks_for(a.family, EVAL_SEED, a.n)[: a.n]
    print(
        f"model: {loaded.description} + a fresh RL LoRA (r=8)\n{a.family}: {len(tasks)} groups of {a.group}, "
        f"max {a.max_new} new tokens, {a.steps} steps, float32, {a.threads} threads",
        flush=True,
    )

    def reset():
        with torch.no_grad():
            for p in _lora_params(loaded.model):
                p.copy_(start[id(p)])

    def episodes(policy):
        return [e for t in tasks for e in rollout_group(policy, [t] * a.group)]

    rows = []
    sampler = Sampler(loaded, max_new=a.max_new, temperature=1.0, seed=0)
    for step in range(a.steps):
        _move(loaded.model, step, a.move)
        t0, tokens0 = time.perf_counter(), sampler.tokens
        eps = episodes(sampler)
        secs = time.perf_counter() - t0
        rows.append(
            dict(
                engine="transformers",
                step=step,
                handover_s=0.0,
                rollout_s=round(secs, 2),
                tokens=sampler.tokens - tokens0,
                mean_reward=round(sum(e.reward for e in eps) / len(eps), 3),
            )
        )
        print(rows[-1], flush=True)

    reset()
    served = ServedSampler(loaded, max_new=a.max_new, temperature=1.0, threads=a.threads)
    check, ready_s = {}, 0.0
    try:
        for step in range(a.steps):
            _move(loaded.model, step, a.move)
            if served.server is None:  # started at its first call: timed apart from the rollouts
                t0 = time.perf_counter()
                served.model_name()
                ready_s = time.perf_counter() - t0
                print(f"vLLM ready after {ready_s:.0f} s: {' '.join(served.server.argv[2:])}", flush=True)
            t0, tokens0, hand0 = time.perf_counter(), served.tokens, served.handover_s
            eps = episodes(served)
            secs = time.perf_counter() - t0
            hand = served.handover_s - hand0
            rows.append(
                dict(
                    engine="vllm",
                    step=step,
                    handover_s=round(hand, 2),
                    rollout_s=round(secs - hand, 2),
                    tokens=served.tokens - tokens0,
                    mean_reward=round(sum(e.reward for e in eps) / len(eps), 3),
                )
            )
            print(rows[-1], flush=True)
        # The check: an adapter far from zero, greedy first turns of each task, three ways.
        _move(loaded.model, 99, a.check_move)
        batch = [(t.messages, t.tools) for t in tasks]
        mine = Sampler(loaded, max_new=a.max_new, temperature=0.0)(batch)
        served.temperature = 0.0
        with_adapter = served(batch)
        body = dict(model=str(served.server.model), max_tokens=a.max_new, temperature=0.0, skip_special_tokens=False)
        body |= dict(
            prompt=[render(m, t, template, tokenizer=tok).ids for m, t in batch], stop_token_ids=sorted(STOP_IDS)
        )
        without = [c["text"] for c in sorted(served.complete(body)["choices"], key=lambda c: c["index"])]
        strip = [x.replace("<|im_end|>", "").strip() for x in mine]
        check = dict(
            tasks=len(batch),
            move=a.check_move,
            trainer_eq_vllm_with_adapter=sum(x == y.strip() for x, y in zip(strip, with_adapter)),
            trainer_eq_vllm_without_adapter=sum(x == y.strip() for x, y in zip(strip, without)),
            first_turns={"trainer": strip, "vllm_with_adapter": with_adapter, "vllm_without_adapter": without},
        )
        check |= agreement(check["first_turns"])
        print("check (greedy first turns, adapter moved far):", {k: v for k, v in check.items() if k != "first_turns"})
        argv = served.server.argv
    finally:
        served.close()

    def per(engine, key):
        r = [x for x in rows if x["engine"] == engine]
        return sum(x[key] for x in r) / len(r)

    hf_s, vl_s = per("transformers", "rollout_s"), per("vllm", "rollout_s") + per("vllm", "handover_s")
    print("\n| engine | rollout s/step | handover s/step | tokens/step | tokens/s (rollouts) |\n|---|---|---|---|---|")
    for e in ("transformers", "vllm"):
        print(
            f"| {e} | {per(e, 'rollout_s'):.1f} | {per(e, 'handover_s'):.2f} | {per(e, 'tokens'):.0f} | "
            f"{per(e, 'tokens') / per(e, 'rollout_s'):.1f} |"
        )
    print(
        f"\nper step, rollouts + weight handover: transformers {hf_s:.1f} s, vLLM {vl_s:.1f} s "
        f"({hf_s / vl_s:.2f}x); vLLM start {ready_s:.0f} s once per run"
    )
    doc = meta(loaded.description + " + RL LoRA r=8", ROOT, section="engines", family=a.family)
    doc |= dict(
        settings=vars(a),
        rows=rows,
        vllm_ready_s=round(ready_s, 1),
        vllm_argv=argv[2:],
        check=check,
        per_step_s={"transformers": round(hf_s, 2), "vllm": round(vl_s, 2)},
        load=list(os.getloadavg()),
    )
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"engines_{a.family}.json"
    path.write_text(json.dumps(doc, indent=1))
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
