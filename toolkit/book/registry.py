"""The ledger's registry: one claim, one small check, registered with what it says and what it reads.

What it does
- ``Group(name)``: the checks of one part of the ledger, in the order they print. ``@group(id, section, statement,
  answers=..., supports=...)`` registers a function as a :class:`Check`; the function returns ``(evidence,
  verdict, why)`` (``*make_verdict(...)`` after the evidence), or None when its evidence does not cover the claim
  (nothing is claimed without its measurement). Calling the registered check with its evidence returns the
  :class:`~toolkit.book.ledger.Claim`, so a test can hand it doctored evidence.
- Evidence, as pytest's fixtures: each parameter of a check without a default names a loader registered with
  ``@loader`` (the SDK probe, a saved run, a tokenizer); a loader may name other loaders the same way. In one run
  each loader runs at most once and its value is shared; ``given`` values replace loaders (a test's evidence).
- A loader that raises makes every check that needs it "not checked" with the reason (``NotCheckable`` carries a
  plain reason; any other error is named with its type), and the other checks still run.
- ``answers`` / ``supports``: the inventory statements (``toolkit/data/claims_inventory.tsv``, by their quote) a
  check is the main check of, or adds evidence to; ``statement_ids`` turns them into the inventory's mapping.

What it leaves out
- The checks and loaders themselves (the ``claims_*`` modules), the inventory file and coverage (``claims``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from toolkit.book.ledger import Claim, make_verdict

LOADERS: dict[str, Callable] = {}  # name -> loader; looked up when a run needs it (a test may replace one)
GROUPS: dict[str, Group] = {}


class NotCheckable(Exception):
    """Raised by a loader (or a check) whose evidence is not on this machine: the message is the reason."""


def loader(fn: Callable) -> Callable:
    """Register ``fn`` as the loader of the evidence named after it (one name, one loader)."""
    old = LOADERS.get(fn.__name__)
    if old is not None and (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
        raise ValueError(f"two loaders named {fn.__name__!r}: {old.__module__} and {fn.__module__}")
    LOADERS[fn.__name__] = fn
    return fn


def needs(fn: Callable) -> tuple[str, ...]:
    """The evidence a check or loader reads: its parameters without a default."""
    return tuple(
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


@dataclass(frozen=True)
class Check:
    id: str
    section: str
    statement: str
    fn: Callable = field(repr=False)
    answers: tuple[str, ...] = ()  # inventory quotes this is the main check of
    supports: tuple[str, ...] = ()  # inventory quotes it adds evidence to

    @property
    def evidence(self) -> tuple[str, ...]:
        return needs(self.fn)

    def __call__(self, *args, **kwargs) -> Claim | None:
        got = self.fn(*args, **kwargs)
        return None if got is None else Claim(self.id, self.section, self.statement, *got)

    def not_checked(self, reason: str) -> Claim:
        failed = bool(reason)
        return Claim(
            self.id, self.section, self.statement, "not checked", *make_verdict(failed, reason, [(failed, reason)])
        )


class Group:
    """The checks of one ledger group, in registration order."""

    def __init__(self, name: str):
        self.name, self.checks = name, []
        GROUPS[name] = self

    def add(self, id: str, section: str, statement: str, fn: Callable, answers=(), supports=()) -> Check:
        """Register ``fn`` (a table row: a loop may add several checks of one function, bound with partial)."""
        check = Check(id, section, statement, fn, tuple(answers), tuple(supports))
        self.checks = [c for c in self.checks if c.id != id] + [check]  # a reloaded module replaces its checks
        return check

    def __call__(self, id: str, section: str, statement: str, answers=(), supports=()):
        return lambda fn: self.add(id, section, statement, fn, answers, supports)

    def run(self, **given) -> list[Claim]:
        """This group's claims; ``given`` evidence replaces the loaders of the same names."""
        return run([self], Evidence(given))


class Evidence:
    """One run's loaded evidence: each loader called at most once; a failure is kept and given as the reason."""

    def __init__(self, given: dict | None = None):
        self.values = dict(given or {})
        self.failed: dict[str, str] = {}

    def load(self, name: str, chain: tuple[str, ...] = ()):
        if name in self.values:
            return self.values[name]
        if name in self.failed:
            raise NotCheckable(self.failed[name])
        if name in chain or name not in LOADERS:
            raise KeyError(f"no loader for evidence {name!r}" + (f" (a cycle: {chain})" if name in chain else ""))
        fn = LOADERS[name]
        try:
            value = fn(**{n: self.load(n, chain + (name,)) for n in needs(fn)})
        except NotCheckable as e:
            self.failed[name] = str(e)
            raise
        except Exception as e:  # a loader's failure costs only the checks that read it
            self.failed[name] = f"{name} did not load: {type(e).__name__}: {e}".split("\n")[0][:300]
            raise NotCheckable(self.failed[name]) from e
        self.values[name] = value
        return value


def run(groups: Iterable[Group], evidence: Evidence | None = None) -> list[Claim]:
    """Every check of ``groups`` in order, the evidence shared across them."""
    evidence = Evidence() if evidence is None else evidence
    out = []
    for group in groups:
        for check in group.checks:
            try:
                claim = check(**{n: evidence.load(n) for n in check.evidence})
            except NotCheckable as e:
                claim = check.not_checked(f"not checkable here: {e}")
            if claim is not None:
                out.append(claim)
    return out


def statement_ids(checks: Iterable[Check]) -> dict[str, list[str]]:
    """Inventory quote -> claim ids: its main check first, then the checks that support it, in ledger order."""
    checks = list(checks)
    out: dict[str, list[str]] = {}
    for c in checks:
        for quote in c.answers:
            out.setdefault(quote, []).insert(0, c.id)
    for c in checks:
        for quote in c.supports:
            out.setdefault(quote, []).append(c.id)
    return out


def mapping_problems(checks: Iterable[Check], quotes: Iterable[str]) -> list[str]:
    """What is wrong with the registry's side of the mapping: a quote not in the inventory, a statement with two
    main checks, or one with supporting checks and no main one."""
    checks, quotes, problems = list(checks), set(quotes), []
    leads: dict[str, list[str]] = {}
    for c in checks:
        for q in c.answers:
            leads.setdefault(q, []).append(c.id)
        problems += [f"{c.id}: {q!r} is not in the inventory" for q in (*c.answers, *c.supports) if q not in quotes]
        problems += [f"{c.id}: both answers and supports {q!r}" for q in set(c.answers) & set(c.supports)]
    problems += [f"{q!r}: {len(ids)} main checks {ids}" for q, ids in leads.items() if len(ids) > 1]
    problems += [
        f"{q!r}: supported by {c.id} but answered by none" for c in checks for q in c.supports if q not in leads
    ]
    return problems
