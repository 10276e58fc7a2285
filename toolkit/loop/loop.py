"""The host's execute-and-feed-back loop, with the KV cache kept across turns (book §14.5.2 steps 3–6, §14.5.3,
§14.5.8; "Tool Use" §3.1).

What it does
- ``loop(...)`` is a generator of typed steps. Per turn: render the messages (``Rendered``), generate until
  ``<|im_end|>`` (or ``<|endoftext|>``: ``toolkit.qwen.STOP_IDS``) (``Generated``), cut out zero, one or several ``<tool_call>`` blocks (``Parsed``), validate the
  arguments with jsonschema, execute independent calls in parallel (one daemon thread each, per-call timeout)
  (``Executed``), append one ``role="tool"`` message per call and go again — until the model answers
  (``Answered``) or a guard stops it (``Stopped(reason)``, always the last step). ``run(...)`` collects a
  :class:`Trace`.
- Everything the *model* gets wrong becomes a structured error result the model sees on the next turn, never an
  exception: malformed JSON, an unclosed tag, an unknown tool, invalid arguments, a tool that raises or times
  out, a call the person did not approve (tools with ``needs_confirmation`` run only if ``confirm(call)`` says
  yes; the default denies). Guards: ``max_turns``, a token budget, calls per turn, repeated calls.
- It drives any backend of ``toolkit.backends`` (``HFBackend`` keeps one cache across turns and prefills only
  the tokens after the longest shared prefix; ``ScriptedBackend`` replays fixed texts for tests; ``Engine``).
- Per turn it records tokens reused vs prefilled and prefill/decode wall time, and splits the prompt into tool
  definitions / history / new tokens (``Rendered.split``).
- ``tool_choice`` as the chat APIs name it: ``"auto"`` (default: text or calls), ``"required"``, ``"none"``, or
  a tool's name; it binds the turn that answers the user, later turns are ``"auto"`` (:data:`RULE`, printed in
  every ``Rendered.rule``). With ``constrain="tag"`` (default) each turn decodes under
  ``toolkit.grammar.compile.compile_tool_choice``'s grammar; under ``"auto"`` the model's own first token decides
  call or text (a call spelled any way starts a grammar-checked ``<tool_call>``). Parallel calls: any number up
  to ``max_calls``, no slots. The repeat guard is per call, within and across turns (calls already in the
  ``messages`` passed in count too): a repeated call is not run
  and gets a ``repeated_call`` note with the first call's result. The answer is started for the model (``answer_prefix``, ``"auto"``: in the
  question's language) only after tool results on a turn after only-repeated calls or on the last turn allowed.
- :data:`DEFAULTS` are what ``toolkit.loop.examples.ask``/``run_example`` and ``python -m toolkit loop`` use.

What it leaves out
- Killing a timed-out tool: Python threads cannot be stopped, so a timed-out call is abandoned (its daemon
  thread finishes in the background, or dies with the process) and its result ignored.
- Reuse beyond the re-rendered text: the host keeps structured calls and the template writes them out again;
  where that text tokenizes differently from what the model produced (e.g. ``}}`` + ``
`` generated under a
  grammar vs ``}}
`` re-tokenized), the cache stops matching there, as it would on a server.
- Recovering calls a model writes without the tags (fenced or bare JSON): the host recognises only the
  template's ``<tool_call>`` format, as a real host does; the call gate only redirects a turn whose FIRST token
  opens such a call, a fence later in a text answer stays text. The gate costs one extra forward of the last
  prompt token per gated turn (the peek's prefill is cached; its numbers are added to the turn's).
- Streaming, batching several conversations, history compression (§14.5.8).

The backend protocol and ``Generation`` are in ``toolkit.backends.base``; the options in :class:`LoopConfig`.
"""

from __future__ import annotations

import datetime
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolkit.backends.base import Generation
from toolkit.grammar.compile import bounded, compile_tool_choice
from toolkit.grammar.mask import GrammarMask
from toolkit.loop.execute import CallResult, _error, execute
from toolkit.loop.gate import CALL_OPENERS, FirstTokenGate
from toolkit.loop.steps import Answered, Executed, Generated, Parsed, Rendered, Step, Stopped, Trace
from toolkit.parse import ToolCall, parse_tool_calls
from toolkit.qwen import IM_END_ID, STOP_IDS
from toolkit.render import render
from toolkit.schema import openai_schema


