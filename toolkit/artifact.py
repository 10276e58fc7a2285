"""An artifact the kit made (a LoRA adapter folder) checked against its manifest before anything loads it.

What it does
- :func:`verify_adapter` reads the folder's ``manifest.json`` through ``toolkit.untrusted`` and checks, in about
  the time of one sha256 over the weights (4 MB for the shipped adapter): the fields a load reads are there; every
  file the manifest lists exists as a regular file of the listed size, with the listed sha256 when the manifest
  has them (``sha256``, written by ``toolkit.sft.lora.save_adapter``); ``adapter_config.json`` is a JSON object;
  the weights are a safetensors file whose header parses and whose tensors lie inside the file. Any mismatch is
  one :class:`ArtifactError` line naming the folder and the file. It imports only the standard library, so
  ``models adapter``, ``cliargs.model`` and ``models.load`` refuse a bad adapter before the base model loads.

What it leaves out
- Whether the weights are the ones a training produced (random bytes with a valid header and the listed size pass
  when the manifest carries no sha256, as a hand-edited one may not) and whether they fit the base model: peft
  says so when it applies them, and ``models adapter --check`` compares the base's sha256.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from toolkit.untrusted import UntrustedInputError, parse_json, read_json_file

MANIFEST = "manifest.json"
CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
MAX_HEADER_BYTES = 16 * 1024 * 1024


class ArtifactError(ValueError):
    """An artifact that does not match its manifest; ``str(e)`` is one line."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _safetensors_ok(path: Path, size: int) -> str | None:
    """Why ``path`` is not a readable safetensors file, or None."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return "shorter than a safetensors header"
        (n,) = struct.unpack("<Q", head)
        if not 2 <= n <= min(size - 8, MAX_HEADER_BYTES):
            return f"not a safetensors file (header length {n:,} in a {size:,}-byte file)"
        raw = f.read(n)
    try:
        header = parse_json(raw, "safetensors header", MAX_HEADER_BYTES)
    except UntrustedInputError:
        return "not a safetensors file (its header is not JSON)"
    if not isinstance(header, dict):
        return "not a safetensors file (its header is not an object)"
    data = size - 8 - n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        offsets = t.get("data_offsets") if isinstance(t, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(x, int) for x in offsets)):
            return f"tensor {name[:40]!r} has no data offsets"
        if not 0 <= offsets[0] <= offsets[1] <= data:
            return f"tensor {name[:40]!r} lies outside the file (truncated?)"
    return None


def verify_adapter(folder: Path) -> dict:
    """The adapter's manifest once ``folder`` matches it; else one :class:`ArtifactError` line."""
    where = f"adapter {folder}"
    if not folder.is_dir():
        raise ArtifactError(f"{where}: no such folder")
    if not (folder / MANIFEST).exists():
        raise ArtifactError(f"{where}: no {MANIFEST} (make one with `python -m toolkit train --model real`)")
    try:
        man = read_json_file(folder / MANIFEST, "adapter manifest", 1 << 20)
    except UntrustedInputError as e:
        raise ArtifactError(str(e)) from None
    if not isinstance(man, dict):
        raise ArtifactError(f"{where}: {MANIFEST} holds {type(man).__name__}, not an object")
    listed, sums = man.get("files"), man.get("sha256") or {}
    if not isinstance(listed, dict) or not all(isinstance(v, int) for v in listed.values()):
        raise ArtifactError(f"{where}: {MANIFEST} lists no files with sizes")
    for key, inner in (("base", "name"), ("settings", "rank"), ("data", "sha256")):
        if not isinstance(man.get(key), dict) or inner not in man[key]:
            raise ArtifactError(f"{where}: {MANIFEST} has no {key}.{inner}")
    for name in (CONFIG, WEIGHTS):
        if name not in listed:
            raise ArtifactError(f"{where}: {MANIFEST} does not list {name}")
    for name, size in listed.items():
        p = folder / name
        if "/" in name or not p.is_file():
            raise ArtifactError(f"{where}: {name} is missing")
        got = p.stat().st_size
        if got != size:
            raise ArtifactError(
                f"{where}: {name} is {got:,} bytes; the manifest says {size:,} (truncated or replaced?)"
            )
        if name in sums and file_sha256(p) != sums[name]:
            raise ArtifactError(f"{where}: {name} does not match the sha256 in the manifest")
    try:
        cfg = read_json_file(folder / CONFIG, "adapter config", 1 << 20)
    except UntrustedInputError as e:
        raise ArtifactError(str(e)) from None
    if not isinstance(cfg, dict):
        raise ArtifactError(f"{where}: {CONFIG} is not a JSON object")
    why = _safetensors_ok(folder / WEIGHTS, listed[WEIGHTS])
    if why:
        raise ArtifactError(f"{where}: {WEIGHTS} is {why}")
    return man
