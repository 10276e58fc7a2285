"""A tool call against the decoding budget: how many new tokens one call can take, and schemas bounded to fit.

What it does
- :func:`worst_call_tokens` bounds the new tokens of one ``<tool_call>…</tool_call>`` of a tool, as
  ``compile_tools`` writes it (compact JSON), under any byte-level BPE such as Qwen's: every token carries at
  least one byte, and the two tags are one token each, so the bound is the call's longest text in bytes. A string
  with ``maxLength`` n costs at most 4n bytes (xgrammar writes a length-bounded string without escapes, so a
  character is at most 4 UTF-8 bytes; the tests check this) — or n times the widest character of a simple
  ``^[...]{0,n}$`` pattern (with a pattern xgrammar ignores ``maxLength``). It is None when a part has no bound
  (a string without ``maxLength``, another pattern, a number: JSON's number grammar has no length limit).
- :func:`call_allowance` is what the host loop uses: the tools fitted to its ``max_new_tokens`` and the most tokens
  one call can then take; a turn decoded under a call grammar gets ``max_calls`` times that (capped by the
  conversation's token budget and the model's context window), so the calls a turn may run always finish.
- :func:`fit` lowers the strings' ``maxLength`` (or a class pattern's ``{0,n}``) so that the bound is within ``max_new_tokens``; the budget left
  after the call's fixed text is shared among the strings water-filling (each keeps its own bound when that is
  under an equal share; the longer ones split the rest).
  ``compile_tool_choice(..., max_new_tokens=N)`` applies it to every tool before compiling (a ValueError
  here, a ``SchemaError`` there, when even the call's fixed text does not fit).
- ``toolkit.grammar.mask.longest_call`` drives a compiled grammar the way the slowest decoder would — always the allowed token
  with the fewest bytes (the first byte of a 4-byte character before all), an escape whenever one may start, never a
  closing quote while anything else is allowed — and counts the tokens until ``</tool_call>``: the measured
  counterpart of the bound, on a real tokenizer.

What it leaves out
- Numbers (their digits are unbounded in JSON; the walk stops at the budget and says so), arrays and nested
  objects (:func:`worst_call_tokens` returns None for them), and ``any_whitespace`` grammars.
"""

from __future__ import annotations

import copy
import json
import re

from toolkit.schema import function_of

UTF8_MAX = 4  # the most bytes of one character in a length-bounded string (no escapes there)
_CLASS = re.compile(r"^\^\[((?:[^\]\\]|\\.)+)\](?:\*|\{0,(\d+)\})\$$")


def _char_bytes(prop: dict) -> int:
    """The most bytes one character of this string can take in the call's JSON text."""
    m = _CLASS.match(prop.get("pattern", "")) if isinstance(prop.get("pattern"), str) else None
    if not m or "\\" in m.group(1).replace("\\-", "") or '"' in m.group(1):
        return UTF8_MAX
    return max(len(c.encode("utf-8")) for c in m.group(1).replace("\\-", "-"))


def _max_len(prop: dict) -> int | None:
    """The most characters the grammar lets this string hold. With a ``pattern`` xgrammar ignores ``maxLength``
    (it warns "pattern combined with minLength/maxLength is not supported"), so only the pattern's ``{0,n}`` counts."""
    if "pattern" in prop:
        m = _CLASS.match(prop["pattern"]) if isinstance(prop["pattern"], str) else None
        return int(m.group(2)) if m and m.group(2) else None
    return prop.get("maxLength")


def _set_len(prop: dict, n: int) -> None:
    """Bound a string to ``n`` characters the way xgrammar honours: ``maxLength``, or in a simple class pattern."""
    if "pattern" not in prop:
        prop["maxLength"] = n
        return
    m = _CLASS.match(prop["pattern"]) if isinstance(prop["pattern"], str) else None
    if m:  # any other pattern cannot be bounded here: the call stays unbounded (worst_call_tokens says None)
        prop["pattern"] = f"^[{m.group(1)}]{{0,{n}}}$"


def _value_bytes(prop: dict, number_bytes: int | None = None) -> int | None:
    if "enum" in prop:
        return max(len(json.dumps(v, ensure_ascii=False).encode("utf-8")) for v in prop["enum"])
    if "const" in prop:
        return len(json.dumps(prop["const"], ensure_ascii=False).encode("utf-8"))
    t = prop.get("type")
    if t == "string":
        n = _max_len(prop)
        return None if n is None else 2 + n * _char_bytes(prop)
    if t == "boolean":
        return 5
    if t == "integer" and "minimum" in prop and "maximum" in prop:
        return max(len(str(int(prop["minimum"]))), len(str(int(prop["maximum"]))))
    if t in ("number", "integer") and number_bytes is not None:
        return number_bytes
    return None  # numbers, unbounded integers, arrays, objects


