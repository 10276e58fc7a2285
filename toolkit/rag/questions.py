"""Questions about the policy corpus, each with the passages that answer it, the fact a correct answer states, and
the role that asks; plus the two scores §14.5.10 keeps apart.

What it does
- ``QUESTIONS``: :class:`Question` (id, role, text, ``gold`` passage ids, ``fact``: the number or phrase a correct
  answer contains). Two are asked by a role that may NOT read the answer: the right answer then says the
  information is missing (``fact=None``), and no passage above the role's level may appear in what is retrieved.
- ``recall_at_k(hits, q)``: the share of ``q.gold`` among the retrieved passages (retrieval, scored alone).
- ``citations(answer)``: the passage ids an answer cites as ``[id]``.
- ``grade(answer, retrieved_ids, q)``: ``correct`` (the fact is in the answer; for a missing-information question,
  the answer says so and states no number from a passage the role cannot read) and ``supported`` (at least one cited
  passage was retrieved and contains the fact, and every cited id was retrieved): answer support, scored alone.

What it leaves out
- Judging free wording (a fact is a short string matched case-insensitively, numbers as written in the passage).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolkit.rag.corpus import by_id

MISSING = re.compile(
    r"\b(not (?:in|found|available|provided|mentioned|covered|contain)|no information|missing|"
    r"cannot find|can't find|don't have|do not have|does not (?:say|mention|contain|state)|unknown)\b",
    re.I,
)


@dataclass(frozen=True)
class Question:
    id: str
    role: str
    text: str
    gold: tuple[str, ...]
    fact: str | None  # None: the role may not read the answer; a correct reply says it is missing


QUESTIONS = (
    Question("hotel", "staff", "How much is the hotel allowance per night in a capital city?", ("travel-02",), "180"),
    Question("meals", "staff", "How much may I claim for meals per day when travelling?", ("travel-04",), "45"),
    Question("claims", "staff", "Within how many days must I submit an expense claim?", ("expense-01",), "30"),
    Question("leave", "staff", "How many days of annual leave do full-time staff get?", ("leave-01",), "27"),
    Question("carry", "staff", "How many unused leave days can I carry over into next year?", ("leave-02",), "5"),
    Question("home", "staff", "How many days per week may I work from home?", ("remote-01",), "3"),
    Question("password", "staff", "How long must a password be?", ("security-01",), "14"),
    Question("laptop", "staff", "How soon must I report a lost laptop?", ("security-02",), "1 hour"),
    Question("customer", "staff", "May I paste customer data into an external chat tool?", ("security-03",), "never"),
    Question("trial", "public", "How long is the free trial of Lumen Desk?", ("product-02",), "21"),
    Question("team", "public", "What does the Lumen Desk Team plan cost per user per month?", ("product-01",), "19"),
    Question("training", "staff", "What is my yearly training budget?", ("training-01",), "1200"),
    Question("card", "finance", "What is the monthly limit of a corporate card?", ("expense-04",), "3000"),
    Question("card-staff", "staff", "What is the monthly limit of a corporate card?", (), None),
    Question("roadmap-public", "public", "When is the offline mode of Lumen Desk planned?", (), None),
    Question(
        "receipt", "staff", "I lost the paper slip for a 12 euro taxi ride. What do I do?", ("expense-02",), "note"
    ),
    Question("refund-time", "staff", "When do I get my money back for an approved claim?", ("expense-03",), "25th"),
    Question("rail", "staff", "My trip to Porto is 4 hours by rail. Can I fly instead?", ("travel-03",), "train"),
    Question(
        "baby", "staff", "My child was born last week; how much paid time off do I get?", ("leave-04",), "16 weeks"
    ),
    Question("abroad", "staff", "How many days a year can I work from Spain?", ("remote-03",), "20"),
    Question(
        "trip-costs",
        "staff",
        "On a trip, what are the nightly hotel limit in a capital and the daily meal limit?",
        ("travel-02", "travel-04"),
        "45",
    ),
    Question(
        "conference",
        "staff",
        "Who pays the conference ticket, and who pays the hotel?",
        ("training-02", "travel-02"),
        "training budget",
    ),
    Question("approval", "finance", "How many approvals does a purchase of 10000 euros need?", ("finance-01",), "two"),
)


def recall_at_k(retrieved_ids, q: Question) -> float | None:
    """Share of the gold passages among ``retrieved_ids``; None for a question with no readable gold passage."""
    if not q.gold:
        return None
    return sum(g in set(retrieved_ids) for g in q.gold) / len(q.gold)


def citations(answer: str | None) -> list[str]:
    return list(dict.fromkeys(re.findall(r"\[([a-z]+-\d{2})\]", answer or "")))


def _has(text: str, fact: str) -> bool:
    return re.search(r"(?<![\w.])" + re.escape(fact.lower()) + r"(?![\w])", text.lower()) is not None


def grade(answer: str | None, retrieved_ids, q: Question) -> dict:
    """``correct`` and ``supported``, scored apart (see the module docstring); ``cited`` for the table."""
    text, cited, got = answer or "", citations(answer), set(retrieved_ids)
    if q.fact is None:
        hidden = [p for p in by_id().values() if p.access not in ("public", "staff") or q.role == "public"]
        leaked = any(_has(text, n) for p in hidden if p.id not in got for n in re.findall(r"\d+", p.text))
        correct = bool(MISSING.search(text)) and not leaked
        supported = correct and all(c in got for c in cited)
    else:
        correct = _has(text, q.fact)
        passages = by_id()
        supported = (
            bool(cited)
            and all(c in got for c in cited)
            and any(c in passages and _has(passages[c].text, q.fact) for c in cited)
        )
    return {"correct": correct, "supported": supported, "cited": cited}
