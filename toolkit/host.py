"""The host's execute-and-feed-back loop, with the KV cache kept across turns (book §14.5.2 steps 3–6, §14.5.3,
§14.5.8; "Tool Use" §3.1).

What it does
- ``loop(...)`` is a generator of typed steps. Per turn: render the messages (``Rendered``), generate until
  ``<|im_end|>`` (``Generated``), cut out zero, one or several ``<tool_call>`` blocks (``Parsed``), validate the
  arguments with jsonschema, execute independent calls in parallel (one daemon thread each, per-call timeout)
  (``Executed``), append one ``role="tool"`` message per call and go again — until the model answers
  (``Answered``) or a guard stops it (``Stopped(reason)``, always the last step). ``run(...)`` collects a
  :class:`Trace`.
- Everything the *model* gets wrong becomes a structured error result the model sees on the next turn, never an
  exception: malformed JSON, an unclosed tag, an unknown tool, invalid arguments, a tool that raises or times
  out, a call the person did not approve (tools with ``needs_confirmation`` run only if ``confirm(call)`` says
  yes; the default denies). Guards: ``max_turns``, a token budget, calls per turn, repeated calls.
- The **backend protocol** (below) and two backends: :class:`HFBackend` (a transformers model that keeps one
  ``DynamicCache`` across turns and prefills only the tokens after the longest shared prefix; when the new
  rendering does not extend the old one it crops the cache to the shared prefix) and :class:`ScriptedBackend`
  (replays fixed texts, for deterministic loop tests). ``toolkit.engine`` implements the same protocol.
- Per turn it records tokens reused vs prefilled and prefill/decode wall time, and splits the prompt into tool
  definitions / history / new tokens (``Rendered.split``).
- ``tool_choice`` as the chat APIs name it: ``"auto"`` (default: text or calls), ``"required"``, ``"none"``, or
  a tool's name; it binds the turn that answers the user, later turns are ``"auto"`` (:data:`RULE`, printed in
  every ``Rendered.rule``). With ``constrain="tag"`` (default) each turn decodes under
  ``toolkit.constrain.compile_tool_choice``'s grammar; under ``"auto"`` the model's own first token decides
  call or text (a call spelled any way starts a grammar-checked ``<tool_call>``). Parallel calls: any number up
  to ``max_calls``, no slots. The repeat guard is per call, within and across turns: a repeated call is not run
  and gets a ``repeated_call`` note with the first call's result. The answer is started for the model (``answer_prefix``, ``"auto"``: in the
  question's language) only after tool results on a turn after only-repeated calls or on the last turn allowed.
- ``ask(question, loaded, tools=..., tool_choice=...)`` runs any question with :data:`DEFAULTS`;
  ``python -m toolkit loop "question" [--tools a,b] [--tool-choice auto|required|none|NAME] [--json]`` checks
  its input before a model loads (one-line error, exit 2).

What it leaves out
- Killing a timed-out tool: Python threads cannot be stopped, so a timed-out call is abandoned (its daemon
  thread finishes in the background, or dies with the process) and its result ignored.
- Reuse beyond the re-rendered text: the host keeps structured calls and the template writes them out again;
  where that text tokenizes differently from what the model produced (e.g. ``}}`` + ``\n`` generated under a
  grammar vs ``}}\n`` re-tokenized), the cache stops matching there, as it would on a server.
- Recovering calls a model writes without the tags (fenced or bare JSON): the host recognises only the
  template's ``<tool_call>`` format, as a real host does; the call gate only redirects a turn whose FIRST token
  opens such a call, a fence later in a text answer stays text. The gate costs one extra forward of the last
  prompt token per gated turn (the peek's prefill is cached; its numbers are added to the turn's).
- Streaming, batching several conversations, history compression (§14.5.8).

Backend protocol (stable; ``toolkit.engine`` implements it too)::

    backend.generate(prompt_ids: list[int], *, max_new_tokens: int, stop_ids: set[int], mask=None,
                     temperature: float = 0.0, seed: int = 0) -> Generation
    backend.name: str            # what ran, e.g. Loaded.description; says "STAND-IN" for random weights
    backend.reset() -> None      # forget any cached prefix (optional)
    backend.peek(prompt_ids, *, temperature, seed) -> Generation   # next token, no mask (optional; default:
                                 # a one-token generate) — the call gate of tool_choice="auto"
    backend.vocab_width: int     # logit width, for grammar bitmasks (optional; default 151,936)

``Generation(new_ids, reused, prefilled, prefill_s, decode_s, stopped_by)``: ``new_ids`` are the generated ids
including the stop token if one was hit; ``reused`` prompt tokens came from a cache, ``prefilled`` were computed
(``reused + prefilled == len(prompt_ids)``); ``stopped_by`` is ``"stop"`` (a stop id), ``"grammar"`` (the mask
terminated), or ``"length"`` (``max_new_tokens``). ``mask`` is a ``toolkit.constrain.GrammarMask``-like object:
``allocate()`` a bitmask, ``fill(bitmask)`` before each step, apply it with
``xgrammar.apply_token_bitmask_inplace(logits, bitmask)``, ``accept(token_id)`` after, ``is_terminated()``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Mapping, Protocol

IM_END = "<|im_end|>"
IM_END_ID = 151645
TOOL_CALL_TOKEN_ID = 151657  # <tool_call>: one added token in Qwen vocabularies
STOP_REASONS = ("answered", "max_turns", "repeated_call", "token_budget", "max_new_tokens")


# ================================================================ backend protocol
@dataclass
class Generation:
    new_ids: list[int]
    reused: int
    prefilled: int
    prefill_s: float
    decode_s: float
    stopped_by: str  # "stop" | "grammar" | "length"


class Backend(Protocol):
    name: str

    def generate(self, prompt_ids: list[int], *, max_new_tokens: int, stop_ids: set[int], mask=None,
                 temperature: float = 0.0, seed: int = 0) -> Generation: ...


def _pick(logits, temperature: float, generator) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logits))
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


class HFBackend:
    """A transformers causal LM behind the backend protocol, with a prefix cache of one conversation.

    ``reuse=False`` prefills the whole prompt every turn (what a server without prefix caching does); greedy
    decoding gives the same tokens either way (tested), only the work differs.
    """

    def __init__(self, model, name: str | None = None, reuse: bool = True):
        self.model = model
        self.reuse = reuse
        self.name = name or type(model).__name__
        self.device = next(model.parameters()).device
        self.vocab_width = int(model.get_output_embeddings().weight.shape[0])
        import inspect

        # transformers renamed forward's `past_key_values` to `cache` (5.2x); accept either version.
        self._cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.reset()

    @classmethod
    def from_loaded(cls, loaded, reuse: bool = True) -> "HFBackend":
        return cls(loaded.model, loaded.description, reuse)

    def reset(self) -> None:
        self._cache = None
        self._ids: list[int] = []  # the token ids whose keys/values are in self._cache

    def _sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _forward(self, ids: list[int]):
        import torch

        x = torch.tensor([ids], device=self.device)
        # logits_to_keep=1: only the last position's logits are needed (a 151,936-wide row per token is costly)
        out = self.model(input_ids=x, use_cache=True, logits_to_keep=1, **{self._cache_kw: self._cache})
        self._cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        self._ids.extend(ids)
        return out.logits[0, -1].float()

    def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, seed=0):
        import torch
        from transformers import DynamicCache

        from .render import shared_prefix

        prompt_ids = list(prompt_ids)
        keep = shared_prefix(self._ids, prompt_ids) if (self.reuse and self._cache is not None) else 0
        keep = min(keep, len(prompt_ids) - 1)  # at least one token must run to produce the next logits
        if keep <= 0:
            self._cache, self._ids = DynamicCache(config=self.model.config), []
        elif keep < len(self._ids):
            self._cache.crop(keep - len(self._ids))  # negative: number of positions to drop
            self._ids = self._ids[:keep]
        gen = torch.Generator(device="cpu").manual_seed(seed)
        bitmask = mask.allocate() if mask is not None else None
        new: list[int] = []
        stopped_by = "length"
        with torch.inference_mode():
            self._sync()
            t0 = time.perf_counter()
            logits = self._forward(prompt_ids[keep:])
            self._sync()
            t1 = time.perf_counter()
            while len(new) < max_new_tokens:
                if mask is not None:
                    mask.fill(bitmask)
                    import xgrammar as xgr

                    xgr.apply_token_bitmask_inplace(logits.unsqueeze(0), bitmask.to(logits.device))
                tok = _pick(logits.cpu() if temperature > 0 else logits, temperature, gen)
                new.append(tok)
                if mask is not None:
                    mask.accept(tok)
                if tok in stop_ids:
                    stopped_by = "stop"
                    break
                if mask is not None and mask.is_terminated():
                    stopped_by = "grammar"
                    break
                if len(new) < max_new_tokens:
                    logits = self._forward([tok])
            self._sync()
            t2 = time.perf_counter()
        return Generation(new, keep, len(prompt_ids) - keep, t1 - t0, t2 - t1, stopped_by)


class ScriptedBackend:
    """Replays scripted assistant texts (one per turn), smolagents ``FakeToolCallModel`` style.

    It tokenizes each text with ``tokenizer``, appends ``<|im_end|>`` unless the text already ends in a stop, and
    reports reuse as if it had a perfect prefix cache (shared prefix with its previous prompt + output). A
    callable script entry receives the prompt ids and returns the text, so tests can react to what they see.
    ``delay_s`` makes "generation" take time, for timing-related views.
    """

    def __init__(self, tokenizer, script, name: str = "scripted fake model (no weights)", delay_s: float = 0.0):
        self.tokenizer, self.script, self.name, self.delay_s = tokenizer, list(script), name, delay_s
        self.vocab_width = 151_936
        self.prompts: list[list[int]] = []
        self._seen: list[int] = []

    def reset(self) -> None:
        self._seen = []

    def peek(self, prompt_ids, *, temperature=0.0, seed=0) -> Generation:
        """The first token of the next scripted text, without using the entry up (the loop's call gate)."""
        from .render import shared_prefix

        turn = len(self.prompts)
        if turn >= len(self.script):
            raise IndexError(f"scripted backend has only {len(self.script)} turn(s); turn {turn + 1} was asked")
        entry = self.script[turn]
        ids = self.tokenizer.encode(entry(list(prompt_ids)) if callable(entry) else entry, add_special_tokens=False)
        reused = min(shared_prefix(self._seen, prompt_ids), len(prompt_ids) - 1)
        return Generation(ids[:1] or [IM_END_ID], reused, len(prompt_ids) - reused, 0.0, 0.0, "length")

    def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, seed=0):
        from .render import shared_prefix

        turn = len(self.prompts)
        self.prompts.append(list(prompt_ids))
        if turn >= len(self.script):
            raise IndexError(f"scripted backend has only {len(self.script)} turn(s); turn {turn + 1} was asked")
        entry = self.script[turn]
        text = entry(list(prompt_ids)) if callable(entry) else entry
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if not ids or ids[-1] not in stop_ids:
            ids.append(min(stop_ids) if IM_END_ID not in stop_ids else IM_END_ID)
        stopped_by = "stop"
        if len(ids) > max_new_tokens:
            ids, stopped_by = ids[:max_new_tokens], "length"
        reused = min(shared_prefix(self._seen, prompt_ids), len(prompt_ids) - 1)
        self._seen = list(prompt_ids) + ids[:-1]
        time.sleep(self.delay_s)
        return Generation(ids, reused, len(prompt_ids) - reused, 0.0, self.delay_s, stopped_by)


