"""The int8 build (toolkit.small) beside the float model it was made from, measured in one run on this machine.

Prints, side by side:
1. one matmul of the model's widest shape (4,864 x 896) at one thread, M = 1 (decode) and M = 256 (prefill): float32,
   bf16, torch's dynamic int8 (the kit's first build), torch's int8 weight-only kernel (what it ships now), and
   torchao / optimum-quanto where installed (not in requirements: pip install them to include them; their absence is
   printed);
2. for each model (float32 + adapter, bf16 + adapter, int8 + adapter in the kit's forward and in transformers'
   class): peak RSS (ru_maxrss) of loading it and
   answering one loop question, and again after a greedy decode run, seconds, and decode tokens/s at one thread,
   each in its own process;
3. BFCL native mode on the seeded 50 cases per category, from the saved runs (benchmarks/bfcl.py accuracy --limit 50
   --modes native, for qwen2.5-coder-0.5b+lora and qwen2.5-coder-0.5b+lora-int8): accuracy, tag rate where a call
   is due, and paired gained / lost case by case, against the issue's targets (within 2 points; tag rate >= 98%);
4. the loop questions (main + fresh, no crutches) from the saved runs of loop_questions.py --pass lora / lora-int8;
5. notebook 03's loop sections (§1-§3) run cell by cell in a fresh kernel on one CPU with the int8 build, in the kit's
   forward and in transformers' class: the kernel's ru_maxrss after each cell (issue 37: <= 1.1 GB).
Saves benchmarks/results/small_model.json with date, machine, commit. Never asserts a time.

Run: nice python benchmarks/small_model.py [--skip-models] [--tokens 48] [--notebook-runs 2]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from toolkit import cliargs

ROOT = Path(__file__).resolve().parents[1]

MODELS = {
    "float32": ("qwen2.5-coder-0.5b+lora", "float32"),
    "bf16": ("qwen2.5-coder-0.5b+lora", "bfloat16"),
    "int8": ("qwen2.5-coder-0.5b+lora-int8", None),
    # the same artifact in transformers' class (its modeling stack and torch._dynamo imported), as the kit loaded it
    # before toolkit.small_forward: what that forward saves, measured in the same run
    "int8 in transformers' class": ("qwen2.5-coder-0.5b+lora-int8", "transformers-class"),
}

CHILD = r"""
import json, resource, sys, time, torch
torch.set_num_threads(1)
from toolkit.backends.hf import HFBackend
from toolkit.loop.examples import ask
from toolkit.models import load
from toolkit.qwen import STOP_IDS
from toolkit.render import render
from toolkit.settings import LoopConfig
name, dtype, n = sys.argv[1], (sys.argv[2] if sys.argv[2] != "-" else None), int(sys.argv[3])
if dtype == "transformers-class":
    exec(TF_CLASS)
    dtype = None
