"""The agent loop's arithmetic: context growth, prefill with and without a prefix cache, p^k, FLOPs, bandwidth.

What it does (book §14.5.3 and §14.5.4)
- ``growth(T, delta, R, warm=True)`` walks the loop turn by turn: the prefix at turn k is ``T + delta*k``;
  without a cache every turn prefills its whole prefix, with a fully hitting prefix cache only the new
  ``delta`` tokens (``warm``: the tool block is already cached from earlier requests; cold: turn 1 also pays
  for ``T``). It returns per-turn and cumulative lists plus totals and the ratio. ``total_no_cache`` and
  ``ratio_closed`` give the same numbers in closed form (``R*T + delta*R(R+1)/2`` and ``T/delta + (R+1)/2``);
  tests check that the walk and the formulas agree.
- ``success(p, k)``, ``success_table(ps, ks)`` (table 14-11), ``required_p(P, k)`` (the inverse:
  ``P**(1/k)``) and ``steps_per_error(p)``.
- ``decode_flops(active_params, tokens)`` (≈ 2 × active parameters per token, §3.8.8's rule),
  ``attention_flops_per_token`` (what that rule leaves out: reading the context), ``bandwidth_tokens_per_s``
  (each decoded token streams every active weight once, so bandwidth / bytes-per-token bounds batch-1 speed).
- ``MODELS`` and ``HARDWARE``: the presets the calculator offers (published sizes and spec-sheet bandwidths).
- ``capacity(model, memory, bandwidth, T, delta, R)``: how many agent sessions of that workload fit in a server's
  KV-cache memory, with and without prefix sharing, and their aggregate decode-rate bound (``KV_SHAPES``:
  published layer / KV-head / head-dim counts). ``calibrated_rates`` is the same rate bound calibrated to one
  measured batch-1 rate, for N concurrent sessions (``benchmarks/classroom.py`` prints it beside its measurement).

What it leaves out
- Partial cache hits, eviction, chunked prefill, batching (batch > 1 reuses each weight read for many tokens,
  so the bandwidth bound is per sequence at batch 1 only), KV-cache reads in the bandwidth bound unless you pass
  ``kv_bytes``, and any dependence between steps in p^k (the book calls it an upper-bound model).
- The bounds count every parameter as read (and as 2 FLOPs) per token; an untied input embedding is really only
  looked up one row at a time, so for Llama 3 8B the weights streamed are ~7.5B, not 8.03B (the bound is ~7% low).
"""

from __future__ import annotations

from dataclasses import dataclass, field


# ---------------------------------------------------------------- context growth (§14.5.3, fig 14-10)
@dataclass(frozen=True)
class Growth:
    """One agent loop of ``R`` turns, tool block ``T`` tokens, ``delta`` new tokens per turn."""

    T: int
    delta: int
    R: int
    warm: bool = True
    turns: list[int] = field(default_factory=list)  # 1..R
    prefix: list[int] = field(default_factory=list)  # prefix length prefilled at turn k: T + delta*k
    computed: list[int] = field(default_factory=list)  # what the cache run actually computes at turn k
    from_cache: list[int] = field(default_factory=list)  # prefix - computed: served from the prefix cache
    cum_no_cache: list[int] = field(default_factory=list)
    cum_cache: list[int] = field(default_factory=list)

    @property
    def total_no_cache(self) -> int:
        return self.cum_no_cache[-1] if self.cum_no_cache else 0

    @property
    def total_cache(self) -> int:
        return self.cum_cache[-1] if self.cum_cache else 0

    @property
    def ratio(self) -> float:
        return self.total_no_cache / self.total_cache if self.total_cache else float("nan")

    def rows(self) -> list[dict]:
        """One dict per turn (for CSV/JSON and tables)."""
        return [
            dict(
                turn=k,
                prefix=p,
                computed_with_cache=c,
                served_from_cache=s,
                cumulative_no_cache=a,
                cumulative_with_cache=b,
            )
            for k, p, c, s, a, b in zip(
                self.turns, self.prefix, self.computed, self.from_cache, self.cum_no_cache, self.cum_cache
            )
        ]

    def summary(self) -> dict:
        return dict(
            T=self.T,
            delta=self.delta,
            R=self.R,
            warm=self.warm,
            total_no_cache=self.total_no_cache,
            total_cache=self.total_cache,
            ratio=self.ratio,
            ratio_closed=ratio_closed(self.T, self.delta, self.R, self.warm),
            constant_term=self.T / self.delta,
        )


