"""toolkit.rl.served: the vLLM-backed rollout policy hands the trainer's adapter over exactly when it changed, and
asks the server for the kit's rendered ids. A stub server on 127.0.0.1 records what a vLLM server would be sent
(the real server: benchmarks/rl_engines.py, whose check compares its greedy text with the trainer's)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import torch

from toolkit.backends.http import ServerError
from toolkit.models import load
from toolkit.qwen import STOP_IDS
from toolkit.render import render
from toolkit.rl.served import ServedSampler
from toolkit.rl.train import attach


class Stub:
    """What LocalServer gives the sampler (url, model, stop), answering like vLLM's routes."""

    def __init__(self, reply=None):
        self.seen, self.stopped, self.reply = [], False, reply
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith("load_lora_adapter") and not self.path.endswith("unload_lora_adapter"):
                    body["config_there"] = (Path(body["lora_path"]) / "adapter_config.json").is_file()
                stub.seen.append((self.path, body))
                out = b"Success"
                if self.path.endswith("/completions"):
                    n = len(body["prompt"])
                    choices = [{"index": i, "text": f"answer {i}"} for i in reversed(range(n))]
                    out = json.dumps({"choices": choices, "usage": {"completion_tokens": 3 * n}}).encode()
                if stub.reply is not None:  # what a failing server answers instead
                    code, out = stub.reply
                    self.send_response(code)
                    self.end_headers()
                    self.wfile.write(out)
                    return
                self.send_response(200)
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self.model = "/models/start"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.stopped = True
        self.httpd.shutdown()

    def paths(self):
        return [p.rsplit("/", 1)[-1] for p, _ in self.seen]


@pytest.fixture
def served():
    loaded = load("stand-in-qwen2.5", quiet=True)
    stub = Stub()
    sampler = ServedSampler(loaded, max_new=5, temperature=1.0, server=stub)
    yield loaded, stub, sampler
    sampler.close()
    assert stub.stopped


def _batch():
    msgs = [{"role": "user", "content": "What is 2 + 2?"}]
    return [(msgs, []), (msgs + [{"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3?"}], [])]


def test_without_an_adapter_it_samples_the_starting_weights(served):
    loaded, stub, sampler = served
    assert sampler(_batch()) == ["answer 0", "answer 1"]  # in the batch's order, whatever order the server used
    ((path, body),) = stub.seen
    assert path.endswith("/v1/completions") and body["model"] == stub.model
    assert body["prompt"] == [render(m, t, "qwen2.5", tokenizer=loaded.tokenizer).ids for m, t in _batch()]
    assert body["stop_token_ids"] == sorted(STOP_IDS) and body["max_tokens"] == 5 and body["temperature"] == 1.0
    assert sampler.tokens == 6 and sampler.handovers == 0


def test_the_adapter_is_handed_over_when_it_changed_and_only_then(served):
    loaded, stub, sampler = served
    loaded.model = attach(loaded.model)
    sampler(_batch())
    sampler(_batch())  # no weight changed: no new hand-over
    assert stub.paths() == ["load_lora_adapter", "completions", "completions"]
    load0 = stub.seen[0][1]
    assert load0["lora_name"] == "rl-0" and load0["config_there"]
    assert [b["model"] for p, b in stub.seen if p.endswith("/completions")] == ["rl-0", "rl-0"]
    with torch.no_grad():  # an optimizer step changes the weights in place
        next(p for n, p in loaded.model.named_parameters() if "lora_B" in n).add_(0.1)
    sampler(_batch())
    assert stub.paths()[3:] == ["load_lora_adapter", "unload_lora_adapter", "completions"]
    assert stub.seen[3][1]["lora_name"] == "rl-1" and stub.seen[4][1] == {"lora_name": "rl-0"}
    assert stub.seen[5][1]["model"] == "rl-1"
    assert not (Path(load0["lora_path"])).exists()  # the old adapter's folder is gone
    assert sampler.handovers == 2 and sampler.handover_s > 0


