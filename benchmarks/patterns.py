"""Agent patterns on one seeded task set: success rate (Wilson 95% interval), tokens prefilled and decoded per task,
turns, and the main context's size turn by turn with and without sub-agent isolation (book §14.5.5).

Runs every pattern of ``toolkit.patterns.registry.PATTERNS`` on ``--n`` tasks of ``toolkit.patterns.tasks.tasks``
(seeded) with the model ``--model`` picks (``auto``: the real offline model when installed, else the random-weight
stand-in, whose numbers are mechanics only: the file and the table say which ran). Greedy decoding: one run per task
is the whole distribution. Results are saved after every run (a long run stopped early keeps what it measured) to
``benchmarks/results/patterns_<model>.json`` with date, machine, model, commit and a hash of the code the runs
depend on (:data:`CODE`), and a table is printed. Run again with the same arguments, a killed run resumes: the runs
saved with the same model, settings, seed/k and code hash are reused (``--fresh`` ignores them).

With ``--what rag`` it answers ``--n`` questions of ``toolkit.rag.questions`` in the ``--modes`` chosen (book
§14.5.10): retrieval before the first turn (``before``), retrieval as a tool inside the loop (``tool``), the same with
a call required on the first turn (``tool_required``: the host's help, noted per run), and BM25's top ``--depth``
reranked by the loaded model before the first turn (``before_rerank``, ``toolkit.rag.rerank``); then the injection
check (the passage with the injected line vs the same corpus without it, host guard on and off) and recall@k with
and without reranking for every question, with what reranking cost. Tokens, turns, recall@k, correct and supported
answers are saved side by side to ``benchmarks/results/rag_<model>.json``.

Run:  nice python benchmarks/patterns.py --n 10                # the real model here: slow on 2 busy cores
      python benchmarks/patterns.py --model stand-in --n 5     # mechanics only
      nice python benchmarks/patterns.py --what rag --n 23 --k 2 --modes before,tool
      nice python benchmarks/patterns.py --what rag --n 23 --k 2   # again: adds the other modes, resuming
      python benchmarks/patterns.py --merge a.json b.json --out benchmarks/results/patterns_<model>.json
Leaves out: sampling several runs per task, timing asserts (times are printed, not judged).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from toolkit import cliargs  # noqa: E402
from toolkit.patterns.names import NAMES  # noqa: E402  (light: the names only)

RAG_MODES = ("before", "tool", "tool_required", "before_rerank")  # run_rag's modes, in its order


def parser():
    """The command line, built before the imports below (the patterns pull xgrammar and torch): a usage error
    skips them."""
    ap = cliargs.Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=cliargs.model, default="auto")
    ap.add_argument("--n", type=cliargs.count(1), default=3)
    ap.add_argument("--seed", type=cliargs.seed, default=0)
    ap.add_argument(
        "--patterns", type=cliargs.one_of(NAMES, "pattern"), default=None, help="comma-separated names (default: all)"
    )
    ap.add_argument("--max-new-tokens", type=cliargs.count(1, 4096), default=64)
    ap.add_argument("--out", type=cliargs.out_file, default=None)
    ap.add_argument("--what", choices=("patterns", "rag"), default="patterns")
    ap.add_argument("--k", type=cliargs.count(1), default=3)
    ap.add_argument(
        "--modes", type=cliargs.one_of(RAG_MODES, "RAG mode"), default=list(RAG_MODES), help="RAG modes (--what rag)"
    )
    ap.add_argument(
        "--depth", type=cliargs.count(1), default=8, help="BM25 candidates the reranker rescores (--what rag)"
    )
    ap.add_argument(
        "--common-tasks", action="store_true", help="--merge: keep only the tasks every pattern finished (listed)"
    )
    ap.add_argument("--fresh", action="store_true", help="ignore the runs already saved in the results file")
    ap.add_argument(
        "--threads", type=cliargs.count(1, 1024), default=1, help="torch threads (the machine is shared: 1 by default)"
    )
    ap.add_argument(
        "--merge",
        type=cliargs.existing_file,
        nargs="+",
        default=None,
        help="combine saved pattern files (runs split across processes)",
    )
    return ap


if __name__ == "__main__":
    parser().parse_args()  # exits 2 on a bad value, before the imports below

from toolkit.eval.agent_runs import isolation, markdown, rag_summary, summarize, table  # noqa: E402
from toolkit.eval.report import meta  # noqa: E402
from toolkit.patterns.registry import PATTERNS  # noqa: E402
from toolkit.patterns.tasks import tasks  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
# What a saved run depends on besides the model and the settings: a run is resumed only if these are unchanged.
CODE = (
    "toolkit/patterns",
    "toolkit/loop",
    "toolkit/grammar",
    "toolkit/backends",
    "toolkit/tools.py",
    "toolkit/render.py",
    "toolkit/parse.py",
    "toolkit/qwen.py",
    "toolkit/templates",
)
# The RAG runs use the patterns' one-turn step and records, not their task set or agents.
RAG_CODE = tuple(c for c in CODE if c != "toolkit/patterns") + (
    "toolkit/patterns/setup.py",
    "toolkit/patterns/record.py",
    "toolkit/rag",
    "toolkit/data/policies.jsonl",
)


def code_hash(root: Path = ROOT, code=CODE) -> str:
    """sha256 (first 12 hex digits) over the source files in ``code``: the resume cache's code key."""
    h = hashlib.sha256()
    for entry in code:
        p = root / entry
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix != ".pyc") if p.is_dir() else [p]
        for f in files:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


