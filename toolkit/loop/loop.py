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
- The body reads as the loop notebook 03 writes by hand, one named stage per function: :func:`decide_turn` (render,
  and which grammar decodes the turn, and why), :func:`generate` (the backend decodes, the peek's numbers added),
  :func:`parse_tool_calls`, :meth:`RepeatGuard.check` (guard the calls: repeats and the per-turn cap),
  :func:`execute_calls` and :func:`feed_back` (the call and one ``role="tool"`` message per result).
- The options are one :class:`toolkit.settings.LoopConfig`; ``LoopConfig.for_model(loaded)`` is what
  ``toolkit.loop.examples.ask``/``run_example`` and ``python -m toolkit loop`` use.

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
- Batching, history compression (§14.5.8). Streaming is a view (``on_event``: ``toolkit.loop.stream``); calls run
  after their turn ends, from the one-shot parse, which the streamed events' calls equal.

The backend protocol and ``Generation`` are in ``toolkit.backends.base``; the options in
``toolkit.settings.LoopConfig``.
"""

from __future__ import annotations

import datetime
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolkit.backends.base import Generation, context_length, name_of, vocab_width
from toolkit.grammar.budget import call_allowance
from toolkit.grammar.compile import bounded, compile_tool_choice
from toolkit.grammar.mask import GrammarMask
from toolkit.loop.execute import CallResult, error_result, execute
from toolkit.loop.gate import CALL_OPENERS, FirstTokenGate
from toolkit.loop.steps import Answered, Executed, Generated, Parsed, Rendered, Step, Stopped, Trace
from toolkit.loop.stream import TurnStream
from toolkit.loop.think import split_think, think_first
from toolkit.parse import ToolCall, parse_tool_calls
from toolkit.qwen import IM_END_ID, STOP_IDS
from toolkit.render import render
from toolkit.schema import openai_schema
from toolkit.settings import LoopConfig

__all__ = ["LoopConfig", "loop", "run"]  # LoopConfig lives in toolkit.settings; importable from here as before

ANSWER_PREFIXES = {"zh": "根据工具结果，", "en": "Based on the tool results,"}
TOOL_CHOICES = ("auto", "required", "none")  # or a tool's name
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


# ================================================================ guard the calls
def call_key(name, arguments) -> str:
    """What makes two calls the same call: the tool and its arguments (key order ignored)."""
    return f"{name}:{json.dumps(arguments, sort_keys=True, ensure_ascii=False)}"


@dataclass
class RepeatGuard:
    """The repeat guard over the whole conversation: ``made`` counts each call (:func:`call_key`), ``first_id``
    is the id of the first call that ran it, ``results`` that call's result (by call id)."""

    limit: int
    made: dict[str, int] = field(default_factory=dict)
    first_id: dict[str, str] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)

    def seed(self, messages: list[dict]) -> None:
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
                key = call_key(f.get("name"), args)
                self.made[key] = self.made.get(key, 0) + 1
                if key not in self.first_id and tc.get("id") in replies:
                    self.first_id[key] = tc["id"]
                    try:
                        self.results[tc["id"]] = json.loads(replies[tc["id"]])
                    except (TypeError, ValueError):
                        self.results[tc["id"]] = replies[tc["id"]]

    def check(self, calls: list[ToolCall], max_calls: int) -> dict[int, CallResult]:
        """The calls of one turn that do not run, by position: past the per-turn cap, or repeated too often."""
        held: dict[int, CallResult] = {}
        for i, c in enumerate(calls):
            if i >= max_calls:
                note = error_result(
                    "too_many_calls", f"only {max_calls} calls run per turn; this one (#{i + 1}) was not run"
                )
                held[i] = CallResult(c.id, c.name, c.arguments, "skipped", note)
            elif c.ok:
                key = call_key(c.name, c.arguments)
                self.made[key] = self.made.get(key, 0) + 1
                if self.made[key] > self.limit:
                    held[i] = CallResult(c.id, c.name, c.arguments, "repeated", key)  # filled in by record()
                else:
                    self.first_id.setdefault(key, c.id)
        return held

    def record(self, results: list[CallResult]) -> None:
        """Keep the first runs' results; tell each repeat what its first call returned (a bare "error" confused
        the model)."""
        firsts = set(self.first_id.values())
        for r in results:
            if r.status == "ok" and r.call_id in firsts:
                self.results[r.call_id] = r.result
        for r in results:
            if r.status == "repeated":
                first = self.first_id[r.result]
                r.result = {
                    "repeated_call": f"same tool and arguments as {first}: not run again; its result was",
                    "result": self.results.get(first, "(that call failed)"),
                }


