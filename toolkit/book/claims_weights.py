"""§14.5.2's statements about the model itself, read from the installed real model's weight file: a tool call
comes out of the same output layer as any text, and no step of the round trip needs a change to the model.

What it does
- Reads the tensor names and shapes from ``model.safetensors``'s header (no weights loaded), the vocabulary
  width from ``config.json`` and the tag ids from ``tokenizer.json`` (``toolkit.book.evidence.real_files``), and
  compares the file's tensors with those of transformers' own class for that config, built on the ``meta``
  device (no memory, no weights): the comparison set is transformers', not the kit's.

One check per claim; the header is read once per ledger run (``weight_file``).

What it leaves out
- Qwen3's weights (not on this machine): Qwen2.5-Coder-0.5B carries the same tool tags and the same decoder.
- Sampling: one output matrix means one set of logits; that the engine samples a tag like any other token is the
  kit's one decode loop (``toolkit.backends.decode``), which the weight file cannot show.
"""

from __future__ import annotations

import json
import re
import struct

from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group, loader

TAGS = ("<tool_call>", "</tool_call>")
WEIGHTS = Group("weights")
FAMILY = (
    "read from Qwen2.5-Coder-0.5B's weights (converted from the GGUF by transformers), which carry the same tool "
    "tags as Qwen3; Qwen3's weights are not on this machine"
)


def tensor_shapes(path) -> dict[str, list[int]]:
    """Names and shapes of a safetensors file's tensors, from its JSON header (8-byte length, then the header)."""
    with open(path, "rb") as fh:
        size = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(size))
    header.pop("__metadata__", None)
    return {k: v["shape"] for k, v in header.items()}


def reference_names(folder) -> set[str]:
    """The parameter names transformers' own class for this config has, built on the meta device."""
    import torch  # lazy: only to build the reference model on the meta device
    from transformers import AutoConfig, AutoModelForCausalLM  # lazy: only for the reference names

    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return set(model.state_dict())


@loader
def weight_file(real_folder) -> dict:
    """The real model's weight-file header (tensor names and shapes), its config and its folder's name."""
    shapes = tensor_shapes(real_folder / "model.safetensors")
    config = json.loads((real_folder / "config.json").read_text(encoding="utf-8"))
    src = f"{real_folder.name}/model.safetensors header ({len(shapes)} tensors)"
    return dict(shapes=shapes, config=config, width=config["vocab_size"], folder=real_folder, src=src)


@WEIGHTS(
    "same-logits",
    "§14.5.2 step 2",
    "A tool call's tokens come out of the same logits as ordinary text: there is no separate output for calls.",
    answers=("同一套 logits、同一套采样",),
)
def same_logits(weight_file, real_files):
    shapes, width = weight_file["shapes"], weight_file["width"]
    ids = [real_files["added"][t][0] for t in TAGS]
    row = [width, weight_file["config"]["hidden_size"]]
    outputs = sorted(k for k, s in shapes.items() if s == row)  # matrices with one hidden-size row per token
    heads = [k for k in outputs if "embed" not in k]
    return (
        f"{weight_file['src']}: {width} × {row[1]} matrices (one row per vocabulary entry): {outputs}; output heads "
        f"{heads} {shapes[heads[0]] if heads else ''}; {', '.join(TAGS)} are ids {ids} (tokenizer.json), rows of that "
        f"head: {all(i < width for i in ids)}",
        *make_verdict(
            len(heads) == 1 and all(i < width for i in ids),
            "the weights have no single output head covering the tool tags",
            [
                (
                    real_files["folder"].startswith("qwen2.5"),
                    FAMILY + "; the weights show one set of logits, the sampling is the engine's (one decode loop)",
                )
            ],
        ),
    )


@WEIGHTS(
    "no-structure-change",
    "§14.5.2",
    "None of the round trip's six steps needs a change to the model's structure.",
    answers=("六步里没有任何一步需要改模型结构",),
)
def no_structure_change(weight_file, real_files):
    shapes, config, width = weight_file["shapes"], weight_file["config"], weight_file["width"]
    ids = [real_files["added"][t][0] for t in TAGS]
    kinds = sorted({re.sub(r"\.\d+\.", ".N.", k) for k in shapes})
    reference = reference_names(weight_file["folder"])
    same_set = set(shapes) == reference
    extra, absent = sorted(set(shapes) - reference), sorted(reference - set(shapes))
    return (
        f"{weight_file['src']}: architectures {config.get('architectures')}; {len(kinds)} kinds of tensor "
        f"({', '.join(kinds)}); the same names as transformers' own {config.get('architectures', ['?'])[0]} for this "
        f"config (built on the meta device): {same_set} (extra {extra[:3]}, missing {absent[:3]}); the tool tags are "
        "ordinary rows of the embedding and the head",
        *make_verdict(
            same_set and all(i < width for i in ids),
            "the weight file has tensors a stock decoder of this architecture does not",
            [(real_files["folder"].startswith("qwen2.5"), FAMILY)],
        ),
    )


def weight_claims(**given) -> list[Claim]:
    """This group's claims; ``given``: evidence by loader name (``real_folder``, ``real_files``) instead of the
    installed model's."""
    return WEIGHTS.run(**given)
