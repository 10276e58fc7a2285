"""Claims of §14.5.5 (agent patterns) and §14.5.10 (retrieval next to tools), checked on saved real-model runs.

What it does
- ``pattern_claims(doc)``: from ``benchmarks/results/patterns_<model>.json`` (``benchmarks/patterns.py``: the five
  patterns on one seeded task set, with date, machine, model, commit): whether a ReAct thought paid on this model
  (p_think × p_action′ vs p_action, per step, from the measured per-task rates of ReAct and the direct loop), what
  sub-agent isolation does to the main context (tokens it gains per delegation, isolated vs shared), and that the
  chain is split, not shortened (model turns over all contexts).
- ``rag_claims(doc)``: from ``benchmarks/results/rag_<model>.json`` (``benchmarks/patterns.py --what rag``):
  permission filtering before ranking (no passage above the asker's access in anything retrieved or reranked,
  and each role's index holds only what it may read), retrieval and answer support scored apart (runs whose
  retrieval was complete but whose answer was not supported; citations that support nothing), an injected line
  gaining no authority (the tools called with and without it), and reranking (recall@k with and without it,
  and what it cost).
- ``simple_task_claims(doc)``: "simple tasks often gain nothing from explicit reasoning": ReAct vs the direct loop
  on the saved tasks that need the fewest tool results, beside the harder ones.
- ``patterns_claims()``: all three, reading the saved files (none when a file is missing: nothing is claimed without
  its measurement).

What it leaves out
- Re-running the model (minutes per task on two CPU cores): the saved runs are read, and their meta is quoted.
- §14.5.5's "a plan can be wrong from its first step, found late" (needs a judge of plan quality): the inventory
  says why. A thinking model's hidden reasoning: ReAct's thought here is a prompted one, and the verdict says so.
"""

from __future__ import annotations

from statistics import mean

from toolkit.book.ledger import BOOK, Claim, make_verdict
from toolkit.paths import saved_json
from toolkit.rag.corpus import ROLES, by_id, readable
from toolkit.rag.questions import QUESTIONS, grade
from toolkit.rag.retrieve import Retriever

PATTERN_RESULTS = "patterns_qwen2.5-coder-0.5b.json"  # in benchmarks/results (toolkit.paths.results_file finds it)
RAG_RESULTS = "rag_qwen2.5-coder-0.5b.json"


def _source(doc: dict) -> str:
    m = doc["meta"]
    return f"{m['model'].split(' [')[0]}, {m['date'][:10]}, commit {m['commit']}"


def _rate(row: dict) -> str:
    """A pattern's row of the saved summary: successes/n with the Wilson 95% interval the benchmark computed."""
    return f"{row['successes']}/{row['n']} (95% {100 * row['low']:.0f}–{100 * row['high']:.0f}%)"


# ================================================================ §14.5.5
def _by(runs, pattern):
    return {r["task"]["id"]: r for r in runs if r["pattern"] == pattern}