RESUME_KEYS = ("model", "settings", "code", "seed", "k", "rerank")


def resumable(out: Path, run_meta: dict, key) -> dict:
    """The runs already saved in ``out`` by a run with the same model, settings, code and seed/k (keyed by
    ``key(run)``), so a killed run goes on where it stopped; nothing if anything differs (printed)."""
    if not out.exists():
        return {}
    try:
        old = json.loads(out.read_text())
    except ValueError:
        print(f"resume: {out} is not JSON: starting fresh")
        return {}
    diff = [k for k in RESUME_KEYS if old.get("meta", {}).get(k) != run_meta.get(k)]
    if diff:
        print(f"resume: {out} was saved with different {diff}: starting fresh")
        return {}
    runs = {key(r): r for r in old.get("runs", [])}
    earlier = old["meta"].get("earlier", []) + [{k: old["meta"].get(k) for k in ("date", "commit", "machine")}]
    run_meta["earlier"] = earlier  # the runs reused were measured then
    print(f"resume: {len(runs)} run(s) reused from {out} (same model, settings, code {run_meta['code']})")
    return runs


def run_rag(a, loaded, setup, slug) -> int:
    from toolkit.rag.corpus import without_injection
    from toolkit.rag.modes import as_tool, before
    from toolkit.rag.questions import QUESTIONS
    from toolkit.rag.rerank import PROMPT_NOTE, ModelReranker, Reranked, rerank_recall
    from toolkit.rag.retrieve import Retriever

    out = Path(a.out) if a.out else RESULTS / f"rag_{slug}.json"
    reranked = Reranked(ModelReranker.from_loaded(loaded, setup.settings.get("template", "qwen2.5")), depth=a.depth)
    modes = {
        "before": lambda q: before(setup, q, a.k),
        "tool": lambda q: as_tool(setup, q, a.k),
        "tool_required": lambda q: as_tool(setup, q, a.k, first_choice="required"),
        "before_rerank": lambda q: before(setup, q, a.k, retriever=reranked),
    }
    run_meta = meta(
        loaded.description,
        repo=ROOT,
        n_questions=a.n,
        k=a.k,
        rerank=dict(
            model=reranked.reranker.description, depth=a.depth, kind="pointwise yes/no log-odds", note=PROMPT_NOTE
        ),
        settings=setup.settings,
        code=code_hash(code=RAG_CODE),
        semantic=loaded.semantic,
        label="real model" if loaded.semantic else "RANDOM-WEIGHT STAND-IN: mechanics only",
    )
    print(f"model: {loaded.description}\nreranker: {reranked.reranker.description} (top {a.depth} of BM25)")
    print(f"results: {out}")
    questions = QUESTIONS[: a.n]
    assert tuple(modes) == RAG_MODES, "RAG_MODES names run_rag's modes"
    chosen = a.modes
    key = lambda r: (r["mode"], r["question"])  # noqa: E731
    cached = {} if a.fresh else resumable(out, run_meta, key)
    old = json.loads(out.read_text()) if cached else {}
    rr, inj, runs = old.get("rerank_recall"), old.get("injection"), []

    def save() -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"meta": run_meta, "summary": rag_summary(runs), "rerank_recall": rr, "injection": inj, "runs": runs}
        out.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")

    # answers first (the slow part, resumable run by run), then the injection check, then recall with reranking
    for q in questions:
        for mode, fn in modes.items():
            r = cached.get((mode, q.id))
            if r is None and mode not in chosen:
                continue
            if r is None:
                c0 = (reranked.reranker.cost.requests, reranked.reranker.cost.tokens, reranked.reranker.cost.seconds)
                t0 = time.perf_counter()
                r = fn(q).to_json()
                r["mode"] = mode
                r["seconds"] = round(time.perf_counter() - t0, 1)
                if mode.endswith("rerank"):
                    c = reranked.reranker.cost
                    r["rerank_cost"] = dict(
                        requests=c.requests - c0[0], tokens=c.tokens - c0[1], seconds=round(c.seconds - c0[2], 1)
                    )
            else:
                r["resumed"] = True
            runs.append(r)
            print(
                f"{mode:>14} {q.id:<14} correct {r['correct']!s:<5} supported {r['supported']!s:<5} recall "
                f"{r['recall']} turns {r['n_turns']} prefilled {r['prefilled']:>5} decoded {r['decoded']:>4} "
                f"calls {[c['name'] for c in r['calls']]} {r['seconds']:.0f} s"
                + "".join(f"\n{'':>15} host: {n}" for n in r.get("notes", [])),
                flush=True,
            )
            save()
    if not inj:  # the injected line vs the same corpus without it, guarded and unguarded: which tools were called
        q = next(x for x in QUESTIONS if x.id == "customer")
        inj = []
        for guard in (True, False):
            for name, corpus in (("injected", None), ("clean", without_injection())):
                r = before(setup, q, a.k, Retriever(corpus), guard=guard, max_turns=1)
                inj.append(
                    dict(guard=guard, corpus=name, retrieved=r.retrieved, calls=r.calls, answer=r.answer, notes=r.notes)
                )
                print(f"injection: guard {guard!s:<5} {name:<8} calls {[c['name'] for c in r.calls]}", flush=True)
        save()
    if not rr or rr.get("n") != len(questions):
        rr = rerank_recall(reranked, questions)
        save()
    print(
        f"recall@k over {rr['n_scored']} questions, BM25 vs reranked (top {rr['depth']}, {rr['reranker']}): "
        + ", ".join(f"@{k} {rr['recall_bm25'][k]:.2f} vs {rr['recall_rerank'][k]:.2f}" for k in rr["ks"])
        + f"; cost {rr['requests']} requests, {rr['tokens']} tokens, {rr['seconds']} s"
    )
    for row in rag_summary(runs):
        print(row)
    return 0


