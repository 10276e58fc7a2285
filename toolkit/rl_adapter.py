"""Where an RL adapter lives, whether it fits the model it is put on, and merging it in.

What it does
- ``rl_adapter_folder()``: ``$TOOLKIT_RL_ADAPTER``, else ``benchmarks/rl.py train``'s run from the SFT adapter on
  the ``multi`` family in the kit's cache.
- ``rl_start_mismatch(name, info)``: before any model loads, why an RL adapter (``toolkit.artifact.
  verify_rl_adapter``'s ``info``) does not fit the short name asked for: ``qwen2.5-coder-0.5b+rl`` wants a run that
  started from the base model, ``qwen2.5-coder-0.5b+lora+rl`` one that started from the SFT adapter.
- ``apply_rl_adapter(loaded, folder)``: merges it into a loaded model (refused when its run recorded another start)
  and names it, with its rank and weights hash, in the model's name, so every output says it ran.

What it leaves out
- Training one (``toolkit.rl.train``), and loading the model underneath (``toolkit.models.load``, which calls this).
"""

from __future__ import annotations

import os
from pathlib import Path

from toolkit import artifact
from toolkit.paths import cache_dir
from toolkit.untrusted import expand_path

RL_SUFFIX = "+rl"  # load("qwen2.5-coder-0.5b+lora+rl"): that model with an RL adapter (benchmarks/rl.py) on top
RL_ADAPTER_ENV = "TOOLKIT_RL_ADAPTER"  # the RL adapter's folder; default: the GRPO run from +lora on "multi"
SFT_MARK = " + LoRA adapter "  # in a model's name: the SFT adapter is merged (toolkit.models.apply_adapter)


def rl_adapter_folder() -> Path:
    """``$TOOLKIT_RL_ADAPTER``, else ``benchmarks/rl.py train``'s run from +lora on "multi" in the kit's cache."""
    if os.environ.get(RL_ADAPTER_ENV):
        return expand_path(os.environ[RL_ADAPTER_ENV], RL_ADAPTER_ENV).resolve()
    return cache_dir() / "rl" / "bench-lora-multi" / "adapter"


def rl_start_mismatch(name: str, info: dict) -> str | None:
    """Before any load: why the RL adapter ``info`` does not fit the short name ``name`` (``...+rl``: a run from the
    base model; ``...+lora+rl``: one from the SFT adapter), or None. A run that recorded no start passes here; the
    load then says its start was not recorded."""
    start, stem = info.get("started_from") or "", name.removesuffix(RL_SUFFIX)
    if start and (SFT_MARK in start) != stem.endswith("+lora"):
        return f"RL adapter {info['folder']} was trained from {start.split(' [')[0]}, not from {stem}"
    return None


def apply_rl_adapter(loaded, folder: Path):
    """Merge the RL adapter in ``folder`` into ``loaded`` (a ``toolkit.models.Loaded``: the model its run started
    from, refused when the run recorded another one) and name it, with its rank and weights hash, in its name."""
    info = artifact.verify_rl_adapter(folder)
    start = (info["started_from"] or "").split(" [")[0]
    if start and start != loaded.name:
        raise artifact.ArtifactError(f"RL adapter {folder} was trained from {start}, not from {loaded.name}")
    from peft import PeftModel  # lazy: heavy, only when an adapter is applied

    loaded.model = PeftModel.from_pretrained(loaded.model, str(folder)).merge_and_unload().eval()
    label, loaded.adapter = f"{folder.parent.name}/{folder.name}", dict(sft=loaded.adapter, rl=info)
    loaded.name += f" + RL adapter {label} (r={info['rank']}, weights {info['weights_sha256'][:8]})"
    loaded.notes.append(f"RL adapter {label} merged into the weights" + ("" if start else " (its start not recorded)"))
    return loaded
