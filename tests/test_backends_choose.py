"""toolkit.backends.choose: one chooser for every notebook — the local model, or the server TOOLKIT_BACKEND names.

The notebook runs start a real ``transformers serve`` on 127.0.0.1 (the random-weight stand-in saved to a folder:
it decodes fast enough for the suite; the real-model path is the same code) and stop it by PID. No mocks."""

import json
import socket
from pathlib import Path

import pytest

from toolkit.backends import choose, http

ROOT = Path(__file__).resolve().parents[1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_without_a_server_choose_is_the_local_model_and_steps_say_nothing(monkeypatch):
    monkeypatch.delenv(http.ENV, raising=False)
    loaded = choose.choose("stand-in", quiet=True)
    assert not choose.is_served(loaded) and loaded.kind == "stand-in"
    assert choose.model_line(loaded) == f"model: {loaded.description}"
    assert choose.local_for(loaded, "a step") is loaded
    assert choose.not_served("a step") == "" and choose.cache_note(loaded) == ""
    assert type(choose.backend_for(loaded)).__name__ == "HFBackend"


def test_a_bad_server_is_one_line_before_any_model_loads(monkeypatch):
    monkeypatch.setenv(http.ENV, "localhost:8000")  # no scheme, no /v1
    with pytest.raises(ValueError, match="http://HOST:PORT/v1"):
        choose.choose()
    assert "not usable" in choose.not_served("training")
    port = _closed_port()
    monkeypatch.setenv(http.ENV, f"http://127.0.0.1:{port}/v1")
    with pytest.raises(http.ServerError) as e:
        choose.choose()
    assert e.value.kind == "unreachable" and f"127.0.0.1:{port}" in str(e.value)
    assert (
        choose.not_served("training")
        == f"training: runs here, on local weights, not on the server at http://127.0.0.1:{port}/v1"
    )


def test_template_of_reads_the_served_folder_then_the_name(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    assert choose.template_of(str(tmp_path)) == "qwen3"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    assert choose.template_of(str(tmp_path)) == "qwen2.5"
    assert choose.template_of("Qwen/Qwen3-0.6B") == "qwen3"
    assert choose.template_of("Qwen/Qwen2.5-Coder-0.5B-Instruct") == "qwen2.5"


@pytest.mark.slow
def test_served_choice_reads_like_a_loaded_model(stand_in_server, monkeypatch):
    monkeypatch.setenv(http.ENV, stand_in_server.url)
    served = choose.choose()
    assert choose.is_served(served) and served.url == stand_in_server.url
    assert not served.semantic and "STAND-IN" in served.description  # the saved folder's name says so
    assert served.template == "qwen3"  # read from the served folder's config.json
    line = choose.model_line(served)
    assert stand_in_server.url in line and served.name in line
    assert "reports none" in choose.cache_note(served)
    from toolkit.loop.examples import run_example

    trace = run_example("calculator", served, max_turns=1)
    gen = trace.turns()[0]
    assert gen["prompt"] > 300 and gen["generated"] > 0  # rendered by the kit, decoded by the server


NOTEBOOKS = ["03_host_loop.ipynb", "01_rendering.ipynb"]


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_against_the_server(name, stand_in_server):
    """The notebook top to bottom with TOOLKIT_BACKEND set: no error, the model and the URL printed, and the server
    answered the notebook's requests (its log); local-only steps name themselves (TOOLKIT_MODEL=stand-in)."""
    from test_notebooks import execute_notebook

    log = Path(stand_in_server._log.name)
    before = log.read_text(errors="replace").count("/v1/completions")
    nb, seconds, _ = execute_notebook(
        ROOT / "notebooks" / name, env={http.ENV: stand_in_server.url, "TOOLKIT_MODEL": "stand-in"}
    )
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}"
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "Traceback" not in text
    assert f"server: {stand_in_server.url}" in text, f"{name} does not print the server's URL"
    assert "served by transformers at " + stand_in_server.url in text
    if name.startswith("03"):
        assert f"not on the server at {stand_in_server.url}" in text  # the logits step says it runs locally
        assert "reports none" in text  # the cache column's caveat
    requests = log.read_text(errors="replace").count("/v1/completions") - before
    assert requests > 0, f"{name}: the server's log shows no /v1/completions request"
    print(f"{name} against {stand_in_server.url}: {seconds:.1f} s, {requests} completion requests")
