"""What a grammar can and cannot enforce, checked with xgrammar itself: "Tool Use" §3.1's enum and
minimum/maximum constraints, and §14.5.2's "a grammar does not authorise a call nor make it safe to repeat".

What it does
- Compiles JSON Schemas with the kit's one compiler (``toolkit.grammar.compile``) against the installed real
  model's own tokenizer (``tokenizer.json`` and ``config.json``'s vocabulary width) when ``make real-model`` has
  run, else the kit's offline Qwen tokenizer, and replays token ids of accepted and rejected argument strings
  through xgrammar's matcher (``toolkit.grammar.mask.replay``). What xgrammar really does with numeric ranges is
  measured, not assumed: integers are held to their range exactly; numbers are held to their range by a
  digit-pattern grammar that also turns away some in-range values (long fractions, exponent notation).
- One check per claim; the tokenizer is loaded once per ledger run (``grammar_tokenizer``, the real model's own
  ``real_tokenizer`` when it is installed).
- :func:`strict_unknown_field` says whether an argument object with an undeclared field is accepted, with
  xgrammar's default ``strict_mode`` and without it (the schema itself does not forbid extra fields).

What it leaves out
- Sampling with a model: the checks replay fixed strings; the behaviour of a model under the mask is the
  business of ``toolkit.grammar.distortion`` and the BFCL runs.
- ``format``, ``pattern`` and ``multipleOf``: the chapter names only enum and minimum/maximum.
"""

from __future__ import annotations

import json

from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group, loader
from toolkit.fetch import installed_folder
from toolkit.grammar.compile import compile_schema, compile_tools
from toolkit.grammar.mask import replay
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import TOOLS, schemas

# the chapter's advice, made concrete: a finite set of units and a bounded count and percentage
RANGED = {
    "type": "object",
    "properties": {
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "percent": {"type": "number", "minimum": 0, "maximum": 100},
    },
    "required": ["unit", "days", "percent"],
}
GOOD = {"unit": "celsius", "days": 3, "percent": 15}
# (what is wrong, the arguments): each breaks exactly one constraint
OUT_OF_SET = (
    ("unit kelvin", {**GOOD, "unit": "kelvin"}),
    ("days 0", {**GOOD, "days": 0}),
    ("days 8", {**GOOD, "days": 8}),
    ("percent -1", {**GOOD, "percent": -1}),
    ("percent 100.5", {**GOOD, "percent": 100.5}),
)
# in range, valid for JSON Schema, but written with a long fraction or in exponent notation
IN_RANGE_ODD = (("percent 12.3456789", {**GOOD, "percent": 12.3456789}), ("percent 1e-07", {**GOOD, "percent": 1e-7}))


GRAMMAR = Group("grammar")


@loader
def grammar_tokenizer(real_tokenizer) -> tuple:
    """(tokenizer, vocabulary width, where it came from): the installed model's own files, else the kit's."""
    folder = installed_folder()
    if folder is None or real_tokenizer is None:
        return tokenizer_for("qwen2.5"), None, "the kit's offline Qwen2.5 tokenizer (the real model is not installed)"
    width = json.loads((folder / "config.json").read_text(encoding="utf-8"))["vocab_size"]
    return real_tokenizer, width, f"the installed model's tokenizer ({folder.name})"


def accepts(grammar, tok, text: str) -> bool:
    """xgrammar accepts ``text`` token by token and may end after it (followed by the end-of-turn token)."""
    ids = tok.encode(text, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    return replay(grammar, ids) == (True, True)


def strict_unknown_field(tok, width=None) -> dict:
    """get_weather's arguments with an undeclared field: accepted by xgrammar's default (strict) grammar, by a
    non-strict one, and allowed by the schema itself (JSON Schema permits extra fields unless told otherwise)."""
    params = schemas(["get_weather"])[0]["function"]["parameters"]
    text = json.dumps({"city": "北京", "town": "北京"}, ensure_ascii=False)
    ids = tok.encode(text, add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    strict, loose = (replay(compile_schema(params, tok, width, strict=m), ids) for m in (True, False))
    return dict(
        strict=strict == (True, True), loose=loose == (True, True), schema_forbids="additionalProperties" in params
    )


@GRAMMAR(
    "enum-range-grammar",
    "Tool Use §3.1",
    "enum and minimum/maximum constraints in a tool's parameters can be enforced at decoding time by a grammar.",
    answers=("参数要强 typing：用 enum、minimum/maximum 约束有限集合",),
)
def enum_range_grammar(grammar_tokenizer):
    tok, width, src = grammar_tokenizer
    g = compile_schema(RANGED, tok, width)
    good = accepts(g, tok, json.dumps(GOOD))
    refused = {what: not accepts(g, tok, json.dumps(a)) for what, a in OUT_OF_SET}
    odd = {what: accepts(g, tok, json.dumps(a)) for what, a in IN_RANGE_ODD}
    edges = {v: accepts(g, tok, json.dumps({**GOOD, "days": v})) for v in (1, 7)}
    return (
        f"xgrammar, the kit's compiler (strict, compact JSON), {src}: a schema with unit ∈ {{celsius, fahrenheit}}, "
        f"1 ≤ days ≤ 7 (integer), 0 ≤ percent ≤ 100 (number); {json.dumps(GOOD)} accepted {good}; days 1 and 7 "
        f"accepted {all(edges.values())}; rejected: "
        + ", ".join(f"{w} {r}" for w, r in refused.items())
        + "; in range but rejected: "
        + ", ".join(f"{w} {not a}" for w, a in odd.items()),
        *make_verdict(
            good and all(edges.values()) and all(refused.values()),
            "an out-of-set or out-of-range value got through the grammar (see the evidence)",
            [
                (
                    not all(odd.values()),
                    "xgrammar holds a number's range with a digit pattern that also turns away valid values inside it ("
                    + ", ".join(w for w, a in odd.items() if not a)
                    + "): a model under this mask cannot write them; integers and enums are held exactly",
                )
            ],
        ),
    )


@GRAMMAR(
    "grammar-not-authorisation",
    "§14.5.2 constrained decoding",
    "A grammar guarantees neither that a call is authorised nor that it is safe to repeat.",
    answers=("不保证调用被授权，也不保证操作幂等",),
)
def grammar_not_authorisation(grammar_tokenizer):
    # §14.5.2: the grammar sees text only. write_note is a side effect the kit gates behind a person's approval.
    tok, width, src = grammar_tokenizer
    note = TOOLS["write_note"]
    call = (
        '<tool_call>\n{"name": "write_note", "arguments": {"title": "plan", "text": "delete everything"}}\n</tool_call>'
    )
    tg = compile_tools(schemas(["write_note"]), tok, vocab_width=width)
    first, again = accepts(tg, tok, call), accepts(tg, tok, call)  # a fresh matcher each: no memory of the first
    return (
        f"xgrammar tag grammar for write_note (the kit marks it needs_confirmation={note.needs_confirmation}), {src}: "
        f"a call nobody approved accepted {first}; the identical call in the next request accepted {again}; the "
        "grammar's inputs are the schema and the tokens only",
        *make_verdict(
            first and again and note.needs_confirmation,
            "the grammar refused a schema-valid call, so it did carry some permission rule",
        ),
    )


def grammar_claims() -> list[Claim]:
    return GRAMMAR.run()
