"""A server that answers malformed is an error, not an empty answer (toolkit/backends/http_tokens.py,
http_chat.py): no ``choices``, a non-streamed body where a stream was asked for, ids that are not token ids, a
choice without ``finish_reason``; and a password in the server URL is never echoed (``toolkit.untrusted.redact``).
A small stdlib HTTP server on 127.0.0.1 in this file answers each way; it computes nothing and names no model."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolkit.backends import http, http_chat, http_tokens
from toolkit.qwen import IM_END_ID
from toolkit.tokenizer import qwen_tokenizer
from toolkit.untrusted import redact

CHOICE = {"index": 0, "text": "hi", "finish_reason": "stop"}
ANSWERS = {  # what /v1/completions and /v1/chat/completions answer, by test case
    "no choices": {"id": "x", "object": "text_completion", "created": 0, "model": "m"},
    "bad ids": {"id": "x", "object": "text_completion", "created": 0, "model": "m",
                "choices": [dict(CHOICE, token_ids=["a", -1])]},
    "no finish": {"id": "x", "object": "text_completion", "created": 0, "model": "m",
                  "choices": [dict(CHOICE, finish_reason=None)]},
}  # fmt: skip


class _Malformed(BaseHTTPRequestHandler):
    answer: dict = {}

    def log_message(self, *a):
        pass

    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")  # never text/event-stream, even when asked for one
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "test"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._send(type(self).answer)


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Malformed,), {}))
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2.5")


def _url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


@pytest.mark.parametrize("case", list(ANSWERS))
@pytest.mark.parametrize("stream", [False, True])
def test_a_malformed_completion_is_an_error(server, tok, case, stream):
    server.RequestHandlerClass.answer = ANSWERS[case]
    b = http_tokens.TokensBackend(_url(server), tok, prompt_format="ids", stream=stream)
    with pytest.raises(http.ServerError) as e:
        b.generate([1, 2, 3], max_new_tokens=4, stop_ids={IM_END_ID})
    assert e.value.kind == "malformed_response" and "\n" not in str(e.value), str(e.value)


def test_a_well_formed_completion_still_passes(server, tok):
    server.RequestHandlerClass.answer = {
        "id": "x", "object": "text_completion", "created": 0, "model": "m", "choices": [CHOICE],
    }  # fmt: skip
    b = http_tokens.TokensBackend(_url(server), tok, prompt_format="ids", stream=False)
    g = b.generate([1, 2, 3], max_new_tokens=4, stop_ids={IM_END_ID})
    assert g.server["text"] == "hi" and "hunter2" not in g.server["url"]


@pytest.mark.parametrize(
    "answer",
    [
        {"id": "x", "object": "chat.completion", "created": 0, "model": "m"},
        {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
         "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": None}]},
    ],
)  # fmt: skip
def test_a_malformed_chat_answer_is_an_error(server, tok, answer):
    server.RequestHandlerClass.answer = answer
    b = http_chat.ChatBackend(_url(server), tok, [{"role": "user", "content": "hi"}], [])
    with pytest.raises(http.ServerError) as e:
        b.chat([{"role": "user", "content": "hi"}], max_new_tokens=4, stop_ids={IM_END_ID})
    assert e.value.kind == "malformed_response"


def test_a_password_in_the_url_is_never_echoed():
    assert (
        redact("http://user:hunter2@127.0.0.1:8000/v1?api_key=abc&x=1")
        == "http://***@127.0.0.1:8000/v1?api_key=***&x=1"
    )
    for bad in ("http://user:hunter2@127.0.0.1:8000", "http://user:hunter2@127.0.0.1:99999/v1", "ftp://u:hunter2@h/v1"):
        with pytest.raises(ValueError) as e:
            http.check_url(bad)
        assert "hunter2" not in str(e.value) and "***" in str(e.value)
    with pytest.raises(http.ServerError) as e:  # a closed port: the connection error names the URL
        http.probe("http://user:hunter2@127.0.0.1:9/v1", timeout_s=2)
    assert "hunter2" not in str(e.value)