# ================================================================ parsing
@dataclass
class ToolCall:
    index: int
    raw: str  # the text between the tags
    name: str | None = None
    arguments: dict | None = None
    error: dict | None = None  # {"type": "malformed_json"|"unclosed_tag"|"bad_call", "message": ...}
    id: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


_TAG = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)
MAX_CALL_CHARS = 20_000


def _as_arguments(value):
    if isinstance(value, str):  # some models JSON-encode the arguments a second time
        value = json.loads(value)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(f"'arguments' must be a JSON object, got {type(value).__name__}")
    return value


def parse_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """Split a generation into its free text and its ``<tool_call>`` blocks. Never raises on any input string.

    Each block's JSON must be ``{"name": str, "arguments": object}``; anything else becomes a call with an
    ``error`` the model is shown, so it can fix itself.
    """
    if not isinstance(text, str):
        return "", [ToolCall(0, repr(text)[:200], error={"type": "bad_call", "message": "output is not text"})]
    calls, content, pos = [], [], 0
    for i, m in enumerate(_TAG.finditer(text)):
        content.append(text[pos:m.start()])
        pos = m.end()
        raw = m.group(1)
        call = ToolCall(i, raw, id=f"call_{i + 1}")
        calls.append(call)
        if not m.group(2):
            call.error = {"type": "unclosed_tag", "message": "<tool_call> was opened but never closed with "
                                                             "</tool_call> (output cut off?)"}
            continue
        if len(raw) > MAX_CALL_CHARS:
            call.error = {"type": "bad_call", "message": f"tool call longer than {MAX_CALL_CHARS} characters"}
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as e:  # RecursionError: JSON nested thousands deep
            call.error = {"type": "malformed_json", "message": f"tool call is not valid JSON: {str(e)[:160]}"}
            continue
        try:
            if not isinstance(obj, dict):
                raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
            if not isinstance(obj.get("name"), str) or not obj["name"]:
                raise ValueError("the call needs a string 'name'")
            call.name, call.arguments = obj["name"], _as_arguments(obj.get("arguments", obj.get("parameters")))
        except (ValueError, RecursionError) as e:
            call.name = obj.get("name") if isinstance(obj, dict) and isinstance(obj.get("name"), str) else None
            call.error = {"type": "bad_call", "message": str(e)[:200]}
    content.append(text[pos:])
    return "".join(content).strip(), calls


