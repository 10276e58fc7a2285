"""The claims ledger: every number and checkable statement of the two chapters, checked by code.

``python -m toolkit claims`` prints each claim (in our words, with its section), the computed value or the
evidence, and a verdict — **holds**, **holds with a caveat** or **does not hold** — with the reason whenever it
is not a plain "holds". ``--json`` prints the same as JSON; ``--write [PATH]`` writes Markdown (default
``figures/claims.md``; ``python -m toolkit figures`` writes it too).

Evidence comes from running things: ``toolkit.cost`` for the arithmetic, the offline Qwen tokenizers and the
kit's templates (``toolkit.render``) for tokens and rendering, ``toolkit.book.catalog`` for realistic tool schemas,
``toolkit.loop`` for the message flow, and the installed ``mcp`` SDK (its types, its version registry and an
in-process server) for the protocol, xgrammar itself for what a grammar enforces (``claims_grammar``), the real model's weight-file header (``claims_weights``), and saved benchmark results (a real model, a real server: ``benchmarks/``). Sections: "§14.5.x" is the book, "Tool Use §3.x" the second chapter.

How it is built: each claim is one small check registered in a ``claims_*`` module (``toolkit.book.registry``: its
id, section, statement, the inventory quotes it answers, and the evidence it reads by loader name); ``GROUPS`` is
the ledger's order; ``check_all`` runs them all with each loader run once (``toolkit.book.evidence`` holds the
shared ones). The inventory (``toolkit/data/claims_inventory.tsv``) lists the chapters' statements; which checks
answer each comes from the registry, and ``coverage`` says what is mapped, not checkable here, or missing.

What it leaves out
- Claims that are advice or history rather than checkable facts (who proposed MCP beyond the date of the
  first revision; the agent patterns and RAG are checked on saved real-model runs: ``claims_patterns``), and the real Qwen tokenizer_config itself: flags are read from the
  kit's offline tokenizer, whose added-token table was transcribed from Qwen's files (tests/test_models.py).
- The MCP specification text: protocol facts are what the installed SDK encodes, which may lag or lead the spec.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from toolkit.book.claims_chains import CHAINS, LEVERS
from toolkit.book.claims_cost import COST, DECAY, TOOL_COST
from toolkit.book.claims_failures import GROUPS as FAILURES
from toolkit.book.claims_families import FAMILY_GROUP
from toolkit.book.claims_flops import FLOPS
from toolkit.book.claims_grammar import GRAMMAR
from toolkit.book.claims_kit import KIT
from toolkit.book.claims_learned import LEARNED
from toolkit.book.claims_mcp import MCP
from toolkit.book.claims_mcp_sdk import MCP_SDK
from toolkit.book.claims_patterns import PATTERNS, SIMPLE
from toolkit.book.claims_rag import RAG
from toolkit.book.claims_reading import READING
from toolkit.book.claims_render import TOKENS
from toolkit.book.claims_rl import RL
from toolkit.book.claims_serving import SERVING
from toolkit.book.claims_streaming import STREAMING
from toolkit.book.claims_tool_use import REQUEST_BODY, TOOL_USE
from toolkit.book.claims_weights import WEIGHTS
from toolkit.book.ledger import VERDICTS, Claim
from toolkit.book.registry import Check, mapping_problems, run, statement_ids
from toolkit.paths import data_file

# ================================================================ ledger
GROUPS = (
    COST,
    TOOL_COST,
    FLOPS,
    DECAY,
    TOKENS,
    FAMILY_GROUP,
    WEIGHTS,
    GRAMMAR,
    TOOL_USE,
    REQUEST_BODY,
    MCP,
    MCP_SDK,
    KIT,
    CHAINS,
    LEVERS,
    SERVING,
    STREAMING,
    PATTERNS,
    SIMPLE,
    RAG,
    *FAILURES,
    LEARNED,
    RL,
    READING,
)


INVENTORY = data_file("claims_inventory.tsv")  # package data: found from a wheel as from a checkout


KINDS = ("number", "mechanism", "protocol", "api", "history", "advice", "definition", "figure", "judgement")


@dataclass
class Statement:
    """One line of the inventory: a checkable-looking statement of a chapter and the checks that answer it."""

    section: str
    quote: str  # a few words of the chapter, to find the place
    kind: str
    ledger: list[str]  # claim ids, from the registry (its main check first); empty when not checkable here
    reason: str  # why not checkable here (required when ``ledger`` is empty)


def checks() -> list[Check]:
    """Every registered check, in ledger order."""
    return [c for g in GROUPS for c in g.checks]


def inventory(path=INVENTORY, mapping: dict[str, list[str]] | None = None) -> list[Statement]:
    """Read the inventory (tab-separated, '#' comments, one header row); ``path``: a file path or a traversable.
    Each statement's claim ids come from the checks that name its quote (``mapping``: quote -> ids, default the
    registry's, ``toolkit.book.registry.statement_ids``)."""
    src = path if hasattr(path, "read_text") else Path(path)
    mapping = statement_ids(checks()) if mapping is None else mapping
    rows = [
        line.split("\t")
        for line in src.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    out = []
    for r in rows[1:]:
        section, quote, kind, reason = (x.strip() for x in (r + [""] * 4)[:4])
        out.append(Statement(section, quote, kind, list(mapping.get(quote, [])), reason))
    return out


def registry_problems(statements: list[Statement] | None = None) -> list[str]:
    """The registry's side of the mapping: a check naming a quote the inventory lacks, a statement with two main
    checks or with supporting checks only, and a statement that has a check and also says it is not checkable."""
    statements = inventory() if statements is None else statements
    both = [f"{s.section}: {s.quote} has checks {s.ledger} and a reason" for s in statements if s.ledger and s.reason]
    return mapping_problems(checks(), [s.quote for s in statements]) + both


def coverage(claims: list[Claim], statements: list[Statement] | None = None) -> dict:
    """Which inventory lines map to ledger entries, which are 'not checkable here', and which are broken."""
    statements = inventory() if statements is None else statements
    ids = {c.id for c in claims}
    mapped = [s for s in statements if s.ledger]
    unchecked = [s for s in statements if not s.ledger and s.reason]
    unmapped = [s for s in statements if not s.ledger and not s.reason]
    unknown = sorted({i for s in mapped for i in s.ledger if i not in ids})
    bad_kind = [s for s in statements if s.kind not in KINDS]
    unused = sorted(ids - {i for s in mapped for i in s.ledger})
    by_id = {c.id: c for c in claims}
    # checked with a computed verdict: every claim the line maps to ran here (none says "not checked/measured")
    ran = [s for s in mapped if all(i in by_id and not by_id[i].evidence.startswith("not ") for i in s.ledger)]
    # one verdict per statement: the weakest of its entries (a statement holds only as far as every part does)
    verdicts = [statement_verdict([by_id[i].verdict for i in s.ledger]) for s in ran]
    split = [  # section and entries only: the inventory's quotes locate the place, they are not ours to print
        f"{s.section}: " + ", ".join(f"{i} {by_id[i].verdict}" for i in s.ledger) + f" → {v}"
        for s, v in zip(ran, verdicts)
        if len({by_id[i].verdict for i in s.ledger}) > 1
    ]
    return dict(
        statements=len(statements),
        mapped=len(mapped),
        computed=len(ran),
        not_checkable=len(unchecked),
        unmapped=[f"{s.section}: {s.quote}" for s in unmapped],
        unknown_ids=unknown,
        bad_kind=[f"{s.section}: {s.quote} ({s.kind})" for s in bad_kind],
        unused_claims=unused,
        ledger=len(claims),
        ledger_verdicts={v: sum(c.verdict == v for c in claims) for v in VERDICTS},
        statement_verdicts={v: verdicts.count(v) for v in VERDICTS},
        mixed=split,
    )


def statement_verdict(verdicts: list[str]) -> str:
    """The verdict of a statement checked by several entries: the weakest of theirs (order of ``VERDICTS``)."""
    return max(verdicts, key=VERDICTS.index)


def coverage_line(cov: dict) -> str:
    return (
        f"inventory: {cov['statements']} checkable-looking statements in the two chapters; {cov['mapped']} "
        f"mapped to the ledger's {cov['ledger']} entries, {cov['computed']} of them checked here with a computed "
        f"verdict, {cov['not_checkable']} not checkable here (each with its reason), {len(cov['unmapped'])} unmapped"
        + "; one verdict per checked statement (the weakest of its entries): "
        + ", ".join(f"{n} {v}" for v, n in cov["statement_verdicts"].items())
        + (f"; unknown ids {cov['unknown_ids']}" if cov["unknown_ids"] else "")
    )


def check_all() -> list[Claim]:
    """Every check of the ledger, in order; each loader runs once, its value shared by every check that reads it."""
    return run(GROUPS)


def to_markdown(claims: list[Claim]) -> str:
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    lines = [
        "# Claims ledger",
        "",
        "Generated by `python -m toolkit claims --write` (also by `python -m toolkit "
        "figures`). Each claim is restated in our words with its section (§14.5.x: the book; Tool Use §3.x: "
        "the second chapter), then checked by running code.",
        "",
        "Summary: " + ", ".join(f"{n} {v}" for v, n in counts.items()),
        "",
        "Coverage — " + coverage_line(coverage(claims)) + " (`toolkit/data/claims_inventory.tsv`).",
        "",
        *(
            ["Statements whose entries differ (the statement takes the weakest verdict):", ""]
            + [f"- {m}" for m in coverage(claims)["mixed"]]
            + [""]
        ),
        "| id | section | claim | evidence | verdict | why |",
        "|---|---|---|---|---|---|",
    ]
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines += [
        f"| {c.id} | {c.section} | {esc(c.claim)} | {esc(c.evidence)} | **{c.verdict}** | {esc(c.why)} |"
        for c in claims
    ]
    return "\n".join(lines) + "\n"


def write_markdown(path: str | Path = "figures/claims.md", claims: list[Claim] | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_markdown(claims if claims is not None else check_all()), encoding="utf-8")
    return path
