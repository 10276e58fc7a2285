"""Levers for parallel calls in BFCL's constrained mode (issue #15, item 6): general settings that know nothing
of a case's category or expected answer, each measured by ``python benchmarks/bfcl.py levers``.

What it does
- :class:`Levers`: everything that decides what a BFCL run generates, named once — the mode, the decoding
  (``max_new_tokens``, ``temperature``, ``seed``, ``template``) and the levers (``gate``, ``gate_threshold``,
  ``system_hint``, ``more_calls``, ``list_calls``, ``python_calls``). Frozen; ``levers.key()`` is what keys the
  results cache (``toolkit.eval.run.Cache``): the decoding and every lever set away from its default (the mode is
  the cache's subfolder), so a default lever leaves the key, and the cached outputs, as they were.
- The system-prompt lines a lever adds live in :data:`toolkit.eval.choices.HINTS` (light: the benchmark's command
  line offers them); ``toolkit.eval.bfcl.messages_for(..., system_hint=...)`` adds one.
- :class:`MoreCallsGate`: at each end decision of the ``more_calls`` grammar
  (``toolkit.eval.bfcl.constrained_grammar``) the model's mass on opening another call, in any spelling, is
  pooled onto ``<tool_call>`` against the stop tokens; ``decisions`` keeps ``(p_more, p_stop)`` per decision.
- The list lever lives with the grammar and the reader it changes: ``Levers(list_calls=True)`` decodes under
  ``constrained_grammar(..., list_calls=True)`` (one block holding a JSON list of calls — not Qwen's format) and
  reads the output with ``decode(..., list_calls=True)``, which splits the list into calls.
- So does the prompt-style lever: ``Levers(mode="prompt", python_calls=True)`` decodes BFCL's own prompt style
  under ``toolkit.eval.prompt_grammar.python_calls_grammar`` (the call list ``[f(a=1), g(b=2)]`` or a short
  text), the first token gated onto ``[``; ``gate_threshold`` sets that gate as it does the constrained mode's.

What it leaves out
- Forcing a number of calls (that needs to know how many the request asks for) and tuned thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from toolkit.eval.bfcl import GATE_THRESHOLD, MODES, STRUCTURED_STARTS
from toolkit.loop.gate import FirstTokenGate
from toolkit.qwen import STOP_IDS, TOOL_CALL_END_ID, TOOL_CALL_ID


@dataclass(frozen=True)
class Levers:
    """What decides a BFCL run's outputs (see the module docstring). ``gate``: the first-token gate in constrained
    mode (``toolkit.eval.bfcl.IntentGate``) and with ``python_calls``; ``gate_threshold`` its threshold (None: the
    pooled call mass against the rest, by argmax); ``system_hint`` a line added to the system message
    (:data:`toolkit.eval.choices.HINTS`); ``more_calls`` (constrained) the newline-after-each-call grammar with
    :class:`MoreCallsGate` at each end decision; ``list_calls`` (constrained) all calls as one JSON list in one
    block, split by the host; ``python_calls`` (prompt) BFCL's prompt style under a grammar of its call list."""

    mode: str = "native"
    max_new_tokens: int = 96
    temperature: float = 0.0
    seed: int = 0
    template: str = "qwen2.5"
    gate: bool = True
    gate_threshold: float | None = GATE_THRESHOLD
    system_hint: str | None = None
    more_calls: bool = False
    list_calls: bool = False
    python_calls: bool = False

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {list(MODES)}, got {self.mode!r}")
        if self.python_calls and self.mode != "prompt":
            raise ValueError("python_calls constrains BFCL's prompt style: mode must be 'prompt'")
        if (self.more_calls or self.list_calls) and self.mode != "constrained":
            raise ValueError(
                "more_calls and list_calls change the constrained mode's grammar: mode must be 'constrained'"
            )

    @property
    def grammared(self) -> bool:
        return self.mode == "constrained" or self.python_calls

    def key(self) -> dict:
        """What keys the cache: the decoding, and each lever set away from its default (not the mode: the cache
        keeps each mode in its own folder)."""
        out = {"template": self.template, "max_new_tokens": self.max_new_tokens}
        out.update(temperature=self.temperature, seed=self.seed)
        out.update({k: getattr(self, k) for k in LEVER_NAMES if getattr(self, k) != _DEFAULTS[k]})
        return out


LEVER_NAMES = ("gate", "gate_threshold", "system_hint", "more_calls", "list_calls", "python_calls")
_DEFAULTS = {f.name: f.default for f in fields(Levers)}


class MoreCallsGate:
    """A logits processor for the end decision after each call (grammar built with ``more_calls=True``):
    where a row's last tokens are ``</tool_call>`` ``\n``, the model's probability of opening another call *in
    any spelling* (``<tool_call>`` plus every token starting with :data:`STRUCTURED_STARTS`, as
    :class:`IntentGate` reads the first token) is pooled onto ``<tool_call>``, so it competes with the stop
    tokens as one option; the grammar then allows only those two and the argmax decides. No threshold: the
    model's own mass decides. ``decisions`` records ``(p_more, p_stop)`` per decision, for reports."""

    def __init__(self, tokenizer):
        self.gate = FirstTokenGate(tokenizer, STRUCTURED_STARTS, None, TOOL_CALL_ID)
        (self.newline_id,) = tokenizer.encode("\n", add_special_tokens=False)
        self.decisions: list[tuple[float, float]] = []

    def __call__(self, input_ids, scores):
        import torch  # lazy: only when a model runs

        if input_ids.shape[1] < 2:
            return scores
        at = (input_ids[:, -2] == TOOL_CALL_END_ID) & (input_ids[:, -1] == self.newline_id)
        if not bool(at.any()):
            return scores
        scores = scores.clone()
        stops = torch.tensor(sorted(STOP_IDS), device=scores.device)
        ids = self.gate.ids.to(scores.device)
        ids = ids[~torch.isin(ids, stops)]  # an end is not a call (the gate's ids already leave added tokens out)
        for row in at.nonzero().flatten().tolist():
            logp = torch.log_softmax(scores[row].float(), -1)
            self.decisions.append((float(logp[ids].logsumexp(-1).exp()), float(logp[stops].logsumexp(-1).exp())))
            scores[row, TOOL_CALL_ID] = scores[row, ids].float().logsumexp(-1).to(scores.dtype)  # logits, as given
        return scores
