"""toolkit.backends.serve_small: ``transformers serve`` holding the kit's int8 build (a real server on 127.0.0.1,
stopped by PID), and a bad artifact refused at the server's start in one line."""

import json
import urllib.request
from pathlib import Path

import pytest

from toolkit import fetch, small
from toolkit.backends import http
from toolkit.backends.serve import LocalServer
from toolkit.backends.serve_small import is_int8_folder
from toolkit.tools import TOOLS


def test_only_a_folder_with_the_manifest_and_the_weights_is_the_int8_build(tmp_path):
    assert not is_int8_folder(tmp_path)
    (tmp_path / small.MANIFEST).write_text("{}")
    assert not is_int8_folder(tmp_path)
    (tmp_path / small.WEIGHTS).write_bytes(b"")
    assert is_int8_folder(tmp_path) and is_int8_folder(str(tmp_path))
    assert not is_int8_folder(tmp_path / "missing")


def test_a_bad_artifact_stops_the_server_at_its_start_in_one_line(tmp_path):
    (tmp_path / small.MANIFEST).write_text(json.dumps({"scheme": "another kit's"}))
    (tmp_path / small.WEIGHTS).write_bytes(b"\0" * 64)
    with pytest.raises(RuntimeError) as e:
        LocalServer(tmp_path, threads=1, start_timeout_s=120)
    msg = str(e.value)
    assert "ArtifactError" in msg and "\n" not in msg, msg


def _post(url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


@pytest.mark.real_model
def test_the_int8_build_is_served_and_calls_the_calculator():
    folder = small.target_folder(adapter=True)
    try:
        small.verify(folder)
    except small.ArtifactError as e:
        pytest.fail(f"the real model is installed but its int8 build is not ({e}): make real-model builds it")
    assert fetch.is_installed()
    srv = LocalServer(folder, threads=1)
    try:
        assert srv.argv[1:3] == ["-m", "toolkit.backends.serve_small"]
        info = http.probe(srv.url)
        assert Path(info.model) == folder and "int8" in info.model  # every output names the build that ran
        out = _post(
            srv.url,
            "/chat/completions",
            dict(
                model=info.model,
                messages=[{"role": "user", "content": "What is 17 * 23?"}],
                tools=[TOOLS["calculator"].schema],
                max_tokens=40,
                temperature=0,
            ),
        )
        calls = out["choices"][0]["message"].get("tool_calls") or []
        assert [c["function"]["name"] for c in calls] == ["calculator"], out
        assert "17" in json.loads(calls[0]["function"]["arguments"])["expression"], out
    finally:
        srv.stop()
    assert not srv.alive()
