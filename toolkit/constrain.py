"""Constrained decoding on xgrammar: a JSON Schema becomes a grammar, the grammar becomes a token mask per step.

What it does (book §14.5.2 "约束解码的角色")
- ``compile_schema`` / ``compile_tools`` turn a tool's JSON Schema, a "call one of these tools" schema, or a Qwen
  tool-call *structural tag* (``<tool_call>`` / ``</tool_call>`` bound to their single token ids 151657/151658,
  optionally several calls) into a :class:`Grammar` carrying xgrammar's compiled grammar and its EBNF text.
- :class:`GrammarMask` is the small protocol a decoding loop needs (allocate / fill / accept / is_terminated /
  reset); bitmasks are ``int32[1, ceil(V/32)]`` sized from the MODEL's logit width (151,936), not
  ``len(tokenizer)`` (151,669): the extra rows are padding the mask must also forbid.
- ``trace`` decodes step by step driving the matcher itself and records, per step, how many tokens were
  allowed, the top-k before/after the mask, the probability mass the mask removed, and the chosen token.
- ``generate`` decodes through xgrammar's own transformers integration (``xgrammar.contrib.hf``), or without a
  grammar for comparison; ``check`` parses and validates an output against the schema (jsonschema).
- ``distortion`` enumerates every token path of a tiny grammar (an enum of a few multi-token strings) and
  compares each string's true probability under the model (renormalised over valid outputs) with the
  probability step-wise masking + renormalisation gives it (book §9.4.5's warning, made concrete).
- ``cli``: ``python -m toolkit constrain --schema FILE --samples N --temperature T --json``.

What it leaves out
- Grammars are compact JSON by default (``any_whitespace=False``: ``", "`` and ``": "`` as Qwen's template writes
  them). A random-weight stand-in only terminates if whitespace is limited and every string is bounded
  (``maxLength``; :func:`bounded` adds one): otherwise it can wander inside a string forever.
- Batched decoding, speculative decoding, jump-forward: one sequence, one token per step.
- Meaning. The mask guarantees shape (brackets, field names, types, enum members), never that the city is the
  right city: that check belongs to the host, after parsing.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TOOL_CALL_ID, TOOL_CALL_END_ID = 151657, 151658  # <tool_call>, </tool_call>: single added tokens in Qwen vocabs
IM_END_ID = 151645  # <|im_end|>: where an assistant turn stops


class SchemaError(ValueError):
    """A schema (or tool list) xgrammar or jsonschema cannot use. ``str(e)`` is one short line."""


# ---------------------------------------------------------------- compiling
_TOKINFO: dict[tuple, Any] = {}
_COMPILERS: dict[tuple, Any] = {}


def _stop_ids(tokenizer) -> list[int]:
    # A chat turn ends with <|im_end|>; fall back to the tokenizer's eos for non-Qwen vocabularies.
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id and im_end is not None and im_end >= 0:
        return [im_end]
    return [tokenizer.eos_token_id]


def tokenizer_info(tokenizer, vocab_width: int | None = None):
    """xgrammar's view of the vocabulary (cached: building it takes ~0.5–1 s for Qwen's 151k tokens)."""
    import xgrammar as xgr

    from .models import VOCAB_WIDTH

    width = int(vocab_width or VOCAB_WIDTH)
    stops = tuple(_stop_ids(tokenizer))
    key = (getattr(tokenizer, "name_or_path", ""), len(tokenizer), width, stops)
    if key not in _TOKINFO:
        _TOKINFO[key] = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=width, stop_token_ids=list(stops))
    return _TOKINFO[key]


def _compiler(tokenizer, vocab_width):
    import xgrammar as xgr

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
    stop_token_ids: tuple = (IM_END_ID,)
    source: Any = None  # the structural tag, for kind == "tag"

    def __str__(self) -> str:
        return self.text


def _clean_error(exc: BaseException) -> str:
    """xgrammar's C++ messages carry a timestamp, a source path and sometimes "Check failed"; keep the point."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    msg = re.sub(r"^\[[\d:]+\]\s*\S+\.(cc|h|cpp):\d+:\s*", "", msg)
    msg = re.sub(r"^Check failed: \(.*?\) is false:\s*", "", msg)
    return msg[:300]


