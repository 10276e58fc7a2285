"""An artifact the kit made (a LoRA adapter folder, the converted real model) checked against its manifest before
anything loads it.

What it does
- :func:`verify_adapter` reads the folder's ``manifest.json`` through ``toolkit.untrusted`` and checks, in about
  the time of one sha256 over the weights (4 MB for the shipped adapter): the fields a load reads are there; every
  file the manifest lists exists as a regular file of the listed size, with the listed sha256 when the manifest
  has them (``sha256``, written by ``toolkit.sft.lora.save_adapter``); ``adapter_config.json`` is a JSON object;
  the weights are a safetensors file whose header parses and whose tensors lie inside the file. Any mismatch is
  one :class:`ArtifactError` line naming the folder and the file. It imports only the standard library, so
  ``models adapter``, ``cliargs.model`` and ``models.load`` refuse a bad adapter before the base model loads.
- :func:`verify_rl_adapter`: the same for an RL adapter folder, which has no manifest (peft's config and weights,
  the run's ``results.json`` one folder up naming the model it started from).
- :func:`record_files` and :func:`verify_files`: the same check for a large folder (the converted real model, 1.2 GB)
  at a bounded cost. ``record_files`` lists every file's size and sha256 for a manifest; ``verify_files`` checks
  on every call that each listed file is there with its size (a ``stat`` each), and hashes a file only when the
  stamp beside it (``.verified.json``: size, mtime and expected sha256 of each file when it was last hashed)
  does not vouch for it, or when asked for a full check. A file rewritten in place (new mtime) or a manifest
  that now expects another sha256 is hashed again at the next check; a file of the same size whose mtime was
  set back is caught only by a full check (``python -m toolkit models info --full``).

What it leaves out
- Whether the weights are the ones a training produced (random bytes with a valid header and the listed size pass
  when the manifest carries no sha256, as a hand-edited one may not) and whether they fit the base model: peft
  says so when it applies them, and ``models adapter --check`` compares the base's sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

from toolkit.untrusted import UntrustedInputError, parse_json, read_json_file

MANIFEST = "manifest.json"
CONFIG = "adapter_config.json"
WEIGHTS = "adapter_model.safetensors"
STAMP = ".verified.json"
MAX_HEADER_BYTES = 16 * 1024 * 1024


class ArtifactError(ValueError):
    """An artifact that does not match its manifest; ``str(e)`` is one line."""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def safetensors_problem(path: Path, size: int) -> str | None:
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


def _read_json(path: Path, what: str, limit: int):
    """``path``'s JSON through ``toolkit.untrusted``; its refusal as an :class:`ArtifactError` line."""
    try:
        return read_json_file(path, what, limit)
    except UntrustedInputError as e:
        raise ArtifactError(str(e)) from None


def _config_and_weights(folder: Path, where: str, what: str, weights_size: int, lora: bool = False) -> dict:
    """The checks both adapter kinds share, after their files were found: ``adapter_config.json`` is a JSON
    object (a LoRA adapter's, with an integer rank, when ``lora``) and the weights are a safetensors file of
    ``weights_size`` bytes whose header parses and whose tensors lie inside it. Returns the config."""
    cfg = _read_json(folder / CONFIG, what, 1 << 20)
    if not isinstance(cfg, dict):
        raise ArtifactError(f"{where}: {CONFIG} is not a JSON object")
    if lora and (cfg.get("peft_type") != "LORA" or not isinstance(cfg.get("r"), int)):
        raise ArtifactError(f"{where}: {CONFIG} is not a LoRA adapter's config")
    why = safetensors_problem(folder / WEIGHTS, weights_size)
    if why:
        raise ArtifactError(f"{where}: {WEIGHTS} is {why}")
    return cfg


def verify_adapter(folder: Path) -> dict:
    """The adapter's manifest once ``folder`` matches it; else one :class:`ArtifactError` line."""
    where = f"adapter {folder}"
    if not folder.is_dir():
        raise ArtifactError(f"{where}: no such folder")
    if not (folder / MANIFEST).exists():
        raise ArtifactError(f"{where}: no {MANIFEST} (make one with `python -m toolkit train --model real`)")
    man = _read_json(folder / MANIFEST, "adapter manifest", 1 << 20)
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
    _config_and_weights(folder, where, "adapter config", listed[WEIGHTS])
    return man


