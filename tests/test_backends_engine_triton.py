"""toolkit.backends.engine_triton: each kernel against torch, and the engine's Triton decode body against the torch
body and ``model.generate``. On the CPU they run under Triton's interpreter (fp32; set before triton is imported);
on a CUDA machine (a lent GPU) compiled, with CUDA graphs and programmatic dependent launch too."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

CUDA = torch.cuda.is_available()
# On the CPU the kernels run under Triton's interpreter, which must be switched on before triton's first import in
# the process; in a test worker another module may have imported triton already (torch.compile does). So there the
# tests run in a child process of their own (``test_kernels_under_the_interpreter``) with TRITON_INTERPRET=1 from
# the start, and the worker's copies of them are skipped as run there.
CHILD = os.environ.get("TOOLKIT_TRITON_CHILD") == "1"
PARENT = not CUDA and not CHILD
pytest.importorskip("triton", reason="triton is GPU-side and optional: `pip install triton` to check its kernels here")

import torch.nn.functional as F  # noqa: E402

# tests/ is on sys.path (not a package); that module imports neither triton nor torch.compile
from test_backends_engine import _hf_greedy, _random_lm  # noqa: E402

from toolkit.backends import engine_triton as et  # noqa: E402
from toolkit.backends.engine import Engine  # noqa: E402
from toolkit.backends.engine_math import EngineError  # noqa: E402


@pytest.fixture(autouse=True)
def _in_the_child(request):
    if PARENT and request.node.name != "test_kernels_under_the_interpreter":
        pytest.skip("run by test_kernels_under_the_interpreter in a process with TRITON_INTERPRET=1")
    yield


def test_kernels_under_the_interpreter():
    """This module's CPU tests, in a fresh process where Triton's interpreter is on before triton is imported."""
    if not PARENT:
        pytest.skip("this process runs the kernels itself")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "TOOLKIT_PHASE_LOG"}
    env.update(TRITON_INTERPRET="1", TOOLKIT_TRITON_CHILD="1", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", __file__]
    res = subprocess.run(cmd, env=env, cwd=Path(__file__).parents[1], capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed and int(passed.group(1)) >= 20 and " failed" not in out, out[-3000:]


torch.set_num_threads(1)
DEV = "cuda" if CUDA else "cpu"
VOCAB = 4096
SMALL_VOCAB = dict(vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2)  # the interpreter is slow


def _lm(flavor="qwen3", **cfg):
    """tests/test_backends_engine.py's random-weight model, untied, with a small vocabulary, on DEV."""
    return _random_lm(flavor, device=DEV, **(SMALL_VOCAB | cfg))


def _prompt(n, seed=1, vocab=4000):
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


# ---------------------------------------------------------------- one kernel at a time
@pytest.mark.parametrize("N, K", [(37, 300), (96, 64), (5, 1100)])
@pytest.mark.parametrize("kind", ["plain", "norm+bias", "swiglu+norm", "residual"])
def test_gemv_matches_torch(N, K, kind):
    g = torch.Generator().manual_seed(N * K)
    x = torch.randn(K, generator=g).to(DEV)
    w = torch.randn(2 * N if kind.startswith("swiglu") else N, K, generator=g).to(DEV)
    ln, b, res = torch.randn(K, generator=g).to(DEV), torch.randn(N, generator=g).to(DEV), torch.randn(N).to(DEV)
    out = torch.full((N,), float("nan"), device=DEV)
    xn = F.rms_norm(x, (K,), ln, 1e-6)
    if kind == "plain":
        et.gemv(x, w, out)
        ref = w @ x
    elif kind == "norm+bias":
        et.gemv(x, w, out, ln=ln, bias=b, eps=1e-6)
        ref = w @ xn + b
    elif kind == "swiglu+norm":
        et.gemv(x, w, out, ln=ln, swiglu=True, eps=1e-6)
        gate, up = (w @ xn).chunk(2)
        ref = F.silu(gate) * up
    else:
        ref = res + w @ x
        out.copy_(res)
        et.gemv(x, w, out, res=out)  # in place, as the residual stream is updated
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rep, n_keys, sms", [(2, 1, 8), (2, 77, 64), (7, 200, 64), (1, 256, 200)])
def test_split_attention_matches_sdpa(rep, n_keys, sms):
    """Keys past the position are skipped, empty splits weigh nothing, padded query heads (rep 7) write nothing."""
    kv, d, L, bucket = 2, 16, 512, 256
    g = torch.Generator().manual_seed(rep * n_keys)
    cache = torch.randn(2, kv, L, d, generator=g).to(DEV)
    q = torch.randn(kv * rep * d, generator=g).to(DEV)
    pos = torch.tensor([n_keys - 1], device=DEV)
    split, nsplit, _ = et.attend_plan(bucket, kv, rep, d, sms)
    part = torch.zeros(kv * rep * nsplit * (d + 2), device=DEV)
    out = torch.full((kv * rep * d,), float("nan"), device=DEV)
    et.attend(q, cache, pos, part, out, bucket=bucket, kv_heads=kv, rep=rep, head_dim=d, scale=d**-0.5, sms=sms)
    keys = cache[0, :, :n_keys].repeat_interleave(rep, 0)
    vals = cache[1, :, :n_keys].repeat_interleave(rep, 0)
    ref = F.scaled_dot_product_attention(q.view(kv * rep, 1, d), keys, vals, scale=d**-0.5).reshape(-1)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    assert nsplit > 1 or sms == 8


