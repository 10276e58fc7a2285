"""toolkit.cost.capacity: classroom sessions in a server's KV-cache memory, with and without prefix sharing."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.cost import KV_SHAPES, capacity, kv_bytes_per_token


def test_kv_bytes_per_token_from_published_shapes():
    # Qwen3-0.6B: 28 layers x 8 KV heads x 128 dims, a key and a value, bf16 -> 112 KiB per token
    assert kv_bytes_per_token(28, 8, 128) == 114_688
    assert kv_bytes_per_token(*KV_SHAPES["Qwen2.5-Coder-0.5B"][1:]) == 2 * 24 * 2 * 64 * 2


@pytest.mark.parametrize("model", sorted(KV_SHAPES))
def test_sessions_fill_the_memory_and_sharing_never_hurts(model):
    c = capacity(model, memory=141e9, bandwidth=4.8e12, T=10_000, delta=2048, R=30)
    assert c.context == 10_000 + 2048 * 30
    # the count is the largest that fits, and one more does not
    assert c.sessions * c.context * c.kv_per_token <= c.free_bytes < (c.sessions + 1) * c.context * c.kv_per_token
    shared_bytes = 10_000 * c.kv_per_token + c.sessions_shared * 2048 * 30 * c.kv_per_token
    assert shared_bytes <= c.free_bytes and c.sessions_shared >= c.sessions
    assert c.tokens_per_s_shared >= c.tokens_per_s > 0
    # a bigger tool block T widens the gap that sharing closes
    big = capacity(model, memory=141e9, bandwidth=4.8e12, T=40_000, delta=2048, R=30)
    assert big.sessions_shared - big.sessions >= c.sessions_shared - c.sessions


def test_rate_is_bounded_by_bandwidth_over_weights_per_step():
    c = capacity("Qwen3-0.6B", memory=141e9, bandwidth=4.8e12)
    params = KV_SHAPES["Qwen3-0.6B"][0]
    # each step reads the weights at least once for the whole batch
    assert c.tokens_per_s <= c.sessions * 4.8e12 / (params * 2)


def test_memory_too_small_gives_zero_and_bad_input_is_refused():
    assert capacity("Llama 3 8B", memory=16e9).sessions == 0
    with pytest.raises(ValueError):
        capacity("no-such-model")
    with pytest.raises(ValueError):
        capacity("Qwen3-0.6B", memory=-1)
    with pytest.raises(ValueError):
        capacity("Qwen3-0.6B", R=0)


def test_calibrated_rates_reproduce_n1_and_grow_below_n_times():
    from toolkit.cost import calibrated_rates

    rows = calibrated_rates("Qwen2.5-Coder-0.5B", 0.5, [1, 4, 16], context=400)
    assert abs(rows[0]["batched"] - 0.5) < 1e-9 and all(r["serial"] == 0.5 for r in rows)
    # batching reuses each weight read: more sessions, more tokens/s, but less than N times (each has its own KV)
    assert rows[0]["batched"] < rows[1]["batched"] < rows[2]["batched"] < 16 * 0.5
    long = calibrated_rates("Qwen2.5-Coder-0.5B", 0.5, [16], context=60_000)[0]
    assert long["batched"] < rows[2]["batched"]  # a longer KV per session eats the gain
    with pytest.raises(ValueError):
        calibrated_rates("no-such-model", 0.5, [1], 400)
    with pytest.raises(ValueError):
        calibrated_rates("Qwen3-0.6B", 0.0, [1], 400)


def test_classroom_prints_measured_beside_predicted_for_the_saved_run():
    """benchmarks/classroom.py --check on the saved measurement: every N measured beside both predictions."""
    root = Path(__file__).resolve().parents[1]
    saved = sorted((root / "benchmarks" / "results").glob("classroom-*.json"))
    assert saved, "no saved classroom run in benchmarks/results"
    run = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "classroom.py"), "--check", str(saved[-1]), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"},
    )
    assert run.returncode == 0, run.stderr[-500:]
    chk = json.loads(run.stdout)
    rows = json.loads(saved[-1].read_text())["rows"]
    assert [r["sessions"] for r in chk["rows"]] == [r["sessions"] for r in rows]
    assert [r["measured"] for r in chk["rows"]] == [r["tokens_per_s"] for r in rows]
    one = chk["rows"][0]
    assert one["sessions"] == 1 and abs(one["batched"] - one["measured"]) < 1e-3  # calibrated on N=1
    for r in chk["rows"][1:]:
        assert r["batched"] > r["serial"] == one["measured"]
        assert r["closer"] in ("serial", "batched")
    assert "KV-cache memory on a GPU" in chk["not_measured_here"]
