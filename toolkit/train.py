"""The SFT loss mask over a tool-calling trajectory, and a short CPU fine-tune with and without it.

Book §14.5.7: tool calling is trained on whole trajectories rendered with the same chat template, and the loss
skips the positions the *environment* wrote (tool results), as prompts are skipped in ordinary SFT (§8.1.2).

What it does
- ``label(messages, tools, template)`` renders a trajectory with :func:`toolkit.render.render` and gives every
  token a label: its own id where the model must learn to write it, ``IGNORE_INDEX`` (-100) elsewhere. The
  trained character spans come from the *message structure*: for each assistant message k, the model's output
  starts where ``render(messages[:k], add_generation_prompt=True)`` ends (what the host feeds it) and ends with
  the model's stop token ``<|im_end|>``. Tokens are then labelled through the rendering's character offsets.
  The convention is :data:`CONVENTION`.
- ``fine_tune(examples, masked=...)`` trains a fresh random-weight Qwen-shaped stand-in for a fixed number of
  steps, with the mask or with every token as a target; ``measure`` lets a trained model continue held-out
  trajectories cut after ``</tool_call><|im_end|>`` + newline, with no stop token, and counts how often it writes a
  ``<tool_response>`` itself (an invented tool result); ``nll_by_part`` scores held-out text by who wrote it.
- Two exact savings keep a run near 30 CPU-seconds: the system prompt and tool definitions every trajectory opens
  with are run once per batch (``loss_on(share_prefix=True)``), and only the embedding rows the data uses are
  trained (:class:`_Head`); tests check that the shared prefix gives the same loss and gradients and that rows
  outside the data stay untouched.
- ``experiment()`` does all of it, seeded, and ``Experiment.table()`` puts both runs side by side
  (``python -m toolkit train`` prints it).

What it leaves out
- A full-vocabulary softmax by default: 151,936 logits for each of a batch's ~4,000 positions is ~2.6 GB of
  float32 per step (more than the notebooks' 2 GB budget) and was ~30 s a step on 2 shared CPU cores, so the
  output layer is restricted to the ids that occur anywhere in the data set (``vocab="data"``; identical for
  both runs, tool results included, so the masked model *could* write ``<tool_response>``). ``vocab="full"``
  does the real thing where there is memory and time (e.g. a GPU).
- Packing, gradient accumulation, LoRA, RL (§14.6): a stand-in learns the *format*, never meaning.
- Templates that rewrite earlier turns as the conversation grows (say, one that stamps the turn count into the
  system prompt): the prompt before a turn is then not a prefix of the trajectory, and :class:`MaskError`
  (``reason="prefix-unstable"``) says so instead of guessing.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from .render import Rendering, render, render_text, tokenizer_for

IGNORE_INDEX = -100
EOT = "<|im_end|>"
CONVENTION = (
    "Masked (-100): the system prompt and tool definitions, every user turn, every tool result, every role "
    "header '<|im_start|>role\\n' -- the assistant header too, because at inference the host writes it as the "
    "generation prompt -- and the '\\n' after each '<|im_end|>' (template glue written after the model has "
    "stopped). Trained: everything the model writes after the generation prompt: a <think> block if the "
    "template puts one there, its text, its <tool_call> blocks, up to and including its own '<|im_end|>'.")


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
            r["text"] = self.rendering.text[r.pop("char_start"):r.pop("char_end")]
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


def trained_char_spans(messages, tools=None, template: str = "qwen3", text: str | None = None,
                       tokenizer=None, **kw) -> list[tuple[int, int]]:
    """Character spans of each assistant message's own output in the rendered trajectory ``text``."""
    if text is None:
        text = render_text(messages, tools, template, False, tokenizer, **kw)
    spans = []
    for k, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        prompt = render_text(messages[:k], tools, template, True, tokenizer, **kw)
        if not text.startswith(prompt):
            at = next((i for i, (a, b) in enumerate(zip(text, prompt)) if a != b), min(len(text), len(prompt)))
            raise MaskError("prefix-unstable", f"the prompt before assistant message {k} is not a prefix of the "
                            f"rendered trajectory (they differ at character {at}: {text[at:at + 30]!r} vs "
                            f"{prompt[at:at + 30]!r}); this template rewrites earlier turns")
        end = text.find(EOT, len(prompt))
        if end < 0:
            raise MaskError("no-stop-token", f"assistant message {k} has no closing {EOT}")
        spans.append((len(prompt), end + len(EOT)))
    return spans


