"""What each saving of the LoRA fine-tune (toolkit.sft.lora) buys on this CPU, measured side by side in one run.

One group of generated conversations, the real offline model, one optimizer-free forward + backward per setting:
  plain          every row in full, logits at every position, adapters on all 24 layers
  + head         logits only at trained positions
  + upper        adapters on layers 12-23 only (autograd records nothing below them)
  + shared       the group's common prefix (system prompt + tool list) once, the rest in chunks of similar length
and the dtype: a forward pass of the same group's prefix in float32 vs bfloat16 (bf16 fwd+bwd is too slow on a CPU
without bf16 instructions to time whole). Prints tokens/s and the ratio to plain; saves
benchmarks/results/sft_speed.json (date, machine, model, commit). Never asserts a time.

Run:  python benchmarks/sft_speed.py [--per-group 6] [--reps 2]
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from toolkit import cliargs  # noqa: E402
from toolkit.paths import provenance  # noqa: E402  (standard library only: a usage error costs no torch import)


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--per-group", type=cliargs.count(2), default=6)
    p.add_argument("--reps", type=cliargs.count(1), default=2)
    p.add_argument("--threads", type=cliargs.count(1), default=2)
    p.add_argument("--out", type=cliargs.out_file, default=Path(__file__).parent / "results" / "sft_speed.json")
    a = p.parse_args(argv)
    commit = provenance()["commit"]  # the code that runs: read before the run (HEAD may move while it runs)
    from toolkit import fetch

    if not fetch.is_installed():
        print("the real offline model is not installed: make real-model", file=sys.stderr)
        return 2
    import torch

    from toolkit.models import load
    from toolkit.sft import data, lora

    torch.set_num_threads(a.threads)
    exs = data.dataset(1, seed=123, per_group=a.per_group)
    rows_of = {}
    results = []

    def timed(model, rows, share, head):
        best = None
        for _ in range(a.reps):
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            loss, ran, trained = lora.group_loss(model, rows, share, head)
            loss.backward()
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        return best, ran, loss.item()

    configs = [
        ("plain", 0, False, False),
        ("+ head at trained positions", 0, False, True),
        ("+ adapters on upper 12 layers", 12, False, True),
        ("+ shared prefix, chunked rest", 12, True, True),
    ]
    plain_tokens = None
    for name, first, share, head in configs:
        loaded = load("qwen2.5-coder-0.5b", quiet=True)
        rows = rows_of.setdefault("r", data.labelled(exs, loaded.tokenizer))
        model = lora.attach(loaded.model, lora.LoraSettings(first_layer=first))
        secs, ran, loss = timed(model, rows, share, head)
        plain_tokens = plain_tokens or sum(len(r.ids) for r in rows)
        results.append(
            dict(
                setting=name,
                seconds=round(secs, 2),
                tokens_run=ran,
                loss=round(loss, 5),
                rows_per_s=round(len(rows) / secs, 3),
                row_tokens_per_s=round(plain_tokens / secs, 1),
            )
        )
        print(f"{name:<34} {secs:7.1f} s  {plain_tokens / secs:7.1f} row-tokens/s  loss {loss:.5f}", flush=True)
        del model, loaded
    for r in results:
        r["speedup_vs_plain"] = round(results[0]["seconds"] / r["seconds"], 2)
    # dtype: forward of the shared prefix only
    n = lora.common_prefix(rows_of["r"])
    dtypes = []
    for dt in ("float32", "bfloat16"):
        loaded = load("qwen2.5-coder-0.5b", dtype=dt, quiet=True)
        ids = torch.tensor([rows_of["r"][0].ids[:n]])
        with torch.inference_mode():
            t0 = time.perf_counter()
            loaded.model.model(input_ids=ids)
            secs = time.perf_counter() - t0
        dtypes.append(dict(dtype=dt, tokens=n, seconds=round(secs, 2), tokens_per_s=round(n / secs, 1)))
        print(f"forward of {n} prefix tokens in {dt:<9} {secs:7.1f} s  {n / secs:7.1f} tokens/s", flush=True)
        del loaded
    print("\n| setting | s | speed-up vs plain |\n|---|---|---|")
    for r in results:
        print(f"| {r['setting']} | {r['seconds']} | {r['speedup_vs_plain']}× |")
    print(f"\nbfloat16 / float32 forward time: {dtypes[1]['seconds'] / dtypes[0]['seconds']:.1f}×")
    out = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        machine=dict(
            platform=platform.platform(), cpus=os.cpu_count(), threads=a.threads, load_avg=os.getloadavg(), cpu=_cpu()
        ),
        model="qwen2.5-coder-0.5b (real offline)",
        commit=commit,
        group=dict(rows=len(rows_of["r"]), row_tokens=plain_tokens, shared_prefix=n),
        settings=results,
        dtype=dtypes,
    )
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"saved {a.out}")
    return 0


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