# ================================================================ executing
@dataclass
class CallResult:
    call_id: str
    name: str | None
    arguments: dict | None
    status: str  # "ok" | "error" | "denied" | "timeout" | "repeated" | "skipped" (not run)
    result: Any  # the tool's dict, or {"error": {"type": ..., "message": ...}}
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def message(self) -> dict:
        """The role="tool" message the model will see."""
        return {"role": "tool", "tool_call_id": self.call_id, "name": self.name or "",
                "content": json.dumps(self.result, ensure_ascii=False, default=str)}


def _error(kind: str, message: str) -> dict:
    return {"error": {"type": kind, "message": message}}


def _parameters(tool) -> dict:
    schema = getattr(tool, "schema", None) or {}
    fn = schema.get("function", schema)
    return fn.get("parameters") or fn.get("inputSchema") or schema.get("inputSchema") or \
        {"type": "object", "properties": {}}


def _openai_schema(tool) -> dict:
    schema = getattr(tool, "schema", None) or {}
    if "function" in schema:
        return schema
    return {"type": "function", "function": {"name": tool.name, "description": schema.get("description", ""),
                                             "parameters": _parameters(tool)}}


def check_arguments(tool, args) -> str | None:
    """Why ``args`` do not fit ``tool``'s schema (jsonschema + no unknown keys), or None if they do."""
    import jsonschema

    params = _parameters(tool)
    if not isinstance(args, dict):
        return "arguments must be a JSON object"
    props = params.get("properties")
    if isinstance(props, dict) and params.get("additionalProperties", False) is False:
        unknown = sorted(set(args) - set(props))
        if unknown:
            return f"unexpected argument(s) {unknown}; allowed: {sorted(props)}"
    try:
        jsonschema.validate(args, params)
    except jsonschema.ValidationError as e:
        where = "/".join(map(str, e.absolute_path)) or "arguments"
        return f"invalid {where}: {e.message[:200]}"
    except jsonschema.SchemaError as e:
        return f"the tool's own schema is invalid: {e.message[:200]}"
    return None


def _run_one(tool, args):
    t0 = time.perf_counter()
    try:
        out = tool.call(args)
        json.dumps(out, default=str)  # the model must be able to read it back
        return "ok", out, time.perf_counter() - t0
    except Exception as e:  # a tool's failure is an observation for the model, not a crash of the host
        from .tools import ToolError

        kind = "tool_error" if isinstance(e, ToolError) else "tool_exception"
        msg = str(e) if isinstance(e, ToolError) else f"{type(e).__name__}: {e}"
        return "error", _error(kind, msg[:300]), time.perf_counter() - t0


