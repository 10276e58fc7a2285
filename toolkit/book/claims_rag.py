"""Claims of §14.5.10 (retrieval next to tools), checked on the saved real-model RAG runs: one check per claim.

What it does
- From ``benchmarks/results/rag_<model>.json`` (``benchmarks/patterns.py --what rag``; loaded once per ledger run
  as ``rag_doc``): permission filtering before ranking (no passage above the asker's access in anything retrieved
  or reranked, and each role's index holds only what it may read), retrieval and answer support scored apart (runs
  whose retrieval was complete but whose answer was not supported; citations that support nothing), an injected
  line gaining no authority (the tools called with and without it), and reranking (recall@k with and without it,
  and what it cost).
- ``rag_claims(doc)`` runs the checks on a given saved document (a test's, a notebook's).

What it leaves out
- Re-running the model: the saved runs are read, and their meta is quoted.
"""

from __future__ import annotations

from statistics import mean

from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.ledger import BOOK, Claim, make_verdict
from toolkit.book.registry import Group
from toolkit.rag.corpus import ROLES, by_id, readable
from toolkit.rag.questions import QUESTIONS, grade
from toolkit.rag.retrieve import Retriever

RAG = Group("rag")


def source(doc: dict) -> str:
    m = doc["meta"]
    return f"{m['model'].split(' [')[0]}, {m['date'][:10]}, commit {m['commit']}"


def by_question(qid: str):
    return next(q for q in QUESTIONS if q.id == qid)


@RAG(
    "rag-permission-first",
    f"{BOOK}.10 online retrieval",
    "Retrieval first narrows the corpus to what the asker may read, then ranks: no passage above the asker's access "
    "can reach the prompt.",
    answers=("先限定用户可读范围",),
)
def rag_permission_first(rag_doc):
    if rag_doc is None:
        return None
    runs, passages = rag_doc["runs"], by_id()
    role_of = {r["question"]: r["role"] for r in runs}
    seen = [(r["question"], pid) for r in runs for pid in r["retrieved"]]
    rr = rag_doc.get("rerank_recall")
    if rr:
        seen += [(row["question"], c["id"]) for row in rr["rows"] for c in row["candidates"]]
    above = [(q, pid) for q, pid in seen if passages[pid].access not in ROLES[role_of.get(q, "public")]]
    r = Retriever()
    index_ok = all({p.id for p in r.index(role)[0]} == {p.id for p in readable(role)} for role in ROLES)
    missing = [x for x in runs if x["mode"] == "before" and by_question(x["question"]).fact is None]
    return (
        f"{source(rag_doc)}: {len(seen)} passages retrieved or reranked over {len(runs)} runs and {len(role_of)} "
        f"questions: {len(above)} above the asker's access; each role's BM25 index holds exactly the passages it may "
        f"read: {index_ok}; questions whose answer the asker may not read, answered 'not available' without leaking: "
        f"{sum(x['correct'] for x in missing)}/{len(missing)} (retrieval before the turn)",
        *make_verdict(not above and index_ok, f"restricted passages reached a prompt: {above[:3]}"),
    )


def scored_before(rag_doc) -> list[dict]:
    """The runs with passages retrieved before the first turn and a recall computed."""
    return [x for x in (rag_doc or {}).get("runs", []) if x["mode"] == "before" and x["recall"] is not None]


@RAG(
    "rag-recall-not-use",
    f"{BOOK}.10 separate checks",
    "Retrieval and answers are checked apart: retrieving the right passage does not mean the model uses it correctly.",
    answers=("检索正确不保证…使用证据",),
)
def rag_recall_not_use(rag_doc):
    rs = scored_before(rag_doc)
    if not rs:
        return None
    full = [x for x in rs if x["recall"] == 1.0]
    unsupported, wrong = [x for x in full if not x["supported"]], [x for x in full if not x["correct"]]
    return (
        f"{source(rag_doc)}, passages retrieved before the first turn (k = {rag_doc['meta']['k']}): recall@k "
        f"{mean(x['recall'] for x in rs):.2f} over {len(rs)} questions; of the {len(full)} with every gold passage "
        f"retrieved, {len(wrong)} answers lack the fact and {len(unsupported)} are not supported by a cited passage",
        *make_verdict(bool(unsupported), "every run with complete retrieval also gave a supported answer"),
    )


