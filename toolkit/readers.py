"""Each model family's tool calls read back from its text: the one parser's per-family readers.

What it does (book §14.5.2 step 4, for the families of ``toolkit.families``)
- ``read_calls(text, family)`` returns ``(free text, [ToolCall])`` like ``toolkit.parse.parse_tool_calls`` (which it
  uses for Qwen) and, like it, never raises: anything malformed becomes a :class:`toolkit.parse.ToolCall` with an
  ``error`` the model is shown. The formats:
  - **Mistral** (``mistral*``): after ``[TOOL_CALLS]``, a JSON list of ``{"name", "arguments"[, "id"]}`` (tokenizer
    v3/v7), or per call ``name[ARGS]{json}`` / ``name[CALL_ID]id[ARGS]{json}`` (v11 and later); up to ``</s>``.
  - **Llama 3.1** (``llama3.1``): an optional ``<|python_tag|>``, then a JSON object ``{"name", "parameters"}``
    (``"arguments"`` also read) or ``<function=NAME>{json}</function>``; up to ``<|eom_id|>`` / ``<|eot_id|>``. Text
    after ``<|python_tag|>`` that is no call is code for the built-in ``code_interpreter`` (as llama-models reads it).
  - **Llama 3.2** (``llama3.2``): a pythonic list ``[f(a=1), g(b="x")]``, read with :mod:`ast` (each value by
    ``ast.literal_eval``: never evaluated); positional arguments, calls on attributes or non-literal values are errors.
  - **gpt-oss** (``gpt-oss``): harmony messages; one whose header names ``to=functions.NAME`` (before or after
    ``<|channel|>commentary``) is a call whose body after ``<|message|>`` is JSON, closed by ``<|call|>``; the
    ``final`` channel's text is the free text; ``analysis`` is thinking and stays out of both.
- ``wrote_call(text, family)``: whether the text opens that family's call at all (the family's "tag rate").

What it leaves out
- Rendering (``toolkit.families``), streaming (``toolkit.familystream``, with ``toolkit.streamparse`` for Qwen), and the built-in tools
  of Llama (``brave_search.call(...)``) and harmony (``browser``, ``python``): read as calls by name, never run.
"""

from __future__ import annotations

import ast
import json
import re

from toolkit.parse import MAX_CALL_CHARS, ToolCall, parse_tool_calls

FAMILY_KINDS = ("qwen", "mistral", "llama3.1", "llama3.2", "gpt-oss")
OPENERS = {
    "qwen": ("<tool_call>",),
    "mistral": ("[TOOL_CALLS]",),
    "llama3.1": ("<|python_tag|>", '{"type": "function"', '{"name"', "<function="),
    "llama3.2": ("[",),
    "gpt-oss": ("to=functions.",),
}


def kind_of(family: str) -> str:
    """The reader a family name uses (``qwen3`` → ``qwen``, ``mistral-v7`` → ``mistral``)."""
    for prefix in ("qwen", "mistral"):
        if family.startswith(prefix):
            return prefix
    if family in FAMILY_KINDS:
        return family
    raise ValueError(f"no reader for family {family!r}; readers: {', '.join(FAMILY_KINDS)}")


def wrote_call(text: str | None, family: str) -> bool:
    """True when ``text`` opens a call in ``family``'s format (right or wrong)."""
    text, kind = (text or "").lstrip(), kind_of(family)
    if kind == "llama3.2":
        return text.startswith("<|python_tag|>[") or text.startswith("[")
    return any(o in text for o in OPENERS[kind])


def _error(call: ToolCall, kind: str, message: str) -> ToolCall:
    call.error = {"type": kind, "message": message[:200]}
    return call


