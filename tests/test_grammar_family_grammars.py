"""toolkit.grammar.family_grammars: the kit's own grammars for the call formats xgrammar has no built-in for
(Mistral's [TOOL_CALLS] list, Llama 3.2's pythonic list), one masked step on the family's own vocabulary, the
family's official call (its package's own ids) walked through the mask, and wrong calls refused."""

import importlib.util

import pytest

from toolkit.grammar.family_grammars import masked_step, official_call, vocabulary


def _has(module):
    return importlib.util.find_spec(module) is not None


needs_mistral = pytest.mark.skipif(
    not _has("mistral_common"), reason="mistral-common is not installed (requirements-nodeps.txt pins it)"
)
needs_spm = pytest.mark.skipif(
    not (_has("mistral_common") and _has("sentencepiece")),
    reason="mistral-common or sentencepiece is not installed (Mistral v3 / v7 are SentencePiece vocabularies)",
)
needs_llama = pytest.mark.skipif(not _has("llama_models"), reason="llama-models is not installed (requirements.txt)")

TEKKEN_BAD = {  # a wrong call -> the piece the mask refuses
    '[TOOL_CALLS][{"name": "get_wether", "arguments": {"city": "Paris"}}]': "ether",  # unknown tool
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": 7}}]': "7",  # wrong argument type
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"town": "Paris"}}]': "town",  # unknown argument
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_0001"}]': "_",  # id not [a-zA-Z0-9]{9}
}


@needs_mistral
def test_mistral_tekken_official_call_passes_and_wrong_calls_are_refused():
    step = masked_step("mistral-v3-tekken")
    assert step.vocab_size == 131_072 and step.allowed_first == 1 and step.first_examples == ["[TOOL_CALLS]"]
    assert step.call.startswith("[TOOL_CALLS][{") and step.call.endswith('"id": "call00001"}]')
    assert step.accepts_official_call, step
    assert masked_step("mistral-v3-tekken", call='[TOOL_CALLS][{"name": "get_weather", "arguments": {}}]').refused_at
    no_id = masked_step("mistral-v3-tekken", call='[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "X"}}]')
    assert no_id.accepts_official_call, no_id  # the id may be left out
    for bad, piece in TEKKEN_BAD.items():
        refused = masked_step("mistral-v3-tekken", call=bad)
        assert refused.refused_at is not None and refused.refused_piece == piece, refused


@needs_spm
@pytest.mark.parametrize("family", ["mistral-v3", "mistral-v7"])
def test_mistral_sentencepiece_official_call_passes_and_wrong_calls_are_refused(family):
    step = masked_step(family)
    assert step.vocab_size == 32_768 and step.allowed_first == 1 and step.first_examples == ["[TOOL_CALLS]"]
    assert step.call.startswith("[TOOL_CALLS]▁[{") and step.accepts_official_call, step
    for bad, piece in TEKKEN_BAD.items():
        refused = masked_step(family, call=bad.replace("[TOOL_CALLS][", "[TOOL_CALLS] ["))
        assert refused.refused_at is not None and refused.refused_piece.strip() == piece, refused


@needs_llama
def test_llama32_official_pythonic_call_passes_and_wrong_calls_are_refused():
    step = masked_step("llama3.2")
    assert step.vocab_size == 128_256 and step.call == '<|python_tag|>[get_weather(city="北京")]'
    assert "<|python_tag|>" in step.first_examples and step.allowed_first < 10, step  # the tag or a "[..." piece
    assert step.accepts_official_call, step
    # the bare, single-quoted list llama-models' llama3_2/text_prompt_format.md shows the model writing
    bare = masked_step("llama3.2", call="[get_weather(city='San Francisco', unit='celsius')]")
    assert bare.accepts_official_call, bare
    for bad, piece in {
        '<|python_tag|>[get_wether(city="Paris")]': "ether",  # unknown tool
        "<|python_tag|>[get_weather(city=7)]": "7",  # wrong argument type
        '<|python_tag|>[get_weather(city="Paris", unit="kelvin")]': "kel",  # outside the enum
        '<|python_tag|>[get_weather(town="Paris")]': "(t",  # unknown argument
    }.items():
        refused = masked_step("llama3.2", call=bad)
        assert refused.refused_at is not None and refused.refused_piece == piece, refused


@pytest.mark.parametrize(
    "family",
    [
        pytest.param("mistral-v3-tekken", marks=needs_mistral),
        pytest.param("mistral-v3", marks=needs_spm),
        pytest.param("mistral-v7", marks=needs_spm),
        pytest.param("llama3.2", marks=needs_llama),
    ],
)
def test_the_text_encoder_gives_the_packages_own_ids_for_the_official_call(family):
    call, ids = official_call(family)  # the ids the family's package wrote, stop token left out
    assert vocabulary(family).encode(call) == ids