def worst_call_tokens(tool, number_bytes: int | None = None) -> int | None:
    """Upper bound on the new tokens of one call of ``tool`` (OpenAI-style or bare schema); None if unbounded.
    ``number_bytes``: count each number (and unbounded integer) as that many characters instead of unbounded."""
    fn = function_of(tool)
    props = (fn.get("parameters") or {}).get("properties") or {}
    # '\n{"name": "X", "arguments": {' + '"k": v, ' per parameter + '}}\n', as compile_tools' compact JSON
    fixed = len(f'\n{{"name": {json.dumps(fn["name"], ensure_ascii=False)}, "arguments": {{}}}}\n'.encode())
    total = 2 + fixed + max(0, 2 * (len(props) - 1))  # the two tags; ", " between arguments
    for key, prop in props.items():
        v = _value_bytes(prop, number_bytes) if isinstance(prop, dict) else None
        if v is None:
            return None
        total += len(json.dumps(key, ensure_ascii=False).encode()) + 2 + v  # '"key": '
    return total


CALL_FLOOR = 160  # call_allowance never narrows a string below what a call of this many tokens holds
NUMBER_BYTES = 24  # a number's allowance in call_allowance: a float's 17 significant digits, sign, point, exponent


def call_allowance(tools, max_new_tokens: int) -> tuple[list, int | None]:
    """The tools as one call turn's grammar takes them, and the most new tokens one call of any of them can take.

    Each tool is :func:`fit` to ``max_new_tokens`` (at least :data:`CALL_FLOOR`: a 40-token turn gets room for its
    calls, its calculator expressions are not cut to five characters) where its call's fixed text leaves room; one
    whose fixed text alone needs more (a 48-token turn and a tool with a long name and two strings) is fit to the
    least doubling of it that does, and the allowance grows to that. A number counts :data:`NUMBER_BYTES` characters (JSON's number
    grammar has no length limit: the one part of a call this cannot bound). None when a tool has arrays or nested
    objects (:func:`worst_call_tokens` bounds neither)."""
    out, worst = [], 0
    for t in tools:
        budget = max(max_new_tokens, CALL_FLOOR)  # a short text budget raises the call budget, not cut the strings
        while budget < 1 << 20:
            try:
                t = fit(t, budget)
                break
            except ValueError:  # its fixed text does not fit: the least doubling of the budget that does
                budget *= 2
        out.append(t)
        w = worst_call_tokens(t, number_bytes=NUMBER_BYTES)
        worst = None if w is None or worst is None else max(worst, w)
    return out, worst


def fit(tool, max_new_tokens: int):
    """A copy of ``tool`` whose strings are bounded so that one call fits in ``max_new_tokens`` new tokens."""
    out = copy.deepcopy(tool)
    fn = function_of(out)
    props = (fn.get("parameters") or {}).get("properties") or {}
    strings = {k: p for k, p in props.items() if isinstance(p, dict) and p.get("type") == "string" and "enum" not in p}
    for p in strings.values():
        if _max_len(p) is None:
            _set_len(p, max_new_tokens)  # a first bound, narrowed below
    worst = worst_call_tokens(out)
    if worst is None or worst <= max_new_tokens:
        return out
    widths = {k: _char_bytes(p) for k, p in strings.items()}
    fixed = worst - sum(_max_len(p) * widths[k] for k, p in strings.items())
    least = fixed + sum(widths.values())  # the call's own text and one character per string
    if max_new_tokens < least:
        raise ValueError(f"a call of {fn['name']!r} needs {fixed} tokens before its strings (one byte a token at "
                         f"worst); max_new_tokens={max_new_tokens} leaves no room for them: use at least {least}")  # fmt: skip
    # share the room left water-filling: a string that needs less than an equal share keeps its own bound, the
    # rest is split evenly among the longer ones (a proportional share left a 64-character title 1 character
    # beside a 4,000-character text)
    left, order = max_new_tokens - fixed, sorted(strings, key=lambda k: _max_len(strings[k]) * widths[k])
    for i, k in enumerate(order):
        share = min(_max_len(strings[k]) * widths[k], left // (len(order) - i))
        n = max(1, share // widths[k])
        _set_len(strings[k], n)
        left -= n * widths[k]
    while worst_call_tokens(out) > max_new_tokens:  # the floor of 1 can overshoot: trim the longest string
        longest = max(strings.values(), key=lambda p: _max_len(p) * _char_bytes(p))
        if _max_len(longest) <= 1:
            raise ValueError(f"a call of {fn['name']!r} cannot fit in max_new_tokens={max_new_tokens}")
        _set_len(longest, _max_len(longest) - 1)
    return out