def _object_call(i: int, raw: str, obj, keys=("arguments", "parameters")) -> ToolCall:
    call = ToolCall(i, raw, id=f"call_{i + 1}")
    if not isinstance(obj, dict):
        return _error(call, "bad_call", f"expected a JSON object, got {type(obj).__name__}")
    if not isinstance(obj.get("name"), str) or not obj["name"]:
        return _error(call, "bad_call", "the call needs a string 'name'")
    call.name = obj["name"]
    args = next((obj[k] for k in keys if k in obj), {})
    try:
        args = json.loads(args) if isinstance(args, str) else ({} if args is None else args)
    except (ValueError, RecursionError) as e:
        return _error(call, "malformed_json", f"arguments are not valid JSON: {e}")
    if not isinstance(args, dict):
        return _error(call, "bad_call", f"arguments must be a JSON object, got {type(args).__name__}")
    call.arguments = args
    if isinstance(obj.get("id"), str):
        call.id = obj["id"]
    return call


def _json(raw: str):
    """(value, None) or (None, error message); never raises."""
    if len(raw) > MAX_CALL_CHARS:
        return None, f"tool call longer than {MAX_CALL_CHARS} characters"
    try:
        return json.loads(raw), None
    except (ValueError, RecursionError) as e:
        return None, f"tool call is not valid JSON: {str(e)[:160]}"


