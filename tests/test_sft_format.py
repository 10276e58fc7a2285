"""toolkit.sft.format: the first-token probe asks the model for the last position's logits only (every position's
row of 151,936 floats cost ~0.4 GB on a long prompt: notebook 11 over Binder's 2 GB), and gives what a full forward
gives there."""

import pytest
import torch

from toolkit.models import load
from toolkit.qwen import TOOL_CALL_ID
from toolkit.sft.format import first_token, prompt_ids
from toolkit.tools import TOOLS


@pytest.fixture(scope="module")
def stand_in():
    return load("stand-in", quiet=True)


def test_first_token_reads_only_the_last_position_and_matches_a_full_forward(stand_in):
    tools = [TOOLS["convert_units"].schema, TOOLS["get_weather"].schema]
    messages = [{"role": "user", "content": "How many pounds are 12 kilograms?"}]
    shapes = []
    hook = stand_in.model.get_output_embeddings().register_forward_hook(lambda m, i, o: shapes.append(tuple(o.shape)))
    try:
        got = first_token(stand_in, messages, tools, top=3)
    finally:
        hook.remove()
    ids = prompt_ids(stand_in.tokenizer, messages, tools)
    assert len(ids) > 100 and shapes == [(1, 1, stand_in.model.config.vocab_size)]
    with torch.inference_mode():
        full = torch.softmax(stand_in.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
    assert got["tool_call"] == pytest.approx(float(full[TOOL_CALL_ID]), rel=1e-4, abs=1e-7)
    assert [p for _, p in got["top"]] == pytest.approx(torch.topk(full, 3).values.tolist(), rel=1e-4)
