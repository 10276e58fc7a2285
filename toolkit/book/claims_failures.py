"""§14.5.9's failure modes and the "Tool Use" chapter's prompt-era and description statements, checked on saved
real-model runs.

What it does
- ``selection_claims(doc)``: from the BFCL results' description variants (``benchmarks/bfcl.py``, the same
  selection tasks with the original, vague, look-alike and improved descriptions): whether tools that look alike
  cut the one-step rate (§14.5.9 "wrong tool choice ... lowers the single-step p"), and what the chapter's
  description guidelines bought ("Tool Use" §3.1).
- ``prompt_era_claims(doc)``: the "Tool Use" intro's "early prompt-injected tool calling: low success, high cost",
  from the same file's prompt-style mode (the call format explained in the system prompt) beside the native mode
  (the model's own template) on the same BFCL cases.
- ``multi_call_claims(doc)``: the intro's "several calls in one request", from BFCL's parallel categories.
- ``loop_claims(doc)``: §14.5.9's loops, premature answers and context bloat, from the host loop's saved
  real-model questions (``benchmarks/loop_questions.py``: every call with its status, ``repeated`` where the
  kit's repeat guard refused an identical call).
- ``failure_claims()``: all of them from the saved files (``bfcl_doc``, ``loops_doc``: a claim is left out when its
  file is missing: nothing is claimed without its measurement). One check per claim.

What it leaves out
- Re-running the model (the saved runs are read and their meta quoted); varying the number of tools offered, and
  the four description guidelines the saved variants do not vary (strong typing, a description per parameter, few
  top-level parameters, at most 1,024 characters).
"""

from __future__ import annotations

import re
from collections import Counter

from toolkit import cost
from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.ledger import BOOK, TOOL_USE, Claim, make_verdict
from toolkit.book.registry import Group, loader, run

SELECTION, PROMPT_ERA, MULTI_CALL, LOOPS = Group("selection"), Group("prompt-era"), Group("multi-call"), Group("loops")
GROUPS = (SELECTION, PROMPT_ERA, MULTI_CALL, LOOPS)


def _src(meta: dict) -> str:
    return f"{meta['model'].split(' [')[0]}, {meta['date'][:10]}, commit {meta['commit']}"


def _pct(row: dict, key: str = "accuracy") -> str:
    return f"{100 * row[key]:.0f}% [{100 * row['low']:.0f}–{100 * row['high']:.0f}]"


# ================================================================ tool choice and descriptions
@loader
def description_variants(bfcl_doc) -> dict | None:
    """The saved description variants (original, vague, look-alike, improved) by name, with their meta and cases."""
    part = (bfcl_doc or {}).get("descriptions")
    if not part:
        return None
    rows = {r["variant"]: r for r in part["data"]["rows"]}
    if not {"original", "vague", "lookalike", "improved"} <= set(rows):
        return None
    return dict(rows=rows, meta=part["meta"], cases=part["data"]["cases"], n=min(r["n"] for r in rows.values()))


@SELECTION(
    "tool-choice-lookalike",
    f"{BOOK}.9",
    "Wrong tool choice is most common when the tools on offer look alike, and it amounts to a lower single-step p.",
    answers=("工具选择错误…等价于降低单步 p",),
)
def tool_choice_lookalike(description_variants):
    if description_variants is None:
        return None
    rows, n = description_variants["rows"], description_variants["n"]
    orig, vague, look = rows["original"], rows["vague"], rows["lookalike"]
    cases = description_variants["cases"]
    kinds = Counter(c["kind"] for c in cases if c["variant"] == "lookalike" and not c["selected"])
    k = 5
    return (
        f"{_src(description_variants['meta'])}, the same {n} BFCL 'multiple' selection tasks, constrained decoding: "
        f"right tool chosen with the original tools {_pct(orig)}, with the other tools renamed to near-copies of the "
        f"right one (descriptions kept) {_pct(look)}, with every description made vague {_pct(vague)}; the "
        f"look-alike misses: {dict(kinds)}; as a step of a {k}-step chain: {cost.success(orig['accuracy'], k):.3f} "
        f"vs {cost.success(look['accuracy'], k):.3f}",
        *make_verdict(
            look["high"] < orig["low"],
            "the look-alike tools were not chosen wrongly more often than the originals (the 95% intervals "
            "overlap or the order is reversed)",
            [
                (
                    vague["high"] >= orig["low"],
                    f"what cut the rate here was names that look alike; descriptions made alike in form (vague) "
                    f"cost {100 * (orig['accuracy'] - vague['accuracy']):.0f} points, inside the 95% interval",
                ),
                (n < 30, f"{n} tasks per variant: the intervals are wide"),
                (
                    "n_tools" not in orig,
                    "the number of tools on offer is not varied in the saved runs (BFCL's 'multiple' cases "
                    "offer a few): 'many tools' is not measured",
                ),
            ],
        ),
    )


