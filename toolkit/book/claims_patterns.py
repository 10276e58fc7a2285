"""Claims of §14.5.5 (agent patterns), checked on saved real-model runs: one check per claim.

What it does
- From ``benchmarks/results/patterns_<model>.json`` (``benchmarks/patterns.py``: the five patterns on one seeded
  task set, with date, machine, model, commit; loaded once per ledger run as ``patterns_doc``): whether a ReAct
  thought paid on this model (p_think × p_action′ vs p_action, per step, from the measured per-task rates of ReAct
  and the direct loop), what sub-agent isolation does to the main context (tokens it gains per delegation,
  isolated vs shared), and that the chain is split, not shortened (model turns over all contexts).
- ``simple_task_claims(doc)``: "simple tasks often gain nothing from explicit reasoning": ReAct vs the direct loop
  on the saved tasks that need the fewest tool results, beside the harder ones.
- ``pattern_claims(doc)`` / ``simple_task_claims(doc)`` run the checks on a given saved document (a test's);
  ``patterns_claims()`` reads the saved files (nothing is claimed without its measurement). §14.5.10's retrieval
  claims are ``claims_rag``'s.

What it leaves out
- Re-running the model (minutes per task on two CPU cores): the saved runs are read, and their meta is quoted.
- §14.5.5's "a plan can be wrong from its first step, found late" (needs a judge of plan quality): the inventory
  says why. A thinking model's hidden reasoning: ReAct's thought here is a prompted one, and the verdict says so.
"""

from __future__ import annotations

from statistics import mean

from toolkit.book.claims_rag import RAG
from toolkit.book.evidence import PATTERN_RESULTS
from toolkit.book.ledger import BOOK, Claim, make_verdict
from toolkit.book.registry import Group, run

PATTERNS, SIMPLE = Group("patterns"), Group("simple-tasks")
__all__ = ["PATTERN_RESULTS", "pattern_claims", "patterns_claims", "simple_task_claims"]


def source(doc: dict) -> str:
    m = doc["meta"]
    return f"{m['model'].split(' [')[0]}, {m['date'][:10]}, commit {m['commit']}"


def rate(row: dict) -> str:
    """A pattern's row of the saved summary: successes/n with the Wilson 95% interval the benchmark computed."""
    return f"{row['successes']}/{row['n']} (95% {100 * row['low']:.0f}–{100 * row['high']:.0f}%)"


# ================================================================ §14.5.5
def by_pattern(runs, pattern):
    return {r["task"]["id"]: r for r in runs if r["pattern"] == pattern}


@PATTERNS(
    "react-think-pays",
    f"{BOOK}.5 ReAct",
    "A ReAct thought is one more step of the chain and can fail itself: it pays only when the per-step success with "
    "the thought (p_think × p_action′) exceeds the per-step success without it (p_action).",
    answers=("ReAct…增加链路长度换取单步成功率",),
)
def react_think_pays(patterns_doc):
    rows = {r["pattern"]: r for r in (patterns_doc or {}).get("summary", [])}
    if "direct" not in rows or "react" not in rows:
        return None
    direct, react = by_pattern(patterns_doc["runs"], "direct"), by_pattern(patterns_doc["runs"], "react")
    both = [t for t in direct if t in react]
    if not both:
        return None
    d, r = rows["direct"], rows["react"]
    k = mean(direct[t]["task"]["min_calls"] for t in both)
    p_action, p_pair = d["rate"] ** (1 / k), r["rate"] ** (1 / k)  # per step: S = p^k
    turns_d, turns_r = mean(direct[t]["n_turns"] for t in both), mean(react[t]["n_turns"] for t in both)
    tok_d = mean(direct[t]["prefilled"] + direct[t]["decoded"] for t in both)
    tok_r = mean(react[t]["prefilled"] + react[t]["decoded"] for t in both)
    paid = p_pair > p_action
    return (
        f"{source(patterns_doc)}, seeded tasks, greedy: direct {rate(d)}, ReAct {rate(r)}; per step (S = p^k, k = "
        f"{k:.1f} tool results per task): p_action {p_action:.2f} vs p_think × p_action′ {p_pair:.2f} — the thought "
        f"{'paid' if paid else 'did not pay'} here; it cost {turns_r:.1f} vs {turns_d:.1f} model turns and "
        f"{tok_r:,.0f} vs {tok_d:,.0f} tokens per task",
        *make_verdict(
            turns_r > turns_d and (r["rate"] > d["rate"]) == paid,
            "the thought did not lengthen the chain, or the rates and the per-step inequality disagree",
            [
                (
                    d["high"] >= r["low"] and r["high"] >= d["low"],
                    f"the two rates' 95% intervals overlap at n = {min(d['n'], r['n'])}: which side of the inequality "
                    "this model is on is not settled by this run",
                )
            ],
        ),
    )


@PATTERNS(
    "subagent-isolation",
    f"{BOOK}.5 multi-agent",
    "What sub-agents mainly buy is context isolation: each sees only its own part, so the coordinating context does "
    "not absorb everything the helpers saw.",
    answers=("多 Agent…收益主要来自上下文隔离",),
)
def subagent_isolation(patterns_doc):
    if patterns_doc is None:
        return None
    iso, shared = by_pattern(patterns_doc["runs"], "subagent"), by_pattern(patterns_doc["runs"], "subagent_shared")
    pairs = [t for t in iso if t in shared and delegations(iso[t]) and delegations(shared[t])]
    if not pairs:
        return None
    g_iso, g_sh = [gain_per_delegation(iso[t]) for t in pairs], [gain_per_delegation(shared[t]) for t in pairs]
    sub_peak = max(tt["prompt"] for t in pairs for tt in iso[t]["turns"] if tt["context"] != "main")
    smaller = sum(a < b for a, b in zip(g_iso, g_sh))
    return (
        f"{source(patterns_doc)}, {len(pairs)} tasks where both variants delegated: the main context gained "
        f"{mean(g_iso):,.0f} tokens per delegation with isolation (a summary comes back) vs {mean(g_sh):,.0f} "
        f"without (the helper's transcript comes back); smaller on {smaller} of {len(pairs)} tasks; main peak "
        f"{mean(iso[t]['main_peak'] for t in pairs):,.0f} vs {mean(shared[t]['main_peak'] for t in pairs):,.0f} "
        f"tokens; largest sub-agent prompt {sub_peak:,}",
        *make_verdict(
            mean(g_iso) < mean(g_sh),
            "the isolated main context grew as fast as the shared one",
            [(smaller < len(pairs), f"not on every task ({smaller} of {len(pairs)})")],
        ),
    )


