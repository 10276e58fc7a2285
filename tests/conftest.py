"""Shared test setup: offline always, one thread per test process, markers that explain their skips."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


def _real_model_installed() -> bool:
    try:
        from toolkit import fetch

        return fetch.is_installed()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    from toolkit.models import hub_reachable

    hub = None
    real = _real_model_installed()
    for item in items:
        if "hub" in item.keywords:
            if hub is None:
                hub = hub_reachable(timeout=2.0)
            if not hub:
                item.add_marker(pytest.mark.skip(reason="huggingface.co is unreachable here (HF_HUB_OFFLINE=1 or "
                                                 "no network); this test compares against the live hub copy"))
        if "real_model" in item.keywords and not real:
            # CI installs it (`make test` depends on `make real-model`), so there these tests run.
            item.add_marker(pytest.mark.skip(reason="real offline model not installed: run `make real-model`"))


@pytest.fixture(scope="session")
def qwen3_tok():
    from toolkit.render import tokenizer_for

    return tokenizer_for("qwen3")


@pytest.fixture(scope="session")
def qwen25_tok():
    from toolkit.render import tokenizer_for

    return tokenizer_for("qwen2.5")
