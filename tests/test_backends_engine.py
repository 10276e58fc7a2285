"""toolkit.backends.engine: same greedy tokens as model.generate, prefix reuse = fresh prefill, masks, sampling, errors."""

import math

import pytest
import torch

from toolkit.backends.engine import Engine
from toolkit.backends.engine_math import EngineError
from toolkit.backends.sampling import allowed_from_bitmask as allowed_tokens

torch.set_num_threads(1)


def _random_lm(flavor="qwen3", seed=0, tied=False, device="cpu", dtype=torch.float32, **cfg):
    """A random-weight Qwen-shaped model whose greedy path varies (the tied stand-in repeats its input token);
    ``cfg`` overrides the stand-in's config (tests/test_backends_engine_triton.py shrinks its vocabulary)."""
    from transformers import AutoModelForCausalLM

    from toolkit.stand_in import stand_in_config

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(stand_in_config(flavor, tie_word_embeddings=tied, **cfg), dtype=dtype)
    with torch.no_grad():
        model.get_input_embeddings().weight.normal_(0.0, 1.0)
        for name, p in model.named_parameters():
            if name.endswith("bias"):  # Qwen2 has q/k/v biases: make them matter
                p.normal_(0.0, 0.5)
    return model.to(device).eval()


def _prompt(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 151643, (n,), generator=g).tolist()


def _hf_greedy(model, prompt, n):
    dev = next(model.parameters()).device
    ids = torch.tensor([prompt], device=dev)
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


@pytest.fixture(scope="module")
def lm3():
    return _random_lm("qwen3")


@pytest.fixture(scope="module")
def lm3_ref(lm3):
    prompt = _prompt(40)
    return prompt, _hf_greedy(lm3, prompt, 24)


# ---------------------------------------------------------------- greedy = model.generate
def test_stand_in_greedy_matches_generate():
    from toolkit.models import stand_in

    model = stand_in()
    prompt = _prompt(33, seed=5)
    ref = _hf_greedy(model, prompt, 16)
    g = Engine(model).generate(prompt, max_new_tokens=16, stop_ids=set())
    assert g.new_ids == ref and g.stopped_by == "length"
    assert (g.reused, g.prefilled) == (0, 33)


@pytest.mark.parametrize("flavor", ["qwen3", "qwen2.5"])
@pytest.mark.parametrize("kernels", ["exact", "fused", "fast", "fast+matmul"])
def test_greedy_matches_generate(flavor, kernels, lm3, lm3_ref):
    """Exact (transformers' op order), fused q/k/v + gate/up weights, the fast kernels (the CUDA default), and
    decode attention written as matmul-softmax-matmul."""
    model = lm3 if flavor == "qwen3" else _random_lm("qwen2.5", seed=3)
    prompt, ref = lm3_ref if flavor == "qwen3" else (_prompt(40), _hf_greedy(model, _prompt(40), 24))
    assert len(set(ref)) > 10  # a path that actually moves, not one repeated token
    e = Engine(
        model,
        fuse=kernels != "exact",
        fast=kernels.startswith("fast"),
        prefill_chunk=16,
        attention="matmul" if kernels.endswith("matmul") else None,
    )
    assert e.fast == kernels.startswith("fast") and e.fuse == (kernels != "exact")
    assert e.generate(prompt, max_new_tokens=24, stop_ids=set()).new_ids == ref


@pytest.mark.parametrize("fast", [False, True])
def test_logits_match_forward(lm3, fast):
    """Prefill logits and the decode step's logits equal a plain forward pass (fp32, tight tolerance)."""
    e = Engine(lm3, fast=fast)
    prompt = _prompt(20, seed=9)
    g = e.generate(prompt, max_new_tokens=1, stop_ids=set())
    with torch.no_grad():
        ref = lm3(torch.tensor([prompt])).logits[0, -1]
    torch.testing.assert_close(e._logits, ref.float(), atol=2e-4, rtol=1e-4)
    e.generate(prompt, max_new_tokens=2, stop_ids=set())  # one body step: logits after new token 0
    with torch.no_grad():
        ref2 = lm3(torch.tensor([prompt + g.new_ids[:1]])).logits[0, -1]
    torch.testing.assert_close(e._logits, ref2.float(), atol=2e-4, rtol=1e-4)


