"""Constrained decoding on xgrammar: a JSON Schema becomes a grammar, the grammar becomes a token mask per step.

What it does (book §14.5.2 "约束解码的角色")
- ``compile_schema`` / ``compile_tools`` turn a tool's JSON Schema, a "call one of these tools" schema, or a Qwen
  tool-call *structural tag* (``<tool_call>`` / ``</tool_call>`` bound to their single token ids 151657/151658,
  optionally several calls, optionally after free text) into a :class:`Grammar` carrying xgrammar's compiled
  grammar and its EBNF text. Malformed input raises :class:`SchemaError`, one line, no C++ traceback.
- :class:`GrammarMask` is the small protocol a decoding loop needs (allocate / fill / accept / is_terminated /
  reset); bitmasks are ``int32[1, ceil(V/32)]`` sized from the MODEL's logit width (151,936), not
  ``len(tokenizer)`` (151,669 for the kit's offline tokenizer): the extra rows are padding the mask must forbid.
- ``trace`` decodes step by step driving the matcher itself and records, per step, how many tokens were
  allowed, the top-k before/after the mask, the probability mass the mask removed, and the chosen token.
- ``generate`` / ``sample`` (n rows, batched) decode through xgrammar's own transformers integration
  (``xgrammar.contrib.hf``), or without a grammar for comparison; ``replay`` checks termination afterwards;
  ``check`` parses and validates an output (jsonschema); ``score`` gives a whole output's log-probability with
  and without the mask.
- ``distortion`` enumerates every token path of a tiny grammar (an enum of a few multi-token strings) and
  compares each string's true probability under the model (renormalised over valid outputs) with the
  probability step-wise masking + renormalisation gives it (book §9.4.5's warning, made concrete).
- ``precheck`` checks a schema before any model loads: meta-schema, unresolvable ``$ref``/``$dynamicRef`` (one
  line), and what xgrammar 0.2.9 leaves unenforced (``UNENFORCED_KEYWORDS``, unchecked formats, lookaround
  patterns, its own printed warnings), which is an error unless allowed; ``read_schema_file`` turns any file
  a user can pass into a schema or a one-line error.
- ``cli``: ``python -m toolkit constrain --schema FILE --samples N --temperature T --json [--allow-unenforced]``.

What it leaves out
- Grammars are compact JSON by default (``any_whitespace=False``: ``", "`` and ``": "`` as Qwen's template writes
  them). A random-weight stand-in only terminates if whitespace is limited and every string is bounded
  (``maxLength``; :func:`bounded` adds one): otherwise it can wander inside a string forever.
- Speculative decoding and jump-forward; ``trace`` decodes one sequence, one token per step.
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
_COMPILERS: dict[int, Any] = {}  # keyed by id() of a TokenizerInfo kept alive in _TOKINFO


def _stop_ids(tokenizer) -> list[int]:
    # A chat turn ends with <|im_end|>; fall back to the tokenizer's eos for non-Qwen vocabularies.
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end >= 0 and im_end != tokenizer.unk_token_id:
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
                  any_whitespace: bool = False, max_calls: int = 4, required: bool = True) -> Grammar:
    """Compile "call one of these tools".

    ``mode="tag"``: Qwen's format ``<tool_call>\\n{json}\\n</tool_call>`` where the markers are the single tokens
    151657/151658 (written as strings, xgrammar would let them be spelled from 4 ordinary pieces); the model
    must call (no free text first). ``parallel=True`` allows 1..``max_calls`` calls separated by a newline.
    ``required=False`` ("auto" tool choice): free text is allowed, and each ``<tool_call>`` token the model
    writes switches the grammar into the call format (one call, or any number with ``parallel``).
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
    if not required:
        fmt = {"type": "token_triggered_tags", "trigger_tokens": [start], "tags": [tag], "at_least_one": False,
               "stop_after_first": not parallel}
    elif parallel:
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