def _check(T: int, delta: int, R: int) -> None:
    if T < 0 or delta <= 0 or R <= 0:
        raise ValueError(f"need T >= 0, delta > 0, R > 0; got T={T}, delta={delta}, R={R}")


def growth(T: int = 10_000, delta: int = 2048, R: int = 30, warm: bool = True) -> Growth:
    """Walk the loop turn by turn (the sum, not the formula). Defaults are the book's fig 14-10 setting."""
    _check(T, delta, R)
    turns, prefix, computed, cached, cum_a, cum_b = [], [], [], [], [], []
    a = b = 0
    for k in range(1, R + 1):
        p = T + delta * k
        # with a full hit, only this turn's new tokens are new; cold, the first request also builds the tool block
        c = delta + (T if (k == 1 and not warm) else 0)
        a += p
        b += c
        turns.append(k), prefix.append(p), computed.append(c), cached.append(p - c)
        cum_a.append(a), cum_b.append(b)
    return Growth(T, delta, R, warm, turns, prefix, computed, cached, cum_a, cum_b)


def total_no_cache(T: int, delta: int, R: int) -> int:
    """Closed form of Σ_{k=1..R} (T + delta*k)."""
    _check(T, delta, R)
    return R * T + delta * R * (R + 1) // 2


def total_cache(T: int, delta: int, R: int, warm: bool = True) -> int:
    _check(T, delta, R)
    return delta * R + (0 if warm else T)


def ratio_closed(T: int, delta: int, R: int, warm: bool = True) -> float:
    """``T/delta + (R+1)/2`` when warm (the book's formula); the exact quotient of the closed forms when cold."""
    if warm:
        return T / delta + (R + 1) / 2
    return total_no_cache(T, delta, R) / total_cache(T, delta, R, warm=False)


# ---------------------------------------------------------------- errors compound (§14.5.4, table 14-11)
BOOK_PS = (0.99, 0.95, 0.90)
BOOK_KS = (10, 20, 50)


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a probability must be in [0, 1], got {p}")


def success(p: float, k: int) -> float:
    """Overall success of ``k`` independent serial steps each succeeding with ``p``."""
    _check_p(p)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return p**k


def success_table(ps=BOOK_PS, ks=BOOK_KS) -> list[dict]:
    """Rows ``{"p": p, k1: p**k1, ...}``; with the defaults this is table 14-11 unrounded."""
    return [{"p": p, **{k: success(p, k) for k in ks}} for p in ps]


def required_p(P: float, k: int) -> float:
    """The per-step success needed for overall ``P`` over ``k`` steps: ``P**(1/k)``."""
    _check_p(P)
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k}")
    return P ** (1.0 / k)


def steps_per_error(p: float) -> float:
    """Expected steps between errors, ``1/(1-p)``."""
    _check_p(p)
    return float("inf") if p == 1.0 else 1.0 / (1.0 - p)


# ---------------------------------------------------------------- decode FLOPs and bandwidth (§14.5.3)
@dataclass(frozen=True)
class ModelSpec:
    """Published sizes. ``attn_width`` = heads × head dim of the queries (for the attention term)."""

    name: str
    active_params: float  # parameters used per token (all of them for a dense model)
    total_params: float
    layers: int
    attn_width: int
    note: str = ""


MODELS = {
    "Llama 3 8B": ModelSpec("Llama 3 8B", 8.03e9, 8.03e9, 32, 32 * 128, "dense; the book rounds to 8B"),
    "DeepSeek-V3 (37B active)": ModelSpec(
        "DeepSeek-V3 (37B active)",
        37e9,
        671e9,
        61,
        128 * 128,
        "MoE: 37B of 671B active per token; MLA attention (width here is heads × value dim, a simplification)",
    ),
    "Qwen3-0.6B": ModelSpec(
        "Qwen3-0.6B", 0.596e9, 0.596e9, 28, 16 * 128, "dense; 0.44B without the tied 151,936 × 1,024 embedding"
    ),
}

