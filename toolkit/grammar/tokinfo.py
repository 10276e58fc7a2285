"""xgrammar's ``TokenizerInfo`` for a Hugging Face fast tokenizer, built without serialising the whole tokenizer.

What it does
- :func:`tokenizer_info` gives what ``xgr.TokenizerInfo.from_huggingface`` gives: the vocabulary by id (padded to
  the model's width), its type (byte-level, byte-fallback, raw) and ``add_prefix_space``, the stop ids. The library
  reads the type from ``backend_tokenizer.to_str()``: the whole tokenizer as JSON, vocabulary and merges included
  (11 MB for Qwen's 151k tokens), which its C++ then parses. Measured here beside the int8 model: building it raised
  the process's peak by 87 MB. This module hands the same detection only the parts it reads (normaliser,
  pre-tokeniser, decoder, the model's type and byte fallback): 44 MB. ``tests/test_grammar_tokinfo.py`` checks the
  result equals the library's, field by field and token by token, on the kit's tokenizers.
- Where the tokenizer is not a fast one, or the library's check of the type against the vocabulary disagrees with
  the detection, it returns the library's own ``from_huggingface``.

What it leaves out
- tiktoken and SentencePiece-only tokenizers (the library's path).
"""

from __future__ import annotations

import json

import xgrammar as xgr


def _parts(backend) -> str:
    parts = {}
    for key in ("normalizer", "pre_tokenizer", "decoder"):
        part = getattr(backend, key, None)
        parts[key] = None if part is None else json.loads(part.__getstate__())
    model = backend.model
    parts["model"] = {"type": type(model).__name__, "byte_fallback": bool(getattr(model, "byte_fallback", False))}
    return json.dumps(parts)


def tokenizer_info(tokenizer, vocab_size: int, stop_token_ids: list[int]):
    """``xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=..., stop_token_ids=...)``, with a lower peak."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    detect = getattr(xgr.TokenizerInfo, "_detect_metadata_from_hf", None)
    from_vocab = getattr(xgr.TokenizerInfo, "_detect_vocab_type_from_vocab", None)
    if backend is None or detect is None or from_vocab is None:
        return xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids)
    meta = detect(_parts(backend))
    vocab = tokenizer.get_vocab()
    found = from_vocab(vocab)
    if found is not None and found != meta["vocab_type"]:
        del vocab
        return xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids)
    encoded = [""] * vocab_size
    for token, i in vocab.items():
        if i < vocab_size:
            encoded[i] = token
    del vocab
    return xgr.TokenizerInfo(
        encoded,
        vocab_type=meta["vocab_type"],
        vocab_size=vocab_size,
        stop_token_ids=list(stop_token_ids),
        add_prefix_space=meta["add_prefix_space"],
    )
