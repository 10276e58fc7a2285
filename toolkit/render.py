"""Render messages + tools through a chat template into text and tokens, and label every token.

What it does
- ``render(messages, tools, template=...)`` applies a chat template (the kit's own Jinja for ``"qwen3"`` or
  ``"qwen2.5"``, or the tokenizer's own with ``template="native"``) and returns a :class:`Rendering`: the text,
  the ids, and per token its string, the ``special`` and ``added`` flags and a **segment** (control, system,
  tools, user, assistant, think, tool_call, tool_response, generation_prompt), plus per-segment counts.
- ``shared_prefix(a, b)`` — how many leading ids two renderings share (what a prefix cache could reuse).
- ``tool_definition_cost(tools)`` — tokens the tool block adds to every request, per tool and in total.

What it leaves out
- Templates other than Qwen's ``<|im_start|>`` family; segmenting is done by reading that structure back
  from the rendered text, so a template with another layout needs its own segmenter.
- Images/audio parts in message content.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from toolkit.schema import function_of
from toolkit.tokenizer import TEMPLATES, template_text, tokenizer_for

SEGMENTS = (
    "control",
    "system",
    "tools",
    "user",
    "assistant",
    "think",
    "tool_call",
    "tool_response",
    "generation_prompt",
)


@dataclass
class Token:
    index: int
    id: int
    text: str  # decoded piece (may be a partial UTF-8 character shown as �)
    special: bool
    added: bool
    segment: str
    start: int  # character offsets into Rendering.text
    end: int


@dataclass
class Rendering:
    text: str
    ids: list[int]
    tokens: list[Token]
    template: str
    spans: list[tuple[int, int, str]] = field(repr=False, default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(t.segment for t in self.tokens)
        return {s: c.get(s, 0) for s in SEGMENTS}

    def __len__(self) -> int:
        return len(self.ids)

    def table(self, limit: int | None = None) -> list[dict]:
        rows = [
            dict(i=t.index, id=t.id, token=t.text, special=t.special, added=t.added, segment=t.segment)
            for t in self.tokens
        ]
        return rows[:limit] if limit else rows

    def segment_text(self, segment: str) -> list[str]:
        """The text of each span of one segment, in order."""
        return [self.text[a:b] for a, b, s in self.spans if s == segment]


# ------------------------------------------------------------------ segmenter
_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)(<\|im_end\|>\n?|$)", re.S)


_INNER = {
    "system": re.compile(r"# Tools\n.*?</tool_call>(?=$)", re.S),
    "assistant": re.compile(r"<tool_call>.*?</tool_call>|<think>.*?</think>\n*", re.S),
    "user": re.compile(r"<tool_response>.*?</tool_response>\n?", re.S),
}


_INNER_NAME = {"# Tools": "tools", "<tool_call>": "tool_call", "<think>": "think", "<tool_response>": "tool_response"}


def segment_spans(text: str) -> list[tuple[int, int, str]]:
    """Character spans ``(start, end, segment)`` covering ``text``, read from Qwen's turn structure."""
    spans: list[tuple[int, int, str]] = []

    def add(a, b, s):
        if b > a:
            spans.append((a, b, s))

    pos = 0
    for m in _TURN.finditer(text):
        add(pos, m.start(), "control")
        role, body_a, body_b = m.group(1), m.start(2), m.end(2)
        is_prompt = (
            m.group(3) == "" and role == "assistant" and text[body_a:body_b].strip() in ("", "<think>\n\n</think>")
        )
        if is_prompt:  # the trailing '<|im_start|>assistant\n' the model continues from
            add(m.start(), m.end(), "generation_prompt")
            pos = m.end()
            continue
        add(m.start(), body_a, "control")  # <|im_start|>role\n
        base = role if role in ("system", "user", "assistant") else "user"
        inner = _INNER.get(role)
        cur = body_a
        if inner:
            for im in inner.finditer(text, body_a, body_b):
                add(cur, im.start(), base)
                kind = next(v for k, v in _INNER_NAME.items() if im.group(0).startswith(k))
                add(im.start(), im.end(), kind)
                cur = im.end()
        add(cur, body_b, base)
        add(body_b, m.end(), "control")
        pos = m.end()
    add(pos, len(text), "control")
    return spans


def _segment_of(spans, start: int) -> str:
    lo, hi = 0, len(spans) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        a, b, s = spans[mid]
        if start < a:
            hi = mid - 1
        elif start >= b:
            lo = mid + 1
        else:
            return s
    return "control"


# ------------------------------------------------------------------ rendering
def render_text(
    messages, tools=None, template: str = "qwen3", add_generation_prompt: bool = True, tokenizer=None, **kwargs
) -> str:
    tok = tokenizer if tokenizer is not None else tokenizer_for(template if template in TEMPLATES else "qwen3")
    chat_template = None if template == "native" else template_text(template)
    return tok.apply_chat_template(
        messages,
        tools=tools or None,
        chat_template=chat_template,
        tokenize=False,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )


def tokenize(text: str, template: str = "qwen3", tokenizer=None) -> Rendering:
    """Tokenize already-rendered text and label each token."""
    tok = tokenizer if tokenizer is not None else tokenizer_for(template if template in TEMPLATES else "qwen3")
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    added = tok.added_tokens_decoder
    spans = segment_spans(text)
    tokens = []
    for i, (tid, (a, b)) in enumerate(zip(ids, offsets)):
        at = added.get(tid)
        tokens.append(
            Token(i, tid, tok.decode([tid]), bool(at and at.special), at is not None, _segment_of(spans, a), a, b)
        )
    return Rendering(text, list(ids), tokens, template, spans)


def render(
    messages, tools=None, template: str = "qwen3", add_generation_prompt: bool = True, tokenizer=None, **kwargs
) -> Rendering:
    """Render a conversation (and tools) to text and labelled tokens. See the module docstring."""
    text = render_text(messages, tools, template, add_generation_prompt, tokenizer, **kwargs)
    return tokenize(text, template, tokenizer)


def count_tokens(
    messages, tools=None, template: str = "qwen3", add_generation_prompt: bool = True, tokenizer=None
) -> int:
    """Token count of a rendering, without labelling each token (fast path for sliders and sweeps)."""
    tok = tokenizer if tokenizer is not None else tokenizer_for(template)
    text = render_text(messages, tools, template, add_generation_prompt, tok)
    return len(tok(text, add_special_tokens=False)["input_ids"])


def tool_definition_cost(tools, template: str = "qwen3", tokenizer=None, per_tool: bool = True) -> dict:
    """Tokens the tool block adds to a request: the total, the fixed preamble, and each tool's own line."""
    probe = [{"role": "user", "content": "hi"}]
    tok = tokenizer if tokenizer is not None else tokenizer_for(template)
    base = count_tokens(probe, None, template, tokenizer=tok)
    full = count_tokens(probe, tools, template, tokenizer=tok) if tools else base
    out = {"total": full - base, "n_tools": len(tools)}
    if per_tool:
        # each tool's JSON line on its own; the preamble is what is left (BPE may merge a token across a line
        # boundary, so per-tool numbers are approximate to a token; the total is exact)
        out["per_tool"] = {
            function_of(t).get("name", f"tool{i}"): len(
                tok.encode("\n" + json.dumps(t, ensure_ascii=False), add_special_tokens=False)
            )
            for i, t in enumerate(tools)
        }
        out["preamble"] = out["total"] - sum(out["per_tool"].values()) if tools else 0
    return out