# Memory bandwidth from vendor spec sheets, in bytes/s.
HARDWARE = {
    "NVIDIA H200 (4.8 TB/s)": 4.8e12,
    "NVIDIA H100 SXM (3.35 TB/s)": 3.35e12,
    "NVIDIA A100 80GB (2.0 TB/s)": 2.039e12,
    "RTX 4090 (1.0 TB/s)": 1.008e12,
    "Apple M2 Max (400 GB/s)": 4.0e11,
    "DDR5-5600 dual channel (90 GB/s)": 8.96e10,
}


def decode_flops_per_token(active_params: float) -> float:
    """≈ 2 × active parameters: one multiply and one add per weight per token (§3.8.8's rule)."""
    if active_params <= 0:
        raise ValueError("active_params must be > 0")
    return 2.0 * active_params


def decode_flops(active_params: float, tokens: int) -> float:
    return decode_flops_per_token(active_params) * tokens


def attention_flops_per_token(layers: int, attn_width: int, context: int) -> float:
    """What the 2N rule leaves out: scoring ``context`` keys and mixing their values, per decoded token.

    Per layer that is two matrix-vector products of width ``attn_width`` over ``context`` positions, each a
    multiply and an add: ``4 * layers * attn_width * context``.
    """
    return 4.0 * layers * attn_width * context


def bytes_per_token(active_params: float, bytes_per_param: float = 2.0, kv_bytes: float = 0.0) -> float:
    """Bytes a batch-1 decode step must read: every active weight once, plus the KV cache if given."""
    return active_params * bytes_per_param + kv_bytes


def bandwidth_tokens_per_s(
    active_params: float, bandwidth: float, bytes_per_param: float = 2.0, kv_bytes: float = 0.0
) -> float:
    """Upper bound on batch-1 decode speed: bandwidth (bytes/s) / bytes read per token."""
    if bandwidth <= 0:
        raise ValueError("bandwidth must be > 0")
    return bandwidth / bytes_per_token(active_params, bytes_per_param, kv_bytes)


def arithmetic_intensity(active_params: float, bytes_per_param: float = 2.0, batch: int = 1) -> float:
    """FLOPs per byte of a decode step: ~1 at batch 1 in bf16, far below any accelerator's ridge point."""
    return decode_flops_per_token(active_params) * batch / bytes_per_token(active_params, bytes_per_param)


@dataclass(frozen=True)
class DecodeBudget:
    model: str
    tokens: int
    flops_per_token: float
    total_flops: float
    bytes_per_param: float
    bandwidth: float
    tokens_per_s_bound: float
    seconds_floor: float


def decode_budget(
    model: str | ModelSpec, tokens: int = 15_000, bandwidth: float = 3.35e12, bytes_per_param: float = 2.0
) -> DecodeBudget:
    """The calculator's whole answer for one model: FLOPs per token, total FLOPs, the bandwidth bound."""
    spec = MODELS[model] if isinstance(model, str) else model
    tps = bandwidth_tokens_per_s(spec.active_params, bandwidth, bytes_per_param)
    return DecodeBudget(
        spec.name,
        tokens,
        decode_flops_per_token(spec.active_params),
        decode_flops(spec.active_params, tokens),
        bytes_per_param,
        bandwidth,
        tps,
        tokens / tps,
    )


# ---------------------------------------------------------------- classroom capacity (§14.5.8: one server, many loops)
# Published shapes: (parameters, layers, KV heads, head dim); the KV cache holds a key and a value per layer per KV
# head. Qwen2.5-Coder-0.5B as the kit serves it offline: 630M parameters (its output head is not tied).
KV_SHAPES = {
    "Qwen3-0.6B": (0.596e9, 28, 8, 128),
    "Llama 3 8B": (8.03e9, 32, 8, 128),
    "Qwen2.5-Coder-0.5B": (0.63e9, 24, 2, 64),
}


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float = 2.0) -> float:
    """Bytes of KV cache one token occupies: a key and a value per layer and KV head."""
    return 2.0 * layers * kv_heads * head_dim * bytes_per_value