def verify_rl_adapter(folder: Path) -> dict:
    """An RL adapter folder (``benchmarks/rl.py train`` writes peft's files and no manifest; its run's
    ``results.json`` sits one folder up): a LoRA ``adapter_config.json`` and a safetensors file whose header parses
    and whose tensors lie inside it. Returns its rank, the weights' sha256 and the model its run started from (as
    the run recorded it), else one :class:`ArtifactError` line."""
    where = f"RL adapter {folder}"
    if not folder.is_dir():
        raise ArtifactError(f"{where}: no such folder (train one: python benchmarks/rl.py train)")
    for name in (CONFIG, WEIGHTS):
        if not (folder / name).is_file():
            raise ArtifactError(f"{where}: {name} is missing")
    cfg = _config_and_weights(folder, where, "RL adapter config", (folder / WEIGHTS).stat().st_size, lora=True)
    run, start = folder.parent / "results.json", None
    if run.is_file():
        doc = _read_json(run, "RL run results", 64 << 20)
        start = doc.get("model") if isinstance(doc, dict) else None
    return dict(folder=str(folder), rank=cfg["r"], weights_sha256=file_sha256(folder / WEIGHTS), started_from=start)


def _fingerprint(path: Path, sha256: str) -> list:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, sha256]


def _write_stamp(folder: Path, stamp: dict) -> None:
    tmp = folder / f"{STAMP}.{os.getpid()}.tmp"  # per process: two checks at once each write a whole stamp
    try:
        tmp.write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, folder / STAMP)
    except OSError:
        pass  # a read-only folder still loads: its files are hashed again at the next check
    finally:
        tmp.unlink(missing_ok=True)


def _read_stamp(folder: Path) -> dict:
    try:
        stamp = read_json_file(folder / STAMP, "stamp", 1 << 20)
    except UntrustedInputError:  # none yet, or damaged: every file is hashed
        return {}
    return stamp if isinstance(stamp, dict) else {}


def record_files(folder: Path, skip: tuple[str, ...] = (MANIFEST,)) -> dict:
    """``{"files": {name: size}, "sha256": {name: hex}}`` for every regular file directly in ``folder`` (not the
    ones in ``skip``, nor hidden ones); writes the stamp, since every file was just hashed."""
    files, sums = {}, {}
    for p in sorted(folder.iterdir()):
        if p.name in skip or p.name.startswith(".") or not p.is_file():
            continue
        files[p.name], sums[p.name] = p.stat().st_size, file_sha256(p)
    _write_stamp(folder, {n: _fingerprint(folder / n, sums[n]) for n in files})
    return {"files": files, "sha256": sums}


def verify_files(folder: Path, man: dict, what: str, full: bool = False) -> int:
    """Each file ``man`` lists (``files``: sizes, ``sha256``: digests) is in ``folder`` with its size; its sha256 is
    checked where the stamp does not vouch for it, or for all with ``full``. One :class:`ArtifactError` line for a
    mismatch; returns how many files were hashed."""
    listed, sums = man.get("files"), man.get("sha256")
    if not (isinstance(listed, dict) and listed and all(isinstance(v, int) for v in listed.values())):
        raise ArtifactError(f"{what}: {MANIFEST} lists no files with sizes")
    if not (isinstance(sums, dict) and all(isinstance(sums.get(n), str) for n in listed)):
        raise ArtifactError(f"{what}: {MANIFEST} does not give every file's sha256")
    stamp, fresh, hashed = _read_stamp(folder), {}, 0
    for name, size in listed.items():
        p = folder / name
        if "/" in name or name in ("", ".", "..") or not p.is_file():
            raise ArtifactError(f"{what}: {name} is missing")
        got = p.stat().st_size
        if got != size:
            raise ArtifactError(f"{what}: {name} is {got:,} bytes; the manifest says {size:,} (truncated or replaced?)")
        fingerprint = _fingerprint(p, sums[name])
        if full or stamp.get(name) != fingerprint:
            hashed += 1
            if file_sha256(p) != sums[name]:
                raise ArtifactError(f"{what}: {name} does not match the sha256 in the manifest (corrupted or replaced)")
        fresh[name] = fingerprint
    if fresh != stamp:
        _write_stamp(folder, fresh)
    return hashed