def label(messages, tools=None, template: str = "qwen3", tokenizer=None, **kw) -> Labelled:
    """Render a trajectory (no generation prompt) and label it per :data:`CONVENTION`."""
    if not any(m.get("role") == "assistant" for m in messages):
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


# ====================================================================== fine-tune
@dataclass
class Run:
    """One fine-tune: the trained model, the output vocabulary it was trained over, and its loss curve."""

    masked: bool
    model: object
    vocab: list[int]  # output ids the softmax covers (all 151,936 when vocab="full")
    losses: list[float]
    seconds: float  # wall clock
    steps: int
    target_tokens: int  # loss positions seen over the whole run
    settings: dict = field(default_factory=dict)
    cpu_seconds: float = 0.0  # this process's CPU time: comparable across busy and idle machines

    @property
    def name(self) -> str:
        return "masked" if self.masked else "unmasked"


@contextmanager
def threads(n: int | None):
    """Run torch with ``n`` threads inside the block (``None``: leave as is), then restore.

    The kit's tensors here are tiny; on a shared machine a second thread made an elementwise multiply ~20x
    slower (threads spinning against other processes), so the functions below default to one."""
    import torch

    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def flavor_of(template: str) -> str:
    return "qwen2.5" if template == "qwen2.5" else "qwen3"


def data_vocab(examples: list[Labelled]) -> list[int]:
    """Every id that occurs anywhere in the rendered examples (prompt, tool results and outputs alike)."""
    return sorted({i for ex in examples for i in ex.ids})


def _model(flavor: str, seed: int, model_kw: dict | None):
    import torch
    from transformers import AutoModelForCausalLM

    from .models import stand_in, stand_in_config

    if not model_kw:
        return stand_in(flavor, seed=seed)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(stand_in_config(flavor, **model_kw), dtype=torch.float32)
    with torch.no_grad():  # same wide embedding init as the stand-in
        model.get_input_embeddings().weight.normal_(0.0, 1.0)
    return model.eval()


