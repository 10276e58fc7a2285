"""The one argument layer of every entry point: ``python -m toolkit <command>`` and ``benchmarks/*.py``.

What it does
- :class:`Parser` is ``argparse.ArgumentParser`` whose usage errors are one line on stderr and exit 2 (argparse
  prints the whole usage block first); its sub-commands are parsers of the same class.
- Converters for ``type=``, each checking a value the moment it is parsed and raising a one-line
  ``ArgumentTypeError``: :func:`count` (whole numbers in a range: ``--limit -5`` once sliced rows off the end),
  :func:`number` (finite floats in a range: ``nan`` and ``-1`` for a temperature), :func:`port`,
  :func:`existing_file`, :func:`existing_dir`, :func:`out_file` and :func:`out_dir` (a file or folder the command
  will write: it exists with the right kind and is writable, or can be created under a writable folder; a device
  or pipe such as ``/dev/full`` is refused, only ``/dev/null`` is taken),
  :func:`model` (the names ``toolkit.models.load`` accepts, checked without loading anything), :func:`url`.
- :func:`from_env` ``(name, default, conv)``: a setting a notebook reads from the environment (the tests' smaller
  step counts), checked by one of these converters; a value it refuses is one printed line and the default, never
  a traceback in a cell.
- It imports only the standard library and ``toolkit.models`` for the model names (which imports torch only
  inside ``load``; ``tests/test_cliargs.py`` runs every command with torch, transformers and xgrammar made
  unimportable), so a usage error costs about the interpreter's start (``benchmarks/cli_errors.py`` measures it).

What it leaves out
- Whatever needs the network or a model: a hub id is accepted when the hub may be reachable, and the command's
  own load says if it is not; with ``HF_HUB_OFFLINE=1`` the id must be in the local hub cache.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

from toolkit.artifact import ArtifactError
from toolkit.models import ADAPTER_SUFFIX, REAL_OFFLINE, SMALL, SMALL_BASE, STAND_IN, verify_adapters
from toolkit.rl_adapter import RL_SUFFIX
from toolkit.untrusted import UntrustedInputError, expand_path, redact

MAX_SHOWN = 60  # characters of a bad value echoed back in an error


def _shown(text: str) -> str:
    return repr(text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…")


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line on stderr, exit 2."""

    def error(self, message: str):
        message = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {message[:400]}\n")


def damaged(parser: argparse.ArgumentParser, e: Exception):
    """A model folder or adapter that fails its manifest, found at load: one line, exit 1 (not a usage error)."""
    parser.exit(1, f"{parser.prog}: error: {' '.join(str(e).split())[:400]}\n")


def fail(parser: argparse.ArgumentParser, message: str):
    """A usage error found after parsing (two options that exclude each other, a load that failed): one line."""
    parser.error(" ".join(str(message).split())[:400])


