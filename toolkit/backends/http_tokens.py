"""Tokens mode: the kit renders with its own template and sends the prompt to ``/v1/completions`` (§14.5.8).

What it does
- :class:`TokensBackend` sends the prompt as token ids; a server that refuses ids (``transformers serve`` 5.24:
  HTTP 400 "prompt must be a string.") gets the kit's rendered text instead, and the backend says so. Either way the
  server's ``usage.prompt_tokens`` is checked against the kit's own count, and the server's ``completion_tokens``
  against the kit's re-encoding of the returned text (the server returns text, not ids: where they differ, that
  is re-tokenization drift). It streams by default, so ``prefill_s`` is the time to the first token (without
  streaming ``prefill_s`` is 0 and the whole request counts as decode).
- Under a grammar mask, a server that takes a structured-output parameter (vLLM, SGLang:
  ``toolkit.backends.http_structured``) gets the grammar with the turn's first request (``structured="auto"``; "host"
  never sends it, "server" sends vLLM's spelling to any server, to show what it answers). Every token it returns is
  replayed through the kit's matcher; a server that rejects the parameter (``transformers serve`` 5.24: HTTP 422) or
  ignores it (a token outside the grammar) is named in ``notes`` and the host takes over. A server without one decodes
  freely and the kit enforces the grammar on the host by jump-forward — the tokens the grammar forces are appended
  to the prompt (e.g. ``<tool_call>\\n{"name": "calculator", "arguments": {"expression":``), the server's tokens are
  kept up to the first one the grammar refuses (plus the characters of that token the grammar still allows), and
  the server is asked again after the next forced stretch, at most ``max_rounds`` requests per turn. Every token
  kept is one the grammar allows; where the grammar forces nothing after a refusal, the turn ends there (the parser
  then reports an unclosed call as a structured error the model sees).

- vLLM returns the generated ids themselves (``return_token_ids``): the kit keeps them (``ids_from="server"``), so
  nothing is re-tokenized and the next turn's prompt holds what the model generated; it also echoes the prompt ids,
  checked against what the kit sent (``prompt_ids_echoed_ok``). Each turn records the server's prefix-cache hits
  (``cached_tokens``) beside the kit's own count (``kit_shared_prefix``: the prefix shared with this backend's last
  request). Log-probabilities from the server: ``toolkit.backends.http_logprobs``.

What it leaves out
- SGLang (CUDA only): its parameter follows its documentation. Sampling: the server draws with its own sampler, so a seed gives the server's tokens, not the kit's sampler's
  (greedy agrees up to numerics).
"""

from __future__ import annotations

import time

from toolkit.backends import http_structured
from toolkit.backends.http import (
    MAX_ROUNDS,
    ServedBackend,
    ServedGeneration,
    ServerError,
    call_server,
    extra_field,
    usage_of,
)
from toolkit.prefix import shared_prefix
from toolkit.qwen import IM_END_ID
from toolkit.untrusted import redact

STRUCTURED = (
    "auto",
    "server",
    "host",
    "legacy",
)  # where the server takes one | always try | never | vLLM's old spelling