def execute(calls: list[ToolCall], tools: Mapping[str, Any], *, confirm: Callable | None = None,
            timeout_s: float = 5.0, parallel: bool = True) -> list[CallResult]:
    """Validate and run ``calls``; independent ones at the same time. Results come back in call order."""
    results: list[CallResult | None] = [None] * len(calls)
    todo = []
    for i, c in enumerate(calls):
        if not c.ok:
            results[i] = CallResult(c.id, c.name, c.arguments, "error", {"error": c.error})
        elif c.name not in tools:
            results[i] = CallResult(c.id, c.name, c.arguments, "error",
                                    _error("unknown_tool", f"no tool named {c.name!r}; available: {sorted(tools)}"))
        elif (why := check_arguments(tools[c.name], c.arguments)) is not None:
            results[i] = CallResult(c.id, c.name, c.arguments, "error", _error("invalid_arguments", why))
        elif getattr(tools[c.name], "needs_confirmation", False) and not (confirm and confirm(c)):
            results[i] = CallResult(c.id, c.name, c.arguments, "denied",
                                    _error("denied", f"{c.name} changes something outside the chat and the user "
                                                     "did not approve this call; it was not run"))
        else:
            todo.append(i)
    # One daemon thread per call, not a ThreadPoolExecutor: the executor's exit hook would join a hung tool's
    # thread and keep the process alive; a daemon thread is simply abandoned.
    def start(i):
        box: dict = {}
        done = threading.Event()

        def work():
            box["out"] = _run_one(tools[calls[i].name], calls[i].arguments)
            done.set()

        threading.Thread(target=work, name=f"tool-{calls[i].name}", daemon=True).start()
        return box, done, time.perf_counter()

    def finish(i, box, done, t0, deadline):
        c = calls[i]
        if done.wait(max(0.0, deadline - time.perf_counter())):
            status, out, secs = box["out"]
            results[i] = CallResult(c.id, c.name, c.arguments, status, out, secs)
        else:
            results[i] = CallResult(c.id, c.name, c.arguments, "timeout",
                                    _error("timeout", f"{c.name} did not finish within {timeout_s:g} s"),
                                    time.perf_counter() - t0)

    if parallel:
        running = {i: start(i) for i in todo}
        for i, (box, done, t0) in running.items():
            finish(i, box, done, t0, t0 + timeout_s)
    else:
        for i in todo:
            box, done, t0 = start(i)
            finish(i, box, done, t0, t0 + timeout_s)
    return results  # type: ignore[return-value]


# ================================================================ steps
@dataclass
class Rendered:
    turn: int
    rendering: Any  # toolkit.render.Rendering
    prompt_ids: list[int]  # rendering ids + forced prefix ids
    split: dict  # {"tools": n, "history": n, "new": n}
    forced_prefix: str = ""
    mode: str = ""  # "call" | "text" | "answer" | "free": how this turn is decoded (see RULE)
    rule: str = ""  # why, in words


@dataclass
class Generated:
    turn: int
    text: str
    generation: Generation
    constrained: bool

    @property
    def ids(self) -> list[int]:
        return self.generation.new_ids


@dataclass
class Parsed:
    turn: int
    content: str
    calls: list[ToolCall]


@dataclass
class Executed:
    turn: int
    results: list[CallResult]
    wall_s: float


@dataclass
class Answered:
    turn: int
    text: str


@dataclass
class Stopped:
    reason: str  # one of STOP_REASONS
    turn: int
    detail: str = ""


Step = Rendered | Generated | Parsed | Executed | Answered | Stopped


# ================================================================ the loop
def _call_key(c: ToolCall) -> str:
    return f"{c.name}:{json.dumps(c.arguments, sort_keys=True, ensure_ascii=False)}"


ANSWER_PREFIXES = {"zh": "根据工具结果，", "en": "Based on the tool results,"}
TOOL_CHOICES = ("auto", "required", "none")  # or a tool's name
# First tokens (stripped) with which the model opens a call in some spelling: the template's single <tool_call>
# token, the same tag spelled from pieces ("<"), bare JSON ("{"), a fenced block ("```").
CALL_OPENERS = ("<", "{", "```")
DEFAULTS = dict(tool_choice="auto", constrain="tag", max_turns=4, max_new_tokens=160, repeat_limit=1, max_calls=8,
                answer_prefix="auto", template="qwen2.5")
RULE = ("tool_choice applies to the turn that answers the user; after tool results the turn is 'auto' (as an "
        "agent SDK resets it, so a forced call cannot loop). Under 'auto' the model's own first token decides: "
        "one that opens a call (<tool_call>, or '<', '{', '```' — a call in another spelling) makes the turn a "
        "call under the tools' grammar; any other starts free text, in which a <tool_call> token still starts a "
        "well-formed call. The answer is started for the model (tools off) only after a tool result AND when its "
        "previous turn's calls were all repeats, or this is the last turn allowed.")


def _answer_prefix(option: str | None, messages: list[dict]) -> str:
    if option != "auto":
        return option or ""
    last_user = next((m.get("content") or "" for m in reversed(messages) if m["role"] == "user"), "")
    return ANSWER_PREFIXES["zh" if re.search(r"[\u4e00-\u9fff]", last_user) else "en"]


def timestamp_prefix(turn: int) -> str:
    """A wall-clock line for the start of the system prompt: what breaks prefix caching (§14.5.8)."""
    import datetime

    return f"Current time: {datetime.datetime.now().isoformat(timespec='microseconds')}\n"


def check_tool_choice(tool_choice, names) -> str:
    """``"auto"``/``"required"``/``"none"``, a tool's name, or the API's ``{"type": "function", "function":
    {"name": ...}}``; returns the mode or the name. Raises ``ValueError`` (one line) otherwise."""
    if isinstance(tool_choice, dict):
        tool_choice = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
    if tool_choice in TOOL_CHOICES:
        return tool_choice
    if isinstance(tool_choice, str) and tool_choice in names:
        return tool_choice
    raise ValueError(f"tool_choice must be one of {list(TOOL_CHOICES)} or a mounted tool's name "
                     f"{sorted(names)}, got {tool_choice!r}")


def _peek(backend, prompt, temperature, seed) -> Generation:
    """The model's own next token (no mask). Backends may offer ``peek``; otherwise a one-token generate."""
    fn = getattr(backend, "peek", None)
    if fn is not None:
        return fn(prompt, temperature=temperature, seed=seed)
    return backend.generate(prompt, max_new_tokens=1, stop_ids=set(), temperature=temperature, seed=seed)