# ---------------------------------------------------------------- numbers
def count(lo: int = 1, hi: int | None = None):
    """A whole number in ``[lo, hi]`` (``hi`` None: no upper bound)."""

    def conv(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {_shown(text)}") from None
        if n < lo or (hi is not None and n > hi):
            span = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
            raise argparse.ArgumentTypeError(f"expected a whole number {span}, got {n}")
        return n

    conv.__name__ = "count"
    return conv


def number(lo: float | None = None, hi: float | None = None, lo_open: bool = False):
    """A finite float in ``[lo, hi]`` (``lo_open``: strictly above ``lo``)."""

    def conv(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {_shown(text)}") from None
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text.strip()}")
        if lo is not None and (x < lo or (lo_open and x == lo)):
            raise argparse.ArgumentTypeError(
                f"expected a number {'above' if lo_open else 'at least'} {lo:g}, got {x:g}"
            )
        if hi is not None and x > hi:
            raise argparse.ArgumentTypeError(f"expected a number at most {hi:g}, got {x:g}")
        return x

    conv.__name__ = "number"
    return conv


SEED_MAX = 2**32 - 1  # numpy's limit; torch.manual_seed(10**20) raised a RuntimeError after the model loaded


def seed(text: str) -> int:
    """A random seed, 0 .. 2**32 - 1."""
    return count(0, SEED_MAX)(text)


def port(allow_zero: bool = True):
    """A TCP port, 1..65535 (0 too when ``allow_zero``: the OS picks a free one)."""
    inner = count(0 if allow_zero else 1, 65535)

    def conv(text: str) -> int:
        try:
            return inner(text)
        except argparse.ArgumentTypeError:
            low = "0 (a free one)" if allow_zero else "1"
            raise argparse.ArgumentTypeError(f"expected a port from {low} to 65535, got {_shown(text)}") from None

    conv.__name__ = "port"
    return conv


# ---------------------------------------------------------------- paths
def _expanded(text: str) -> Path:
    """``text`` with ``~`` expanded; ``~nosuchuser`` is a usage error, not ``RuntimeError``'s traceback."""
    try:
        return expand_path(text) if text.strip() else Path(text)
    except UntrustedInputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _creatable(path: Path, parents: bool) -> str | None:
    """Why ``path`` (absent) cannot be created, or None. ``parents``: missing folders above it may be made too,
    but never straight under the filesystem root (``/nonexistent/dir`` is a typo, even for root)."""
    anchor = _nearest_existing(path.parent)
    if not anchor.is_dir():
        return f"{anchor} is a file, not a folder"
    if anchor != path.parent and (not parents or anchor == Path(anchor.anchor)):
        missing = path.parent
        while missing.parent != anchor:
            missing = missing.parent
        return f"no such folder {missing}"
    if not os.access(anchor, os.W_OK | os.X_OK):
        return f"{anchor} is not writable"
    return None


def existing_file(text: str) -> Path:
    p = _expanded(text)
    if not text.strip() or not p.exists():
        raise argparse.ArgumentTypeError(f"no such file: {_shown(text)}")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{_shown(text)} is a folder; expected a file")
    if not p.is_file():  # a FIFO would block the read forever, a device never ends
        raise argparse.ArgumentTypeError(f"{_shown(text)} is a pipe or a device, not a regular file")
    if not os.access(p, os.R_OK):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not readable")
    return p


def existing_dir(text: str) -> Path:
    p = _expanded(text)
    if not text.strip() or not p.exists():
        raise argparse.ArgumentTypeError(f"no such folder: {_shown(text)}")
    if not p.is_dir():
        raise argparse.ArgumentTypeError(f"{_shown(text)} is a file; expected a folder")
    return p


def out_file(text: str) -> Path:
    """A file the command writes: an existing writable file, or a new one whose folder exists or can be made."""
    p = _expanded(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("the file name is empty")
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{_shown(text)} is a folder; expected a file name")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not writable")
        if not p.is_file() and p.resolve() != Path(os.devnull):  # /dev/full, a FIFO, a terminal: refused now, not
            raise argparse.ArgumentTypeError(  # after the command's work (a write to /dev/full fails only then)
                f"{_shown(text)} is a device or a pipe, not a file (only {os.devnull} is taken, to discard)"
            )
        return p
    why = _creatable(p, parents=False)
    if why:
        raise argparse.ArgumentTypeError(f"cannot write {_shown(text)}: {why}")
    return p


def out_dir(text: str) -> Path:
    """A folder the command writes into: an existing writable folder, or one that can be created."""
    p = _expanded(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("the folder name is empty")
    if p.exists():
        if not p.is_dir():
            raise argparse.ArgumentTypeError(f"{_shown(text)} is a file; expected a folder")
        if not os.access(p, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"folder {_shown(text)} is not writable")
        return p
    why = _creatable(p, parents=True)
    if why:
        raise argparse.ArgumentTypeError(f"cannot create folder {_shown(text)}: {why}")
    return p


# ---------------------------------------------------------------- models and URLs
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def _hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return Path(home) / "hub"


def model(text: str) -> str:
    """``auto``, ``stand-in[-qwen2.5]``, ``qwen2.5-coder-0.5b``, ``qwen2.5-coder-0.5b+lora`` (installed, with the
    kit's adapter; ``+lora+rl``: and an RL adapter on top, both checked; ``+rl``: an RL adapter trained from the
    base) and ``qwen2.5-coder-0.5b+lora-int8`` (its int8 build), a model folder, a ``.gguf`` file or a hub id (in
    the local hub cache when ``HF_HUB_OFFLINE=1``). Returns the text unchanged for ``models.load``."""
    name = text.strip()
    pinned = os.environ.get("TOOLKIT_MODEL", "auto").strip() or "auto"
    if name == "auto" and pinned != "auto":  # load("auto") loads $TOOLKIT_MODEL: checked here, as the option is
        try:
            model(pinned)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"TOOLKIT_MODEL: {e}") from None
        return name
    if name == "auto" or name in (STAND_IN, f"{STAND_IN}-qwen2.5", f"{STAND_IN}-qwen3"):
        return name
    if name in (REAL_OFFLINE + ADAPTER_SUFFIX, REAL_OFFLINE + ADAPTER_SUFFIX + RL_SUFFIX, REAL_OFFLINE + RL_SUFFIX):
        try:
            verify_adapters(name)  # before any load
        except (ArtifactError, UntrustedInputError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return name
    if name in (REAL_OFFLINE, SMALL, SMALL_BASE):  # installed or not: the load says so in one line
        return name
    if name.endswith(ADAPTER_SUFFIX):
        raise argparse.ArgumentTypeError(
            f"the kit's LoRA adapter fits only {REAL_OFFLINE}: use {REAL_OFFLINE + ADAPTER_SUFFIX}, not {_shown(text)}"
        )
    p = _expanded(name)
    if p.exists() or name.startswith(("/", ".", "~")) or name.endswith(".gguf"):
        if p.is_dir():
            if not (p / "config.json").is_file():
                raise argparse.ArgumentTypeError(f"folder {_shown(text)} has no config.json: not a model folder")
            return name
        if p.is_file() and name.endswith(".gguf"):
            return name
        if p.is_file():
            raise argparse.ArgumentTypeError(f"{_shown(text)} is a file but not a .gguf model")
        raise argparse.ArgumentTypeError(f"no such model folder or file: {_shown(text)}")
    if _HUB_ID.fullmatch(name):
        if _offline() and not (_hub_cache() / f"models--{name.replace('/', '--')}").is_dir():
            raise argparse.ArgumentTypeError(
                f"hub model {_shown(text)} is not in the local cache and HF_HUB_OFFLINE=1; "
                f"use auto, {STAND_IN}, {REAL_OFFLINE} or a model folder"
            )
        return name
    raise argparse.ArgumentTypeError(
        f"unknown model {_shown(text)}: expected auto, {STAND_IN}, {REAL_OFFLINE}, {SMALL}, a model folder, a .gguf file "
        "or a hub id (org/name)"
    )


def url(text: str) -> str:
    """An ``http(s)://host[:port][/path]`` URL without query or fragment; returned without a trailing slash."""
    raw = text.strip()
    try:
        parts = urlsplit(raw)
        port_ = parts.port
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{_shown(redact(text))} is not a URL: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"{_shown(redact(text))} is not a URL; expected e.g. http://127.0.0.1:8000/mcp"
        )
    if parts.query or parts.fragment:
        raise argparse.ArgumentTypeError(f"URL {_shown(redact(text))} must not carry a query or fragment")
    if port_ is not None and not 0 < port_ < 65536:
        raise argparse.ArgumentTypeError(f"URL {_shown(redact(text))}: port {port_} out of range")
    return raw.rstrip("/")


def counts(text: str) -> list[int]:
    """A comma-separated list of whole numbers ≥ 1, e.g. ``1,4,16``."""
    conv = count(1)
    items = [x for x in text.split(",") if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected whole numbers like 1,4,16, got {_shown(text)}")
    return [conv(x) for x in items]


def one_of(choices, what: str = "value", allow_empty: bool = False):
    """A comma-separated list whose items are all in ``choices`` (order kept; at least one unless ``allow_empty``)."""
    allowed = list(choices)

    def conv(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in allowed]
        if (not items and not allow_empty) or bad:
            raise argparse.ArgumentTypeError(
                f"unknown {what}(s) {bad or [text]!r}"[:200] + f"; known: {', '.join(allowed)}"
            )
        return items

    conv.__name__ = what
    return conv


def usage_exit(prog: str, message: str) -> None:
    """For a check that runs outside argparse: the same one line, exit 2."""
    print(f"{prog}: error: {' '.join(message.split())[:400]}", file=sys.stderr)
    raise SystemExit(2)


def from_env(name: str, default, conv):
    """``$name`` converted by ``conv`` (one of this module's converters), or ``default`` when unset; a value ``conv``
    refuses prints one line saying so and gives ``default``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return conv(text)
    except (argparse.ArgumentTypeError, ValueError) as e:
        print(f"{name}={_shown(text)} ignored ({e}); using {default}")
        return default
