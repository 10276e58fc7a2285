"""BFCL's prompt style under a grammar (a lever of issue #15): the answer ``[f(a=1), g(b="x")]`` constrained to
calls of the case's functions, each keyword argument a Python literal of its parameter's type, or a short text.

What it does
- ``python_calls_ebnf(tools)``: the EBNF (xgrammar's dialect) of 1..``max_calls`` such calls in a list.
- ``python_calls_grammar(tools, tokenizer)``: that list *or* a short text free of the structured starts (as the
  constrained mode's text branch in :func:`toolkit.eval.bfcl.constrained_grammar`), compiled through the kit's one
  ``compile_grammar``. ``toolkit.eval.run.run_cases`` with ``Levers(mode="prompt", python_calls=True)`` decodes under it and
  gates the first token onto ``[``; ``toolkit.eval.read.decode_python`` reads the result (never evaluated).

What it leaves out
- Escapes in strings (a value with a quote or backslash cannot be written), single-quoted strings, positional
  arguments, and which parameters appear how often: BFCL's scorer judges missing and repeated ones, as it does
  for the free prompt mode.
"""

from __future__ import annotations

import json

from toolkit.eval.bfcl import DECLINE_MAX_TOKENS, STRUCTURED_STARTS
from toolkit.grammar.compile import compile_grammar

_PY_BASE = r"""
py_str ::= "\"" [^"\\\n]* "\""
py_int ::= "-"? [0-9]+
py_num ::= "-"? [0-9]+ ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
py_bool ::= "True" | "False"
py_any ::= py_str | py_num | py_bool | "None" | py_list | py_dict
py_list ::= "[" (py_any (", " py_any)*)? "]"
py_dict ::= "{" (py_str ": " py_any (", " py_str ": " py_any)*)? "}"
"""


def _ebnf_lit(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _py_value(schema: dict, rules: list, name: str) -> str:
    """The EBNF rule (added to ``rules``) for one Python literal that fits ``schema`` (BFCL's converted types)."""
    if not isinstance(schema, dict):
        return "py_any"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        alts = [
            _ebnf_lit(json.dumps(v)) if isinstance(v, str) else _ebnf_lit(repr(v))
            for v in schema["enum"]
            if isinstance(v, (str, int, float, bool))
        ]
        if alts:
            rules.append(f"{name} ::= " + " | ".join(alts))
            return name
    t = schema.get("type")
    if t == "string":
        return "py_str"
    if t == "integer":
        return "py_int"
    if t == "number":
        return "py_num"
    if t == "boolean":
        return "py_bool"
    if t == "array":
        item = _py_value(schema.get("items") or {}, rules, name + "_i")
        rules.append(f'{name} ::= "[" ({item} (", " {item})*)? "]"')
        return name
    if t == "object":
        return "py_dict"
    return "py_any"


def python_calls_ebnf(tools: list[dict], max_calls: int = 4) -> str:
    """EBNF for BFCL's prompt-style answer ``[f(a=1), g(b="x")]``: 1..``max_calls`` calls to the given tools,
    keyword arguments named by each tool's parameters, each value a Python literal of the parameter's type
    (strings double-quoted, no escapes; ``True``/``False``). Which parameters appear, and how often, is left to
    the model: BFCL's scorer judges missing or repeated ones, as it does in the free prompt mode."""
    rules, calls = [], []
    for i, tool in enumerate(tools):
        fn = tool.get("function", tool)
        props = (fn.get("parameters") or {}).get("properties") or {}
        args = [
            _ebnf_lit(f"{p}=") + " " + _py_value(sch, rules, f"v{i}_{j}") for j, (p, sch) in enumerate(props.items())
        ]
        if args:
            rules.append(f"a{i} ::= " + " | ".join(args))
            rules.append(f'c{i} ::= {_ebnf_lit(fn["name"] + "(")} (a{i} (", " a{i})*)? ")"')
        else:
            rules.append(f"c{i} ::= {_ebnf_lit(fn['name'] + '()')}")
        calls.append(f"c{i}")
    head = [f'root ::= "[" call (", " call){{0,{max_calls - 1}}} "]"', "call ::= " + " | ".join(calls)]
    return "\n".join(head + rules) + _PY_BASE


def python_calls_grammar(tools: list[dict], tokenizer, vocab_width: int | None = None, max_calls: int = 4):
    """BFCL's prompt style under a grammar: either :func:`python_calls_ebnf`'s call list, or a short text answer
    free of :data:`STRUCTURED_STARTS` (as :func:`constrained_grammar`'s text branch). Raises
    :class:`toolkit.grammar.compile.SchemaError` when xgrammar rejects it (counted by the caller, never a crash)."""
    text = {"type": "any_text", "excludes": list(STRUCTURED_STARTS), "max_tokens": DECLINE_MAX_TOKENS}
    calls = {"type": "grammar", "grammar": python_calls_ebnf(tools, max_calls)}
    structural = {"type": "structural_tag", "format": {"type": "or", "elements": [calls, text]}}
    return compile_grammar(tokenizer, vocab_width, "python_calls_or_text", {}, "the Python call list", structural)
