"""The SFT loss mask over a tool-calling trajectory (book §14.5.7).

What it does
- ``label(messages, tools, template)`` renders a trajectory and labels every token: its own id where the model must
  learn to write it, ``IGNORE_INDEX`` (-100) elsewhere (``CONVENTION`` says exactly which). Trained spans come from
  the message structure, mapped to tokens through the rendering's character offsets.

What it leaves out
- Templates that rewrite earlier turns: :class:`MaskError` (``reason="prefix-unstable"``) says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.render import Rendering, render, render_text

IGNORE_INDEX = -100


EOT = "<|im_end|>"


CONVENTION = (
    "Masked (-100): the system prompt and tool definitions, every user turn, every tool result, every role "
    "header '<|im_start|>role\\n' -- the assistant header too, because at inference the host writes it as the "
    "generation prompt -- and the '\\n' after each '<|im_end|>' (template glue written after the model has "
    "stopped). Trained: everything the model writes after the generation prompt: a <think> block if the "
    "template puts one there, its text, its <tool_call> blocks, up to and including its own '<|im_end|>' -- "
    "except an assistant message marked train=False (a mistake the conversation shows and then corrects: the "
    "model reads it as context, and learns the correction, not the mistake)."
)


class MaskError(ValueError):
    """A trajectory whose trained spans cannot be found exactly (structured: ``reason`` and ``message``)."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass
class Labelled:
    """One rendered trajectory with its labels (same length as its ids)."""

    messages: list[dict]
    tools: list[dict] | None
    template: str
    rendering: Rendering
    labels: list[int]
    trained_spans: list[tuple[int, int]]  # character spans of the model's own output

    @property
    def ids(self) -> list[int]:
        return self.rendering.ids

    @property
    def trained(self) -> list[bool]:
        return [lab != IGNORE_INDEX for lab in self.labels]

    def runs(self) -> list[dict]:
        """Maximal runs of consecutive tokens that share a fate: ``trained``, token range, and their text."""
        out: list[dict] = []
        for t, keep in zip(self.rendering.tokens, self.trained):
            if out and out[-1]["trained"] == keep:
                out[-1]["end"] = t.index + 1
                out[-1]["char_end"] = t.end
            else:
                out.append(dict(trained=keep, start=t.index, end=t.index + 1, char_start=t.start, char_end=t.end))
        for r in out:
            r["text"] = self.rendering.text[r.pop("char_start") : r.pop("char_end")]
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """Per render segment: how many tokens are trained and how many masked."""
        c: dict[str, dict[str, int]] = {}
        for t, keep in zip(self.rendering.tokens, self.trained):
            row = c.setdefault(t.segment, {"trained": 0, "masked": 0})
            row["trained" if keep else "masked"] += 1
        return c

    def unmasked_labels(self) -> list[int]:
        """Labels of the no-mask baseline: every token is a target."""
        return list(self.ids)


def trained_char_spans(
    messages, tools=None, template: str = "qwen3", text: str | None = None, tokenizer=None, **kw
) -> list[tuple[int, int]]:
    """Character spans of each assistant message's own output in the rendered trajectory ``text``."""
    if text is None:
        text = render_text(messages, tools, template, False, tokenizer, **kw)
    spans = []
    for k, m in enumerate(messages):
        if m.get("role") != "assistant" or m.get("train") is False:
            continue
        prompt = render_text(messages[:k], tools, template, True, tokenizer, **kw)
        if not text.startswith(prompt):
            at = next((i for i, (a, b) in enumerate(zip(text, prompt)) if a != b), min(len(text), len(prompt)))
            raise MaskError(
                "prefix-unstable",
                f"the prompt before assistant message {k} is not a prefix of the "
                f"rendered trajectory (they differ at character {at}: {text[at : at + 30]!r} vs "
                f"{prompt[at : at + 30]!r}); this template rewrites earlier turns",
            )
        end = text.find(EOT, len(prompt))
        if end < 0:
            raise MaskError("no-stop-token", f"assistant message {k} has no closing {EOT}")
        spans.append((len(prompt), end + len(EOT)))
    return spans


def label(messages, tools=None, template: str = "qwen3", tokenizer=None, **kw) -> Labelled:
    """Render a trajectory (no generation prompt) and label it per :data:`CONVENTION`."""
    if not any(m.get("role") == "assistant" and m.get("train") is not False for m in messages):
        raise MaskError("nothing-to-train", "the trajectory has no assistant message")
    r = render(messages, tools, template, add_generation_prompt=False, tokenizer=tokenizer, **kw)
    spans = trained_char_spans(messages, tools, template, r.text, tokenizer, **kw)
    labels = []
    for t in r.tokens:
        inside = any(a <= t.start and t.end <= b for a, b in spans)
        if not inside and any(t.start < b and a < t.end for a, b in spans):
            raise MaskError("straddling-token", f"token #{t.index} {t.text!r} crosses a trained span boundary")
        labels.append(t.id if inside else IGNORE_INDEX)
    return Labelled(messages, tools, template, r, labels, spans)