@PATTERNS(
    "subagent-pk",
    f"{BOOK}.5 multi-agent",
    "Handing parts to sub-agents does not shorten the p^k chain: the steps are split across contexts, not removed.",
    answers=("p^k 的链路并没有真的变短",),
)
def subagent_pk(patterns_doc):
    rows = {r["pattern"]: r for r in (patterns_doc or {}).get("summary", [])}
    if "subagent" not in rows or "direct" not in rows:
        return None
    direct, iso = by_pattern(patterns_doc["runs"], "direct"), by_pattern(patterns_doc["runs"], "subagent")
    ts = [t for t in direct if t in iso]
    if not ts:
        return None
    turns_d, turns_s = mean(direct[t]["n_turns"] for t in ts), mean(iso[t]["n_turns"] for t in ts)
    main_s = mean(sum(tt["context"] == "main" for tt in iso[t]["turns"]) for t in ts)
    return (
        f"{source(patterns_doc)}, {len(ts)} tasks: model turns per task over all contexts {turns_s:.1f} with "
        f"sub-agents ({main_s:.1f} of them in the main context) vs {turns_d:.1f} in the direct loop; success "
        f"{rate(rows['subagent'])} vs {rate(rows['direct'])}",
        *make_verdict(
            turns_s >= turns_d,
            "the sub-agent runs took fewer model steps than the single loop",
            [
                (
                    rows["subagent"]["rate"] > rows["direct"]["rate"],
                    "on this model the sub-agent pattern succeeded more often all the same",
                )
            ],
        ),
    )


def pattern_claims(doc: dict) -> list[Claim]:
    return PATTERNS.run(patterns_doc=doc)


@SIMPLE(
    "react-simple-no-gain",
    f"{BOOK}.5 ReAct",
    "On simple tasks explicit reasoning (a written thought before each action) often brings no gain.",
    answers=("简单任务上显式推理常常没有收益",),
)
def react_simple_no_gain(patterns_doc):
    """§14.5.5 "explicit reasoning often gains nothing on simple tasks": ReAct vs the direct loop on the saved tasks
    that need the fewest tool results, beside the harder ones."""
    if patterns_doc is None:
        return None
    direct, react = by_pattern(patterns_doc["runs"], "direct"), by_pattern(patterns_doc["runs"], "react")
    both = [t for t in direct if t in react]
    if not both:
        return None
    k_min = min(direct[t]["task"]["min_calls"] for t in both)
    simple = [t for t in both if direct[t]["task"]["min_calls"] == k_min]
    harder = [t for t in both if t not in simple]

    def wins(pattern, ts):
        return sum(bool(pattern[t]["success"]) for t in ts)

    d_s, r_s, d_h, r_h = wins(direct, simple), wins(react, simple), wins(direct, harder), wins(react, harder)
    tok_d = mean(direct[t]["prefilled"] + direct[t]["decoded"] for t in simple)
    tok_r = mean(react[t]["prefilled"] + react[t]["decoded"] for t in simple)
    return (
        f"{source(patterns_doc)}, seeded tasks, greedy: on the {len(simple)} simplest ({k_min} tool results each: "
        f"{', '.join(simple)}) ReAct finished {r_s}/{len(simple)}, the direct loop {d_s}/{len(simple)}, at "
        f"{tok_r:,.0f} vs {tok_d:,.0f} tokens per task"
        + (f"; on the {len(harder)} harder ones {r_h}/{len(harder)} vs {d_h}/{len(harder)}" if harder else ""),
        *make_verdict(
            r_s <= d_s,
            "the written thought made the simple tasks succeed more often",
            [
                (len(simple) < 10, f"{len(simple)} simple tasks: this shows the direction, not a rate"),
                (
                    bool(harder) and r_h <= d_h,
                    "ReAct gained nothing on the harder tasks either: that simple tasks gain less than hard ones "
                    "is not separated here",
                ),
                (
                    "thinking" not in patterns_doc["meta"]["model"].lower(),
                    "the model is an instruct model prompted to write a thought, not a thinking model",
                ),
            ],
        ),
    )


def simple_task_claims(doc: dict) -> list[Claim]:
    return SIMPLE.run(patterns_doc=doc)


def delegations(run: dict) -> int:
    return sum(tt["calls"].count("delegate") for tt in run["turns"] if tt["context"] == "main")


def gain_per_delegation(run: dict) -> float:
    """Tokens the main context gained across the turns that followed a delegation, per delegation."""
    main = [tt for tt in run["turns"] if tt["context"] == "main"]
    gain = sum(b["prompt"] - a["prompt"] for a, b in zip(main, main[1:]) if "delegate" in a["calls"])
    return gain / delegations(run)


def patterns_claims() -> list[Claim]:
    """The pattern, simple-task and retrieval groups from the saved results (a claim is left out when its file is
    missing)."""
    return run([PATTERNS, SIMPLE, RAG])
