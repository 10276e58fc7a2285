"""toolkit.tokenizer.load_folder: a model folder's tokenizer, the same ids, without the init-only Python copies."""

import json

import pytest

from toolkit.tokenizer import load_folder, qwen_tokenizer


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("qwen2-tok")
    qwen_tokenizer("qwen2.5").save_pretrained(str(out))
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    cfg["tokenizer_class"] = "Qwen2Tokenizer"  # as the real model's folder says
    (out / "tokenizer_config.json").write_text(json.dumps(cfg))
    return out


def test_the_folder_tokenizer_drops_its_vocabulary_copies_and_keeps_its_ids(folder):
    from transformers import AutoTokenizer

    full, lean = AutoTokenizer.from_pretrained(str(folder)), load_folder(folder)
    assert type(lean).__name__ == "Qwen2Tokenizer" == type(full).__name__
    assert isinstance(full._vocab, dict) and len(full._vocab) > 150_000  # what transformers keeps
    assert lean._vocab is None and lean._merges is None
    text = 'Hello <tool_call>{"name": "calculator"}</tool_call><|im_end|> 世界 12,345'
    assert lean.encode(text) == full.encode(text)
    assert lean.decode(lean.encode(text)) == text
    assert len(lean) == len(full) and lean.get_vocab() == full.get_vocab()
    assert lean.convert_tokens_to_ids("<tool_call>") == full.convert_tokens_to_ids("<tool_call>")
