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
- ``run_cases(cases, backend, levers, tokenizer=...)`` groups cases of similar prompt length into batches, skips
  what the cache already holds (``<cache>/<model>/<levers.key()>/<mode>/<case id>.json``), decodes and scores each
  output, and yields :class:`Result` rows as they finish (for a progress bar). ``levers`` is one
  :class:`toolkit.eval.levers.Levers`: the mode, the decoding and the levers, named once.
- ``first_tokens(backend, ...)``: the model's first-token distribution, through the backend's ``Scores``
  capability (``toolkit.backends.base``). A schema xgrammar rejects is a result
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

from toolkit.backends.base import Batches, Resets, Scores, vocab_width
from toolkit.eval.bfcl import STRUCTURED_STARTS, Case, IntentGate, constrained_grammar, messages_for
from toolkit.eval.levers import Levers, MoreCallsGate
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
    if not isinstance(backend, Batches):  # one prompt at a time through the backend protocol
        out = []
        for i, p in enumerate(prompts):
            if isinstance(backend, Resets):
                backend.reset()
            mask = GrammarMask(grammars[i]) if grammars else None
            g = backend.generate(
                p, max_new_tokens=max_new_tokens, stop_ids=stops, mask=mask, temperature=temperature, seed=seed + i
            )
            out.append((list(g.new_ids), g.stopped_by if g.stopped_by != "grammar" else "stop"))
        return out
    pad = getattr(tokenizer, "pad_token_id", None) if tokenizer is not None else None
    gens = backend.generate_batch(
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
def _plain(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s)


def _slug(s: str) -> str:
    return _plain(s)[:80]


class CacheConflict(ValueError):
    """A cache folder holds another model's outputs: one line; nothing in it is read or overwritten."""


def model_folder(model: str) -> str:
    """The cache's folder name for ``model``: the name itself where it is a short plain name, else its first 69
    characters made plain plus a hash of the whole name. (The folder used to be the first 80 characters alone, so
    every model named "<base> + LoRA adapter <...>" shared one folder: a run with a second RL adapter read the
    first one's outputs as its own.)"""
    slug = _plain(model)
    if slug == model and len(slug) <= 80:
        return slug
    return f"{slug[:69]}-{hashlib.sha256(model.encode()).hexdigest()[:10]}"


def settings_key(**settings) -> str:
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


class Cache:
    """One JSON file per (case, mode, sample) under ``root/<model>/<settings>/<mode>/``; ``settings`` are
    ``levers.key()`` and any further keyword arguments (a benchmark's version, a lever's or variant's name)."""

    def __init__(self, root: str | Path, model: str, levers: Levers | None = None, **settings):
        settings = {**(levers.key() if levers is not None else {}), **settings}
        self.dir = Path(root) / model_folder(model) / settings_key(**settings)
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "settings.json"
        try:
            were = json.loads(meta.read_text()).get("model")
        except (OSError, ValueError, AttributeError):
            were = None  # none yet, or half-written: this run writes it
        if were is not None and were != model:
            raise CacheConflict(f"cache folder {self.dir} holds outputs of another model ({were[:120]}): move it aside")
        meta.write_text(json.dumps({"model": model, **settings}, indent=1))

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


def _grammar(case: Case, tokenizer, vocab_width, levers: Levers, tools=None):
    try:
        tl = tools if tools is not None else case.tools
        if levers.python_calls:
            return python_calls_grammar(tl, tokenizer, vocab_width), ""
        return constrained_grammar(
            tl, tokenizer, vocab_width, more_calls=levers.more_calls, list_calls=levers.list_calls
        ), ""
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
    list_calls: bool = False,
) -> Result:
    """Decode and score one output (also used to re-score cached texts). ``list_calls``: the lever's outputs (a
    block holding a list of calls counts as those calls)."""
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
    d = decode(text, mode, list_calls)
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
    cases: list[Case],
    backend,
    levers: Levers | None = None,
    *,
    tokenizer,
    cache: Cache | None = None,
    batch_size: int = 8,
    samples: int = 1,
    tools_for=None,
    cached_only: bool = False,
) -> Iterator[Result]:
    """Yield one :class:`Result` per (case, sample), cached ones first, for the mode, decoding and levers in
    ``levers`` (:class:`toolkit.eval.levers.Levers`; the defaults leave prompts and grammars as they were; key the
    cache on it: ``Cache(root, model, levers)``). ``tools_for(case)`` may replace a case's tools (description
    variants). ``samples > 1`` batches the samples of one case together. ``cached_only``: yield what the cache
    holds and generate nothing (to collect several runs into one report)."""
    lv = levers or Levers()
    mode = lv.mode
    width = vocab_width(backend)
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
                    lv.list_calls,
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
            g, err = _grammar(c, tokenizer, width, lv, tools) if lv.grammared else (None, "")
            prepared[c.id] = (prompt_ids(c, mode, tokenizer, lv.template, tools, lv.system_hint), g, err)
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
        grammars = [prepared[c.id][1] for c, _ in batch] if lv.grammared else None
        t0 = time.perf_counter()
        outs = generate_batch(
            backend,
            prompts,
            grammars=grammars,
            max_new_tokens=lv.max_new_tokens,
            temperature=lv.temperature,
            seed=lv.seed + 1000 * batch[0][1],
            tokenizer=tokenizer,
            processors=_processors(lv, tokenizer),
        )
        share = (time.perf_counter() - t0) / len(batch)
        for (c, s), (ids, stopped_by) in zip(batch, outs):
            body = ids[:-1] if ids and ids[-1] in STOP_IDS else ids
            text = tokenizer.decode(body, skip_special_tokens=False)
            r = result_from(c, mode, s, text, len(prepared[c.id][0]), len(ids), share, stopped_by, "", lv.list_calls)
            if cache:
                cache.put_result(r)
            yield r


