"""Call or decline: the int8 build (toolkit.small) against the float model on a whole BFCL category, from the first
token alone.

Why the first token: in native mode, greedy, with the kit's adapter, a case of the irrelevance category is right
exactly when the model does not open with ``<tool_call>`` (the saved seeded-50 runs of both models agree with that
rule on every case; this script re-checks it and prints the count). One prefill per case instead of a generation,
so all 240 cases fit in minutes where the seeded 50 took most of an hour, and the paired flips come with the float
model's p(<tool_call>): how close to the edge the cases were that int8 turned.

Models: ``float32`` (qwen2.5-coder-0.5b+lora, as in the saved float run), ``bfloat16`` (the same weights and adapter
in bf16: the issue's reference, and the activations' precision in the int8 build's kernel) and ``int8`` (the
installed build: ``toolkit.small``, with the output bias of ``toolkit.calibrate``; its resume file is keyed by the
artifact's sha256, so a rebuilt artifact is measured again). The first build's run (no output bias; with two
experiments, a float output layer and a shared embedding) is kept in ``decisions_irrelevance_before_output_bias.json``.

Prints a table; saves benchmarks/results/int8/decisions_<category>.json (date, machine, models, commit), resumable
per model. Never asserts a time. Run: nice python benchmarks/int8_decisions.py [--category irrelevance]
[--models float32,bfloat16,int8] [--limit N]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from toolkit import cliargs
from toolkit.eval.choices import CATEGORIES
from toolkit.paths import cache_dir
from toolkit.qwen import TOOL_CALL_ID

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "int8"
FLOAT, INT8 = "qwen2.5-coder-0.5b+lora", "qwen2.5-coder-0.5b+lora-int8"
MODELS = ("float32", "int8", "bfloat16")
REFERENCES = ("float32", "bfloat16")  # every other model is paired against each of these that ran
SAVED = {  # saved native runs (seeded 50; bf16: every case, another machine) whose texts check the rule
    "float32": ROOT / "benchmarks" / "results" / "bfcl_qwen2.5-coder-0.5b+lora.json",
    "int8": OUT / "bfcl_qwen2.5-coder-0.5b+lora-int8.json",
    "bfloat16": ROOT / "benchmarks" / "results" / "full" / "bfcl_qwen2.5-coder-0.5b+lora.json",  # every case, 2 threads
}


def _load(which: str):
    from toolkit.models import load  # lazy: torch

    return load(FLOAT, dtype=which, quiet=True) if which in REFERENCES else load(INT8, quiet=True)


def _resume_name(category: str, which: str) -> str:
    if which in REFERENCES:
        return f"{category}_{which}.json"
    from toolkit.small import read_manifest, target_folder  # lazy: after the arguments are checked

    return f"{category}_{which}-{read_manifest(target_folder())['weights']['sha256'][:12]}.json"


def decisions(loaded, cases, done: dict, path: Path, key: str) -> dict:
    import torch  # lazy: heavy

    from toolkit.calibrate import last_logits  # lazy: heavy (torch)
    from toolkit.eval.run import prompt_ids  # lazy: heavy (torch)

    model, tok = loaded.model, loaded.tokenizer
    t0, n0 = time.perf_counter(), len(done)
    for i, case in enumerate(cases):
        if case.id in done:
            continue
        logits = last_logits(model, [prompt_ids(case, "native", tok)])[0]  # the build's own reader of the first token
        p = torch.softmax(logits, -1)
        top = int(torch.argmax(logits))
        other = logits.clone()
        other[TOOL_CALL_ID] = float("-inf")
        done[case.id] = dict(
            first=top,
            calls=top == TOOL_CALL_ID,
            p_tool_call=round(float(p[TOOL_CALL_ID]), 6),
            margin=round(float(logits[TOOL_CALL_ID] - other.max()), 4),  # > 0: opens a call
        )
        if (len(done) - n0) % 20 == 0 or i == len(cases) - 1:
            path.write_text(json.dumps(done))  # resume point
            rate = (len(done) - n0) / (time.perf_counter() - t0)
            print(f"  {key}: {len(done)}/{len(cases)} ({rate:.2f} cases/s)", flush=True)
    return done


def check_rule(which: str, category: str, got: dict) -> tuple[int, int, int] | None:
    """(cases where 'right iff no <tool_call> first' holds in the saved run's texts, cases whose first token here
    agrees with the saved text on calling, cases compared)."""
    from toolkit.eval.report import load_results  # lazy: after the arguments are checked

    saved = load_results(SAVED[which]).get("accuracy", {}).get("data", {}).get("cases") if which in SAVED else None
    if not saved:
        return None
    rows = [c for c in saved if c["mode"] == "native" and c["id"].startswith(category + "_") and c["id"] in got]
    rule = sum(c["ok"] == (not c["text"].startswith("<tool_call>")) for c in rows)
    same = sum(got[c["id"]]["calls"] == c["text"].startswith("<tool_call>") for c in rows)
    return rule, same, len(rows)


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--category", default="irrelevance", choices=CATEGORIES)
    p.add_argument(
        "--models",
        type=cliargs.one_of(MODELS, "model"),
        default=list(MODELS),
        help=f"comma-separated from {', '.join(MODELS)}; each is paired against {' and '.join(REFERENCES)} where run",
    )
    p.add_argument("--limit", type=cliargs.count(1), default=None, help="the first N cases of the category")
    a = p.parse_args(argv)
    import torch  # lazy: heavy, after the arguments are checked

    from toolkit.eval import bfcl  # lazy: after the arguments are checked
    from toolkit.eval.report import meta  # lazy: after the arguments are checked

    models = list(dict.fromkeys(a.models))
    torch.set_num_threads(1)  # as the saved int8 run; one thread keeps the sums' order fixed
    cases = bfcl.load(a.category)[: a.limit]
    OUT.mkdir(parents=True, exist_ok=True)
    got, described = {}, {}
    for which in models:
        part = cache_dir() / "int8_decisions" / _resume_name(a.category, which)  # resume point
        part.parent.mkdir(parents=True, exist_ok=True)
        done = json.loads(part.read_text()) if part.exists() else {}
        loaded = _load(which)
        described[which] = loaded.description
        print(f"{which}: {loaded.description}", flush=True)
        got[which] = decisions(loaded, cases, done, part, which)
        del loaded
    ids = [c.id for c in cases]
    print(f"\n## {a.category}, native, first token (n = {len(ids)}): right = no <tool_call> first\n")
    print("| model | right % | opens a call | rule holds in saved texts | first-token call = saved call |")
    print("|---|---|---|---|---|")
    rows = []
    for which in models:
        d = got[which]
        right = sum(not d[i]["calls"] for i in ids)
        chk = check_rule(which, a.category, d)
        rows.append(dict(model=which, n=len(ids), right=right, pct=100 * right / len(ids), rule=chk))
        c = f"{chk[0]}/{chk[2]}" if chk else "—"
        s = f"{chk[1]}/{chk[2]}" if chk else "—"
        print(f"| {which} | {100 * right / len(ids):.1f} | {len(ids) - right} | {c} | {s} |")
    pairs = []
    refs = [r for r in REFERENCES if r in models] or models[:1]
    for ref, which in [(r, w) for i, r in enumerate(refs) for w in models if w not in refs[: i + 1]]:
        f, q = got[ref], got[which]
        lost = [i for i in ids if not f[i]["calls"] and q[i]["calls"]]
        gained = [i for i in ids if f[i]["calls"] and not q[i]["calls"]]
        near = sorted(abs(f[i]["margin"]) for i in lost + gained)
        pairs.append(dict(model=which, against=ref, lost=lost, gained=gained, reference_margins=near))
        print(
            f"\n{which} vs {ref}: lost {len(lost)}, gained {len(gained)} "
            f"(Δ {100 * (len(gained) - len(lost)) / len(ids):+.1f} points); {ref}'s |logit margin| on "
            f"the flipped cases: {', '.join(f'{m:.2f}' for m in near) or 'none'}"
        )
    doc = dict(
        meta=meta(" | ".join(f"{k}: {v}" for k, v in described.items()), ROOT, torch_threads=1),
        data=dict(category=a.category, rows=rows, pairs=pairs, cases={w: got[w] for w in models}),
    )
    (OUT / f"decisions_{a.category}.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"\nsaved {OUT / f'decisions_{a.category}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
