"""The random-weight stand-in: a tiny Qwen-shaped causal LM with the real 151,936-token vocabulary.

What it does
- ``stand_in_config(flavor)``: Qwen2 or Qwen3 config, hidden 64, 2 layers, 4 heads / 2 KV heads, tied embeddings.
- ``stand_in(flavor, seed)``: the model (~9.8M params, built in well under a second), seeded, with a wider
  embedding init so its distributions are not nearly uniform. It shows mechanics (tokens, masks, cache reuse),
  never meaning: ``toolkit.models.load`` marks it ``semantic=False`` and every output says so.

What it leaves out
- Anything learned: its weights are random.
"""

from __future__ import annotations

from toolkit.qwen import ENDOFTEXT_ID, IM_END_ID, VOCAB_WIDTH

POSITIONS = 32_768  # the stand-in's max_position_embeddings, as Qwen2.5-Coder-0.5B's (its config.json)


def stand_in_config(flavor: str = "qwen3", **overrides):
    """A tiny Qwen-shaped config with the real vocab width (151,936)."""
    from transformers import Qwen2Config, Qwen3Config  # lazy: only when a model is built

    kw = dict(
        vocab_size=VOCAB_WIDTH,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=IM_END_ID,
        pad_token_id=ENDOFTEXT_ID,
    )
    if flavor == "qwen3":
        kw["head_dim"] = 16
    kw.update(overrides)
    return (Qwen3Config if flavor == "qwen3" else Qwen2Config)(**kw)


def stand_in(flavor: str = "qwen3", seed: int = 0, dtype=None, device: str = "cpu"):
    """Random-weight Qwen-shaped causal LM (~9.8M params), built in well under a second. Seeded."""
    import torch  # lazy: only when a model is built
    from transformers import AutoModelForCausalLM  # lazy: only when a model is built

    torch.manual_seed(seed)
    cfg = stand_in_config(flavor)
    model = AutoModelForCausalLM.from_config(cfg, dtype=dtype or torch.float32)
    # Wider init than the default 0.02 so the random model's distributions are not nearly uniform.
    with torch.no_grad():
        model.get_input_embeddings().weight.normal_(0.0, 1.0)
    return model.to(device).eval()