def loop(backend, tokenizer, messages: list[dict], tools: Mapping[str, Any], *, template: str = "qwen2.5",
         tool_choice="auto", constrain: str = "tag", max_turns: int = 4, max_new_tokens: int = 96,
         token_budget: int = 50_000, repeat_limit: int = 1, confirm: Callable | None = None,
         tool_timeout_s: float = 5.0, parallel: bool = True, grammar=None, max_calls: int = 8,
         answer_prefix: str | None = "auto", bound_strings: int | None = None,
         system_prefix: Callable[[int], str] | None = None, temperature: float = 0.0,
         seed: int = 0) -> Iterator[Step]:
    """Run the host loop; yield steps. ``messages`` is extended in place with the assistant and tool messages.

    ``tools`` maps name -> any object with ``name``, ``schema``, ``needs_confirmation`` and ``call(args)``
    (``toolkit.tools.Tool``, or an MCP adapter's tools). ``tool_choice``: see :data:`RULE` (printed in each
    ``Rendered.rule``). ``constrain="tag"`` decodes under the tool-choice grammars (``toolkit.constrain``);
    ``"none"`` decodes freely (the model's raw habits). ``template``: ``"qwen2.5"``, ``"qwen3"`` (the kit's) or
    ``"native"`` (the tokenizer's own). ``system_prefix(turn)`` is prepended to the system prompt at render time
    only (e.g. :func:`timestamp_prefix`). ``grammar`` overrides the grammar of call turns; ``bound_strings``
    caps every string in the grammars (a random-weight stand-in needs it to finish). ``max_calls`` caps the
    calls one turn may run (the rest get an error result); ``repeat_limit`` how often the same call may run in
    the whole conversation (later ones are not run; they get a ``repeated_call`` note and the first one's result).
    """
    from .render import render

    if constrain not in ("none", "tag"):
        raise ValueError(f"constrain must be 'none' or 'tag', got {constrain!r}")
    choice = check_tool_choice(tool_choice, tools)
    schemas = [_openai_schema(t) for t in tools.values()]
    stop_ids = {IM_END_ID}
    grammars: dict = {}

    def grammar_for(kind: str):  # "auto" | "required" | "none" | a tool's name; compiled once per run
        if constrain != "tag" or (not tools and kind != "none"):
            return None
        if kind not in grammars:
            if grammar is not None and kind not in ("auto", "none"):
                grammars[kind] = grammar
            else:
                from .constrain import bounded, compile_tool_choice

                chosen = [s for s in schemas if kind in ("auto", "required") or s["function"]["name"] == kind]
                if bound_strings:
                    chosen = [bounded(s, max_length=bound_strings) for s in chosen]
                grammars[kind] = compile_tool_choice(chosen, tokenizer, kind if kind in TOOL_CHOICES else "required",
                                                     vocab_width=getattr(backend, "vocab_width", None))
        return grammars[kind]

    counts: dict[str, str] = {}  # call key -> id of the first call that ran it
    earlier: dict[str, Any] = {}  # id of a call that ran -> its result
    seen: dict[str, int] = {}
    spent, prev_len, n_calls, nothing_new = 0, None, 0, False
    for turn in range(1, max_turns + 1):
        if spent >= token_budget:
            yield Stopped("token_budget", turn, f"{spent} tokens computed >= budget {token_budget}")
            return
        view = [dict(m) for m in messages]
        if system_prefix is not None:
            if view and view[0]["role"] == "system":
                view[0]["content"] = system_prefix(turn) + (view[0].get("content") or "")
            else:
                view.insert(0, {"role": "system", "content": system_prefix(turn).rstrip("\n")})
        rendering = render(view, schemas or None, template=template, tokenizer=tokenizer)
        after_tools = bool(messages) and messages[-1]["role"] == "tool"
        forced, peeked = "", None
        if after_tools and (nothing_new or turn == max_turns):
            kind, mode = "none", "answer"
            forced = _answer_prefix(answer_prefix, messages)
            why = ("the previous turn only repeated calls" if nothing_new else f"last turn allowed ({max_turns})") + \
                  (f": tools off, answer started with {forced!r}" if forced else ": tools off")
        elif choice == "none" or not tools:
            kind, mode, why = "none", "text", "tool_choice 'none': the <tool_call> token is masked out"
        elif choice != "auto" and not after_tools:
            kind, mode, why = choice, "call", f"tool_choice {choice!r}: the turn must start with a call"
        elif constrain != "tag":
            kind, mode, why = "auto", "free", "unconstrained: the model writes whatever it writes"
        else:
            peeked = _peek(backend, list(rendering.ids), temperature, seed + turn)
            first = peeked.new_ids[0] if peeked.new_ids else IM_END_ID
            text0 = tokenizer.decode([first], skip_special_tokens=False).lstrip()
            opens = first == TOOL_CALL_TOKEN_ID or text0.startswith(CALL_OPENERS)
            kind, mode = ("required", "call") if opens else ("auto", "text")
            why = (f"'auto'{' after tool results' if after_tools else ''}: the model's first token {text0!r} "
                   + ("opens a call: decoded under the tools' grammar" if opens else
                      "starts text: free text, a <tool_call> token would start a well-formed call"))
        prompt = list(rendering.ids) + (tokenizer.encode(forced, add_special_tokens=False) if forced else [])
        n_tools = rendering.counts.get("tools", 0)
        new = len(prompt) - n_tools if prev_len is None else max(0, min(len(prompt) - prev_len, len(prompt)))
        split = {"tools": n_tools, "history": max(0, len(prompt) - n_tools - new), "new": new}
        prev_len = len(prompt)
        yield Rendered(turn, rendering, prompt, split, forced, mode, why)

        g_used = grammar_for(kind) if mode != "free" else None
        mask = None
        if g_used is not None:
            from .constrain import GrammarMask

            mask = GrammarMask(g_used)
        budget_left = max(1, token_budget - spent - len(prompt))
        g = backend.generate(prompt, max_new_tokens=min(max_new_tokens, budget_left), stop_ids=stop_ids,
                             mask=mask, temperature=temperature, seed=seed + turn)
        if peeked is not None:  # the peek prefilled the prompt; account for it in this turn's numbers
            g = Generation(g.new_ids, peeked.reused, peeked.prefilled, peeked.prefill_s + g.prefill_s,
                           peeked.decode_s + g.decode_s, g.stopped_by)
        spent += g.prefilled + len(g.new_ids)
        body = g.new_ids[:-1] if g.new_ids and g.new_ids[-1] in stop_ids else g.new_ids
        text = forced + tokenizer.decode(body, skip_special_tokens=False)
        yield Generated(turn, text, g, mask is not None)

        content, calls = parse_tool_calls(text)
        for c in calls:  # ids unique over the whole conversation, as an API's would be
            n_calls += 1
            c.id = f"call_{n_calls}"
        yield Parsed(turn, content, calls)
        if not calls:
            messages.append({"role": "assistant", "content": text})
            yield Answered(turn, text)
            if g.stopped_by == "length":
                yield Stopped("max_new_tokens", turn, f"answer cut at {len(g.new_ids)} new tokens")
            else:
                yield Stopped("answered", turn)
            return
        # The repeat guard, per call, within the turn and across turns; and the per-turn cap.
        held: dict[int, CallResult] = {}
        for i, c in enumerate(calls):
            if i >= max_calls:
                held[i] = CallResult(c.id, c.name, c.arguments, "skipped", _error(
                    "too_many_calls", f"only {max_calls} calls run per turn; this one (#{i + 1}) was not run"))
            elif c.ok:
                key = _call_key(c)
                seen[key] = seen.get(key, 0) + 1
                if seen[key] > repeat_limit:
                    held[i] = CallResult(c.id, c.name, c.arguments, "repeated", key)  # filled in below
                else:
                    counts.setdefault(key, c.id)
        # Well-formed calls go into history the API way (the template re-serialises them: the prefix may
        # change); if any block was malformed, keep the raw text so the model sees exactly what it wrote.
        if all(c.ok for c in calls):
            messages.append({"role": "assistant", "content": content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls]})
        else:
            messages.append({"role": "assistant", "content": text})
        t0 = time.perf_counter()
        fresh = [c for i, c in enumerate(calls) if i not in held]
        ran = iter(execute(fresh, tools, confirm=confirm, timeout_s=tool_timeout_s, parallel=parallel))
        results = [held[i] if i in held else next(ran) for i in range(len(calls))]
        for r in results:
            if r.status == "ok" and r.call_id in counts.values():
                earlier[r.call_id] = r.result
        for r in results:  # a repeat is told what the first call returned (a bare "error" confused the model)
            if r.status == "repeated":
                first = counts[r.result]
                r.result = {"repeated_call": f"same tool and arguments as {first}: not run again; its result "
                                            "was", "result": earlier.get(first, "(that call failed)")}
        nothing_new = all(r.status in ("repeated", "skipped") for r in results)
        yield Executed(turn, results, time.perf_counter() - t0)
        messages.extend(r.message() for r in results)
    yield Stopped("max_turns", max_turns, f"no answer after {max_turns} turn(s)")


