"""The ledger's families check reads the segment from the rendered text, and fails when the text says otherwise."""

from dataclasses import replace

from toolkit.book import claims_families as cf
from toolkit.families import render_family


def test_the_segment_is_read_from_the_text():
    assert cf.tools_segment("<|im_start|>system\nx <tools>get_weather</tools>") == "<|im_start|>system"
    assert cf.tools_segment("<s>[INST] hi [/INST]</s>[AVAILABLE_TOOLS][get_weather]") == "[AVAILABLE_TOOLS]"
    assert cf.tools_segment("no tools here") is None


def test_the_verdict_follows_the_renderings():
    qwen, mistral = render_family("qwen3"), render_family("mistral-v7")
    ok = cf.FAMILY_GROUP.run(family_renderings={"qwen3": qwen, "mistral-v7": mistral})[0]
    assert ok.verdict == "holds" and "mistral-v7: [AVAILABLE_TOOLS]" in ok.evidence
    moved = replace(qwen, text=qwen.text.replace("<|im_start|>system", "<|im_start|>user"))
    bad = cf.FAMILY_GROUP.run(family_renderings={"qwen3": moved, "mistral-v7": mistral})[0]
    assert bad.verdict == "does not hold"
    only_qwen = cf.FAMILY_GROUP.run(family_renderings={"qwen3": qwen, "gpt-oss": "gpt-oss: not installed"})[0]
    assert only_qwen.verdict == "does not hold" and "not installed here: gpt-oss" in only_qwen.evidence