class TokensBackend(ServedBackend):
    """The kit renders and counts; ``/v1/completions`` decodes. See the module docstring."""

    mode = "tokens"

    def __init__(
        self,
        url: str,
        tokenizer,
        *,
        prompt_format: str = "auto",
        stream: bool = True,
        max_rounds=MAX_ROUNDS,
        structured: str = "auto",
        **kw,
    ):
        if prompt_format not in ("auto", "ids", "text"):
            raise ValueError(f"prompt_format must be auto, ids or text, got {prompt_format!r}")
        if structured not in STRUCTURED:
            raise ValueError(f"structured must be one of {STRUCTURED}, got {structured!r}")
        super().__init__(url, tokenizer, stream=stream, **kw)
        self._last_seen: list[int] = []
        self.max_rounds = int(max_rounds)
        self.prompt_format, self.structured = prompt_format, structured

    def _grammar_fields(self, mask) -> dict | None:
        """The structured-output fields to send for ``mask``'s grammar (``structured``: auto | server | host)."""
        if self.structured == "host":
            return None
        if self.structured == "legacy":
            return http_structured.legacy_fields(getattr(mask, "grammar", None))
        sent = http_structured.fields(self.info.kind, getattr(mask, "grammar", None))
        if sent is None and self.structured == "server":  # asked to try: vLLM's spelling, to hear what the server says
            sent = http_structured.fields("vllm", getattr(mask, "grammar", None))
        if sent is None:
            self._note(
                f"this server ({self.info.kind}) takes no grammar: the host enforces it by jump-forward (forced tokens "
                "appended, the server's tokens kept up to the first one the grammar refuses)"
            )
        return sent

    def complete(
        self, ids: list[int], *, max_new_tokens: int, stop_ids, temperature=0.0, top_p=1.0, seed=0, fields=None
    ) -> dict:
        """One ``/v1/completions`` request for ``ids``: the server's text, finish reason, usage and the checks.
        ``fields``: extra request fields (a structured-output parameter, ``toolkit.backends.http_structured``)."""
        kw, extra = self._sampling(max_new_tokens, stop_ids, temperature, top_p, seed)
        extra.update(fields or {})
        if self.prompt_format == "auto":
            try:
                return self._request(ids, "ids", kw, extra)
            except ServerError as e:
                if not (e.kind in ("http_400", "http_422") and "prompt" in str(e).lower()):
                    raise
                self.prompt_format = "text"
                self._note(
                    f"the server refuses token ids ({e}); the kit sends its rendered text instead and checks "
                    "the server's prompt_tokens against its own count"
                )
        return self._request(ids, self.prompt_format, kw, extra)

    def _request(self, ids, fmt, kw, extra) -> dict:
        prompt = list(ids) if fmt == "ids" else self.tokenizer.decode(ids, skip_special_tokens=False)
        t_sent, t0 = time.time(), time.perf_counter()
        if self.stream:

            def run():
                pieces, finish, usage, first, ids, echoed = [], None, None, None, None, None
                seen = 0  # chunks with a choice: none at all is a body that was not a stream, not an empty answer
                for chunk in self.client.completions.create(prompt=prompt, stream=True, extra_body=extra, **kw):
                    if getattr(chunk, "choices", None):
                        seen += 1
                        c = chunk.choices[0]
                        if c.text and first is None:
                            first = time.perf_counter()
                        pieces.append(c.text or "")
                        finish = c.finish_reason or finish
                        got = extra_field(c, "token_ids")
                        if got is not None:
                            ids = (ids or []) + list(got)
                        echoed = extra_field(c, "prompt_token_ids") or echoed
                    usage = getattr(chunk, "usage", None) or usage
                if not seen or finish is None:
                    raise ValueError(
                        "the stream ended without a finish_reason"
                        if seen
                        else "no choices in the stream (a body that was not streamed?)"
                    )
                return pieces, finish, usage, first, ids, echoed

            chunks, finish, usage, first, ids_out, echoed = call_server(
                self.url, "POST /completions (stream)", run, self.timeout_s
            )
            u = usage_of(type("R", (), {"usage": usage})())
            text = "".join(chunks)
        else:
            resp = call_server(
                self.url,
                "POST /completions",
                lambda: self.client.completions.create(prompt=prompt, extra_body=extra, **kw),
                self.timeout_s,
            )
            if not getattr(resp, "choices", None):
                raise ServerError("malformed_response", f"POST /completions at {self.url}: no choices in the answer")
            c = resp.choices[0]
            if not isinstance(getattr(c, "text", None), (str, type(None))) or c.finish_reason is None:
                raise ServerError(
                    "malformed_response",
                    f"POST /completions at {redact(self.url)}: a choice without text or finish_reason",
                )
            text, finish, first, u = c.text or "", c.finish_reason, None, usage_of(resp)
            ids_out, echoed = extra_field(c, "token_ids"), extra_field(c, "prompt_token_ids")
            chunks = [text]
        t1 = time.perf_counter()
        for what, got in (("token_ids", ids_out), ("prompt_token_ids", echoed)):
            if got is not None and not (
                isinstance(got, list) and all(type(i) is int and 0 <= i < self.vocab_width for i in got)
            ):
                raise ServerError(
                    "malformed_response",
                    f"POST /completions at {redact(self.url)}: {what} are not token ids of this vocabulary",
                )
        return dict(
            url=redact(self.url),
            model=self.model,
            mode=self.mode,
            endpoint="/v1/completions",
            prompt_format=fmt,
            stream=self.stream,
            text=text,
            chunks=chunks,  # the text as the server sent it: one piece per streamed event (one when not streamed)
            finish_reason=finish,
            usage=u,
            prompt_tokens_kit=len(ids),
            prompt_count_ok=u.get("prompt_tokens") in (None, len(ids)),
            token_ids=None if ids_out is None else [int(i) for i in ids_out],
            prompt_ids_echoed_ok=None if not echoed else [int(i) for i in echoed] == list(ids),
            t_sent=t_sent,
            t_done=t_sent + (t1 - t0),
            first_token_s=None if first is None else first - t0,
            wall_s=t1 - t0,
        )

    def _ids_of(self, r: dict, stop_ids) -> list[int]:
        """The generated ids: the server's own where it returns them (vLLM: ``return_token_ids``), else the kit's
        encoding of the server's text (+ the stop id the server hit but did not return as text)."""
        reencoded = self.tokenizer.encode(r["text"], add_special_tokens=False)
        stop = IM_END_ID if IM_END_ID in (stop_ids or ()) else min(stop_ids) if stop_ids else None
        if r.get("token_ids") is not None:
            ids = list(r["token_ids"])
            if r["finish_reason"] == "stop" and stop is not None and not (ids and ids[-1] in stop_ids):
                ids.append(stop)  # a stop string, not a stop id: the turn still ends the template's way
            body = ids[:-1] if ids and ids[-1] in (stop_ids or ()) else ids
            r["ids_from"], r["reencoding_differs"] = "server", body != reencoded
            if body != reencoded:
                self._note(
                    "the server's ids differ from a re-encoding of its text (re-tokenization drift): the kit keeps the "
                    "server's ids, so the next turn's prompt holds what the model generated"
                )
        else:
            ids, r["ids_from"] = reencoded, "re-encoded text"
            if r["finish_reason"] == "stop" and stop is not None:
                ids.append(stop)
        if r.get("prompt_ids_echoed_ok") is False:
            self._note("the server echoed prompt ids that differ from the ids the kit sent")
        server_n = r["usage"].get("completion_tokens")
        r["completion_ids_kit"] = len(ids)
        r["completion_count_ok"] = server_n in (None, len(ids))
        if not r["prompt_count_ok"]:
            self._note(
                f"prompt tokens differ: server {r['usage'].get('prompt_tokens')} vs kit {r['prompt_tokens_kit']}"
            )
        if not r["completion_count_ok"]:
            self._note(f"the server generated {server_n} tokens, its text re-encodes to {len(ids)} (re-tokenization)")
        return ids

    def generate(self, prompt_ids, *, max_new_tokens, stop_ids, mask=None, temperature=0.0, top_p=1.0, seed=0):
        prompt, new, rounds = list(prompt_ids), [], []
        stopped, t0 = "length", time.perf_counter()
        if mask is None:
            r = self.complete(
                prompt,
                max_new_tokens=max_new_tokens,
                stop_ids=stop_ids,
                temperature=temperature,
                top_p=top_p,
                seed=seed,
            )
            new, stopped = (
                self._ids_of(r, stop_ids)[:max_new_tokens],
                "stop" if r["finish_reason"] == "stop" else "length",
            )
            rounds.append(r)
        else:
            bitmask = mask.allocate()
            send = self._grammar_fields(mask)  # the server's own constrained decoding, first request only
            refused_last = False
            for _ in range(self.max_rounds):
                # the server's grammar starts at the turn's start: nothing is forced before a request that sends it.
                # After a refusal the whole forced string goes in, even a piece xgrammar's jump-forward tokens leave
                # out (a "}" that could start a longer token): otherwise the server would be asked the same again.
                budget = max_new_tokens - len(new)
                forced = [] if send else _forced(mask, bitmask, budget, self.tokenizer if refused_last else None)
                new += forced
                if mask.is_terminated() or len(new) >= max_new_tokens:
                    stopped = "stop" if new and new[-1] in stop_ids else "grammar" if mask.is_terminated() else "length"
                    break
                ask = dict(max_new_tokens=max_new_tokens - len(new), stop_ids=stop_ids, temperature=temperature,
                           top_p=top_p, seed=seed)  # fmt: skip
                try:
                    r = self.complete(prompt + new, fields=send, **ask)
                except ServerError as e:
                    if not (send and http_structured.refused(e)):
                        raise
                    self._note(
                        f"the server rejected the structured-output parameter {sorted(send)} ({e}); the host "
                        "enforces the grammar by jump-forward instead"
                    )
                    send = None
                    continue
                r["forced_before"], r["grammar_sent"] = len(forced), bool(send)
                rounds.append(r)
                got = self._ids_of(r, stop_ids)
                kept = 0
                for tok in got:
                    if not mask.accept(tok):
                        break
                    kept += 1
                if send:
                    self._note(
                        f"the server decoded under the grammar it was sent ({sorted(send)}); every token replayed "
                        "through the kit's matcher"
                        if kept == len(got)
                        else f"the server ignored the grammar it was sent ({sorted(send)}): its token {kept + 1} is "
                        "outside it; the host enforces the grammar from there by jump-forward"
                    )
                    send = None  # later requests continue mid-grammar: the host enforces it from here
                new += got[:kept]
                r["kept"], r["refused"] = kept, (got[kept] if kept < len(got) else None)
                if kept < len(got):  # the refused token may still start with characters the grammar allows
                    part = _accept_chars(mask, self.tokenizer.decode(got[kept:], skip_special_tokens=False))
                    if part:
                        new += self.tokenizer.encode(part, add_special_tokens=False)
                        r["kept_chars"] = part
                if new and new[-1] in stop_ids:
                    stopped = "stop"
                    break
                if mask.is_terminated():
                    stopped = "grammar"
                    break
                if kept == len(got) and r["finish_reason"] == "length":
                    stopped = "length"
                    break
                if kept < len(got) and not _forced_available(mask, bitmask):
                    stopped = "grammar"  # refused and nothing forced: asking again would give the same tokens
                    r["gave_up"] = "the server's next token is outside the grammar and the grammar forces nothing"
                    break
                if refused_last and kept < len(got) and not (forced or kept or r.get("kept_chars")):
                    stopped = "grammar"  # the same prompt as the round before, refused the same way: no progress
                    r["gave_up"] = "the server's first token was refused again and nothing was added since"
                    break
                refused_last = kept < len(got)
        wall = time.perf_counter() - t0
        cached = sum((r["usage"].get("cached_tokens") or 0) for r in rounds[:1])
        reused = min(int(cached), len(prompt))
        last = rounds[-1] if rounds else {}
        server = dict(last, rounds=len(rounds), requests=[_brief(r) for r in rounds], notes=list(self.notes))
        # What the kit expects a prefix cache to hold: the longest prefix shared with this backend's last request
        # (its prompt + what came back). A shared server may hold more (other sessions' prefixes), never less unless
        # it evicted; vLLM counts whole blocks only.
        server["cached_tokens"] = cached if rounds and rounds[0]["usage"].get("cached_tokens") is not None else None
        server["kit_shared_prefix"] = shared_prefix(self._last_seen, prompt)
        self._last_seen = list(prompt) + list(new)
        if rounds:
            server.update(t_sent=rounds[0]["t_sent"], t_done=rounds[-1]["t_done"])
        first = rounds[0].get("first_token_s") if rounds else None
        return ServedGeneration(new, reused, len(prompt) - reused, first or 0.0, wall - (first or 0.0), stopped, server)


