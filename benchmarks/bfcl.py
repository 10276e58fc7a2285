"""BFCL accuracy of a kit backend in three modes (prompt / native / constrained), pass^k, chains and
tool-description variants — resumable, batched, with a progress bar.

Run (each output is cached under ~/.cache/toolcall-kit/bfcl, so a killed run resumes where it stopped):
  python benchmarks/bfcl.py accuracy --model qwen2.5-coder-0.5b                 # all 5 categories × 3 modes
  python benchmarks/bfcl.py accuracy --limit 20 --modes constrained             # a seeded 20 per category
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
from types import SimpleNamespace
from typing import TYPE_CHECKING

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# light imports only up here: the command line is parsed and checked before xgrammar and torch load (toolkit.eval's
# other modules import them), so each function imports what it runs
from toolkit import cliargs  # noqa: E402
from toolkit.eval.choices import CATEGORIES, HINTS, LANDMARKS, LEVERS, MAX_K, MODES, PAIR_KS, VARIANTS  # noqa: E402

if TYPE_CHECKING:
    from toolkit.eval.levers import Levers

# The fixed budgets of the saved base-model runs; `accuracy --budget measured` (the default since issue 25) gives each
# category enough for its longest possible answer instead (toolkit.eval.budget: 112 / 96 / 352 / 224, text 64).
MAX_NEW = {"simple_python": 64, "multiple": 64, "irrelevance": 64, "parallel": 128, "parallel_multiple": 128}


def budgets(a, tokenizer) -> dict[str, int]:
    from toolkit.eval import budget

    if getattr(a, "budget", "fixed") == "fixed":
        return {c: MAX_NEW[c] for c in a.categories}
    return {c: budget.budget(c, tokenizer) for c in a.categories}


VERSION = 3  # bump when prompts, grammars or levers change: old cached outputs are then not reused
RESULTS = os.path.join(os.path.dirname(__file__), "results")


def _slug(model: str) -> str:
    return {"qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b", "stand-in": "stand-in"}.get(
        model, os.path.basename(model.rstrip("/"))
    )


def _load(name: str, cached_only: bool = False):
    from toolkit.backends.hf import HFBackend
    from toolkit.models import load

    loaded = load(name)
    return loaded, HFBackend.from_loaded(loaded)


def _progress(total, desc):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="case", file=sys.stderr, dynamic_ncols=True)


def _save(a, loaded, section: str, data: dict, **meta) -> None:
    """Add ``section`` to ``benchmarks/results/bfcl_<model>.json`` (+ .md) with date, machine, model and commit."""
    from toolkit.eval import report

    if a.no_save:
        return
    out = os.path.join(a.out, f"bfcl_{_slug(a.model)}.json")
    report.save_results(out, section, data, report.meta(loaded.description, semantic=loaded.semantic, **meta))
    print(f"wrote {out} and .md")


def _cached(a, loaded, backend, cases, levers: Levers, desc, extra: dict | None = None, **run) -> list:
    """``run_cases`` over ``cases`` with its cache under ``a.cache`` (keyed by ``levers`` and ``extra``) and a
    progress bar."""
    from toolkit.eval.run import Cache, run_cases

    cache = Cache(a.cache, loaded.name, levers, version=VERSION, **(extra or {}))
    bar = _progress(len(cases) * run.get("samples", 1), desc)
    out = []
    tok = loaded.tokenizer
    for r in run_cases(cases, backend, levers, tokenizer=tok, cache=cache, cached_only=a.cached_only, **run):
        out.append(r)
        bar.update(1)
    bar.close()
    return out


def run_accuracy(a, loaded, backend) -> list:
    from toolkit.eval import bfcl
    from toolkit.eval.levers import Levers

    cases = bfcl.subset(a.categories, a.limit, a.seed)
    results, speed = [], {}
    a.max_new = budgets(a, loaded.tokenizer)
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
        speed[mode] = {
            "fresh_cases": fresh_n,
            "seconds": round(fresh_s, 1),
            "cases_per_s": round(fresh_n / fresh_s, 4) if fresh_s else None,
        }
    return results, speed


def cmd_accuracy(a) -> int:
    from toolkit.eval import report

    loaded, backend = _load(a.model)
    results, speed = run_accuracy(a, loaded, backend)
    rows = report.summarize(results)
    print(f"\nmodel: {loaded.description}")
    if not loaded.semantic:
        print("NOTE: random weights — mechanics only; these numbers mean nothing about tool calling.")
    print(report.accuracy_table(rows))
    print()
    print(report.taxonomy_table(rows))
    print()
    print(report.cost_table(rows))
    print(
        "\nthis run (fresh generations only): "
        + ", ".join(
            f"{m} {s['fresh_cases']} cases in {s['seconds']} s = {s['cases_per_s']} cases/s" for m, s in speed.items()
        )
    )
    data = {
        "rows": rows,
        "speed_this_run": speed,
        "limit_per_category": a.limit,
        "seed": a.seed,
        "categories": a.categories,
        "modes": a.modes,
        "max_new_tokens": a.max_new,
        "budget": a.budget,
        "batch": a.batch,
        "cases": [
            {
                "id": r.id,
                "mode": r.mode,
                "ok": r.ok,
                "kind": r.kind,
                "text": r.text,
                "calls": r.calls,
                "prompt_tokens": r.prompt_tokens,
                "new_tokens": r.new_tokens,
            }
            for r in results
        ],
    }
    _save(a, loaded, "accuracy", data, template="qwen2.5", decoding="greedy")
    return 0


def cmd_passk(a) -> int:
    from toolkit.eval import bfcl, report
    from toolkit.eval.levers import Levers
    from toolkit.eval.stats import pass_k_table

    loaded, backend = _load(a.model)
    per = max(1, a.tasks // len(a.categories))
    cases = bfcl.subset(a.categories, per, a.seed + 1)
    results = []
    for cat in a.categories:
        cs = [c for c in cases if c.category == cat]
        n_new = MAX_NEW.get(cat, 128)
        levers = Levers(mode=a.mode, max_new_tokens=n_new, temperature=a.temperature, seed=a.seed)
        desc = f"pass^k {a.mode} {cat}"
        results += _cached(
            a, loaded, backend, cs, levers, desc, {"samples": a.samples}, batch_size=a.samples, samples=a.samples
        )
    per_task: dict[str, list] = {}
    for r in results:
        per_task.setdefault(r.id, []).append(r.ok)
    per_task = {k: v for k, v in per_task.items() if len(v) == a.samples}  # --cached-only: complete tasks only
    counts = [(len(v), sum(v)) for v in per_task.values()]
    table = pass_k_table(counts, range(1, a.samples + 1))
    print(f"\nmodel: {loaded.description}; mode {a.mode}; T={a.temperature}; {len(counts)} tasks × {a.samples} samples")
    print(report.pass_k_table(table))
    data = {
        "table": table,
        "tasks": {k: v for k, v in per_task.items()},
        "mode": a.mode,
        "temperature": a.temperature,
        "samples": a.samples,
        "categories": a.categories,
    }
    _save(a, loaded, "pass_k", data)
    return 0


CHAINS_VERSION = 3  # the chains' own cache key (VERSION stays the BFCL runs'); bump when chain tasks change


class _ItemCache:
    """One JSON file per chain or step task under ``<cache>/chains/<model>/<settings>/`` (a killed run resumes)."""

    def __init__(self, root: str, model: str, **settings):
        from toolkit.eval.run import Cache

        self._c = Cache(os.path.join(root, "chains"), model, version=CHAINS_VERSION, **settings)

    def _id(self, key: str) -> str:
        import hashlib

        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def get(self, key):
        return self._c.get("items", self._id(key))

    def put(self, key, rec):
        self._c.put("items", self._id(key), 0, {**rec, "key": key})


def cmd_chains(a) -> int:
    from toolkit.book.claims_chains import BOUND_KEY
    from toolkit.eval import chain_table, report
    from toolkit.eval.stats import wilson

    loaded, backend = _load(a.model)
    marks = LANDMARKS[a.first : a.first + a.landmarks]
    cache = _ItemCache(a.cache, loaded.name, max_new_tokens=96, temperature=0.0, seed=0)
    plan = len(marks) * sum(6 + (len(a.ks) if LEVERS[v][1] == "chain" else 1 + len(a.pair_ks)) for v in a.levers)
    bar = _progress(plan, "chains")
    records, t0 = [], time.perf_counter()
    for rec in chain_table.measure(
        backend, loaded.tokenizer, marks, a.levers, a.ks, a.pair_ks, cache=cache, cached_only=a.cached_only
    ):
        records.append(rec)
        bar.update(1)
    bar.close()
    fresh = [r for r in records if not r["cached"]]
    chains_run = [r for r in records if r["kind"] == "chain"]
    rates, step_n = chain_table.step_rates(records, a.levers)
    rows = chain_table.table(chains_run, rates)
    bounds = {BOUND_KEY: chain_table.bound(chain_table.comparable(rows))}
    for lever in dict.fromkeys(r["lever"] for r in rows):
        bounds[lever] = chain_table.bound([r for r in rows if r["lever"] == lever])
    timed = [r["seconds"] for r in chains_run if r.get("seconds")]
    print(
        f"\nmodel: {loaded.description}; {len(marks)} landmark(s); {len(records)} items ({len(fresh)} run now, "
        f"{time.perf_counter() - t0:.0f} s)"
    )
    if timed:
        print(f"seconds per chain (as run, cached ones included): mean {sum(timed) / len(timed):.1f} over {len(timed)}")
    for lever, r in rates.items():
        if not lever.endswith("+ retry"):
            print(
                f"isolated step rates, {lever}: "
                + ", ".join(f"{s} {v:.2f} (n={step_n[lever][s]})" for s, v in r.items())
            )
    print(report.chains_table(rows))
    print(
        "p^k vs measured: "
        + "; ".join(
            f"{k}: {v['verdict']} ({v['product_above_interval']} rows above the interval, "
            f"{v['product_below_interval']} below, {v['inside']} inside)"
            for k, v in bounds.items()
        )
    )
    step_ci = {}
    for lever, r in rates.items():
        step_ci[lever] = {s: list(wilson(round(v * step_n[lever][s]), step_n[lever][s])) for s, v in r.items()}
    data = {
        "rows": rows,
        "chains": [{k: v for k, v in r.items() if k not in ("cached", "kind")} for r in chains_run],
        "step_rates": rates,
        "step_n": step_n,
        "step_intervals": step_ci,
        "bound": bounds,
        "landmarks": list(marks),
        "ks": list(a.ks),
        "pair_ks": list(a.pair_ks),
        "levers": {k: {"loop": LEVERS[k][0], "tasks": LEVERS[k][1]} for k in a.levers},
        "seconds_per_chain": round(sum(timed) / len(timed), 1) if timed else None,
    }
    _save(a, loaded, "chains", data, decoding="greedy", max_new_tokens=96)
    return 0


PROMPT_LEVERS = {  # item 6: general levers for the constrained mode (no knowledge of category or answer)
    "baseline": {},
    "hint": {"system_hint": HINTS["one-block-per-call"]},
    "more-calls": {"more_calls": True},
    "list": {"list_calls": True},
    # the gate's threshold as a dial (toolkit.eval.bfcl.IntentGate, 0.85 by default): 0.7 read off the first-step
    # masses of all 1,240 cases (`python benchmarks/bfcl.py gate`) as the point where irrelevance still calls in
    # under half of its cases — chosen on the evaluation data, so an optimistic estimate of what the dial gives
    "list + gate 0.7": {"list_calls": True, "gate_threshold": 0.7},
    "list + hint": {"list_calls": True, "system_hint": HINTS["one-call-per-item"]},
    "list + hint + gate 0.7": {"list_calls": True, "system_hint": HINTS["one-call-per-item"], "gate_threshold": 0.7},
    # BFCL's own prompt style (functions in the system prompt, `[f(a=1), g(b=2)]`), decoded under a grammar of
    # those calls or short text, the first token gated onto "[" at the default threshold
    "python list (prompt style)": {"mode": "prompt", "python_calls": True},
    # the same with the gate's argmax setting (threshold None): the pooled opening mass against the best other token
    "python list, gate argmax": {"mode": "prompt", "python_calls": True, "gate_threshold": None},
    # ... and at 0.5: a call when the model more likely than not opens structured output (chosen before measuring)
    "python list, gate 0.5": {"mode": "prompt", "python_calls": True, "gate_threshold": 0.5},
}
LEVER_CATEGORIES = ["parallel", "parallel_multiple", "simple_python", "irrelevance"]
# the levers' token budget: room for four calls in the parallel categories (a list of 3–4 compact JSON calls
# runs past the accuracy runs' 128), the same for every lever
LEVER_MAX_NEW = {**MAX_NEW, "parallel": 256, "parallel_multiple": 256}


def cmd_levers(a) -> int:
    from toolkit.eval import bfcl, report
    from toolkit.eval.levers import Levers

    loaded, backend = _load(a.model)
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
    pub = report.PUBLISHED[report.PROMPT_ROW]
    rows = []
    for (lever, cat), rs in results.items():
        if not rs:
            continue
        n = len(rs)
        base = results.get(("baseline", cat))
        rows.append(
            {
                "lever": lever,
                **report.rate_row(cat, rs),
                "calls_per_case": sum(len(r.calls) for r in rs) / n,
                "baseline": (sum(r.ok for r in base) / len(base)) if base else None,
                "published_prompt": pub.get(cat),
            }
        )
    print(
        f"\nmodel: {loaded.description}; constrained mode (prompt mode where a lever says so); {a.limit} per category (seed {a.seed})"
    )
    print(report.levers_table(rows))
    print("this run: " + ", ".join(f"{k} {v['fresh_cases']} new cases in {v['seconds']} s" for k, v in speed.items()))
    data = {
        "rows": rows,
        "levers": {k: PROMPT_LEVERS[k] for k in a.levers},
        "max_new_tokens": {c: LEVER_MAX_NEW.get(c, 128) for c in a.categories},
        "mode": {lv: PROMPT_LEVERS[lv].get("mode", "constrained") for lv in a.levers},
        "limit_per_category": a.limit,
        "seed": a.seed,
        "categories": a.categories,
        "batch": a.batch,
        "speed_this_run": speed,
        "cases": [
            {"lever": lv, "id": r.id, "ok": r.ok, "kind": r.kind, "text": r.text}
            for (lv, _), rs in results.items()
            for r in rs
        ],
    }
    _save(a, loaded, a.section, data, template="qwen2.5", decoding="greedy")
    return 0


GATE_THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)] + [0.85]


def gate_curve(masses: dict[str, dict[str, float]], thresholds=GATE_THRESHOLDS) -> dict:
    """``masses[category][case id]`` → per category the share of cases whose mass reaches each threshold."""
    ts = sorted(set(thresholds))
    return {
        "thresholds": ts,
        "share": {c: [sum(m >= t for m in ms.values()) / len(ms) for t in ts] for c, ms in masses.items() if ms},
    }


def cmd_gate(a) -> int:
    """The first-token gate's input on every case: the model's probability, at the first step of the constrained
    prompt, of opening structured output (what :class:`toolkit.eval.bfcl.IntentGate` thresholds). One forward
    per case, no generation."""
    from toolkit.eval import bfcl, report
    from toolkit.eval.bfcl import GATE_THRESHOLD
    from toolkit.eval.run import first_tokens

    loaded, backend = _load(a.model)
    cases = bfcl.subset(a.categories, a.limit, a.seed)
    masses: dict[str, dict[str, float]] = {c: {} for c in a.categories}
    bar, t0 = _progress(len(cases), "gate masses"), time.perf_counter()
    for c in cases:
        masses[c.category][c.id] = round(
            first_tokens(backend, loaded.tokenizer, c, "constrained")["structured_mass"], 6
        )
        bar.update(1)
    bar.close()
    curve = gate_curve(masses)
    print(f"\nmodel: {loaded.description}; {len(cases)} cases, {time.perf_counter() - t0:.0f} s")
    print(report.gate_table(curve))
    data = {"curve": curve, "masses": masses, "default_threshold": GATE_THRESHOLD, "limit_per_category": a.limit}
    _save(a, loaded, "gate", data, template="qwen2.5")
    return 0


def cmd_descriptions(a) -> int:
    from toolkit.eval import bfcl, report
    from toolkit.eval.descriptions import renamed_answer, selected, variants
    from toolkit.eval.levers import Levers
    from toolkit.eval.report import percent
    from toolkit.eval.stats import wilson
    from toolkit.render import tool_definition_cost

    loaded, backend = _load(a.model)
    cases = bfcl.subset(["multiple"], a.limit, a.seed + 2)
    rows, per_case = [], []
    for v in a.variants:
        tools_of = {c.id: variants(c)[v] for c in cases}
        scored = {c.id: renamed_answer(c, tools_of[c.id]) for c in cases}
        res = _cached(
            a,
            loaded,
            backend,
            list(scored.values()),
            Levers(mode=a.mode, max_new_tokens=64),
            f"descriptions {v}",
            {"variant": v},
            batch_size=8,
            tools_for=lambda c, t=tools_of: t[c.id],
        )
        if not res:
            continue
        n, sel = len(res), sum(selected(r.calls, scored[r.id]) for r in res)
        ok = sum(r.ok for r in res)
        lo, hi = wilson(sel, n)
        done = [c for c in cases if c.id in {r.id for r in res}]
        cost = sum(
            tool_definition_cost(tools_of[c.id], "qwen2.5", loaded.tokenizer, per_tool=False)["total"] for c in done
        ) / len(done)
        rows.append(
            {
                "variant": v,
                "mode": a.mode,
                "n": n,
                "accuracy": sel / n,
                "low": lo,
                "high": hi,
                "ast_accuracy": ok / n,
                "tool_tokens": cost,
            }
        )
        per_case += [
            {
                "variant": v,
                "id": r.id,
                "selected": selected(r.calls, scored[r.id]),
                "ok": r.ok,
                "kind": r.kind,
                "text": r.text,
            }
            for r in res
        ]
    print(f"\nmodel: {loaded.description}; up to {len(cases)} BFCL 'multiple' cases, {a.mode} mode")
    print(report.descriptions_table(rows))
    print("AST-correct (BFCL rules): " + ", ".join(f"{r['variant']} {percent(r['ast_accuracy'])}" for r in rows))
    _save(a, loaded, "descriptions", {"rows": rows, "cases": per_case, "variants": list(VARIANTS)})
    return 0


def cmd_report(a) -> int:
    from toolkit.eval import report

    out = os.path.join(a.out, f"bfcl_{_slug(a.model)}.json")
    doc = report.load_results(out)
    if not doc:
        print(f"no results at {out}")
        return 1
    from pathlib import Path

    Path(out).with_suffix(".md").write_text(report.markdown(doc))
    print(report.markdown(doc))
    return 0


def _rescore_section(section: dict, cases: dict, key: str, mode_of, lists_of) -> list:
    """Re-read and re-score each saved output of one section in place (rows of one ``key`` value, "mode" or
    "lever", make one table row); the rows' counts follow. Returns (key value, id, old kind, new kind) per change."""
    from toolkit.eval import report
    from toolkit.eval.run import result_from

    data, changed = section["data"], []
    for row in data["cases"]:
        if row["kind"] == "malformed" and "schema rejected" in str(row.get("detail", "")):
            continue  # the grammar refused the schema: nothing was generated to re-read
        r = result_from(cases[row["id"]], mode_of(row), 0, row["text"], 0, 0, 0.0, "stop", "", lists_of(row))
        if (r.ok, r.kind) != (row["ok"], row["kind"]):
            changed.append((row[key], row["id"], row["kind"], r.kind))
            row["ok"], row["kind"] = r.ok, r.kind
    for t in data["rows"]:
        rs = [c for c in data["cases"] if c[key] == t[key] and cases[c["id"]].category == t["category"]]
        t.update(report.rate_row(t["category"], [SimpleNamespace(ok=c["ok"], kind=c["kind"]) for c in rs]))
    return changed