# ================================================================ collecting
@dataclass
class Trace:
    """All steps of one run plus the per-turn accounting the trace widget plots."""

    model: str
    steps: list = field(default_factory=list)
    messages: list = field(default_factory=list)

    @property
    def stop(self) -> Stopped | None:
        return next((s for s in reversed(self.steps) if isinstance(s, Stopped)), None)

    @property
    def answer(self) -> str | None:
        return next((s.text for s in reversed(self.steps) if isinstance(s, Answered)), None)

    def of(self, kind) -> list:
        return [s for s in self.steps if isinstance(s, kind)]

    def turns(self) -> list[dict]:
        """One row per turn: prompt split, reused/prefilled, times, calls and their statuses."""
        rows: dict[int, dict] = {}
        for s in self.steps:
            r = rows.setdefault(getattr(s, "turn", 0), {"turn": getattr(s, "turn", 0)})
            if isinstance(s, Rendered):
                r.update(prompt=len(s.prompt_ids), **s.split, forced_prefix=s.forced_prefix, mode=s.mode)
            elif isinstance(s, Generated):
                g = s.generation
                r.update(reused=g.reused, prefilled=g.prefilled, generated=len(g.new_ids),
                         prefill_ms=round(g.prefill_s * 1e3, 2), decode_ms=round(g.decode_s * 1e3, 2),
                         stopped_by=g.stopped_by, constrained=s.constrained)
            elif isinstance(s, Parsed):
                r["calls"] = [c.name if c.ok else f"!{c.error['type']}" for c in s.calls]
            elif isinstance(s, Executed):
                r["statuses"] = [x.status for x in s.results]
                r["tool_ms"] = round(s.wall_s * 1e3, 2)
        return [r for r in rows.values() if "prompt" in r]

    def to_json(self) -> dict:
        out = []
        for s in self.steps:
            d = {"step": type(s).__name__}
            if isinstance(s, Rendered):
                d.update(turn=s.turn, prompt_tokens=len(s.prompt_ids), split=s.split, forced_prefix=s.forced_prefix,
                         mode=s.mode, rule=s.rule)
            elif isinstance(s, Generated):
                d.update(turn=s.turn, text=s.text, constrained=s.constrained,
                         **{k: v for k, v in asdict(s.generation).items() if k != "new_ids"},
                         new_tokens=len(s.generation.new_ids))
            elif isinstance(s, Parsed):
                d.update(turn=s.turn, content=s.content,
                         calls=[{"id": c.id, "name": c.name, "arguments": c.arguments, "error": c.error}
                                for c in s.calls])
            elif isinstance(s, Executed):
                d.update(turn=s.turn, wall_s=s.wall_s, results=[asdict(r) for r in s.results])
            else:
                d.update(asdict(s))
            out.append(d)
        return {"model": self.model, "steps": out, "turns": self.turns(), "answer": self.answer,
                "stop_reason": self.stop.reason if self.stop else None}


