"""BFCL accuracy of a kit backend in three modes (prompt / native / constrained), pass^k, chains and
tool-description variants — resumable, batched, with a progress bar.

Run (each output is cached under ~/.cache/toolcall-kit/bfcl, so a killed run resumes where it stopped):
  python benchmarks/bfcl.py accuracy --model qwen2.5-coder-0.5b                 # all 5 categories × 3 modes
  python benchmarks/bfcl.py accuracy --limit 20 --modes constrained             # a seeded 20 per category
  python benchmarks/bfcl.py accuracy --model qwen2.5-coder-0.5b+lora+rl --modes native   # + RL adapter (issue 38)
  python benchmarks/bfcl.py passk --tasks 100 --samples 8 --temperature 0.7     # pass^k on a seeded subset
  python benchmarks/bfcl.py chains | descriptions                               # the kit's own tasks
  python benchmarks/bfcl.py levers --limit 25                                   # parallel-call levers, a subset
  python benchmarks/bfcl.py gate                                                # the first-token gate's dial
  python benchmarks/bfcl.py report                                              # rewrite the .md only
Writes benchmarks/results/bfcl_<model>.json + .md (date, machine, model, commit per section) and prints
cases/s per mode. Counts in every table are the cases that actually ran; nothing is extrapolated.

Leaves out: BFCL's live/multi-turn/agentic categories; timed asserts (this prints, it does not judge).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# light imports only up here: the command line is parsed and checked before xgrammar and torch load (toolkit.eval's
# other modules import them), so each function imports what it runs
from toolkit import cliargs  # noqa: E402
from toolkit.eval import choices as C  # noqa: E402  (the names a run is asked for: light)
from toolkit.eval.choices import LEVER_CATEGORIES, LEVER_MAX_NEW, PROMPT_LEVERS  # noqa: E402
from toolkit.eval.stats import gate_curve  # noqa: E402  (light: the gate's dial as shares of cases)
from toolkit.models import DTYPES  # noqa: E402  (light: torch loads inside load())

VERSION = 3  # bump when prompts, grammars or levers change: old cached outputs are then not reused
RESULTS = os.path.join(os.path.dirname(__file__), "results")


def _slug(model: str) -> str:
    return model if model in ("qwen2.5-coder-0.5b", "stand-in") else os.path.basename(model.rstrip("/"))


def _load(name: str, dtype: str = "auto"):
    from toolkit.backends.hf import HFBackend
    from toolkit.models import load

    return (loaded := load(name, dtype=None if dtype == "auto" else dtype)), HFBackend.from_loaded(loaded)


def _progress(total, desc):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="case", file=sys.stderr, dynamic_ncols=True)


def _echo(a, *names) -> dict:
    """The run's settings as saved beside its results."""
    return {n: getattr(a, n) for n in names}


def _save(a, loaded, section: str, data: dict, **meta) -> None:
    """Add ``section`` to ``benchmarks/results/bfcl_<model>.json`` (+ .md) with date, machine, model and commit."""
    from toolkit.eval import report

    if a.no_save:
        return
    out = os.path.join(a.out, f"bfcl_{_slug(a.model)}.json")
    report.save_results(out, section, data, report.meta(loaded.description, semantic=loaded.semantic, **meta))
    print(f"wrote {out} and .md")


def _cached(a, loaded, backend, cases, levers, desc, extra: dict | None = None, **run) -> list:
    """``run_cases`` over ``cases`` with its cache under ``a.cache`` (keyed by ``levers`` and ``extra``) and a
    progress bar."""
    from toolkit.eval.run import Cache, run_cases

    # the precision is part of the key: generations of a float32, bf16 or int8 build of one model differ
    cache = Cache(a.cache, loaded.name, levers, version=VERSION, precision=loaded.dtype, **(extra or {}))
    bar = _progress(len(cases) * run.get("samples", 1), desc)
    out, tok = [], loaded.tokenizer
    for r in run_cases(cases, backend, levers, tokenizer=tok, cache=cache, cached_only=a.cached_only, **run):
        out.append(r)
        bar.update(1)
    bar.close()
    return out


