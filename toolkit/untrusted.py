"""The one bounded reader of untrusted text: files, stdin lines, HTTP bodies, environment values, server replies.

What it does
- :class:`UntrustedInputError` (a ``ValueError``): ``str(e)`` is one line that names the input (``what``).
- :func:`expand_path`: ``~`` and ``~user`` expanded, or one line (``Path.expanduser`` raises ``RuntimeError`` for
  ``~nosuchuser``); an empty name refused.
- :func:`read_bytes`: a regular file only (a folder, a FIFO that would block forever, a device or a socket is
  refused before it is opened), at most ``max_bytes`` read (a file that grows while read is still bounded).
- :func:`decode`: strict UTF-8 (a leading BOM dropped); the error gives the byte offset.
- :func:`parse_json`: JSON with every number and nesting bounded: integers of more than ``max_int_digits`` digits
  (Python's own limit is 4,300, raised as a bare ``ValueError``), non-finite numbers (``NaN``, ``Infinity``, and
  ``1e999``, which Python reads as ``inf``), nesting deeper than ``max_depth`` (checked without recursion, after a
  parse that catches ``RecursionError``), and text over ``max_bytes``.
- :func:`read_text_file` and :func:`read_json_file`: the above in order.
- :func:`redact`: a URL's password (``http://user:secret@host``) and secret query values as ``***`` in any message.

What it leaves out
- What the parsed value must mean (a schema, a tool list, a manifest): its reader checks that and raises its own
  one-line error; this module only guarantees the value is plain, finite, shallow and small.
- It imports only the standard library, so every command can use it before anything heavy loads.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64  # a real schema or tool list nests a dozen levels; jsonschema and xgrammar recurse per level
MAX_INT_DIGITS = 40  # 2**128 has 39 digits: room for any integer a schema or an id means
MAX_NUMBER_CHARS = 400  # a float literal longer than this is padding, not a number
MAX_SHOWN = 60


class UntrustedInputError(ValueError):
    """Untrusted text that cannot be used; ``str(e)`` is one line naming the input. ``kind`` names the check that
    refused it where a caller must tell them apart (the MCP transports: a JSON-RPC id can be read back from text
    that was JSON but over a bound, never from text that was not JSON): ``"size"``, ``"encoding"``, ``"syntax"``,
    ``"integer"``, ``"number"``, ``"depth"``; ``""`` for the path and file checks."""

    def __init__(self, message: str, kind: str = ""):
        super().__init__(message)
        self.kind = kind


_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")
_SECRET_PARAM = re.compile(r"(?i)\b((?:api[_-]?key|access[_-]?token|token|key|password|passwd|secret|sig)=)[^&#\s]+")


def redact(text: str) -> str:
    """``text`` with the secrets a URL can carry replaced by ``***``: the user and password before ``@`` and the
    values of ``key=``, ``token=``, ``password=`` and the like. Every message that echoes a server URL
    (``TOOLKIT_BACKEND``, ``--backend``, ``--mcp``) passes through it."""
    return _SECRET_PARAM.sub(r"\1***", _USERINFO.sub(r"\1***@", str(text)))


def _shown(text: str) -> str:
    text = str(text)
    return repr(text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…")


def expand_path(text: str | os.PathLike, what: str = "path") -> Path:
    """``text`` as a path with ``~`` expanded; one line for an empty name or an unknown ``~user``."""
    raw = os.fspath(text)
    if not str(raw).strip():
        raise UntrustedInputError(f"{what}: the name is empty")
    try:
        return Path(raw).expanduser()
    except RuntimeError:  # ~nosuchuser: no such user, or no home directory
        user = str(raw).split("/", 1)[0]
        raise UntrustedInputError(f"{what} {_shown(raw)}: no such user {user[1:] or '(home)'!r} for {user}") from None


def read_bytes(path: str | os.PathLike, what: str = "file", max_bytes: int = MAX_BYTES) -> bytes:
    """A regular file's bytes, at most ``max_bytes``; a folder, FIFO, device or socket is refused unopened."""
    p = expand_path(path, what)
    try:
        st = os.stat(p)
    except OSError as e:
        raise UntrustedInputError(f"{what} {_shown(p)}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UntrustedInputError(f"{what} {_shown(p)} is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO (pipe)" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise UntrustedInputError(f"{what} {_shown(p)} is {kind}, not a regular file")
    if st.st_size > max_bytes:
        raise UntrustedInputError(f"{what} {_shown(p)} is {st.st_size:,} bytes; the limit is {max_bytes:,}")
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise UntrustedInputError(f"{what} {_shown(p)}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise UntrustedInputError(f"{what} {_shown(p)} is over the limit of {max_bytes:,} bytes")
    return data


def decode(data: bytes | str, what: str = "text") -> str:
    """Strict UTF-8 text (a BOM dropped); a ``str`` holding lone surrogates (undecodable argv) is refused too."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError as e:
            raise UntrustedInputError(f"{what} is not UTF-8 text (character {e.start})", "encoding") from None
        return data.removeprefix("\ufeff")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UntrustedInputError(f"{what} is not UTF-8 text (byte {e.start} of {len(data):,})", "encoding") from None


def depth(value) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar is 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if items is None:
            continue
        deepest = max(deepest, d)
        stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))
    return deepest


def parse_json(
    text: str | bytes,
    what: str = "JSON",
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_int_digits: int = MAX_INT_DIGITS,
):
    """``text`` parsed as JSON with its size, nesting, integers and floats bounded; one line for any problem."""
    if len(text) > max_bytes:
        raise UntrustedInputError(f"{what} is {len(text):,} bytes; the limit is {max_bytes:,}", "size")
    text = decode(text, what)

    def parse_int(s: str) -> int:
        if len(s.lstrip("-")) > max_int_digits:
            raise UntrustedInputError(
                f"{what}: an integer of {len(s.lstrip('-')):,} digits (the limit is {max_int_digits})", "integer"
            )
        return int(s)

    def parse_float(s: str) -> float:
        x = float(s) if len(s) <= MAX_NUMBER_CHARS else math.inf
        if not math.isfinite(x):
            raise UntrustedInputError(f"{what}: the number {_shown(s)} is not finite (or too long)", "number")
        return x

    def parse_constant(name: str):
        raise UntrustedInputError(f"{what}: {name} is not a JSON value", "number")

    too_deep = False
    try:
        value = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except json.JSONDecodeError as e:
        raise UntrustedInputError(
            f"{what} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", "syntax"
        ) from None
    except RecursionError:  # deeper than the parser's stack allows: the same message as below, because where
        too_deep = True  # that is depends on the caller's own stack (a test and a server must answer a line alike)
    if too_deep or depth(value) > max_depth:
        raise UntrustedInputError(f"{what}: JSON nested too deeply (the limit is {max_depth} levels)", "depth")
    return value


def read_text_file(path: str | os.PathLike, what: str = "file", max_bytes: int = MAX_BYTES) -> str:
    """A regular UTF-8 text file of at most ``max_bytes``."""
    return decode(read_bytes(path, what, max_bytes), f"{what} {_shown(path)}")


def read_json_file(path: str | os.PathLike, what: str = "file", max_bytes: int = MAX_BYTES, **bounds):
    """A regular file holding bounded JSON (``bounds``: ``max_depth``, ``max_int_digits``)."""
    return parse_json(read_bytes(path, what, max_bytes), f"{what} {_shown(path)}", max_bytes, **bounds)