def test_step_gives_forward_logits(lm3):
    e = Engine(lm3)
    prompt = _prompt(12, seed=8)
    e.generate(prompt, max_new_tokens=1, stop_ids=set())
    logits = e.step(len(prompt), token=77)
    with torch.no_grad():
        ref = lm3(torch.tensor([prompt + [77]])).logits[0, -1]
    torch.testing.assert_close(logits, ref.float(), atol=2e-4, rtol=1e-4)
    assert e.cached_ids == prompt  # the stepped position is not claimed as cached
    with pytest.raises(EngineError, match="outside the cache"):
        e.step(e.max_len)


def test_decode_crosses_kv_buckets(lm3):
    """A generation that crosses several KV-length buckets (64 -> 128 -> 256) keeps matching."""
    prompt = _prompt(100, seed=2)
    ref = _hf_greedy(lm3, prompt, 40)
    e = Engine(lm3, min_bucket=16, prefill_chunk=48)
    assert e.buckets[:4] == [16, 32, 64, 128]
    assert e.generate(prompt, max_new_tokens=40, stop_ids=set()).new_ids == ref


# ---------------------------------------------------------------- stopping, capacity, errors
def test_stop_token_ends_generation(lm3, lm3_ref):
    prompt, ref = lm3_ref
    k = 6
    stop = ref[k]
    first = ref.index(stop)
    g = Engine(lm3).generate(prompt, max_new_tokens=24, stop_ids={stop, -5})
    assert g.stopped_by == "stop" and g.new_ids == ref[: first + 1]


def test_cache_capacity_caps_length(lm3):
    e = Engine(lm3, max_len=64)
    g = e.generate(_prompt(60), max_new_tokens=50, stop_ids=set())
    assert e.max_len == 64 and len(g.new_ids) == 5 and g.stopped_by == "length"
    with pytest.raises(EngineError, match="does not fit"):
        e.generate(_prompt(65), max_new_tokens=1, stop_ids=set())


@pytest.mark.parametrize(
    "bad, msg", [([], "empty"), ([1, 151936], "outside"), ([1, -2], "outside"), (["x"], "integers")]
)
def test_bad_prompts_raise_engine_error(lm3, bad, msg):
    with pytest.raises(EngineError, match=msg):
        Engine(lm3, max_len=64).generate(bad, max_new_tokens=2, stop_ids=set())


