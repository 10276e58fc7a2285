"""The int8 build's forward pass: Qwen2 written op for op as transformers writes it, without transformers' modeling
stack, so the kernel a Binder student runs never imports it.

Why: transformers' Qwen2 class imports its masking utilities, and they import ``torch._dynamo``; together they add
~185 MB of RSS to a process that holds a 496 MB int8 model (measured: ``import torch`` 277 MB, + the Qwen2 config and
``DynamicCache`` 308 MB, + ``modeling_qwen2`` 493 MB; transformers 5.24, torch 2.13). Binder gives the server and the
kernel 2 GB together, and notebook 03's loop has a 1.1 GB target (issue 37).

What it does
- :class:`Qwen2` is a module tree with transformers' names (``model.embed_tokens``, ``model.layers[i].self_attn.
  q_proj`` …, ``model.norm``, ``lm_head``), built on the meta device by ``toolkit.small.load``, which fills it from
  the artifact exactly as it filled transformers' class. Its ``forward`` takes the arguments the kit's backends
  pass (``input_ids``, ``attention_mask``, ``position_ids``, ``cache`` or ``past_key_values`` (transformers'
  ``DynamicCache``), ``use_cache``, ``logits_to_keep``) and returns ``.logits`` and ``.cache``.
- The math is transformers 5.x's Qwen2, in its order (the MLP of a long prefill in slices of :data:`MLP_ROWS` tokens:
  less memory, the same values): RMSNorm in float32, default RoPE, sdpa (causal without a mask
  where transformers skips it; a boolean causal-and-padding mask otherwise; grouped keys/values by ``enable_gqa``
  without a mask, repeated with one). ``tests/test_small_forward.py`` checks logits and greedy tokens against
  transformers' class holding the same int8 modules, batched with padding and with a cache across turns.
- ``generate(...)`` is transformers' own: the first call wraps the same modules (no copy) in transformers' class
  (:meth:`Qwen2.transformers_model`), and only then imports its modeling stack (xgrammar's transformers integration
  in notebook 02 and ``transformers serve`` need ``generate``).

What it leaves out
- Qwen3's q/k norms, sliding windows, RoPE scaling, other activations (:func:`supports` says no, and
  ``toolkit.small`` builds transformers' class instead); training (the int8 modules have no gradients).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# A prefill's largest transient is the MLP's intermediate width (4,864 per token for the 0.5B model, float32, four
# such tensors live at once): run in slices of this many tokens, a 366-token prefill adds 39 MB to the peak instead of
# 79 (ru_maxrss after a 3-token warm-up, Xeon with AMX, one thread, 2026-12-06). Rows are independent, so the
# logits are the same.
MLP_ROWS = 64


def supports(config) -> bool:
    """True where this forward is transformers' Qwen2 forward for ``config``."""
    rope = getattr(config, "rope_parameters", None) or {}
    return (
        getattr(config, "model_type", "") == "qwen2"
        and not getattr(config, "use_sliding_window", False)
        and rope.get("rope_type", "default") == "default"
        and getattr(config, "hidden_act", "silu") == "silu"
    )


