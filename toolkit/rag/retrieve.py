"""BM25 retrieval with the permission filter applied before ranking (book §14.5.10 "online retrieval").

What it does
- :class:`Retriever` ranks passages with ``rank_bm25.BM25Okapi`` (PyPI ``rank-bm25``, Apache-2.0; pure Python and
  numpy, works offline). ``search(query, role, k)`` first keeps only the passages ``role`` may read
  (``toolkit.rag.corpus.readable``), builds the index over THOSE (cached per role), then ranks: a passage the user
  may not read is never scored, so it cannot even shift the others' scores through the term statistics (IDF).
- Words: lower-cased letters and digits, a short English stop-word list removed; the same for passages and queries.

What it leaves out
- Embeddings and a reranker (§14.5.10 names both; BM25 alone is enough for 36 short passages and runs anywhere).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rank_bm25 import BM25Okapi

from toolkit.rag.corpus import Passage, check_role, passages, readable

STOP = frozenset(
    "a an and are as at be by can do does for from how i in is it may much my of on or the to what when where which "
    "who will with you your".split()
)


def words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]


@dataclass(frozen=True)
class Hit:
    passage: Passage
    score: float
    rank: int


class Retriever:
    """BM25 over the passages a role may read; see the module docstring."""

    def __init__(self, corpus=None):
        self.corpus = tuple(corpus if corpus is not None else passages())
        self._index: dict[str, tuple[list[Passage], BM25Okapi]] = {}

    def index(self, role: str):
        if role not in self._index:
            docs = readable(role, self.corpus)  # filter first: the index holds nothing the role may not read
            self._index[role] = (docs, BM25Okapi([words(p.title + " " + p.text) for p in docs]))
        return self._index[role]

    def search(self, query: str, role: str, k: int = 3) -> list[Hit]:
        check_role(role)
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        docs, bm25 = self.index(role)
        scores = bm25.get_scores(words(query[:1000]))
        order = sorted(range(len(docs)), key=lambda i: (-scores[i], docs[i].id))[:k]
        return [Hit(docs[i], float(scores[i]), r + 1) for r, i in enumerate(order)]