def _brief(r: dict) -> dict:
    keep = (
        "prompt_format",
        "ids_from",
        "reencoding_differs",
        "prompt_ids_echoed_ok",
        "finish_reason",
        "usage",
        "prompt_tokens_kit",
        "prompt_count_ok",
        "completion_ids_kit",
        "completion_count_ok",
        "forced_before",
        "kept",
        "refused",
        "wall_s",
        "t_sent",
        "t_done",
    )
    return {k: r[k] for k in keep if k in r}


def _allowed(mask, bitmask) -> list[int]:
    mask.fill(bitmask)
    words = bitmask.reshape(-1).tolist()
    out = []
    for i, w in enumerate(words):
        w &= 0xFFFFFFFF
        while w:
            low = w & -w
            out.append(32 * i + low.bit_length() - 1)
            if len(out) > 1:
                return out
            w ^= low
    return out


def _accept_chars(mask, text: str) -> str:
    """The longest prefix of ``text`` the grammar accepts character by character (accepted into ``mask``)."""
    best = 0
    for n in range(1, len(text) + 1):
        if not mask.matcher.fork().accept_string(text[:n]):
            break
        best = n
    if best:
        mask.matcher.accept_string(text[:best])
    return text[:best]


def _forced_available(mask, bitmask) -> bool:
    return len(_allowed(mask, bitmask)) == 1 or bool(mask.matcher.find_jump_forward_string())


def _forced(mask, bitmask, budget: int, tokenizer=None) -> list[int]:
    """The tokens the grammar forces from here (one allowed token, or xgrammar's jump-forward tokens), accepted.
    With ``tokenizer``, a forced string xgrammar gives no tokens for (its last piece could start a longer token) is
    encoded and accepted too."""
    out: list[int] = []
    while len(out) < budget and not mask.is_terminated():
        allowed = _allowed(mask, bitmask)
        if len(allowed) == 1:
            step = allowed
        else:
            step = list(mask.matcher.find_jump_forward_tokens())[: budget - len(out)]
            if not step and tokenizer is not None:
                text = mask.matcher.find_jump_forward_string()
                if text and mask.matcher.accept_string(text):
                    out += tokenizer.encode(text, add_special_tokens=False)[: budget - len(out)]
                    continue
            if not step:
                break
        for tok in step:
            if not mask.accept(tok):
                return out
            out.append(tok)
    return out