def _as_schema(schema) -> dict | bool:
    if isinstance(schema, (str, bytes)):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"a JSON Schema must be an object (dict), got {type(schema).__name__}")
    return schema


def _check_schema(schema) -> None:
    # jsonschema knows the meta-schema; xgrammar silently ignores some mistakes (e.g. "maxLength": "x").
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise SchemaError(f"invalid JSON Schema at {where}: {e.message[:200]}") from None


def _ebnf(schema, any_whitespace: bool) -> str:
    import xgrammar as xgr

    try:
        return str(xgr.Grammar.from_json_schema(schema, any_whitespace=any_whitespace))
    except Exception as e:  # xgrammar raises RuntimeError from C++ with a multi-line trace
        raise SchemaError(f"xgrammar rejected the schema: {_clean_error(e)}") from None


def compile_schema(schema, tokenizer, vocab_width: int | None = None, any_whitespace: bool = False) -> Grammar:
    """Compile one JSON Schema (dict or JSON text). Raises :class:`SchemaError` with one clear line if malformed."""
    from .models import VOCAB_WIDTH

    schema = _as_schema(schema)
    _ebnf(schema, any_whitespace)  # xgrammar's own message first: it is the clearer one
    _check_schema(schema)
    compiler = _compiler(tokenizer, vocab_width)  # outside the timing: the tokenizer info is built once
    t0 = time.perf_counter()
    try:
        compiled = compiler.compile_json_schema(schema, any_whitespace=any_whitespace)
    except Exception as e:
        raise SchemaError(f"xgrammar could not compile the schema: {_clean_error(e)}") from None
    ms = (time.perf_counter() - t0) * 1e3
    return Grammar(compiled, str(compiled.grammar), int(vocab_width or VOCAB_WIDTH), "schema", schema, ms,
                   tuple(_stop_ids(tokenizer)))


def _tool_function(tool) -> dict:
    if not isinstance(tool, dict):
        raise SchemaError(f"a tool must be a dict, got {type(tool).__name__}")
    fn = tool.get("function", tool)  # accept OpenAI-style {"type":"function","function":{...}} or bare
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
        params = _as_schema(fn.get("parameters", {"type": "object", "properties": {}}))
        cases.append({"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
                      "required": ["name", "arguments"], "additionalProperties": False})
    return cases[0] if len(cases) == 1 else {"anyOf": cases}


def compile_tools(tools, tokenizer, mode: str = "tag", parallel: bool = False, vocab_width: int | None = None,
                  any_whitespace: bool = False, max_calls: int = 4) -> Grammar:
    """Compile "call one of these tools".

    ``mode="tag"``: Qwen's format ``<tool_call>\\n{json}\\n</tool_call>`` where the markers are the single tokens
    151657/151658 (written as strings, xgrammar would let them be spelled from 4 ordinary pieces); the model
    must call (no free text first). ``parallel=True`` allows 1..``max_calls`` calls separated by a newline.
    ``mode="one_of"``: just the JSON object of one call, no markers.
    """
    from .models import VOCAB_WIDTH

    schema = call_schema(tools)
    _check_schema(schema)
    if mode == "one_of":
        g = compile_schema(schema, tokenizer, vocab_width, any_whitespace)
        return Grammar(g.compiled, g.text, g.vocab_width, "one_of", schema, g.compile_ms, g.stop_token_ids)
    if mode != "tag":
        raise SchemaError(f"mode must be 'tag' or 'one_of', got {mode!r}")
    start, end = tokenizer.convert_tokens_to_ids("<tool_call>"), tokenizer.convert_tokens_to_ids("</tool_call>")
    if (start, end) != (TOOL_CALL_ID, TOOL_CALL_END_ID):
        raise SchemaError(f"tokenizer has no single <tool_call> token (got ids {start}, {end}): not a Qwen vocab")
    body = _ebnf(schema, any_whitespace)  # compact JSON the same way compile_schema writes it
    tag = {"type": "tag", "begin": {"type": "token", "token": start},
           "content": {"type": "sequence", "elements": [{"type": "const_string", "value": "\n"},
                                                        {"type": "grammar", "grammar": body},
                                                        {"type": "const_string", "value": "\n"}]},
           "end": {"type": "token", "token": end}}
    fmt = tag
    if parallel:
        more = {"type": "sequence", "elements": [{"type": "const_string", "value": "\n"}, tag]}
        fmt = {"type": "sequence", "elements": [tag, {"type": "repeat", "min": 0, "max": max_calls - 1,
                                                      "content": more}]}
    structural = {"type": "structural_tag", "format": fmt}
    compiler = _compiler(tokenizer, vocab_width)
    t0 = time.perf_counter()
    try:
        compiled = compiler.compile_structural_tag(structural)
    except Exception as e:
        raise SchemaError(f"xgrammar could not compile the tool-call tag: {_clean_error(e)}") from None
    ms = (time.perf_counter() - t0) * 1e3
    return Grammar(compiled, str(compiled.grammar), int(vocab_width or VOCAB_WIDTH), "tag", schema, ms,
                   tuple(_stop_ids(tokenizer)), source=structural)


