"""Token budgets for BFCL decoding, measured from the answers: enough new tokens for the longest correct answer.

What it does
- ``longest_answer(category, tokenizer)``: the token count of the longest possible answer of a category written
  the way the template asks for calls (one ``<tool_call>`` JSON block per call, then ``<|im_end|>``), taking each
  parameter's first accepted value and leaving out optional ones; ``(tokens, case id)``.
- ``budget(category, tokenizer)``: that count plus a margin, rounded up to a multiple of 16; a category with no
  possible answers (irrelevance: the right answer is short text) gets :data:`TEXT_BUDGET`.

What it leaves out
- Prompt-style answers (a Python list of calls is shorter than the JSON blocks, so these budgets cover it too)
  and any model's own verbosity: a model that writes prose before its calls can still run out.
"""

from __future__ import annotations

import json
import math
from functools import cache

from toolkit.eval import bfcl
from toolkit.eval.choices import MAX_NEW
from toolkit.qwen import IM_END

MARGIN = 8
TEXT_BUDGET = 64


def _answers(category: str) -> dict[str, list]:
    path = bfcl.data_dir() / "possible_answer" / f"BFCL_v4_{category}.json"
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["id"]: r["ground_truth"] for r in rows}


def as_blocks(ground_truth: list) -> str:
    out = ""
    for call in ground_truth:
        ((name, params),) = call.items()
        args = {k: v[0] for k, v in params.items() if isinstance(v, list) and v and v[0] != ""}
        out += "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>\n"
    return out.rstrip("\n") + IM_END


@cache
def _longest(category: str, tokenizer) -> tuple[int, str | None]:
    worst, which = 0, None
    for case_id, gt in _answers(category).items():
        n = len(tokenizer(as_blocks(gt), add_special_tokens=False)["input_ids"])
        if n > worst:
            worst, which = n, case_id
    return worst, which


def longest_answer(category: str, tokenizer) -> tuple[int, str | None]:
    return _longest(category, tokenizer)


def budget(category: str, tokenizer) -> int:
    n, _ = longest_answer(category, tokenizer)
    return TEXT_BUDGET if n == 0 else 16 * math.ceil((n + MARGIN) / 16)


def budgets(categories, tokenizer, kind: str = "measured") -> dict[str, int]:
    """New tokens per category: ``measured`` (enough for its longest answer, :func:`budget`) or ``fixed`` (the saved
    base-model runs' ``toolkit.eval.choices.MAX_NEW``)."""
    if kind == "fixed":
        return {c: MAX_NEW[c] for c in categories}
    return {c: budget(c, tokenizer) for c in categories}