def test_unsupported_model_is_refused():
    from transformers import AutoModelForCausalLM, GPT2Config

    gpt2 = AutoModelForCausalLM.from_config(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    with pytest.raises(EngineError, match="Qwen2/Qwen3"):
        Engine(gpt2)
    with pytest.raises(EngineError, match="CUDA"):
        Engine(_random_lm(), graphs=True)
    with pytest.raises(EngineError, match="CUDA"):
        Engine(_random_lm(), attention="flash")
    with pytest.raises(EngineError, match="attention must be"):
        Engine(_random_lm(), attention="paged")
    with pytest.raises(EngineError, match="fast kernels"):
        Engine(_random_lm(), compile="gemv", fast=False)


# ---------------------------------------------------------------- prefix reuse
@pytest.mark.parametrize("fast", [False, True])
def test_prefix_reuse_equals_fresh_prefill(lm3, fast):
    e = Engine(lm3, prefill_chunk=32, fast=fast)
    p1 = _prompt(50, seed=11)
    g1 = e.generate(p1, max_new_tokens=10, stop_ids=set())
    assert (g1.reused, g1.prefilled) == (0, 50)
    # Next turn extends the conversation: prompt + what was generated + new tokens.
    p2 = p1 + g1.new_ids + _prompt(15, seed=12)
    g2 = e.generate(p2, max_new_tokens=12, stop_ids=set())
    # The last generated token never ran through the model (length stop): it is prefilled with the new ones.
    assert (g2.reused, g2.prefilled) == (50 + 9, 1 + 15)
    fresh = Engine(lm3, prefill_chunk=32, fast=fast).generate(p2, max_new_tokens=12, stop_ids=set())
    assert g2.new_ids == fresh.new_ids == _hf_greedy(lm3, p2, 12)
    # A prompt that diverges after 20 tokens rolls the cache back to those 20.
    p3 = p1[:20] + _prompt(30, seed=13)
    g3 = e.generate(p3, max_new_tokens=12, stop_ids=set())
    assert (g3.reused, g3.prefilled) == (20, 30)
    assert g3.new_ids == Engine(lm3, fast=fast).generate(p3, max_new_tokens=12, stop_ids=set()).new_ids
    # The same prompt again: everything but the last token is reused.
    g4 = e.generate(p3, max_new_tokens=12, stop_ids=set())
    assert (g4.reused, g4.prefilled) == (49, 1) and g4.new_ids == g3.new_ids


def test_stop_token_is_cached_and_reuse_off(lm3, lm3_ref):
    prompt, ref = lm3_ref
    e = Engine(lm3)
    g = e.generate(prompt, max_new_tokens=24, stop_ids={ref[3]})
    n = len(g.new_ids)
    assert e.cached_ids == prompt + g.new_ids  # the stop token's keys/values were computed too
    g2 = e.generate(prompt + g.new_ids + [7, 8], max_new_tokens=3, stop_ids=set())
    assert (g2.reused, g2.prefilled) == (len(prompt) + n, 2)
    off = Engine(lm3, reuse=False)
    off.generate(prompt, max_new_tokens=3, stop_ids=set())
    g3 = off.generate(prompt + [7], max_new_tokens=3, stop_ids=set())
    assert (g3.reused, g3.prefilled) == (0, len(prompt) + 1)
    e.reset()
    assert e.generate(prompt, max_new_tokens=1, stop_ids=set()).reused == 0


# ---------------------------------------------------------------- sampling
def test_seeded_sampling_reproducible(lm3):
    e = Engine(lm3)
    prompt = _prompt(30, seed=4)
    a = e.generate(prompt, max_new_tokens=12, stop_ids=set(), temperature=1.0, seed=7).new_ids
    b = Engine(lm3).generate(prompt, max_new_tokens=12, stop_ids=set(), temperature=1.0, seed=7).new_ids
    c = e.generate(prompt, max_new_tokens=12, stop_ids=set(), temperature=1.0, seed=8).new_ids
    assert a == b and a != c


def test_sampler_follows_softmax(lm3):
    """The sampler (argmax of p / q, q ~ Exp(1)) draws token i with probability softmax(logits / T)_i."""
    e = Engine(lm3, max_len=64)
    logits = torch.full((e.vocab_width,), float("-inf"))
    support = torch.tensor([5, 900, 77_000, 151_000])
    logits[support] = torch.tensor([0.0, 1.0, 2.0, -1.0])
    T, n = 0.7, 4000
    e._logits.copy_(logits)
    e._temp.fill_(T)
    e._gen.manual_seed(0)
    counts = torch.zeros(4)
    for _ in range(n):
        e._noise.exponential_(generator=e._gen)
        e._sample(greedy=False, masked=False)
        counts[(support == int(e._tok)).nonzero()[0, 0]] += 1
    expected = torch.softmax(logits[support] / T, 0) * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 16.3  # 3 degrees of freedom, p = 0.001


# ---------------------------------------------------------------- grammar masks
def test_allowed_tokens_matches_xgrammar():
    import xgrammar as xgr

    V = 151_936
    g = torch.Generator().manual_seed(0)
    words = torch.randint(-(2**31), 2**31 - 1, (1, (V + 31) // 32), generator=g, dtype=torch.int64).to(torch.int32)
    logits = torch.randn(1, V, generator=g)
    xgr.apply_token_bitmask_inplace(logits, words)
    assert torch.equal(allowed_tokens(words, V), torch.isfinite(logits[0]))


class _XgrMask:
    """A minimal mask on xgrammar's GrammarMatcher (the protocol toolkit.grammar.mask.GrammarMask follows)."""

    def __init__(self, compiled, vocab):
        import xgrammar as xgr

        self.m, self.vocab, self.allowed_counts = xgr.GrammarMatcher(compiled), vocab, []

    def allocate(self):
        import xgrammar as xgr

        return xgr.allocate_token_bitmask(1, self.vocab)

    def fill(self, bitmask):
        self.m.fill_next_token_bitmask(bitmask, 0)
        self.allowed_counts.append(int(allowed_tokens(bitmask, self.vocab).sum()))

    def accept(self, t):
        return bool(self.m.accept_token(int(t)))

    def is_terminated(self):
        return bool(self.m.is_terminated())


@pytest.fixture(scope="module")
def number_grammar():
    import xgrammar as xgr

    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen3")
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=151_936, stop_token_ids=[151645])
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 999}},
        "required": ["n"],
        "additionalProperties": False,
    }
    return tok, xgr.GrammarCompiler(info).compile_json_schema(schema, any_whitespace=False)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_mask_is_respected(lm3, number_grammar, temperature):
    import json

    import xgrammar as xgr

    tok, compiled = number_grammar
    prompt = _prompt(25, seed=6)
    free = Engine(lm3).generate(prompt, max_new_tokens=20, stop_ids={151645}, temperature=temperature, seed=1)
    mask = _XgrMask(compiled, 151_936)
    g = Engine(lm3).generate(prompt, max_new_tokens=20, stop_ids={151645}, mask=mask, temperature=temperature, seed=1)
    assert g.new_ids != free.new_ids  # the mask changed what came out
    assert g.stopped_by in ("stop", "grammar") and g.new_ids[-1] == 151645
    replay = xgr.GrammarMatcher(compiled)
    assert all(replay.accept_token(t) for t in g.new_ids) and replay.is_terminated()
    assert "n" in json.loads(tok.decode(g.new_ids[:-1]))
    assert len(mask.allowed_counts) == len(g.new_ids) and min(mask.allowed_counts) < 1000


