"""What a fine-tuned run learned: continuations of held-out trajectories and NLL by who wrote the text.

What it does
- ``probes`` cuts held-out trajectories right after a call turn; ``measure`` continues them (greedy and sampled,
  batched through the kit's one decode loop and sampler) and counts invented ``<tool_response>`` blocks; ``nll_by_part`` scores held-out text by model output / tool
  results / prompt.

What it leaves out
- Stop tokens during probing (the point is to see what the model writes next).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from toolkit.backends.decode import decode_rows
from toolkit.backends.sampling import choose
from toolkit.sft.finetune import Run, VocabHead, batch_of, threads
from toolkit.sft.labels import EOT, Labelled, MaskError
from toolkit.tokenizer import tokenizer_for

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
        if text[span[1] - len(AFTER_CALL) + 1 : cut] != AFTER_CALL:
            raise MaskError("no-call-boundary", f"example {j}: the call turn does not end with {AFTER_CALL!r}")
        n = next(t.index for t in ex.rendering.tokens if t.start >= cut)
        k = sum(1 for a, _ in ex.trained_spans if a < span[0])  # which assistant message this is
        msg_i = [i for i, m in enumerate(ex.messages) if m.get("role") == "assistant"][k]
        real = []
        for m in ex.messages[msg_i + 1 :]:
            if m.get("role") != "tool":
                break
            real.append(m["content"])
        out.append(Probe(ex.ids[:n], text[:cut], real, kinds[j] if kinds else ""))
    return out


class _Rows:
    """The trained run under the one decode loop (``toolkit.backends.decode.decode_rows``): prompts left-padded into
    one batch, one forward of the last tokens per step, tokens picked by the one sampler over the run's output
    vocabulary (greedy, or temperature 1 from ``generator``)."""

    depth = 1

    def __init__(self, run: Run, prompts: list[list[int]], generator):
        self.head, self.generator = VocabHead(run.model, run.vocab), generator
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), int(self.head.vocab[0]), dtype=torch.long)
        self.attn = torch.zeros((len(prompts), width), dtype=torch.long)
        for j, p in enumerate(prompts):
            ids[j, width - len(p) :] = torch.tensor(p)
            self.attn[j, width - len(p) :] = 1
        self.pos = (self.attn.cumsum(-1) - 1).clamp(min=0)
        self.res = self.head.hidden(ids, self.attn, position_ids=self.pos, use_cache=True)
        self.tokens: list[torch.Tensor] = []

    def launch(self, i: int, bitmasks) -> None:
        if i > 0:  # the forward of the previous token runs only when the next one is asked for
            nxt = self.tokens[i - 1]
            self.attn = torch.cat([self.attn, torch.ones((len(nxt), 1), dtype=torch.long)], 1)
            self.pos = self.pos[:, -1:] + 1
            self.res = self.head.hidden(
                nxt[:, None], self.attn, position_ids=self.pos, cache=self.res.cache, use_cache=True
            )
        logits = self.head.logits(self.res.last_hidden_state[:, -1])
        cols = choose(logits) if self.generator is None else choose(logits, 1.0, gen=self.generator)
        self.tokens.append(self.head.vocab[cols])

    def token(self, i: int) -> list[int]:
        return self.tokens[i].tolist()


def continue_batch(run: Run, prompts: list[list[int]], max_new_tokens: int = 40, generator=None) -> list[list[int]]:
    """Let the trained model continue each prompt with no stop token: greedy, or sampled (temperature 1) with
    ``generator``. Prompts are left-padded into one batch. Decoding covers the run's output vocabulary."""
    with torch.no_grad():
        rows = decode_rows(
            _Rows(run, prompts, generator), rows=len(prompts), max_new_tokens=max_new_tokens, stop_ids=set()
        )
    return [ids for ids, _ in rows]


def continue_ids(run: Run, prompt_ids: list[int], max_new_tokens: int = 40, generator=None) -> list[int]:
    """One prompt's continuation (see :func:`continue_batch`)."""
    return continue_batch(run, [prompt_ids], max_new_tokens, generator)[0]


def classify(continuation: str, real_results: list[str]) -> dict:
    """Did the model write a tool result itself? What did it put in it, and is that what the tool returned?"""
    opened = "<tool_response>" in continuation
    invented = ""
    if opened:
        invented = continuation.split("<tool_response>", 1)[1].split("</tool_response>", 1)[0].strip("\n")
    return dict(
        tool_response=opened,
        user_turn=continuation.startswith("<|im_start|>user"),
        invented=invented,
        matches_real=opened and invented.strip() in [r.strip() for r in real_results],
    )


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


def measure(
    run: Run,
    probe_list: list[Probe],
    max_new_tokens: int = 40,
    samples: int = 1,
    seed: int = 0,
    n_threads: int | None = 1,
) -> Measurement:
    """Continue every probe greedily and ``samples`` times sampled; classify each continuation."""
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

    head = VocabHead(run.model, run.vocab)
    pad = tokenizer_for(run.settings["template"]).pad_token_id
    sums = {"model_output": [0.0, 0], "tool_results": [0.0, 0], "prompt": [0.0, 0]}
    with torch.no_grad(), threads(n_threads):
        for s in range(0, len(examples), batch_size):
            chunk = examples[s : s + batch_size]
            ids, _, attn = batch_of(chunk, range(len(chunk)), False, pad)
            logp = F.log_softmax(head.logits(head.hidden(ids, attn).last_hidden_state[:, :-1]), -1)
            for j, ex in enumerate(chunk):
                cols = head.column[torch.tensor(ex.ids[1:])]
                ok = cols >= 0
                nll = -logp[j, : len(ex.ids) - 1].gather(1, cols.clamp(min=0)[:, None])[:, 0]
                trained = torch.tensor(ex.trained[1:])
                tool = torch.tensor([t.segment == "tool_response" for t in ex.rendering.tokens[1:]])
                for part, sel in (
                    ("model_output", trained),
                    ("tool_results", tool & ~trained),
                    ("prompt", ~tool & ~trained),
                ):
                    sel = sel & ok
                    sums[part][0] += float(nll[sel].sum())
                    sums[part][1] += int(sel.sum())
    return {k: v[0] / v[1] if v[1] else float("nan") for k, v in sums.items()}
