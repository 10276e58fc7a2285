"""Log-probabilities from a server that returns them (vLLM): what the first-token pictures need (§14.5.2, §14.5.8).

What it does
- ``first_token_logprobs(backend, ids, k)``: the server's ``k`` most likely first tokens after ``ids`` as (token id,
  log-probability), most likely first: one ``/v1/completions`` request with ``max_tokens=1`` and ``logprobs=k``
  (vLLM names the tokens by id with ``return_tokens_as_token_ids``; a server that names them by text gets them
  encoded back, -1 where a text is not one token).
- ``token_logprob(backend, ids, token)``: one named token's log-probability right after ``ids``, through vLLM's
  ``prompt_logprobs`` on ``ids + [token]`` (a token far outside the top k, e.g. ``<tool_call>`` for the base model);
  None where the server returns none.
Both take a ``toolkit.backends.http_tokens.TokensBackend`` (its client, model, timeout and error handling).

What it leaves out
- Whole distributions (servers cap ``logprobs``: vLLM at 20 by default); chat-mode log-probabilities.
"""

from __future__ import annotations

from toolkit.backends.http import ServerError, call_server, extra_field


def first_token_logprobs(b, ids: list[int], k: int = 5) -> list[tuple[int, float]]:
    """The server's ``k`` most likely first tokens after ``ids``, as (token id, log-probability), most likely
    first: one ``/v1/completions`` request with ``max_tokens=1`` and ``logprobs=k`` (vLLM names the tokens by
    id with ``return_tokens_as_token_ids``; other servers by text, which the kit encodes back)."""
    kw, extra = b._sampling(1, (), 0.0, 1.0, 0)
    kw.pop("stream_options", None)
    extra["return_tokens_as_token_ids"] = True
    resp = call_server(
        b.url,
        "POST /completions (logprobs)",
        lambda: b.client.completions.create(prompt=list(ids), logprobs=int(k), extra_body=extra, **kw),
        b.timeout_s,
    )
    try:
        top = resp.choices[0].logprobs.top_logprobs[0]
    except (AttributeError, IndexError, TypeError):
        raise ServerError(
            "malformed_response", f"POST /completions at {b.url}: no top_logprobs in the answer"
        ) from None
    out = []
    for token, lp in top.items():
        if token.startswith("token_id:"):
            tid = int(token.split(":", 1)[1])
        else:
            enc = b.tokenizer.encode(token, add_special_tokens=False)
            tid = enc[0] if len(enc) == 1 else -1  # a text the kit cannot map back to one id
        out.append((tid, float(lp)))
    return sorted(out, key=lambda t: -t[1])[: int(k)]


def token_logprob(b, ids: list[int], token: int) -> float | None:
    """The log-probability the server gives ``token`` right after ``ids``: one request for ``ids + [token]`` with
    ``prompt_logprobs=0`` and ``max_tokens=1`` (vLLM returns each prompt token's log-probability); None where
    the server returns none."""
    kw, extra = b._sampling(1, (), 0.0, 1.0, 0)
    kw.pop("stream_options", None)
    extra["prompt_logprobs"] = 0
    resp = call_server(
        b.url,
        "POST /completions (prompt logprobs)",
        lambda: b.client.completions.create(prompt=[*ids, int(token)], extra_body=extra, **kw),
        b.timeout_s,
    )
    try:
        last = extra_field(resp.choices[0], "prompt_logprobs")[-1]
        entry = last.get(str(int(token))) or last.get(int(token))
        return float(entry["logprob"] if isinstance(entry, dict) else entry)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return None