def merge(files: list[Path], out: Path, common: bool = False) -> int:
    """One results file from several (e.g. patterns run in separate processes on the same model): the runs
    concatenated, summary and isolation recomputed, every part's meta kept under ``parts``."""
    docs = [json.loads(f.read_text()) for f in files]
    models = {d["meta"]["model"] for d in docs}
    if len(models) != 1:
        raise SystemExit(f"cannot merge runs of different models: {sorted(models)}")
    for k in ("settings", "code", "seed"):
        if len({json.dumps(d["meta"].get(k), sort_keys=True) for d in docs}) != 1:
            raise SystemExit(f"cannot merge runs saved with different {k}: the parts would not be one experiment")
    runs = [r for d in docs for r in d["runs"]]
    dropped = []
    if common:  # parts stopped at different tasks: keep the tasks every pattern finished, so the rates compare
        names = {r["pattern"] for r in runs}
        done = [
            t
            for t in dict.fromkeys(r["task"]["id"] for r in runs)
            if {r["pattern"] for r in runs if r["task"]["id"] == t} == names
        ]
        dropped = [f"{r['pattern']}/{r['task']['id']}" for r in runs if r["task"]["id"] not in done]
        runs = [r for r in runs if r["task"]["id"] in done]
    doc = {
        "meta": {
            **docs[0]["meta"],
            "n_tasks": len({r["task"]["id"] for r in runs}),
            "dropped": dropped,
            "parts": [d["meta"] for d in docs],
        },
        "summary": summarize(runs),
        "isolation": isolation(runs),
        "runs": runs,
    }
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    parts = ", ".join(f"{p['date']} ({p['commit']}, code {p.get('code')})" for p in doc["meta"]["parts"])
    md = (
        markdown(doc)
        + f"\nMerged from {len(docs)} part(s) run in separate processes: {parts}.\n"
        + (
            f"Left out (a part had stopped before every pattern finished the task): {', '.join(dropped)}.\n"
            if dropped
            else ""
        )
    )
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


