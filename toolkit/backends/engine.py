"""A small decode engine for one sequence on a transformers Qwen2/Qwen3 causal LM: static KV cache, chunked
prefill, a one-token step replayed as a CUDA graph, prefix reuse across turns (book §14.5.3, §14.5.8).

What it does
- Reads the weights of a loaded Qwen2/Qwen3 model (no copy unless ``fuse``) and runs its forward pass itself,
  op for op as transformers writes it, over a KV cache allocated once (``max_len`` positions).
- Prefill runs in chunks of ``prefill_chunk`` tokens (causal attention aligned to the chunk's end).
- Decode is split into two fixed-shape steps: the *body* (embed the last token, every layer, logits; reads the
  position from a device tensor and advances it) and the *sampler* (grammar bitmask, temperature, argmax). On
  CUDA each is captured once as a CUDA graph and replayed per token; the body has one graph per KV-length
  bucket (256, 512, ... ``max_len``) so attention never reads more than ~2x the filled part of the cache.
- Decoding runs the one decode loop (``toolkit.backends.decode``) with this engine as its stepper (``_Run``): the
  host never waits on the GPU except to read a sampled token; the next body step is queued before the host looks
  at the current token, so checking stop ids and filling the grammar mask overlap GPU work. Unconstrained runs
  keep ``lookahead`` steps queued; a stop discards the few tokens computed past it.
- Tokens are picked by the one sampler (``toolkit.backends.sampling``: greedy, temperature, top-p, grammar
  bitmask unpacked on the device): on the CPU the same seed gives the same tokens as ``HFBackend``.
- Grammar masks: any object with ``allocate() / fill(bitmask) / accept(id) / is_terminated()`` (see
  ``toolkit.grammar.mask.GrammarMask``). The forward pieces are ``toolkit.backends.engine_steps`` and
  ``engine_math``.
- Prefix reuse: the cache keeps the ids it holds; a new prompt keeps the longest shared prefix (at least one
  token is always recomputed to get fresh logits) and prefills only the rest; a diverging prompt rolls back to
  the shared length. ``generate`` returns ``toolkit.backends.base.Generation`` (the backend protocol).
- ``compile=True`` (CUDA) fuses the per-layer pointwise work with ``torch.compile`` before capture;
  ``compile="gemv"`` also writes the one-row matmuls as multiply + sum so the compiler emits fused reductions
  (on an H200, 2026-12-04: 743 tokens/s against 602 for plain compile; the Triton body, `body=`, 1,142).
- Decode attention on CUDA: FlashAttention's variable-length call reading the used length from the device
  (``attention="flash"``); ``"matmul"`` and ``"sdpa"`` (masked) are the fallbacks. Prefill always uses sdpa
  (flash kernel, causal mask aligned bottom-right for a chunk that follows cached positions).

What it leaves out
- Batches, paged/multi-sequence caches, speculative decoding, top-k, repetition penalties.
- Sliding-window layers, dynamic RoPE scaling, architectures other than Qwen2/Qwen3 (an ``EngineError`` says so).
- Bit-exactness with ``model.generate``: on the CPU the same ops run in the same order, but chunk boundaries
  and padded attention change float rounding slightly (greedy tokens agree in the tests; near-ties could
  differ); the CUDA default (``fast``, flash attention) rounds differently again (bf16: tokens drift apart
  after a few dozen steps on random weights, as any two kernel choices do).
"""

from __future__ import annotations

import time

import torch

from toolkit.backends import sampling
from toolkit.backends.base import Generation
from toolkit.backends.decode import decode
from toolkit.backends.engine_math import EngineError, check_supported, layers_of, post, post_fast, pre, pre_fast
from toolkit.backends.engine_steps import EngineSteps, shared_prefix


