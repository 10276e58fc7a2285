"""The Qwen2/Qwen3 forward pass written op for op, for ``toolkit.backends.engine``.

What it does
- RMSNorm, RoPE, the per-layer pre/post functions (plain and the fused "fast" variants), weight gathering into
  :class:`_Layer` records, the check that a model is
  one the engine supports (``EngineError`` otherwise).

What it leaves out
- Sliding-window layers, dynamic RoPE scaling, other architectures.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


class EngineError(ValueError):
    """Bad input or an unsupported model; ``str(e)`` is one readable line."""


# ---------------------------------------------------------------- the model's math (as transformers writes it)
def rms_scale(x, w, eps):
    xf = x.to(torch.float32)
    var = xf.pow(2).mean(-1, keepdim=True)
    return w * (xf * torch.rsqrt(var + eps)).to(x.dtype)


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return (x * cos) + (rotated * sin)


def _lin(x, w, b=None, gemv=False):
    """x @ w.T (+ b). ``gemv``: written as multiply + sum over K so torch.compile emits one fused reduction that
    reads the weight once (a one-row matmul is memory-bound; cuBLAS picks poor kernels for some of these shapes)."""
    if not gemv:
        return F.linear(x, w, b)
    y = (x.unsqueeze(-2).float() * w.float()).sum(-1).to(x.dtype)
    return y if b is None else y + b


def pre(h, add, ln, wq, bq, wk, bk, wv, bv, qn, kn, cos, sin, eps, heads, kv_heads, head_dim):
    """Residual add (of the previous layer's MLP output), norm, q/k/v, q/k norms, RoPE -> (h, q, stack(k, v)).
    ``wk is None``: q/k/v weights are fused into ``wq``."""
    if add is not None:
        h = h + add
    x = rms_scale(h, ln, eps)
    if wk is None:  # one matmul for q, k and v (concatenated weights)
        q, k, v = F.linear(x, wq, bq).split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], -1)
    else:
        q, k, v = F.linear(x, wq, bq), F.linear(x, wk, bk), F.linear(x, wv, bv)
    s = x.shape[0]
    q, k, v = q.reshape(s, heads, head_dim), k.reshape(s, kv_heads, head_dim), v.reshape(s, kv_heads, head_dim)
    if qn is not None:  # Qwen3 normalises each head's q and k
        q, k = rms_scale(q, qn, eps), rms_scale(k, kn, eps)
    return h, _rope(q, cos, sin), torch.stack((_rope(k, cos, sin), v))


def post(h, o, wo, bo, ln, wg, wu, wd, eps):
    """Attention output projection + residual, norm, MLP. Returns (residual, mlp_out); ``wu is None`` = fused."""
    h = h + F.linear(o, wo, bo)
    x = rms_scale(h, ln, eps)
    if wu is None:
        g, u = F.linear(x, wg).chunk(2, dim=-1)
    else:
        g, u = F.linear(x, wg), F.linear(x, wu)
    return h, F.linear(F.silu(g) * u, wd)


def pre_fast(h, add, ln, wqkv, bqkv, qkn, cos, ssin, eps, heads, kv_heads, head_dim, gemv=False):
    """The same layer start with fewer kernels (CUDA default): fused RMSNorm kernels, q and k normed and rotated
    together, RoPE as roll + one multiply-add (``ssin`` = sin with the first half negated). Rounds differently
    from ``pre`` in the last bit; used for both the eager and the graph path, so those two still agree."""
    if add is not None:
        h = h + add
    x = F.rms_norm(h, (h.shape[-1],), ln, eps)
    qkv = _lin(x, wqkv, bqkv, gemv)
    s, n = x.shape[0], heads + kv_heads
    qk = qkv[:, : n * head_dim].reshape(s, n, head_dim)
    v = qkv[:, n * head_dim :].reshape(s, kv_heads, head_dim)
    if qkn is not None:  # per-head q/k norms (Qwen3); qkn stacks q_norm's weight H times and k_norm's KV times
        qk = F.rms_norm(qk, (head_dim,), None, eps) * qkn
    qk = torch.addcmul(qk * cos, qk.roll(head_dim // 2, -1), ssin)
    return h, qk[:, :heads], torch.stack((qk[:, heads:], v))


def post_fast(h, o, wo, bo, ln, wgu, wd, eps, gemv=False):
    h = h + _lin(o, wo, bo, gemv)
    g, u = _lin(F.rms_norm(h, (h.shape[-1],), ln, eps), wgu, None, gemv).chunk(2, dim=-1)
    return h, _lin(F.silu(g) * u, wd, None, gemv)


@dataclass
class _Layer:
    ln1: torch.Tensor
    wq: torch.Tensor
    bq: torch.Tensor | None
    wk: torch.Tensor | None
    bk: torch.Tensor | None
    wv: torch.Tensor | None
    bv: torch.Tensor | None
    qn: torch.Tensor | None
    kn: torch.Tensor | None
    wo: torch.Tensor
    bo: torch.Tensor | None
    ln2: torch.Tensor
    wg: torch.Tensor
    wu: torch.Tensor | None
    wd: torch.Tensor
    qkn: torch.Tensor | None = None  # fast path: [heads + kv_heads, head_dim] q/k norm weights


def _bias(lin):
    return None if lin.bias is None else lin.bias.detach()


def layers_of(model, fuse: bool) -> list[_Layer]:
    out = []
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        q, k, v = a.q_proj.weight.detach(), a.k_proj.weight.detach(), a.v_proj.weight.detach()
        bq, bk, bv = _bias(a.q_proj), _bias(a.k_proj), _bias(a.v_proj)
        g, u = m.gate_proj.weight.detach(), m.up_proj.weight.detach()
        if fuse:
            q, k, v = torch.cat([q, k, v]), None, None
            bq, bk, bv = (None if bq is None else torch.cat([bq, bk, bv])), None, None
            g, u = torch.cat([g, u]), None
        qn = getattr(a, "q_norm", None)
        kn = getattr(a, "k_norm", None)
        qkn = (
            None
            if qn is None
            else torch.cat(
                [
                    qn.weight.detach().expand(a.config.num_attention_heads, -1),
                    kn.weight.detach().expand(a.config.num_key_value_heads, -1),
                ]
            )
        )
        out.append(
            _Layer(
                layer.input_layernorm.weight.detach(),
                q,
                bq,
                k,
                bk,
                v,
                bv,
                None if qn is None else qn.weight.detach(),
                None if kn is None else kn.weight.detach(),
                a.o_proj.weight.detach(),
                _bias(a.o_proj),
                layer.post_attention_layernorm.weight.detach(),
                g,
                u,
                m.down_proj.weight.detach(),
                qkn,
            )
        )
    return out


def check_supported(model) -> None:
    cfg = model.config
    if getattr(cfg, "model_type", "") not in ("qwen2", "qwen3"):
        raise EngineError(f"toolkit.backends.engine runs Qwen2/Qwen3 models only, not model_type={cfg.model_type!r}")
    if "sliding_attention" in (getattr(cfg, "layer_types", None) or []):
        raise EngineError("toolkit.backends.engine has no sliding-window attention; this config uses it")
    rope = getattr(model.model.rotary_emb, "rope_type", "default")
    if rope not in ("default", "linear", "yarn", "llama3"):  # static inv_freq only
        raise EngineError(f"toolkit.backends.engine supports static RoPE only, not rope_type={rope!r}")
    if getattr(cfg, "hidden_act", "silu") != "silu":
        raise EngineError(f"toolkit.backends.engine expects a SiLU MLP, not hidden_act={cfg.hidden_act!r}")
