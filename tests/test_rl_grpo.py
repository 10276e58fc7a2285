"""GRPO's arithmetic: advantages per group, tool-result tokens get no gradient, the loss by hand."""

import pytest
import torch

from toolkit.rl import grpo


def test_advantages_are_relative_to_the_group():
    a = grpo.advantages([1, 0, 0, 0, 0.5, 0.5, 0.5, 0.5], group=4)
    assert a[0] > 0 > a[1] and a[1] == a[2] == a[3]
    assert sum(a[:4]) == pytest.approx(0, abs=1e-9)
    assert a[4:] == [0, 0, 0, 0]  # a group that all scored the same teaches nothing
    with pytest.raises(ValueError, match="whole groups"):
        grpo.advantages([1, 0, 1], group=2)


def _episode():
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "name": "get_weather", "content": '{"city": "Paris", "temperature": 18}'},
        {"role": "assistant", "content": "It is 18 degrees in Paris."},
    ]


def test_a_tool_result_token_gets_no_gradient(qwen25_tok):
    from toolkit.tools import schemas

    ids, mask = grpo.token_mask(_episode(), schemas(["get_weather"]), qwen25_tok)
    text = qwen25_tok.decode(ids)
    start = text.index('{"city": "Paris", "temperature": 18}')
    pieces = [qwen25_tok.decode(ids[: i + 1]) for i in range(len(ids))]
    tool_tok = next(i for i, p in enumerate(pieces) if len(p) > start + 12)  # a token inside the tool result
    assert not mask[tool_tok] and any(mask)
    n = len(ids) - 1
    logps = torch.randn(1, n, requires_grad=True)
    m = torch.tensor(mask[1:])[None]
    value, _ = grpo.loss(logps, logps.detach(), torch.tensor([1.5]), m)
    value.backward()
    assert logps.grad[0, tool_tok - 1] == 0
    assert (logps.grad[0][m[0]] != 0).all()  # every token the model wrote does get one


def test_the_loss_matches_the_formula_by_hand():
    torch.manual_seed(0)
    logps, old, ref = torch.randn(2, 5), torch.randn(2, 5), torch.randn(2, 5)
    adv, mask = torch.tensor([1.0, -0.5]), torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]).bool()
    ratio = torch.exp(logps - old)
    per = -torch.min(ratio * adv[:, None], ratio.clamp(0.8, 1.2) * adv[:, None])
    kl = torch.exp(ref - logps) - (ref - logps) - 1
    per = per + 0.04 * kl
    dapo, mean_kl = grpo.loss(logps, old, adv, mask, ref, beta=0.04)
    assert dapo.item() == pytest.approx((per[mask]).mean().item(), rel=1e-6)
    assert mean_kl == pytest.approx(kl[mask].mean().item(), rel=1e-6)
    g, _ = grpo.loss(logps, old, adv, mask, ref, beta=0.04, loss_type="grpo")
    assert g.item() == pytest.approx((per[0, :3].mean() + per[1].mean()).item() / 2, rel=1e-6)
    with pytest.raises(ValueError, match="loss_type"):
        grpo.loss(logps, old, adv, mask, loss_type="ppo")


def test_the_ledger_evidence_is_computed(qwen25_tok):
    from toolkit.rl.evidence import evidence

    ev = evidence(qwen25_tok)
    env, credit = ev["environment"], ev["credit_assignment"]
    assert env["call"]["right"] == 1.0 and env["call"]["in_prose"] == 0.0
    assert env["decline"]["text"] == 1.0 and env["decline"]["empty"] == 0.0
    assert credit["environment_tokens"] > 0 and credit["model_tokens"] > 0
    assert credit["max_grad_on_environment_tokens"] == 0.0 < credit["min_grad_on_model_tokens"]
    assert credit["min_grad_on_model_tokens"] == credit["max_grad_on_model_tokens"]  # one advantage, spread evenly


def test_the_trainers_log_probs_are_the_full_sequences_at_the_model_tokens():
    """grpo.trained_logps (shared prompt once, head at trained positions) == sequence_logps on each whole row, read
    at the SFT mask; and the loss on them reaches the model's weights."""
    from toolkit.models import load
    from toolkit.sft.labels import label
    from toolkit.tools import schemas

    loaded = load("stand-in", quiet=True, dtype=torch.float32)
    tools = schemas(["get_weather"])
    eps = [_episode(), _episode(), _episode()]
    eps[1][-1]["content"] = "Paris has 18 degrees right now, a mild day."
    eps[2][3:] = [{"role": "assistant", "content": "18."}]
    rows = [label(e, tools, "qwen3", tokenizer=loaded.tokenizer) for e in eps]
    got, mask = grpo.trained_logps(loaded.model, rows, temperature=0.7)
    assert mask.sum(1).tolist() == [sum(r.trained) for r in rows]
    for j, r in enumerate(rows):
        full = grpo.sequence_logps(loaded.model, torch.tensor([r.ids]), temperature=0.7)[0]
        want = full[torch.tensor(r.trained[1:])]
        torch.testing.assert_close(got[j, : len(want)], want, rtol=1e-4, atol=1e-4)
    value, _ = grpo.loss(got, got.detach(), torch.tensor([1.0, -0.5, -0.5]), mask)
    value.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in loaded.model.parameters())


def test_has_spread_looks_inside_each_group_and_agrees_with_the_advantages():
    # two groups of 2: the first all equal, the second not -> a spread; flip them and still one
    for rewards in ([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 1.0]):
        assert grpo.has_spread(rewards, 2)
        assert any(grpo.advantages(rewards, 2))
    # equal inside each group though the groups differ: nothing to learn, every advantage 0
    assert not grpo.has_spread([1.0, 1.0, 0.0, 0.0], 2)
    assert not any(grpo.advantages([1.0, 1.0, 0.0, 0.0], 2))
    # no group given: the whole list is one group (a saved step's rewards)
    assert grpo.has_spread([1.0, 1.0, 0.0, 0.0]) and not grpo.has_spread([0.5] * 4) and not grpo.has_spread([])