# ---------------------------------------------------------------- the engine
class Engine(EngineSteps):
    """One sequence's decode engine. ``generate`` follows the backend protocol (``toolkit.backends.base``).

    ``graphs`` (default: on CUDA) captures the decode steps as CUDA graphs; ``compile`` fuses the decode step's
    layer math with torch.compile first; ``fuse`` concatenates q/k/v and gate/up weights (one matmul each, a copy
    of ~70% of the weights); ``fast`` (default: on CUDA; implies ``fuse``) uses fewer, fused kernels that round
    slightly differently from transformers; ``reuse`` keeps the shared prompt prefix across calls.
    """

    def __init__(
        self,
        model,
        *,
        max_len: int | None = None,
        prefill_chunk: int | None = None,
        graphs: bool | None = None,
        compile: bool = False,
        fuse: bool | None = None,
        fast: bool | None = None,
        attention: str | None = None,
        reuse: bool = True,
        min_bucket: int | None = None,
        lookahead: int = 4,
        body=None,
        name: str | None = None,
    ):
        check_supported(model)
        if body is not None and not callable(body):
            raise EngineError(f"body must be a factory engine -> decode body, not {type(body).__name__}")
        p = next(model.parameters())
        self.device, self.dtype = p.device, p.dtype
        cuda = self.device.type == "cuda"
        cfg = model.config
        self.graphs = cuda if graphs is None else bool(graphs)
        if self.graphs and not cuda:
            raise EngineError("CUDA graphs need a CUDA device; this model is on " + str(self.device))
        if compile not in (False, True, "gemv"):
            raise EngineError(f"compile must be False, True or 'gemv', not {compile!r}")
        self.compile, self.reuse, self.lookahead = bool(compile), bool(reuse), max(1, int(lookahead))
        self.fast = cuda if fast is None else bool(fast)
        self.gemv = compile == "gemv"
        if self.gemv and not self.fast:
            raise EngineError("compile='gemv' needs the fast kernels (fast=True, the CUDA default)")
        # Decode attention: FlashAttention (varlen, device length) where it runs (sm80+, fp16/bf16; fastest on an
        # H200: 11 µs vs 19 matmul vs 41 sdpa+mask per layer at 1k keys); else matmul on CUDA; sdpa on the CPU.
        flash_ok = (
            cuda
            and p.dtype in (torch.float16, torch.bfloat16)
            and torch.cuda.get_device_capability(self.device) >= (8, 0)
        )
        self.attention = attention or ("flash" if flash_ok else "matmul" if cuda else "sdpa")
        if self.attention not in ("sdpa", "matmul", "flash"):
            raise EngineError(f"attention must be 'sdpa', 'matmul' or 'flash', not {attention!r}")
        if self.attention == "flash" and not (cuda and p.dtype in (torch.float16, torch.bfloat16)):
            raise EngineError("attention='flash' needs a CUDA device and fp16/bf16 weights")
        self.fuse = self.fast or (cuda if fuse is None else bool(fuse))  # the fast path needs fused weights
        # Rounded up to a multiple of 64: attention kernels want aligned mask rows.
        self.max_len = -(-int(max_len or min(cfg.max_position_embeddings, 32768 if cuda else 4096)) // 64) * 64
        self.prefill_chunk = int(prefill_chunk or (4096 if cuda else 256))
        params = sum(x.numel() for x in model.parameters())
        self.name = name or f"{type(model).__name__} ({cfg.model_type}, {params / 1e6:.1f}M params)"
        self.vocab_width = int(model.get_output_embeddings().weight.shape[0])
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.eps = float(cfg.rms_norm_eps)
        attn0 = model.model.layers[0].self_attn
        self.scaling = float(getattr(attn0, "scaling", self.head_dim**-0.5))

        self.embed = model.model.embed_tokens.weight.detach()
        self.lm_head = model.get_output_embeddings().weight.detach()
        self.norm = model.model.norm.weight.detach()
        self.layers = layers_of(model, self.fuse)
        self.weight_bytes = sum(x.numel() * x.element_size() for x in model.parameters())

        dev, dt, L = self.device, self.dtype, self.max_len
        # RoPE tables for every position, computed like transformers' rotary embedding (fp32, then cast).
        rot = model.model.rotary_emb
        freqs = torch.arange(L, device=dev, dtype=torch.float32)[:, None] * rot.inv_freq.to(dev, torch.float32)
        emb = torch.cat((freqs, freqs), dim=-1)
        scale = float(getattr(rot, "attention_scaling", 1.0))
        self._cos, self._sin = (emb.cos() * scale).to(dt), (emb.sin() * scale).to(dt)
        if self.fast:  # rotate_half(x) * sin == roll(x, half) * (sin with its first half negated)
            half = self.head_dim // 2
            self._sin = torch.cat((-self._sin[:, :half], self._sin[:, half:]), dim=-1)
        # Zeros, not empty: masked positions are multiplied by 0 in attention, and 0 * NaN garbage is NaN.
        self.kv = torch.zeros(len(self.layers), 2, self.kv_heads, L, self.head_dim, device=dev, dtype=dt)

        # Static buffers the decode steps read and write (their addresses are baked into the graphs).
        self._tok = torch.zeros(1, dtype=torch.long, device=dev)
        self._pos = torch.zeros(1, dtype=torch.long, device=dev)
        self._logits = torch.zeros(self.vocab_width, dtype=torch.float32, device=dev)
        self._words = (self.vocab_width + 31) // 32
        self._bits = torch.zeros(self._words, dtype=torch.int32, device=dev)
        self._shifts = torch.arange(32, dtype=torch.int32, device=dev)
        self._noise = torch.ones(self.vocab_width, dtype=torch.float32, device=dev)
        self._temp = torch.ones(1, dtype=torch.float32, device=dev)
        self._top_p = torch.ones(1, dtype=torch.float32, device=dev)
        self._arange = torch.arange(L, device=dev)
        self._zero = torch.zeros((), dtype=dt, device=dev)
        self._ninf = torch.full((), float("-inf"), dtype=dt, device=dev)
        self._gen = torch.Generator(device=dev)
        ring = self.lookahead + 2
        self._ring = torch.zeros(ring, dtype=torch.long, pin_memory=cuda)
        self._events = [torch.cuda.Event() for _ in range(ring)] if cuda else None
        self._host_bits: dict[int, torch.Tensor] = {}

        # KV-length buckets: one body graph each, so decode attention reads at most ~2x the filled cache.
        b, self.buckets = int(min_bucket or (256 if cuda else 64)), []
        while b < L:
            self.buckets.append(b)
            b *= 2
        self.buckets.append(L)
        # FlashAttention's variable-length call: cumulative lengths (built here: no host->device copy in a capture).
        self._cu_q = torch.tensor([0, 1], dtype=torch.int32, device=dev)
        self._cu_k = {b: torch.tensor([0, b], dtype=torch.int32, device=dev) for b in self.buckets}
        # Plain functions for prefill (shapes vary); the decode step's may be compiled (one fixed shape).
        self._pre, self._post = (pre_fast, post_fast) if self.fast else (pre, post)
        self._pre_dec, self._post_dec = self._pre, self._post
        if self.compile:
            self._pre_dec = torch.compile(self._pre, fullgraph=True, dynamic=False)
            self._post_dec = torch.compile(self._post, fullgraph=True, dynamic=False)
        self._body_graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._sample_graphs: dict[tuple[bool, bool, bool], torch.cuda.CUDAGraph] = {}
        self._pool = torch.cuda.graph_pool_handle() if self.graphs else None
        self._ids: list[int] = []  # token ids whose keys/values are in self.kv[..., :len]
        self.captures_s = 0.0
        self._custom = None
        if body is not None:  # e.g. toolkit.backends.engine_triton.decoder(): its kernels replace _body's
            try:
                self._custom = body(self)
            except ValueError as exc:
                raise EngineError(str(exc)) from None

    @classmethod
    def from_loaded(cls, loaded, **kw) -> Engine:
        """An engine over ``toolkit.models.load(...)``'s model, named by its description (says STAND-IN)."""
        return cls(loaded.model, name=loaded.description, **kw)

    # ---------------------------------------------------------------- small helpers
    @property
    def mode(self) -> str:
        parts = [self.device.type, str(self.dtype).removeprefix("torch.")]
        comp = "compiled (gemv)" if self.gemv else "compiled"
        parts.append(
            f"{comp}+graph"
            if self.compile and self.graphs
            else "graph"
            if self.graphs
            else comp
            if self.compile
            else "eager"
        )
        parts.append(f"{self.attention} attention")
        if self._custom is not None:
            parts.append(self._custom.label)
        elif self.fast:
            parts.append("fast kernels")
        elif self.fuse:
            parts.append("fused qkv/gate-up")
        return ", ".join(parts)

    def describe(self) -> str:
        return f"toolkit.backends.engine [{self.mode}, cache {self.max_len} positions] over {self.name}"

    def reset(self) -> None:
        """Forget the cached prefix (the next call prefills its whole prompt)."""
        self._ids = []

    @property
    def cached_ids(self) -> list[int]:
        return list(self._ids)

    @torch.no_grad()
    def step(self, position: int, token: int = 0) -> torch.Tensor:
        """Run one decode step eagerly (no graph) for ``token`` at ``position`` and return its logits — for
        profiling and teaching; it writes that position's keys/values, so call ``reset()`` before reusing."""
        if not 0 <= position < self.max_len:
            raise EngineError(f"position {position} outside the cache (0..{self.max_len - 1})")
        self._tok.fill_(int(token))
        self._pos.fill_(int(position))
        self._body(self._bucket(position + 1))
        self._ids = self._ids[:position]
        return self._logits.clone()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _bucket(self, length: int) -> int:
        for b in self.buckets:
            if b >= length:
                return b
        raise EngineError(f"position {length} beyond the cache ({self.max_len})")

    # ---------------------------------------------------------------- CUDA graphs
    def _capture(self, fn, body_pos: int | None = None):
        """Warm ``fn`` up on a side stream, then capture it. For a body step at ``body_pos`` the warm-up's
        writes (that position's keys/values, the position counter) are put back afterwards."""
        t0 = time.perf_counter()
        self._sync()
        saved = None
        if body_pos is not None:
            self._pos.fill_(body_pos)
            saved = self.kv[:, :, :, body_pos].clone()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(2):  # cuBLAS handles, autotuning and compilation happen here, outside the capture
                fn()
                if body_pos is not None:
                    self._pos.fill_(body_pos)
        torch.cuda.current_stream(self.device).wait_stream(side)
        if saved is not None:
            self.kv[:, :, :, body_pos] = saved
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph, pool=self._pool):
            fn()
        self._sync()
        self.captures_s += time.perf_counter() - t0
        return graph

    def _run_body(self, bucket: int, pos_host: int) -> None:
        if not self.graphs:
            with torch.no_grad():
                self._body(bucket)
            return
        g = self._body_graphs.get(bucket)
        if g is None:
            g = self._body_graphs[bucket] = self._capture(lambda: self._body(bucket), pos_host)
        g.replay()

    def _run_sample(self, greedy: bool, masked: bool, nucleus: bool = False) -> None:
        key = (greedy, masked, nucleus and not greedy)
        if not self.graphs:
            with torch.no_grad():
                self._sample(*key)
            return
        g = self._sample_graphs.get(key)
        if g is None:
            g = self._sample_graphs[key] = self._capture(lambda: self._sample(*key))
        g.replay()

    def prepare(self, up_to: int | None = None) -> float:
        """Capture (compiling first, if asked) every graph a sequence of up to ``up_to`` positions needs, so
        no capture happens inside a timed run. Returns the seconds spent. No-op without graphs."""
        if not self.graphs:
            return 0.0
        before = self.captures_s
        for key in [
            (True, False, False),
            (True, True, False),
            (False, False, False),
            (False, True, False),
            (False, False, True),
            (False, True, True),
        ]:
            if key not in self._sample_graphs:
                self._sample_graphs[key] = self._capture(lambda key=key: self._sample(*key))
        top = self._bucket(min(int(up_to or self.max_len), self.max_len))
        for b in self.buckets:
            if b <= top and b not in self._body_graphs:
                self._body_graphs[b] = self._capture(lambda b=b: self._body(b), b - 1)
        return self.captures_s - before

    # ---------------------------------------------------------------- the backend protocol
    def generate(
        self,
        prompt_ids,
        *,
        max_new_tokens: int,
        stop_ids=frozenset(),
        mask=None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        on_token=None,
    ) -> Generation:
        """Prefill what the cache lacks of ``prompt_ids``, then decode up to ``max_new_tokens`` through the one
        decode loop (``toolkit.backends.decode``). ``new_ids`` include the stop token when one is hit;
        ``reused + prefilled`` is the prompt length; ``prefill_s``/``decode_s`` are wall-clock seconds (device
        synchronised at both ends). Raises :class:`EngineError` for an empty prompt, ids outside the vocabulary,
        or a prompt longer than the cache. ``on_token(id)``: each new id as the decode loop reads it."""
        prompt = self._check_ids(prompt_ids)
        stop_ids = {int(s) for s in (stop_ids or ())}
        self._sync()
        t0 = time.perf_counter()
        keep = shared_prefix(self._ids, prompt, len(prompt) - 1) if self.reuse else 0  # >= 1 token recomputed
        self._ids = prompt[:keep]  # roll back to the shared prefix before writing past it
        self._prefill(prompt[keep:], keep)
        self._ids = list(prompt)
        self._sync()
        t1 = time.perf_counter()

        P = len(prompt)
        limit = max(0, min(int(max_new_tokens), self.max_len - P + 1))
        run = _Run(self, P, limit, temperature, top_p, seed, mask)
        new, stopped = decode(run, max_new_tokens=limit, stop_ids=stop_ids, mask=mask, on_token=on_token)
        self._sync()
        t2 = time.perf_counter()
        self._ids = prompt + new[: min(run.bodies, len(new))]  # tokens whose keys/values the body steps wrote
        return Generation(new, keep, P - keep, t1 - t0, t2 - t1, stopped)


