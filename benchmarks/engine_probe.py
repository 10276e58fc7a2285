"""Where a decode step's time goes on a GPU: kernel profile of one engine step, and the per-layer pieces timed
alone (attention variants, the four matmuls, RMSNorm) inside CUDA graphs. Qwen3-0.6B shape, random bf16 weights.

    python benchmarks/engine_probe.py          # needs CUDA; prints tables

What it leaves out: anything but batch 1; prefill.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# torch is imported inside each function: the command line is checked first, so a usage error is instant


def graph_time_us(fn, calls=28, reps=50):
    """Median µs per call of ``fn`` captured ``calls`` times in one CUDA graph (launch gaps included)."""
    from toolkit.backends.engine_tune import graph_us  # lazy: imports torch (the command line is checked first)

    return graph_us(lambda: [fn() for _ in range(calls)], reps=reps, warmups=3) / calls


def attention_variants(kv=8, rep=2, d=128, dt="bfloat16"):
    import torch  # lazy: the command line is checked first (a usage error never waits for torch)
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dt = getattr(torch, dt)

    print("\n## decode attention, one layer (µs per call, 28 calls per graph)\n")
    print("| variant | b=1024 | b=8192 |")
    print("| --- | ---: | ---: |")
    rows = {}
    for b in (1024, 8192):
        L = 16384
        cache = torch.randn(2, kv, L, d, device="cuda", dtype=dt)
        q = torch.randn(1, kv, rep, d, device="cuda", dtype=dt)
        pos = torch.tensor([b - 100], device="cuda")
        ar = torch.arange(L, device="cuda")
        zero, ninf = torch.zeros((), dtype=dt, device="cuda"), torch.full((), float("-inf"), dtype=dt, device="cuda")
        mask = torch.where(ar[:b] <= pos, zero, ninf).view(1, 1, 1, b)
        k, v = cache[0, :, :b].unsqueeze(0), cache[1, :, :b].unsqueeze(0)
        ref = None

        def sdpa(backends):
            def f():
                with sdpa_kernel(backends):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=d**-0.5)

            return f

        def manual():
            s = torch.matmul(q, k.transpose(-1, -2)) * d**-0.5 + mask
            return torch.matmul(torch.softmax(s, dim=-1, dtype=torch.float32).to(dt), v)

        def manual_bmm():  # scores in fp32 via baddbmm-like: scale folded into q
            s = torch.matmul(q * d**-0.5, k.transpose(-1, -2)).float() + mask.float()
            return torch.matmul(torch.softmax(s, -1).to(dt), v)

        seqused = torch.tensor([b - 99], device="cuda", dtype=torch.int32)
        cu_q = torch.tensor([0, 1], device="cuda", dtype=torch.int32)
        cu_k = torch.tensor([0, b], device="cuda", dtype=torch.int32)
        q1 = q.reshape(1, kv * rep, d)  # [tokens, heads, d]
        kt, vt = cache[0, :, :b].transpose(0, 1), cache[1, :, :b].transpose(0, 1)  # [b, kv, d] strided views

        def flash_varlen():
            return torch.ops.aten._flash_attention_forward(
                q1, kt, vt, cu_q, cu_k, 1, b, 0.0, False, False, scale=d**-0.5, seqused_k=seqused
            )[0]

        def flash_split(n):
            def f():
                return torch.ops.aten._flash_attention_forward(
                    q1, kt, vt, cu_q, cu_k, 1, b, 0.0, False, False, scale=d**-0.5, seqused_k=seqused, num_splits=n
                )[0]

            return f

        qe = q.permute(0, 2, 1, 3)  # [1, rep, kv, d]: BMHK, the query-head groups as 2 query rows
        ke, ve = cache[0, :, :b].transpose(0, 1).unsqueeze(0), cache[1, :, :b].transpose(0, 1).unsqueeze(0)

        def eff_seqlen():
            return torch.ops.aten._efficient_attention_forward(
                qe, ke, ve, None, None, None, None, None, 0.0, 0, False, scale=d**-0.5, seqlen_k=seqused
            )[0]

        variants = [
            ("sdpa efficient + mask", sdpa([SDPBackend.EFFICIENT_ATTENTION])),
            ("sdpa math + mask", sdpa([SDPBackend.MATH])),
            ("sdpa cudnn + mask", sdpa([SDPBackend.CUDNN_ATTENTION])),
            ("matmul-softmax-matmul", manual),
            ("matmul fp32 scores", manual_bmm),
            ("flash varlen, seqused_k", flash_varlen),
            ("flash varlen, 4 splits", flash_split(4)),
            ("flash varlen, 16 splits", flash_split(16)),
            ("efficient, seqlen_k", eff_seqlen),
        ]
        ref = manual().float()  # [1, kv, rep, d]
        for name, fn in variants:
            try:
                out = fn().float()
                if name.startswith("efficient,"):
                    out = out.permute(0, 2, 1, 3)
                out = out.reshape(ref.shape)
                err = float((out - ref).norm() / ref.norm())
                us = graph_time_us(fn)
                rows.setdefault(name, []).append(f"{us:.1f} (err {err:.1e})")
            except Exception as exc:
                rows.setdefault(name, []).append(f"fails: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


def matmuls(dt="bfloat16"):
    import torch  # lazy: the command line is checked first (a usage error never waits for torch)
    import torch.nn.functional as F

    dt = getattr(torch, dt)
    print("\n## one-token matmuls (µs per call; GB/s of weight read)\n")
    print("| matmul | µs | GB/s |")
    print("| --- | ---: | ---: |")
    for name, n, k in [
        ("qkv 1024→4096", 4096, 1024),
        ("o 2048→1024", 1024, 2048),
        ("gate_up 1024→6144", 6144, 1024),
        ("down 3072→1024", 1024, 3072),
        ("lm_head 1024→151936", 151936, 1024),
    ]:
        ws = [torch.randn(n, k, device="cuda", dtype=dt) for _ in range(4)]  # rotate: beyond L2 reuse
        x = torch.randn(1, k, device="cuda", dtype=dt)
        it = iter(range(10**9))

        def f():
            return F.linear(x, ws[next(it) % 4])

        us = graph_time_us(f, calls=28 if n < 100000 else 4)
        print(f"| {name} | {us:.1f} | {n * k * 2 / us / 1e3:,.0f} |")
    x = torch.randn(1, 1024, device="cuda", dtype=dt)
    w = torch.randn(1024, device="cuda", dtype=dt)
    print(f"| F.rms_norm [1,1024] | {graph_time_us(lambda: F.rms_norm(x, (1024,), w, 1e-6)):.1f} | |")
    y = torch.randn(1, 24, 128, device="cuda", dtype=dt)
    print(f"| roll [1,24,128] | {graph_time_us(lambda: y.roll(64, -1)):.1f} | |")
    print(f"| add [1,1024] | {graph_time_us(lambda: x + x):.1f} | |")


def main(argv=None):
    from toolkit import cliargs

    cliargs.Parser(description=__doc__.splitlines()[0]).parse_args(argv)  # no options: anything else is refused
    import torch  # lazy: the command line is checked first (a usage error never waits for torch)

    if not torch.cuda.is_available():
        print("engine_probe: needs CUDA (it times GPU kernels); nothing to do here")
        return 0
    import engine as bench  # benchmarks/engine.py, beside this script (its folder is on the path)
    from transformers import AutoModelForCausalLM, Qwen3Config

    from toolkit.backends.engine import Engine

    print(torch.cuda.get_device_name(), torch.__version__)
    for part in (attention_variants, matmuls):
        try:
            part()
        except Exception:
            traceback.print_exc()
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(Qwen3Config(**bench.QWEN3_06B), dtype=torch.bfloat16).eval()
    prompt = bench.prompt_ids(512, 1)
    for attention in ("sdpa", "matmul", "flash"):
        for compile_ in (False, True):
            try:
                e = Engine(model, graphs=True, compile=compile_, attention=attention, max_len=1024)
                t0 = time.perf_counter()
                g = e.generate(prompt, max_new_tokens=64, stop_ids=set())
                print(
                    f"\n### attention={attention} compile={compile_}: first generate {time.perf_counter() - t0:.1f} s"
                )
                g = e.generate(prompt, max_new_tokens=256, stop_ids=set())
                graph = e._body_graphs[1024]
                t = []
                for _ in range(30):
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e._pos.fill_(600)
                    a.record()
                    graph.replay()
                    b.record()
                    b.synchronize()
                    t.append(a.elapsed_time(b))
                print(
                    f"body graph replay (bucket 1024): {sorted(t)[15] * 1e3:.0f} µs; generate: "
                    f"{(len(g.new_ids) - 1) / g.decode_s:.0f} tokens/s"
                )
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    e._pos.fill_(600)
                    with torch.no_grad():
                        e._body(1024)
                    torch.cuda.synchronize()
                ka = [x for x in prof.key_averages() if x.device_time_total > 0]
                ka.sort(key=lambda x: -x.device_time_total)
                print(
                    f"eager body: {sum(x.count for x in ka)} kernels, {sum(x.device_time_total for x in ka):.0f}"
                    " µs kernel time; top:"
                )
                for x in ka[:7]:
                    print(f"  {x.device_time_total:8.0f} µs {x.count:5d}x  {x.key[:90]}")
                del e
            except Exception:
                traceback.print_exc(limit=3)


if __name__ == "__main__":
    sys.exit(main())
