"""toolkit.grammar.tokinfo: the TokenizerInfo the kit builds equals xgrammar's ``from_huggingface``, field by field and
token by token, and anything it cannot read goes to the library's own path."""

import pytest
import xgrammar as xgr

from toolkit.grammar import tokinfo
from toolkit.qwen import STOP_IDS, VOCAB_WIDTH
from toolkit.tokenizer import qwen_tokenizer


@pytest.mark.parametrize("flavor", ["qwen2.5", "qwen3"])
@pytest.mark.parametrize("width", [None, VOCAB_WIDTH])
def test_equals_the_librarys_tokenizer_info(flavor, width):
    tok = qwen_tokenizer(flavor)
    width = width or len(tok)
    stops = sorted(STOP_IDS)
    lib = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=width, stop_token_ids=stops)
    ours = tokinfo.tokenizer_info(tok, width, stops)
    assert (ours.vocab_type, ours.add_prefix_space, ours.vocab_size) == (lib.vocab_type, lib.add_prefix_space, width)
    assert ours.stop_token_ids == lib.stop_token_ids and ours.special_token_ids == lib.special_token_ids
    assert ours.decoded_vocab == lib.decoded_vocab
    assert ours.serialize_json() == lib.serialize_json()


def test_a_tokenizer_without_a_fast_backend_goes_to_the_library(monkeypatch):
    seen = []
    monkeypatch.setattr(xgr.TokenizerInfo, "from_huggingface", lambda tok, **kw: seen.append(kw) or "library")
    assert tokinfo.tokenizer_info(object(), 10, [1]) == "library"
    assert seen == [{"vocab_size": 10, "stop_token_ids": [1]}]


def test_a_type_the_vocabulary_contradicts_goes_to_the_library(monkeypatch):
    tok = qwen_tokenizer("qwen2.5")
    monkeypatch.setattr(xgr.TokenizerInfo, "_detect_vocab_type_from_vocab", staticmethod(lambda v: xgr.VocabType.RAW))
    monkeypatch.setattr(xgr.TokenizerInfo, "from_huggingface", lambda t, **kw: "library")
    assert tokinfo.tokenizer_info(tok, len(tok), [1]) == "library"