def test_masked_greedy_equals_host_backend(lm3, number_grammar):
    """The same mask through toolkit.backends.hf.HFBackend (xgrammar applies it on logits) gives the same tokens."""
    from toolkit.backends.hf import HFBackend

    _, compiled = number_grammar
    prompt = _prompt(25, seed=6)
    ours = Engine(lm3).generate(prompt, max_new_tokens=20, stop_ids={151645}, mask=_XgrMask(compiled, 151_936))
    ref = HFBackend(lm3).generate(prompt, max_new_tokens=20, stop_ids={151645}, mask=_XgrMask(compiled, 151_936))
    assert ours.new_ids == ref.new_ids and ours.stopped_by == ref.stopped_by


def test_host_loop_runs_on_engine_like_hf_backend(lm3):
    """The host loop (toolkit.loop.loop) with the engine as backend: same tokens per turn as its HFBackend."""
    from toolkit.backends.hf import HFBackend
    from toolkit.loop.examples import example
    from toolkit.loop.loop import run
    from toolkit.loop.steps import Generated
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer("qwen3")
    runs = []
    for backend in (Engine(lm3, name="random-weight qwen3 stand-in (mechanics only)"), HFBackend(lm3)):
        ex = example("weather")
        trace = run(
            backend,
            tok,
            ex["messages"],
            ex["tools"],
            template="qwen3",
            constrain="tag",
            max_turns=2,
            max_new_tokens=40,
            parallel=False,
        )
        runs.append([s.ids for s in trace.of(Generated)])
    assert runs[0] == runs[1] and runs[0]


# ---------------------------------------------------------------- compile (CPU: slow) and CUDA graphs
def test_gemv_formulation_matches_linear():
    """compile="gemv" writes the decode step's matmuls as multiply + sum: same function as F.linear."""
    from toolkit.backends.engine_math import post_fast, pre_fast

    g = torch.Generator().manual_seed(0)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    h, add, ln = r(1, 64), r(1, 64), r(64)
    wqkv, bqkv, qkn, cos, sin = r(8 * 16, 64), r(8 * 16), r(6, 16), r(1, 1, 16), r(1, 1, 16)
    a = pre_fast(h, add, ln, wqkv, bqkv, qkn, cos, sin, 1e-6, 4, 2, 16, gemv=False)
    b = pre_fast(h, add, ln, wqkv, bqkv, qkn, cos, sin, 1e-6, 4, 2, 16, gemv=True)
    o, wo, wgu, wd = r(1, 64), r(64, 64), r(256, 64), r(64, 128)
    c = post_fast(h, o, wo, None, ln, wgu, wd, 1e-6, gemv=False)
    d = post_fast(h, o, wo, None, ln, wgu, wd, 1e-6, gemv=True)
    for x, y in zip(a + c, b + d):
        torch.testing.assert_close(x, y, atol=1e-4, rtol=1e-4)
    assert a[2].shape == (2, 1, 2, 16)  # stacked (key, value) of the one token