def compile_tool_choice(tools, tokenizer, choice: str = "auto", vocab_width: int | None = None,
                        any_whitespace: bool = False) -> Grammar:
    """The grammar of one assistant turn under an API-style tool choice (Qwen's ``<tool_call>`` format).

    ``"auto"``: free text; each ``<tool_call>`` token (151657) the model writes starts a call whose JSON must fit
    one of ``tools``; after ``</tool_call>`` free text (or another call) may follow: any number, no slots.
    ``"required"``: the turn starts with one such call, then continues as ``"auto"``. A named tool is
    ``"required"`` with ``tools`` narrowed to it. ``"none"``: any text except the two tag tokens.
    """
    if choice not in ("auto", "required", "none"):
        raise SchemaError(f"tool choice must be 'auto', 'required' or 'none', got {choice!r}")
    from .models import VOCAB_WIDTH

    if choice == "none":
        fmt = {"type": "any_tokens", "exclude_tokens": [TOOL_CALL_ID, TOOL_CALL_END_ID]}
        schema: dict = {}
    else:
        one = compile_tools(tools, tokenizer, mode="tag", vocab_width=vocab_width, any_whitespace=any_whitespace)
        tag, schema = one.source["format"], one.schema
        fmt = {"type": "token_triggered_tags", "trigger_tokens": [TOOL_CALL_ID], "tags": [tag],
               "at_least_one": False, "stop_after_first": False}
        if choice == "required":
            fmt = {"type": "sequence", "elements": [tag, fmt]}
    structural = {"type": "structural_tag", "format": fmt}
    t0 = time.perf_counter()
    try:
        compiled = _compiler(tokenizer, vocab_width).compile_structural_tag(structural)
    except Exception as e:
        raise SchemaError(f"xgrammar could not compile tool choice {choice!r}: {_clean_error(e)}") from None
    return Grammar(compiled, str(compiled.grammar), int(vocab_width or VOCAB_WIDTH), "tag", schema,
                   (time.perf_counter() - t0) * 1e3, tuple(_stop_ids(tokenizer)), source=structural)


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
    out = {k: bounded(v, max_length, max_items) if k not in ("enum", "const", "default", "examples") else v
           for k, v in schema.items()}
    if out.get("type") == "string" and "enum" not in out and "const" not in out and "pattern" not in out:
        out["maxLength"] = min(out.get("maxLength", max_length), max_length)  # a looser existing bound is capped
    if out.get("type") == "array":
        out["maxItems"] = min(out.get("maxItems", max_items), max_items)
    return out


# ---------------------------------------------------------------- checking a schema before any model loads
# What xgrammar 0.2.9 leaves unenforced, measured on this version (a grammar built with and without the keyword is
# the same, and an instance the keyword forbids is accepted) and read from its own warnings. A sampled output can
# break these; ``precheck`` names them before a model is loaded.
UNENFORCED_KEYWORDS = {
    "not": "ignored", "if": "ignored", "then": "ignored", "else": "ignored",
    "dependentRequired": "ignored", "dependentSchemas": "ignored", "dependencies": "ignored",
    "unevaluatedProperties": "ignored", "unevaluatedItems": "ignored",
    "contains": "ignored", "minContains": "ignored", "maxContains": "ignored",
    "$dynamicRef": "not followed", "$dynamicAnchor": "not followed", "$recursiveRef": "not followed",
}
ENFORCED_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uri",
                    "uri-reference", "uuid", "uri-template", "json-pointer", "relative-json-pointer"}
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                  "unevaluatedProperties", "unevaluatedItems", "additionalItems")
_LOOKAROUND = re.compile(r"\(\?(?:=|!|<=|<!)")
MAX_SCHEMA_BYTES = 1 << 20


def _subschemas(node: dict, path: str):
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                yield sub, f"{path}/{key}/{name}"
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield sub, f"{path}/{key}/{i}"
    for key in _SUBSCHEMA_ONE:
        if key in node:
            yield node[key], f"{path}/{key}"


