"""toolkit.grammar.family_tags: xgrammar's built-in structural tag per family, one masked step on the family's own
vocabulary, and the family's official call (rendered by its own package) walked through the mask."""

import importlib.util

import pytest
import xgrammar as xgr

from toolkit.grammar.family_tags import BUILTIN, NOT_BUILT, NoBuiltinTag, family_tag, masked_step
from toolkit.qwen import TOOL_CALL_ID


def _has(module):
    return importlib.util.find_spec(module) is not None


def test_families_without_a_builtin_are_said_and_really_missing():
    for family in NOT_BUILT:
        with pytest.raises(NoBuiltinTag):
            family_tag(family)
    with pytest.raises(ValueError, match="Unknown format type"):  # xgrammar 0.2.9's registry has no Mistral key
        xgr.get_model_structural_tag("mistral", tools=[])
    assert set(BUILTIN.values()) <= set(_registry())


def _registry():
    from xgrammar import builtin_structural_tag as b

    return b._structural_tag_registry.keys()


def test_qwen_official_call_passes_the_mask_on_qwen_ids():
    step = masked_step("qwen2.5")
    assert step.vocab_size == 151_936 and "<tool_call>" in step.first_examples
    assert 0 < step.allowed_first < 10  # "required": the turn must open a call
    assert step.call_ids[0] == TOOL_CALL_ID and step.accepts_official_call, step


def test_a_wrong_call_is_refused_where_it_goes_wrong():
    bad = '<tool_call>\n{"name": "get_weather", "arguments": {"town": "Paris"}}\n</tool_call>'
    step = masked_step("qwen2.5", call=bad)
    assert step.refused_at is not None and not step.accepts_official_call
    assert "t" in step.refused_piece  # refused at "town", not before


@pytest.mark.skipif(not _has("llama_models"), reason="llama-models is not installed (requirements.txt pins it)")
def test_llama31_builtin_is_the_bare_json_format_not_the_python_tag_one():
    official = masked_step("llama3.1")
    assert official.vocab_size == 128_256
    assert official.call.startswith("<|python_tag|>") and official.refused_at == 0  # llama-models' own call
    bare = masked_step("llama3.1", call='{"name": "get_weather", "parameters": {"city": "Paris"}}')
    assert bare.accepts_official_call, bare


@pytest.mark.skipif(not _has("openai_harmony"), reason="openai-harmony is not installed (requirements.txt pins it)")
def test_gpt_oss_official_call_passes_the_mask_on_o200k_harmony_ids():
    step = masked_step("gpt-oss")
    assert step.vocab_size > 200_000 and step.call.startswith(" to=functions.get_weather")
    assert step.accepts_official_call, step
