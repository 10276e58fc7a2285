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


def test_last_merge_is_the_pair_bpe_joins_last():
    from toolkit.tokenizer import _last_merge

    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    assert _last_merge(ranks, b"abc") == (b"ab", b"c")  # "ab" ranks before "bc", so BPE never makes "bc" here
    assert _last_merge(ranks, b"ab") == (b"a", b"b")
    assert _last_merge({b"a": 0, b"b": 1, b"c": 2, b"abc": 3}, b"abc") is None  # unreachable by merges


def test_one_merge_per_token_encodes_exactly_as_every_split_does():
    """The kit's merges list (one per token) against the library's (every split into two tokens): same ids."""
    import random

    from tokenizers import Tokenizer, normalizers
    from tokenizers.models import BPE
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from toolkit.conversations import LOOP_EXAMPLES
    from toolkit.qwen import QWEN_PATTERN
    from toolkit.tokenizer import _bpe_ranks, _build_backend

    ours = _build_backend()
    lib = TikTokenConverter(vocab_file="x", pattern=QWEN_PATTERN)
    lib.load_tiktoken_bpe = lambda _url: _bpe_ranks()
    vocab, merges = lib.extract_vocab_merges_from_model("x")
    full = Tokenizer(BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    full.pre_tokenizer, full.normalizer = ours.pre_tokenizer, normalizers.NFC()
    assert len(merges) > 290_000 and len(json.loads(ours.to_str())["model"]["merges"]) == 151_387
    rng = random.Random(0)
    alphabet = "abcXYZ 0123456789 \n\t,.;:'\"{}[]()<>_-+=*/%$ éüñ中文日本語한국어🙂ﬁ\u00a0\u0301"
    texts = [json.dumps(v, ensure_ascii=False) for v in LOOP_EXAMPLES.values()]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(1500)]
    texts += [bytes(rng.randrange(256) for _ in range(30)).decode("utf-8", "replace") for _ in range(500)]
    assert [e.ids for e in ours.encode_batch(texts)] == [e.ids for e in full.encode_batch(texts)]


def test_the_merges_are_the_real_models_where_it_is_installed():
    from toolkit import fetch
    from toolkit.tokenizer import _build_backend

    if not fetch.is_installed():
        pytest.skip("the real model is not installed (make real-model)")
    real = json.loads((fetch.installed_folder() / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]
    assert json.loads(_build_backend().to_str())["model"]["merges"] == real


def test_a_cached_tokenizer_from_an_older_build_is_rebuilt(tmp_path, monkeypatch):
    from toolkit.tokenizer import BUILD, BUILD_FILE

    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path))
    old = tmp_path / "tokenizers" / "qwen2.5"
    old.mkdir(parents=True)
    (old / "tokenizer.json").write_text("{}")  # an older build's file (no build mark beside it)
    tok = qwen_tokenizer("qwen2.5")
    assert (old / BUILD_FILE).read_text() == BUILD
    assert tok.encode("<tool_call>hello", add_special_tokens=False)[0] == 151657
    assert not [p.name for p in old.parent.iterdir() if p.name != "qwen2.5"]  # nothing half-written left beside it


def test_two_processes_building_at_once_both_get_the_tokenizer(tmp_path):
    import os
    import subprocess
    import sys

    code = "from toolkit.tokenizer import qwen_tokenizer; print(qwen_tokenizer('qwen2.5').encode('<tool_call>x')[0])"
    env = dict(os.environ, TOOLKIT_CACHE=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) for _ in "ab"]
    outs = [p.communicate(timeout=300)[0].strip().splitlines()[-1] for p in procs]
    assert outs == ["151657", "151657"] and [p.returncode for p in procs] == [0, 0]
    assert sorted(p.name for p in (tmp_path / "tokenizers").iterdir()) == ["qwen2.5"]  # no leftovers beside it
    assert (tmp_path / "tokenizers" / "qwen2.5" / "tokenizer.json").exists()


def test_a_damaged_cached_tokenizer_is_built_again(tmp_path, monkeypatch):
    from toolkit.tokenizer import BUILD, BUILD_FILE

    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path))
    folder = tmp_path / "tokenizers" / "qwen2.5"
    good = qwen_tokenizer("qwen2.5").encode("<tool_call>hello world", add_special_tokens=False)
    whole = (folder / "tokenizer.json").read_bytes()
    (folder / "tokenizer.json").write_bytes(whole[:100_000])  # truncated, with the current build's mark beside it
    assert (folder / BUILD_FILE).read_text() == BUILD
    assert qwen_tokenizer("qwen2.5").encode("<tool_call>hello world", add_special_tokens=False) == good
    assert (folder / "tokenizer.json").read_bytes() == whole
    assert sorted(p.name for p in folder.parent.iterdir()) == ["qwen2.5"]
