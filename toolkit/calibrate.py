"""The int8 build's output bias: the mean gap between the float model's logits and the int8 build's, measured where
the model decides whether to call a tool, added to the int8 output layer.

Why: int8 weights move the model's first-token decision one way. Measured on BFCL's irrelevance category (all 240
cases, first token, ``benchmarks/int8_decisions.py``), the uncorrected build raised the ``<tool_call>`` logit margin
by +0.27 on average (sd 0.18) over the float model and lost 8 of its 145 declines (-3.3 points), all towards a call;
restoring any one layer or any one kind of linear to bf16 moved it by at most 0.17 (the error is spread over the
model). A per-token bias, the mean of (float - int8) logits at the kit's own decision points, removes that shift.

What it does
- ``last_logits(model, points)``: the float32 logits of each prompt's last position (one prefill each).
- ``apply(folder, ref, points)``: loads the int8 build from ``folder`` (the staging folder of ``toolkit.small.save``),
  measures its logits at the same points, writes ``mean(ref - int8)`` as the output layer's bias into the artifact's
  file and returns what goes into the manifest (points, tokens, the ``<tool_call>`` shift before and after).

What it leaves out
- Which points: the caller passes token ids (``toolkit.sft.data.decision_points``: the kit's own training
  conversations cut where the assistant's first reply begins; never a BFCL case or a loop question).
- Per-layer corrections (measured: correcting every linear's bias by its mean input made the shift worse).
"""

from __future__ import annotations

from pathlib import Path

from toolkit.qwen import TOOL_CALL_ID
from toolkit.small import WEIGHTS, load


def last_logits(model, points: list[list[int]]):
    import torch  # lazy: heavy

    rows = []
    with torch.inference_mode():
        for ids in points:
            rows.append(model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1].float().clone())
    return torch.stack(rows)


def apply(folder: Path, ref, points: list[list[int]]) -> dict:
    from safetensors import safe_open  # lazy: heavy
    from safetensors.torch import save_file  # lazy: heavy

    model = load(folder)
    got = last_logits(model, points)
    head = next(n for n, c in model.named_children() if c is model.get_output_embeddings())
    del model
    gap = ref - got
    bias = gap.mean(0)
    path = Path(folder) / WEIGHTS
    with safe_open(str(path), "pt") as f:
        tensors = {k: f.get_tensor(k).clone() for k in f.keys()}
    old = tensors.get(f"{head}.bias")
    tensors[f"{head}.bias"] = (bias if old is None else old + bias).contiguous()
    tmp = path.with_suffix(".tmp")
    save_file(tensors, str(tmp))
    del tensors
    tmp.replace(path)
    after = gap - bias  # what is left at the points themselves
    return {
        "output_bias": {
            "what": "mean(float - int8) logits at the kit's own decision points, added to the output layer",
            "points": len(points),
            "prompt_tokens": sum(len(p) for p in points),
            "tool_call_shift_before": round(-float(gap[:, TOOL_CALL_ID].mean()), 4),
            "tool_call_shift_after": round(-float(after[:, TOOL_CALL_ID].mean()), 4),
        }
    }
