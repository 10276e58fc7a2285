"""Both fine-tunes on the same data, start and vocabulary, and what each learned, in one call.

What it does
- ``experiment()`` makes the data set, fine-tunes twice (with / without the mask), measures both; seeded end to end.
  ``Experiment.table()`` puts both runs side by side (``python -m toolkit train`` prints it).

What it leaves out
- Anything but the random-weight stand-in: it learns the format, never meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.sft.finetune import Run, data_vocab, fine_tune
from toolkit.sft.labels import Labelled, label
from toolkit.sft.probes import Measurement, Probe, measure, nll_by_part, probes
from toolkit.trajectories import dataset


# ====================================================================== the whole comparison, one call
@dataclass
class Experiment:
    """Both runs on the same data, start and vocabulary, and what each learned."""

    settings: dict
    train: list[Labelled]
    held_out: list[Labelled]
    probes: list[Probe]
    vocab: list[int]
    runs: dict[str, Run]  # "masked", "unmasked"
    measurements: dict[str, Measurement]
    nll: dict[str, dict[str, float]]

    def __getitem__(self, name: str) -> dict:
        return dict(run=self.runs[name], measurement=self.measurements[name], nll=self.nll[name])

    def table(self) -> list[dict]:
        """One row per number, one column per run: the side-by-side comparison."""
        rows = []

        def add(what, f):
            rows.append({"": what, **{k: f(k) for k in self.runs}})

        add("training steps", lambda k: self.runs[k].steps)
        add("loss positions per step (mean)", lambda k: round(self.runs[k].target_tokens / self.runs[k].steps))
        add("final training loss (last 10 steps)", lambda k: round(sum(self.runs[k].losses[-10:]) / 10, 3))
        add("training seconds (wall)", lambda k: round(self.runs[k].seconds, 1))
        add("training seconds (CPU)", lambda k: round(self.runs[k].cpu_seconds, 1))
        for part in ("model_output", "tool_results", "prompt"):
            add(f"held-out NLL, {part.replace('_', ' ')} (nats/token)", lambda k, p=part: round(self.nll[k][p], 2))
        for mode in ("greedy", "sampled"):
            for key, what in (
                ("tool_response", "writes <tool_response> itself"),
                ("user_turn", "opens a user turn itself"),
                ("matches_real", "its made-up result equals the real one"),
            ):
                add(f"{mode}: {what}", lambda k, m=mode, kk=key: "{}/{}".format(*self.measurements[k].count(m, kk)))
        return rows


def experiment(
    template: str = "qwen3",
    n_train: int = 200,
    n_held_out: int = 40,
    steps: int = 220,
    batch_size: int = 8,
    lr: float = 8e-3,
    seed: int = 0,
    data_seed: int = 1,
    held_out_seed: int = 2,
    max_new_tokens: int = 40,
    samples: int = 1,
    n_probes: int = 30,
    model_kw: dict | None = None,
    progress=None,
) -> Experiment:
    """Make the data set, fine-tune twice (with / without the mask) and measure both. Seeded end to end.

    ``progress(run_name, step, loss)`` is called during training if given.
    """
    tr, ho = dataset(n_train, seed=data_seed), dataset(n_held_out, seed=held_out_seed)
    train_ex = [label(t.messages, t.tools, template) for t in tr]
    held = [label(t.messages, t.tools, template) for t in ho]
    vocab = data_vocab(train_ex + held)
    probe_list = probes(held, [t.kind for t in ho])[:n_probes]
    runs, meas, nll = {}, {}, {}
    for name, masked in (("masked", True), ("unmasked", False)):
        cb = (lambda s, loss, n=name: progress(n, s, loss)) if progress else None
        runs[name] = fine_tune(train_ex, masked, steps, batch_size, lr, seed, vocab, model_kw, progress=cb)
        meas[name] = measure(runs[name], probe_list, max_new_tokens, samples, seed)
        nll[name] = nll_by_part(runs[name], held)
    settings = dict(
        template=template,
        n_train=n_train,
        n_held_out=n_held_out,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        data_seed=data_seed,
        held_out_seed=held_out_seed,
        vocab=len(vocab),
        max_new_tokens=max_new_tokens,
        samples=samples,
        probes=len(probe_list),
        model=runs["masked"].settings["model_kw"],
        params=runs["masked"].settings["params"],
    )
    return Experiment(settings, train_ex, held, probe_list, vocab, runs, meas, nll)