def _processors(lv: Levers, tokenizer) -> list:
    """The logits processors a batch runs under: the first-token gate (constrained mode, or onto ``[`` for
    ``python_calls``) and the more-calls gate. Fresh per batch (``MoreCallsGate`` records its decisions)."""
    procs = [IntentGate(tokenizer, lv.gate_threshold)] if (lv.mode == "constrained" and lv.gate) else []
    if lv.python_calls and lv.gate:  # the same gate; a call in this style opens with "["
        (bracket,) = tokenizer.encode("[", add_special_tokens=False)
        procs = [FirstTokenGate(tokenizer, STRUCTURED_STARTS, lv.gate_threshold, bracket)]
    if lv.mode == "constrained" and lv.more_calls:
        procs.append(MoreCallsGate(tokenizer))
    return procs


def as_rows(results) -> list[dict]:
    return [asdict(r) for r in results]


def first_tokens(backend, tokenizer, case: Case, mode: str = "native", k: int = 6) -> dict:
    """The model's own distribution over the first answer token of one case (one forward, no mask): the top
    ``k`` tokens, p(<tool_call>), and the structured mass the :class:`IntentGate` acts on. ``backend`` must have
    the ``Scores`` capability (a local model; a server returns tokens, not logits)."""
    import torch  # lazy: only when a model runs

    if not isinstance(backend, Scores):
        raise TypeError(f"first_tokens needs a backend's logits (Scores); {type(backend).__name__} has none")
    ids = prompt_ids(case, mode, tokenizer)
    p = torch.softmax(backend.next_token_logits(ids).float(), -1)
    top = torch.topk(p, k)
    struct = IntentGate(tokenizer).ids  # the structured starts and <tool_call>
    return {
        "id": case.id,
        "prompt_tokens": len(ids),
        "p_tool_call": float(p[TOOL_CALL_ID]),
        "structured_mass": float(p[struct].sum()),
        "top": [(tokenizer.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)],
    }
