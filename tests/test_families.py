"""One conversation, several families: each rendering checked against its own package's other entry points (its
validated request encoder, its own reader of a call, its tokenizer's round trip), and the facts the table states
checked on the rendered text. No template or tokenizer file is copied here."""

import json

import pytest

from toolkit.conversations import round_trip
from toolkit.families import FAMILIES, MISTRAL_CALL_ID, FamilyRendering, render_all, render_family, rows

REASON = "pinned in requirements.txt / requirements-nodeps.txt; `make setup` installs it"
RT = round_trip("weather")
CALL = RT.call["tool_calls"][0]["function"]


@pytest.fixture(scope="module")
def fam():
    return render_all("weather")


def _r(fam, name, module) -> FamilyRendering:
    pytest.importorskip(module, reason=REASON)
    r = fam[name]
    assert isinstance(r, FamilyRendering), r
    return r


def test_every_family_renders_the_same_conversation(fam):
    for name in FAMILIES:
        r = fam[name]
        if isinstance(r, str):  # a package missing: one line naming its pin, never a traceback
            assert "\n" not in r and "make setup" in r
            continue
        assert RT.answer["content"] in r.text and "北京" in r.text, name
        assert r.call.endswith(r.stop) and r.call in r.text, name
        assert len(r.ids) == len(r.pieces) == len(r.special) and any(r.special), name
        assert r.tool_cost > 0, name
        toks = r.call_tokens()  # the call's own tokens: they spell the call exactly and end at the stop token
        assert "".join(t["token"] for t in toks) == r.call and toks[-1]["token"] == r.stop and toks[-1]["special"]
    table = rows(fam)
    assert [row["family"] for row in table] == list(FAMILIES)


def test_unknown_family_is_one_clear_error():
    with pytest.raises(ValueError, match="choose one of"):
        render_family("falcon")


# ---------------------------------------------------------------- Qwen (the kit's templates)
def test_qwen_tools_in_system_result_in_user_turn(fam):
    for name in ("qwen3", "qwen2.5"):
        r = fam[name]
        system = r.text.split("<|im_end|>")[0]
        assert system.startswith("<|im_start|>system") and "<tools>" in system and '"get_weather"' in system
        assert "<|im_start|>user\n<tool_response>" in r.text
        assert r.call.startswith("<tool_call>") and r.stop == "<|im_end|>"


# ---------------------------------------------------------------- Mistral (mistral-common)
@pytest.mark.parametrize("name", ["mistral-v3", "mistral-v3-tekken", "mistral-v7"])
def test_mistral_matches_the_packages_request_encoder(fam, name):
    r = _r(fam, name, "mistral_common")
    from mistral_common.protocol.instruct.messages import AssistantMessage, ToolMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool, ToolCall
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    tok = MistralTokenizer.v7() if name == "mistral-v7" else MistralTokenizer.v3(is_tekken=name.endswith("tekken"))
    call = ToolCall(
        id=MISTRAL_CALL_ID, function=FunctionCall(name=CALL["name"], arguments=json.dumps(CALL["arguments"]))
    )
    request = ChatCompletionRequest(  # the validated serving path: request 2 must be a prefix of the whole rendering
        messages=[
            UserMessage(content=RT.first[-1]["content"]),
            AssistantMessage(tool_calls=[call]),
            ToolMessage(content=RT.results[0]["content"], tool_call_id=MISTRAL_CALL_ID, name=CALL["name"]),
        ],
        tools=[Tool(function=Function(**t["function"])) for t in RT.tools],
    )
    second = tok.encode_chat_completion(request).tokens
    assert r.ids[: len(second)] == second and len(r.ids) > len(second)
    spm = tok.instruct_tokenizer.tokenizer
    assert r.special == [bool(spm.is_special(i)) for i in r.ids]
    assert spm.decode(r.ids[len(second) :]).strip() == RT.answer["content"]


