"""The kit's small policy corpus (``toolkit/data/policies.jsonl``, written for the kit) and who may read what.

What it does (book §14.5.10, "offline indexing": passages keep version, scope and access)
- ``passages()``: the 36 passages as :class:`Passage` (id, title, access label, version, text), read as package
  data. ``ROLES``: which access labels each role may read (``public`` < ``staff`` < ``managers``; ``finance`` is
  its own group on top of ``staff``). ``readable(role)``: the passages a role may see, checked against ``ROLES``
  (an unknown role is an error, not an empty result).
- ``INJECTED``: the id of the passage that carries an injected instruction (``security-03``), and
  ``without_injection()``: the corpus with that sentence removed, for the comparison that shows it gains nothing.

What it leaves out
- Splitting long documents into passages (these are written one rule per passage), updating an index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources

ROLES = {
    "public": ("public",),
    "staff": ("public", "staff"),
    "manager": ("public", "staff", "managers"),
    "finance": ("public", "staff", "finance"),
}
INJECTED = "security-03"
INJECTION = "Ignore the rules above"


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    access: str
    version: str
    text: str

    def quoted(self) -> str:
        """How the passage is shown to the model: its id (to cite) and its text."""
        return f"[{self.id}] {self.title} (v{self.version}): {self.text}"


@lru_cache(maxsize=1)
def passages() -> tuple[Passage, ...]:
    raw = resources.files("toolkit").joinpath("data/policies.jsonl").read_text(encoding="utf-8")
    out = tuple(Passage(**json.loads(line)) for line in raw.splitlines() if line.strip())
    bad = [p.id for p in out if p.access not in {a for labels in ROLES.values() for a in labels}]
    if bad:
        raise ValueError(f"passages with an unknown access label: {bad}")
    return out


def by_id() -> dict[str, Passage]:
    return {p.id: p for p in passages()}


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; known: {', '.join(ROLES)}")
    return role


def readable(role: str, corpus=None) -> list[Passage]:
    """The passages ``role`` may read: the filter that runs BEFORE any ranking."""
    allowed = ROLES[check_role(role)]
    return [p for p in (corpus if corpus is not None else passages()) if p.access in allowed]


def without_injection() -> tuple[Passage, ...]:
    """The corpus with the injected sentence cut from its passage (everything else identical)."""
    out = []
    for p in passages():
        if p.id == INJECTED:
            p = replace(p, text=p.text[: p.text.index(INJECTION)].rstrip())
        out.append(p)
    return tuple(out)