def _walk(schema):
    """Every (subschema, JSON-pointer path) of ``schema``, iteratively (no recursion limit to hit)."""
    stack = [(schema, "#")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            yield node, path
            stack.extend(reversed(list(_subschemas(node, path))))


def unenforced(schema) -> list[str]:
    """Where ``schema`` uses what xgrammar 0.2.9 does not enforce: ``["#/properties/a: not (ignored)", ...]``."""
    found = []
    for node, path in _walk(schema):
        for key, why in UNENFORCED_KEYWORDS.items():
            if key in node:
                found.append(f"{path}: {key} ({why})")
        if node.get("uniqueItems") is True:
            found.append(f"{path}: uniqueItems (ignored)")
        fmt = node.get("format")
        if isinstance(fmt, str) and fmt not in ENFORCED_FORMATS:
            found.append(f"{path}: format {fmt!r} (not checked)")
        pattern = node.get("pattern")
        if isinstance(pattern, str) and _LOOKAROUND.search(pattern):
            found.append(f"{path}: pattern lookaround (ignored)")
        ref = node.get("$ref")
        if isinstance(ref, str) and not (ref == "#" or ref.startswith("#/")):
            found.append(f"{path}: $ref {ref[:60]!r} (only '#/...' pointers are followed)")
        elif isinstance(ref, str) and len(node) > 1 and set(node) - {"$ref", "description", "title", "$comment"}:
            found.append(f"{path}: keywords beside $ref (ignored)")
    return found


def check_refs(schema) -> None:
    """Raise :class:`SchemaError` (one line) for the first ``$ref`` / ``$dynamicRef`` that cannot be resolved."""
    import referencing.exceptions
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012, specification_with

    dialect = schema.get("$schema") if isinstance(schema.get("$schema"), str) else ""
    resource = specification_with(dialect, default=DRAFT202012).create_resource(schema)
    base = resource.id() or "urn:toolkit:schema"
    resolver = Registry().with_resource(base, resource).resolver(base)  # no retrieval: remote refs fail
    for node, path in _walk(schema):
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            ref = node.get(key)
            if ref is None:
                continue
            if not isinstance(ref, str):
                raise SchemaError(f"{key} at {path} must be a string, not {type(ref).__name__}")
            try:
                resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                raise SchemaError(f"unresolvable {key} {ref[:80]!r} at {path}") from None
            except Exception as e:  # a malformed pointer, say
                raise SchemaError(f"unresolvable {key} {ref[:80]!r} at {path}: {type(e).__name__}") from None


def _xgrammar_warnings(schema) -> list[str]:
    """Convert with xgrammar and return the warnings it prints (from C++, to file descriptor 2) on the way."""
    import os
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            _ebnf(schema, False)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read(1 << 16).decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        if "Warning:" in line:
            msg = line.split("Warning:", 1)[1].strip()
            if msg not in out:
                out.append(msg[:160])
    return out


def read_schema_file(path: str) -> dict | bool:
    """A schema from a file the user names; every problem is a one-line :class:`SchemaError`."""
    import os

    try:
        size = os.stat(path).st_size
        if os.path.isdir(path):
            raise SchemaError(f"{path} is a folder, not a schema file")
        if size > MAX_SCHEMA_BYTES:
            raise SchemaError(f"schema file is {size:,} bytes; the limit is {MAX_SCHEMA_BYTES:,}")
        with open(path, "rb") as f:
            data = f.read(MAX_SCHEMA_BYTES + 1)
    except OSError as e:
        raise SchemaError(f"cannot read schema file {path}: {e.strerror or e}") from None
    if len(data) > MAX_SCHEMA_BYTES:  # a pipe or a special file has no size to stat
        raise SchemaError(f"schema file is over {MAX_SCHEMA_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SchemaError(f"schema file is not UTF-8 text (byte {e.start} of {len(data):,}): is it binary?") \
            from None
    def not_json(constant):
        raise SchemaError(f"schema is not valid JSON: {constant} is not a JSON value")

    try:
        schema = json.loads(text, parse_constant=not_json)
    except json.JSONDecodeError as e:
        raise SchemaError(f"schema is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SchemaError("schema is nested too deeply to read") from None
    if not isinstance(schema, dict):
        raise SchemaError(f"a JSON Schema file must hold an object, got {type(schema).__name__}")
    return schema


def precheck(schema, allow_unenforced: bool = False) -> list[str]:
    """Check a schema the way ``compile_schema`` will, without a tokenizer or a model: JSON Schema validity,
    resolvable references, what xgrammar would reject, and what it would leave unenforced.

    Raises :class:`SchemaError` (one line). Unenforced parts raise too unless ``allow_unenforced``; then they
    are returned as warnings."""
    try:
        schema = _as_schema(schema)
        if isinstance(schema, bool):
            return []
        _check_schema(schema)
        check_refs(schema)
        found = unenforced(schema)
        if found and not allow_unenforced:  # say so now, before importing xgrammar (seconds: it loads torch)
            raise SchemaError(_unenforced_line(found))
        covered = ("Lookahead" if any("lookaround" in f for f in found) else "\0",
                   "URI should" if any("$ref" in f for f in found) else "\0")
        found += [f"xgrammar: {w}" for w in _xgrammar_warnings(schema) if not w.startswith(covered)]
    except RecursionError:
        raise SchemaError("schema is nested too deeply") from None
    if found and not allow_unenforced:
        raise SchemaError(_unenforced_line(found))
    return found


def _unenforced_line(found: list[str]) -> str:
    shown = "; ".join(found[:6]) + (f"; and {len(found) - 6} more" if len(found) > 6 else "")
    return f"xgrammar does not enforce: {shown} (--allow-unenforced samples anyway)"


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


# ---------------------------------------------------------------- prompts and checking outputs
def chat_prompt(tokenizer, user: str, tools=None, system: str | None = None) -> list[int]:
    """Token ids of a one-turn chat rendered with the tokenizer's own template, ending in the generation prompt."""
    from .render import render

    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return list(render(messages, tools=tools, template="native", tokenizer=tokenizer).ids)


@dataclass
class Check:
    """Did an output parse, and does it validate? ``values``: the parsed JSON (one per call for tool tags)."""

    parses: bool
    valid: bool
    values: list = field(default_factory=list)
    error: str = ""


_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def check(text: str, schema: dict, tool_tags: bool = False) -> Check:
    """Parse ``text`` (bare JSON, or every ``<tool_call>`` block if ``tool_tags``) and validate with jsonschema."""
    import jsonschema

    pieces = _CALL_RE.findall(text) if tool_tags else [text.strip()]
    if not pieces:
        return Check(False, False, [], "no <tool_call>…</tool_call> block")
    values = []
    for piece in pieces:
        try:
            values.append(json.loads(piece))
        except json.JSONDecodeError as e:
            return Check(False, False, values, f"not JSON: {e.msg} at column {e.colno}")
    for v in values:
        err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(v))
        if err is not None:
            return Check(True, False, values, f"schema: {err.message[:160]}")
    return Check(True, True, values)


def check_output(text: str, grammar: Grammar) -> Check:
    return check(text, grammar.schema, tool_tags=grammar.kind == "tag")


def token_text(tokenizer, tid: int) -> str:
    """How one token reads (ids past the tokenizer's end are padding rows of the logit matrix)."""
    if tid >= len(tokenizer):
        return f"<pad#{tid}>"
    return tokenizer.decode([tid])


# ---------------------------------------------------------------- decoding: the step trace
@dataclass
class Step:
    index: int
    allowed: int  # how many of the V token ids the mask allowed (V when unconstrained)
    top_before: list  # [(id, text, p_before, p_after)]: top-k of the model's own distribution
    top_after: list  # [(id, text, p_before, p_after)]: top-k after masking and renormalising
    removed_mass: float  # probability the mask took away (0 when the model only wanted allowed tokens)
    chosen: int
    chosen_text: str
    p_before: float  # the chosen token's probability before the mask
    p_after: float


@dataclass
class StepTrace:
    prompt_len: int
    ids: list  # generated ids, stop token included when there was one
    steps: list
    text: str
    terminated: bool  # the grammar reached its end (constrained) / a stop token was produced (unconstrained)
    temperature: float
    seed: int
    vocab_width: int
    constrained: bool
    seconds: float = 0.0

    @property
    def allowed_sizes(self) -> list[int]:
        return [s.allowed for s in self.steps]


def _decode_text(tokenizer, ids, stops) -> str:
    body = ids[:-1] if ids and ids[-1] in stops else ids
    return tokenizer.decode([i for i in body if i < len(tokenizer)], skip_special_tokens=False)


def _top(tokenizer, by, before, after, k):
    vals, idx = by.topk(k)
    return [(int(i), token_text(tokenizer, int(i)), float(before[i]), float(after[i]))
            for v, i in zip(vals, idx) if float(v) > 0]


def trace(model, tokenizer, prompt_ids, grammar: Grammar | None, max_new_tokens: int = 48,
          temperature: float = 0.0, seed: int = 0, top_k: int = 10) -> StepTrace:
    """Decode one sequence, driving the grammar matcher ourselves, and record every step (see :class:`Step`).

    ``temperature=0`` is greedy (the shown probabilities are then at temperature 1); otherwise sampling from the
    masked distribution at ``temperature`` with a seeded generator. ``grammar=None`` decodes unconstrained.
    """
    import torch

    from .models import vocab_width

    width = vocab_width(model)
    if grammar is not None and grammar.vocab_width != width:
        raise ValueError(f"grammar was compiled for vocab width {grammar.vocab_width}, model has {width}")
    stops = set(grammar.stop_token_ids if grammar else _stop_ids(tokenizer))
    mask = GrammarMask(grammar) if grammar else None
    bitmask = mask.allocate() if mask else None
    gen = torch.Generator().manual_seed(seed)
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)], device=dev)
    steps, out_ids, past, terminated = [], [], None, False
    t0 = time.perf_counter()
    with torch.no_grad():
        for i in range(max_new_tokens):
            # Same call shape as transformers' generate (attention mask over everything so far): keeps greedy
            # decoding bit-identical between the two paths.
            attn = torch.ones(1, len(prompt_ids) + len(out_ids), dtype=torch.long, device=dev)
            out = model(input_ids=ids, attention_mask=attn, cache=past, use_cache=True, logits_to_keep=1)
            past = out.past_key_values
            logits = out.logits[:, -1, :].float()
            before = torch.softmax(logits / (temperature or 1.0), -1)[0].cpu()
            if mask is not None:
                mask.fill(bitmask)
                allowed = mask.allowed_count(bitmask)
                masked = logits.clone()
                mask.apply(masked, bitmask)
            else:
                allowed, masked = width, logits
            after = torch.softmax(masked / (temperature or 1.0), -1)[0].cpu()
            if temperature > 0:
                tok = int(torch.multinomial(after, 1, generator=gen))
            else:
                tok = int(masked[0].argmax())
            removed = float(1.0 - before[after > 0].sum()) if mask is not None else 0.0
            steps.append(Step(i, allowed, _top(tokenizer, before, before, after, top_k),
                              _top(tokenizer, after, before, after, top_k),
                              max(removed, 0.0), tok, token_text(tokenizer, tok), float(before[tok]),
                              float(after[tok])))
            out_ids.append(tok)
            if mask is not None:
                if not mask.accept(tok):
                    raise RuntimeError(f"matcher refused token {tok} it had allowed (step {i})")
                if mask.is_terminated():
                    terminated = True
                    break
            elif tok in stops:
                terminated = True
                break
            ids = torch.tensor([[tok]], device=dev)
    secs = time.perf_counter() - t0
    return StepTrace(len(prompt_ids), out_ids, steps, _decode_text(tokenizer, out_ids, stops), terminated,
                     temperature, seed, width, grammar is not None, secs)


