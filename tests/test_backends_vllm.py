"""The kit against a real vLLM (its CPU build, ``make vllm``) serving the real offline model, started once for this
module on a free 127.0.0.1 port and stopped by PID in the teardown (``toolkit.backends.serve.LocalServer``).

What is checked, each with short decodes (a few to 40 new tokens):
- the launcher: a one-line error where vLLM cannot run (no venv, an adapter vLLM cannot load); the server named
  ``vllm`` by the probe; its KV-cache facts read from ``/metrics`` match the model's shape (``toolkit.cost``);
- tokens mode sends ids and keeps the server's ids (no re-tokenization): the prompt ids the server echoes are the
  kit's; the re-tokenization fix (``toolkit.backends.drift.splice``) holds end to end — the spliced prompt is what the
  server counts and its prefix cache hits it, block-aligned;
- the host loop prints each turn's cache hits beside the kit's own shared-prefix count;
- the kit's tool grammar sent as ``structured_outputs`` (structural tag, and JSON schema): every returned token
  replays through the kit's matcher, 0 disagreements on a seeded set; vLLM's removed ``guided_json`` spelling is
  accepted with HTTP 200 and ignored — the replay names it;
- chat mode with ``tools=`` and each ``tool_choice``; streaming on and off give the same ids; the first-token
  log-probabilities the notebooks draw, from the server;
- the shipped LoRA adapter merged into the base weights (``toolkit.sft.export``: vLLM's LoRA loader refuses its
  retrained token rows) and served by a second vLLM started beside the first: with ``tool_choice="auto"`` it
  returns ``tool_calls``, the base model none;
- bad paths: a timeout and the server gone mid-turn are one-line ``ServerError``s.
"""

import os
import threading
import time

import pytest

from toolkit.backends import drift, http, http_chat, http_logprobs, http_tokens, vllm_local
from toolkit.backends.serve import LocalServer
from toolkit.grammar.compile import compile_schema, compile_tool_choice
from toolkit.loop.examples import example
from toolkit.loop.loop import run
from toolkit.loop.steps import Executed, Generated, Rendered
from toolkit.qwen import IM_END_ID, STOP_IDS
from toolkit.render import render
from toolkit.schema import openai_schema
from toolkit.tokenizer import qwen_tokenizer

pytestmark = [pytest.mark.vllm, pytest.mark.real_model, pytest.mark.slow]
EXAMPLES = ("calculator", "weather", "two_cities")  # the seeded set: the kit's own loop examples, greedy


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2.5")


ADAPTER_NAME = "qwen2.5-coder-0.5b+lora"