def bounded(schema, max_length: int = 24, max_items: int = 4):
    """A copy of ``schema`` where every string has a ``maxLength`` and every array a ``maxItems``.

    Why: a random-weight model almost never picks the closing quote out of ~150k tokens, so an unbounded string
    never ends. A real model closes its strings; it does not need this.
    """
    if isinstance(schema, list):
        return [bounded(s, max_length, max_items) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded(v, max_length, max_items) if k not in ("enum", "const", "default", "examples") else v
           for k, v in schema.items()}
    if out.get("type") == "string" and "enum" not in out and "const" not in out and "pattern" not in out:
        out.setdefault("maxLength", max_length)
    if out.get("type") == "array":
        out.setdefault("maxItems", max_items)
    return out


# ---------------------------------------------------------------- the mask protocol
class GrammarMask:
    """One sequence's grammar state. The loop: ``fill(bm)`` → mask logits → pick token → ``accept(tok)``.

    Bitmasks live on the CPU (xgrammar fills them there); move them to the logits' device to apply.
    """

    def __init__(self, grammar: Grammar):
        import xgrammar as xgr

        self.grammar = grammar
        self.vocab_width = grammar.vocab_width
        self.matcher = xgr.GrammarMatcher(grammar.compiled)

    def allocate(self):
        import xgrammar as xgr

        return xgr.allocate_token_bitmask(1, self.vocab_width)

    def fill(self, bitmask) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, 0)

    def accept(self, token_id: int) -> bool:
        return bool(self.matcher.accept_token(int(token_id)))

    def is_terminated(self) -> bool:
        return bool(self.matcher.is_terminated())

    def reset(self) -> None:
        self.matcher.reset()

    @staticmethod
    def apply(logits, bitmask) -> None:
        """Set forbidden logits to -inf in place (``logits``: [1, V] or [V], any device)."""
        import xgrammar as xgr

        xgr.apply_token_bitmask_inplace(logits, bitmask.to(logits.device))

    def allowed(self, bitmask) -> np.ndarray:
        """Boolean array of length V: which token ids the bitmask allows."""
        return allowed_mask(bitmask, self.vocab_width)

    def allowed_count(self, bitmask) -> int:
        return allowed_count(bitmask, self.vocab_width)


def allowed_mask(bitmask, vocab_width: int) -> np.ndarray:
    # Bit j of int32 word i is token 32*i + j; on a little-endian host the bytes come low bits first.
    words = np.ascontiguousarray(bitmask.detach().cpu().numpy().reshape(-1).astype("<i4"))
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:vocab_width].astype(bool)


def allowed_count(bitmask, vocab_width: int) -> int:
    return int(allowed_mask(bitmask, vocab_width).sum())


def replay(grammar: Grammar, ids) -> tuple[bool, bool]:
    """Feed ``ids`` into a fresh matcher: (all accepted, terminated). How we check a finished generation."""
    m = GrammarMask(grammar)
    for i in ids:
        if not m.accept(i):
            return False, False
    return True, m.is_terminated()