@SELECTION(
    "description-guidelines",
    f"{TOOL_USE}.1",
    "Tool descriptions written by the guidelines (a specific verb first, say when not to use the tool, ...) help the "
    "model pick the right tool; descriptions that break them hurt.",
    answers=("以动词开头 / 写清何时不该用 / 强 typing / 每个参数都写 description / 顶层参数尽量少",),
)
def description_guidelines(description_variants):
    if description_variants is None:
        return None
    rows, n = description_variants["rows"], description_variants["n"]
    orig, vague, better = rows["original"], rows["vague"], rows["improved"]
    gain = better["accuracy"] - orig["accuracy"]
    overlap = better["low"] <= orig["high"] and orig["low"] <= better["high"]
    extra = better["tool_tokens"] - orig["tool_tokens"]
    return (
        f"{_src(description_variants['meta'])}, {n} selection tasks, constrained decoding, right tool chosen (full "
        f"BFCL AST verdict): original {_pct(orig)} ({100 * orig['ast_accuracy']:.0f}%), improved (verb-first sentence "
        f"kept + 'Do not use it to <what each other tool does>') {_pct(better)} ({100 * better['ast_accuracy']:.0f}%), "
        f"vague ('Handles <noun> requests.') {_pct(vague)} ({100 * vague['ast_accuracy']:.0f}%); tool tokens per "
        f"request {orig['tool_tokens']:.0f} / {better['tool_tokens']:.0f} / {vague['tool_tokens']:.0f}. The other "
        "four guidelines are not varied in the saved runs",
        *make_verdict(
            vague["accuracy"] <= orig["accuracy"] <= better["accuracy"],
            "breaking the guidelines did not hurt, or following them made tool choice worse",
            [
                (
                    overlap,
                    f"no measurable gain from following them: {100 * gain:+.0f} points, inside the 95% "
                    f"intervals, for {extra:+.0f} tool tokens per request",
                ),
                (
                    better["ast_accuracy"] < orig["ast_accuracy"],
                    f"the full AST verdict was lower with the improved descriptions "
                    f"({100 * better['ast_accuracy']:.0f}% vs {100 * orig['ast_accuracy']:.0f}%)",
                ),
                (n < 30, f"{n} tasks per variant"),
            ],
        ),
    )


def selection_claims(doc: dict) -> list[Claim]:
    return SELECTION.run(bfcl_doc=doc)


# ================================================================ the prompt era
CALL_DUE = ("simple_python", "multiple", "parallel", "parallel_multiple")  # irrelevance: no call is due