@pytest.fixture(scope="module")
def servers():
    """The base model and the adapter merged into it (``toolkit.sft.export``), two vLLM servers started together."""
    from toolkit.sft.export import merged_folder

    folders = {"base": None, "adapter": str(merged_folder())}
    started, errors = {}, []

    def start(key):
        try:
            started[key] = LocalServer(
                folders[key], engine="vllm", served_name=ADAPTER_NAME if key == "adapter" else None,
                kv_cache_gib=1 if key == "adapter" else 2,
            )  # fmt: skip
        except Exception as e:  # reported below, after both starts ended
            errors.append(e)

    threads = [threading.Thread(target=start, args=(k,)) for k in folders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        if errors:
            raise errors[0]
        yield started
    finally:
        for srv in started.values():
            pid = srv.pid
            srv.stop()
            assert not srv.alive()
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


@pytest.fixture(scope="module")
def server(servers):
    return servers["base"]


def _prompt(tok, name):
    ex = example(name)
    schemas = [openai_schema(t) for t in ex["tools"].values()]
    return ex, schemas, render(ex["messages"], schemas, template="qwen2.5", tokenizer=tok).ids


# ================================================================ launcher errors (no server needed)
def test_no_venv_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(vllm_local.ENV_PYTHON, str(tmp_path / "nope" / "python"))
    usable, why = vllm_local.state()
    assert not usable and "make vllm" in why and "\n" not in why
    with pytest.raises(FileNotFoundError, match="make vllm"):
        LocalServer(engine="vllm")


def test_which_engines_a_benchmark_starts(monkeypatch, tmp_path):
    from toolkit.backends.serve import engines_to_run

    assert engines_to_run("both", "http://127.0.0.1:9/v1") == (["url"], "")
    monkeypatch.setenv(vllm_local.ENV_PYTHON, str(tmp_path / "nope"))  # vLLM not installed
    engines, note = engines_to_run("both")
    assert engines == ["transformers"] and "make vllm" in note
    with pytest.raises(ValueError, match="make vllm"):
        engines_to_run("vllm")
    assert engines_to_run("transformers") == (["transformers"], "")


def test_a_core_binding_from_the_environment_is_kept_or_refused_in_one_line():
    assert vllm_local.environment({})["VLLM_CPU_OMP_THREADS_BIND"] == vllm_local.cores()
    for kept in ("1", "0-1", "0,2", "0-3|4-7", "auto"):
        assert vllm_local.environment({"VLLM_CPU_OMP_THREADS_BIND": kept})["VLLM_CPU_OMP_THREADS_BIND"] == kept
    for bad in ("abc", "0-", "1;rm", "x" * 10_000):
        with pytest.raises(ValueError) as e:
            vllm_local.environment({"VLLM_CPU_OMP_THREADS_BIND": bad})
        assert "\n" not in str(e.value) and len(str(e.value)) < 200


def test_both_servers_compute_in_the_dtype_this_cpu_multiplies_fast(monkeypatch):
    """bf16 only where the CPU has avx512_bf16 or AMX (else ~7x slower than float32): transformers serve as vLLM."""
    from toolkit.backends import serve

    for fast, want in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(vllm_local, "fast_bf16", lambda fast=fast: fast)
        argv = serve.command("m", 8000)
        assert argv[argv.index("--dtype") + 1] == want == vllm_local.dtype()
    assert serve.command("m", 8000, dtype="bfloat16")[-1] == "bfloat16"


def test_an_adapter_vllm_cannot_load_is_refused_before_starting():
    from toolkit.models import adapter_folder

    why = vllm_local.unsupported_adapter(adapter_folder())  # the shipped adapter retrains two embedding rows
    assert why and "trainable_token_indices" in why
    with pytest.raises(ValueError, match="trainable_token_indices"):
        LocalServer(engine="vllm", lora={"toolcall": str(adapter_folder())})


# ================================================================ the real server
def test_probe_and_cache_facts(server):
    info = http.probe(server.url)
    assert info.kind == "vllm" and "qwen2.5-coder-0.5b" in info.model.lower()
    facts = vllm_local.cache_config(server.url)
    from toolkit.cost import KV_SHAPES, kv_bytes_per_token

    _, *shape = KV_SHAPES["Qwen2.5-Coder-0.5B"]  # published: 24 layers, 2 KV heads of 64
    per_token = kv_bytes_per_token(*shape, bytes_per_value=2 if vllm_local.dtype() == "bfloat16" else 4)
    assert facts["prefix_caching"] and facts["block_size"] > 0
    # vLLM's capacity is its KV bytes over the bytes one token's keys and values take: the kit's formula
    assert facts["kv_cache_tokens"] == facts["blocks"] * facts["block_size"]
    assert abs(facts["kv_cache_bytes"] / per_token - facts["kv_cache_tokens"]) <= facts["block_size"]


def test_tokens_mode_sends_ids_and_the_splice_is_what_the_server_caches(server, tok):
    ex, schemas, ids = _prompt(tok, "calculator")
    b = http_tokens.TokensBackend(server.url, tok)
    trace = run(b, tok, ex["messages"], ex["tools"], tool_choice="required", max_turns=2, max_new_tokens=40,
                template="qwen2.5")  # fmt: skip
    results = [r for s in trace.of(Executed) for r in s.results]
    assert results and results[0].result["result"] == 37.5 and "37.5" in (trace.answer or "")
    gens = [s.generation for s in trace.of(Generated)]
    reqs = [r for g in gens for r in g.server["requests"]]
    assert all(r["prompt_format"] == "ids" and r["prompt_ids_echoed_ok"] and r["ids_from"] == "server" for r in reqs)
    assert all(r["prompt_count_ok"] and r["completion_count_ok"] for r in reqs), reqs
    # the loop printed the server's hits beside the kit's own count, every turn
    lines = [s.lines() for s in trace.of(Generated)]
    assert all("server prefix cache:" in ln and "the kit's shared prefix" in ln for ln in lines)
    # end to end: turn 2's prompt spliced from turn 1's ids is what the server counts, and its cache holds it
    prompts = [s.prompt_ids for s in trace.of(Rendered)]
    spliced = drift.splice(prompts[0], gens[0].new_ids, prompts[1])
    block = vllm_local.cache_config(server.url)["block_size"]
    r = b.complete(spliced, max_new_tokens=1, stop_ids={IM_END_ID})
    assert r["usage"]["prompt_tokens"] == len(spliced) and r["prompt_ids_echoed_ok"]
    held = len(prompts[0]) + len(gens[0].new_ids) - 1  # turn 1's prompt and output, without its stop token
    assert r["usage"]["cached_tokens"] % block == 0 and r["usage"]["cached_tokens"] >= (held // block) * block


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_kit_grammar_sent_to_vllm_replays_with_no_disagreement(server, tok, name):
    ex, schemas, ids = _prompt(tok, name)
    for grammar in (
        compile_tool_choice(schemas, tok, "required"),
        compile_schema(schemas[0]["function"]["parameters"], tok),
    ):
        from toolkit.grammar.mask import GrammarMask

        b = http_tokens.TokensBackend(server.url, tok, stream=False)
        g = b.generate(ids, max_new_tokens=40, stop_ids=set(STOP_IDS), mask=GrammarMask(grammar))
        first = g.server["requests"][0]
        assert first["kept"] == first["completion_ids_kit"] and first["refused"] is None, (name, grammar.kind, first)
        assert any("decoded under the grammar it was sent" in n for n in b.notes), b.notes


def test_an_ignored_grammar_is_caught_by_the_replay(server, tok):
    from toolkit.grammar.mask import GrammarMask

    _, schemas, ids = _prompt(tok, "calculator")
    # a schema the model would never write freely here: the answer must be {"n": <integer>}
    grammar = compile_schema({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
                              "additionalProperties": False}, tok)  # fmt: skip
    b = http_tokens.TokensBackend(server.url, tok, stream=False, structured="legacy")
    g = b.generate(ids, max_new_tokens=24, stop_ids=set(STOP_IDS), mask=GrammarMask(grammar))
    first = g.server["requests"][0]
    assert first["refused"] is not None  # HTTP 200, and a token the grammar refuses: guided_json was ignored
    assert any("ignored the grammar it was sent (['guided_json'])" in n for n in b.notes), b.notes
    text = tok.decode([i for i in g.new_ids if i not in STOP_IDS])
    assert text.startswith('{"n"'), text  # the host enforced the grammar from there


@pytest.mark.parametrize("choice", ["auto", "required", "none", "calculator"])
def test_chat_mode_with_tools_and_each_tool_choice(server, tok, choice):
    ex, schemas, ids = _prompt(tok, "calculator")
    b = http_chat.ChatBackend(server.url, tok, ex["messages"], schemas, tool_choice=choice)
    g = b.generate(ids, max_new_tokens=40, stop_ids={IM_END_ID})
    calls = g.server["server_tool_calls"]
    assert g.server["usage"]["prompt_tokens"] == len(ids) and g.server["prompt_count_ok"]
    if choice in ("required", "calculator"):
        assert [c["name"] for c in calls] == ["calculator"], g.server
    else:  # auto: the base model writes fenced JSON, not a <tool_call> block, so the server parses none
        assert calls == [], g.server


def test_streaming_on_and_off_give_the_same_ids(server, tok):
    for name in EXAMPLES:
        _, _, ids = _prompt(tok, name)
        got = [
            http_tokens.TokensBackend(server.url, tok, stream=s).complete(ids, max_new_tokens=16, stop_ids={IM_END_ID})
            for s in (True, False)
        ]
        assert got[0]["token_ids"] == got[1]["token_ids"] and got[0]["token_ids"], name
        assert got[0]["first_token_s"] is not None and got[1]["first_token_s"] is None


def test_first_token_logprobs_from_the_server(server, tok):
    _, _, ids = _prompt(tok, "calculator")
    b = http_tokens.TokensBackend(server.url, tok)
    top = http_logprobs.first_token_logprobs(b, ids, k=5)
    assert len(top) == 5 and all(lp <= 0 for _, lp in top) and top == sorted(top, key=lambda t: -t[1])
    greedy = b.complete(ids, max_new_tokens=1, stop_ids={IM_END_ID})["token_ids"][0]
    assert top[0][0] == greedy  # the most likely first token is the one greedy decoding takes


def test_first_token_probs_on_vllm_agree_with_the_local_model(server, tok):
    """What notebook 03 prints from a server: vLLM's log-probabilities beside the kit's own model's logits."""
    from toolkit.backends.choose import choose, first_token_probs
    from toolkit.models import load
    from toolkit.qwen import TOOL_CALL_ID

    _, _, ids = _prompt(tok, "calculator")
    served = first_token_probs(choose(url=server.url), ids, k=4, tokens=(TOOL_CALL_ID,))
    local = first_token_probs(load("qwen2.5-coder-0.5b", quiet=True), ids, k=4, tokens=(TOOL_CALL_ID,))
    assert server.url in served["source"] and "local model" in local["source"]
    assert served["top"][0][0] == local["top"][0][0]  # the same most likely first token
    assert abs(served["top"][0][1] - local["top"][0][1]) < 0.05, (served["top"], local["top"])  # bf16 vs the kit's
    a, b = served["named"][TOOL_CALL_ID], local["named"][TOOL_CALL_ID]
    assert 0 < a < 0.01 and 0 < b < 0.01 and 1 / 3 < a / b < 3, (a, b)  # the base model hardly writes the tag


def test_the_adapter_calls_tools_by_itself_and_the_base_model_does_not(servers, tok):
    ex, schemas, ids = _prompt(tok, "calculator")
    calls = {}
    for key, srv in servers.items():
        b = http_chat.ChatBackend(srv.url, tok, ex["messages"], schemas, tool_choice="auto")
        calls[key] = b.generate(ids, max_new_tokens=40, stop_ids={IM_END_ID}).server["server_tool_calls"]
        assert (ADAPTER_NAME in b.name) == (key == "adapter"), b.name  # every output names the model that ran
    assert calls["base"] == [], calls
    assert [c["name"] for c in calls["adapter"]] == ["calculator"], calls


def test_a_timeout_is_one_line(server, tok):
    _, _, ids = _prompt(tok, "calculator")
    b = http_tokens.TokensBackend(server.url, tok, timeout_s=0.05, stream=False)
    with pytest.raises(http.ServerError) as e:
        b.complete(ids * 8, max_new_tokens=200, stop_ids=set())
    assert e.value.kind == "timeout" and "\n" not in str(e.value)


def test_the_server_gone_mid_turn_is_one_line(server, tok):
    """The last test of the module: it stops the server while a turn decodes."""
    _, _, ids = _prompt(tok, "calculator")
    b = http_tokens.TokensBackend(server.url, tok)
    killer = threading.Timer(1.0, server.stop)
    t0 = time.monotonic()
    killer.start()
    with pytest.raises(http.ServerError) as e:
        b.complete(ids, max_new_tokens=3000, stop_ids=set())
    killer.join()
    assert e.value.kind in ("unreachable", "malformed_response", "http_500", "server_error")
    assert "\n" not in str(e.value)
    assert time.monotonic() - t0 < 60