def _batch(examples: list[Labelled], idx, masked: bool, pad_id: int):
    import torch

    rows = [examples[i] for i in idx]
    width = max(len(r.ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for j, r in enumerate(rows):
        n = len(r.ids)
        ids[j, :n] = torch.tensor(r.ids)
        labels[j, :n] = torch.tensor(r.labels if masked else r.unmasked_labels())
        attn[j, :n] = 1
    return ids, labels, attn


class _Head:
    """The run's working copy of the tied embedding, holding only the rows of ``vocab``.

    Ids outside ``vocab`` never occur in the batches, so their rows would get zero gradient and (Adam, no weight
    decay) zero update: training the small copy and writing it back is exactly the same as training the full
    matrix, without touching 151,936 rows every step. Logits cover ``vocab`` only (module docstring).
    """

    def __init__(self, model, vocab: list[int]):
        import torch

        self.model, self.vocab = model, torch.tensor(vocab, dtype=torch.long)
        self.column = torch.full((model.config.vocab_size,), -1, dtype=torch.long)
        self.column[self.vocab] = torch.arange(len(vocab))
        full = model.get_input_embeddings().weight
        self.weight = torch.nn.Parameter(full.detach()[self.vocab].clone())

    def hidden(self, ids, attn=None, **kw):
        embeds = self.weight[self.column[ids].clamp(min=0)]  # padding may be outside vocab; attn hides it
        return self.model.model(inputs_embeds=embeds, attention_mask=attn, **kw)

    def logits(self, hidden):
        return hidden @ self.weight.T

    def body_parameters(self):
        skip = {id(self.model.get_input_embeddings().weight), id(self.model.get_output_embeddings().weight)}
        return [p for p in self.model.parameters() if id(p) not in skip]

    def write_back(self) -> None:
        import torch

        with torch.no_grad():
            self.model.get_input_embeddings().weight[self.vocab] = self.weight


def _shared_prefix_len(ids, attn) -> int:
    """Leading positions where every row of the batch holds the same (real) token."""
    same = ((ids == ids[:1]) & (attn == 1)).all(0)
    return int(same.long().cumprod(0).sum())


def loss_on(head: _Head, ids, labels, attn, share_prefix: bool = True):
    """Mean next-token cross-entropy over positions whose label is not ``IGNORE_INDEX``.

    Every trajectory opens with the same system prompt and tool definitions (~390 tokens). With ``share_prefix``
    that common prefix is run once and its keys/values repeated for the batch; the hidden states are the same
    numbers as running every row in full (a test checks loss and gradients), at about 40% of the cost.
    """
    import torch
    import torch.nn.functional as F

    n = _shared_prefix_len(ids, attn) if share_prefix and len(ids) > 1 else 0
    if n >= 2:
        pre = head.hidden(ids[:1, :n], attn[:1, :n], use_cache=True)
        pre.cache.batch_repeat_interleave(len(ids))
        rest = head.hidden(ids[:, n:], attn, cache=pre.cache, use_cache=True).last_hidden_state
        hidden = torch.cat([pre.last_hidden_state.expand(len(ids), -1, -1), rest], 1)
    else:
        hidden = head.hidden(ids, attn).last_hidden_state
    target = labels[:, 1:]
    keep = target != IGNORE_INDEX
    logits = head.logits(hidden[:, :-1][keep])
    return F.cross_entropy(logits, head.column[target[keep]]), int(keep.sum())


def fine_tune(examples: list[Labelled], masked: bool, steps: int = 120, batch_size: int = 8, lr: float = 3e-3,
              seed: int = 0, vocab: str | list[int] = "data", model_kw: dict | None = None,
              n_threads: int | None = 1, progress=None) -> Run:
    """Train a fresh stand-in (same seed -> same start for both runs) on ``examples`` with or without the mask.

    ``vocab="data"`` restricts the softmax to :func:`data_vocab` (see the module docstring); a list gives the
    ids explicitly; ``"full"`` uses all 151,936. ``progress(step, loss)`` is called every step if given.
    """
    import torch

    template = examples[0].template
    model = _model(flavor_of(template), seed, model_kw)
    ids_vocab = (list(range(model.config.vocab_size)) if vocab == "full"
                 else data_vocab(examples) if vocab == "data" else sorted(vocab))
    head = _Head(model, ids_vocab)
    params = head.body_parameters() + [head.weight]
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(params, lr=lr)
    # Short warm-up, then linear decay: the random start has very large logits (wide embedding init).
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10) * max(0.1, 1 - s / steps))
    pad = tokenizer_for(template).pad_token_id
    model.train()
    losses, seen, order, t0, c0 = [], 0, [], time.perf_counter(), time.process_time()
    with threads(n_threads):
        for step in range(steps):
            if len(order) < batch_size:
                order += torch.randperm(len(examples), generator=g).tolist()
            idx, order = order[:batch_size], order[batch_size:]
            loss, n = loss_on(head, *_batch(examples, idx, masked, pad))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            seen += n
            if progress:
                progress(step, losses[-1])
    head.write_back()
    model.eval()
    return Run(masked, model, ids_vocab, losses, time.perf_counter() - t0, steps, seen,
               dict(batch_size=batch_size, lr=lr, seed=seed, vocab=len(ids_vocab), template=template,
                    model_kw=model_kw or "stand-in default", threads=n_threads,
                    params=sum(p.numel() for p in model.parameters())),
               time.process_time() - c0)


# ====================================================================== what each run learned
AFTER_CALL = "</tool_call>" + EOT + "\n"


@dataclass
class Probe:
    """A held-out trajectory cut right after the first ``</tool_call><|im_end|>`` and its newline."""

    prompt_ids: list[int]
    prompt_text: str
    real_results: list[str]  # what the real tools returned for that call turn (the tool messages' content)
    kind: str = ""


