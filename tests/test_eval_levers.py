"""BFCL's levers as one frozen object: it validates, and it keys the results cache exactly as the benchmark keyed
it before (so outputs already cached under ~/.cache/toolcall-kit/bfcl are found again, and a new lever is not)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from toolkit.eval.levers import LEVER_NAMES, Levers
from toolkit.eval.run import Cache, settings_key

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    from toolkit.paths import script_module

    return script_module(ROOT / "benchmarks" / "bfcl.py", "bfcl_bench")


def _dir(tmp_path, levers, **extra) -> str:
    return Cache(tmp_path, "m", levers, **extra).dir.name


def test_the_cache_keys_are_the_ones_the_benchmark_used_before(bench, tmp_path):
    """The old benchmark wrote Cache(root, model, template="qwen2.5", version=V, **settings) with these settings."""
    v = bench.VERSION
    old = settings_key(template="qwen2.5", version=v, max_new_tokens=64, temperature=0.0, seed=0)
    assert _dir(tmp_path, Levers(mode="constrained", max_new_tokens=64), version=v) == old  # accuracy
    for lever, kw in bench.PROMPT_LEVERS.items():  # levers: the lever's name and its switches, not its mode
        kw = dict(kw)
        mode = kw.pop("mode", "constrained")
        old = settings_key(
            template="qwen2.5", version=v, max_new_tokens=256, temperature=0.0, seed=0, lever=lever, **kw
        )
        assert _dir(tmp_path, Levers(mode=mode, max_new_tokens=256, **kw), version=v, lever=lever) == old, lever
    old = settings_key(template="qwen2.5", version=v, max_new_tokens=64, temperature=0.7, seed=0, samples=8)
    assert _dir(tmp_path, Levers(mode="native", max_new_tokens=64, temperature=0.7), version=v, samples=8) == old
    old = settings_key(template="qwen2.5", version=v, max_new_tokens=64, temperature=0.0, seed=0, variant="terse")
    assert _dir(tmp_path, Levers(mode="native", max_new_tokens=64), version=v, variant="terse") == old


def test_every_lever_changes_the_key_and_the_mode_does_not():
    base = Levers(mode="constrained").key()
    changed = {"gate": False, "gate_threshold": 0.5, "system_hint": "x", "more_calls": True, "list_calls": True}
    for name, value in changed.items():
        assert Levers(mode="constrained", **{name: value}).key() != base, name
    assert Levers(mode="prompt", python_calls=True).key() != Levers(mode="prompt").key()
    assert Levers(mode="native").key() == base  # each mode has its own folder under the key
    assert set(LEVER_NAMES) <= {f.name for f in dataclasses.fields(Levers)}


def test_levers_are_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Levers().mode = "prompt"
    with pytest.raises(ValueError, match="mode must be one of"):
        Levers(mode="json")
    with pytest.raises(ValueError, match="constrained"):
        Levers(mode="native", list_calls=True)