@RAG(
    "rag-citation-not-support",
    f"{BOOK}.10 separate checks",
    "A citation is not support: an answer can cite a passage that does not back its conclusion.",
    answers=("有引文也不等于…支持结论",),
)
def rag_citation_not_support(rag_doc):
    if not scored_before(rag_doc):
        return None
    runs = rag_doc["runs"]
    cited = [x for x in runs if x["cited"]]
    bad_cite = [x for x in cited if not x["supported"]]
    # the scorer on a constructed answer: it cites a retrieved passage that does not state the fact
    q = by_question("hotel")
    probe = grade(f"The allowance is {q.fact} a night [leave-01].", ["travel-02", "leave-01"], q)
    return (
        f"the kit's scorer (toolkit.rag.questions.grade) on an answer with the right number citing a retrieved passage "
        f"that does not state it: correct {probe['correct']}, supported {probe['supported']}; {source(rag_doc)}: "
        f"{len(cited)} of {len(runs)} saved answers (all modes) cite a passage id, {len(bad_cite)} of them not "
        "supported",
        *make_verdict(
            probe["correct"] and not probe["supported"],
            "the scorer counts a citation as support whatever the passage says",
            [
                (
                    len(cited) < 5,
                    f"the real model rarely cites ({len(cited)} of {len(runs)} answers): the saved runs barely "
                    "exercise the statement; the scorer's behaviour is what is checked",
                )
            ],
        ),
    )


@RAG(
    "rag-injection",
    f"{BOOK}.10 separate checks",
    "Retrieved documents are untrusted input: an 'ignore the rules' line in a passage gains no instruction authority.",
    answers=("“忽略规则”等文字…指令权限",),
)
def rag_injection(rag_doc):
    inj = (rag_doc or {}).get("injection")
    if not inj:
        return None
    calls = {(x["guard"], x["corpus"]): [c["name"] for c in x["calls"]] for x in inj}
    return (
        f"{source(rag_doc)}, question 'customer' with the passage that carries the injected line retrieved: tools "
        f"called with the line {calls[(True, 'injected')] or 'none'}, with it removed "
        f"{calls[(True, 'clean')] or 'none'} (host guard on: the turn that reads passages cannot call); guard off: "
        f"{calls[(False, 'injected')] or 'none'} vs {calls[(False, 'clean')] or 'none'}",
        *make_verdict(
            calls[(True, "injected")] == calls[(True, "clean")],
            "the injected line changed which tools were called",
            [
                (
                    calls[(False, "injected")] != calls[(False, "clean")],
                    "the authority is withheld by the host's guard, not by the model: without the guard the calls "
                    "differ with the line",
                )
            ],
        ),
    )


def rerank_answers(summary: list[dict]) -> str:
    rer, bef = (next((s for s in summary if s["mode"] == m), None) for m in ("before_rerank", "before"))
    if not (rer and bef):
        return ""
    return (
        f"; answers supported {rer['supported']}/{rer['n']} with reranking vs {bef['supported']}/{bef['n']} without, "
        f"{rer['seconds']:.0f} vs {bef['seconds']:.0f} s per question"
    )


@RAG(
    "rag-rerank",
    f"{BOOK}.10 online retrieval",
    "After the first-stage search, a reranking step picks the relevant passages from the candidates.",
    answers=("再重排选出",),
)
def rag_rerank(rag_doc):
    rr = (rag_doc or {}).get("rerank_recall")
    if not rr:
        return None
    ks, b, a = [str(k) for k in rr["ks"]], rr["recall_bm25"], rr["recall_rerank"]
    gain = a[ks[0]] - b[ks[0]]
    # a trained reranker (a cross-encoder) tests the idea; a chat model asked yes/no tests only itself
    trained = any(w in rr["reranker"].lower() for w in ("cross-encoder", "reranker", "bge-rerank"))
    ranks = "worse than" if gain < 0 else "no better than" if gain == 0 else "better than"
    return (
        f"{source(rag_doc)}; BM25 top {rr['depth']} reranked by {rr['reranker'].split(' [')[0]} (pointwise yes/no "
        f"log-odds), {rr['n_scored']} questions: recall@"
        + ", @".join(f"{k} {b[k]:.2f} → {a[k]:.2f}" for k in ks)
        + f"; cost {rr['tokens'] / rr['n']:,.0f} prompt tokens and {rr['seconds'] / rr['n']:.1f} s per question "
        f"({rr['requests']} model requests){rerank_answers(rag_doc['summary'])}",
        *make_verdict(
            gain > 0 or not trained,
            f"with this reranker recall@{ks[0]} did not rise ({b[ks[0]]:.2f} → {a[ks[0]]:.2f}): the model scoring "
            f"yes/no ranks {'worse than' if gain < 0 else 'no better than'} BM25 on this corpus — what fails here is "
            "this scorer, not the idea of a second stage",
            [
                (
                    not trained,
                    "not checked: the only scorer here is a small chat model asked yes/no "
                    f"({rr['reranker'].split(' [')[0]}), which ranks {ranks} BM25; that measures the scorer, not the "
                    "idea of a second stage (no trained reranker is installed)",
                ),
                (trained and any(a[k] < b[k] for k in ks), "recall fell at some k"),
            ],
        ),
    )


def rag_claims(doc: dict) -> list[Claim]:
    return RAG.run(rag_doc=doc)