def pattern_claims(doc: dict) -> list[Claim]:
    runs, src, out = doc["runs"], _source(doc), []
    rows = {r["pattern"]: r for r in doc["summary"]}
    direct, react = _by(runs, "direct"), _by(runs, "react")
    both = [t for t in direct if t in react]
    if both and "direct" in rows and "react" in rows:
        d, r = rows["direct"], rows["react"]
        n = min(d["n"], r["n"])
        s_d, s_r = d["rate"], r["rate"]
        k = mean(direct[t]["task"]["min_calls"] for t in both)
        p_action, p_pair = s_d ** (1 / k), s_r ** (1 / k)  # per step: S = p^k
        turns_d, turns_r = mean(direct[t]["n_turns"] for t in both), mean(react[t]["n_turns"] for t in both)
        tok_d = mean(direct[t]["prefilled"] + direct[t]["decoded"] for t in both)
        tok_r = mean(react[t]["prefilled"] + react[t]["decoded"] for t in both)
        lo_d, hi_d, lo_r, hi_r = d["low"], d["high"], r["low"], r["high"]
        paid = p_pair > p_action
        out.append(
            Claim(
                "react-think-pays",
                f"{BOOK}.5 ReAct",
                "A ReAct thought is one more step of the chain and can fail itself: it pays only when the per-step "
                "success with the thought (p_think × p_action′) exceeds the per-step success without it (p_action).",
                f"{src}, seeded tasks, greedy: direct {_rate(d)}, ReAct {_rate(r)}; per step "
                f"(S = p^k, k = {k:.1f} tool results per task): p_action {p_action:.2f} vs p_think × p_action′ "
                f"{p_pair:.2f} — the thought {'paid' if paid else 'did not pay'} here; it cost {turns_r:.1f} vs "
                f"{turns_d:.1f} model turns and {tok_r:,.0f} vs {tok_d:,.0f} tokens per task",
                *make_verdict(
                    turns_r > turns_d and (s_r > s_d) == paid,
                    "the thought did not lengthen the chain, or the rates and the per-step inequality disagree",
                    [
                        (
                            hi_d >= lo_r and hi_r >= lo_d,
                            f"the two rates' 95% intervals overlap at n = {n}: which side of the inequality this "
                            "model is on is not settled by this run",
                        )
                    ],
                ),
            )
        )
    iso, shared = _by(runs, "subagent"), _by(runs, "subagent_shared")
    pairs = [t for t in iso if t in shared and delegations(iso[t]) and delegations(shared[t])]
    if pairs:
        g_iso = [gain_per_delegation(iso[t]) for t in pairs]
        g_sh = [gain_per_delegation(shared[t]) for t in pairs]
        sub_peak = max(tt["prompt"] for t in pairs for tt in iso[t]["turns"] if tt["context"] != "main")
        smaller = sum(a < b for a, b in zip(g_iso, g_sh))
        out.append(
            Claim(
                "subagent-isolation",
                f"{BOOK}.5 multi-agent",
                "What sub-agents mainly buy is context isolation: each sees only its own part, so the coordinating "
                "context does not absorb everything the helpers saw.",
                f"{src}, {len(pairs)} tasks where both variants delegated: the main context gained "
                f"{mean(g_iso):,.0f} tokens per delegation with isolation (a summary comes back) vs "
                f"{mean(g_sh):,.0f} without (the helper's transcript comes back); smaller on {smaller} of "
                f"{len(pairs)} tasks; main peak {mean(iso[t]['main_peak'] for t in pairs):,.0f} vs "
                f"{mean(shared[t]['main_peak'] for t in pairs):,.0f} tokens; largest sub-agent prompt {sub_peak:,}",
                *make_verdict(
                    mean(g_iso) < mean(g_sh),
                    "the isolated main context grew as fast as the shared one",
                    [(smaller < len(pairs), f"not on every task ({smaller} of {len(pairs)})")],
                ),
            )
        )
    ts = [t for t in direct if t in iso]
    if ts and "subagent" in rows and "direct" in rows:
        n = len(ts)
        turns_d, turns_s = mean(direct[t]["n_turns"] for t in ts), mean(iso[t]["n_turns"] for t in ts)
        main_s = mean(sum(tt["context"] == "main" for tt in iso[t]["turns"]) for t in ts)
        s_d, s_s = rows["direct"]["rate"], rows["subagent"]["rate"]
        out.append(
            Claim(
                "subagent-pk",
                f"{BOOK}.5 multi-agent",
                "Handing parts to sub-agents does not shorten the p^k chain: the steps are split across contexts, "
                "not removed.",
                f"{src}, {n} tasks: model turns per task over all contexts {turns_s:.1f} with sub-agents "
                f"({main_s:.1f} of them in the main context) vs {turns_d:.1f} in the direct loop; success "
                f"{_rate(rows['subagent'])} vs {_rate(rows['direct'])}",
                *make_verdict(
                    turns_s >= turns_d,
                    "the sub-agent runs took fewer model steps than the single loop",
                    [(s_s > s_d, "on this model the sub-agent pattern succeeded more often all the same")],
                ),
            )
        )
    return out


def simple_task_claims(doc: dict) -> list[Claim]:
    """§14.5.5 "explicit reasoning often gains nothing on simple tasks": ReAct vs the direct loop on the saved tasks
    that need the fewest tool results, beside the harder ones."""
    direct, react = _by(doc["runs"], "direct"), _by(doc["runs"], "react")
    both = [t for t in direct if t in react]
    if not both:
        return []
    k_min = min(direct[t]["task"]["min_calls"] for t in both)
    simple = [t for t in both if direct[t]["task"]["min_calls"] == k_min]
    harder = [t for t in both if t not in simple]

    def wins(pattern, ts):
        return sum(bool(pattern[t]["success"]) for t in ts)

    d_s, r_s, d_h, r_h = wins(direct, simple), wins(react, simple), wins(direct, harder), wins(react, harder)
    tok_d = mean(direct[t]["prefilled"] + direct[t]["decoded"] for t in simple)
    tok_r = mean(react[t]["prefilled"] + react[t]["decoded"] for t in simple)
    model = doc["meta"]["model"]
    return [
        Claim(
            "react-simple-no-gain",
            f"{BOOK}.5 ReAct",
            "On simple tasks explicit reasoning (a written thought before each action) often brings no gain.",
            f"{_source(doc)}, seeded tasks, greedy: on the {len(simple)} simplest ({k_min} tool results each: "
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
                        "thinking" not in model.lower(),
                        "the model is an instruct model prompted to write a thought, not a thinking model",
                    ),
                ],
            ),
        )
    ]


