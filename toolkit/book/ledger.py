"""A claim of the chapters and its verdict: the record every check in ``toolkit.book`` returns.

What it does
- :class:`Claim` (id, section, our wording, evidence, verdict, why); a verdict other than a plain "holds" must give
  its reason. ``make_verdict`` and ``rounds_to`` are the helpers the checks share.

What it leaves out
- The checks themselves (``claims_*`` modules).
"""

from __future__ import annotations

from dataclasses import dataclass

HOLDS, CAVEAT, FAILS = "holds", "holds with a caveat", "does not hold"


VERDICTS = (HOLDS, CAVEAT, FAILS)


BOOK, TOOL_USE = "§14.5", "Tool Use §3"


@dataclass
class Claim:
    id: str
    section: str
    claim: str  # our words
    evidence: str  # the computed value or what was observed
    verdict: str  # one of VERDICTS
    why: str = ""  # required unless the verdict is a plain "holds"

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"{self.id}: unknown verdict {self.verdict!r}")
        if self.verdict != HOLDS and not self.why:
            raise ValueError(f"{self.id}: a verdict of {self.verdict!r} needs a reason")


def rounds_to(value: float, printed: float, decimals: int) -> bool:
    return round(value, decimals) == round(printed, decimals)


def make_verdict(ok: bool, why_not: str = "", caveats=()) -> tuple[str, str]:
    """The verdict from a computed condition. ``caveats`` are ``(condition, text)`` pairs: a caveat is attached
    only when its condition, computed from the evidence, is true (tests reject literal conditions)."""
    if not ok:
        return FAILS, why_not or "the computed value does not match the claim (see the evidence)"
    found = [text for cond, text in caveats if cond]
    return (CAVEAT, "; ".join(found)) if found else (HOLDS, "")
