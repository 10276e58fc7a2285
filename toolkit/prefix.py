"""What a prefix cache can reuse: shared leading tokens, and whether a template keeps the prefix.

What it does (book §14.5.3, §14.5.8)
- ``shared_prefix(a, b)``: how many leading ids two renderings (or id lists) share.
- ``prefix_stability(template)``: per request of a multi-turn conversation, how much of what the previous request
  left in the cache (its prompt + the assistant's output) is still a prefix of the next prompt. Qwen3's template
  drops ``<think>`` blocks of assistant turns before the latest user query, so a new query rewrites the history;
  Qwen2.5 never rewrites.

What it leaves out
- Caching itself (the backends keep their caches); partial block reuse as paged caches do.
"""

from __future__ import annotations

from toolkit.conversations import stability_conversation
from toolkit.render import Rendering, render
from toolkit.tools import schemas


def shared_prefix(a, b) -> int:
    """Number of leading token ids shared by two renderings (or id lists)."""
    a = a.ids if isinstance(a, Rendering) else a
    b = b.ids if isinstance(b, Rendering) else b
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def prefix_stability(template: str, conversation: list[dict] | None = None, tools=None, tokenizer=None) -> list[dict]:
    """Per request of a multi-turn conversation: how much of what the previous request left in the cache (its
    prompt + the assistant's output) is still a prefix of the next prompt.

    Qwen3's template drops ``<think>`` blocks of assistant turns before the latest user query, so at a new query
    the history is rewritten and the cache is only good up to the first rewritten turn; Qwen2.5 never rewrites.
    """
    conv = conversation or stability_conversation()
    tools = schemas(["calculator", "get_weather"]) if tools is None else tools
    asks = [i for i, m in enumerate(conv) if m["role"] == "assistant"]
    rows = []
    for n, (i, j) in enumerate(zip(asks, asks[1:]), 1):
        prompt = render(conv[:i], tools, template, tokenizer=tokenizer).ids
        done = render(conv[: i + 1], tools, template, add_generation_prompt=False, tokenizer=tokenizer).ids
        cached = done[:-1]  # generation stopped at <|im_end|>; the template's trailing newline was never computed
        nxt = render(conv[:j], tools, template, tokenizer=tokenizer).ids
        shared = shared_prefix(cached, nxt)
        rows.append(
            dict(
                template=template,
                request=n + 1,
                after=conv[j - 1]["role"],
                cached=len(cached),
                next_prompt=len(nxt),
                shared=shared,
                recompute=len(nxt) - shared,
                kept=round(shared / len(cached), 3),
                prompt_was_prefix=shared_prefix(prompt, done) == len(prompt),
            )
        )
    return rows
