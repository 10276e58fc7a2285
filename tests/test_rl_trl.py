"""The kit's GRPO loss equals TRL's GRPOTrainer's (pinned trl) on a fixed batch: value and every gradient."""

import pytest
import torch

from toolkit.models import load
from toolkit.rl import grpo

trl = pytest.importorskip("trl")  # pinned in requirements.txt; absent only in a partial install


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    from datasets import Dataset  # heavy: only when TRL is compared

    folder = tmp_path_factory.mktemp("standin")
    loaded = load("stand-in", quiet=True)
    loaded.model.float().save_pretrained(folder)  # TRL builds its reference model from a path; float32: exact
    loaded.tokenizer.save_pretrained(folder)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}]}] * 4)
    cfg = trl.GRPOConfig(
        output_dir=str(folder / "out"),
        use_cpu=True,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        report_to=[],
        beta=0.04,
        save_strategy="no",
        bf16=False,  # TRL autocasts to bf16 by default; the comparison is in float32
        model_init_kwargs={"dtype": torch.float32},
    )
    tr = trl.GRPOTrainer(
        model=str(folder), reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=cfg, train_dataset=ds
    )
    tr.current_gradient_accumulation_steps = 1  # set by Trainer.train(); one micro-batch here
    tr.model.train()
    return tr


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo"])
def test_loss_and_gradients_equal_trl(trainer, loss_type):
    torch.manual_seed(0)
    model, b, p, t = trainer.model, 2, 3, 5
    prompt, comp = torch.randint(0, 1000, (b, p)), torch.randint(0, 1000, (b, t))
    cm = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    with torch.no_grad():
        now = grpo.sequence_logps(model, torch.cat([prompt, comp], 1))[:, p - 1 :]
    old, ref = now + 0.1 * torch.randn(b, t), now + 0.1 * torch.randn(b, t)
    adv = torch.tensor([1.0, -0.5])
    trainer.loss_type = loss_type
    inputs = dict(
        prompt_ids=prompt,
        prompt_mask=torch.ones(b, p, dtype=torch.long),
        completion_ids=comp,
        completion_mask=cm,
        advantages=adv,
        old_per_token_logps=old,
        ref_per_token_logps=ref,
        num_items_in_batch=cm.sum(),
    )
    params = [q for q in model.parameters() if q.requires_grad]
    model.zero_grad()
    theirs = trainer._compute_loss(model, inputs)
    theirs.backward()
    g_theirs = [q.grad.clone() for q in params]
    model.zero_grad()
    lp = grpo.sequence_logps(model, torch.cat([prompt, comp], 1))[:, p - 1 :]
    ours, _ = grpo.loss(lp, old, adv, cm.bool(), ref, beta=0.04, loss_type=loss_type)
    ours.backward()
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-4, abs=1e-6)
    assert any(g.abs().sum() > 0 for g in g_theirs)
    for g, q in zip(g_theirs, params):
        # float32 summation order differs (TRL keeps only the completion's logits): equal to 1e-3 of the scale
        torch.testing.assert_close(q.grad, g, rtol=1e-3, atol=1e-3 * float(g.abs().max()) + 1e-7)