def probes(examples: list[Labelled], kinds: list[str] | None = None) -> list[Probe]:
    """One probe per example that has a tool call (examples without one are skipped)."""
    out = []
    for j, ex in enumerate(examples):
        text = ex.rendering.text
        span = next(((a, b) for a, b in ex.trained_spans if "<tool_call>" in text[a:b]), None)
        if span is None:
            continue
        cut = span[1] + 1
        if text[span[1] - len(AFTER_CALL) + 1:cut] != AFTER_CALL:
            raise MaskError("no-call-boundary", f"example {j}: the call turn does not end with {AFTER_CALL!r}")
        n = next(t.index for t in ex.rendering.tokens if t.start >= cut)
        k = sum(1 for a, _ in ex.trained_spans if a < span[0])  # which assistant message this is
        msg_i = [i for i, m in enumerate(ex.messages) if m.get("role") == "assistant"][k]
        real = []
        for m in ex.messages[msg_i + 1:]:
            if m.get("role") != "tool":
                break
            real.append(m["content"])
        out.append(Probe(ex.ids[:n], text[:cut], real, kinds[j] if kinds else ""))
    return out


def continue_batch(run: Run, prompts: list[list[int]], max_new_tokens: int = 40, generator=None) -> list[list[int]]:
    """Let the trained model continue each prompt with no stop token: greedy, or sampled (temperature 1) with
    ``generator``. Prompts are left-padded into one batch. Decoding covers the run's output vocabulary."""
    import torch

    head = _Head(run.model, run.vocab)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), int(head.vocab[0]), dtype=torch.long)
    attn = torch.zeros((len(prompts), width), dtype=torch.long)
    for j, p in enumerate(prompts):
        ids[j, width - len(p):] = torch.tensor(p)
        attn[j, width - len(p):] = 1
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = []
    with torch.no_grad():
        res = head.hidden(ids, attn, position_ids=pos, use_cache=True)
        for _ in range(max_new_tokens):
            logits = head.logits(res.last_hidden_state[:, -1])
            if generator is None:
                cols = logits.argmax(-1)
            else:
                cols = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]
            nxt = head.vocab[cols]
            out.append(nxt)
            attn = torch.cat([attn, torch.ones((len(prompts), 1), dtype=torch.long)], 1)
            pos = pos[:, -1:] + 1
            res = head.hidden(nxt[:, None], attn, position_ids=pos, cache=res.cache, use_cache=True)
    return torch.stack(out, 1).tolist()


def continue_ids(run: Run, prompt_ids: list[int], max_new_tokens: int = 40, generator=None) -> list[int]:
    """One prompt's continuation (see :func:`continue_batch`)."""
    return continue_batch(run, [prompt_ids], max_new_tokens, generator)[0]


def classify(continuation: str, real_results: list[str]) -> dict:
    """Did the model write a tool result itself? What did it put in it, and is that what the tool returned?"""
    opened = "<tool_response>" in continuation
    invented = ""
    if opened:
        invented = continuation.split("<tool_response>", 1)[1].split("</tool_response>", 1)[0].strip("\n")
    return dict(tool_response=opened,
                user_turn=continuation.startswith("<|im_start|>user"),
                invented=invented,
                matches_real=opened and invented.strip() in [r.strip() for r in real_results])


@dataclass
class Measurement:
    run: str
    rows: list[dict]  # per probe and decode: prompt index, mode, continuation text, classify() fields

    def rate(self, mode: str = "greedy", key: str = "tool_response") -> float:
        sel = [r for r in self.rows if r["mode"] == mode]
        return sum(bool(r[key]) for r in sel) / len(sel) if sel else float("nan")

    def count(self, mode: str = "greedy", key: str = "tool_response") -> tuple[int, int]:
        sel = [r for r in self.rows if r["mode"] == mode]
        return sum(bool(r[key]) for r in sel), len(sel)


def measure(run: Run, probe_list: list[Probe], max_new_tokens: int = 40, samples: int = 1,
            seed: int = 0, n_threads: int | None = 1) -> Measurement:
    """Continue every probe greedily and ``samples`` times sampled; classify each continuation."""
    import torch

    tok = tokenizer_for(run.settings["template"])
    g = torch.Generator().manual_seed(seed)
    rows = []
    prompts = [p.prompt_ids for p in probe_list]
    for mode, gen in [("greedy", None)] + [("sampled", g)] * samples:
        with threads(n_threads):
            conts = continue_batch(run, prompts, max_new_tokens, gen)
        for i, ids in enumerate(conts):
            text = tok.decode(ids, skip_special_tokens=False)
            p = probe_list[i]
            rows.append(dict(probe=i, kind=p.kind, mode=mode, continuation=text, **classify(text, p.real_results)))
    return Measurement(run.name, rows)


