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
- ``failure_claims()``: all three from the saved files (a group is left out when its file is missing: nothing is
  claimed without its measurement).

What it leaves out
- Re-running the model (the saved runs are read and their meta quoted); varying the number of tools offered, and
  the four description guidelines the saved variants do not vary (strong typing, a description per parameter, few
  top-level parameters, at most 1,024 characters).
"""

from __future__ import annotations

import re
from collections import Counter

from toolkit import cost
from toolkit.book.ledger import BOOK, TOOL_USE, Claim, make_verdict
from toolkit.paths import saved_json

BFCL_RESULTS = "bfcl_qwen2.5-coder-0.5b.json"  # in benchmarks/results (toolkit.paths.results_file finds it)
LOOP_RESULTS = "loop_questions_after.json"


def _src(meta: dict) -> str:
    return f"{meta['model'].split(' [')[0]}, {meta['date'][:10]}, commit {meta['commit']}"


def _pct(row: dict, key: str = "accuracy") -> str:
    return f"{100 * row[key]:.0f}% [{100 * row['low']:.0f}–{100 * row['high']:.0f}]"


# ================================================================ tool choice and descriptions
def selection_claims(doc: dict) -> list[Claim]:
    part = doc.get("descriptions")
    if not part:
        return []
    rows = {r["variant"]: r for r in part["data"]["rows"]}
    if not {"original", "vague", "lookalike", "improved"} <= set(rows):
        return []
    orig, vague, look, better = rows["original"], rows["vague"], rows["lookalike"], rows["improved"]
    src, n = _src(part["meta"]), min(r["n"] for r in rows.values())
    kinds = Counter(c["kind"] for c in part["data"]["cases"] if c["variant"] == "lookalike" and not c["selected"])
    k = 5
    out = [
        Claim(
            "tool-choice-lookalike",
            f"{BOOK}.9",
            "Wrong tool choice is most common when the tools on offer look alike, and it amounts to a lower "
            "single-step p.",
            f"{src}, the same {n} BFCL 'multiple' selection tasks, constrained decoding: right tool chosen with the "
            f"original tools {_pct(orig)}, with the other tools renamed to near-copies of the right one "
            f"(descriptions kept) {_pct(look)}, with every description made vague {_pct(vague)}; the look-alike "
            f"misses: {dict(kinds)}; as a step of a {k}-step chain: {cost.success(orig['accuracy'], k):.3f} vs "
            f"{cost.success(look['accuracy'], k):.3f}",
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
    ]
    gain = better["accuracy"] - orig["accuracy"]
    overlap = better["low"] <= orig["high"] and orig["low"] <= better["high"]
    extra = better["tool_tokens"] - orig["tool_tokens"]
    out.append(
        Claim(
            "description-guidelines",
            f"{TOOL_USE}.1",
            "Tool descriptions written by the guidelines (a specific verb first, say when not to use the tool, ...) "
            "help the model pick the right tool; descriptions that break them hurt.",
            f"{src}, {n} selection tasks, constrained decoding, right tool chosen (full BFCL AST verdict): original "
            f"{_pct(orig)} ({100 * orig['ast_accuracy']:.0f}%), improved (verb-first sentence kept + 'Do not use it "
            f"to <what each other tool does>') {_pct(better)} ({100 * better['ast_accuracy']:.0f}%), vague "
            f"('Handles <noun> requests.') {_pct(vague)} ({100 * vague['ast_accuracy']:.0f}%); tool tokens per "
            f"request {orig['tool_tokens']:.0f} / {better['tool_tokens']:.0f} / {vague['tool_tokens']:.0f}. The "
            "other four guidelines are not varied in the saved runs",
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
    )
    return out


# ================================================================ the prompt era
CALL_DUE = ("simple_python", "multiple", "parallel", "parallel_multiple")  # irrelevance: no call is due


def prompt_era_claims(doc: dict) -> list[Claim]:
    part = doc.get("accuracy")
    if not part:
        return []
    rows = {(r["mode"], r["category"]): r for r in part["data"]["rows"]}
    cats = [c for c in CALL_DUE if ("prompt", c) in rows and ("native", c) in rows]
    if not cats:
        return []
    prompt, native = [rows["prompt", c] for c in cats], [rows["native", c] for c in cats]
    n = sum(r["n"] for r in prompt)
    rate = sum(r["correct"] for r in prompt) / n
    malformed = sum(r["kinds"].get("malformed", 0) for r in prompt)
    tok_p = sum(r["prompt_tokens"] * r["n"] for r in prompt) / n
    tok_n = sum(r["prompt_tokens"] * r["n"] for r in native) / sum(r["n"] for r in native)
    untagged = sum(r["untagged_json"] for r in native)
    native_ok = sum(r["correct"] for r in native)
    cons = rows.get(("constrained", "simple_python"))
    p_simple = rows.get(("prompt", "simple_python"))
    model = part["meta"]["model"]
    return [
        Claim(
            "prompt-era-success",
            f"{TOOL_USE} intro",
            "Early tool calling taught by prompt (the call format described in the system prompt, the calls cut "
            "out of free text) had a low success rate and a high cost.",
            f"{_src(part['meta'])}, BFCL (AST rules), {n} cases where a call is due: the call format explained in "
            f"the system prompt (BFCL's prompt style): {', '.join(f'{c} {_pct(r)}' for c, r in zip(cats, prompt))}; "
            f"{100 * rate:.1f}% overall, {malformed} answers the host could not parse; the same cases through the "
            f"model's own template (native mode): {native_ok} right — it wrote {untagged} untagged JSON answers "
            f"instead, this model was not trained on the template's format; prompt tokens per request "
            f"{tok_p:.0f} (prompt style) vs {tok_n:.0f} (native)",
            *make_verdict(
                rate < 2 / 3 and tok_p > tok_n,
                "prompt-style calling succeeded in at least two cases of three, or cost no more prompt tokens than "
                "the native template",
                [
                    (
                        "Qwen2.5" in model,
                        "measured on a 2024 model (a 0.5B coder) standing in for the early LLMs the sentence is "
                        "about; without a grammar the prompt route is the only one that worked on "
                        "this model, which was never trained on its template's format",
                    ),
                    (
                        cons is not None and p_simple is not None and cons["low"] <= p_simple["high"],
                        "a grammar on the same model does not do clearly better on simple calls "
                        f"({_pct(cons) if cons else ''} vs {_pct(p_simple) if p_simple else ''}): much of the low "
                        "rate is the small model's, not the prompting's",
                    ),
                ],
            ),
        )
    ]


# ================================================================ loops and premature answers
_CALL = re.compile(r"^(?P<call>.*)->(?P<status>[a-z_]+)$", re.S)


def _calls(row: dict) -> list[tuple[str, str]]:
    out = []
    for c in row["calls"]:
        m = _CALL.match(c)
        if m:
            out.append((m["call"], m["status"]))
    return out


def loop_claims(doc: dict) -> list[Claim]:
    rows = doc.get("rows") or []
    if not rows:
        return []
    repeats, after = [], Counter()  # (question, call); the status of the first identical call
    for r in rows:
        seen = {}
        for call, status in _calls(r):
            if status == "repeated":
                repeats.append((r["id"], call))
                after[seen.get(call, "unseen")] += 1
            else:
                seen.setdefault(call, status)
    looped = sorted({q for q, _ in repeats})
    unfinished = [r["id"] for r in rows if r["stop"] == "answered" and not r["met"]]
    s = doc["settings"]
    n = len(rows)
    return [
        Claim(
            "loops-and-early-answers",
            f"{BOOK}.9",
            "Failure modes of the loop: repeating the same call without progress (common after an error the model "
            "does not understand), answering before the task is done, degrading as the context grows.",
            f"{doc['model'].split(' [')[0]}, {doc['date'][:10]}, commit {doc['commit']}, {n} questions through the "
            f"host loop (max {s['max_turns']} turns, repeat_limit {s['repeat_limit']}): the model repeated an "
            f"identical call in {len(looped)} of {n} ({', '.join(looped)}), each refused by the kit's repeat guard; "
            f"the first identical call had come back {dict(after)}; a final answer that failed the question's "
            f"check in {len(unfinished)} of {n} ({', '.join(unfinished)})",
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
    ]


# ================================================================ several calls in one request
MANY = ("parallel", "parallel_multiple")  # BFCL's categories where one request needs several calls


def multi_call_claims(doc: dict) -> list[Claim]:
    """The "Tool Use" intro's "several calls in one request, hierarchical calls": BFCL's parallel categories on the
    saved real-model runs (the best lever of ``levers_full`` beside the prompt and native modes)."""
    acc, full = doc.get("accuracy"), doc.get("levers_full")
    if not acc or not full:
        return []
    rows = {(r["mode"], r["category"]): r for r in acc["data"]["rows"]}
    best = {}
    for r in full["data"]["rows"]:
        if r["category"] in MANY and r["accuracy"] >= best.get(r["category"], {"accuracy": -1})["accuracy"]:
            best[r["category"]] = r
    if set(best) != set(MANY):
        return []
    native = sum(rows[("native", c)]["correct"] for c in MANY if ("native", c) in rows)
    calls = min(best[c].get("calls_per_case") or 0 for c in MANY)
    flat = not any("nest" in r["category"] or "hier" in r["category"] for r in full["data"]["rows"])
    return [
        Claim(
            "multi-call-measured",
            f"{TOOL_USE} intro",
            "Models trained for tool calling make several calls in one request (and call tools hierarchically).",
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
    ]


# ================================================================ all of them
def failure_claims() -> list[Claim]:
    out = []
    doc = saved_json(BFCL_RESULTS)
    if doc is not None:
        out += selection_claims(doc) + prompt_era_claims(doc) + multi_call_claims(doc)
    doc = saved_json(LOOP_RESULTS)
    if doc is not None:
        out += loop_claims(doc)
    return out
