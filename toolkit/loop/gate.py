"""The one first-token gate: does the model open this turn with a call? Read off its first token, before any mask.

What it does
- :class:`FirstTokenGate` (``tokenizer``, ``starts``, ``threshold``) reads a turn's first step in one of two ways,
  chosen by how it is called:
  * by the model's own token: ``opens(token_id)`` is true for ``<tool_call>`` or a token whose text (leading space
    stripped) starts with one of ``starts`` — a call in another spelling. The host loop peeks the next token
    (greedy or the seeded draw, no mask) and, under ``tool_choice="auto"``, decodes a turn that opens a call under
    the tools' grammar (``toolkit.loop.loop``, ``starts`` = :data:`CALL_OPENERS`).
  * by the probability mass on those tokens: as a logits processor (``gate(ids, scores)``, first step only) it
    computes each row's mass on ``<tool_call>`` and every token starting with one of ``starts``; at or above
    ``threshold`` the first token is forced to ``<tool_call>``, below it ``<tool_call>`` is forbidden; with
    ``threshold=None`` the mass is pooled onto ``<tool_call>`` and the argmax decides; ``threshold="token"`` applies
    the own-token rule to each row's greedy token instead. BFCL's constrained mode uses
    it (``toolkit.eval.bfcl.IntentGate``: ``starts`` = its structured starts, threshold 0.85). ``masses`` keeps
    the first step's masses for reports.
- ``starting_ids(tokenizer, starts)``: every ordinary token id whose text starts with one of ``starts`` (one pass
  over the vocabulary, cached). Added tokens (``<|im_end|>``, ``<|endoftext|>``, ``</tool_call>``, ``<|fim_…|>`` …)
  never count, though their text starts with ``<``: a turn that ends at once is not a call in another spelling;
  ``<tool_call>`` itself is counted by the gate explicitly.

What it leaves out
- Anything after the first token: a fence later in a text answer stays text. Choosing the threshold: each caller
  says where its number comes from.
"""

from __future__ import annotations

from functools import lru_cache

from toolkit.qwen import TOOL_CALL_ID

# First tokens (stripped) with which the model opens a call in some spelling: the template's single <tool_call>
# token, the same tag spelled from pieces ("<"), bare JSON ("{"), a fenced block ("```").
CALL_OPENERS = ("<", "{", "```")


@lru_cache(maxsize=4)
def starting_ids(tokenizer, starts: tuple[str, ...]) -> tuple[int, ...]:
    """Ordinary token ids whose decoded text, leading white space stripped, starts with one of ``starts`` (added
    tokens excluded: see the module docstring)."""
    added = set(tokenizer.get_added_vocab().values())
    return tuple(
        tid for tid in range(len(tokenizer)) if tid not in added and tokenizer.decode([tid]).lstrip().startswith(starts)
    )


class FirstTokenGate:
    """Call or text, decided on the first token (see the module docstring)."""

    def __init__(
        self,
        tokenizer,
        starts: tuple[str, ...] = CALL_OPENERS,
        threshold: float | None = None,
        tool_call_id=TOOL_CALL_ID,
    ):
        self.tokenizer, self.starts = tokenizer, tuple(starts)
        self.threshold, self.tool_call_id = threshold, tool_call_id
        self.masses: list[float] = []  # per row, the opening mass at the first step (for reports)
        self.done = False
        self._ids = None
        self._added_ids = None

    # ------------------------------------------------------------ by the model's own token
    def text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id], skip_special_tokens=False).lstrip()

    def opens(self, token_id: int) -> bool:
        if token_id == self.tool_call_id:
            return True
        return token_id not in self._added() and self.text(token_id).startswith(self.starts)

    def _added(self) -> set:
        if self._added_ids is None:
            self._added_ids = set(self.tokenizer.get_added_vocab().values())
        return self._added_ids

    # ------------------------------------------------------------ by the mass on opening tokens
    @property
    def ids(self):
        """The opening token ids as a tensor (``<tool_call>`` included)."""
        if self._ids is None:
            import torch  # lazy: the loop's own-token rule needs no torch

            self._ids = torch.tensor(sorted(set(starting_ids(self.tokenizer, self.starts)) | {self.tool_call_id}))
        return self._ids

    def mass(self, scores):
        """Per row of ``scores`` ([rows, V] logits), the probability on opening tokens."""
        import torch  # lazy: the loop's own-token rule needs no torch

        logp = torch.log_softmax(scores.float(), dim=-1)
        return torch.logsumexp(logp[:, self.ids.to(scores.device)], dim=-1).exp()

    def __call__(self, input_ids, scores):
        """A logits processor for a batch's first step (later calls return ``scores`` untouched)."""
        import torch  # lazy: the loop's own-token rule needs no torch

        if self.done:
            return scores
        self.done = True
        scores = scores.clone()
        ids = self.ids.to(scores.device)
        self.masses = [float(m) for m in self.mass(scores)]
        for row, m in enumerate(self.masses):
            if self.threshold == "token":  # the loop's rule as a processor: the row's own greedy token decides
                opens = self.opens(int(scores[row].argmax()))
                keep = scores[row, self.tool_call_id].clone()
                if opens:
                    scores[row] = float("-inf")
                    scores[row, self.tool_call_id] = keep if torch.isfinite(keep) else 0.0
                else:
                    scores[row, self.tool_call_id] = float("-inf")
            elif self.threshold is None:
                scores[row, self.tool_call_id] = torch.logsumexp(scores[row, ids].float(), dim=-1).to(scores.dtype)
            elif m >= self.threshold:
                keep = scores[row, self.tool_call_id].clone()
                scores[row] = float("-inf")
                scores[row, self.tool_call_id] = keep if torch.isfinite(keep) else 0.0
            else:
                scores[row, self.tool_call_id] = float("-inf")
        return scores