def test_one_openai_client_serves_every_request_and_is_closed(monkeypatch):
    import toolkit.rl.served as mod

    made, real = [], mod.openai_client
    monkeypatch.setattr(mod, "openai_client", lambda url, timeout: made.append(real(url, timeout)) or made[-1])
    loaded, stub = load("stand-in-qwen2.5", quiet=True), Stub()
    with ServedSampler(loaded, max_new=5, server=stub) as sampler:
        loaded.model = attach(loaded.model)
        for _ in range(2):
            with torch.no_grad():  # a changed adapter each time: load, unload and completions requests
                next(p for n, p in loaded.model.named_parameters() if "lora_B" in n).add_(0.1)
            sampler(_batch())
    assert stub.paths() == [
        "load_lora_adapter",
        "completions",
        "load_lora_adapter",
        "unload_lora_adapter",
        "completions",
    ]
    assert len(made) == 1 and made[0].is_closed()


def test_a_negative_temperature_is_refused():
    with pytest.raises(ValueError, match="temperature"):
        ServedSampler(object(), temperature=-1)


class Dead:
    """A LocalServer whose process exited: nothing listens on its port any more."""

    def __init__(self, url):
        self.url, self.model, self.proc = url, "/models/start", type("P", (), {"returncode": -9})()

    def alive(self):
        return False

    def failure(self):
        return "RuntimeError: out of memory"

    def stop(self):
        pass


@pytest.mark.parametrize(
    "reply, says",
    [
        ((500, b'{"error": "EngineDeadError: engine core died"}'), "HTTP 500: EngineDeadError: engine core died"),
        ((200, b"<html>gateway</html>"), "not a JSON completion: '<html>gateway</html>'"),
        ((200, b'{"choices": [{"index": 0, "text": "a"}], "usage": {"completion_tokens": 1}}'), "answered 1 of 2"),
        ((200, b'{"choices": "x", "usage": {}}'), "reply without"),
    ],
)
def test_a_failing_server_is_one_line_not_a_traceback(reply, says):
    loaded = load("stand-in-qwen2.5", quiet=True)
    stub = Stub(reply)
    with ServedSampler(loaded, max_new=5, server=stub) as sampler, pytest.raises(ServerError) as e:
        sampler(_batch())
    assert says in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 900


def test_a_server_that_died_mid_run_names_its_exit_and_last_error():
    loaded = load("stand-in-qwen2.5", quiet=True)
    stub = Stub()
    stub.stop()
    stub.httpd.server_close()  # its port is closed now, as a dead process's is: the request is refused
    dead = Dead(stub.url)
    with ServedSampler(loaded, max_new=5, server=dead) as sampler, pytest.raises(ServerError) as e:
        sampler(_batch())
    msg = str(e.value)
    assert "/completions" in msg and "exited with -9: RuntimeError: out of memory" in msg and "\n" not in msg


@pytest.mark.parametrize("argv", [["rl.py", "train", "--engine", "vllm"], ["rl_engines.py"]])
def test_the_benchmarks_say_vllm_is_missing_before_any_model_loads(argv, tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TOOLKIT_VLLM_PYTHON=str(tmp_path / "no-python"), TOOLKIT_CACHE=str(tmp_path))
    r = subprocess.run(
        [sys.executable, str(root / "benchmarks" / argv[0]), *argv[1:]], capture_output=True, text=True, env=env
    )
    assert r.returncode == 2 and "vLLM (CPU build) is not installed" in r.stderr
    assert "Traceback" not in r.stderr and "model:" not in r.stdout and len(r.stderr.strip().splitlines()) <= 2


def test_eval_says_the_rl_adapter_is_missing_before_any_model_loads(tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, TOOLKIT_CACHE=str(tmp_path))
    cmd = [sys.executable, str(root / "benchmarks" / "rl.py"), "eval", "--rl", "--family", "calc", "--engine", "vllm"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "no RL adapter at" in r.stdout and "bench-lora-calc-vllm" in r.stdout
    assert "model:" not in r.stdout and "Traceback" not in r.stderr