# ---------------------------------------------------------------- decoding: xgrammar's transformers integration
@dataclass
class Generation:
    ids: list  # generated ids (stop token included when produced)
    text: str
    terminated: bool  # constrained: a fresh matcher replaying ``ids`` ends terminated; else a stop token came
    seconds: float
    constrained: bool

    @property
    def tokens_per_s(self) -> float:
        return len(self.ids) / self.seconds if self.seconds else float("nan")


def generation_kwargs(tokenizer, max_new_tokens: int, temperature: float, stops) -> dict:
    """Explicit settings, so a model folder's own generation_config (Qwen ships top_k=20, top_p=0.8,
    repetition_penalty=1.05) cannot silently change what "greedy" or "temperature T" means here."""
    kw = dict(max_new_tokens=max_new_tokens, eos_token_id=list(stops), pad_token_id=tokenizer.pad_token_id,
              repetition_penalty=1.0, min_new_tokens=0)
    if temperature > 0:  # top_k=0 / top_p=1.0: sample from the whole (masked) distribution
        kw.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
    else:
        kw.update(do_sample=False)
    return kw


def generate(model, tokenizer, prompt_ids, grammar: Grammar | None = None, max_new_tokens: int = 48,
             temperature: float = 0.0, seed: int = 0) -> Generation:
    """``model.generate`` with xgrammar's own LogitsProcessor (a fresh one per call: it cannot be reset)."""
    import torch

    stops = list(grammar.stop_token_ids if grammar else _stop_ids(tokenizer))
    procs = []
    if grammar is not None:
        from xgrammar.contrib.hf import LogitsProcessor

        procs = [LogitsProcessor(grammar.compiled)]
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)], device=dev)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=procs,
                             **generation_kwargs(tokenizer, max_new_tokens, temperature, stops))
    secs = time.perf_counter() - t0
    new = [int(t) for t in out[0, ids.shape[1]:]]
    if grammar is not None:
        # The processor is not called after the stop token, so its matcher never sees it: replay instead.
        ok, terminated = replay(grammar, new)
        terminated = ok and terminated
    else:
        terminated = bool(new) and new[-1] in stops
    return Generation(new, _decode_text(tokenizer, new, set(stops)), terminated, secs, grammar is not None)


