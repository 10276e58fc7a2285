"""toolkit.backends.http_structured and the tokens backend's constrained mode against a real server.

The field names for vLLM / SGLang are checked as data (CUDA only: no such server here). What ``transformers serve``
5.24 does with a structured-output parameter is checked on a real one (the stand-in served on 127.0.0.1, stopped by
PID): /v1/completions refuses it with HTTP 422, /v1/chat/completions accepts ``response_format`` and ignores it; the
backend turns either into a note and enforces the grammar on the host — never a traceback."""

import json

import httpx
import pytest

from toolkit import tools
from toolkit.backends import http_structured
from toolkit.backends.http_tokens import TokensBackend
from toolkit.grammar.compile import bounded, compile_schema, compile_tools
from toolkit.grammar.mask import GrammarMask, replay
from toolkit.qwen import STOP_IDS


@pytest.fixture(scope="module")
def tok():
    from toolkit.tokenizer import qwen_tokenizer

    return qwen_tokenizer("qwen3")


def test_fields_per_server_kind(tok):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}
    g = compile_schema(schema, tok, 151_936)
    assert http_structured.fields("vllm", g) == {"structured_outputs": {"json": schema}}
    assert json.loads(http_structured.fields("sglang", g)["json_schema"]) == schema
    tag = compile_tools(tools.schemas(["get_weather"]), tok, mode="tag", vocab_width=151_936)
    sent = http_structured.fields("vllm", tag)["structured_outputs"]["structural_tag"]
    assert json.loads(sent) == tag.source and "structural_tag" in http_structured.fields("sglang", tag)
    for kind in ("transformers", "openai-compatible"):
        assert http_structured.fields(kind, g) is None and http_structured.fields(kind, tag) is None
    assert http_structured.fields("vllm", None) is None


def test_refused_is_only_a_rejected_field():
    from toolkit.backends.http import ServerError

    assert http_structured.refused(ServerError("http_422", "x")) and http_structured.refused(
        ServerError("http_400", "x")
    )
    assert not http_structured.refused(ServerError("http_500", "x")) and not http_structured.refused(ValueError())


def test_unknown_structured_mode_is_refused_before_any_request(tok):
    with pytest.raises(ValueError, match="structured must be one of"):
        TokensBackend("http://127.0.0.1:9/v1", tok, structured="maybe")  # port 9: nothing is asked


@pytest.mark.slow
def test_transformers_serve_refuses_or_ignores_the_parameter(stand_in_server):
    """The measured facts the module docstring states, on the real server (fails if a transformers update changes
    them: then http_structured.fields should send the parameter to it)."""
    base, model = stand_in_server.url, stand_in_server.model
    body = dict(model=model, prompt="hi", max_tokens=1)
    for extra in ({"response_format": {"type": "json_object"}}, {"structured_outputs": {"json": {"type": "object"}}}):
        r = httpx.post(f"{base}/completions", json={**body, **extra}, timeout=60)
        assert r.status_code == 422 and "Unexpected fields" in r.text, (r.status_code, r.text[:200])
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}
    r = httpx.post(f"{base}/chat/completions", json=dict(model=model, max_tokens=2, response_format=fmt,
                   messages=[{"role": "user", "content": "hi"}]), timeout=120)  # fmt: skip
    assert r.status_code == 200 and r.json()["choices"][0]["message"] is not None  # accepted, and ignored


@pytest.mark.slow
def test_a_rejected_grammar_becomes_a_note_and_the_host_enforces_it(stand_in_server, tok):
    schema = bounded(tools.schemas(["get_weather"])[0], max_length=6)
    g = compile_tools([schema], tok, mode="tag", vocab_width=151_936)
    prompt = tok.encode("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n")
    for mode, said in (("server", "rejected the structured-output parameter"), ("auto", "takes no grammar")):
        b = TokensBackend(stand_in_server.url, tok, structured=mode)
        gen = b.generate(prompt, max_new_tokens=40, stop_ids=set(STOP_IDS), mask=GrammarMask(g))
        assert any(said in n for n in b.notes), (mode, b.notes)
        if mode == "server":
            assert "HTTP 422" in " ".join(b.notes)
        ok, _ = replay(g, gen.new_ids)
        assert ok, f"{mode}: a kept token is outside the grammar"
        assert not any(r.get("grammar_sent") for r in gen.server["requests"])  # no request carried a refused field