# ================================================================ the loop
def _call_key(c: ToolCall) -> str:
    return f"{c.name}:{json.dumps(c.arguments, sort_keys=True, ensure_ascii=False)}"


ANSWER_PREFIXES = {"zh": "根据工具结果，", "en": "Based on the tool results,"}


TOOL_CHOICES = ("auto", "required", "none")  # or a tool's name


DEFAULTS = dict(
    tool_choice="auto",
    constrain="tag",
    max_turns=4,
    max_new_tokens=160,
    repeat_limit=1,
    max_calls=8,
    answer_prefix="auto",
    template="qwen2.5",
)


RULE = (
    "tool_choice applies to the turn that answers the user; after tool results the turn is 'auto' (as an "
    "agent SDK resets it, so a forced call cannot loop). Under 'auto' the model's own first token decides: "
    "one that opens a call (<tool_call>, or '<', '{', '```' — a call in another spelling) makes the turn a "
    "call under the tools' grammar; any other starts free text, in which a <tool_call> token still starts a "
    "well-formed call. The answer is started for the model (tools off) only after a tool result AND when its "
    "previous turn's calls were all repeats (that turn stays in the trace, out of the history: its results "
    "are already there), or this is the last turn allowed."
)


def _answer_prefix(option: str | None, messages: list[dict]) -> str:
    if option != "auto":
        return option or ""
    last_user = next((m.get("content") or "" for m in reversed(messages) if m["role"] == "user"), "")
    return ANSWER_PREFIXES["zh" if re.search(r"[\u4e00-\u9fff]", last_user) else "en"]


def timestamp_prefix(turn: int) -> str:
    """A wall-clock line for the start of the system prompt: what breaks prefix caching (§14.5.8)."""
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
    raise ValueError(
        f"tool_choice must be one of {list(TOOL_CHOICES)} or a mounted tool's name {sorted(names)}, got {tool_choice!r}"
    )


def _peek(backend, prompt, temperature, seed, top_p=1.0) -> Generation:
    """The model's own next token (no mask). Backends may offer ``peek``; otherwise a one-token generate."""
    fn = getattr(backend, "peek", None)
    if fn is not None:
        return fn(prompt, temperature=temperature, top_p=top_p, seed=seed)
    return backend.generate(prompt, max_new_tokens=1, stop_ids=set(), temperature=temperature, top_p=top_p, seed=seed)


@dataclass(frozen=True)
class LoopConfig:
    """Every option of :func:`loop` with its default, in one place (``loop(..., config, **overrides)``).

    ``tool_choice``: see :data:`RULE`. ``constrain="tag"`` decodes under the tool-choice grammars
    (``toolkit.grammar``); ``"none"`` decodes freely. ``template``: ``"qwen2.5"``, ``"qwen3"`` (the kit's) or
    ``"native"`` (the tokenizer's own). ``grammar`` overrides the grammar of call turns; ``bound_strings`` caps
    every string in the grammars (a random-weight stand-in needs it to finish). ``max_calls`` caps the calls one
    turn may run; ``repeat_limit`` how often the same call may run in the whole conversation.
    ``system_prefix(turn)`` is prepended to the system prompt at render time only (e.g. :func:`timestamp_prefix`).
    ``temperature``/``top_p``/``seed`` go to the backend's one sampler (turn ``t`` draws with ``seed + t``).
    """

    template: str = "qwen2.5"
    tool_choice: Any = "auto"
    constrain: str = "tag"
    max_turns: int = 4
    max_new_tokens: int = 96
    token_budget: int = 50_000
    repeat_limit: int = 1
    confirm: Callable | None = None
    tool_timeout_s: float = 5.0
    parallel: bool = True
    grammar: Any = None
    max_calls: int = 8
    answer_prefix: str | None = "auto"
    bound_strings: int | None = None
    system_prefix: Callable[[int], str] | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0