class _Run:
    """One ``generate`` call as a stepper of the decode loop: ``launch`` samples token i on the device (graph
    replay) and queues the body step that computes the logits after it before the host looks at the token, so
    checking stop ids and filling the next mask overlap GPU work; ``token`` waits for token i only."""

    def __init__(self, engine: Engine, P: int, limit: int, temperature: float, top_p: float, seed: int, mask):
        e = self.engine = engine
        self.P, self.limit, self.mask = P, limit, mask
        self.greedy, self.nucleus = temperature <= 0, top_p < 1.0
        self.bodies = 0
        self.host_bits = e._mask_bits(mask) if mask is not None else None
        if mask is not None:
            e._bits.zero_()  # words past the mask's own width stay 0: forbidden
        if not self.greedy:
            e._gen.manual_seed(int(seed))
            e._temp.fill_(float(temperature))
            e._top_p.fill_(float(top_p))
        e._pos.fill_(P)
        # Constrained: the host must accept token i before the mask for i+1 exists, so one step in flight.
        self.depth = e.lookahead if (mask is None and e._events is not None) else 1

    def launch(self, i: int, bitmask) -> None:
        e = self.engine
        if bitmask is not None:  # bitmask is self.host_bits (allocate below), filled by the mask
            w = min(bitmask.shape[-1], e._words)
            e._bits[:w].copy_(bitmask.view(-1)[:w], non_blocking=True)
        if not self.greedy:
            sampling.draw_noise(e._noise, e._gen, out=e._noise)
        e._run_sample(self.greedy, self.mask is not None, self.nucleus)
        R = len(e._ring)
        if e._events is not None:
            e._ring[i % R : i % R + 1].copy_(e._tok, non_blocking=True)
            e._events[i % R].record()
        else:
            e._ring[i % R] = e._tok[0]
        if i + 1 < self.limit:  # queue the next body step before the host looks at this token
            e._run_body(e._bucket(self.P + i + 1), self.P + i)
            self.bodies += 1

    def allocate(self, mask):
        return self.host_bits

    def token(self, i: int) -> int:
        e = self.engine
        slot = i % len(e._ring)
        if e._events is not None:
            e._events[slot].synchronize()
        return int(e._ring[slot])
