"""The call formats xgrammar 0.2.9 has no built-in structural tag for (Mistral's ``[TOOL_CALLS]`` JSON list, Llama
3.2's pythonic ``[f(a=1)]`` list), built by the kit from xgrammar's generic structural-tag pieces, masked on that
family's own vocabulary, and the family's official call walked through the mask (issue #39; the built-ins are
``toolkit.grammar.family_tags``).

What it does
- :func:`family_grammar`: the structural tag for ``family`` over the kit's tools (``toolkit.schema.openai_schema``):
  Mistral (``mistral-v3``, ``mistral-v3-tekken``, ``mistral-v7``): the ``[TOOL_CALLS]`` special token (one id, not
  its letters), then (SentencePiece versions only: the space their ``▁[`` carries) a JSON array of one or more
  ``{"name": NAME, "arguments": {...}, "id": "..."}`` objects, ``arguments`` under that tool's parameters schema,
  ``id`` 9 letters or digits (mistral-common's ``^[a-zA-Z0-9]{9}$``); Llama 3.2: ``<|python_tag|>`` (optional:
  llama-models writes it before every assistant tool call; its ``llama3_2/text_prompt_format.md`` shows the model
  answering with the bare list, single-quoted, then ``<|eot_id|>``), then an EBNF ``[name(arg=value, ...), ...]``
  whose values follow each parameter's type: strings in double or single quotes with backslash escapes, a string
  ``enum`` as its quoted values, integers, numbers, ``True``/``False``, ``None`` for a ``null`` type, and a generic
  Python literal (nested lists / dicts of these) for arrays and objects.
- :func:`vocabulary`: Mistral's vocabularies offline from the ``mistral-common`` wheel (Tekken's json; v3 / v7's
  SentencePiece ``tokenizer.model``, ``▁`` read as a space and ``<0xNN>`` as that byte; special tokens as their
  text), Llama 3.2's is Llama 3's (``family_tags.vocabulary("llama3.1")``).
- :func:`masked_step`: compiles the grammar on that vocabulary and runs ``family_tags.walk`` on the family's
  official call: ``toolkit.families.render_family``'s own ids for the call (the package's tokens), stop token left
  out; or on ``call`` (text; Mistral: a leading ``[TOOL_CALLS]`` becomes its id, the rest the tokenizer's pieces).

What it leaves out
- Llama 3.2: which arguments are required, repeated arguments, ``maxLength`` / ``minimum`` and other bounds, string
  escapes other than a backslash before one of ``\\ " ' n r t 0``, arrays / objects typed beyond "a Python
  literal", spaces other than one after a comma. Mistral: ``id`` may be left out (models trained on v3 often write
  calls without one); plain text before ``[TOOL_CALLS]`` (``tool_choice`` "required").
- Families xgrammar does build (``family_tags``) and the kit's own Qwen grammars (``toolkit.grammar.compile``).
"""

from __future__ import annotations

import json
import re

import xgrammar as xgr

from toolkit.families import FamilyUnavailable, render_family
from toolkit.grammar import family_tags
from toolkit.grammar.family_tags import MaskedStep, Vocabulary, raw_vocabulary, walk
from toolkit.schema import openai_schema
from toolkit.tools import TOOLS

MISTRAL = ("mistral-v3", "mistral-v3-tekken", "mistral-v7")
FAMILIES = (*MISTRAL, "llama3.2")
MISTRAL_ID_PATTERN = "[a-zA-Z0-9]{9}"  # mistral-common's _TOOL_CALL_ID_REGEX, ^...$ (xgrammar matches it whole)
MODEL = {f: "kit: [TOOL_CALLS] + JSON list (xgrammar structural tag)" for f in MISTRAL}
MODEL["llama3.2"] = "kit: <|python_tag|>? + pythonic list (EBNF)"


def _specs(tools):
    tools = [TOOLS["get_weather"]] if tools is None else tools
    return [openai_schema(t)["function"] for t in tools]