def _cut(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """The text before the first stop token, and whether one was there."""
    hits = [text.index(s) for s in stops if s in text]
    return (text[: min(hits)], True) if hits else (text, False)


# ================================================================ Mistral
_V11 = re.compile(r"\s*([A-Za-z0-9_.\-]+)(?:\[CALL_ID\]([A-Za-z0-9]+))?\[ARGS\](.*)", re.S)


def _mistral(text: str) -> tuple[str, list[ToolCall]]:
    text, _ = _cut(text, ("</s>",))  # the turn ends at </s>: nothing after it is read
    if "[TOOL_CALLS]" not in text:
        return text.strip(), []
    head, _, body = text.partition("[TOOL_CALLS]")
    calls: list[ToolCall] = []
    pieces = body.split("[TOOL_CALLS]")
    if "[ARGS]" not in pieces[0]:  # v3/v7: one JSON list (SentencePiece text may show spaces as ▁)
        raw = pieces[0].replace("▁", " ").strip()
        value, err = _json(raw)
        if err:
            return head.strip(), [_error(ToolCall(0, raw, id="call_1"), "malformed_json", err)]
        for i, obj in enumerate(value if isinstance(value, list) else [value]):
            calls.append(_object_call(i, json.dumps(obj, ensure_ascii=False), obj))
        return head.strip(), calls
    for i, piece in enumerate(pieces):  # v11+: name[ARGS]{json} (optionally name[CALL_ID]id[ARGS]{json})
        m = _V11.fullmatch(piece)
        call = ToolCall(i, piece, id=f"call_{i + 1}")
        calls.append(call)
        if not m:
            _error(call, "bad_call", "expected name[ARGS]{json} after [TOOL_CALLS]")
            continue
        value, err = _json(m.group(3).strip())
        if err:
            call.name = m.group(1)
            _error(call, "malformed_json", err)
            continue
        calls[-1] = _object_call(i, piece, {"name": m.group(1), "arguments": value, "id": m.group(2)})
    return head.strip(), calls


# ================================================================ Llama 3.1 (JSON) and 3.2 (pythonic)
_FUNCTION_TAG = re.compile(r"<function=([^>]+)>(.*?)(</function>|$)", re.S)


def _llama31(text: str) -> tuple[str, list[ToolCall]]:
    body, _ = _cut(text, ("<|eom_id|>", "<|eot_id|>"))
    tagged = body.lstrip().startswith("<|python_tag|>")
    body = body.lstrip().removeprefix("<|python_tag|>").strip()
    m = _FUNCTION_TAG.match(body)
    if m:
        call = ToolCall(0, body, name=m.group(1), id="call_1")
        if not m.group(3):
            return "", [_error(call, "unclosed_tag", "<function=...> was opened but never closed with </function>")]
        value, err = _json(m.group(2))
        return "", [
            _error(call, "malformed_json", err)
            if err
            else _object_call(0, body, {"name": call.name, "arguments": value})
        ]
    if body.startswith("{"):
        value, err = _json(body)
        if err:
            return "", [_error(ToolCall(0, body, id="call_1"), "malformed_json", err)]
        return "", [_object_call(0, body, value)]
    if tagged:  # llama-models: other text after <|python_tag|> is code for the built-in interpreter
        return "", [ToolCall(0, body, name="code_interpreter", arguments={"code": body}, id="call_1")]
    return body, []


def _literal(node: ast.AST):
    return ast.literal_eval(node)  # literals only: a name, call or operator raises ValueError


def _llama32(text: str) -> tuple[str, list[ToolCall]]:
    body, _ = _cut(text, ("<|eom_id|>", "<|eot_id|>"))
    body = body.strip().removeprefix("<|python_tag|>").strip()
    if not body.startswith("["):
        return body, []
    call = ToolCall(0, body, id="call_1")
    if len(body) > MAX_CALL_CHARS:
        return "", [_error(call, "bad_call", f"tool call longer than {MAX_CALL_CHARS} characters")]
    try:
        tree = ast.parse(body, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return "", [_error(call, "malformed_json", f"not a Python list of calls: {e}")]
    if not isinstance(tree, ast.List):
        return "", [_error(call, "bad_call", "expected a list [f(a=1), ...]")]
    calls = []
    for i, node in enumerate(tree.elts):
        raw = ast.get_source_segment(body, node) or ""
        c = ToolCall(i, raw, id=f"call_{i + 1}")
        calls.append(c)
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            _error(c, "bad_call", "each item must be a call to a plain name: f(a=1)")
            continue
        c.name = node.func.id
        if node.args or any(k.arg is None for k in node.keywords):
            _error(c, "bad_call", "arguments must be given by name (a=1)")
            continue
        try:
            c.arguments = {k.arg: _literal(k.value) for k in node.keywords}
        except (ValueError, TypeError, SyntaxError, RecursionError):
            _error(c, "bad_call", "argument values must be literals (strings, numbers, lists, dicts, True/False/None)")
    return "", calls


# ================================================================ gpt-oss (harmony)
_MESSAGE = re.compile(
    r"(?:<\|start\|>)?(?P<head>[^<]*(?:<\|channel\|>[^<]*)?(?:<\|constrain\|>[^<]*)?)<\|message\|>"
    r"(?P<body>.*?)(?P<end><\|call\|>|<\|end\|>|<\|return\|>|(?=<\|start\|>)|$)",
    re.S,
)


def harmony_messages(text: str) -> tuple[str, list[ToolCall]]:
    """Harmony messages read one by one: the ``final`` channel's text joined unstripped, and the calls (the
    streaming reader applies it to each finished message)."""
    content, calls = [], []
    for m in _MESSAGE.finditer(text):
        head, body, end = m.group("head"), m.group("body"), m.group("end")
        channel = re.search(r"<\|channel\|>(\w+)", head)
        to = re.search(r"to=([^\s<]+)", head)
        if to and to.group(1) != "assistant":
            name = to.group(1).removeprefix("functions.")
            call = ToolCall(len(calls), body, name=name, id=f"call_{len(calls) + 1}")
            calls.append(call)
            if end != "<|call|>":
                _error(call, "unclosed_tag", "a call to a tool must end with <|call|> (output cut off?)")
                continue
            value, err = _json(body)
            if err:
                _error(call, "malformed_json", err)
                continue
            calls[-1] = _object_call(call.index, body, {"name": name, "arguments": value})
        elif not channel or channel.group(1) == "final":
            content.append(body)
    return "".join(content), calls


def _harmony(text: str) -> tuple[str, list[ToolCall]]:
    content, calls = harmony_messages(text)
    return content.strip(), calls


READERS = {"mistral": _mistral, "llama3.1": _llama31, "llama3.2": _llama32, "gpt-oss": _harmony}


def read_calls(text: str, family: str = "qwen3") -> tuple[str, list[ToolCall]]:
    """Split one family's generation into free text and calls. Never raises on any input string."""
    try:
        kind = kind_of(family)
    except ValueError as e:
        return "", [ToolCall(0, "", error={"type": "bad_call", "message": str(e)})]
    if kind == "qwen" or not isinstance(text, str):
        return parse_tool_calls(text)
    return READERS[kind](text)