def sample(model, tokenizer, prompt_ids, grammar: Grammar | None, n: int, temperature: float = 1.0,
           seed: int = 0, max_new_tokens: int = 48) -> list[Generation]:
    """``n`` samples in one batched ``model.generate`` (one matcher per row inside xgrammar's processor)."""
    import torch

    stops = list(grammar.stop_token_ids if grammar else _stop_ids(tokenizer))
    procs = []
    if grammar is not None:
        from xgrammar.contrib.hf import LogitsProcessor

        procs = [LogitsProcessor(grammar.compiled)]
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)] * n, device=dev)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=procs,
                             **generation_kwargs(tokenizer, max_new_tokens, temperature, stops))
    secs = time.perf_counter() - t0
    gens = []
    for row in out[:, ids.shape[1]:].tolist():
        cut = next((k + 1 for k, t in enumerate(row) if t in stops), len(row))  # drop the padding after a stop
        new = row[:cut]
        if grammar is not None:
            ok, term = replay(grammar, new)
            term = ok and term
        else:
            term = bool(new) and new[-1] in stops
        gens.append(Generation(new, _decode_text(tokenizer, new, set(stops)), term, secs / n, grammar is not None))
    return gens


@dataclass
class Score:
    """One whole output, teacher-forced: its log-probability under the model and under step-wise masking."""

    logp_model: float
    logp_masked: float  # -inf if the grammar refused a token
    accepted: bool  # every token accepted by the grammar
    terminated: bool  # ... and the grammar ended exactly there


