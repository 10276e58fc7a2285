"""Chat mode: ``/v1/chat/completions`` with ``tools=``: the server renders and parses (§14.5.8).

What it does
- :class:`ChatBackend` reads the conversation the host loop extends in place (``messages``), so it drives the same
  loop (``toolkit.loop.loop.run``); the text it hands the loop is the server's content plus the server's parsed
  calls in the template's spelling. The raw text never reaches the host in this mode: :func:`side_by_side` runs one
  greedy turn in both modes, the raw text (tokens mode) with the kit's parse beside the server's parsed calls.
  A server call whose arguments are not a JSON object is passed on as written, so the kit's parser turns it into a
  structured error the model sees. The server's prompt count is checked against the kit's rendering.
- ``tool_choice`` (``"auto"`` | ``"required"`` | ``"none"`` | a tool's name) goes to the server as the chat API
  spells it; None leaves the server's default. Measured on vLLM (hermes parser): ``"required"`` and a name return
  ``tool_calls`` (the server constrains the output), ``"auto"`` none from the base model, which writes fenced JSON.
- ``backend_from(url, tokenizer, mode=...)`` builds either backend.

What it leaves out
- Grammars (a mask raises ``ServerError("no_structured_output")``: use tokens mode or ``constrain="none"``); a
  started answer (the chat API cannot continue an assistant message); streaming in this mode.
"""

from __future__ import annotations

import json
import time

from toolkit.backends.http import (
    MODES,
    ServedBackend,
    ServedGeneration,
    ServerError,
    ServerInfo,
    call_server,
    probe,
    usage_of,
)
from toolkit.backends.http_tokens import TokensBackend
from toolkit.parse import parse_tool_calls
from toolkit.qwen import IM_END_ID
from toolkit.untrusted import redact


def wire_messages(messages: list[dict]) -> list[dict]:
    """The kit's messages in the OpenAI wire format: call arguments as JSON strings."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                if not isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.dumps(fn.get("arguments") or {}, ensure_ascii=False)
                calls.append({"id": c.get("id"), "type": "function", "function": fn})
            m["tool_calls"] = calls
            m["content"] = m.get("content") or None
        out.append(m)
    return out


def call_text(name: str, arguments) -> str:
    """One call in the Qwen template's spelling; arguments that are not a JSON object stay as the server wrote them."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        args = None
    if isinstance(args, dict):
        body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    else:
        body = '{"name": ' + json.dumps(str(name), ensure_ascii=False) + ', "arguments": ' + str(arguments) + "}"
    return f"<tool_call>\n{body}\n</tool_call>"