def loop(
    backend, tokenizer, messages: list[dict], tools: Mapping[str, Any], config: LoopConfig | None = None, **overrides
) -> Iterator[Step]:
    """Run the host loop; yield steps. ``messages`` is extended in place with the assistant and tool messages.

    ``tools`` maps name -> any object with ``name``, ``schema``, ``needs_confirmation`` and ``call(args)``
    (``toolkit.tools.Tool``, or an MCP adapter's tools). The options are a :class:`LoopConfig` (``config``) and/or
    keyword arguments that override its fields (``loop(b, tok, msgs, tools, max_turns=2)`` works as before).
    Unknown option names raise ``TypeError``.
    """
    cfg = replace(config or LoopConfig(), **overrides)
    if cfg.constrain not in ("none", "tag"):
        raise ValueError(f"constrain must be 'none' or 'tag', got {cfg.constrain!r}")
    choice = check_tool_choice(cfg.tool_choice, tools)
    schemas = [openai_schema(t) for t in tools.values()]
    stop_ids = set(STOP_IDS)
    grammars: dict = {}

    def grammar_for(kind: str):  # "auto" | "required" | "none" | a tool's name; compiled once per run
        if cfg.constrain != "tag" or (not tools and kind not in ("none", "answer")):
            return None
        if kind not in grammars:
            if cfg.grammar is not None and kind not in ("auto", "none", "answer"):
                grammars[kind] = cfg.grammar
            else:
                chosen = [s for s in schemas if kind in ("auto", "required") or s["function"]["name"] == kind]
                if cfg.bound_strings:
                    chosen = [bounded(s, max_length=cfg.bound_strings) for s in chosen]
                grammars[kind] = compile_tool_choice(
                    chosen,
                    tokenizer,
                    kind if kind in TOOL_CHOICES + ("answer",) else "required",
                    vocab_width=getattr(backend, "vocab_width", None),
                )
        return grammars[kind]

    counts: dict[str, str] = {}  # call key -> id of the first call that ran it
    earlier: dict[str, Any] = {}  # id of a call that ran -> its result
    seen: dict[str, int] = {}
    _seed_guard(messages, counts, earlier, seen)  # the guard covers the whole conversation, not this call only
    spent, prev_len, n_calls, nothing_new = 0, None, 0, False
    for turn in range(1, cfg.max_turns + 1):
        if spent >= cfg.token_budget:
            yield Stopped("token_budget", turn, f"{spent} tokens computed >= budget {cfg.token_budget}")
            return
        view = [dict(m) for m in messages]
        if cfg.system_prefix is not None:
            if view and view[0]["role"] == "system":
                view[0]["content"] = cfg.system_prefix(turn) + (view[0].get("content") or "")
            else:
                view.insert(0, {"role": "system", "content": cfg.system_prefix(turn).rstrip("\n")})
        rendering = render(view, schemas or None, template=cfg.template, tokenizer=tokenizer)
        after_tools = bool(messages) and messages[-1]["role"] == "tool"
        forced, peeked = "", None
        if after_tools and (nothing_new or turn == cfg.max_turns):
            kind, mode = "answer", "answer"
            forced = _answer_prefix(cfg.answer_prefix, messages)
            why = (
                "the previous turn only repeated calls" if nothing_new else f"last turn allowed ({cfg.max_turns})"
            ) + (f": tools off, answer started with {forced!r}" if forced else ": tools off")
        elif choice == "none" or not tools:
            kind, mode, why = "none", "text", "tool_choice 'none': the <tool_call> token is masked out"
        elif choice != "auto" and not after_tools:
            kind, mode, why = choice, "call", f"tool_choice {choice!r}: the turn must start with a call"
        elif cfg.constrain != "tag":
            kind, mode, why = "auto", "free", "unconstrained: the model writes whatever it writes"
        else:
            peeked = _peek(backend, list(rendering.ids), cfg.temperature, cfg.seed + turn, cfg.top_p)
            first = peeked.new_ids[0] if peeked.new_ids else IM_END_ID
            gate = FirstTokenGate(tokenizer, CALL_OPENERS)  # the model's own first token decides
            text0, opens = gate.text(first), gate.opens(first)
            kind, mode = ("required", "call") if opens else ("auto", "text")
            why = f"'auto'{' after tool results' if after_tools else ''}: the model's first token {text0!r} " + (
                "opens a call: decoded under the tools' grammar"
                if opens
                else "starts text: free text, a <tool_call> token would start a well-formed call"
            )
        prompt = list(rendering.ids) + (tokenizer.encode(forced, add_special_tokens=False) if forced else [])
        n_tools = rendering.counts.get("tools", 0)
        new = len(prompt) - n_tools if prev_len is None else max(0, min(len(prompt) - prev_len, len(prompt)))
        split = {"tools": n_tools, "history": max(0, len(prompt) - n_tools - new), "new": new}
        prev_len = len(prompt)
        yield Rendered(turn, rendering, prompt, split, forced, mode, why)

        g_used = grammar_for(kind) if mode != "free" else None
        mask = None
        if g_used is not None:
            mask = GrammarMask(g_used)
        budget_left = max(1, cfg.token_budget - spent - len(prompt))
        g = backend.generate(
            prompt,
            max_new_tokens=min(cfg.max_new_tokens, budget_left),
            stop_ids=stop_ids,
            mask=mask,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=cfg.seed + turn,
        )
        if peeked is not None:  # the peek prefilled the prompt; account for it in this turn's numbers
            g = Generation(
                g.new_ids,
                peeked.reused,
                peeked.prefilled,
                peeked.prefill_s + g.prefill_s,
                peeked.decode_s + g.decode_s,
                g.stopped_by,
            )
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
            if i >= cfg.max_calls:
                held[i] = CallResult(
                    c.id,
                    c.name,
                    c.arguments,
                    "skipped",
                    _error(
                        "too_many_calls", f"only {cfg.max_calls} calls run per turn; this one (#{i + 1}) was not run"
                    ),
                )
            elif c.ok:
                key = _call_key(c)
                seen[key] = seen.get(key, 0) + 1
                if seen[key] > cfg.repeat_limit:
                    held[i] = CallResult(c.id, c.name, c.arguments, "repeated", key)  # filled in below
                else:
                    counts.setdefault(key, c.id)
        # Well-formed calls go into history the API way (the template re-serialises them: the prefix may
        # change); if any block was malformed, keep the raw text so the model sees exactly what it wrote.
        if all(c.ok for c in calls):
            messages.append(
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in calls
                    ],
                }
            )
        else:
            messages.append({"role": "assistant", "content": text})
        t0 = time.perf_counter()
        fresh = [c for i, c in enumerate(calls) if i not in held]
        ran = iter(execute(fresh, tools, confirm=cfg.confirm, timeout_s=cfg.tool_timeout_s, parallel=cfg.parallel))
        results = [held[i] if i in held else next(ran) for i in range(len(calls))]
        for r in results:
            if r.status == "ok" and r.call_id in counts.values():
                earlier[r.call_id] = r.result
        for r in results:  # a repeat is told what the first call returned (a bare "error" confused the model)
            if r.status == "repeated":
                first = counts[r.result]
                r.result = {
                    "repeated_call": f"same tool and arguments as {first}: not run again; its result was",
                    "result": earlier.get(first, "(that call failed)"),
                }
        nothing_new = all(r.status in ("repeated", "skipped") for r in results)
        yield Executed(turn, results, time.perf_counter() - t0)
        if nothing_new:
            # Only repeats: their results are already in the conversation. The turn stays in the trace but not in
            # the history, so the answer turn reads the question and the real results, not a repeat note.
            messages.pop()
        else:
            messages.extend(r.message() for r in results)
    yield Stopped("max_turns", cfg.max_turns, f"no answer after {cfg.max_turns} turn(s)")


