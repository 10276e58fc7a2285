"""The GRPO loop on the stand-in: it runs, writes its reward curve, its adapter round-trips, and a run resumes."""

import json

import torch

from toolkit.models import load
from toolkit.rl import train as T


def test_two_steps_save_an_adapter_that_loads_back_and_a_run_resumes(tmp_path):
    loaded = load("stand-in", quiet=True, dtype=torch.float32)
    prompt = loaded.tokenizer("Say something.")["input_ids"]
    reward = lambda ids: sum(i % 2 == 0 for i in ids) / max(1, len(ids))  # noqa: E731  a toy reward with spread
    lines = []
    res = T.train(
        loaded,
        [prompt],
        reward,
        steps=2,
        group=4,
        lr=1e-2,
        max_new=3,
        temperature=40.0,
        out=tmp_path,
        save_every=2,
        log=lines.append,
    )
    assert [s["step"] for s in res["steps"]] == [1, 2] and "mean reward" in lines[-1] and "ETA" in lines[-1]
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == res["steps"]
    ids = torch.tensor([prompt])
    with torch.no_grad():
        trained = loaded.model(input_ids=ids).logits
    fresh = load("stand-in", quiet=True, dtype=torch.float32)
    with torch.no_grad():
        before = fresh.model(input_ids=ids).logits
    T.load_adapter(fresh, tmp_path / "adapter")
    with torch.no_grad():
        after = fresh.model(input_ids=ids).logits
    assert not torch.allclose(before, trained)  # training moved the model
    torch.testing.assert_close(after, trained)  # and the saved adapter reproduces it
    more = T.train(
        fresh, [prompt], reward, steps=3, group=4, lr=1e-2, max_new=3, temperature=40.0, out=tmp_path, log=lines.append
    )
    assert "resuming at step 2" in lines and [s["step"] for s in more["steps"]] == [1, 2, 3]