@PROMPT_ERA(
    "prompt-era-success",
    f"{TOOL_USE} intro",
    "Early tool calling taught by prompt (the call format described in the system prompt, the calls cut out of free "
    "text) had a low success rate and a high cost.",
    answers=("初期…成功率低、执行成本高",),
)
def prompt_era_success(bfcl_doc):
    part = (bfcl_doc or {}).get("accuracy")
    rows = {(r["mode"], r["category"]): r for r in part["data"]["rows"]} if part else {}
    cats = [c for c in CALL_DUE if ("prompt", c) in rows and ("native", c) in rows]
    if not cats:
        return None
    prompt, native = [rows["prompt", c] for c in cats], [rows["native", c] for c in cats]
    n = sum(r["n"] for r in prompt)
    rate = sum(r["correct"] for r in prompt) / n
    tok_p = sum(r["prompt_tokens"] * r["n"] for r in prompt) / n
    tok_n = sum(r["prompt_tokens"] * r["n"] for r in native) / sum(r["n"] for r in native)
    cons, p_simple = rows.get(("constrained", "simple_python")), rows.get(("prompt", "simple_python"))
    return (
        f"{_src(part['meta'])}, BFCL (AST rules), {n} cases where a call is due: the call format explained in the "
        f"system prompt (BFCL's prompt style): {', '.join(f'{c} {_pct(r)}' for c, r in zip(cats, prompt))}; "
        f"{100 * rate:.1f}% overall, {sum(r['kinds'].get('malformed', 0) for r in prompt)} answers the host could "
        f"not parse; the same cases through the model's own template (native mode): "
        f"{sum(r['correct'] for r in native)} right — it wrote {sum(r['untagged_json'] for r in native)} untagged "
        f"JSON answers instead, this model was not trained on the template's format; prompt tokens per request "
        f"{tok_p:.0f} (prompt style) vs {tok_n:.0f} (native)",
        *make_verdict(
            rate < 2 / 3 and tok_p > tok_n,
            "prompt-style calling succeeded in at least two cases of three, or cost no more prompt tokens than the "
            "native template",
            [
                (
                    "Qwen2.5" in part["meta"]["model"],
                    "measured on a 2024 model (a 0.5B coder) standing in for the early LLMs the sentence is about; "
                    "without a grammar the prompt route is the only one that worked on this model, which was never "
                    "trained on its template's format",
                ),
                (
                    cons is not None and p_simple is not None and cons["low"] <= p_simple["high"],
                    "a grammar on the same model does not do clearly better on simple calls "
                    f"({_pct(cons) if cons else ''} vs {_pct(p_simple) if p_simple else ''}): much of the low rate is "
                    "the small model's, not the prompting's",
                ),
            ],
        ),
    )


def prompt_era_claims(doc: dict) -> list[Claim]:
    return PROMPT_ERA.run(bfcl_doc=doc)


# ================================================================ loops and premature answers
_CALL = re.compile(r"^(?P<call>.*)->(?P<status>[a-z_]+)$", re.S)


def _calls(row: dict) -> list[tuple[str, str]]:
    out = []
    for c in row["calls"]:
        m = _CALL.match(c)
        if m:
            out.append((m["call"], m["status"]))
    return out


def repeated_calls(rows) -> tuple[list[tuple[str, str]], Counter]:
    """(question, call) of every call the repeat guard refused, and how the first identical call had come back."""
    repeats, after = [], Counter()
    for r in rows:
        seen = {}
        for call, status in _calls(r):
            if status == "repeated":
                repeats.append((r["id"], call))
                after[seen.get(call, "unseen")] += 1
            else:
                seen.setdefault(call, status)
    return repeats, after