t0 = time.perf_counter()
loaded = load(name, dtype=dtype, quiet=True)
load_s = time.perf_counter() - t0
trace = ask("What is 17 * 23?", loaded, tools=["calculator"], config=LoopConfig.for_model(loaded))
loop_s = time.perf_counter() - t0 - load_s
loop_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # load + one loop question (the issue's figure)
ids = render([{"role": "user", "content": "Write a long story about a robot."}], template="qwen2.5").ids
g = HFBackend.from_loaded(loaded).generate(list(ids), max_new_tokens=n, stop_ids=set())
print(json.dumps(dict(model=loaded.description, load_s=load_s, loop_s=loop_s, answer=trace.answer,
                      decode_tok_s=len(g.new_ids) / g.decode_s, prefill_tok_s=g.prefilled / g.prefill_s,
                      peak_rss_mb=loop_peak, peak_rss_with_decode_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""


def matmuls() -> list[dict]:
    import torch  # lazy: the usage errors above never wait for it
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.backends.quantized.engine = "fbgemm"
    from torch.ao.nn.quantized.dynamic import Linear as QLinear
    from torch.ao.quantization import per_channel_dynamic_qconfig

    N, K = 4864, 896
    w = torch.randn(N, K)
    rows = []
    for M in (1, 256):
        x = torch.randn(M, K)
        f = torch.nn.Linear(K, N, bias=False)
        f.weight.data = w
        f.qconfig = per_channel_dynamic_qconfig
        q = QLinear.from_float(f)
        s = w.abs().amax(1) / 127
        wq = (w / s[:, None]).round().clamp(-127, 127).to(torch.int8)
        wb, xb, sb = w.bfloat16(), x.bfloat16(), s.bfloat16()
        cands = {
            "float32": lambda: F.linear(x, w),
            "bf16": lambda: F.linear(xb, wb),
            "torch dynamic int8 (shipped first)": lambda: q(x),
            "torch int8 weight-only, bf16 x (shipped)": lambda: torch.ops.aten._weight_int8pack_mm(xb, wq, sb),
        }
        cands.update(_optional(w, x))
        for name, fn in cands.items():
            if isinstance(fn, str):
                rows.append(dict(M=M, kernel=name, us=None, note=fn))
                continue
            rows.append(dict(M=M, kernel=name, us=_median_us(fn, 20 if M == 256 else 200)))
    return rows


def _optional(w, x) -> dict:
    out = {}
    try:
        import torch
        from torchao.quantization import Int8WeightOnlyConfig, quantize_

        m = torch.nn.Sequential(torch.nn.Linear(w.shape[1], w.shape[0], bias=False))
        m[0].weight.data = w.clone()
        quantize_(m, Int8WeightOnlyConfig())
        out["torchao int8 weight-only"] = lambda: m(x)
    except Exception as e:  # not installed, or not runnable here: said in the table
        out["torchao int8 weight-only"] = f"not run: {type(e).__name__}"
    try:
        import torch
        from optimum.quanto import freeze, qint8, quantize

        m2 = torch.nn.Sequential(torch.nn.Linear(w.shape[1], w.shape[0], bias=False))
        m2[0].weight.data = w.clone()
        quantize(m2, weights=qint8)
        freeze(m2)
        out["optimum-quanto qint8"] = lambda: m2(x)
    except Exception as e:
        out["optimum-quanto qint8"] = f"not run: {type(e).__name__}"
    return out


def _median_us(fn, n: int) -> float:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2] * 1e6


def model_runs(tokens: int) -> list[dict]:
    rows = []
    for key, (name, dtype) in MODELS.items():
        res = subprocess.run(
            [sys.executable, "-c", CHILD.replace("TF_CLASS", repr(_TF_CLASS)), name, dtype or "-", str(tokens)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        )
        if res.returncode != 0:
            rows.append(dict(build=key, error=(res.stderr.strip().splitlines() or ["?"])[-1][:200]))
            continue
        rows.append(dict(build=key, **json.loads(res.stdout.strip().splitlines()[-1])))
    return rows


NB03 = ROOT / "notebooks" / "03_host_loop.ipynb"
_PEAK = "import resource as _r; _P.append((%d, round(_r.getrusage(_r.RUSAGE_SELF).ru_maxrss / 1024)))"


def notebook03_peaks(runs: int) -> list[dict]:
    """Notebook 03's loop sections (§1-§3, up to "## 4") in a fresh kernel on one CPU, the int8 build, ru_maxrss (MiB)
    after each code cell: issue 37's "kernel peak for notebook 03's loop", for the kit's forward and transformers'
    class side by side."""
    import os

    import nbformat  # lazy: the usage errors above never wait for it
    from nbclient import NotebookClient

    out, env, cpus = [], dict(os.environ), os.sched_getaffinity(0)
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOOLKIT_MODEL=MODELS["int8"][0])
    os.sched_setaffinity(0, {min(cpus)})  # the kernel inherits one CPU, as Binder's pod has about one
    try:
        for run in range(runs):
            for build, (_, how) in [(k, v) for k, v in MODELS.items() if k.startswith("int8")]:
                nb = nbformat.read(NB03, 4)
                cells = [nbformat.v4.new_code_cell("_P = []")]
                if how == "transformers-class":
                    cells.append(nbformat.v4.new_code_cell(_TF_CLASS))
                for i, c in enumerate(nb.cells):
                    if c.cell_type == "markdown" and c.source.lstrip().startswith("## 4"):
                        break
                    cells += [c] + ([nbformat.v4.new_code_cell(_PEAK % i)] if c.cell_type == "code" else [])
                cells.append(
                    nbformat.v4.new_code_cell(
                        "import json, sys; print(json.dumps([_P, 'torch._dynamo' in sys.modules]))"
                    )
                )
                nb.cells = cells
                NotebookClient(nb, timeout=900, resources={"metadata": {"path": str(NB03.parent)}}).execute()
                text = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
                peaks, dynamo = json.loads(text.strip().splitlines()[-1])
                out.append(
                    dict(build=build, run=run + 1, peak_mib=max(p for _, p in peaks), cells=peaks, dynamo=dynamo)
                )
    finally:
        os.sched_setaffinity(0, cpus)
        os.environ.clear()
        os.environ.update(env)
    return out


_TF_CLASS = (
    "import functools\nfrom toolkit import small\nsmall.load = functools.partial(small.load, transformers_class=True)"
)


REFERENCES = {  # the float runs the int8 build is paired with, case by case on its seeded 50 per category
    "float32": Path("bfcl_qwen2.5-coder-0.5b+lora.json"),  # the seeded 50, float32
    "bf16": Path("full") / "bfcl_qwen2.5-coder-0.5b+lora.json",  # every case, bf16 (the reference)
}


def bfcl() -> dict:
    from toolkit.eval.learned import compare, row
    from toolkit.eval.report import load_results

    res = ROOT / "benchmarks" / "results"
    q = load_results(res / "int8" / "bfcl_qwen2.5-coder-0.5b+lora-int8.json")
    if not q:
        return {"note": "no int8 BFCL run saved yet (benchmarks/bfcl.py accuracy --model qwen2.5-coder-0.5b+lora-int8)"}
    rows, metas = [], {"int8": q["accuracy"]["meta"]}
    for ref, path in REFERENCES.items():
        flt = load_results(res / path)
        if not flt:
            continue
        metas[ref] = flt["accuracy"]["meta"]
        cmp = compare(flt, q)  # "adapter" = the int8 build, "base" = the float model, on the same case ids
        for r in cmp["rows"]:
            if r["mode"] != "native":
                continue
            a, b = r["adapter"], r["base"]
            delta = round(100 * (a["accuracy"] - b["accuracy"]), 6)  # 0.68 - 0.66 is 2.0000000000000018 in floats
            rows.append(
                dict(
                    reference=ref,
                    category=r["category"],
                    n=a["n"],
                    float_pct=100 * b["accuracy"],
                    int8_pct=100 * a["accuracy"],
                    delta=delta,
                    within_2=abs(delta) <= 2,
                    int8_tag_rate=a["tag_rate"],
                    gained=r["gained"],
                    lost=r["lost"],
                )
            )
    due = [c for c in q["accuracy"]["data"]["cases"] if c["mode"] == "native" and "irrelevance" not in c["id"]]
    tagged = row(due)["tagged"] if due else 0  # the kit's one count of tagged answers (toolkit.eval.learned)
    return dict(rows=rows, int8_tag_rate_due=tagged / len(due) if due else None, metas=metas, whole=_whole())


def _whole() -> dict | None:
    """The whole irrelevance category from the first token (benchmarks/int8_decisions.py), where it was run."""
    f = ROOT / "benchmarks" / "results" / "int8" / "decisions_irrelevance.json"
    if not f.exists():
        return None
    rows = {r["model"]: r for r in json.loads(f.read_text(encoding="utf-8"))["data"]["rows"]}
    return {m: dict(right=r["right"], n=r["n"]) for m, r in rows.items()}


def loops() -> list[dict]:
    res = ROOT / "benchmarks" / "results"
    out = []
    for which in ("lora", "lora-int8"):
        for suffix in ("", "_fresh"):
            f = res / f"loop_questions_{which}{suffix}.json"
            if not f.exists():
                out.append(dict(pass_=which, set=suffix.strip("_") or "main", note="not run"))
                continue
            doc = json.loads(f.read_text(encoding="utf-8"))
            rows = doc.get("rows", [])
            out.append(
                dict(
                    pass_=which, set=suffix.strip("_") or "main", met=sum(bool(r.get("met")) for r in rows), n=len(rows)
                )
            )
    return out


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--skip-models", action="store_true", help="only the matmuls and the saved BFCL / loop runs")
    p.add_argument(
        "--notebook-runs", type=cliargs.count(0, 10), default=2, help="notebook 03 kernel-peak runs per build (0: skip)"
    )
    p.add_argument("--tokens", type=cliargs.count(8, 4096), default=48, help="greedy decode tokens per model")
    p.add_argument("--out", type=cliargs.out_file, default=str(ROOT / "benchmarks" / "results" / "small_model.json"))
    a = p.parse_args(argv)
    from toolkit.eval.report import meta  # lazy: torch

    mm = matmuls()
    print("## One 4,864 x 896 matmul at one thread (median µs)\n\n| M | kernel | µs | vs float32 |\n|---|---|---|---|")
    base = {r["M"]: r["us"] for r in mm if r["kernel"] == "float32"}
    for r in mm:
        us = f"{r['us']:,.0f}" if r["us"] else r["note"]
        ratio = f"{base[r['M']] / r['us']:.2f}x" if r["us"] else "—"
        print(f"| {r['M']} | {r['kernel']} | {us} | {ratio} |")
    models = [] if a.skip_models else model_runs(a.tokens)
    if models:
        print("\n## Load + one loop question, then greedy decode at one thread (each in its own process)\n")
        print(
            "| build | peak RSS MB, load + loop | with the decode run | load s | loop s | decode tok/s | prefill tok/s | answer |"
            "\n|---|---|---|---|---|---|---|---|"
        )
        for r in models:
            if "error" in r:
                print(f"| {r['build']} | — | — | — | — | — | — | error: {r['error']} |")
            else:
                print(
                    f"| {r['build']} | {r['peak_rss_mb']:,.0f} | {r['peak_rss_with_decode_mb']:,.0f} | {r['load_s']:.1f} | "
                    f"{r['loop_s']:.1f} | "
                    f"{r['decode_tok_s']:.2f} | {r['prefill_tok_s']:.1f} | {r['answer'][:40]!r} |"
                )
    nb = notebook03_peaks(a.notebook_runs) if a.notebook_runs else []
    if nb:
        print("\n## Notebook 03's loop sections (§1-§3) in a fresh kernel, one CPU, int8 build: kernel peak\n")
        print("| build | run | peak MiB | peak MB (decimal) | torch._dynamo imported |\n|---|---|---|---|---|")
        for r in nb:
            print(
                f"| {r['build']} | {r['run']} | {r['peak_mib']:,} | {r['peak_mib'] * 2**20 / 1e6:,.0f} | {r['dynamo']} |"
            )
        print("issue 37's target: <= 1.1 GB (1,049 MiB if decimal, 1,126 MiB if binary)")
    b = bfcl()
    print("\n## BFCL native, seeded 50 per category: int8 vs float (same cases)\n")
    if "rows" in b:
        print(
            "| reference | category | n | float % | int8 % | Δ | within 2 | int8 tag rate | gained | lost |\n"
            "|---|---|---|---|---|---|---|---|---|---|"
        )
        for r in b["rows"]:
            print(
                f"| {r['reference']} | {r['category']} | {r['n']} | {r['float_pct']:.1f} | {r['int8_pct']:.1f} | "
                f"{r['delta']:+.1f} | {'yes' if r['within_2'] else 'NO'} | {r['int8_tag_rate']:.2f} | {r['gained']} | "
                f"{r['lost']} |"
            )
        print(f"\nint8 tag rate where a call is due: {b['int8_tag_rate_due']:.1%} (target >= 98%)")
        if b["whole"]:
            print(
                "irrelevance, all cases, first token (int8_decisions.py): "
                + ", ".join(f"{m} {w['right']}/{w['n']}" for m, w in b["whole"].items())
            )
    else:
        print(b["note"])
    lq = loops()
    print("\n## Loop questions, no crutches\n\n| pass | set | met |\n|---|---|---|")
    for r in lq:
        print(f"| {r['pass_']} | {r['set']} | {r.get('met', '—')}/{r.get('n', '—')} {r.get('note', '')} |")
    doc = dict(
        meta=meta("qwen2.5-coder-0.5b+lora vs +lora-int8", repo=ROOT),
        matmuls=mm,
        models=models,
        bfcl=b,
        loops=lq,
        notebook03=nb,
    )
    Path(a.out).write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    print(f"\nsaved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
