"""The loop's one settings object: defaults, the settings for a model, and where each value came from."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from toolkit.backends.choose import Choice, Served, backend_for, choose, is_served, model_line
from toolkit.settings import MODEL_MAX_NEW_TOKENS, NAMES, STAND_IN_SETTINGS, LoopConfig


@dataclass
class _Model:  # what for_model reads: a name, semantic, a template (as a Served names it)
    name: str
    semantic: bool
    template: str = "qwen3"


def test_defaults_are_the_loops_and_say_so():
    cfg = LoopConfig()
    assert cfg.max_new_tokens == 96 and cfg.max_turns == 4 and cfg.tool_choice == "auto"
    assert all(cfg.source_of(n) == "default" for n in NAMES)
    assert cfg.describe().startswith("defaults: ")


def test_for_model_layers_model_kit_stand_in_and_caller_with_their_sources():
    real = LoopConfig.for_model(_Model("real", True), max_turns=2)
    assert (real.template, real.max_new_tokens, real.max_turns, real.bound_strings) == ("qwen3", 160, 2, None)
    assert real.source_of("template") == "model real" and real.source_of("max_turns") == "caller"
    assert real.source_of("max_new_tokens") == "kit default for a model" and real.max_new_tokens == MODEL_MAX_NEW_TOKENS
    fake = LoopConfig.for_model(_Model("stand-in", False), max_new_tokens=20)
    assert fake.bound_strings == STAND_IN_SETTINGS["bound_strings"] and fake.tool_choice == "required"
    assert fake.max_new_tokens == 20 and fake.source_of("max_new_tokens") == "caller"  # the caller wins
    assert "stand-in" in fake.source_of("bound_strings")
    line = fake.describe()
    assert (
        "bound_strings=8" in line
        and "max_new_tokens=20 (caller)" in line
        and "template='qwen3' (model stand-in)" in line
    )
    assert fake.values()["bound_strings"] == 8 and fake.sources()["template"] == "model stand-in"


def test_but_records_and_rejects_unknown_options():
    cfg = LoopConfig().but("a test", max_turns=7)
    assert cfg.max_turns == 7 and cfg.source_of("max_turns") == "a test"
    assert cfg == LoopConfig(max_turns=7)  # provenance is not part of the value
    with pytest.raises(TypeError, match="unknown loop option"):
        LoopConfig().but("a test", max_turn=3)


def test_local_and_served_models_get_the_same_settings_from_one_place():
    """The same for_model for a local Loaded and a Served one (it used to be DEFAULTS for servers only)."""
    local = LoopConfig.for_model(_Model("m", True, "qwen2.5"))
    served = LoopConfig.for_model(Served(info=_Info("m"), tokenizer=None, template="qwen2.5"))
    assert local.values() == served.values()


@dataclass
class _Info:
    model: str
    url: str = "http://127.0.0.1:1/v1"
    kind: str = "vllm"


def test_choose_returns_model_backend_and_settings(monkeypatch):
    monkeypatch.delenv("TOOLKIT_BACKEND", raising=False)
    c = choose("stand-in", quiet=True)
    assert isinstance(c, Choice) and c.loaded.kind == "stand-in" and type(c.backend).__name__ == "HFBackend"
    assert c.settings == LoopConfig.for_model(c.loaded) and c.settings.bound_strings == 8
    assert c.tokenizer is c.loaded.tokenizer and c.semantic is False  # reads like the model it holds
    assert not is_served(c) and model_line(c) == model_line(c.loaded)
    assert type(backend_for(c)).__name__ == "HFBackend"
