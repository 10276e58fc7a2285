"""The host loop on free-form questions, real offline model, all four demo tools mounted: met / not met, seconds.

The questions and their checks are data in the kit (``toolkit/data/loop_questions.json``, read by
``toolkit.eval.questions``): "main" (23: math, units, weather, comparisons needing two calls, tool-then-math,
questions that need no tool; Chinese and English), "fresh" (12, written later, held out from the v3 data mix) and
"heldout" (16, written before any run of the RL adapter: declines, chains, compute-then-compare, a calculator error)
and "heldout2" (14, written after "heldout" had been used to choose between RL runs, before the next one).
Each check was written BEFORE any run and looks only at the tool results and the final answer; the judge is strict
(the answer must state the right value or conclusion, not contain it). The script runs one configuration per call
and saves a JSON file with date, machine, model, the toolkit commit it imported, the settings and one row per
question.

Run:  nice python benchmarks/loop_questions.py --pass after          # the loop's current defaults
      nice python benchmarks/loop_questions.py --pass before --cap-s 240   # the defaults before issue 13
      python benchmarks/loop_questions.py --rescore    # the saved runs: their lenient 'met' beside the strict judge
The "before" settings are passed explicitly (a call forced on turn 1, up to 4 calls per turn, the answer started
after every tool result, 160 new tokens per turn); run it with PYTHONPATH pointing at a checkout of the old
commit to measure the old loop itself (the saved file records which commit ran). ``--cap-s`` stops a task after
that many seconds (checked between steps; the task counts as not met and the row says "capped"). ``--rescore``
re-scores every saved ``loop_questions_*.json`` under benchmarks/results (no model: the demo tools are re-run on
the saved calls) and writes ``benchmarks/results/loop_questions_strict.md``. ``--pass lora`` and ``lora-int8``
check the adapter (``$TOOLKIT_ADAPTER`` or the shipped one) against its manifest first (``toolkit.artifact``): a
broken one is one line and exit 1 before torch is imported or any model loads. ``--pass lora-rl`` loads that model
with an RL adapter merged on top (``$TOOLKIT_RL_ADAPTER`` or ``benchmarks/rl.py train``'s run from ``+lora`` on the
multi-turn family; ``toolkit.rl_adapter.apply_rl_adapter``), checked the same way first; the saved model names both.

Leaves out: sampling (greedy only: one run per question is the whole distribution) and any timing assert.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import platform
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from toolkit.eval.questions import SETS, judge, judge_saved, questions, steps_of  # noqa: E402  (no torch)
from toolkit.models import DTYPES  # noqa: E402  (torch loads inside load())
from toolkit.paths import provenance  # noqa: E402  (standard library only: a usage error stays fast)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


# The loop's defaults before issue 13 (run_example in toolkit/host.py, since moved to toolkit.loop.examples, at commit 2b68bc0 with a real model).
BEFORE = dict(
    constrain="tag",
    parallel=True,
    max_calls=4,
    answer_prefix="auto",
    max_new_tokens=160,
    max_turns=4,
    template="qwen2.5",
)


# No crutches (issue 25): tool_choice auto, free decoding (no first-token gate, no grammar), no answer prefix and
# no cap on calls per turn. The repeat guard stays (a repeated call is not run twice) and is counted as junk.
NO_CRUTCHES = dict(
    tool_choice="auto",
    constrain="none",
    answer_prefix="",
    max_calls=10**6,
    max_new_tokens=160,
    max_turns=4,
    template="qwen2.5",
)
PASSES = {
    "before": ("qwen2.5-coder-0.5b", "the defaults before issue 13"),
    "after": ("qwen2.5-coder-0.5b", "the loop's current defaults"),
    "lora": ("qwen2.5-coder-0.5b+lora", "the kit's LoRA adapter, no crutches"),
    "lora-int8": ("qwen2.5-coder-0.5b+lora-int8", "the adapter model in int8 (toolkit.small), no crutches"),
    "lora-rl": ("qwen2.5-coder-0.5b+lora+rl", "the adapter model + an RL adapter on top (issue 38), no crutches"),
    "base-free": ("qwen2.5-coder-0.5b", "the base model, no crutches (like for like with 'lora')"),
    "base-rl": ("qwen2.5-coder-0.5b+rl", "the base model + an RL adapter trained from it (issue 38), no crutches"),
}
FREE = ("lora", "lora-int8", "lora-rl", "base-free", "base-rl")  # the passes without crutches


class Capped(Exception):
    pass


def _commit(root: str | None = None) -> str:
    """The commit of the kit that was imported (default) or of the checkout at ``root``, ``+dirty`` if changed."""
    return provenance(root)["commit"]


def run_one(qd: dict, loaded, which: str, cap_s: float | None):
    from toolkit.backends.hf import HFBackend
    from toolkit.loop.examples import ask
    from toolkit.loop.loop import loop
    from toolkit.loop.steps import Generated, Trace
    from toolkit.tools import TOOLS

    msgs = [{"role": "user", "content": qd.question}]
    t0 = time.perf_counter()

    def guard(step):
        if cap_s and time.perf_counter() - t0 > cap_s:
            raise Capped

    capped = False
    if which == "before":
        backend = HFBackend.from_loaded(loaded)
        trace = Trace(backend.name, messages=msgs)
        try:
            for step in loop(backend, loaded.tokenizer, msgs, dict(TOOLS), **BEFORE):
                trace.steps.append(step)
                guard(step)
        except Capped:
            capped = True
    else:
        trace = None
        seen = []
        kw = NO_CRUTCHES if which in FREE else {}
        try:
            trace = ask(qd.question, loaded, tools=list(TOOLS), on_step=lambda s: (seen.append(s), guard(s)), **kw)
        except Capped:
            capped = True
            trace = Trace(loaded.description, steps=seen, messages=msgs)
    secs = time.perf_counter() - t0
    steps = steps_of(trace)
    if capped:
        met, why = False, f"capped after {secs:.0f} s (> {cap_s:g} s)"
    else:
        verdict = judge(qd, trace.answer, steps)
        met, why = verdict.met, verdict.reason
    calls = [f"{r.name}({json.dumps(r.arguments, ensure_ascii=False)})->{r.status}" for r in steps]
    junk = [c for c in calls if not c.endswith("->ok")]  # repeats the host blocked, invalid or failed calls
    return dict(
        id=qd.id,
        kind=qd.kind,
        question=qd.question,
        met=bool(met),
        why=why,
        seconds=round(secs, 1),
        turns=len(trace.turns()),
        calls=calls,
        junk_calls=len(junk),
        tagged_turns=sum("<tool_call>" in s.text for s in trace.of(Generated)),
        answer=trace.answer,
        stop=trace.stop.reason if trace.stop else ("capped" if capped else None),
    )


def rescore(out: str) -> int:
    """Every saved run under benchmarks/results, its lenient ``met`` (the checks it was scored with) beside the
    strict judge's; a table printed and written to ``out`` with the date and the commit of the judge."""
    by = {q.id: q for q in questions()}
    lines = [
        "# Loop questions: the saved runs re-scored strictly",
        "",
        f"Written by `python benchmarks/loop_questions.py --rescore` on {datetime.date.today()} (judge: "
        f"`toolkit.eval.questions` at commit {_commit()}, {platform.machine()}): each saved row's answer and calls "
        "(the demo tools re-run on the saved arguments) judged again. 'lenient' is the `met` the run was saved with "
        "(substring checks); 'strict' needs the stated value or conclusion. The runs' own model, date and commit "
        "are in each file.",
        "",
        "| file | set | model | lenient | strict | now not met |",
        "|---|---|---|---|---|---|",
    ]
    files = sorted(glob.glob(os.path.join(RESULTS, "**", "loop_questions_*.json"), recursive=True))
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        rows = doc["rows"]
        strict = {r["id"]: judge_saved(r, by[r["id"]]) for r in rows}
        lost = [
            f"{r['id']} ({', '.join(k for k, ok in strict[r['id']].parts.items() if not ok)})"
            for r in rows
            if r["met"] and not strict[r["id"]]
        ]
        gained = [r["id"] for r in rows if strict[r["id"]] and not r["met"]]
        lines.append(
            f"| {os.path.relpath(path, RESULTS)} | {doc.get('question_set') or 'main'} | "
            f"{doc['model'].split(' [')[0]} | {sum(r['met'] for r in rows)}/{len(rows)} | "
            f"{sum(v.met for v in strict.values())}/{len(rows)} | {'; '.join(lost) or '-'}"
            + (f" (now met: {', '.join(gained)})" if gained else "")
            + " |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {out}")
    return 0


