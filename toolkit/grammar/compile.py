"""Compiling JSON Schemas and Qwen's tool-call tag into xgrammar grammars.

What it does (book §14.5.2 "约束解码的角色")
- ``compile_schema`` / ``compile_tools`` turn a tool's JSON Schema, a "call one of these tools" schema, or a Qwen
  tool-call *structural tag* (``<tool_call>`` / ``</tool_call>`` bound to their single token ids, optionally several
  calls, optionally after free text) into a :class:`Grammar` carrying xgrammar's compiled grammar and its EBNF text.
  Malformed input raises :class:`SchemaError`, one line, no C++ traceback. ``bounded`` caps strings and arrays so a
  random-weight model terminates.

What it leaves out
- Grammars are compact JSON by default (``any_whitespace=False``). Meaning: the mask guarantees shape, never that
  the city is the right city.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import xgrammar as xgr

from toolkit.grammar.budget import fit
from toolkit.grammar.tokinfo import tokenizer_info as tokenizer_info_of
from toolkit.grammar.valid import SchemaError, as_schema, validate_schema  # re-exported: light, checked first
from toolkit.qwen import STOP_IDS, TOOL_CALL_END_ID, TOOL_CALL_ID, VOCAB_WIDTH
from toolkit.schema import function_of

# ---------------------------------------------------------------- compiling
_TOKINFO: dict[tuple, Any] = {}


_COMPILERS: dict[int, Any] = {}  # keyed by id() of a TokenizerInfo kept alive in _TOKINFO


def stop_ids_of(tokenizer) -> list[int]:
    # A chat turn ends with <|im_end|> (or <|endoftext|>: toolkit.qwen.STOP_IDS); the tokenizer's eos for other
    # vocabularies.
    found = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    ids = [i for i in found if isinstance(i, int) and i >= 0 and i != tokenizer.unk_token_id]
    return ids if found and found[0] in ids else [tokenizer.eos_token_id]


def tokenizer_info(tokenizer, vocab_width: int | None = None):
    """xgrammar's view of the vocabulary (cached: building it takes ~0.5–1 s for Qwen's 151k tokens)."""
    width = int(vocab_width or VOCAB_WIDTH)
    stops = tuple(stop_ids_of(tokenizer))
    key = (getattr(tokenizer, "name_or_path", ""), len(tokenizer), width, stops)
    if key not in _TOKINFO:
        _TOKINFO[key] = tokenizer_info_of(tokenizer, width, list(stops))  # the library's result, a lower peak
    return _TOKINFO[key]


def compiler_for(tokenizer, vocab_width):
    info = tokenizer_info(tokenizer, vocab_width)
    key = id(info)
    if key not in _COMPILERS:
        _COMPILERS[key] = xgr.GrammarCompiler(info)  # has its own cache of compiled grammars
    return _COMPILERS[key]


@dataclass(frozen=True)
class Grammar:
    """A compiled grammar plus what a student wants to look at: the EBNF text and where it came from."""

    compiled: Any  # xgrammar.CompiledGrammar
    text: str  # the EBNF xgrammar produced
    vocab_width: int
    kind: str  # "schema" | "tag" | "one_of"
    schema: dict  # the JSON Schema every output (or every call, for "tag") must validate against
    compile_ms: float
    stop_token_ids: tuple = STOP_IDS
    source: Any = None  # the structural tag, for kind == "tag"

    def __str__(self) -> str:
        return self.text


def _clean_error(exc: BaseException) -> str:
    """xgrammar's C++ messages carry a timestamp, a source path and sometimes "Check failed"; keep the point."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    msg = re.sub(r"^\[[\d:]+\]\s*\S+\.(cc|h|cpp):\d+:\s*", "", msg)
    msg = re.sub(r"^Check failed: \(.*?\) is false:\s*", "", msg)
    return msg[:300]


def schema_ebnf(schema, any_whitespace: bool, strict: bool = True) -> str:
    try:
        return str(xgr.Grammar.from_json_schema(schema, any_whitespace=any_whitespace, strict_mode=strict))
    except Exception as e:  # xgrammar raises RuntimeError from C++ with a multi-line trace
        raise SchemaError(f"xgrammar rejected the schema: {_clean_error(e)}") from None