def _seed_guard(messages: list[dict], counts: dict, earlier: dict, seen: dict) -> None:
    """Count the calls already in ``messages`` (e.g. from an earlier ``loop`` on the same history, as the agent
    patterns run one turn at a time), so ``repeat_limit`` holds over the whole conversation."""
    replies = {m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"}
    for m in messages:
        for tc in m.get("tool_calls") or []:
            f = tc.get("function") or {}
            args = f.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    continue
            key = f"{f.get('name')}:{json.dumps(args, sort_keys=True, ensure_ascii=False)}"
            seen[key] = seen.get(key, 0) + 1
            if key not in counts and tc.get("id") in replies:
                counts[key] = tc["id"]
                try:
                    earlier[tc["id"]] = json.loads(replies[tc["id"]])
                except (TypeError, ValueError):
                    earlier[tc["id"]] = replies[tc["id"]]


def run(backend, tokenizer, messages, tools, on_step: Callable | None = None, **kw) -> Trace:
    """Run :func:`loop` to the end and collect a :class:`Trace` (``on_step`` sees each step as it happens)."""
    trace = Trace(getattr(backend, "name", type(backend).__name__), messages=messages)
    for step in loop(backend, tokenizer, messages, tools, **kw):
        trace.steps.append(step)
        if on_step:
            on_step(step)
    return trace