# ---------------------------------------------------------------- the whole decode body
@pytest.mark.parametrize(
    "flavor, cfg",
    [("qwen3", {}), ("qwen2.5", {}), ("qwen2.5", dict(num_attention_heads=7, num_key_value_heads=1, hidden_size=112))],
)
def test_triton_body_greedy_equals_generate(flavor, cfg):
    """Qwen3 (q/k norms), Qwen2.5 (q/k/v biases), 7 query heads on one KV head (padded group); attention over
    several key splits (one of them empty): the same greedy tokens as model.generate with prefix reuse on the next
    call, and one step's logits and cache writes equal to the torch body's, fused attention and three-kernel alike."""
    model = _lm(flavor, **cfg)
    prompt = _prompt(150)
    ref = _hf_greedy(model, prompt, 12)
    kw = dict(fast=True, graphs=False, min_bucket=64)
    tri = Engine(model, body=et.decoder(sms=64), **kw)  # 4 splits of 64 keys in the 256-position bucket
    assert "Triton kernels (13 a token" in tri.describe()
    assert et.attend_plan(256, model.config.num_key_value_heads, 2, 16, 64)[1] == 4
    g = tri.generate(prompt, max_new_tokens=12, stop_ids=set())
    assert g.new_ids == ref
    p2 = prompt + g.new_ids + _prompt(5, seed=2)
    r = tri.generate(p2, max_new_tokens=6, stop_ids=set())
    assert r.reused == len(prompt) + 11 and r.new_ids == _hf_greedy(model, p2, 6)
    three = Engine(model, body=et.decoder(fused=False, sms=64), **kw)
    torch_e = Engine(model, **kw)
    n = len(prompt)
    for e in (tri, three, torch_e):
        e.reset()
        e.generate(prompt, max_new_tokens=1, stop_ids=set())
    want = torch_e.step(n, 77)
    for e in (tri, three):
        torch.testing.assert_close(e.step(n, 77), want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(e.kv[:, :, :, : n + 1], torch_e.kv[:, :, :, : n + 1])
    assert int(tri._custom.count.abs().sum()) == 0  # the split counters are left at zero for the next layer


def test_triton_refusals():
    model = _lm("qwen3")
    with pytest.raises(EngineError, match="fast"):
        Engine(model, fast=False, graphs=False, body=et.decoder())
    with pytest.raises(EngineError, match="factory"):
        Engine(model, body="triton")
    if not CUDA:
        interpreted, et.INTERPRET = et.INTERPRET, False  # as on a CPU-only install: no interpreter asked for
        try:
            with pytest.raises(EngineError, match="CUDA device"):
                Engine(model, graphs=False, fast=True, body=et.decoder())
        finally:
            et.INTERPRET = interpreted


# ---------------------------------------------------------------- on a GPU (a lent machine)
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("pdl, fused", [(False, True), (True, True), (True, False)])
def test_cuda_triton_graph(pdl, fused):
    """fp32: the Triton body in CUDA graphs gives model.generate's greedy tokens (prompt crossing a bucket) and
    the eager Triton body's; bf16: pdl and fused attention change no token, one step's logits match the torch
    body's."""
    from toolkit import speed

    model = _lm("qwen3")
    prompt = _prompt(240, seed=3)
    ref = _hf_greedy(model, prompt, 40)
    graph = Engine(model, graphs=True, min_bucket=256, body=et.decoder(pdl, fused=fused))
    eager = Engine(model, graphs=False, min_bucket=256, body=et.decoder(pdl, fused=fused))
    assert graph.generate(prompt, max_new_tokens=40, stop_ids=set()).new_ids == ref
    assert eager.generate(prompt, max_new_tokens=40, stop_ids=set()).new_ids == ref
    big, _ = speed.qwen3_06b_shape("cuda", torch.bfloat16)
    p = _prompt(300, seed=4, vocab=151643)
    # bf16 tokens depend on each matmul's summation order: fixed block shapes on both sides (tuning may pick others)
    untuned = Engine(big, max_len=1024, body=et.decoder(tune=False))
    plain = untuned.generate(p, max_new_tokens=32, stop_ids=set()).new_ids
    tri = Engine(big, max_len=1024, body=et.decoder(pdl, tune=False, fused=fused))
    assert tri.generate(p, max_new_tokens=32, stop_ids=set()).new_ids == plain
    base = Engine(big, max_len=1024, graphs=False)
    for e in (tri, base):
        e.reset()
        e.generate(p, max_new_tokens=1, stop_ids=set())
    torch.testing.assert_close(tri.step(len(p), 5), base.step(len(p), 5), rtol=0.05, atol=0.15)
