"""toolkit.backends.serve's choice of the model a local server holds (the server itself: tests/test_backends_http.py
and tests/test_backends_vllm.py start real ones)."""

import pytest

from toolkit import models
from toolkit.backends import serve


@pytest.fixture
def auto_picks(monkeypatch):
    monkeypatch.delenv("TOOLKIT_MODEL", raising=False)

    def pick(name):
        monkeypatch.setattr(models, "pick_auto", lambda *a, **k: (name, "why"))

    return pick


def test_short_memory_serves_the_stand_in_and_says_why(auto_picks, monkeypatch):
    auto_picks(models.SMALL)
    monkeypatch.setattr(serve.small, "memory_available", lambda: int(1.5 * 2**30))
    name, why = serve.model_to_serve("auto")
    assert name == models.STAND_IN
    assert "1.5 GB" in why and "RANDOM-WEIGHT STAND-IN" in why and "TOOLKIT_BACKEND" in why


def test_enough_memory_serves_what_auto_loads(auto_picks):
    auto_picks(models.REAL_LORA)
    assert serve.model_to_serve("auto") == ("auto", None)


@pytest.mark.parametrize("named", ["qwen2.5-coder-0.5b", "stand-in"])
def test_a_named_model_is_served_as_named(auto_picks, named):
    auto_picks(models.SMALL)
    assert serve.model_to_serve(named) == (named, None)


def test_toolkit_model_overrides_auto(auto_picks, monkeypatch):
    auto_picks(models.SMALL)
    monkeypatch.setenv("TOOLKIT_MODEL", "qwen2.5-coder-0.5b+lora")
    assert serve.model_to_serve("auto") == ("qwen2.5-coder-0.5b+lora", None)
