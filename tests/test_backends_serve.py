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


def test_short_memory_serves_the_int8_build_and_says_so(auto_picks, monkeypatch):
    auto_picks(models.SMALL)
    monkeypatch.setattr(serve.memory, "memory_available", lambda: int(1.5 * 2**30))
    name, why = serve.model_to_serve("auto")
    assert name == models.SMALL
    assert "1.5 GB" in why and "int8" in why and "drops its own copy" in why


def test_the_int8_folder_is_served_through_the_kits_loader(tmp_path, monkeypatch):
    monkeypatch.setattr(serve.small, "target_folder", lambda adapter=True: tmp_path / ("a" if adapter else "b"))
    loaded = type(
        "L", (), {"dtype": "int8 weights (per row; build x), bf16 activations", "adapter": {"adapter": "x"}}
    )()
    folder = serve.folder_for(loaded)
    assert folder == str(tmp_path / "a")
    monkeypatch.delenv(serve.ENGINE_ENV, raising=False)
    monkeypatch.setattr(serve.vllm_local, "state", lambda: (True, ""))  # vLLM installed: still not for the int8 build
    assert serve.default_engine(loaded) == "transformers"
    assert serve.default_engine(type("F", (), {"dtype": "float32", "semantic": True})()) == "vllm"
    plain = serve.command(str(tmp_path), 9)
    assert plain[-2:] != ["--dtype", None] and "serve" in plain and "--dtype" in plain
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / serve.small.MANIFEST).write_text("{}")
    (tmp_path / "a" / serve.small.WEIGHTS).write_bytes(b"")
    argv = serve.command(folder, 9)
    assert argv[1:3] == ["-m", "toolkit.backends.serve_small"] and "--dtype" not in argv
    assert argv[3:] == [folder, "--host", "127.0.0.1", "--port", "9", "--device", "cpu"]
    with pytest.raises(ValueError, match="vLLM cannot load the kit's int8 build"):
        serve.LocalServer(folder, engine="vllm")


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


def test_a_sigterm_to_the_starting_process_still_stops_what_it_started(tmp_path):
    """Killing a script that started a server (``kill PID``) runs its exit handlers: the server is stopped by PID.
    Here a ``sleep`` in its own session stands in for the server, stopped the way ``LocalServer.stop`` is
    registered (atexit). Without ``stop_on_sigterm`` Python would die at once and the sleep would outlive it."""
    import subprocess
    import sys
    import time

    script = (
        "import atexit, os, signal, subprocess, sys, time\n"
        "from toolkit.backends.serve import stop_on_sigterm\n"
        "child = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
        "atexit.register(lambda: os.killpg(child.pid, signal.SIGKILL))\n"
        "stop_on_sigterm() if sys.argv[1] == 'on' else None\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    for how, stopped in (("on", True), ("off", False)):
        proc = subprocess.Popen([sys.executable, "-c", script, how], stdout=subprocess.PIPE, text=True)
        child = int(proc.stdout.readline())
        proc.terminate()
        rc = proc.wait(20)
        time.sleep(0.3)
        alive = subprocess.run(["kill", "-0", str(child)], capture_output=True).returncode == 0
        if alive:
            subprocess.run(["kill", "-9", str(child)])
        assert (rc, alive) == ((143, False) if stopped else (-15, True)), how
