"""The kit's LoRA adapter as a model folder a serving engine loads: base weights with the adapter merged in (§14.5.8).

What it does
- ``merged_folder(adapter=None)``: loads the real offline model with the adapter (``toolkit.models.load(
  "qwen2.5-coder-0.5b+lora")``: PEFT merges it), and saves the merged weights (bfloat16, as the base folder holds
  them) with the tokenizer to ``<cache>/models/<adapter>-merged-<weights sha8>``, with ``toolkit-merged.json``
  naming the base, the adapter's weights sha256 and every file's size and sha256 (``toolkit.artifact``). A folder
  whose manifest matches and whose files still match it (sizes always; sha256 where ``toolkit.artifact``'s stamp
  does not vouch for a file) is reused; another is rebuilt, with one line saying why.
  ``python -m toolkit`` never needs it; ``LocalServer(engine="vllm", model=merged_folder())`` serves it.
- Why merged and not vLLM's ``--lora-modules``, measured here with vLLM 0.32 (CPU build): the adapter also
  retrains the embedding and output rows of ``<tool_call>`` and ``</tool_call>`` (PEFT's ``trainable_token_indices``),
  which vLLM's LoRA loader refuses ("trainable_tokens_delta is unsupported LoRA weight"); written as exact rank-2
  LoRA factors on ``embed_tokens``/``lm_head`` they are refused too (its Qwen2 takes LoRA on the seven attention and
  MLP projections only); and the adapter without those two rows no longer calls tools (0 of the kit's 3 loop
  examples with ``tool_choice="auto"``: it answers or declines instead). The rows are what makes it write the tag.

What it leaves out
- Exporting other adapters' formats (GGUF, vLLM LoRA with extra vocabulary); uploading anything.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from toolkit.artifact import ArtifactError, record_files, verify_files
from toolkit.models import ADAPTER_SUFFIX, REAL_OFFLINE, adapter_folder, adapter_manifest, apply_adapter, load
from toolkit.paths import cache_dir

MANIFEST = "toolkit-merged.json"


def _weights_sha(folder: Path) -> str:
    return hashlib.sha256((folder / "adapter_model.safetensors").read_bytes()).hexdigest()


def merged_folder(adapter: str | Path | None = None, out: str | Path | None = None, say=print) -> Path:
    """A model folder with the adapter merged into the real offline model (cached; see the module docstring)."""
    folder = Path(adapter) if adapter else adapter_folder()
    man = adapter_manifest(folder)
    if man is None:
        raise FileNotFoundError(f"no LoRA adapter at {folder} (make one with `python -m toolkit train --model real`)")
    sha = _weights_sha(folder)
    target = Path(out) if out else cache_dir() / "models" / f"{folder.name}-merged-{sha[:8]}"
    mark = target / MANIFEST
    if mark.is_file():
        try:
            facts = json.loads(mark.read_text())
            if facts.get("adapter_weights_sha256") == sha:
                verify_files(target, facts, f"merged model {target}")
                return target
        except (ValueError, ArtifactError, AttributeError) as e:  # broken or stale: rebuild
            say(f"rebuilding the merged model: {e}" if isinstance(e, ArtifactError) else "rebuilding: bad manifest")
    mark.unlink(missing_ok=True)  # a build cut short leaves no manifest, so it is never reused
    import torch  # lazy: heavy, only when a folder is built

    say(f"merging the LoRA adapter {folder.name} (weights {sha[:8]}) into {REAL_OFFLINE}: {target}")
    loaded = load(REAL_OFFLINE + ADAPTER_SUFFIX, dtype="float32", quiet=True) if not adapter else None
    if loaded is None:
        loaded = apply_adapter(load(REAL_OFFLINE, dtype="float32", quiet=True), folder)
    target.mkdir(parents=True, exist_ok=True)
    loaded.model.to(torch.bfloat16).save_pretrained(target)
    loaded.tokenizer.save_pretrained(target)
    facts = dict(
        base=man.get("base"),
        adapter=folder.name,
        adapter_weights_sha256=sha,
        name=loaded.name,
        dtype="bfloat16",
        note="LoRA factors and the retrained <tool_call>/</tool_call> rows merged by PEFT in float32, saved in bf16",
    )
    facts |= record_files(target, skip=(MANIFEST,))
    mark.write_text(json.dumps(facts, indent=1, ensure_ascii=False))
    return target