def run_accuracy(a, loaded, backend) -> list:
    from toolkit.eval import bfcl
    from toolkit.eval.budget import budgets
    from toolkit.eval.levers import Levers

    cases = bfcl.subset(a.categories, a.limit, a.seed)
    results, speed = [], {}
    a.max_new = budgets(a.categories, loaded.tokenizer, a.budget)
    for mode in a.modes:
        fresh_s, fresh_n = 0.0, 0
        for cat in a.categories:
            cs = [c for c in cases if c.category == cat]
            t0 = time.perf_counter()
            n_new = a.max_new[cat]
            levers = Levers(mode=mode, max_new_tokens=n_new)
            got = _cached(a, loaded, backend, cs, levers, f"{mode:>11} {cat}", batch_size=a.batch)
            results += got
            n0 = sum(not r.cached for r in got)
            if n0:
                fresh_s += time.perf_counter() - t0
                fresh_n += n0
        rate = round(fresh_n / fresh_s, 4) if fresh_s else None
        speed[mode] = {"fresh_cases": fresh_n, "seconds": round(fresh_s, 1), "cases_per_s": rate}
    return results, speed


def cmd_accuracy(a) -> int:
    from toolkit.eval import report, sections

    loaded, backend = _load(a.model, a.dtype)
    results, speed = run_accuracy(a, loaded, backend)
    rows = report.summarize(results)
    print(f"\nmodel: {loaded.description}")
    if not loaded.semantic:
        print("NOTE: random weights — mechanics only; these numbers mean nothing about tool calling.")
    print(report.accuracy_report(rows, speed))
    data = dict(rows=rows, speed_this_run=speed, limit_per_category=a.limit, **_echo(a, "seed", "categories", "modes"))
    data |= dict(max_new_tokens=a.max_new, **_echo(a, "budget", "batch"), cases=sections.case_rows(results))
    _save(a, loaded, "accuracy", data, template="qwen2.5", decoding="greedy")
    return 0