def score(model, tokenizer, prompt_ids, grammar: Grammar, text: str) -> Score:
    """Score ``text`` (plus the stop token) in one forward: how likely is it with and without the mask?"""
    import torch

    ids = tokenizer.encode(text, add_special_tokens=False) + [grammar.stop_token_ids[0]]
    dev = next(model.parameters()).device
    with torch.no_grad():
        # Only the rows that predict ``ids`` (the last len(ids)+1 positions, minus the very last).
        out = model(torch.tensor([list(prompt_ids) + ids], device=dev), logits_to_keep=len(ids) + 1)
        logits = out.logits[0, :-1].float()
    m = GrammarMask(grammar)
    bm = m.allocate()
    lp_model = lp_masked = 0.0
    for row, tid in zip(logits, ids):
        lp_model += float(torch.log_softmax(row, -1)[tid])
        m.fill(bm)
        masked = row.clone().unsqueeze(0)
        m.apply(masked, bm)
        lp_masked += float(torch.log_softmax(masked[0], -1)[tid])
        if not m.accept(tid):
            return Score(lp_model, float("-inf"), False, False)
    return Score(lp_model, lp_masked, True, m.is_terminated())


# ---------------------------------------------------------------- distortion: exact, on an enumerable grammar
@dataclass
class Distortion:
    """Per valid output: its probability under the model (renormalised over all valid outputs) vs under
    step-wise masking + renormalisation. ``valid_mass``: how much of the model's own probability the valid
    outputs hold; ``pruned``: masked-decoding probability on paths cut off as negligible (``eps``)."""

    rows: list  # [(text, p_model, p_masked, n_token_paths)], sorted by p_model
    valid_mass: float
    pruned: float
    nodes: int  # model forwards spent
    greedy: str  # what greedy constrained decoding outputs
    paths: list = field(default_factory=list)  # [(token ids, P model (not renormalised), P masked)] per leaf

    @property
    def argmax_model(self) -> str:
        return max(self.rows, key=lambda r: r[1])[0]

    @property
    def argmax_masked(self) -> str:
        return max(self.rows, key=lambda r: r[2])[0]

    @property
    def changed(self) -> bool:
        return self.argmax_model != self.argmax_masked

    def table(self) -> str:
        lines = [f"{'output':<28} {'P model (renorm.)':>18} {'P masked':>10} {'paths':>6}"]
        lines += [f"{t!r:<28} {pm:>18.4f} {pk:>10.4f} {n:>6}" for t, pm, pk, n in self.rows]
        return "\n".join(lines)