# ================================================================ the loop's stages
@dataclass
class TurnPlan:
    """How a turn is decoded: the grammar ``kind``, the ``mode`` the trace shows, ``why``, the answer prefix the host
    writes for the model (``forced``) and the peeked first token (``peeked``, the call gate of ``"auto"``)."""

    kind: str
    mode: str
    why: str
    forced: str = ""
    peeked: Generation | None = None
    budget: int = 0  # new tokens this turn may take (Host.turn_budget)
    thought: list[int] = field(default_factory=list)  # a thinking model's <think> block, decoded first (think.py)


class Host:
    """One run of the loop: its settings, the conversation, the compiled grammars, the guard and the counters."""

    def __init__(self, backend, tokenizer, messages: list[dict], tools: Mapping[str, Any], cfg: LoopConfig):
        if cfg.constrain not in ("none", "tag"):
            raise ValueError(f"constrain must be 'none' or 'tag', got {cfg.constrain!r}")
        self.backend, self.tokenizer, self.messages, self.tools, self.cfg = backend, tokenizer, messages, tools, cfg
        self.choice = check_tool_choice(cfg.tool_choice, tools)
        self.schemas = [openai_schema(t) for t in tools.values()]
        self.grammars: dict = {}
        self.per_call: dict = {}  # grammar kind -> the most new tokens one call under it can take (None: unbounded)
        self.guard = RepeatGuard(cfg.repeat_limit)
        self.guard.seed(messages)  # the guard covers the whole conversation, not this call only
        self.spent, self.prev_len, self.n_calls, self.nothing_new = 0, None, 0, False

    def grammar_for(self, kind: str):
        """The grammar of a turn kind ("auto" | "required" | "none" | "answer" | a tool's name), compiled once."""
        cfg = self.cfg
        if cfg.constrain != "tag" or (not self.tools and kind not in ("none", "answer")):
            return None
        if kind not in self.grammars:
            if cfg.grammar is not None and kind not in ("auto", "none", "answer"):
                self.grammars[kind] = cfg.grammar
            else:
                chosen = [s for s in self.schemas if kind in ("auto", "required") or s["function"]["name"] == kind]
                if cfg.bound_strings:
                    chosen = [bounded(s, max_length=cfg.bound_strings) for s in chosen]
                if kind not in ("none", "answer"):  # strings bounded so that one call fits the turn's budget
                    chosen, self.per_call[kind] = call_allowance(chosen, cfg.max_new_tokens)
                self.grammars[kind] = compile_tool_choice(
                    chosen,
                    self.tokenizer,
                    kind if kind in TOOL_CHOICES + ("answer",) else "required",
                    vocab_width=vocab_width(self.backend),
                )
        return self.grammars[kind]

    def turn_budget(self, plan: TurnPlan, prompt_len: int) -> tuple[int, str]:
        """New tokens this turn may take, and a note when that is more than ``max_new_tokens``: a turn decoded under
        a call grammar gets room for ``max_calls`` calls of the longest call its grammar allows
        (``toolkit.grammar.budget.call_allowance``), so that no call it may run is cut; capped by the token budget
        left and the model's context window."""
        cfg, ctx = self.cfg, context_length(self.backend)
        left = max(1, min(cfg.token_budget - self.spent, ctx or cfg.token_budget) - prompt_len)
        per_call = self.grammar_for(plan.kind) and self.per_call.get(plan.kind) if plan.mode == "call" else None
        if cfg.grammar is not None or per_call is None or cfg.max_calls * per_call <= cfg.max_new_tokens:
            return min(cfg.max_new_tokens, left), ""
        n = min(cfg.max_calls * per_call, left)
        return n, f"; room for {cfg.max_calls} call(s) of at most {per_call} tokens: up to {n} new tokens" + (
            f" (max_new_tokens {cfg.max_new_tokens} is for text)"
        )

    def render(self, turn: int):
        view = [dict(m) for m in self.messages]
        if self.cfg.system_prefix is not None:
            if view and view[0]["role"] == "system":
                view[0]["content"] = self.cfg.system_prefix(turn) + (view[0].get("content") or "")
            else:
                view.insert(0, {"role": "system", "content": self.cfg.system_prefix(turn).rstrip("\n")})
        think = {} if self.cfg.thinking is None else {"enable_thinking": self.cfg.thinking}
        return render(view, self.schemas or None, template=self.cfg.template, tokenizer=self.tokenizer, **think)

    def decide_turn(self, turn: int) -> tuple[TurnPlan, Rendered]:
        """Stage 1: render the conversation and decide how this turn decodes (:data:`RULE`), and why."""
        cfg, rendering = self.cfg, self.render(turn)
        after_tools = bool(self.messages) and self.messages[-1]["role"] == "tool"
        if after_tools and (self.nothing_new or turn == cfg.max_turns):
            forced = _answer_prefix(cfg.answer_prefix, self.messages)
            why = (
                "the previous turn only repeated calls" if self.nothing_new else f"last turn allowed ({cfg.max_turns})"
            ) + (f": tools off, answer started with {forced!r}" if forced else ": tools off")
            plan = TurnPlan("answer", "answer", why, forced)
        elif self.choice == "none" or not self.tools:
            plan = TurnPlan("none", "text", "tool_choice 'none': the <tool_call> token is masked out")
        elif self.choice != "auto" and not after_tools:
            plan = TurnPlan(self.choice, "call", f"tool_choice {self.choice!r}: the turn must start with a call")
        elif cfg.constrain != "tag":
            plan = TurnPlan("auto", "free", "unconstrained: the model writes whatever it writes")
        else:
            thought, peeked = think_first(self.backend, self.tokenizer, list(rendering.ids), cfg, turn)  # Qwen3
            first = peeked.new_ids[0] if peeked.new_ids else IM_END_ID
            gate = FirstTokenGate(self.tokenizer, CALL_OPENERS)  # the model's own first token decides
            text0, opens = gate.text(first), gate.opens(first)
            why = f"'auto'{' after tool results' if after_tools else ''}: the model's first token {text0!r} " + (
                "opens a call: decoded under the tools' grammar"
                if opens
                else "starts text: free text, a <tool_call> token would start a well-formed call"
            )
            plan = TurnPlan("required" if opens else "auto", "call" if opens else "text", why, "", peeked, 0, thought)
        forced_ids = self.tokenizer.encode(plan.forced, add_special_tokens=False) if plan.forced else []
        prompt = list(rendering.ids) + plan.thought + forced_ids
        plan.budget, note = self.turn_budget(plan, len(prompt))
        plan.why += note
        n_tools = rendering.counts.get("tools", 0)
        new = len(prompt) - n_tools if self.prev_len is None else max(0, min(len(prompt) - self.prev_len, len(prompt)))
        split = {"tools": n_tools, "history": max(0, len(prompt) - n_tools - new), "new": new}
        self.prev_len = len(prompt)
        return plan, Rendered(turn, rendering, prompt, split, plan.forced, plan.mode, plan.why)

    def generate(self, turn: int, plan: TurnPlan, prompt: list[int]) -> Generated:
        """Stage 2: the backend decodes the turn (under its grammar, if any); the peek's prefill is counted here."""
        cfg = self.cfg
        g_used = self.grammar_for(plan.kind) if plan.mode != "free" else None
        mask = GrammarMask(g_used) if g_used is not None else None
        thought = self.tokenizer.decode(plan.thought, skip_special_tokens=False) if plan.thought else ""
        stream, live = TurnStream.open(self.tokenizer, turn, cfg.on_event, self.backend, thought + plan.forced)
        g = self.backend.generate(
            prompt,
            max_new_tokens=plan.budget or self.turn_budget(plan, len(prompt))[0],
            stop_ids=set(STOP_IDS),
            mask=mask,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            seed=cfg.seed + turn,
            **live,
        )
        p = plan.peeked
        if p is not None:  # the peek prefilled the prompt; account for it in this turn's numbers
            g = Generation(
                g.new_ids, p.reused, p.prefilled, p.prefill_s + g.prefill_s, p.decode_s + g.decode_s, g.stopped_by
            )
        self.spent += g.prefilled + len(g.new_ids)
        body = g.new_ids[:-1] if g.new_ids and g.new_ids[-1] in STOP_IDS else g.new_ids
        text = thought + plan.forced + self.tokenizer.decode(body, skip_special_tokens=False)
        if stream is not None:
            stream.end(body, text)
        return Generated(turn, text, g, mask is not None)

    def parse(self, turn: int, text: str) -> Parsed:
        """Stage 3: cut the ``<tool_call>`` blocks out of the text; ids unique over the conversation, as an API's."""
        content, calls = parse_tool_calls(split_think(text)[1])  # a call written while thinking is not a call
        for c in calls:
            self.n_calls += 1
            c.id = f"call_{self.n_calls}"
        return Parsed(turn, content, calls)

    def execute_calls(self, turn: int, parsed: Parsed, text: str, held: dict[int, CallResult]) -> Executed:
        """Stage 5: the calls go into the history, and the ones the guard let through run (in parallel)."""
        calls = parsed.calls
        # Well-formed calls go into history the API way (the template re-serialises them: the prefix may
        # change); if any block was malformed, keep the raw text so the model sees exactly what it wrote.
        if all(c.ok for c in calls):
            tool_calls = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
            msg = {"role": "assistant", "content": parsed.content, "tool_calls": tool_calls}
            thought = split_think(text)[0].strip().removeprefix("<think>").removesuffix("</think>").strip()
            self.messages.append(dict(msg, reasoning_content=thought) if thought else msg)
        else:
            self.messages.append({"role": "assistant", "content": text})
        t0 = time.perf_counter()
        fresh = [c for i, c in enumerate(calls) if i not in held]
        cfg = self.cfg
        ran = iter(execute(fresh, self.tools, confirm=cfg.confirm, timeout_s=cfg.tool_timeout_s, parallel=cfg.parallel))
        results = [held[i] if i in held else next(ran) for i in range(len(calls))]
        self.guard.record(results)
        self.nothing_new = all(r.status in ("repeated", "skipped") for r in results)
        return Executed(turn, results, time.perf_counter() - t0)

    def feed_back(self, executed: Executed) -> None:
        """Stage 6: one ``role="tool"`` message per result. A turn of only repeats leaves the history (its results
        are already there), so the answer turn reads the question and the real results, not a repeat note."""
        if self.nothing_new:
            self.messages.pop()
        else:
            self.messages.extend(r.message() for r in executed.results)