def compile_schema(
    schema, tokenizer, vocab_width: int | None = None, any_whitespace: bool = False, strict: bool = True
) -> Grammar:
    """Compile one JSON Schema (dict or JSON text). Raises :class:`SchemaError` with one clear line if malformed.
    ``strict`` (xgrammar's ``strict_mode``, its default): no property or item the schema does not declare, even
    where JSON Schema itself would allow one; ``strict=False`` follows the schema's own rules."""
    schema = as_schema(schema)
    schema_ebnf(schema, any_whitespace, strict)  # xgrammar's own message first: it is the clearer one
    validate_schema(schema)
    return compile_grammar(
        tokenizer, vocab_width, "schema", schema, "the schema", any_whitespace=any_whitespace, strict=strict
    )


def compile_grammar(
    tokenizer, vocab_width, kind: str, schema, what: str, structural=None, any_whitespace: bool = False, strict=True
) -> Grammar:
    """Compile ``schema`` (or the ``structural`` tag when given) with this tokenizer's compiler, timed; xgrammar's
    error becomes one :class:`SchemaError` line naming ``what`` was compiled. Every grammar of the kit is made here."""
    compiler = compiler_for(tokenizer, vocab_width)  # outside the timing: the tokenizer info is built once
    t0 = time.perf_counter()
    try:
        if structural is None:
            compiled = compiler.compile_json_schema(schema, any_whitespace=any_whitespace, strict_mode=strict)
        else:
            compiled = compiler.compile_structural_tag(structural)
    except Exception as e:  # xgrammar raises RuntimeError from C++
        raise SchemaError(f"xgrammar could not compile {what}: {_clean_error(e)}") from None
    ms = (time.perf_counter() - t0) * 1e3
    stops = tuple(stop_ids_of(tokenizer))
    return Grammar(
        compiled, str(compiled.grammar), int(vocab_width or VOCAB_WIDTH), kind, schema, ms, stops, structural
    )


def _tool_function(tool) -> dict:
    if not isinstance(tool, dict):
        raise SchemaError(f"a tool must be a dict, got {type(tool).__name__}")
    fn = function_of(tool)  # accept OpenAI-style {"type":"function","function":{...}} or bare
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise SchemaError("each tool needs a non-empty string 'name' (or 'function': {'name': ...})")
    return fn


def call_schema(tools) -> dict:
    """JSON Schema of one call ``{"name": ..., "arguments": {...}}`` to any of ``tools``."""
    if not tools:
        raise SchemaError("no tools given")
    cases = []
    for tool in tools:
        fn = _tool_function(tool)
        params = as_schema(fn.get("parameters", {"type": "object", "properties": {}}))
        cases.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn["name"]}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return cases[0] if len(cases) == 1 else {"anyOf": cases}


def compile_tools(
    tools,
    tokenizer,
    mode: str = "tag",
    parallel: bool = False,
    vocab_width: int | None = None,
    any_whitespace: bool = False,
    max_calls: int = 4,
    required: bool = True,
    as_list: bool = False,
) -> Grammar:
    """Compile "call one of these tools".

    ``mode="tag"``: Qwen's format ``<tool_call>\\n{json}\\n</tool_call>`` where the markers are the single tokens
    151657/151658 (written as strings, xgrammar would let them be spelled from 4 ordinary pieces); the model
    must call (no free text first). ``parallel=True`` allows 1..``max_calls`` calls separated by a newline.
    ``required=False`` ("auto" tool choice): free text is allowed, and each ``<tool_call>`` token the model
    writes switches the grammar into the call format (one call, or any number with ``parallel``).
    ``mode="one_of"``: just the JSON object of one call, no markers.
    ``as_list=True`` (tag mode): one block whose JSON is a list of 1..``max_calls`` calls,
    ``<tool_call>\n[{call}, {call}]\n</tool_call>`` — not Qwen's format (one object per block); a lever the BFCL
    evaluation measures (``toolkit.eval.bfcl.constrained_grammar``), whose host splits the list into calls.
    """
    schema = call_schema(tools)
    if as_list:
        schema = {"type": "array", "items": schema, "minItems": 1, "maxItems": max_calls}
    validate_schema(schema)
    if mode == "one_of":
        g = compile_schema(schema, tokenizer, vocab_width, any_whitespace)
        return Grammar(g.compiled, g.text, g.vocab_width, "one_of", schema, g.compile_ms, g.stop_token_ids)
    if mode != "tag":
        raise SchemaError(f"mode must be 'tag' or 'one_of', got {mode!r}")
    start, end = tokenizer.convert_tokens_to_ids("<tool_call>"), tokenizer.convert_tokens_to_ids("</tool_call>")
    if (start, end) != (TOOL_CALL_ID, TOOL_CALL_END_ID):
        raise SchemaError(f"tokenizer has no single <tool_call> token (got ids {start}, {end}): not a Qwen vocab")
    body = schema_ebnf(schema, any_whitespace)  # compact JSON the same way compile_schema writes it
    tag = {
        "type": "tag",
        "begin": {"type": "token", "token": start},
        "content": {
            "type": "sequence",
            "elements": [
                {"type": "const_string", "value": "\n"},
                {"type": "grammar", "grammar": body},
                {"type": "const_string", "value": "\n"},
            ],
        },
        "end": {"type": "token", "token": end},
    }
    fmt = tag
    if not required:
        fmt = {
            "type": "token_triggered_tags",
            "trigger_tokens": [start],
            "tags": [tag],
            "at_least_one": False,
            "stop_after_first": not parallel,
        }
    elif parallel:
        more = {"type": "sequence", "elements": [{"type": "const_string", "value": "\n"}, tag]}
        fmt = {
            "type": "sequence",
            "elements": [tag, {"type": "repeat", "min": 0, "max": max_calls - 1, "content": more}],
        }
    structural = {"type": "structural_tag", "format": fmt}
    return compile_grammar(tokenizer, vocab_width, "tag", schema, "the tool-call tag", structural)