def cmd_rescore(a) -> int:
    """Every saved output re-read and re-scored with today's reader and scorer (no model runs): the verdicts, the
    tables' counts and the .md follow; each section's meta records when and how many verdicts changed."""
    from toolkit.eval import bfcl, report

    out = os.path.join(a.out, f"bfcl_{_slug(a.model)}.json")
    doc = report.load_results(out)
    if not doc:
        print(f"no results at {out}")
        return 1
    cases = {c.id: c for c in bfcl.subset()}
    from toolkit.paths import provenance

    stamp = dict(date=time.strftime("%Y-%m-%d"), commit=provenance()["commit"])
    for name, sec in doc.items():
        if name == "accuracy":
            changed = _rescore_section(sec, cases, "mode", lambda r: r["mode"], lambda r: False)
        elif name in ("levers", "levers_full"):
            lv = sec["data"]["levers"]
            changed = _rescore_section(
                sec,
                cases,
                "lever",
                lambda r: lv[r["lever"]].get("mode", "constrained"),
                lambda r: lv[r["lever"]].get("list_calls", False),
            )
        else:
            continue
        sec["meta"]["rescored"] = dict(stamp, changed=len(changed))
        kinds = {}
        for _, _, old, new in changed:
            kinds[f"{old} -> {new}"] = kinds.get(f"{old} -> {new}", 0) + 1
        print(f"{name}: {len(changed)} verdicts changed {kinds or ''}")
    from pathlib import Path

    Path(out).write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    Path(out).with_suffix(".md").write_text(report.markdown(doc))
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
    common.add_argument("--seed", type=cliargs.count(0), default=0)
    common.add_argument(
        "--cache", type=cliargs.out_dir, default=os.path.join(os.path.expanduser("~"), ".cache", "toolcall-kit", "bfcl")
    )
    common.add_argument("--out", type=cliargs.out_dir, default=RESULTS)
    common.add_argument("--no-save", action="store_true")
    acc = sub.add_parser("accuracy", parents=[common])
    acc.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    acc.add_argument(
        "--limit", type=cliargs.count(1), default=None, help="seeded sample of N cases per category (default all)"
    )
    acc.add_argument("--batch", type=cliargs.count(1), default=8)
    acc.add_argument(
        "--budget",
        default="measured",
        choices=["measured", "fixed"],
        help="new tokens per category: enough for its longest answer (measured) or the saved runs' fixed MAX_NEW",
    )
    acc.add_argument(
        "--cached-only",
        action="store_true",
        help="generate nothing: collect what earlier (resumed) runs cached into one table",
    )
    pk = sub.add_parser("passk", parents=[common])
    pk.add_argument("--tasks", type=cliargs.count(1), default=100)
    pk.add_argument("--samples", type=cliargs.count(1), default=8)
    pk.add_argument("--temperature", type=cliargs.number(0.0, 10.0), default=0.7)
    pk.add_argument("--mode", default="constrained", choices=MODES)
    pk.add_argument("--cached-only", action="store_true", help="generate nothing: tasks whose samples are all cached")
    ch = sub.add_parser("chains", parents=[common])
    ch.add_argument(
        "--landmarks", type=cliargs.count(1), default=len(LANDMARKS), help="the first N landmarks (default all)"
    )
    ch.add_argument(
        "--first", type=cliargs.count(0), default=0, help="start at this landmark (split a run over processes)"
    )
    ch.add_argument("--ks", type=cliargs.count(1), nargs="*", default=list(range(1, MAX_K + 1)))
    ch.add_argument("--pair-ks", type=cliargs.count(1), nargs="+", default=list(PAIR_KS), choices=PAIR_KS)
    ch.add_argument("--levers", nargs="+", default=list(LEVERS), choices=list(LEVERS))
    ch.add_argument("--cached-only", action="store_true", help="generate nothing: table what earlier runs cached")
    de = sub.add_parser("descriptions", parents=[common])
    de.add_argument("--limit", type=cliargs.count(1), default=20)
    de.add_argument("--mode", default="constrained", choices=MODES)
    de.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    de.add_argument("--cached-only", action="store_true", help="generate nothing: report what is cached")
    lv = sub.add_parser("levers", parents=[common])
    lv.add_argument("--limit", type=cliargs.count(1), default=20, help="seeded sample of N cases per category")
    lv.add_argument("--levers", nargs="+", default=list(PROMPT_LEVERS), choices=list(PROMPT_LEVERS))
    lv.add_argument("--batch", type=cliargs.count(1), default=8)
    lv.add_argument("--cached-only", action="store_true", help="generate nothing: report what is cached")
    lv.add_argument(
        "--section",
        default="levers",
        choices=["levers", "levers_full"],
        help="results section to write: the subset comparison, or whole categories for the chosen levers",
    )
    ga = sub.add_parser("gate", parents=[common])
    ga.add_argument(
        "--limit", type=cliargs.count(1), default=None, help="seeded sample of N cases per category (default all)"
    )
    sub.add_parser("report", parents=[common])
    sub.add_parser("rescore", parents=[common])
    return p


def parse(argv=None) -> argparse.Namespace:
    """Parse and check the command line before any model loads (an unknown category is a one-line usage error)."""
    p = parser()
    a = p.parse_args(argv)
    if a.categories is None:
        a.categories = list(LEVER_CATEGORIES if a.cmd == "levers" else CATEGORIES)
    unknown = [c for c in a.categories if c not in CATEGORIES]
    if unknown:
        p.error(f"unknown or unsupported BFCL categories {unknown}; this benchmark scores {list(CATEGORIES)}")
    return a


def main(argv=None) -> int:
    a = parse(argv)
    from toolkit.eval import report  # after the parse: a usage error never waits for xgrammar and torch

    try:
        return _dispatch(a)
    except report.ResultsUnreadable as e:  # a saved file the run would read or extend: say so, touch nothing
        print(f"bfcl.py {a.cmd}: error: {e}", file=sys.stderr)
        return 1


def _dispatch(a) -> int:
    return {
        "accuracy": cmd_accuracy,
        "passk": cmd_passk,
        "chains": cmd_chains,
        "descriptions": cmd_descriptions,
        "levers": cmd_levers,
        "gate": cmd_gate,
        "report": cmd_report,
        "rescore": cmd_rescore,
    }[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