def main(argv=None) -> int:
    from toolkit import cliargs  # here: after the PYTHONPATH choice above (it may name another checkout)

    p = cliargs.Parser(description=__doc__.split("\n")[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--pass", dest="which", choices=list(PASSES))
    what.add_argument("--rescore", action="store_true", help="re-score the saved runs strictly (no model)")
    p.add_argument(
        "--set",
        dest="qset",
        choices=list(SETS),
        default="main",
        help="main (23 questions), fresh (12, written later), heldout (16, written before the RL adapter ran) or heldout2 "
        "(14, written before the RL run with dynamic sampling)",
    )
    p.add_argument("--only", default="", help="comma-separated question ids (default: all)")
    p.add_argument(
        "--cap-s", type=cliargs.number(0.0, lo_open=True), default=None, help="stop a task after this many seconds"
    )
    p.add_argument("--threads", type=cliargs.count(1, 1024), default=1, help="torch threads (1 on a shared machine)")
    p.add_argument(
        "--dtype", choices=DTYPES, default="auto", help="auto: bf16 where this CPU is fast at it (lora-int8: auto only)"
    )
    p.add_argument(
        "--out",
        type=cliargs.out_file,
        default=None,
        help="JSON file (default benchmarks/results/loop_questions_<pass>[_fresh].json; --rescore: the .md)",
    )
    a = p.parse_args(argv)
    if a.rescore:
        return rescore(a.out or os.path.join(RESULTS, "loop_questions_strict.md"))
    if a.which == "lora-int8" and a.dtype != "auto":
        p.error("--dtype: the int8 build has its own precision (int8 weights, float32 activations); leave it auto")
    pool = questions(a.qset)
    chosen = [q for q in pool if not a.only or q.id in a.only.split(",")]
    if a.only and len(chosen) != len(a.only.split(",")):
        p.error(f"unknown id in --only; known: {[q.id for q in pool]}")
    if a.which in ("lora", "lora-int8", "lora-rl", "base-rl"):  # the adapters (int8: checked against its weights)
        from toolkit.artifact import ArtifactError  # before any load
        from toolkit.models import verify_adapters  # light: torch loads inside load()
        from toolkit.untrusted import UntrustedInputError

        try:
            verify_adapters(PASSES[a.which][0])
        except (ArtifactError, UntrustedInputError) as e:
            print(f"loop_questions.py: {e}", file=sys.stderr)
            return 1
    import torch

    from toolkit.models import load
    from toolkit.settings import LoopConfig

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    from toolkit import fetch

    if not fetch.is_installed():
        print("the real offline model is not installed: this benchmark needs it (make real-model)")
        return 2
    loaded = load(PASSES[a.which][0], dtype=None if a.dtype == "auto" else a.dtype, quiet=True)
    settings = (
        BEFORE if a.which == "before" else NO_CRUTCHES if a.which in FREE else LoopConfig.for_model(loaded).values()
    )
    print(f"model: {loaded.description}\ncommit: {_commit()}\npass: {a.which} settings: {settings}")
    name = f"loop_questions_{a.which}{'' if a.qset == 'main' else '_' + a.qset}.json"
    path = a.out or os.path.join(RESULTS, name)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    commit = _commit()  # what was imported: read once, before any later commit moves HEAD
    script_commit = _commit(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    rows: list[dict] = []

    def save(complete: bool) -> dict:  # after every question, so an interrupted run keeps what it measured
        out = dict(
            date=started,
            complete=complete,
            asked=[q.id for q in chosen],
            machine=dict(
                platform=platform.platform(), cpus=os.cpu_count(), threads=a.threads, load_avg_at_end=os.getloadavg()
            ),
            model=loaded.description,
            commit=commit,
            script_commit=script_commit,
            which=a.which,
            question_set=a.qset,
            adapter=getattr(loaded, "adapter", None),
            settings=settings,
            cap_s=a.cap_s,
            met=sum(r["met"] for r in rows),
            total=len(rows),
            rows=rows,
        )
        with open(path, "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=1, default=str)
        return out

    for qd in chosen:
        row = run_one(qd, loaded, a.which, a.cap_s)
        rows.append(row)
        save(False)
        print(
            f"{row['id']:<14} {'met' if row['met'] else 'NOT met':<8} {row['seconds']:7.1f} s  "
            f"{row['why']}\n{'':14} calls: {row['calls']}\n{'':14} answer: {row['answer']!r}",
            flush=True,
        )
    out = save(True)
    print(f"\n{out['met']}/{out['total']} met; saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