@dataclass(frozen=True)
class Capacity:
    model: str
    kv_per_token: float
    context: int  # a session's longest context: T + delta*R
    free_bytes: float  # memory left for the KV cache after the weights (and the reserve)
    sessions: int  # sessions that fit, each holding its own copy of the tool block
    sessions_shared: int  # the T-token tool block stored once and shared (prefix sharing)
    tokens_per_s: float  # aggregate decode-rate bound with `sessions` running (bandwidth model)
    tokens_per_s_shared: float


def capacity(model: str = "Qwen3-0.6B", memory: float = 141e9, bandwidth: float = 4.8e12, T: int = 10_000,
             delta: int = 2048, R: int = 30, bytes_per_param: float = 2.0, reserve: float = 0.1) -> Capacity:  # fmt: skip
    """How many agent sessions of the chapter's workload (T, Δ, R) fit in a GPU's KV-cache memory, with and without
    prefix sharing, and the aggregate decode rate they get.

    Memory: ``memory * (1 - reserve)`` minus the weights is KV cache; a session at its longest holds ``T + Δ·R``
    tokens; with prefix sharing the tool block is stored once. Rate: each decode step streams the weights once
    for the whole batch plus every session's KV at its mean length ``T + Δ·R/2`` (shared: the block once), so
    ``n · bandwidth / (weight bytes + KV bytes read)`` — a bound, like ``bandwidth_tokens_per_s``.
    """
    _check(T, delta, R)
    if model not in KV_SHAPES:
        raise ValueError(f"unknown model {model!r}; choose one of {sorted(KV_SHAPES)}")
    if memory <= 0 or bandwidth <= 0 or not 0 <= reserve < 1:
        raise ValueError("memory and bandwidth must be > 0 and reserve in [0, 1)")
    params, *shape = KV_SHAPES[model]
    kv = kv_bytes_per_token(*shape)
    weights = params * bytes_per_param
    free = max(0.0, memory * (1 - reserve) - weights)
    ctx = T + delta * R
    plain = int(free // (ctx * kv))
    shared = int(max(0.0, free - T * kv) // (delta * R * kv)) if free > T * kv else 0
    mean = T + delta * R / 2
    return Capacity(
        model,
        kv,
        ctx,
        free,
        plain,
        shared,
        aggregate_rate(plain, bandwidth, weights, kv * mean),
        aggregate_rate(shared, bandwidth, weights, kv * (mean - T), shared_bytes=kv * T),
    )


def aggregate_rate(n: int, bandwidth: float, weight_bytes: float, kv_bytes: float, shared_bytes: float = 0.0) -> float:
    """The decode-rate bound of ``n`` sessions batched together: each step streams the weights once for all of
    them, every session's own KV bytes, and a shared block once: ``n · bandwidth / (W + shared + n · KV)``."""
    return n * bandwidth / (weight_bytes + shared_bytes + n * kv_bytes) if n else 0.0


def calibrated_rates(model: str, rate_1: float, ns, context: float, bytes_per_param: float = 2.0) -> list[dict]:
    """What :func:`capacity`'s rate bound predicts for ``n`` concurrent sessions on a machine whose batch-1 rate was
    measured (``rate_1`` tokens/s at ``context`` tokens of KV): the effective bandwidth is
    ``rate_1 · (W + KV(context))``; ``batched`` is :func:`aggregate_rate` with it (a server that batches the
    sessions), ``serial`` is ``rate_1`` (a server that runs one request at a time)."""
    if model not in KV_SHAPES:
        raise ValueError(f"unknown model {model!r}; choose one of {sorted(KV_SHAPES)}")
    if rate_1 <= 0 or context <= 0:
        raise ValueError("rate_1 and context must be > 0")
    params, *shape = KV_SHAPES[model]
    w, kv = params * bytes_per_param, kv_bytes_per_token(*shape) * context
    bandwidth = rate_1 * (w + kv)
    return [
        dict(sessions=n, batched=aggregate_rate(n, bandwidth, w, kv), serial=rate_1, bandwidth=bandwidth) for n in ns
    ]