def distortion(model, tokenizer, prompt_ids, grammar: Grammar, eps: float = 1e-4, max_nodes: int = 400,
               max_depth: int = 24) -> Distortion:
    """Walk every token path the grammar allows (all tokenisations of every valid output), one forward per
    tree node with the KV cache cropped back on the way up, and sum path probabilities per output text.

    A path is followed while either its model probability (relative to the best complete output found so far)
    or its masked probability is above ``eps``, likeliest child first, for at most ``max_nodes`` forwards; the
    masked probability of what is cut is reported in ``pruned``, so "exact" means exact up to that number.
    """
    import torch

    stops = set(grammar.stop_token_ids)
    dev = next(model.parameters()).device
    root = GrammarMask(grammar)
    bitmask = root.allocate()
    leaves: list[tuple[list, float, float]] = []  # (ids, log p_model, p_masked)
    state = {"nodes": 0, "pruned": 0.0}
    with torch.no_grad():
        ids = torch.tensor([list(prompt_ids)], device=dev)
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        cache, n0 = out.past_key_values, len(prompt_ids)

        def visit(matcher, path, logits, logp, pmask):
            state["nodes"] += 1
            logprobs = torch.log_softmax(logits.float(), -1)
            matcher.fill_next_token_bitmask(bitmask, 0)
            allowed = np.flatnonzero(allowed_mask(bitmask, grammar.vocab_width))
            lp_allowed = logprobs[torch.as_tensor(allowed, device=logprobs.device)].cpu().double()
            z = torch.logsumexp(lp_allowed, 0)
            order = torch.argsort(lp_allowed, descending=True).tolist()  # likeliest first: a node cap cuts the tail
            for tok, lp in ((int(allowed[k]), float(lp_allowed[k])) for k in order):
                child_logp, child_pmask = logp + lp, pmask * float(np.exp(lp - float(z)))
                if tok in stops:
                    leaves.append((path, child_logp, child_pmask))
                    continue
                best = max((l[1] for l in leaves), default=child_logp)
                negligible = child_pmask < eps and child_logp - max(best, child_logp) < np.log(eps)
                if negligible or len(path) >= max_depth or state["nodes"] >= max_nodes:
                    state["pruned"] += child_pmask
                    continue
                child = matcher.fork()
                child.accept_token(tok)
                length = n0 + len(path)
                step = model(input_ids=torch.tensor([[tok]], device=dev), cache=cache, use_cache=True,
                             logits_to_keep=1)
                visit(child, path + [tok], step.logits[0, -1], child_logp, child_pmask)
                cache.crop(-(cache.get_seq_length() - length))  # back to this node's prefix for the next sibling

        visit(root.matcher, [], out.logits[0, -1], 0.0, 1.0)
    if not leaves:
        raise ValueError("no complete output found: is the grammar finite and small (an enum)?")
    texts: dict[str, list] = {}
    for path, lp, pm in leaves:
        t = tokenizer.decode(path)
        agg = texts.setdefault(t, [0.0, 0.0, 0])
        agg[0] += float(np.exp(lp))
        agg[1] += pm
        agg[2] += 1
    valid = sum(a[0] for a in texts.values())
    rows = sorted(((t, a[0] / valid, a[1], a[2]) for t, a in texts.items()), key=lambda r: -r[1])
    greedy = trace(model, tokenizer, prompt_ids, grammar, max_new_tokens=max_depth + 1).text
    paths = [(p, float(np.exp(lp)), pm) for p, lp, pm in leaves]
    return Distortion(rows, valid, state["pruned"], state["nodes"], greedy, paths)


