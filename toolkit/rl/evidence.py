"""Plain data for the ledger's §14.5.7 RL statements, computed from the kit's own environments and loss.

What it does
- ``evidence(tokenizer)`` → dict: (1) trial and error in a verifiable environment — the task families, how many
  tasks each has, and the rewards a right and a gaming answer earn on one task of each family, computed by
  running them; (2) credit assignment over a trajectory — on a two-turn trajectory with a tool result, how many
  tokens are the model's own, how many the environment wrote, and the largest gradient any environment token
  gets from the GRPO loss (0.0 when the mask holds), and the smallest and largest any model token gets.

What it leaves out
- Verdict wording and the saved real-model run (the ledger reads ``benchmarks/results/rl/`` itself).
"""

from __future__ import annotations

import json

import torch

from toolkit.rl import envs, grpo
from toolkit.tools import schemas


def _call(name: str, **args) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args}, ensure_ascii=False)}</tool_call>"


def _environment() -> dict:
    tasks = envs.call_tasks(0, 8) + envs.decline_tasks(0, 8) + envs.multi_tasks(0, 20)
    fams = sorted({t.family for t in tasks})
    rows = {f: {"tasks": sum(t.family == f for t in tasks)} for f in fams}
    call = next(t for t in tasks if t.family == "call")
    right = "".join(_call(c["name"], **c["arguments"]) for c in call.want)
    rows["call"] |= {
        "right": envs.rollout(lambda m, s: right, call).reward,
        "in_prose": envs.rollout(lambda m, s: "Sure: " + right, call).reward,
    }
    dec = next(t for t in tasks if t.family == "decline")
    rows["decline"] |= {
        "text": envs.rollout(lambda m, s: "No tool here does that.", dec).reward,
        "empty": envs.rollout(lambda m, s: "", dec).reward,
    }
    return rows


def _credit(tokenizer) -> dict:
    msgs = [
        {"role": "user", "content": "How warm is it in Tokyo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}],
        },
        {"role": "tool", "name": "get_weather", "content": '{"city": "Tokyo", "temperature": 21}'},
        {"role": "assistant", "content": "It is 21 °C in Tokyo."},
    ]
    ids, mask = grpo.token_mask(msgs, schemas(["get_weather"]), tokenizer)
    m = torch.tensor(mask[1:])[None]
    logps = torch.randn(1, len(ids) - 1, requires_grad=True)
    value, _ = grpo.loss(logps, logps.detach(), torch.tensor([1.0]), m)
    value.backward()
    g = logps.grad[0]
    return {
        "tokens": len(ids),
        "model_tokens": int(m.sum()),
        "environment_tokens": len(ids) - 1 - int(m.sum()),
        "max_grad_on_environment_tokens": float(g[~m[0]].abs().max()),
        "min_grad_on_model_tokens": float(g[m[0]].abs().min()),
        "max_grad_on_model_tokens": float(g[m[0]].abs().max()),
    }


def evidence(tokenizer) -> dict:
    """§14.5.7's RL statements as plain data (see the module docstring)."""
    return {"environment": _environment(), "credit_assignment": _credit(tokenizer)}