@LOOPS(
    "loops-and-early-answers",
    f"{BOOK}.9",
    "Failure modes of the loop: repeating the same call without progress (common after an error the model does not "
    "understand), answering before the task is done, degrading as the context grows.",
    answers=("循环、过早终止、上下文膨胀导致的退化",),
)
def loops_and_early_answers(loops_doc):
    rows = (loops_doc or {}).get("rows") or []
    if not rows:
        return None
    repeats, after = repeated_calls(rows)
    looped = sorted({q for q, _ in repeats})
    unfinished = [r["id"] for r in rows if r["stop"] == "answered" and not r["met"]]
    doc, s, n = loops_doc, loops_doc["settings"], len(rows)
    return (
        f"{doc['model'].split(' [')[0]}, {doc['date'][:10]}, commit {doc['commit']}, {n} questions through the host "
        f"loop (max {s['max_turns']} turns, repeat_limit {s['repeat_limit']}): the model repeated an identical call "
        f"in {len(looped)} of {n} ({', '.join(looped)}), each refused by the kit's repeat guard; the first identical "
        f"call had come back {dict(after)}; a final answer that failed the question's check in {len(unfinished)} of "
        f"{n} ({', '.join(unfinished)})",
        *make_verdict(
            bool(looped) and bool(unfinished),
            "no repeated call or no unfinished answer in the saved run",
            [
                (
                    after.get("error", 0) < sum(after.values()) / 2,
                    f"here the repeats mostly followed a call that had succeeded ({after.get('ok', 0)} of "
                    f"{sum(after.values())}), not an error the model did not understand",
                ),
                (
                    s["max_turns"] <= 8,
                    f"runs are capped at {s['max_turns']} turns: context bloat is not observed, and the repeat "
                    "guard stops a loop at its first repeat, so how long one would run is not measured",
                ),
                (n < 30, f"{n} questions"),
            ],
        ),
    )


def loop_claims(doc: dict) -> list[Claim]:
    return LOOPS.run(loops_doc=doc)


# ================================================================ several calls in one request
MANY = ("parallel", "parallel_multiple")  # BFCL's categories where one request needs several calls


def best_levers(full: dict) -> dict:
    """Per parallel category, the lever of ``levers_full`` with the highest accuracy (the last of a tie)."""
    best = {}
    for r in full["data"]["rows"]:
        if r["category"] in MANY and r["accuracy"] >= best.get(r["category"], {"accuracy": -1})["accuracy"]:
            best[r["category"]] = r
    return best


@MULTI_CALL(
    "multi-call-measured",
    f"{TOOL_USE} intro",
    "Models trained for tool calling make several calls in one request (and call tools hierarchically).",
    answers=("单次请求中调用多次工具、层级调用工具",),
)
def multi_call_measured(bfcl_doc):
    """The "Tool Use" intro's "several calls in one request, hierarchical calls": BFCL's parallel categories on the
    saved real-model runs (the best lever of ``levers_full`` beside the prompt and native modes)."""
    acc, full = (bfcl_doc or {}).get("accuracy"), (bfcl_doc or {}).get("levers_full")
    best = best_levers(full) if acc and full else {}
    if set(best) != set(MANY):
        return None
    rows = {(r["mode"], r["category"]): r for r in acc["data"]["rows"]}
    native = sum(rows[("native", c)]["correct"] for c in MANY if ("native", c) in rows)
    calls = min(best[c].get("calls_per_case") or 0 for c in MANY)
    flat = not any("nest" in r["category"] or "hier" in r["category"] for r in full["data"]["rows"])
    return (
        f"{_src(full['meta'])}, BFCL (AST rules): "
        + "; ".join(
            f"{c} {best[c]['n']} cases, best lever '{best[c]['lever']}' {_pct(best[c])} right with "
            f"{best[c].get('calls_per_case') or 0:.2f} calls per case"
            + (f" (prompt style {_pct(rows[('prompt', c)])})" if ("prompt", c) in rows else "")
            for c in MANY
        )
        + f"; native mode (its own template, no help): {native} right",
        *make_verdict(
            calls >= 1.5 and all(best[c]["correct"] > 0 for c in MANY),
            "the model did not write several calls for one request",
            [
                (
                    any(best[c]["accuracy"] < 0.5 for c in MANY),
                    "it does, but this 0.5B model gets fewer than half of these requests right, and none through "
                    f"its own template alone (native mode: {native} right): the calls come when the format is "
                    "explained in the prompt or the kit's levers shape them",
                ),
                (
                    flat,
                    "hierarchical calls are not measured: BFCL's categories run here are flat (one request, "
                    "independent calls); the kit's k-step chains are sequential turns, not nested calls",
                ),
            ],
        ),
    )


def multi_call_claims(doc: dict) -> list[Claim]:
    return MULTI_CALL.run(bfcl_doc=doc)


# ================================================================ all of them
def failure_claims() -> list[Claim]:
    return run(GROUPS)