# ---------------------------------------------------------------- command line
def cli(argv: list[str]) -> int:
    """``python -m toolkit constrain --schema FILE --samples N --temperature T [--json] [--model NAME]``."""
    ap = argparse.ArgumentParser(prog="python -m toolkit constrain",
                                 description="Sample outputs under a JSON-Schema grammar (xgrammar) and validate them.")
    ap.add_argument("--schema", required=True, help="JSON Schema file")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="Give one example.", help="the user message")
    ap.add_argument("--model", default="auto", help="auto | stand-in | qwen2.5-coder-0.5b | folder (default auto)")
    ap.add_argument("--unconstrained", action="store_true", help="sample without the grammar, for comparison")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    ap.add_argument("--allow-unenforced", action="store_true",
                    help="sample even if the schema uses keywords xgrammar does not enforce (printed as warnings)")
    a = ap.parse_args(argv)
    try:  # every check a schema can fail runs here, before a model loads
        schema = read_schema_file(a.schema)
        warnings = precheck(schema, a.allow_unenforced)
    except SchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for w in warnings:
        print(f"warning: not enforced by the grammar: {w}", file=sys.stderr)
    from . import models

    loaded = models.load(a.model, quiet=True)
    notes = list(loaded.notes) + [f"not enforced by the grammar: {w}" for w in warnings]
    if not loaded.semantic:
        # A random-weight model rarely closes a string by itself: bound them so every sample terminates.
        schema, notes = bounded(schema), notes + ["stand-in: strings bounded with maxLength (see constrain.bounded)"]
    try:
        grammar = compile_schema(schema, loaded.tokenizer, models.vocab_width(loaded.model))
    except SchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    system = "Reply with only a JSON object that matches this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False)
    prompt = chat_prompt(loaded.tokenizer, a.prompt, system=system)
    gens = sample(loaded.model, loaded.tokenizer, prompt, None if a.unconstrained else grammar, a.samples,
                  a.temperature, a.seed, a.max_new_tokens)
    checks = [check(g.text, schema) for g in gens]
    n_valid = sum(c.valid for c in checks)
    if a.json:
        print(json.dumps({"model": loaded.description, "semantic": loaded.semantic, "notes": notes,
                          "constrained": not a.unconstrained, "temperature": a.temperature, "seed": a.seed,
                          "valid": n_valid, "samples": [
                              {"text": g.text, "parses": c.parses, "valid": c.valid, "error": c.error,
                               "terminated": g.terminated, "tokens": len(g.ids)} for g, c in zip(gens, checks)]},
                         ensure_ascii=False, indent=1))
    else:
        print(f"model: {loaded.description}")
        for n in notes:
            print(f"note: {n}")
        for i, (g, c) in enumerate(zip(gens, checks)):
            print(f"[{i}] {'valid' if c.valid else 'INVALID (' + c.error + ')'}: {g.text}")
        print(f"{n_valid}/{len(gens)} valid ({'constrained' if not a.unconstrained else 'unconstrained'}, "
              f"T={a.temperature})")
    return 0