class ChatBackend(ServedBackend):
    """``/v1/chat/completions`` with ``tools=``; reads ``messages`` (the list the loop extends). See the module
    docstring."""

    mode = "chat"

    def __init__(self, url: str, tokenizer, messages: list[dict], tools: list[dict] | None, *, tool_choice=None, **kw):
        super().__init__(url, tokenizer, **kw)
        self.messages, self.tools = messages, tools or None
        self.tool_choice = tool_choice  # None: the server's default; "auto" | "required" | "none" | a tool's name

    def _tool_choice(self):
        c = self.tool_choice
        if c is None or c in ("auto", "required", "none"):
            return c
        names = [t.get("function", {}).get("name") for t in self.tools or []]
        if c not in names:
            raise ValueError(f"tool_choice {c!r} names no tool offered here ({names})")
        return {"type": "function", "function": {"name": c}}

    def chat(self, messages, *, max_new_tokens, stop_ids, temperature=0.0, top_p=1.0, seed=0) -> dict:
        kw, extra = self._sampling(max_new_tokens, stop_ids, temperature, top_p, seed)
        if self.tools:
            kw["tools"] = self.tools
            if self.tool_choice is not None:
                kw["tool_choice"] = self._tool_choice()
        t_sent, t0 = time.time(), time.perf_counter()
        resp = call_server(
            self.url,
            "POST /chat/completions",
            lambda: self.client.chat.completions.create(messages=wire_messages(messages), extra_body=extra, **kw),
            self.timeout_s,
        )
        wall = time.perf_counter() - t0
        if not getattr(resp, "choices", None) or resp.choices[0].message is None:
            raise ServerError("malformed_response", f"POST /chat/completions at {self.url}: no message in the answer")
        msg = resp.choices[0].message
        if resp.choices[0].finish_reason is None or not isinstance(msg.content, (str, type(None))):
            raise ServerError(
                "malformed_response", f"POST /chat/completions at {redact(self.url)}: a message without finish_reason"
            )
        calls = []
        for c in msg.tool_calls or []:
            fn = getattr(c, "function", None)
            calls.append({"name": getattr(fn, "name", None), "arguments": getattr(fn, "arguments", None)})
        content = msg.content or ""
        text = content + "".join(
            ("\n" if content or i else "") + call_text(c["name"], c["arguments"]) for i, c in enumerate(calls)
        )
        return dict(
            url=redact(self.url),
            model=self.model,
            mode=self.mode,
            endpoint="/v1/chat/completions",
            stream=False,
            content=content,
            server_tool_calls=calls,
            text=text,
            finish_reason=resp.choices[0].finish_reason,
            usage=usage_of(resp),
            t_sent=t_sent,
            t_done=t_sent + wall,
            wall_s=wall,
        )

    def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, top_p=1.0, seed=0):
        if mask is not None:
            raise ServerError(
                "no_structured_output",
                "chat mode sends no grammar to the server (the server renders and decodes); run the loop with "
                "constrain='none', or use tokens mode, where the host enforces the grammar",
            )
        r = self.chat(
            self.messages,
            max_new_tokens=max_new_tokens,
            stop_ids=stop_ids,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
        )
        ids = self.tokenizer.encode(r["text"], add_special_tokens=False)
        stopped = "length" if r["finish_reason"] == "length" else "stop"
        if stopped == "stop":
            ids.append(IM_END_ID)
        kit = parse_tool_calls(r["text"])[1]
        r["kit_tool_calls"] = [{"name": c.name, "arguments": c.arguments, "ok": c.ok} for c in kit]
        r["prompt_tokens_kit"] = len(prompt_ids)
        r["prompt_count_ok"] = r["usage"].get("prompt_tokens") in (None, len(prompt_ids))
        if not r["prompt_count_ok"]:
            self._note(
                f"the server rendered {r['usage'].get('prompt_tokens')} prompt tokens, the kit's template "
                f"{len(prompt_ids)}: the two templates differ for this conversation"
            )
        r["notes"] = list(self.notes)
        self.turns.append(r)
        return ServedGeneration(ids, 0, len(prompt_ids), 0.0, r["wall_s"], stopped, r)


def backend_from(url: str, tokenizer, *, mode: str = "tokens", messages=None, tools=None, **kw):
    """A :class:`TokensBackend` or :class:`ChatBackend` for ``url`` (``messages``/``tools`` for chat mode)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "chat":
        if messages is None:
            raise ValueError("chat mode needs the message list the loop extends (messages=)")
        return ChatBackend(url, tokenizer, messages, tools, **kw)
    return TokensBackend(url, tokenizer, **kw)


def side_by_side(
    url: str,
    tokenizer,
    messages: list[dict],
    tools: list[dict],
    prompt_ids: list[int],
    *,
    max_new_tokens: int = 48,
    info: ServerInfo | None = None,
) -> dict:
    """One greedy turn in both modes: the raw text (tokens mode) with the kit's parse, beside the server's parsed
    calls (chat mode) — and both prompt counts. Greedy on the same prompt: the raw text is what the server parsed."""
    info = info or probe(url)
    tb = TokensBackend(url, tokenizer, info=info)
    raw = tb.complete(prompt_ids, max_new_tokens=max_new_tokens, stop_ids={IM_END_ID})
    cb = ChatBackend(url, tokenizer, messages, tools, info=info)
    chat = cb.chat(messages, max_new_tokens=max_new_tokens, stop_ids={IM_END_ID})
    content, kit_calls = parse_tool_calls(raw["text"])
    return dict(
        server=info.description,
        raw_text=raw["text"],
        kit_calls=[{"name": c.name, "arguments": c.arguments, "ok": c.ok, "error": c.error} for c in kit_calls],
        server_calls=chat["server_tool_calls"],
        server_content=chat["content"],
        prompt_tokens=dict(
            kit=len(prompt_ids),
            tokens_mode=raw["usage"].get("prompt_tokens"),
            chat_mode=chat["usage"].get("prompt_tokens"),
        ),
    )