def delegations(run: dict) -> int:
    return sum(tt["calls"].count("delegate") for tt in run["turns"] if tt["context"] == "main")


def gain_per_delegation(run: dict) -> float:
    """Tokens the main context gained across the turns that followed a delegation, per delegation."""
    main = [tt for tt in run["turns"] if tt["context"] == "main"]
    gain = sum(b["prompt"] - a["prompt"] for a, b in zip(main, main[1:]) if "delegate" in a["calls"])
    return gain / delegations(run)


# ================================================================ §14.5.10
def rag_claims(doc: dict) -> list[Claim]:
    runs, src, out = doc["runs"], _source(doc), []
    passages = by_id()
    role_of = {r["question"]: r["role"] for r in runs}
    seen = [(r["question"], pid) for r in runs for pid in r["retrieved"]]
    rr = doc.get("rerank_recall")
    if rr:
        seen += [(row["question"], c["id"]) for row in rr["rows"] for c in row["candidates"]]
    above = [(q, pid) for q, pid in seen if passages[pid].access not in ROLES[role_of.get(q, "public")]]
    r = Retriever()
    index_ok = all({p.id for p in r.index(role)[0]} == {p.id for p in readable(role)} for role in ROLES)
    missing = [x for x in runs if x["mode"] == "before" and by_question(x["question"]).fact is None]
    out.append(
        Claim(
            "rag-permission-first",
            f"{BOOK}.10 online retrieval",
            "Retrieval first narrows the corpus to what the asker may read, then ranks: no passage above the "
            "asker's access can reach the prompt.",
            f"{src}: {len(seen)} passages retrieved or reranked over {len(runs)} runs and {len(role_of)} "
            f"questions: {len(above)} above the asker's access; each role's BM25 index holds exactly the passages "
            f"it may read: {index_ok}; questions whose answer the asker may not read, answered 'not available' "
            f"without leaking: {sum(x['correct'] for x in missing)}/{len(missing)} (retrieval before the turn)",
            *make_verdict(not above and index_ok, f"restricted passages reached a prompt: {above[:3]}"),
        )
    )
    for mode in ("before",):
        rs = [x for x in runs if x["mode"] == mode and x["recall"] is not None]
        if not rs:
            continue
        full = [x for x in rs if x["recall"] == 1.0]
        unsupported = [x for x in full if not x["supported"]]
        wrong = [x for x in full if not x["correct"]]
        cited = [x for x in runs if x["cited"]]
        bad_cite = [x for x in cited if not x["supported"]]
        out.append(
            Claim(
                "rag-recall-not-use",
                f"{BOOK}.10 separate checks",
                "Retrieval and answers are checked apart: retrieving the right passage does not mean the model "
                "uses it correctly.",
                f"{src}, passages retrieved before the first turn (k = {doc['meta']['k']}): recall@k "
                f"{mean(x['recall'] for x in rs):.2f} over {len(rs)} questions; of the {len(full)} with every "
                f"gold passage retrieved, {len(wrong)} answers lack the fact and {len(unsupported)} are not "
                f"supported by a cited passage",
                *make_verdict(bool(unsupported), "every run with complete retrieval also gave a supported answer"),
            )
        )
        # the scorer on a constructed answer: it cites a retrieved passage that does not state the fact
        q = by_question("hotel")
        probe = grade(f"The allowance is {q.fact} a night [leave-01].", ["travel-02", "leave-01"], q)
        out.append(
            Claim(
                "rag-citation-not-support",
                f"{BOOK}.10 separate checks",
                "A citation is not support: an answer can cite a passage that does not back its conclusion.",
                f"the kit's scorer (toolkit.rag.questions.grade) on an answer with the right number citing a "
                f"retrieved passage that does not state it: correct {probe['correct']}, supported "
                f"{probe['supported']}; {src}: {len(cited)} of {len(runs)} saved answers (all modes) cite a passage "
                f"id, {len(bad_cite)} of them not supported",
                *make_verdict(
                    probe["correct"] and not probe["supported"],
                    "the scorer counts a citation as support whatever the passage says",
                    [
                        (
                            len(cited) < 5,
                            f"the real model rarely cites ({len(cited)} of {len(runs)} answers): the saved runs "
                            "barely exercise the statement; the scorer's behaviour is what is checked",
                        )
                    ],
                ),
            )
        )
    inj = doc.get("injection")
    if inj:
        calls = {(x["guard"], x["corpus"]): [c["name"] for c in x["calls"]] for x in inj}
        g_same = calls[(True, "injected")] == calls[(True, "clean")]
        u_diff = calls[(False, "injected")] != calls[(False, "clean")]
        out.append(
            Claim(
                "rag-injection",
                f"{BOOK}.10 separate checks",
                "Retrieved documents are untrusted input: an 'ignore the rules' line in a passage gains no "
                "instruction authority.",
                f"{src}, question 'customer' with the passage that carries the injected line retrieved: tools "
                f"called with the line {calls[(True, 'injected')] or 'none'}, with it removed "
                f"{calls[(True, 'clean')] or 'none'} (host guard on: the turn that reads passages cannot call); "
                f"guard off: {calls[(False, 'injected')] or 'none'} vs {calls[(False, 'clean')] or 'none'}",
                *make_verdict(
                    g_same,
                    "the injected line changed which tools were called",
                    [
                        (
                            u_diff,
                            "the authority is withheld by the host's guard, not by the model: without the guard "
                            "the calls differ with the line",
                        )
                    ],
                ),
            )
        )
    if rr:
        ks = [str(k) for k in rr["ks"]]
        b, a = rr["recall_bm25"], rr["recall_rerank"]
        rer = next((s for s in doc["summary"] if s["mode"] == "before_rerank"), None)
        bef = next((s for s in doc["summary"] if s["mode"] == "before"), None)
        answers = (
            f"; answers supported {rer['supported']}/{rer['n']} with reranking vs {bef['supported']}/{bef['n']} "
            f"without, {rer['seconds']:.0f} vs {bef['seconds']:.0f} s per question"
            if rer and bef
            else ""
        )
        gain = a[ks[0]] - b[ks[0]]
        # a trained reranker (a cross-encoder) tests the idea; a chat model asked yes/no tests only itself
        trained = any(w in rr["reranker"].lower() for w in ("cross-encoder", "reranker", "bge-rerank"))
        out.append(
            Claim(
                "rag-rerank",
                f"{BOOK}.10 online retrieval",
                "After the first-stage search, a reranking step picks the relevant passages from the candidates.",
                f"{src}; BM25 top {rr['depth']} reranked by {rr['reranker'].split(' [')[0]} (pointwise yes/no "
                f"log-odds), {rr['n_scored']} questions: recall@"
                + ", @".join(f"{k} {b[k]:.2f} → {a[k]:.2f}" for k in ks)
                + f"; cost {rr['tokens'] / rr['n']:,.0f} prompt tokens and {rr['seconds'] / rr['n']:.1f} s per "
                f"question ({rr['requests']} model requests){answers}",
                *make_verdict(
                    gain > 0 or not trained,
                    f"with this reranker recall@{ks[0]} did not rise ({b[ks[0]]:.2f} → {a[ks[0]]:.2f}): the model "
                    f"scoring yes/no ranks {'worse than' if gain < 0 else 'no better than'} BM25 on this corpus — "
                    "what fails here is this scorer, not the idea of a second stage",
                    [
                        (
                            not trained,
                            "not checked: the only scorer here is a small chat model asked yes/no "
                            f"({rr['reranker'].split(' [')[0]}), which ranks "
                            f"{'worse than' if gain < 0 else 'no better than' if gain == 0 else 'better than'} BM25; "
                            "that measures the scorer, not the idea of a second stage (no trained reranker is "
                            "installed)",
                        ),
                        (trained and any(a[k] < b[k] for k in ks), "recall fell at some k"),
                    ],
                ),
            )
        )
    return out


def by_question(qid: str):
    return next(q for q in QUESTIONS if q.id == qid)


def patterns_claims() -> list[Claim]:
    """Both groups from the saved results (a group is left out when its file is missing)."""
    out = []
    doc = saved_json(PATTERN_RESULTS)
    if doc is not None:
        out += pattern_claims(doc) + simple_task_claims(doc)
    doc = saved_json(RAG_RESULTS)
    if doc is not None:
        out += rag_claims(doc)
    return out