def nll_by_part(run: Run, examples: list[Labelled], batch_size: int = 8, n_threads: int | None = 1) -> dict:
    """Teacher-forced mean negative log-likelihood (nats/token) of held-out text, split by who wrote it:
    ``model_output`` (trained positions), ``tool_results`` (tool_response segment) and ``prompt`` (the rest).
    Ids outside the run's vocabulary are skipped (build the vocabulary from train + held-out data to avoid)."""
    import torch
    import torch.nn.functional as F

    head = _Head(run.model, run.vocab)
    pad = tokenizer_for(run.settings["template"]).pad_token_id
    sums = {"model_output": [0.0, 0], "tool_results": [0.0, 0], "prompt": [0.0, 0]}
    with torch.no_grad(), threads(n_threads):
        for s in range(0, len(examples), batch_size):
            chunk = examples[s:s + batch_size]
            ids, _, attn = _batch(chunk, range(len(chunk)), False, pad)
            logp = F.log_softmax(head.logits(head.hidden(ids, attn).last_hidden_state[:, :-1]), -1)
            for j, ex in enumerate(chunk):
                cols = head.column[torch.tensor(ex.ids[1:])]
                ok = cols >= 0
                nll = -logp[j, :len(ex.ids) - 1].gather(1, cols.clamp(min=0)[:, None])[:, 0]
                trained = torch.tensor(ex.trained[1:])
                tool = torch.tensor([t.segment == "tool_response" for t in ex.rendering.tokens[1:]])
                for part, sel in (("model_output", trained), ("tool_results", tool & ~trained),
                                  ("prompt", ~tool & ~trained)):
                    sel = sel & ok
                    sums[part][0] += float(nll[sel].sum())
                    sums[part][1] += int(sel.sum())
    return {k: v[0] / v[1] if v[1] else float("nan") for k, v in sums.items()}


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
            for key, what in (("tool_response", "writes <tool_response> itself"),
                              ("user_turn", "opens a user turn itself"),
                              ("matches_real", "its made-up result equals the real one")):
                add(f"{mode}: {what}", lambda k, m=mode, kk=key: "{}/{}".format(*self.measurements[k].count(m, kk)))
        return rows


def experiment(template: str = "qwen3", n_train: int = 200, n_held_out: int = 40, steps: int = 220,
               batch_size: int = 8, lr: float = 8e-3, seed: int = 0, data_seed: int = 1, held_out_seed: int = 2,
               max_new_tokens: int = 40, samples: int = 1, n_probes: int = 30, model_kw: dict | None = None,
               progress=None) -> Experiment:
    """Make the data set, fine-tune twice (with / without the mask) and measure both. Seeded end to end.

    ``progress(run_name, step, loss)`` is called during training if given.
    """
    from .trajectories import dataset

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
    settings = dict(template=template, n_train=n_train, n_held_out=n_held_out, steps=steps, batch_size=batch_size,
                    lr=lr, seed=seed, data_seed=data_seed, held_out_seed=held_out_seed, vocab=len(vocab),
                    max_new_tokens=max_new_tokens, samples=samples, probes=len(probe_list),
                    model=runs["masked"].settings["model_kw"], params=runs["masked"].settings["params"])
    return Experiment(settings, train_ex, held, probe_list, vocab, runs, meas, nll)


def cli(argv: list[str]) -> int:
    """``python -m toolkit train [--template qwen3] [--steps 220] [--lr 8e-3] [--seed 0]``: both runs, one table."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m toolkit train", description=cli.__doc__)
    ap.add_argument("--template", default="qwen3", choices=["qwen3", "qwen2.5"])
    ap.add_argument("--steps", type=int, default=220)
    ap.add_argument("--lr", type=float, default=8e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print("model: random-weight Qwen-shaped stand-in (learns the format, never meaning), CPU")
    res = experiment(args.template, steps=args.steps, lr=args.lr, seed=args.seed)
    rows = res.table()
    w = max(len(r[""]) for r in rows)
    print(f"{'':<{w}}  {'masked':>10}  {'unmasked':>10}")
    for r in rows:
        print(f"{r['']:<{w}}  {r['masked']!s:>10}  {r['unmasked']!s:>10}")
    return 0
