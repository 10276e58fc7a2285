"""Prefix reuse on the agent workload of book §14.5.3: tool definitions T tokens, Δ new tokens per turn, R turns.

Turn k's prompt is T + Δ·k tokens. Without reuse every turn prefills its whole prompt; with reuse the backend
keeps the KV cache and prefills only what is new. The script runs both on the same model in one go and prints
the measured prefill tokens and wall clock side by side, next to the book's token ratio T/Δ + (R+1)/2.

Run:  python benchmarks/prefix_reuse.py                      # stand-in on CPU, T=2000 Δ=512 R=30
      python benchmarks/prefix_reuse.py --model qwen2.5-coder-0.5b --T 10000 --delta 2048 --R 30   # on a GPU
      python benchmarks/prefix_reuse.py --model path/to/config.json   # random weights in that model's shape
Flags: --backend hf|engine (engine = toolkit.backends.engine, CUDA), --every N (print every N-th turn), --json.

Leaves out: decoding (each turn generates one token: the account here is prefill, §14.5.3's second account),
and the content of the tokens — ids are real rendered conversation tokens cycled to length; cost depends on
count, not content. The book counts "with reuse" as Δ·R (increments only); the measured run also prefills the
first turn's T, so both are printed.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from toolkit import cliargs  # noqa: E402
from toolkit.stand_in import POSITIONS  # noqa: E402
from toolkit.untrusted import UntrustedInputError, expand_path, read_json_file  # noqa: E402


def positions(name: str) -> int | None:
    """The model's positions, read before it loads: a folder's or a config file's ``max_position_embeddings``; the
    kit's named models (the stand-in, Qwen2.5-Coder-0.5B with or without the adapter) have 32,768; a hub id: None
    (checked once it has loaded)."""
    path = expand_path(name)
    if name.endswith(".json") or path.is_dir():
        cfg = read_json_file(path / "config.json" if path.is_dir() else path, "model config", 1 << 20)
        n = cfg.get("max_position_embeddings") if isinstance(cfg, dict) else None
        return n if isinstance(n, int) and not isinstance(n, bool) else None
    return None if "/" in name else POSITIONS


def token_stream(n: int, tokenizer) -> list[int]:
    """n real token ids: the calculator round trip rendered with the kit's tools, repeated."""
    from toolkit.calculator import calculator
    from toolkit.render import render
    from toolkit.tools import schemas

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "calculator", "arguments": {"expression": "250 * 15%"}},
    }
    msgs = [
        {"role": "user", "content": "250的15%是多少？"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(calculator("250 * 15%"))},
        {"role": "assistant", "content": "250的15%是37.5。"},
    ]
    ids = render(msgs, schemas(), template="qwen2.5", tokenizer=tokenizer, add_generation_prompt=False).ids
    return (ids * (n // len(ids) + 1))[:n]


def random_shape(config_path: str):
    """Random weights in the shape a config.json describes: prefill cost depends on shape, not on the weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from toolkit.models import Loaded, pick_device
    from toolkit.tokenizer import qwen_tokenizer

    dev = pick_device()
    dtype = torch.bfloat16 if dev.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    cfg = AutoConfig.from_pretrained(config_path)
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).to(dev).eval()
    return Loaded(
        model,
        qwen_tokenizer("qwen2.5"),
        f"random weights in the shape of {os.path.basename(os.path.dirname(os.path.abspath(config_path)))}",
        "stand-in",
        dev,
        str(dtype).removeprefix("torch."),
        semantic=False,
    )


def book_ratio(T: int, delta: int, R: int) -> float:
    return T / delta + (R + 1) / 2


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        type=cliargs.model,
        default="stand-in",
        help="stand-in | qwen2.5-coder-0.5b | folder (default stand-in)",
    )
    p.add_argument("--T", type=cliargs.count(1), default=2000, help="tool-definition tokens (book: 10,000)")
    p.add_argument("--delta", type=cliargs.count(1), default=512, help="new tokens per turn (book: 2048)")
    p.add_argument("--R", type=cliargs.count(1), default=30, help="turns")
    p.add_argument("--backend", choices=["hf", "engine"], default="hf")
    p.add_argument("--threads", type=cliargs.count(1, 1024), default=2)
    p.add_argument("--every", type=cliargs.count(1), default=5, help="print every N-th turn")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--json-out",
        type=cliargs.out_file,
        default=None,
        help="also write the JSON summary and per-turn rows to this file",
    )
    a = p.parse_args(argv)
    total = a.T + a.delta * a.R
    try:
        most = positions(a.model)
    except UntrustedInputError as e:
        p.error(str(e))
    if most is not None and total > most:  # it once ran past the positions without a word
        p.error(f"--T + --delta x --R = {total:,} tokens, more than the model's {most:,} positions")

    import torch

    torch.set_num_threads(a.threads)
    from toolkit.backends.hf import HFBackend
    from toolkit.models import load

    loaded = random_shape(a.model) if a.model.endswith(".json") else load(a.model, quiet=True)
    most = getattr(getattr(loaded.model, "config", None), "max_position_embeddings", None)
    if isinstance(most, int) and total > most:  # a hub model: its positions are known once it has loaded
        p.error(f"--T + --delta x --R = {total:,} tokens, more than the model's {most:,} positions")
    stream = token_stream(total, loaded.tokenizer)

    def backend(reuse: bool):
        if a.backend == "engine":
            from toolkit.backends.engine import Engine

            return Engine(loaded.model, reuse=reuse, max_len=total + 64)
        return HFBackend(loaded.model, loaded.description, reuse=reuse)

    runs = {}
    for reuse in (False, True):
        be = backend(reuse)
        be.generate(stream[:64], max_new_tokens=1, stop_ids=set())  # warm-up (kernels, allocator)
        if hasattr(be, "reset"):
            be.reset()
        rows = []
        t_start = time.perf_counter()
        for k in range(1, a.R + 1):
            g = be.generate(stream[: a.T + a.delta * k], max_new_tokens=1, stop_ids=set())
            rows.append(
                dict(turn=k, prompt=a.T + a.delta * k, reused=g.reused, prefilled=g.prefilled, prefill_s=g.prefill_s)
            )
        runs[reuse] = dict(rows=rows, wall_s=time.perf_counter() - t_start)
        del be

    no, yes = runs[False], runs[True]
    tok_no = sum(r["prefilled"] for r in no["rows"])
    tok_yes = sum(r["prefilled"] for r in yes["rows"])
    s_no = sum(r["prefill_s"] for r in no["rows"])
    s_yes = sum(r["prefill_s"] for r in yes["rows"])
    book_no = sum(a.T + a.delta * k for k in range(1, a.R + 1))
    book_yes = a.delta * a.R
    summary = dict(
        model=loaded.description,
        device=loaded.device,
        backend=a.backend,
        T=a.T,
        delta=a.delta,
        R=a.R,
        tokens_no_reuse=tok_no,
        tokens_reuse=tok_yes,
        token_ratio_measured=tok_no / tok_yes,
        book_tokens_no_reuse=book_no,
        book_tokens_reuse=book_yes,
        token_ratio_book=book_no / book_yes,
        formula=book_ratio(a.T, a.delta, a.R),
        prefill_s_no_reuse=s_no,
        prefill_s_reuse=s_yes,
        time_ratio=s_no / s_yes,
        wall_s_no_reuse=no["wall_s"],
        wall_s_reuse=yes["wall_s"],
    )
    full = dict(summary, turns={"no_reuse": no["rows"], "reuse": yes["rows"]})
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(full, f, indent=1)
    if a.json:
        print(json.dumps(full, indent=1))
        return 0

    print(
        f"model: {loaded.description}"
        + ("" if loaded.semantic else "  (random weights: timing is real, the tokens mean nothing)")
    )
    print(
        f"workload: T={a.T} tool-definition tokens, Δ={a.delta} new tokens per turn, R={a.R} turns, "
        f"backend={a.backend}\n"
    )
    print(
        f"{'turn':>4} {'prompt':>7} | {'no reuse: prefilled':>19} {'ms':>8} | {'reuse: reused':>13} "
        f"{'prefilled':>9} {'ms':>8}"
    )
    for r0, r1 in zip(no["rows"], yes["rows"]):
        if r0["turn"] == 1 or r0["turn"] % a.every == 0 or r0["turn"] == a.R:
            print(
                f"{r0['turn']:>4} {r0['prompt']:>7} | {r0['prefilled']:>19} {r0['prefill_s'] * 1e3:>8.1f} | "
                f"{r1['reused']:>13} {r1['prefilled']:>9} {r1['prefill_s'] * 1e3:>8.1f}"
            )
    print()
    print(f"{'':34}{'no reuse':>12}{'reuse':>12}{'ratio':>9}")
    print(f"{'prefill tokens, measured':34}{tok_no:>12,}{tok_yes:>12,}{tok_no / tok_yes:>9.1f}")
    print(f"{'prefill tokens, book (Δ·R w/ reuse)':34}{book_no:>12,}{book_yes:>12,}{book_no / book_yes:>9.1f}")
    print(f"{'prefill wall clock, s':34}{s_no:>12.2f}{s_yes:>12.2f}{s_no / s_yes:>9.1f}")
    print(f"\nbook formula T/Δ + (R+1)/2 = {a.T}/{a.delta} + {a.R + 1}/2 = {book_ratio(a.T, a.delta, a.R):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