def main(argv=None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    if a.merge:
        return merge([Path(f) for f in a.merge], Path(a.out or RESULTS / "patterns_merged.json"), a.common_tasks)
    names = a.patterns or list(PATTERNS)

    import torch  # lazy: only a run needs it

    from toolkit.models import REAL_OFFLINE, load
    from toolkit.patterns.setup import Setup

    torch.set_num_threads(max(1, a.threads))
    loaded = load(a.model)
    setup = Setup.from_loaded(loaded, max_new_tokens=a.max_new_tokens)
    slug = (
        REAL_OFFLINE
        if loaded.kind == "real-offline"
        else "stand-in"
        if not loaded.semantic
        else (re.sub(r"[^a-z0-9.]+", "-", loaded.name.lower()).strip("-"))
    )
    if a.what == "rag":
        return run_rag(a, loaded, setup, slug)
    out = Path(a.out) if a.out else RESULTS / f"patterns_{slug}.json"
    run_meta = meta(
        loaded.description,
        repo=Path(__file__).resolve().parents[1],
        n_tasks=a.n,
        seed=a.seed,
        settings=setup.settings,
        code=code_hash(),
        semantic=loaded.semantic,
        label="real model" if loaded.semantic else "RANDOM-WEIGHT STAND-IN: mechanics only",
    )
    print(f"model: {loaded.description}\nsettings: {setup.settings}\nresults: {out}")
    key = lambda r: (r["pattern"], json.dumps(r["task"], sort_keys=True))  # noqa: E731
    cached = {} if a.fresh else resumable(out, run_meta, key)
    runs: list[dict] = []
    for t in tasks(a.n, a.seed):  # tasks outer: a run stopped early has every pattern on the first tasks
        for name in names:
            r = cached.get((name, json.dumps(t.to_json(), sort_keys=True)))
            if r is None:
                t0 = time.perf_counter()
                r = PATTERNS[name](setup, t).to_json()
                r["seconds"] = round(time.perf_counter() - t0, 1)
            else:
                r["resumed"] = True
            runs.append(r)
            print(
                f"{name:>16} {t.id:<14} {'ok ' if r['success'] else 'no '} turns {r['n_turns']:>2} "
                f"prefilled {r['prefilled']:>5} decoded {r['decoded']:>4} {r['seconds']:>6.1f} s  "
                f"answer: {(r['answer'] or '')[:70]!r}" + "".join(f"\n{'':>17} host: {n}" for n in r["notes"]),
                flush=True,
            )
            doc = {"meta": run_meta, "summary": summarize(runs), "isolation": isolation(runs), "runs": runs}
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
            out.with_suffix(".md").write_text(markdown(doc))  # after every run: a killed run leaves both in step
    rows = summarize(runs)
    print("\n" + table(rows))
    for row in isolation(runs):
        print(f"main context by turn, {row['task']}: isolated {row['isolated']} vs shared {row['shared']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