def run(backend, tokenizer, messages, tools, on_step: Callable | None = None, **kw) -> Trace:
    """Run :func:`loop` to the end and collect a :class:`Trace` (``on_step`` sees each step as it happens)."""
    trace = Trace(getattr(backend, "name", type(backend).__name__), messages=messages)
    for step in loop(backend, tokenizer, messages, tools, **kw):
        trace.steps.append(step)
        if on_step:
            on_step(step)
    return trace


# ================================================================ prefix stability of a template
def _stability_conversation() -> list[dict]:
    """Two user queries, each answered after one tool call; assistant turns carry reasoning (Qwen3 shows it)."""
    calc = {"id": "call_1", "type": "function", "function": {"name": "calculator",
                                                             "arguments": {"expression": "250 * 15%"}}}
    weather = {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "北京"}}}
    return [
        {"role": "user", "content": "250的15%是多少？"},
        {"role": "assistant", "content": "", "reasoning_content": "The user wants 15% of 250: use the calculator.",
         "tool_calls": [calc]},
        {"role": "tool", "tool_call_id": "call_1", "name": "calculator",
         "content": '{"expression": "250 * 15%", "result": 37.5}'},
        {"role": "assistant", "content": "250的15%是37.5。", "reasoning_content": "The tool returned 37.5."},
        {"role": "user", "content": "北京今天天气怎么样？"},
        {"role": "assistant", "content": "", "reasoning_content": "A weather question: call get_weather.",
         "tool_calls": [weather]},
        {"role": "tool", "tool_call_id": "call_2", "name": "get_weather",
         "content": '{"city": "北京", "temperature": 25, "condition": "sunny"}'},
        {"role": "assistant", "content": "北京今天晴，25°C。", "reasoning_content": "Sunny, 25 degrees."},
    ]


def prefix_stability(template: str, conversation: list[dict] | None = None, tools=None, tokenizer=None) -> list[dict]:
    """Per request of a multi-turn conversation: how much of what the previous request left in the cache (its
    prompt + the assistant's output) is still a prefix of the next prompt.

    Qwen3's template drops ``<think>`` blocks of assistant turns before the latest user query, so at a new query
    the history is rewritten and the cache is only good up to the first rewritten turn; Qwen2.5 never rewrites.
    """
    from .render import render, shared_prefix
    from .tools import schemas

    conv = conversation or _stability_conversation()
    tools = schemas(["calculator", "get_weather"]) if tools is None else tools
    asks = [i for i, m in enumerate(conv) if m["role"] == "assistant"]
    rows = []
    for n, (i, j) in enumerate(zip(asks, asks[1:]), 1):
        prompt = render(conv[:i], tools, template, tokenizer=tokenizer).ids
        done = render(conv[:i + 1], tools, template, add_generation_prompt=False, tokenizer=tokenizer).ids
        cached = done[:-1]  # generation stopped at <|im_end|>; the template's trailing newline was never computed
        nxt = render(conv[:j], tools, template, tokenizer=tokenizer).ids
        shared = shared_prefix(cached, nxt)
        rows.append(dict(template=template, request=n + 1, after=conv[j - 1]["role"], cached=len(cached),
                         next_prompt=len(nxt), shared=shared, recompute=len(nxt) - shared,
                         kept=round(shared / len(cached), 3), prompt_was_prefix=shared_prefix(prompt, done) == len(prompt)))
    return rows


# ================================================================ examples + CLI
EXAMPLES = {
    "calculator": dict(messages=[{"role": "system", "content": "你是一个计算助手。你可以调用外部工具。"},
                                 {"role": "user", "content": "250的15%是多少？"}],
                       tools=["calculator"]),
    "weather": dict(messages=[{"role": "user", "content": "今天北京天气怎么样？"}], tools=["get_weather", "calculator"]),
    "two_cities": dict(messages=[{"role": "user", "content": "What is the weather in Paris and in Tokyo today?"}],
                       tools=["get_weather"]),
}
MAX_QUESTION_CHARS = 4000


def example(name: str) -> dict:
    """A fresh copy of one of :data:`EXAMPLES` with its tools resolved from ``toolkit.tools.TOOLS``."""
    from .tools import TOOLS

    if name not in EXAMPLES:
        raise ValueError(f"unknown example {name!r}; choose one of {sorted(EXAMPLES)}")
    ex = EXAMPLES[name]
    return dict(messages=[dict(m) for m in ex["messages"]], tools={n: TOOLS[n] for n in ex["tools"]})


def pick_tools(names=None) -> dict:
    """``toolkit.tools.TOOLS`` narrowed to ``names`` (a list or "a,b"; None: all four). ValueError names the
    unknown ones."""
    from .tools import TOOLS

    if names is None:
        return dict(TOOLS)
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in names if n not in TOOLS]
    if unknown or not names:
        raise ValueError(f"unknown tool(s) {unknown or names!r}; known: {', '.join(TOOLS)}")
    return {n: TOOLS[n] for n in names}


def template_for(loaded) -> str:
    """The kit template matching a ``toolkit.models.Loaded`` (Qwen2-architecture models use Qwen2.5's)."""
    mt = getattr(getattr(loaded.model, "config", None), "model_type", "")
    return "qwen3" if mt == "qwen3" else "qwen2.5"


def settings_for(loaded, **kw) -> dict:
    """The loop settings a run on ``loaded`` uses: :data:`DEFAULTS`, the model's template, and for a random-weight
    stand-in 48 new tokens per turn, strings bounded to 8 characters (otherwise it never closes one) and a call
    required on the first turn (its first token is noise: under "auto" it would show no round trip at all)."""
    out = dict(DEFAULTS, template=template_for(loaded))
    if not loaded.semantic:
        out.update(max_new_tokens=48, bound_strings=8, tool_choice="required")
    out.update(kw)
    return out


