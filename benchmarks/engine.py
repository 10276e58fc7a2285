"""Decode speed of one small model, eight ways, in one run; the agent workload with and without prefix reuse;
constrained vs unconstrained decoding. Prints markdown tables (``--out FILE.md`` also writes them, and FILE.json
with date, machine, software, model, commit, every row, where a token's time goes, the agent workload's rounds
and ratios, and the targets).

    python benchmarks/engine.py                 # GPU: Qwen3-0.6B shape, random bf16 weights; CPU: the stand-in
    python benchmarks/engine.py --T 512 --delta 64 --R 6      # agent workload sizes (defaults depend on device)

Rows: ``model.generate`` (transformers, dynamic cache), the engine eager (one Python op per kernel), with CUDA
graphs (sdpa and flash attention), then the fused paths in graphs: torch.compile, compile with one-row matmuls as
reductions, the kit's Triton kernels (``toolkit.backends.engine_triton``), and those with programmatic dependent
launch — each with its kernels per token by group. Tokens/s and % of the bandwidth floor (copy bandwidth
measured in this run / bytes of weights read per token).
On a GPU the model is built from the Qwen3-0.6B config with random weights: weights cannot be carried to the
lent machine, and the speed of a dense forward pass does not depend on the values of its weights.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from toolkit import cliargs  # noqa: E402

SHAPE = "qwen3-0.6b-shape"  # random weights in Qwen3-0.6B's shape (toolkit.speed), not a model to load
SECTIONS = ("decode", "variants", "agent", "constrained")


def _engine_model(text: str) -> str:
    """``qwen3-0.6b-shape`` or any model ``toolkit.models.load`` takes (checked by ``cliargs.model``)."""
    return SHAPE if text.strip() == SHAPE else cliargs.model(text)


def parser():
    """The command line, built before the imports below (torch (~5 s)): a usage error skips them."""
    p = cliargs.Parser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument(
        "--model", type=_engine_model, default=None, help=f"{SHAPE} (GPU default) | stand-in (CPU default) | a model"
    )
    p.add_argument("--prompt", type=cliargs.count(1), default=None, help="prompt tokens for the decode table")
    p.add_argument("--new", type=cliargs.count(1), default=None, help="new tokens per engine run")
    p.add_argument("--hf-new", type=cliargs.count(1), default=None, help="new tokens for the model.generate row")
    p.add_argument("--T", type=cliargs.count(1), default=None)
    p.add_argument("--delta", type=cliargs.count(1), default=None)
    p.add_argument("--R", type=cliargs.count(1), default=None)
    p.add_argument("--decode-per-round", type=cliargs.count(1), default=1)
    p.add_argument(
        "--agent-budget-s",
        type=cliargs.number(0.0, lo_open=True),
        default=90.0,
        help="stop the agent workload's rounds after this",
    )
    p.add_argument(
        "--no-compile", dest="compile", action="store_false", help="skip the fused rows (torch.compile, Triton)"
    )
    p.add_argument(
        "--skip", type=cliargs.one_of(SECTIONS, "section", allow_empty=True), default=[], help="sections to skip"
    )
    p.add_argument(
        "--threads", type=cliargs.count(1, 1024), default=None, help="CPU threads (default: torch's; 1 is polite)"
    )
    p.add_argument(
        "--out", type=cliargs.out_file, default=None, help="also write the printed tables to this markdown file"
    )
    return p


if __name__ == "__main__":
    parser().parse_args()  # exits 2 on a bad value, before the imports below

import torch  # noqa: E402

from toolkit import speed  # noqa: E402
from toolkit.backends.engine_steps import shared_prefix  # noqa: E402
from toolkit.paths import provenance  # noqa: E402
from toolkit.speed import engine_decode_rate as engine_rate  # noqa: E402
from toolkit.speed import hf_decode_rate as hf_rate  # noqa: E402
from toolkit.speed import prompt_ids, sync  # noqa: E402

LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def same_prefix(a, b) -> int:
    return shared_prefix(list(a), list(b), min(len(a), len(b)))


# ---------------------------------------------------------------- sections
DECODE_HEADER = [
    "| path | tokens/s | ms/token | % of floor | setup s | same tokens as engine eager |",
    "| --- | ---: | ---: | ---: | ---: | --- |",
]


def decode_row(name, rate, setup, toks, ref, floor):
    match = (
        "reference"
        if ref is None
        else ("yes" if toks == ref[: len(toks)] else f"first {same_prefix(toks, ref)} of {len(toks)}")
    )
    say(f"| {name} | {rate:,.1f} | {1e3 / rate:.2f} | {100 * rate / floor:.1f}% | {setup:.1f} | {match} |")


def decode_table(model, dev, args, floor):
    """model.generate, the engine eager, the engine with CUDA graphs. Returns (rates, graph engine, eager tokens)."""
    from toolkit.backends.engine import Engine

    prompt = prompt_ids(args.prompt, seed=1)
    say(f"## Decode, batch 1 (prompt {args.prompt} random tokens, greedy; engine rows {args.new} new tokens)")
    say()
    for line in DECODE_HEADER:
        say(line)
    rates = {}
    eager = Engine(model, graphs=False, max_len=args.prompt + args.new + 64)
    n_eager = args.new if dev.type == "cpu" else min(args.new, 64)
    rates["engine eager"], ref = engine_rate(eager, prompt, n_eager)
    rates["model.generate"], hf_toks = hf_rate(model, prompt, args.hf_new)
    decode_row(f"model.generate ({args.hf_new} tokens)", rates["model.generate"], 0.0, hf_toks, ref, floor)
    decode_row(f"engine eager, {eager.mode} ({n_eager} tokens)", rates["engine eager"], 0.0, ref, None, floor)
    fastest = (rates["engine eager"], eager)
    if dev.type == "cuda":
        # The masked-sdpa row shows what the attention kernel alone costs; the default row is FlashAttention.
        for label, kw in (("sdpa attention", dict(attention="sdpa")), ("", {})):
            try:
                t0 = time.perf_counter()
                e = Engine(model, graphs=True, max_len=args.prompt + args.new + 64, **kw)
                e.prepare(args.prompt + args.new + 1)
                setup = time.perf_counter() - t0
                rate, toks = engine_rate(e, prompt, args.new)
                rates[f"engine CUDA graph {label}".strip()] = rate
                decode_row(f"engine CUDA graph, {e.mode}", rate, setup, toks[:n_eager], ref, floor)
                fastest = max(fastest, (rate, e), key=lambda x: x[0])
            except Exception as exc:  # keep the rows above
                say(f"| engine CUDA graph {label} | failed: {_why(exc)[:200]} | | | | |")
    say()
    return rates, fastest, (prompt, ref, n_eager)


VARIANTS = (  # (label, Engine keywords); "triton ..." rows: the kit's Triton body (options named in the label)
    ("compile", dict(compile=True)),
    ("compile gemv", dict(compile="gemv")),
    ("triton+pdl untuned 3-kernel attention", dict(body="pdl untuned unfused")),
    ("triton+pdl 3-kernel attention", dict(body="pdl unfused")),
    ("triton", dict(body="")),
    ("triton+pdl", dict(body="pdl")),
)


def variants_table(model, args, floor, ref_info, fastest):
    """The engine's fused decode paths inside CUDA graphs: torch.compile (plain, and with the one-row matmuls as
    fused reductions), the kit's Triton kernels, and those with programmatic dependent launch. Returns
    ({row: rate}, fastest (rate, engine), per-variant details for the results file)."""
    from toolkit.backends.engine import Engine

    prompt, ref, n_eager = ref_info
    say("## Decode: fused paths (same prompt and tokens as above)")
    say()
    for line in DECODE_HEADER:
        say(line)
    rates, details = {}, {}
    pos = args.prompt + args.new // 2
    for label, kw in VARIANTS:
        try:
            t0 = time.perf_counter()
            if "body" in kw:  # lazy: triton is GPU-side; imported only where these rows run
                from toolkit.backends import engine_triton

                o = kw["body"]
                kw = dict(body=engine_triton.decoder(pdl="pdl" in o, tune="untuned" not in o, fused="unfused" not in o))
            e = Engine(model, graphs=True, max_len=args.prompt + args.new + 64, **kw)
            e.prepare(args.prompt + args.new + 1)
            setup = time.perf_counter() - t0
            rate, toks = engine_rate(e, prompt, args.new)
            rates[f"engine {e.mode}"] = rate
            decode_row(f"engine {e.mode}", rate, setup, toks[:n_eager], ref, floor)
            details[label] = speed.variant_detail(e, rate, setup, same_prefix(toks[:n_eager], ref), n_eager, floor, pos)
            fastest = max(fastest, (rate, e), key=lambda x: x[0])
        except Exception as exc:
            traceback.print_exc()
            details[label] = {"failed": _why(exc)}
            say(f"| {label} | failed: {details[label]['failed'][:200]} | | | | |")
    say()
    for line in speed.breakdown_lines(details, pos):
        say(line)
    return rates, fastest, details


def agent_table(model, dev, args, fast_kw):
    from toolkit.backends.engine import Engine

    T, D, R = args.T, args.delta, args.R
    total = T + R * D
    base = prompt_ids(total, seed=2)
    e = Engine(model, max_len=total + args.decode_per_round + 64, **fast_kw)
    e.prepare(total + args.decode_per_round + 1 if args.decode_per_round > 1 else 1)  # no capture inside timing
    e_mode = e.mode
    dense = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n and "lm_head" not in n)

    def flops(a, b):  # the arithmetic a prefill of positions a..b-1 must do (matmuls + attention)
        return speed.prefill_flops(model.config, a, b, dense)

    # Warm-up: first-call costs (kernel selection for new shapes) stay out of the timed rounds.
    e.reset()
    e.generate(base[:D], max_new_tokens=1, stop_ids=set())
    e.generate(base[: 2 * D], max_new_tokens=1, stop_ids=set())
    rounds = {}
    t_start = time.perf_counter()
    for reuse in (True, False):  # with reuse first: it is short; the other may hit the time budget
        e.reuse = True
        e.reset()
        e.generate(base[:T], max_new_tokens=0, stop_ids=set())  # the T-token prefix, cached before round 1
        e.reuse = reuse
        rounds[reuse] = []
        for r in range(1, R + 1):
            p = base[: T + r * D]
            sync(dev)
            t0 = time.perf_counter()
            g = e.generate(p, max_new_tokens=args.decode_per_round, stop_ids=set())
            sync(dev)
            rounds[reuse].append((len(p), g.prefilled, time.perf_counter() - t0, flops(g.reused, len(p))))
            if time.perf_counter() - t_start > args.agent_budget_s:
                break
    del e
    kw = dict(decode_per_round=args.decode_per_round, mode=e_mode, budget_s=args.agent_budget_s)
    record = speed.agent_record(T, D, R, rounds, **kw)  # the results file's "agent"
    for line in speed.agent_lines(record):
        say(line)
    return record


_GRAMMAR: list = []


def constrained_table(e, args):
    try:
        import xgrammar  # noqa: F401

        from toolkit.grammar.compile import compile_schema
        from toolkit.grammar.mask import GrammarMask
        from toolkit.tokenizer import qwen_tokenizer
    except Exception as exc:  # the lent GPU machine may lack xgrammar (carried as a wheel when it can be)
        say(f"## Constrained vs unconstrained: skipped ({type(exc).__name__}: {exc})")
        return None
    n = args.new
    if not _GRAMMAR:
        # A long JSON string: the model cannot close it before n tokens and almost every token stays allowed,
        # so each step's mask fill is as expensive as it gets (large allowed set).
        t0 = time.perf_counter()
        tok = qwen_tokenizer("qwen3")
        _GRAMMAR.append(compile_schema({"type": "string", "minLength": 16 * n}, tok, vocab_width=151_936))
        _GRAMMAR.append(time.perf_counter() - t0)
    grammar, compile_s = _GRAMMAR
    prompt = prompt_ids(args.prompt, seed=3)
    e.prepare(args.prompt + n + 1)
    rates = {}
    for masked in (False, True, False, True):
        e.reset()
        g = e.generate(prompt, max_new_tokens=n, stop_ids=set(), mask=GrammarMask(grammar) if masked else None)
        rates.setdefault(masked, []).append(((len(g.new_ids) - 1) / g.decode_s, len(g.new_ids), g.stopped_by))
    best = {m: max(v) for m, v in rates.items()}
    say(
        f"## Constrained vs unconstrained ({e.mode}; grammar: JSON string, minLength {16 * n}; tokenizer + "
        f"grammar built in {compile_s:.1f} s)"
    )
    say()
    say("| decoding | tokens/s | tokens | stopped by |")
    say("| --- | ---: | ---: | --- |")
    say(f"| unconstrained | {best[False][0]:,.1f} | {best[False][1]} | {best[False][2]} |")
    say(
        f"| constrained (xgrammar fills the mask on the host; applied on the device) | {best[True][0]:,.1f} | "
        f"{best[True][1]} | {best[True][2]} |"
    )
    ratio = best[True][0] / best[False][0]
    say(f"| **constrained / unconstrained** | **{100 * ratio:.1f}%** | | |")
    say()
    return ratio


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    dev = torch.device(
        "cuda"
        if (args.device == "auto" and torch.cuda.is_available())
        else (args.device if args.device != "auto" else "cpu")
    )
    gpu = dev.type == "cuda"
    if args.threads:
        torch.set_num_threads(args.threads)
    args.model = args.model or (SHAPE if gpu else "stand-in")
    args.prompt = args.prompt or (512 if gpu else 64)
    args.new = args.new or (256 if gpu else 32)
    args.hf_new = args.hf_new or (32 if gpu else 16)
    args.T, args.delta, args.R = (
        args.T or (10_000 if gpu else 512),
        args.delta or (2048 if gpu else 64),
        args.R or (30 if gpu else 6),
    )
    skip = set(args.skip)

    import transformers

    machine = (
        f"{torch.cuda.get_device_name(dev)} ({torch.cuda.get_device_properties(dev).total_memory / 2**30:.0f} "
        f"GiB), CUDA {torch.version.cuda}"
        if gpu
        else f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} thread(s)"
    )
    model, what = speed.bench_model(args.model, dev, SHAPE)
    weight_bytes = speed.weight_bytes(model)
    say(f"# toolkit.backends.engine benchmark — {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC")
    say()
    say(f"- machine: {machine}; host {platform.node()}, {os.cpu_count()} CPU cores")
    tri = f", triton {importlib.metadata.version('triton')}" if importlib.util.find_spec("triton") else ""
    software = (
        f"torch {torch.__version__}, transformers {transformers.__version__}{tri}, Python {platform.python_version()}"
    )
    commit = os.environ.get("KIT_COMMIT") or provenance()["commit"]
    say(f"- software: {software}")
    say(f"- commit: {commit}")
    say(f"- model: {what}")
    bw = speed.copy_bandwidth(dev)
    floor = speed.floor_tokens_per_s(model, bw)
    say(
        f"- copy bandwidth (measured now, read + write): {bw / 1e9:,.0f} GB/s; weights read per token: "
        f"{weight_bytes / 1e9:.3f} GB → bandwidth floor {floor:,.0f} tokens/s"
    )
    say()

    def section(name, fn, *a):
        """Run one section; a failure is printed and the next section still runs."""
        if name in skip:
            return None
        t0 = time.perf_counter()
        try:
            return fn(*a)
        except Exception as exc:
            traceback.print_exc()
            say(f"## {name}: FAILED ({_why(exc)})")
            say()
            return None
        finally:
            print(f"[{name}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr, flush=True)
            if args.out:
                with open(args.out, "w") as f:
                    f.write("\n".join(LINES) + "\n")

    rates, fastest, ref_info = section("decode", decode_table, model, dev, args, floor) or ({}, None, None)
    details = {}
    if gpu and args.compile and ref_info is not None:
        out = section("variants", variants_table, model, args, floor, ref_info, fastest)
        if out:
            rates.update(out[0])
            fastest, details = out[1], out[2]
    agent = section("agent", agent_table, model, dev, args, dict(graphs=gpu))
    if fastest is None and "constrained" not in skip:
        from toolkit.backends.engine import Engine

        fastest = (0.0, Engine(model, graphs=gpu, max_len=args.prompt + args.new + 64))
    ratios = [section("constrained", constrained_table, fastest[1], args)]
    ratios = [r for r in ratios if r is not None]
    targets = {}
    if gpu:
        targets, lines = speed.engine_targets(rates, floor, agent, ratios)
        for line in lines:
            say(line)
    if args.out:
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        record = dict(date=now, machine=machine, host_cores=os.cpu_count(), software=software, model=what)
        record.update(commit=commit, bandwidth_gb_s=round(bw / 1e9, 1), weights_gb=round(weight_bytes / 1e9, 4))
        record.update(floor_tokens_per_s=round(floor, 1), rates={k: round(v, 1) for k, v in rates.items()})
        record.update(variants=details, agent=agent, targets=targets, markdown=LINES)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(record, f, indent=1, ensure_ascii=False)
        with open(args.out, "w") as f:
            f.write("\n".join(LINES) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