def cmd_passk(a) -> int:
    from toolkit.eval import bfcl, report, sections
    from toolkit.eval.levers import Levers

    loaded, backend = _load(a.model, a.dtype)
    per = max(1, a.tasks // len(a.categories))
    cases = bfcl.subset(a.categories, per, a.seed + 1)
    results = []
    for cat in a.categories:
        cs = [c for c in cases if c.category == cat]
        lv = Levers(mode=a.mode, max_new_tokens=C.MAX_NEW.get(cat, 128), temperature=a.temperature, seed=a.seed)
        run = dict(batch_size=a.samples, samples=a.samples)
        results += _cached(a, loaded, backend, cs, lv, f"pass^k {a.mode} {cat}", {"samples": a.samples}, **run)
    per_task, table = sections.pass_k(results, a.samples)
    print(
        f"\nmodel: {loaded.description}; mode {a.mode}; T={a.temperature}; {len(per_task)} tasks × {a.samples} samples"
    )
    print(report.pass_k_table(table))
    data = dict(table=table, tasks=per_task, **_echo(a, "mode", "temperature", "samples", "categories"))
    _save(a, loaded, "pass_k", data)
    return 0


CHAINS_VERSION = 3  # the chains' own cache key (VERSION stays the BFCL runs'); bump when chain tasks change


def cmd_chains(a) -> int:
    from toolkit.book.claims_chains import BOUND_KEY
    from toolkit.eval import chain_table, report, sections

    loaded, backend = _load(a.model, a.dtype)
    marks = C.LANDMARKS[a.first : a.first + a.landmarks]
    cache = sections.ItemCache(
        a.cache, loaded.name, CHAINS_VERSION, max_new_tokens=96, temperature=0.0, seed=0, precision=loaded.dtype
    )
    plan = len(marks) * sum(6 + (len(a.ks) if C.LEVERS[v][1] == "chain" else 1 + len(a.pair_ks)) for v in a.levers)
    bar = _progress(plan, "chains")
    records, t0 = [], time.perf_counter()
    for rec in chain_table.measure(
        backend, loaded.tokenizer, marks, a.levers, a.ks, a.pair_ks, cache=cache, cached_only=a.cached_only
    ):
        records.append(rec)
        bar.update(1)
    bar.close()
    data = sections.chain_summary(records, a.levers, BOUND_KEY)
    timed = [r["seconds"] for r in data["chains"] if r.get("seconds")]
    print(
        f"\nmodel: {loaded.description}; {len(marks)} landmark(s); {len(records)} items "
        f"({sum(not r['cached'] for r in records)} run now, {time.perf_counter() - t0:.0f} s)"
    )
    if timed:
        print(f"seconds per chain (as run, cached ones included): mean {sum(timed) / len(timed):.1f} over {len(timed)}")
    for lever, r in data["step_rates"].items():
        if not lever.endswith("+ retry"):
            n = data["step_n"][lever]
            print(f"isolated step rates, {lever}: " + ", ".join(f"{s} {v:.2f} (n={n[s]})" for s, v in r.items()))
    print(report.chains_table(data["rows"]))
    print(
        "p^k vs measured: "
        + "; ".join(
            f"{k}: {v['verdict']} ({v['product_above_interval']} rows above the interval, "
            f"{v['product_below_interval']} below, {v['inside']} inside)"
            for k, v in data["bound"].items()
        )
    )
    data |= dict(landmarks=list(marks), ks=list(a.ks), pair_ks=list(a.pair_ks))
    data["levers"] = {k: {"loop": C.LEVERS[k][0], "tasks": C.LEVERS[k][1]} for k in a.levers}
    _save(a, loaded, "chains", data, decoding="greedy", max_new_tokens=96)
    return 0


def cmd_levers(a) -> int:
    from toolkit.eval import bfcl, report, sections
    from toolkit.eval.levers import Levers

    loaded, backend = _load(a.model, a.dtype)
    cases = bfcl.subset(a.categories, a.limit, a.seed)
    results, speed = {}, {}
    for lever in a.levers:
        kw = dict(PROMPT_LEVERS[lever])
        mode = kw.pop("mode", "constrained")
        t0, fresh = time.perf_counter(), 0
        for cat in a.categories:
            cs = [c for c in cases if c.category == cat]
            n_new = LEVER_MAX_NEW.get(cat, 128)
            levers = Levers(mode=mode, max_new_tokens=n_new, **kw)
            got = _cached(a, loaded, backend, cs, levers, f"{lever:>17} {cat}", {"lever": lever}, batch_size=a.batch)
            results[(lever, cat)] = got
            fresh += sum(not r.cached for r in got)
        speed[lever] = {"fresh_cases": fresh, "seconds": round(time.perf_counter() - t0, 1)}
    rows = sections.lever_rows(results, report.PUBLISHED[report.PROMPT_ROW])
    print(
        f"\nmodel: {loaded.description}; constrained mode (prompt mode where a lever says so); {a.limit} per category (seed {a.seed})"
    )
    print(report.levers_table(rows))
    print("this run: " + ", ".join(f"{k} {v['fresh_cases']} new cases in {v['seconds']} s" for k, v in speed.items()))
    data = dict(rows=rows, levers={k: PROMPT_LEVERS[k] for k in a.levers})
    data["max_new_tokens"] = {c: LEVER_MAX_NEW.get(c, 128) for c in a.categories}
    data["mode"] = {lv: PROMPT_LEVERS[lv].get("mode", "constrained") for lv in a.levers}
    data |= dict(limit_per_category=a.limit, **_echo(a, "seed", "categories", "batch"), speed_this_run=speed)
    data["cases"] = sections.lever_cases(results)
    _save(a, loaded, a.section, data, template="qwen2.5", decoding="greedy")
    return 0


def cmd_gate(a) -> int:
    """The first-token gate's input on every case: the model's probability, at the first step of the constrained
    prompt, of opening structured output (what :class:`toolkit.eval.bfcl.IntentGate` thresholds). One forward
    per case, no generation."""
    from toolkit.eval import bfcl, report
    from toolkit.eval.bfcl import GATE_THRESHOLD
    from toolkit.eval.run import first_tokens

    loaded, backend = _load(a.model, a.dtype)
    cases = bfcl.subset(a.categories, a.limit, a.seed)
    masses: dict[str, dict[str, float]] = {c: {} for c in a.categories}
    bar, t0 = _progress(len(cases), "gate masses"), time.perf_counter()
    for c in cases:
        mass = first_tokens(backend, loaded.tokenizer, c, "constrained")["structured_mass"]
        masses[c.category][c.id] = round(mass, 6)
        bar.update(1)
    bar.close()
    curve = gate_curve(masses)
    print(f"\nmodel: {loaded.description}; {len(cases)} cases, {time.perf_counter() - t0:.0f} s")
    print(report.gate_table(curve))
    data = {"curve": curve, "masses": masses, "default_threshold": GATE_THRESHOLD, "limit_per_category": a.limit}
    _save(a, loaded, "gate", data, template="qwen2.5")
    return 0


def cmd_descriptions(a) -> int:
    from toolkit.eval import bfcl, report, sections
    from toolkit.eval.descriptions import renamed_answer, variants
    from toolkit.eval.levers import Levers
    from toolkit.eval.report import percent

    loaded, backend = _load(a.model, a.dtype)
    cases = bfcl.subset(["multiple"], a.limit, a.seed + 2)
    rows, per_case = [], []
    for v in a.variants:
        tools_of = {c.id: variants(c)[v] for c in cases}
        scored = {c.id: renamed_answer(c, tools_of[c.id]) for c in cases}
        lv, tools_for = Levers(mode=a.mode, max_new_tokens=64), lambda c, t=tools_of: t[c.id]
        run = dict(batch_size=8, tools_for=tools_for)
        res = _cached(a, loaded, backend, list(scored.values()), lv, f"descriptions {v}", {"variant": v}, **run)
        if not res:
            continue
        row, records = sections.description_row(v, a.mode, res, scored, tools_of, cases, loaded.tokenizer)
        rows.append(row)
        per_case += records
    print(f"\nmodel: {loaded.description}; up to {len(cases)} BFCL 'multiple' cases, {a.mode} mode")
    print(report.descriptions_table(rows))
    print("AST-correct (BFCL rules): " + ", ".join(f"{r['variant']} {percent(r['ast_accuracy'])}" for r in rows))
    _save(a, loaded, "descriptions", {"rows": rows, "cases": per_case, "variants": list(C.VARIANTS)})
    return 0


def _saved(a) -> tuple[Path, dict]:
    from toolkit.eval import report

    out = Path(a.out) / f"bfcl_{_slug(a.model)}.json"
    doc = report.load_results(out)
    if not doc:
        print(f"no results at {out}")
    return out, doc


def cmd_report(a) -> int:
    from toolkit.eval import report

    out, doc = _saved(a)
    if doc:
        out.with_suffix(".md").write_text(report.markdown(doc))
        print(report.markdown(doc))
    return 0 if doc else 1


def cmd_rescore(a) -> int:
    """Every saved output re-read and re-scored with today's reader and scorer (no model runs): the verdicts, the
    tables' counts and the .md follow; each section's meta records when and how many verdicts changed."""
    from toolkit.eval import bfcl, report
    from toolkit.eval.rescore import rescore
    from toolkit.paths import provenance

    out, doc = _saved(a)
    if not doc:
        return 1
    cases = {c.id: c for c in bfcl.subset()}
    stamp = dict(date=time.strftime("%Y-%m-%d"), commit=provenance()["commit"])
    for name, kinds in rescore(doc, cases, stamp).items():
        print(f"{name}: {sum(kinds.values())} verdicts changed {kinds or ''}")
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    out.with_suffix(".md").write_text(report.markdown(doc))
    print(f"wrote {out} and .md")
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line. ``--categories`` defaults per subcommand (see :func:`parse`): argparse shares a parent's
    actions between subparsers, so a ``set_defaults`` on one subparser would change every other one's default."""
    p = cliargs.Parser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--model", type=cliargs.model, default="qwen2.5-coder-0.5b")
    common.add_argument("--categories", nargs="+", default=None, help="default: all five (levers: its four)")
    common.add_argument("--seed", type=cliargs.seed, default=0)
    common.add_argument("--dtype", choices=DTYPES, default="auto", help="auto: bf16 where this CPU is fast at it")
    cache = os.path.join(os.path.expanduser("~"), ".cache", "toolcall-kit", "bfcl")
    common.add_argument("--cache", type=cliargs.out_dir, default=cache)
    common.add_argument("--out", type=cliargs.out_dir, default=RESULTS)
    common.add_argument("--no-save", action="store_true")
    cached = dict(action="store_true", help="generate nothing: table what earlier (resumed) runs cached")
    limit = dict(type=cliargs.count(1), help="seeded sample of N cases per category (default: all)")
    acc = sub.add_parser("accuracy", parents=[common])
    acc.add_argument("--modes", nargs="+", default=list(C.MODES), choices=C.MODES)
    acc.add_argument("--limit", default=None, **limit)
    acc.add_argument("--batch", type=cliargs.count(1), default=8)
    acc.add_argument(
        "--budget",
        default="measured",
        choices=["measured", "fixed"],
        help="new tokens per category: enough for its longest answer (measured) or the saved runs' fixed MAX_NEW",
    )
    acc.add_argument("--cached-only", **cached)
    pk = sub.add_parser("passk", parents=[common])
    pk.add_argument("--tasks", type=cliargs.count(1), default=100)
    pk.add_argument("--samples", type=cliargs.count(1), default=8)
    pk.add_argument("--temperature", type=cliargs.number(0.0, 10.0), default=0.7)
    pk.add_argument("--mode", default="constrained", choices=C.MODES)
    pk.add_argument("--cached-only", **cached)
    ch = sub.add_parser("chains", parents=[common])
    ch.add_argument("--landmarks", type=cliargs.count(1), default=len(C.LANDMARKS), help="the first N landmarks")
    ch.add_argument("--first", type=cliargs.count(0), default=0, help="start at this landmark (split a run)")
    ch.add_argument("--ks", type=cliargs.count(1), nargs="*", default=list(range(1, C.MAX_K + 1)))
    ch.add_argument("--pair-ks", type=cliargs.count(1), nargs="+", default=list(C.PAIR_KS), choices=C.PAIR_KS)
    ch.add_argument("--levers", nargs="+", default=list(C.LEVERS), choices=list(C.LEVERS))
    ch.add_argument("--cached-only", **cached)
    de = sub.add_parser("descriptions", parents=[common])
    de.add_argument("--limit", default=20, **limit)
    de.add_argument("--mode", default="constrained", choices=C.MODES)
    de.add_argument("--variants", nargs="+", default=list(C.VARIANTS), choices=C.VARIANTS)
    de.add_argument("--cached-only", **cached)
    lv = sub.add_parser("levers", parents=[common])
    lv.add_argument("--limit", default=20, **limit)
    lv.add_argument("--levers", nargs="+", default=list(PROMPT_LEVERS), choices=list(PROMPT_LEVERS))
    lv.add_argument("--batch", type=cliargs.count(1), default=8)
    lv.add_argument("--cached-only", **cached)
    lv.add_argument(
        "--section",
        default="levers",
        choices=["levers", "levers_full"],
        help="results section to write: the subset comparison, or whole categories for the chosen levers",
    )
    sub.add_parser("gate", parents=[common]).add_argument("--limit", default=None, **limit)
    sub.add_parser("report", parents=[common])
    sub.add_parser("rescore", parents=[common])
    return p


def parse(argv=None) -> argparse.Namespace:
    """Parse and check the command line before any model loads (an unknown category is a one-line usage error)."""
    p = parser()
    a = p.parse_args(argv)
    if a.categories is None:
        a.categories = list(LEVER_CATEGORIES if a.cmd == "levers" else C.CATEGORIES)
    if unknown := [c for c in a.categories if c not in C.CATEGORIES]:
        p.error(f"unknown or unsupported BFCL categories {unknown}; this benchmark scores {list(C.CATEGORIES)}")
    return a


def main(argv=None) -> int:
    a = parse(argv)
    from toolkit.eval import report  # after the parse: a usage error never waits for xgrammar and torch
    from toolkit.eval.run import CacheConflict

    try:
        return _dispatch(a)
    except (report.ResultsUnreadable, CacheConflict) as e:  # a saved file the run would read or extend: say so
        print(f"bfcl.py {a.cmd}: error: {e}", file=sys.stderr)
        return 1


def _dispatch(a) -> int:
    return globals()[f"cmd_{a.cmd}"](a)  # accuracy, passk, chains, descriptions, levers, gate, report, rescore


if __name__ == "__main__":
    sys.exit(main())