def compile_tool_choice(
    tools,
    tokenizer,
    choice: str = "auto",
    vocab_width: int | None = None,
    any_whitespace: bool = False,
    max_new_tokens: int | None = None,
) -> Grammar:
    """The grammar of one assistant turn under an API-style tool choice (Qwen's ``<tool_call>`` format).

    ``"auto"``: free text; each ``<tool_call>`` token (151657) the model writes starts a call whose JSON must fit
    one of ``tools``; after ``</tool_call>`` free text (or another call) may follow: any number, no slots.
    ``"required"``: the turn starts with one such call, then continues as ``"auto"``. A named tool is
    ``"required"`` with ``tools`` narrowed to it. ``"none"``: any text except the two tag tokens. ``"answer"``
    (the host's answer turn after tool results): text without a fence, a brace or ``<tool_call>``.
    ``max_new_tokens``: the turn's decoding budget; each tool's strings are then bounded so that one call always
    finishes within it (``toolkit.grammar.budget.fit``; the prompt keeps the tools' own schemas).
    """
    if choice not in ("auto", "required", "none", "answer"):
        raise SchemaError(f"tool choice must be 'auto', 'required', 'none' or 'answer', got {choice!r}")
    if choice == "none":
        fmt = {"type": "any_tokens", "exclude_tokens": [TOOL_CALL_ID, TOOL_CALL_END_ID]}
        schema: dict = {}
    elif choice == "answer":  # the host's answer turn: prose only, no call in any spelling (fence, brace, tag)
        fmt = {"type": "any_text", "excludes": ["```", "{", "<tool_call>"]}
        schema = {}
    else:
        if max_new_tokens is not None:
            try:
                tools = [fit(t, max_new_tokens) for t in tools]
            except ValueError as e:
                raise SchemaError(str(e)) from None
        one = compile_tools(tools, tokenizer, mode="tag", vocab_width=vocab_width, any_whitespace=any_whitespace)
        tag, schema = one.source["format"], one.schema
        fmt = {
            "type": "token_triggered_tags",
            "trigger_tokens": [TOOL_CALL_ID],
            "tags": [tag],
            "at_least_one": False,
            "stop_after_first": False,
        }
        if choice == "required":
            fmt = {"type": "sequence", "elements": [tag, fmt]}
    structural = {"type": "structural_tag", "format": fmt}
    return compile_grammar(tokenizer, vocab_width, "tag", schema, f"tool choice {choice!r}", structural)


def bounded(schema, max_length: int = 24, max_items: int = 4):
    """A copy of ``schema`` where every string has ``maxLength <= max_length`` and every array
    ``maxItems <= max_items``.

    Why: a random-weight model almost never picks the closing quote out of ~150k tokens, so an unbounded string
    never ends. A real model closes its strings; it does not need this.
    """
    if isinstance(schema, list):
        return [bounded(s, max_length, max_items) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: bounded(v, max_length, max_items) if k not in ("enum", "const", "default", "examples") else v
        for k, v in schema.items()
    }
    if out.get("type") == "string" and "enum" not in out and "const" not in out and "pattern" not in out:
        out["maxLength"] = min(out.get("maxLength", max_length), max_length)  # a looser existing bound is capped
    if out.get("type") == "array":
        out["maxItems"] = min(out.get("maxItems", max_items), max_items)
    return out
