"""Run many BFCL cases on a kit backend, batched, with every output cached on disk (resumable).

What it does
- ``prompt_ids(case, mode, tokenizer)`` renders a case for one mode with :func:`toolkit.render.render` (the
  kit's Qwen2.5 template by default; ``tools=`` for native/constrained, BFCL's system text for prompt).
- ``generate_batch(backend, prompts, ...)`` → one ``(new_ids, stopped_by)`` per prompt. A backend with
  ``generate_batch`` (:class:`toolkit.backends.hf.HFBackend`) decodes the padded batch through the kit's one decode
  loop and sampler (one grammar mask per row; the first-token gate as a logits processor). The prompts' common
  leading tokens (the template's system preamble; BFCL's instructions in prompt mode; the whole prompt for n
  samples of one task) are prefilled once and the cache copied to every row; padding sits between that shared
  part and each row's own tokens. Any other backend (scripted, engine) is called one prompt at a time through
  the backend protocol.
- ``run_cases(...)`` groups cases of similar prompt length into batches, skips what the cache already holds
  (``<cache>/<model>/<settings>/<mode>/<case id>.json``), decodes and scores each output, and yields
  :class:`Result` rows as they finish (for a progress bar). A schema xgrammar rejects is a result
  (``kind="malformed"``, ``grammar_error``), never a crash.

What it leaves out
- Stopping rows early inside a batch (finished rows idle until the longest one stops); sharing anything
  beyond the common leading tokens (tool blocks differ per case).
- Bit-identity with unbatched greedy decoding: padded batches compute in another order; in bf16 a near-tie
  can flip a token.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from toolkit.eval.bfcl import GATE_THRESHOLD, STRUCTURED_STARTS, Case, IntentGate, constrained_grammar, messages_for
from toolkit.eval.levers import MoreCallsGate
from toolkit.eval.prompt_grammar import python_calls_grammar
from toolkit.eval.read import decode
from toolkit.eval.score import score
from toolkit.grammar.compile import SchemaError
from toolkit.grammar.mask import GrammarMask
from toolkit.loop.gate import FirstTokenGate
from toolkit.qwen import ENDOFTEXT_ID, STOP_IDS, TOOL_CALL_ID
from toolkit.render import render


def prompt_ids(case: Case, mode: str, tokenizer, template: str = "qwen2.5", tools=None, system_hint=None) -> list[int]:
    msgs, tl = messages_for(case, mode, tools, system_hint)
    return list(render(msgs, tl, template=template, tokenizer=tokenizer).ids)


@dataclass
class Result:
    id: str
    category: str
    mode: str
    sample: int
    text: str
    ok: bool
    kind: str
    detail: str
    calls: list
    prompt_tokens: int
    new_tokens: int
    seconds: float  # this case's share of its batch's wall time
    stopped_by: str
    untagged_json: bool = False
    grammar_error: str = ""
    cached: bool = False


# ---------------------------------------------------------------- batched generation
def _stopped(ids: list[int], stops: set[int], max_new: int) -> tuple[list[int], str]:
    cut = next((i + 1 for i, t in enumerate(ids) if t in stops), None)
    if cut is not None:
        return ids[:cut], "stop"
    return ids[:max_new], "length"


def generate_batch(
    backend,
    prompts: list[list[int]],
    *,
    grammars=None,
    max_new_tokens: int = 96,
    temperature: float = 0.0,
    seed: int = 0,
    tokenizer=None,
    share_prefix: bool = True,
    processors=(),
) -> list[tuple[list[int], str]]:
    """Generate for several prompts at once (see the module docstring). ``grammars``: one
    :class:`toolkit.grammar.compile.Grammar` (or None) per prompt; all or none. ``share_prefix``: prefill the
    prompts' common leading tokens once (the template's system preamble; the whole prompt for n samples)."""
    stops = set(STOP_IDS)  # as the grammars end a turn: <|im_end|> or <|endoftext|>
    if grammars is not None and any(g is None for g in grammars) and not all(g is None for g in grammars):
        raise ValueError("a batch is either all constrained or all free")
    if grammars is not None and all(g is None for g in grammars):
        grammars = None
    batched = getattr(backend, "generate_batch", None)
    if batched is None:  # one prompt at a time through the backend protocol
        out = []
        for i, p in enumerate(prompts):
            if hasattr(backend, "reset"):
                backend.reset()
            mask = GrammarMask(grammars[i]) if grammars else None
            g = backend.generate(
                p, max_new_tokens=max_new_tokens, stop_ids=stops, mask=mask, temperature=temperature, seed=seed + i
            )
            out.append((list(g.new_ids), g.stopped_by if g.stopped_by != "grammar" else "stop"))
        return out
    pad = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
    gens = batched(
        prompts,
        max_new_tokens=max_new_tokens,
        stop_ids=stops,
        masks=[GrammarMask(g) for g in grammars] if grammars else None,
        temperature=temperature,
        seed=seed,
        pad_id=ENDOFTEXT_ID if pad is None else pad,
        share_prefix=share_prefix,
        processors=processors,
    )
    return [_stopped(list(g.new_ids), stops, max_new_tokens) for g in gens]


# ---------------------------------------------------------------- the cached runner
def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s)[:80]


def settings_key(**settings) -> str:
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


class Cache:
    """One JSON file per (case, mode, sample) under ``root/<model>/<settings>/<mode>/``."""

    def __init__(self, root: str | Path, model: str, **settings):
        self.dir = Path(root) / _slug(model) / settings_key(**settings)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "settings.json").write_text(json.dumps({"model": model, **settings}, indent=1))

    def path(self, mode: str, case_id: str, sample: int = 0) -> Path:
        return self.dir / mode / (f"{_slug(case_id)}" + (f"#{sample}" if sample else "") + ".json")

    def get(self, mode, case_id, sample=0) -> dict | None:
        p = self.path(mode, case_id, sample)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            return None  # a half-written file from a killed run: generate it again

    def put(self, mode, case_id, sample, row: dict) -> None:
        p = self.path(mode, case_id, sample)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(row, ensure_ascii=False, default=str))
        tmp.replace(p)

    def put_result(self, r: Result) -> None:
        """What ``run_cases`` reads back for ``r`` (the text and its counts; a schema rejection's error)."""
        row = {k: getattr(r, k) for k in ("text", "prompt_tokens", "new_tokens", "seconds", "stopped_by")}
        self.put(r.mode, r.id, r.sample, {**row, **({"grammar_error": r.grammar_error} if r.grammar_error else {})})


def _grammar(case: Case, tokenizer, vocab_width, tools=None, newline_after=False, as_list=False, python=False):
    try:
        tl = tools if tools is not None else case.tools
        if python:
            return python_calls_grammar(tl, tokenizer, vocab_width), ""
        return constrained_grammar(tl, tokenizer, vocab_width, newline_after=newline_after, as_list=as_list), ""
    except SchemaError as e:
        return None, str(e)


def result_from(
    case: Case,
    mode: str,
    sample: int,
    text: str,
    prompt_tokens: int,
    new_tokens: int,
    seconds: float,
    stopped_by: str,
    grammar_error: str = "",
    lists: bool = False,
) -> Result:
    """Decode and score one output (also used to re-score cached texts). ``lists``: the ``list_calls`` lever's
    outputs (a block holding a list of calls counts as those calls)."""
    same = dict(id=case.id, category=case.category, mode=mode, sample=sample, text=text, prompt_tokens=prompt_tokens)
    if grammar_error:
        none_fits = "irrelevance" in case.category  # declining is right when no tool fits
        return Result(
            **same,
            ok=none_fits,
            kind="ok" if none_fits else "malformed",
            detail=f"schema rejected: {grammar_error}",
            calls=[],
            new_tokens=0,
            seconds=0.0,
            stopped_by="grammar_error",
            grammar_error=grammar_error,
        )
    d = decode(text, mode, lists)
    s = score(case, d)
    return Result(
        **same,
        ok=s.ok,
        kind=s.kind,
        detail=s.detail,
        calls=d.calls,
        new_tokens=new_tokens,
        seconds=seconds,
        stopped_by=stopped_by,
        untagged_json=d.untagged_json,
    )


def run_cases(
    backend,
    tokenizer,
    cases: list[Case],
    mode: str,
    *,
    cache: Cache | None = None,
    batch_size: int = 8,
    max_new_tokens: int = 96,
    temperature: float = 0.0,
    seed: int = 0,
    samples: int = 1,
    template: str = "qwen2.5",
    tools_for=None,
    cached_only: bool = False,
    gate: bool = True,
    system_hint: str | None = None,
    more_calls: bool = False,
    list_calls: bool = False,
    gate_threshold: float | None = GATE_THRESHOLD,
    python_calls: bool = False,
) -> Iterator[Result]:
    """Yield one :class:`Result` per (case, sample), cached ones first. ``tools_for(case)`` may replace a case's
    tools (description variants). ``samples > 1`` batches the samples of one case together. ``cached_only``:
    yield what the cache holds and generate nothing (to collect several runs into one report). ``gate``: apply
    :class:`toolkit.eval.bfcl.IntentGate` on the first token in constrained mode (HF backends). Levers (the
    defaults leave prompts and grammars as they were; callers key their cache on them): ``system_hint``, a line
    added to the system message (:data:`toolkit.eval.levers.HINTS`); ``more_calls`` (constrained mode), the
    newline-after-each-call grammar with :class:`toolkit.eval.levers.MoreCallsGate` at each end decision;
    ``list_calls`` (constrained mode), all calls as one JSON list in one block, split by the host
    (:func:`toolkit.eval.bfcl.constrained_grammar` ``as_list``); ``gate_threshold``, the first-token gate's
    threshold (None: the pooled call mass against the rest, by argmax); ``python_calls`` (prompt mode), BFCL's
    prompt-style answer under :func:`toolkit.eval.prompt_grammar.python_calls_grammar`, its first token gated the same way
    onto ``[``."""
    if python_calls and mode != "prompt":
        raise ValueError("python_calls constrains BFCL's prompt style: mode must be 'prompt'")
    grammared = mode == "constrained" or python_calls
    width = getattr(backend, "vocab_width", None)
    todo = []
    for c in cases:
        for s in range(samples):
            row = cache.get(mode, c.id, s) if cache else None
            if row is not None:
                r = result_from(
                    c,
                    mode,
                    s,
                    row["text"],
                    row["prompt_tokens"],
                    row["new_tokens"],
                    row["seconds"],
                    row["stopped_by"],
                    row.get("grammar_error", ""),
                    list_calls,
                )
                r.cached = True
                yield r
            else:
                todo.append((c, s))
    if not todo or cached_only:
        return
    prepared = {}
    for c, _ in todo:
        if c.id not in prepared:
            tools = tools_for(c) if tools_for else None
            g, err = (
                _grammar(c, tokenizer, width, tools, more_calls, list_calls, python_calls) if grammared else (None, "")
            )
            prepared[c.id] = (prompt_ids(c, mode, tokenizer, template, tools, system_hint), g, err)
    for c, s in [(c, s) for c, s in todo if prepared[c.id][2]]:  # schema rejected: a result, not a crash
        r = result_from(c, mode, s, "", len(prepared[c.id][0]), 0, 0.0, "", prepared[c.id][2])
        if cache:
            cache.put_result(r)
        yield r
    todo = [(c, s) for c, s in todo if not prepared[c.id][2]]
    if samples > 1:  # keep a case's samples together: one shared prefill per case
        batches = []
        for cid in dict.fromkeys(c.id for c, _ in todo):
            group = [(c, s) for c, s in todo if c.id == cid]
            batches += [group[i : i + batch_size] for i in range(0, len(group), batch_size)]
    else:
        todo.sort(key=lambda cs: len(prepared[cs[0].id][0]))  # similar lengths: little padding
        batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    for batch in batches:
        prompts = [prepared[c.id][0] for c, _ in batch]
        grammars = [prepared[c.id][1] for c, _ in batch] if grammared else None
        t0 = time.perf_counter()
        procs = [IntentGate(tokenizer, gate_threshold)] if (mode == "constrained" and gate) else []
        if python_calls and gate:  # the same gate; a call in this style opens with "["
            (bracket,) = tokenizer.encode("[", add_special_tokens=False)
            procs = [FirstTokenGate(tokenizer, STRUCTURED_STARTS, gate_threshold, bracket)]
        if mode == "constrained" and more_calls:
            procs.append(MoreCallsGate(tokenizer))
        outs = generate_batch(
            backend,
            prompts,
            grammars=grammars,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed + 1000 * batch[0][1],
            tokenizer=tokenizer,
            processors=procs,
        )
        share = (time.perf_counter() - t0) / len(batch)
        for (c, s), (ids, stopped_by) in zip(batch, outs):
            body = ids[:-1] if ids and ids[-1] in STOP_IDS else ids
            text = tokenizer.decode(body, skip_special_tokens=False)
            r = result_from(c, mode, s, text, len(prepared[c.id][0]), len(ids), share, stopped_by, "", list_calls)
            if cache:
                cache.put_result(r)
            yield r


def as_rows(results) -> list[dict]:
    return [asdict(r) for r in results]


def first_tokens(backend, tokenizer, case: Case, mode: str = "native", k: int = 6) -> dict:
    """The model's own distribution over the first answer token of one case (one forward, no mask): the top
    ``k`` tokens, p(<tool_call>), and the structured mass the :class:`IntentGate` acts on."""
    import torch  # lazy: only when a model runs

    ids = prompt_ids(case, mode, tokenizer)
    with torch.inference_mode():
        x = torch.tensor([ids], device=next(backend.model.parameters()).device)
        logits = backend.model(input_ids=x, logits_to_keep=1).logits[0, -1].float().cpu()
    p = torch.softmax(logits, -1)
    top = torch.topk(p, k)
    struct = IntentGate(tokenizer).ids  # the structured starts and <tool_call>
    return {
        "id": case.id,
        "prompt_tokens": len(ids),
        "p_tool_call": float(p[TOOL_CALL_ID]),
        "structured_mass": float(p[struct].sum()),
        "top": [(tokenizer.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)],
    }
