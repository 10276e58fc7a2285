"""Where the call format comes from, measured on one prompt: what the model wants to write first, what it writes,
and how a few LoRA steps move that (notebook 11).

What it does
- ``first_token(loaded, messages, tools)``: the next-token distribution right after the generation prompt,
  rendered with the model's own chat template: p(``<tool_call>``), p of a code fence and of ``{`` (the spellings
  of an untagged call), and the top tokens.
- ``greedy(loaded, messages, tools)``: what the model writes, greedy, through the kit's backend (one decode loop,
  one sampler), with no grammar and no forced prefix, stopped at ``<|im_end|>``.
- ``mini_run(loaded, probe_messages, probe_tools, steps)``: a live LoRA fine-tune small enough for a classroom
  (a few steps on tiny generated groups), measuring p(``<tool_call>``) on the probe prompt after every step.

What it leaves out
- Scoring (``toolkit.eval``) and the full fine-tune (``toolkit.sft.lora``).
"""

from __future__ import annotations

import time

import torch

from toolkit.backends.choose import first_token_probs
from toolkit.backends.hf import HFBackend
from toolkit.qwen import IM_END_ID, TOOL_CALL_ID
from toolkit.sft.data import dataset, groups_of, labelled
from toolkit.sft.lora import LoraSettings, attach, group_loss


def prompt_ids(tokenizer, messages, tools) -> list[int]:
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _spelling_id(tokenizer, text: str) -> int:
    return tokenizer(text, add_special_tokens=False)["input_ids"][0]


def first_token(loaded, messages, tools, top: int = 5) -> dict:
    """p(<tool_call>), p(```), p({) and the ``top`` most likely first tokens after the generation prompt (read by
    the kit's one first-token reader, :func:`toolkit.backends.choose.first_token_probs`)."""
    tok = loaded.tokenizer
    fence, brace = _spelling_id(tok, "```"), _spelling_id(tok, "{")
    got = first_token_probs(loaded, prompt_ids(tok, messages, tools), k=top, tokens=(TOOL_CALL_ID, fence, brace))
    named = got["named"]
    return dict(tool_call=named[TOOL_CALL_ID], fence=named[fence], brace=named[brace], top=got["top"])


def greedy(loaded, messages, tools, max_new_tokens: int = 48) -> str:
    backend = HFBackend.from_loaded(loaded, reuse=False)
    g = backend.generate(
        prompt_ids(loaded.tokenizer, messages, tools), max_new_tokens=max_new_tokens, stop_ids={IM_END_ID}
    )
    return loaded.tokenizer.decode(g.new_ids, skip_special_tokens=False)


def mini_run(
    loaded, messages, tools, steps: int = 6, per_group: int = 4, lr: float = 2e-3, seed: int = 7
) -> list[dict]:
    """A few LoRA steps on tiny generated groups (each a different seed-drawn tool list); after every step the
    probe's p(<tool_call>). Modifies ``loaded.model`` in place (adapters attached); reload to undo."""
    # mix v1: the groups this seed draws were measured to move p(<tool_call>) within the classroom limits
    s = LoraSettings(groups=steps, per_group=per_group, data_seed=seed, mix="v1", lr=lr, warmup=1)
    exs = dataset(steps, seed=seed, per_group=per_group, mix=s.mix)
    rows = labelled(exs, loaded.tokenizer)
    groups = [[rows[i] for i in g] for g in groups_of(exs)]
    model = attach(loaded.model, s)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    out = [dict(step=0, loss=None, p_tool_call=first_token(loaded, messages, tools)["tool_call"], seconds=0.0)]
    for k, g in enumerate(groups, 1):
        t0 = time.perf_counter()
        model.train()
        loss, _, _ = group_loss(model, g)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        model.eval()
        p = first_token(loaded, messages, tools)["tool_call"]
        out.append(dict(step=k, loss=round(loss.item(), 4), p_tool_call=p, seconds=round(time.perf_counter() - t0, 1)))
    return out