@pytest.mark.slow
@pytest.mark.parametrize("mode", [True, "gemv"])
def test_compiled_steps_give_same_tokens(lm3, lm3_ref, mode):
    prompt, ref = lm3_ref
    e = Engine(lm3, compile=mode, fast=True)
    assert e.generate(prompt, max_new_tokens=24, stop_ids=set()).new_ids == ref


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(
    "dtype, attention",
    [
        (torch.float32, "sdpa"),
        (torch.float32, "matmul"),
        (torch.bfloat16, "sdpa"),
        (torch.bfloat16, "matmul"),
        (torch.bfloat16, "flash"),
    ],
)
def test_cuda_graph_equals_eager(dtype, attention):
    model = _random_lm("qwen3", device="cuda", dtype=dtype)
    prompt = _prompt(240, seed=3)  # decode crosses the 256 -> 512 bucket
    eager = Engine(model, graphs=False, min_bucket=256, attention=attention)
    graph = Engine(model, graphs=True, min_bucket=256, attention=attention)
    for kw in (dict(), dict(temperature=0.8, seed=3)):
        a = eager.generate(prompt, max_new_tokens=40, stop_ids=set(), **kw)
        b = graph.generate(prompt, max_new_tokens=40, stop_ids=set(), **kw)
        assert a.new_ids == b.new_ids
    if dtype == torch.float32:
        assert a.new_ids and eager.generate(prompt, max_new_tokens=40, stop_ids=set()).new_ids == _hf_greedy(
            model, prompt, 40
        )
    # Prefix reuse on the graph path: same tokens as the eager path.
    p2 = prompt + b.new_ids + _prompt(20, seed=4)
    r = graph.generate(p2, max_new_tokens=20, stop_ids=set())
    assert r.reused > len(prompt) and r.new_ids == eager.generate(p2, max_new_tokens=20, stop_ids=set()).new_ids
    # Same function as sdpa attention over a fresh single-chunk prefill (to rounding): checks the decode step
    # and a reused prefill (a chunk starting at position > 0: bottom-right causal alignment).
    ref = Engine(model, graphs=False, attention="sdpa", fast=False)
    for p in (prompt, p2):
        ref.reset()
        ref.generate(p, max_new_tokens=2, stop_ids=set())
        graph.generate(p, max_new_tokens=2, stop_ids=set())
        torch.testing.assert_close(graph._logits, ref._logits, atol=5e-2, rtol=5e-2)


# ---------------------------------------------------------------- the real offline model
@pytest.mark.real_model
def test_real_model_greedy_matches_generate():
    from toolkit.models import load
    from toolkit.render import render

    loaded = load("qwen2.5-coder-0.5b", device="cpu", dtype=torch.float32, quiet=True)
    msgs = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    prompt = list(render(msgs, template="qwen2.5", tokenizer=loaded.tokenizer).ids)
    ref = _hf_greedy(loaded.model, prompt, 20)
    e = Engine.from_loaded(loaded)
    g = e.generate(prompt, max_new_tokens=20, stop_ids=set())
    assert g.new_ids == ref
    assert math.isfinite(g.decode_s) and "Qwen2.5-Coder" in e.describe()
    # Reuse on the next turn equals a fresh prefill.
    p2 = (
        prompt
        + g.new_ids
        + loaded.tokenizer.encode("<|im_end|>\n<|im_start|>user\nAnd three?<|im_end|>\n<|im_start|>assistant\n")
    )
    r = e.generate(p2, max_new_tokens=12, stop_ids={151645})
    assert r.reused == len(prompt) + 19
    assert r.new_ids == Engine(loaded.model).generate(p2, max_new_tokens=12, stop_ids={151645}).new_ids
