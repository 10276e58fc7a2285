"""The ledger's shared evidence: named loaders that several groups of checks read, each run once per ledger run.

What it does
- ``qwen3_tokenizer``: the kit's offline Qwen3 tokenizer.
- ``real_files``: the installed real model's own files (``real_model_files``: its ``tokenizer.json`` read with the
  ``tokenizers`` library, ``generation_config.json``, the install's manifest), independent of the kit's tables;
  "not checkable here" when ``make real-model`` has not run. ``real_folder``: that model's folder.
- ``golden``: the official Qwen3 template's renderings kept as golden fixtures (empty outside a checkout).
- ``real_tokenizer``: transformers' tokenizer of the real model (its own chat template), or None.
- ``bfcl_doc``, ``patterns_doc``, ``rag_doc``, ``loops_doc``: saved benchmark results (``benchmarks/results``), or
  None when this checkout has none (the checks that read them then claim nothing).

What it leaves out
- Loaders only one module reads (they sit beside their checks), and the checks themselves.
"""

from __future__ import annotations

import json

from toolkit.book.registry import NotCheckable, loader
from toolkit.fetch import installed_folder, manifest
from toolkit.paths import kit_root, saved_json
from toolkit.tokenizer import tokenizer_for

BFCL_RESULTS = "bfcl_qwen2.5-coder-0.5b.json"  # in benchmarks/results (toolkit.paths.results_file finds it)
PATTERN_RESULTS = "patterns_qwen2.5-coder-0.5b.json"
RAG_RESULTS = "rag_qwen2.5-coder-0.5b.json"
LOOP_RESULTS = "loop_questions_after.json"
NO_REAL_MODEL = "the real model's files are not installed (make real-model)"


@loader
def qwen3_tokenizer():
    """The offline Qwen3 tokenizer (``toolkit.tokenizer``), shared by every check that counts tokens."""
    return tokenizer_for("qwen3")


def real_model_files() -> dict | None:
    """The installed real model's own files, independent of the kit's tables: its ``tokenizer.json`` (loaded with
    the ``tokenizers`` library itself), ``generation_config.json`` and the manifest of what the install changed.
    None when ``make real-model`` has not run."""
    folder = installed_folder()
    if folder is None:
        return None
    from tokenizers import Tokenizer  # lazy: only for the ledger's token claims

    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    return dict(
        folder=folder.name,
        tokenizer=Tokenizer.from_file(str(folder / "tokenizer.json")),
        added={t["content"]: (t["id"], t["special"]) for t in tj["added_tokens"]},
        generation=json.loads((folder / "generation_config.json").read_text(encoding="utf-8")),
        reset=set((manifest() or {}).get("tokenizer", {}).get("special_flag_reset_to_false", [])),
    )


@loader
def real_files() -> dict:
    got = real_model_files()
    if got is None:
        raise NotCheckable(NO_REAL_MODEL + ": no independent source on this machine")
    return got


@loader
def real_folder():
    folder = installed_folder()
    if folder is None:
        raise NotCheckable(NO_REAL_MODEL + ": no weight file to read")
    return folder


@loader
def golden() -> list[dict]:
    """The official Qwen3 template's renderings kept as the golden fixtures (tests/fixtures/qwen3_golden.json):
    strings the published template produced, not the kit's template. Empty outside a checkout."""
    path = kit_root() / "tests" / "fixtures" / "qwen3_golden.json"
    return json.loads(path.read_text(encoding="utf-8"))["cases"] if path.exists() else []


@loader
def real_tokenizer():
    """The installed real model's tokenizer with its own chat template (transformers), or None."""
    folder = installed_folder()
    if folder is None:
        return None
    from transformers import AutoTokenizer  # lazy: transformers loads only for the checks that render with it

    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


@loader
def bfcl_doc() -> dict | None:
    return saved_json(BFCL_RESULTS)


@loader
def patterns_doc() -> dict | None:
    return saved_json(PATTERN_RESULTS)


@loader
def rag_doc() -> dict | None:
    return saved_json(RAG_RESULTS)


@loader
def loops_doc() -> dict | None:
    return saved_json(LOOP_RESULTS)
