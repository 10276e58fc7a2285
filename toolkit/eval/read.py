"""Reading BFCL calls back out of a model's text, for each mode: never evaluated, never a crash.

What it does
- ``decode(text, mode, list_calls=False)`` returns a :class:`Decoded`: the calls as ``[{name: {arg: value}}]``
  (BFCL's shape), or why none could be read.
- ``decode_python``: BFCL's prompt style ``[f(a=1), g(b=2)]`` parsed with :mod:`ast`, literal values only (bare
  names become their text and ``+ - * /`` of two number literals is folded, as BFCL does; nothing is evaluated).
  An answer that does not start like a call (prose: "I cannot do that…") is read as no call (``prose``), not as
  malformed: nothing was attempted.
- ``decode_tagged``: ``<tool_call>`` blocks read by the kit's one parser (:func:`toolkit.parse.parse_tool_calls`);
  a JSON call written without the tags is flagged (``untagged_json``). ``split_lists``: a block holding a JSON
  list of calls becomes one block per call (the host side of the list lever).

What it leaves out
- Positional arguments in the prompt style (BFCL ignores them too); outputs over :data:`MAX_TEXT` characters.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from toolkit.parse import parse_tool_calls


@dataclass
class Decoded:
    calls: list = field(default_factory=list)  # [{name: {arg: value}}]
    error: str | None = None  # why the text could not be read as calls (None: read fine, maybe zero calls)
    untagged_json: bool = False  # native/constrained: a JSON call written without <tool_call> tags
    attempted: bool = False  # native/constrained: a <tool_call> block was opened (even if it did not parse)
    prose: bool = False  # prompt style: the answer is prose, no call attempted (read as zero calls, not malformed)

    @property
    def n(self) -> int:
        return len(self.calls)


class _Unsupported(ValueError):
    pass


_ARITH = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def _value(node):
    """A literal from a prompt-mode argument; bare names become their text (BFCL's rule); + - * / of two
    number literals is folded (BFCL evaluates them; we never call eval)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        a, b = _value(node.left), _value(node.right)
        if (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
            and abs(a) < 1e12
            and abs(b) < 1e12
        ):
            try:
                return _ARITH[type(node.op)](a, b)
            except ZeroDivisionError:
                raise _Unsupported("division by zero in an argument") from None
        raise _Unsupported("arithmetic on non-numbers in an argument")
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Call):
        return _call(node)  # a call as an argument value: BFCL keeps it as a nested {name: args}
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Unsupported(f"unsupported argument syntax {type(node).__name__}") from None


def _call(node: ast.Call) -> dict:
    parts, f = [], node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if not isinstance(f, ast.Name):
        raise _Unsupported("a call whose name is not a dotted identifier")
    parts.append(f.id)
    return {".".join(reversed(parts)): {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg}}


MAX_TEXT = 20_000
# an attempted call in the prompt style: a list, or a call with a keyword argument anywhere ("f(a=", "mod.f (x=")
_ATTEMPT = re.compile(r"^\s*\[|[A-Za-z_][\w.]*\s*\(\s*[A-Za-z_]\w*\s*=")


def decode_python(text: str) -> Decoded:
    """BFCL prompt-format text (``[f(a=1), g(b=2)]``, fences and one bare call allowed) → calls."""
    s = text.strip().strip("`\n ")
    s = s.removeprefix("python\n")
    s = s.strip().strip("'")
    if not _ATTEMPT.search(s[:MAX_TEXT]):
        return Decoded(prose=True)  # a sentence, not a broken call: no call (BFCL's own decoder fails on it)
    if not s.startswith("["):
        s = "[" + s
    if not s.endswith("]"):
        s += "]"
    if len(s) > MAX_TEXT:
        return Decoded(error="output too long")
    try:
        tree = ast.parse(s, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return Decoded(error=f"not a Python call list: {str(e)[:120]}")
    body = tree.body
    elts = [body] if isinstance(body, ast.Call) else getattr(body, "elts", None)
    if elts is None:
        return Decoded(error="not a list of calls")
    calls = []
    try:
        for e in elts:
            if not isinstance(e, ast.Call):
                return Decoded(error="the list holds something other than calls")
            calls.append(_call(e))
    except (_Unsupported, RecursionError) as e:
        return Decoded(error=str(e)[:160])
    return Decoded(calls)


_UNTAGGED = re.compile(r'\{\s*"name"\s*:\s*"[^"]+"\s*,\s*"(arguments|parameters)"\s*:', re.DOTALL)


def written_call(text: str) -> bool:
    """A JSON tool call written as plain text (``{"name": ..., "arguments": ...}`` without the tags, bare or in a
    fence): no host runs it, so anything it says a tool returned is the model's own."""
    return isinstance(text, str) and len(text) <= MAX_TEXT and bool(_UNTAGGED.search(text))


_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def split_lists(text: str) -> str:
    """Each ``<tool_call>`` block whose JSON is a list of objects becomes one block per object (the host side of
    the ``list_calls`` lever); every other block, and any text around them, is left as it was for the parser."""

    def one(m):
        body = m.group(1).strip()
        if not body.startswith("["):
            return m.group(0)
        try:
            items = json.loads(body)
        except ValueError:
            return m.group(0)  # the parser reports it as malformed
        if not items or not all(isinstance(i, dict) for i in items):
            return m.group(0)
        return "\n".join(f"<tool_call>\n{json.dumps(i, ensure_ascii=False)}\n</tool_call>" for i in items)

    return _BLOCK.sub(one, text) if len(text) <= MAX_TEXT else text


def decode_tagged(text: str, list_calls: bool = False) -> Decoded:
    """``<tool_call>`` blocks (the host's parser) → calls. A malformed block makes the whole output malformed.
    ``list_calls`` (the lever): a block holding a JSON list of calls counts as those calls (:func:`split_lists`)."""
    if not isinstance(text, str):
        return Decoded(error="output is not text")
    if list_calls:
        text = split_lists(text)
    content, calls = parse_tool_calls(text)
    bad = [c for c in calls if not c.ok]
    if bad:
        return Decoded(error=f"{bad[0].error['type']}: {bad[0].error['message'][:120]}", attempted=True)
    return Decoded([{c.name: c.arguments} for c in calls], untagged_json=not calls and written_call(content))


def decode(text: str, mode: str, list_calls: bool = False) -> Decoded:
    return decode_python(text) if mode == "prompt" else decode_tagged(text, list_calls)


def call_texts(doc) -> set[str]:
    """Every generated ``text`` holding a ``<tool_call>`` anywhere in a saved results document (dicts and lists
    walked; the stream replay and the streaming ledger check read real generations this way)."""
    found: set[str] = set()
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "text" and isinstance(v, str) and "<tool_call>" in v:
                    found.add(v)
                else:
                    stack.append(v)
        elif isinstance(x, list):
            stack.extend(x)
    return found