def _rope_theta(config) -> float:
    rope = getattr(config, "rope_parameters", None) or {}
    return float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def __getattr__(name: str):
    """``Qwen2``, ``Output``, ``RMSNorm`` …: the torch classes, defined on first use (importing this module stays
    torch-free, so ``toolkit.small`` and ``toolkit.models`` still import in a blink)."""
    classes = {} if name.startswith("__") else _classes()  # a probe for __path__, __wrapped__ …: no torch for it
    if name in classes:
        return classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _classes() -> dict:
    import torch  # lazy: a model is being built; the kit's usage errors never wait for torch
    import torch.nn.functional as F  # lazy: the same
    from torch import nn  # lazy: the same
    from transformers.cache_utils import DynamicCache  # lazy: the same (transformers' cache only, ~25 MB)

    def _rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class _Linear(nn.Linear):
        """A placeholder ``toolkit.small.load`` swaps for the artifact's int8 module: never initialised (initialising on
        the meta device goes through torch's reference ops, which import torch._dynamo)."""

        def reset_parameters(self):
            pass

    class _Embedding(nn.Embedding):
        """The same for the token table."""

        def reset_parameters(self):
            pass

    class RMSNorm(nn.Module):
        def __init__(self, size: int, eps: float):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(size))
            self.variance_epsilon = eps

        def forward(self, h):
            dtype = h.dtype
            x = h.to(torch.float32)
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
            return self.weight * x.to(dtype)

    class Attention(nn.Module):
        def __init__(self, config, layer_idx: int):
            super().__init__()
            self.layer_idx = layer_idx
            self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
            self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
            hidden, d = config.hidden_size, self.head_dim
            self.q_proj = _Linear(hidden, self.heads * d, bias=True)
            self.k_proj = _Linear(hidden, self.kv_heads * d, bias=True)
            self.v_proj = _Linear(hidden, self.kv_heads * d, bias=True)
            self.o_proj = _Linear(self.heads * d, hidden, bias=False)

        def forward(self, x, cos, sin, mask, cache):
            b, t, _ = x.shape
            shape = (b, t, -1, self.head_dim)
            q = self.q_proj(x).view(shape).transpose(1, 2)
            k = self.k_proj(x).view(shape).transpose(1, 2)
            v = self.v_proj(x).view(shape).transpose(1, 2)
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            if cache is not None:
                k, v = cache.update(k, v, self.layer_idx)
            extra, rep = {}, self.heads // self.kv_heads
            if rep > 1 and mask is None:
                extra["enable_gqa"] = True
            elif rep > 1:  # a mask: keys and values repeated per query head, as transformers does there
                k, v = (z.repeat_interleave(rep, dim=1) for z in (k, v))
            o = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=mask,
                dropout_p=0.0,
                scale=self.head_dim**-0.5,
                is_causal=mask is None and t > 1,
                **extra,
            )
            return self.o_proj(o.transpose(1, 2).reshape(b, t, -1).contiguous())

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.gate_proj = _Linear(config.hidden_size, config.intermediate_size, bias=False)
            self.up_proj = _Linear(config.hidden_size, config.intermediate_size, bias=False)
            self.down_proj = _Linear(config.intermediate_size, config.hidden_size, bias=False)

        def forward(self, x):
            if x.shape[1] > MLP_ROWS:  # rows are independent: a long prefill in slices (see MLP_ROWS)
                return torch.cat([self.forward(x[:, i : i + MLP_ROWS]) for i in range(0, x.shape[1], MLP_ROWS)], 1)
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self, config, layer_idx: int):
            super().__init__()
            self.self_attn = Attention(config, layer_idx)
            self.mlp = MLP(config)
            self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
            self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

        def forward(self, h, cos, sin, mask, cache):
            h = h + self.self_attn(self.input_layernorm(h), cos, sin, mask, cache)
            return h + self.mlp(self.post_attention_layernorm(h))

    class Body(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.embed_tokens = _Embedding(config.vocab_size, config.hidden_size)
            self.layers = nn.ModuleList(Layer(config, i) for i in range(config.num_hidden_layers))
            self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    @dataclass
    class Output:
        logits: torch.Tensor
        cache: DynamicCache | None

        @property
        def past_key_values(self):  # the older name transformers' outputs still answer to
            return self.cache

    def _mask(attention_mask, b: int, t: int, past: int, device):
        """None where transformers' sdpa path needs none (no padding, and a whole prompt or one new token); else a
        boolean [b, 1, t, past + t] mask: causal, aligned to the end, and the padding's columns off."""
        padded = attention_mask is not None and not bool(attention_mask.all())
        if not padded and (past == 0 or t == 1):
            return None
        rows = torch.arange(past, past + t, device=device)[:, None]
        mask = (torch.arange(past + t, device=device)[None, :] <= rows)[None, None].expand(b, 1, t, past + t)
        if padded:
            mask = mask & attention_mask[:, None, None, -(past + t) :].bool()
        return mask

    class Qwen2(nn.Module):
        """Qwen2 for causal LM, transformers' names and forward; no training, no ``from_pretrained`` (``toolkit.small``
        fills it)."""

        def __init__(self, config):
            super().__init__()
            self.config = config
            self.model = Body(config)
            self.lm_head = _Linear(config.hidden_size, config.vocab_size, bias=False)
            d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
            self._inv_freq_args = (_rope_theta(config), d)
            self._wrapped: list = []  # transformers' class around these modules, once generate is called

        def get_input_embeddings(self):
            return self.model.embed_tokens

        def get_output_embeddings(self):
            return self.lm_head

        def _rope(self, position_ids, dtype):
            theta, d = self._inv_freq_args
            inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float) / d))
            freqs = position_ids[..., None].float() * inv_freq.to(position_ids.device)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]

        def forward(
            self,
            input_ids,
            attention_mask=None,
            position_ids=None,
            cache=None,
            past_key_values=None,
            use_cache=None,
            logits_to_keep=0,
            **_,
        ) -> Output:
            cache = cache if cache is not None else past_key_values
            use_cache = getattr(self.config, "use_cache", True) if use_cache is None else use_cache
            if use_cache and cache is None:
                cache = DynamicCache(config=self.config)
            b, t = input_ids.shape
            past = cache.get_seq_length() if cache is not None else 0
            if position_ids is None:
                position_ids = torch.arange(past, past + t, device=input_ids.device)[None]
            h = self.model.embed_tokens(input_ids)
            cos, sin = self._rope(position_ids, h.dtype)
            mask = _mask(attention_mask, b, t, past, h.device)
            for layer in self.model.layers:
                h = layer(h, cos, sin, mask, cache)
            h = self.model.norm(h)
            if logits_to_keep:
                h = h[:, -logits_to_keep:]
            return Output(self.lm_head(h), cache if use_cache else None)

        def transformers_model(self):
            """transformers' Qwen2ForCausalLM holding these same modules (no copy): built once, on first use."""
            if not self._wrapped:
                from transformers import AutoModelForCausalLM  # lazy: its modeling stack (torch._dynamo, ~185 MB)

                with torch.device("meta"):
                    tf = AutoModelForCausalLM.from_config(self.config, dtype=torch.float32)
                tf.model.embed_tokens, tf.model.norm, tf.lm_head = (
                    self.model.embed_tokens,
                    self.model.norm,
                    self.lm_head,
                )
                for theirs, ours in zip(tf.model.layers, self.model.layers, strict=True):
                    for part, names in (
                        ("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")),
                        ("mlp", ("gate_proj", "up_proj", "down_proj")),
                    ):
                        for name in names:
                            setattr(getattr(theirs, part), name, getattr(getattr(ours, part), name))
                    theirs.input_layernorm, theirs.post_attention_layernorm = (
                        ours.input_layernorm,
                        ours.post_attention_layernorm,
                    )
                tf.model.rotary_emb.__init__(self.config)  # its frequencies were made on meta
                if any(x.is_meta for x in list(tf.parameters()) + list(tf.buffers())):
                    raise ValueError("transformers' Qwen2 class has parts this module does not fill")
                if hasattr(self, "_quantized_values"):  # toolkit.small.count_params reads it
                    tf._quantized_values = self._quantized_values
                self._wrapped.append(tf.eval())
            return self._wrapped[0]

        def generate(self, *args, **kwargs):
            return self.transformers_model().generate(*args, **kwargs)

    return {k: v for k, v in locals().items() if isinstance(v, type)}