def ask(question: str | list[dict], loaded, *, tools=None, reuse: bool = True, on_step: Callable | None = None,
        **kw) -> Trace:
    """Run the loop on a question (or a message list) with the named tools (default: all four demo tools) and
    :func:`settings_for`'s defaults; keyword arguments override them."""
    messages = [{"role": "user", "content": question}] if isinstance(question, str) else question
    mounted = tools if isinstance(tools, Mapping) else pick_tools(tools)
    backend = HFBackend.from_loaded(loaded, reuse=reuse)
    return run(backend, loaded.tokenizer, messages, mounted, on_step=on_step, **settings_for(loaded, **kw))


def run_example(name: str, loaded, *, reuse: bool = True, **kw) -> Trace:
    """Run one of :data:`EXAMPLES` with the same defaults as :func:`ask`."""
    ex = example(name)
    return ask(ex["messages"], loaded, tools=ex["tools"], reuse=reuse, **kw)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(limit: int):
    def conv(text):
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not 1 <= n <= limit:
            raise argparse.ArgumentTypeError(f"{n} is not between 1 and {limit}")
        return n
    return conv


def cli(argv: list[str]) -> int:
    from .tools import TOOLS

    p = _Parser(prog="python -m toolkit loop", description="Run the host loop on your question (or an example) "
                "with the kit's demo tools.", epilog=f"Rule printed in every trace: {RULE}")
    p.add_argument("question", nargs="?", help="what to ask (quote it); or use --example")
    p.add_argument("--example", choices=sorted(EXAMPLES), default=None)
    p.add_argument("--tools", default=None, help=f"comma-separated tools to mount (default all: {','.join(TOOLS)})")
    p.add_argument("--tool-choice", default="auto", help="auto | required | none | a mounted tool's name")
    p.add_argument("--model", default="auto", help="auto | stand-in | qwen2.5-coder-0.5b | folder (default auto)")
    p.add_argument("--constrain", choices=["tag", "none"], default="tag")
    p.add_argument("--answer-prefix", default=None, help="text that starts the answer when the rule says so; "
                   f"default 'auto' (by the question's language: {ANSWER_PREFIXES}); '' for none")
    p.add_argument("--no-reuse", action="store_true", help="prefill the whole prompt every turn")
    p.add_argument("--max-turns", type=_positive(20), default=DEFAULTS["max_turns"])
    p.add_argument("--max-new-tokens", type=_positive(4096), default=None, help="per turn (default 160; stand-in 48)")
    p.add_argument("--json", action="store_true", help="print the steps as JSON")
    a = p.parse_args(argv)
    # Everything a user typed is checked before a model loads.
    if (a.question is None) == (a.example is None):
        p.error("give a question or --example NAME (one of them)")
    if a.question is not None and not a.question.strip():
        p.error("the question is empty")
    if a.question is not None and len(a.question) > MAX_QUESTION_CHARS:
        p.error(f"the question is {len(a.question)} characters; at most {MAX_QUESTION_CHARS}")
    try:
        mounted = pick_tools(a.tools) if a.question is not None else example(a.example)["tools"]
        if a.example and a.tools:
            raise ValueError("--tools goes with a question; an example brings its own tools")
        choice = check_tool_choice(a.tool_choice, mounted)
    except ValueError as e:
        p.error(str(e))
    from .models import REAL_OFFLINE, STAND_IN

    if not (a.model in ("auto", REAL_OFFLINE) or a.model.startswith(STAND_IN) or os.path.exists(a.model)
            or re.fullmatch(r"[\w.-]+/[\w.-]+", a.model)):
        p.error(f"--model {a.model!r}: not auto, {STAND_IN}, {REAL_OFFLINE}, an existing folder/.gguf or a hub id")
    import torch

    from .models import load

    torch.manual_seed(0)
    try:
        loaded = load(a.model, quiet=a.json)
    except (OSError, ConnectionError, ValueError) as e:
        p.error(f"could not load model {a.model!r}: {str(e).splitlines()[0][:300]}")
    kw = dict(constrain=a.constrain, max_turns=a.max_turns, tool_choice=choice)
    if a.max_new_tokens:
        kw["max_new_tokens"] = a.max_new_tokens
    if a.answer_prefix is not None:
        kw["answer_prefix"] = a.answer_prefix or None
    messages = example(a.example)["messages"] if a.example else a.question
    settings = settings_for(loaded, **kw)
    trace = ask(messages, loaded, tools=mounted, reuse=not a.no_reuse, **kw)
    if a.json:
        out = trace.to_json()
        out.update(semantic=loaded.semantic, settings=settings, tools=list(mounted), rule=RULE)
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
        return 0
    print(f"model: {loaded.description}")
    if not loaded.semantic:
        print("NOTE: random weights — the calls below are well-formed but meaningless (mechanics only).")
    print(f"tools: {', '.join(mounted)} | settings: {settings}\nrule: {RULE}")
    for s in trace.steps:
        if isinstance(s, Rendered):
            print(f"\n-- turn {s.turn} [{s.mode}]: prompt {len(s.prompt_ids)} tokens {s.split}\n   why: {s.rule}")
        elif isinstance(s, Generated):
            g = s.generation
            print(f"   generated {len(g.new_ids)} tokens ({'constrained' if s.constrained else 'free'}), "
                  f"reused {g.reused}, prefilled {g.prefilled}, prefill {g.prefill_s * 1e3:.0f} ms, "
                  f"decode {g.decode_s * 1e3:.0f} ms: {s.text!r}")
        elif isinstance(s, Executed):
            for r in s.results:
                print(f"   {r.status:>8} {r.name}({json.dumps(r.arguments, ensure_ascii=False)}) -> "
                      f"{json.dumps(r.result, ensure_ascii=False)[:300]}")
        elif isinstance(s, Stopped):
            print(f"\nstopped: {s.reason} {s.detail}".rstrip())
    print(f"answer: {trace.answer}")
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