@pytest.mark.parametrize("name", ["mistral-v3", "mistral-v3-tekken", "mistral-v7"])
def test_mistral_facts(fam, name):
    r = _r(fam, name, "mistral_common")
    t = r.text
    assert t.count("[AVAILABLE_TOOLS]") == 1
    # the tools sit in the last user message's region: right before the last [INST], with no [INST] before them
    assert t.index("[/AVAILABLE_TOOLS]") < t.rindex("[INST]") and t.index("[AVAILABLE_TOOLS]") < t.index("[INST]")
    assert t[t.index("[/AVAILABLE_TOOLS]") + len("[/AVAILABLE_TOOLS]") :].startswith("[INST]")
    assert r.call.startswith("[TOOL_CALLS]") and r.stop == "</s>"
    results = t[t.index("[TOOL_RESULTS]") : t.index("[/TOOL_RESULTS]")]
    assert MISTRAL_CALL_ID in results and "temperature" in results
    assert ("[TOOL_CONTENT]" in results) == (name == "mistral-v7")


# ---------------------------------------------------------------- Llama 3.1 / 3.2 (llama-models)
@pytest.mark.parametrize("name", ["llama3.1", "llama3.2"])
def test_llama_call_read_back_by_the_package(fam, name):
    r = _r(fam, name, "llama_models")
    from llama_models.llama3.api.chat_format import ChatFormat
    from llama_models.llama3.api.datatypes import StopReason
    from llama_models.llama3.api.tokenizer import Tokenizer

    tok = Tokenizer.get_instance()
    assert tok.encode(r.text, bos=False, eos=False, allowed_special="all") == r.ids  # ids are the tokenizer's
    msg = ChatFormat(tok).decode_assistant_message_from_content(r.call, StopReason.end_of_message)
    assert msg.stop_reason == StopReason.end_of_message
    assert [(c.tool_name, c.arguments) for c in msg.tool_calls] == [(CALL["name"], CALL["arguments"])]


def test_llama_facts(fam):
    r31, r32 = _r(fam, "llama3.1", "llama_models"), _r(fam, "llama3.2", "llama_models")
    for r in (r31, r32):
        assert r.call.startswith("<|python_tag|>") and r.stop == "<|eom_id|>"
        assert "<|start_header_id|>ipython<|end_header_id|>\n\n" + RT.results[0]["content"] + "<|eot_id|>" in r.text
    system31 = r31.text.split("<|eot_id|>")[0]
    assert "Environment: ipython" in system31 and "get_weather" not in system31  # 3.1: tools in a user message
    assert '"name": "get_weather"' in r31.text.split("<|eot_id|>")[1]
    assert "get_weather" in r32.text.split("<|eot_id|>")[0]  # 3.2: tools in the system message
    assert r32.call == '<|python_tag|>[get_weather(city="北京")]<|eom_id|>'


# ---------------------------------------------------------------- gpt-oss (openai-harmony)
def test_harmony_call_read_back_by_the_package(fam):
    r = _r(fam, "gpt-oss", "openai_harmony")
    from openai_harmony import HarmonyEncodingName, Role, load_harmony_encoding

    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    assert enc.encode(r.text, allowed_special="all") == r.ids
    call_ids = enc.encode(r.call, allowed_special="all")
    assert call_ids[-1] in enc.stop_tokens_for_assistant_actions() and enc.decode([call_ids[-1]]) == "<|call|>"
    (msg,) = enc.parse_messages_from_completion_tokens(call_ids[2:], Role.ASSISTANT)  # after <|start|>assistant
    assert msg.recipient == f"functions.{CALL['name']}" and msg.channel == "commentary"
    assert json.loads(msg.content[0].text) == CALL["arguments"]


def test_harmony_facts(fam):
    r = _r(fam, "gpt-oss", "openai_harmony")
    developer = r.text[r.text.index("<|start|>developer") :].split("<|end|>")[0]
    assert "namespace functions {" in developer and "type get_weather = " in developer
    assert "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>" in r.text
    assert r.call.endswith("<|call|>") and "<|channel|>commentary" in r.call


def test_a_system_prompt_goes_where_each_mistral_version_puts_it():
    pytest.importorskip("mistral_common", reason=REASON)
    v3, v7 = render_family("mistral-v3", "calculator"), render_family("mistral-v7", "calculator")
    system = round_trip("calculator").first[0]["content"]
    assert "[SYSTEM_PROMPT]" in v7.text and "[SYSTEM_PROMPT]" not in v3.text
    last_inst = v3.text[v3.text.rindex("[INST]") : v3.text.rindex("[/INST]")]  # v3: folded into the last user turn
    assert system.replace(" ", "▁") in last_inst or system in last_inst
