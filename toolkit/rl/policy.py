"""The policy a rollout samples from: the loaded model (adapters included) writing several turns at once.

What it does
- :class:`Sampler` ``(loaded, max_new, temperature, template)``: called with a batch of ``(messages, tools)`` it
  renders each with the chat template (generation prompt on), samples each continuation with the kit's one
  decode loop (:meth:`toolkit.backends.hf.HFBackend.generate_batch`: the rows' shared prefix — system prompt and
  tool list — prefilled once, then one forward per step for all rows) and returns the texts up to the stop token.
  ``temperature=0`` decodes greedily (an evaluation). Every call draws from a fresh seed (``seed``, ``seed + 1``,
  ...), so a group's rows differ and a run repeats. ``tokens`` counts the new tokens sampled so far (the trainer's
  tokens/s); ``sample(prompts)`` is the same on token ids, returning the generations.
- ``keep_prefix`` (on by default): the prompt a group shares is prefilled once per step, not once per round (the
  next round's batch extends it), and dropped as soon as any weight changes; ``prefix_reused`` counts the prompt
  tokens it saved.

What it leaves out
- A serving engine: ``toolkit.rl.served`` samples the same rollouts on the kit's vLLM server, the trainer's adapter
  handed over whenever it changed (``benchmarks/rl_engines.py`` measures both side by side).
- Grammar masks: the policy is judged on what it writes by itself.
"""

from __future__ import annotations

from toolkit.backends.hf import HFBackend
from toolkit.models import template_for
from toolkit.qwen import STOP_IDS
from toolkit.render import render


class Sampler:
    def __init__(
        self,
        loaded,
        max_new: int = 96,
        temperature: float = 1.0,
        template: str | None = None,
        seed: int = 0,
        keep_prefix: bool = True,
    ):
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (0: greedy), not {temperature}")
        self.loaded, self.max_new, self.temperature = loaded, max_new, temperature
        self.template = template or template_for(loaded)
        self.seed, self.tokens, self.calls, self.keep_prefix = seed, 0, 0, keep_prefix

    def _backend(self, model) -> HFBackend:
        """One backend for the run, keeping the last batch's shared prefix (the next round of the same episodes
        extends it) until any weight is replaced or changed in place (an optimizer step, a merge: each bumps the
        tensor's version counter)."""
        stamp = tuple((id(p), p._version) for p in model.parameters())
        if getattr(self, "_hf", None) is None or self._hf.model is not model:
            self._hf = HFBackend(model, reuse=False, keep_prefix=self.keep_prefix)
        elif stamp != self._stamp:
            self._hf.forget_batch_prefix()
        self._stamp = stamp
        return self._hf

    def _model(self):
        m = self.loaded.model  # a peft model decodes through its base with the adapters in place
        return m.get_base_model() if hasattr(m, "get_base_model") else m

    def sample(self, prompts: list[list[int]]):
        """One :class:`toolkit.backends.base.Generation` per prompt (token ids), sampled together."""
        model = self._model()
        was_training = model.training
        model.eval()
        try:
            gens = self._backend(model).generate_batch(
                prompts,
                max_new_tokens=self.max_new,
                stop_ids=STOP_IDS,
                temperature=self.temperature,
                seed=self.seed + self.calls,
            )
        finally:
            model.train(was_training)
        self.calls += 1
        self.prefix_reused = self._hf.prefix_reused
        self.tokens += sum(len(g.new_ids) for g in gens)
        return gens

    def __call__(self, batch: list[tuple[list[dict], list[dict]]]) -> list[str]:
        tok = self.loaded.tokenizer
        gens = self.sample([render(m, t, self.template, tokenizer=tok).ids for m, t in batch])
        return [tok.decode([i for i in g.new_ids if i not in STOP_IDS], skip_special_tokens=False) for g in gens]