def _mistral_array(specs) -> dict:
    items = [
        {
            "type": "object",
            "properties": {
                "name": {"const": s["name"]},
                "arguments": s.get("parameters") or {"type": "object"},
                "id": {"type": "string", "pattern": MISTRAL_ID_PATTERN},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for s in specs
    ]
    return {"type": "array", "items": items[0] if len(items) == 1 else {"anyOf": items}, "minItems": 1}


_STRING = r'"\"" ([^"\\\r\n] | "\\" [\\"nrt0\'])* "\"" | "\'" ([^\'\\\r\n] | "\\" [\\"nrt0\'])* "\'"'
_PY = r"""
py_str ::= STRING
py_int ::= "-"? [0-9]+
py_num ::= "-"? [0-9]+ ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
py_bool ::= "True" | "False"
py_val ::= py_str | py_num | py_bool | "None" | py_list | py_dict
py_list ::= "[" (py_val ("," " "? py_val)*)? "]"
py_dict ::= "{" (py_str ":" " "? py_val ("," " "? py_str ":" " "? py_val)*)? "}"
""".replace("STRING", _STRING)


def _py_value(schema: dict) -> str:
    """The EBNF for one parameter's value, by its schema's type (see the module docstring)."""
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return "(" + " | ".join(json.dumps(q + v + q) for v in schema["enum"] for q in "\"'") + ")"
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    alts = {"string": "py_str", "integer": "py_int", "number": "py_num", "boolean": "py_bool", "null": '"None"'}
    picked = [alts[t] for t in types if t in alts]
    if not picked or set(types) - set(alts):
        return "py_val"
    return "(" + " | ".join(picked) + ")"


def _rule(name: str) -> str:
    return "t_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def pythonic_ebnf(specs) -> str:
    """EBNF for Llama 3.2's ``[name(arg=value, ...), ...]`` over ``specs`` (OpenAI function dicts)."""
    lines = ['root ::= "[" call ("," " "? call)* "]"', "call ::= " + " | ".join(_rule(s["name"]) for s in specs)]
    for s in specs:
        r, props = _rule(s["name"]), (s.get("parameters") or {}).get("properties", {})
        args = [f"{json.dumps(k + '=')} {_py_value(v)}" for k, v in props.items()]
        if args:
            lines.append(f"{r}_arg ::= " + " | ".join(args))
            lines.append(f'{r} ::= {json.dumps(s["name"] + "(")} ({r}_arg ("," " "? {r}_arg)*)? ")"')
        else:
            lines.append(f"{r} ::= {json.dumps(s['name'] + '()')}")
    return "\n".join(lines) + _PY


def family_grammar(family: str, tools=None) -> dict:
    """The structural tag (a dict ``xgrammar.GrammarCompiler.compile_structural_tag`` takes) for ``family``'s call
    format over ``tools`` (default: the kit's weather tool)."""
    specs = _specs(tools)
    if family in MISTRAL:
        parts = [{"type": "token", "token": "[TOOL_CALLS]"}]
        if family != "mistral-v3-tekken":  # SentencePiece writes the JSON with its leading ▁: " [{...}]"
            parts.append({"type": "const_string", "value": " "})
        parts.append({"type": "json_schema", "json_schema": _mistral_array(specs)})
    elif family == "llama3.2":
        tag = {"type": "optional", "content": {"type": "token", "token": "<|python_tag|>"}}
        parts = [tag, {"type": "grammar", "grammar": pythonic_ebnf(specs)}]
    else:
        raise family_tags.NoBuiltinTag(f"the kit builds no grammar for family {family!r} here (see family_tags)")
    return {"type": "structural_tag", "format": {"type": "sequence", "elements": parts}}


def _mistral_tokenizer(family: str):
    try:
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer  # optional package
    except ImportError as e:
        raise FamilyUnavailable(f"mistral-common is not installed: {e}") from e
    if family == "mistral-v3-tekken":
        return MistralTokenizer.v3(is_tekken=True).instruct_tokenizer.tokenizer
    try:
        import sentencepiece  # noqa: F401  optional package
    except ImportError as e:
        raise FamilyUnavailable(f"sentencepiece is not installed ({family} is a SentencePiece vocabulary): {e}") from e
    return (MistralTokenizer.v7() if family == "mistral-v7" else MistralTokenizer.v3()).instruct_tokenizer.tokenizer


def _spm_bytes(piece: str, special: bool) -> bytes:
    if special:
        return piece.encode()
    if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", piece):
        return bytes([int(piece[3:5], 16)])
    return piece.replace("▁", " ").encode()


def vocabulary(family: str) -> Vocabulary:
    """The family's vocabulary offline (see the module docstring); raises ``FamilyUnavailable`` when its package is
    missing."""
    if family == "llama3.2":
        v = family_tags.vocabulary("llama3.1")
        v.family = family
        return v
    if family not in MISTRAL:
        raise family_tags.NoBuiltinTag(f"no vocabulary for family {family!r} here")
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy  # optional package

    tok = _mistral_tokenizer(family)
    n = tok.n_words
    if family == "mistral-v3-tekken":
        tokens = [tok.id_to_byte_piece(i, SpecialTokenPolicy.KEEP) for i in range(n)]
        source = f"mistral-common's Tekken json ({tok.file_path.name})"
    else:
        tokens = [_spm_bytes(tok.id_to_piece(i), bool(tok.is_special(i))) for i in range(n)]
        source = f"mistral-common's SentencePiece model ({tok.file_path.name})"
    tools_call = tok.get_special_token("[TOOL_CALLS]")

    def encode(text: str) -> list[int]:
        head = text.startswith("[TOOL_CALLS]")
        rest = text.removeprefix("[TOOL_CALLS]").replace("▁", " ")
        ids = tok.encode(rest.removeprefix(" ") if head and family != "mistral-v3-tekken" else rest, False, False)
        return [tools_call, *ids] if head else ids

    return raw_vocabulary(family, tokens, [tok.eos_id], encode, source)


def official_call(family: str) -> tuple[str, list[int]]:
    """The family's official call as its package writes it (text and ids), stop token left out."""
    r = render_family(family)
    rows = r.call_tokens()
    assert rows and rows[-1]["token"] == r.stop, (family, rows[-1:])
    return r.call.removesuffix(r.stop), [row["id"] for row in rows[:-1]]


def masked_step(family: str, tools=None, examples: int = 5, call: str | None = None) -> MaskedStep:
    """The kit's grammar for ``family`` compiled on its vocabulary, one masked step, and its official call (or
    ``call``, text) walked through the mask (see the module docstring)."""
    vocab = vocabulary(family)
    compiled = xgr.GrammarCompiler(vocab.info).compile_structural_tag(family_grammar(family, tools))
    if call is None:
        call, ids = official_call(family)
    else:
        ids = list(vocab.encode(call))
    return walk(compiled, vocab, call, ids, MODEL[family], examples)
