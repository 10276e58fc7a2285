"""The rollout sampler: the prompt a group shares is prefilled once per step, and the tokens do not change."""

import torch

from toolkit.models import load
from toolkit.rl.policy import Sampler
from toolkit.rl.train import attach


def test_a_kept_prefix_gives_the_same_tokens_and_is_dropped_when_the_weights_change():
    loaded = load("stand-in", quiet=True, dtype=torch.float32)
    loaded.model = attach(loaded.model)
    tok = loaded.tokenizer
    first = tok("A long shared system prompt that lists the tools, then the user's question. " * 3)["input_ids"]
    later = first + tok(" The model called a tool and the tool answered; the next round goes on.")["input_ids"]
    for temperature in (0.0, 1.0):
        keep = Sampler(loaded, max_new=6, temperature=temperature, seed=3)
        fresh = Sampler(loaded, max_new=6, temperature=temperature, seed=3, keep_prefix=False)
        for prompt in (first, later):
            a = keep.sample([prompt] * 3)
            b = fresh.sample([prompt] * 3)
            assert [g.new_ids for g in a] == [g.new_ids for g in b]
        # the second round prefilled only what it added to the first round's shared prompt
        assert keep.prefix_reused == len(first) - 1 and fresh.prefix_reused == 0
        with torch.no_grad():  # an optimizer step changes a weight in place: the kept keys/values are stale
            for p in loaded.model.parameters():
                if p.requires_grad:
                    p.add_(0.05)
        a, b = keep.sample([later] * 3), fresh.sample([later] * 3)
        assert keep.prefix_reused == len(first) - 1  # nothing reused after the change
        assert [g.new_ids for g in a] == [g.new_ids for g in b]
