"""toolkit.speed: the Qwen3-0.6B shape, bandwidth floor, decode rates, prefill FLOPs, the saved GPU result, the
agent workload's numbers as the results file holds them."""

import json

import pytest
import torch

from toolkit import cost, speed

torch.set_num_threads(1)


def test_qwen3_06b_shape_has_the_published_size():
    model, what = speed.qwen3_06b_shape("meta", torch.bfloat16)  # shapes only, no memory
    assert sum(p.numel() for p in model.parameters()) == 596_049_920
    assert speed.weight_bytes(model) == 2 * 596_049_920  # tied embedding counted once
    assert "RANDOM WEIGHTS" in what and model.config.num_hidden_layers == 28


def test_copy_bandwidth_and_floor():
    bw = speed.copy_bandwidth("cpu", nbytes=1 << 24, repeats=3)
    assert 1e8 < bw < 1e13  # somewhere between a slow laptop and an HBM GPU
    from toolkit.models import stand_in

    model = stand_in()
    floor = speed.floor_tokens_per_s(model, 4e12)
    assert floor == pytest.approx(4e12 / (model.num_parameters() * 4))


def test_prefill_flops_counts_matmuls_and_every_attention_pair():
    cfg = speed.qwen3_06b_shape("meta")[0].config
    one = speed.prefill_flops(cfg, 9, 10)  # one token at position 9 attends to 10 keys
    dense = 28 * (1024 * (2048 + 2 * 1024) + 2048 * 1024 + 3 * 1024 * 3072)
    assert one == pytest.approx(2 * dense + cost.attention_flops_per_token(28, 2048, 10))
    # additive over chunks, and a full prefill costs more than its tokens' share (attention is quadratic)
    assert speed.prefill_flops(cfg, 0, 100) == pytest.approx(
        speed.prefill_flops(cfg, 0, 40) + speed.prefill_flops(cfg, 40, 100)
    )
    assert speed.prefill_flops(cfg, 0, 2000) > 2 * speed.prefill_flops(cfg, 0, 1000)


def test_decode_rates_on_the_stand_in():
    from toolkit.backends.engine import Engine
    from toolkit.models import stand_in

    model = stand_in()
    prompt = speed.prompt_ids(16, seed=3)
    r_hf, hf = speed.hf_decode_rate(model, prompt, 4)
    r_e, ours = speed.engine_decode_rate(Engine(model, max_len=64), prompt, 4, repeats=1)
    assert r_hf > 0 and r_e > 0 and len(ours) == 4 and hf == ours


def test_saved_gpu_result_is_dated_and_consistent():
    res = speed.saved_gpu_result()
    assert res is not None and res["date"].startswith("20") and "H200" in res["machine"]
    # The floor is the measured bandwidth over the weight bytes; every decode row stays under it.
    assert res["floor_tokens_per_s"] == pytest.approx(res["copy_bandwidth_GBps"] / res["weight_GB"], rel=0.01)
    assert all(0 < row["tokens_per_s"] < res["floor_tokens_per_s"] for row in res["decode"])
    a = res["agent"]
    assert a["tokens_no_reuse"] / a["tokens_reuse"] == pytest.approx(cost.ratio_closed(a["T"], a["delta"], a["R"]))
    assert speed.saved_gpu_result("/nonexistent.json") is None


def test_the_agent_numbers_are_read_from_the_results_file():
    """benchmarks/engine.py saves the agent workload's rounds, sums and ratios (``agent_record``) and prints its
    table from them (``agent_lines``); ``gpu_view`` reads the sums from the file, to more digits than the table
    shows. Only a file written before (no ``agent``: the committed one) is read from its markdown table."""
    rounds = {
        True: [(1100, 100, 0.0201234, 2.01234e12), (1200, 100, 0.0312345, 2.21234e12), (1300, 100, 0.025, 2.4e12)],
        False: [(1100, 1100, 0.2012345, 3.11234e13), (1200, 1200, 0.2512345, 3.51234e13)],  # budget: 2 rounds
    }
    rec = speed.agent_record(1000, 100, 3, rounds, decode_per_round=1, mode="cpu, float32", budget_s=5.0)
    rec = json.loads(json.dumps(rec))  # as the results file holds it
    assert rec["rounds_compared"] == 2 and len(rec["rounds"]) == 5
    assert rec["rounds"][2] == dict(round=3, reuse=True, prompt_tokens=1300, prefilled=100, wall_s=0.025, flops=2.4e12)
    want = dict(T=1000, delta=100, R=3, tokens_reuse=200, tokens_no_reuse=2300, flops_reuse=4.22468e12)
    want.update(flops_no_reuse=6.62468e13, wall_reuse_s=0.0513579, wall_no_reuse_s=0.452469)
    ratios = dict(tokens=11.5, flops=6.62468e13 / 4.22468e12, wall=0.452469 / 0.0513579, closed=11.5)
    assert rec["ratios"] == pytest.approx(ratios, rel=1e-12)
    old = json.loads(speed.RESULTS.read_text(encoding="utf-8"))
    raw = {**old, "agent": rec, "markdown": speed.agent_lines(rec)}
    view = speed.gpu_view(raw)["agent"]
    assert view == pytest.approx(want, rel=1e-12)  # the file's sums, not the table's rounded ones
    table = speed.gpu_view({**old, "markdown": raw["markdown"]})["agent"]  # no "agent": the table read back
    assert table == pytest.approx(view, rel=1e-2) and table != pytest.approx(view, rel=1e-6)
    assert "Only the first 2 of 3 rounds" in "".join(raw["markdown"])
    targets, _ = speed.engine_targets({}, 1.0, rec, [])
    assert targets["agent"]["wall_ratio"] == round(ratios["wall"], 2)
    assert targets["agent"]["token_ratio"] == 11.5 and targets["agent"]["flop_ratio"] == round(ratios["flops"], 2)