def loop(
    backend, tokenizer, messages: list[dict], tools: Mapping[str, Any], config: LoopConfig | None = None, **overrides
) -> Iterator[Step]:
    """Run the host loop; yield steps. ``messages`` is extended in place with the assistant and tool messages.

    ``tools`` maps name -> any object with ``name``, ``schema``, ``needs_confirmation`` and ``call(args)``
    (``toolkit.tools.Tool``, or an MCP adapter's tools). The options are a :class:`LoopConfig` (``config``) and/or
    keyword arguments that override its fields (``loop(b, tok, msgs, tools, max_turns=2)`` works as before).
    Unknown option names raise ``TypeError``.
    """
    cfg = (config or LoopConfig()).but("loop(**overrides)", **overrides)
    host = Host(backend, tokenizer, messages, tools, cfg)
    for turn in range(1, cfg.max_turns + 1):
        if host.spent >= cfg.token_budget:
            yield Stopped("token_budget", turn, f"{host.spent} tokens computed >= budget {cfg.token_budget}")
            return
        plan, rendered = host.decide_turn(turn)  # 1 decide the turn
        yield rendered
        generated = host.generate(turn, plan, rendered.prompt_ids)  # 2 generate
        yield generated
        parsed = host.parse(turn, generated.text)  # 3 parse
        yield parsed
        if not parsed.calls:  # no call: this is the answer
            messages.append({"role": "assistant", "content": generated.text})  # the template keeps or drops a thought
            yield Answered(turn, split_think(generated.text)[1])
            g = generated.generation
            if g.stopped_by == "length":
                yield Stopped("max_new_tokens", turn, f"answer cut at {len(g.new_ids)} new tokens")
            else:
                yield Stopped("answered", turn)
            return
        held = host.guard.check(parsed.calls, cfg.max_calls)  # 4 guard the calls
        executed = host.execute_calls(turn, parsed, generated.text, held)  # 5 execute
        yield executed
        host.feed_back(executed)  # 6 feed back
    yield Stopped("max_turns", cfg.max_turns, f"no answer after {cfg.max_turns} turn(s)")


def run(backend, tokenizer, messages, tools, on_step: Callable | None = None, **kw) -> Trace:
    """Run :func:`loop` to the end and collect a :class:`Trace` (``on_step`` sees each step as it happens)."""
    trace = Trace(name_of(backend), messages=messages)
    for step in loop(backend, tokenizer, messages, tools, **kw):
        trace.steps.append(step)
        if on_step:
            on_step(step)
    return trace
