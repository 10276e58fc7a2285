"""Claims about tokens and rendering (§14.5.2, "Tool Use" §3.1), checked with the offline tokenizers, the kit's
templates and the host loop.

Leaves out: the real Qwen tokenizer_config itself (flags are read from the kit's offline tokenizer).
"""
from __future__ import annotations

import json
from importlib.metadata import version

from toolkit.book.ledger import Claim, _verdict
from toolkit.conversations import CALCULATOR, call_text, tool_use_conversation
from toolkit.parse import parse_tool_calls
from toolkit.prefix import shared_prefix
from toolkit.render import render, tokenize
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import TOOLS, schemas


# ================================================================ §14.5.2 tokens and rendering
def token_claims() -> list[Claim]:
    out = []
    tok = tokenizer_for("qwen3")
    added = tok.added_tokens_decoder
    tc = {t.content: (i, t.special) for i, t in added.items()}
    one = [len(tok.encode(s, add_special_tokens=False)) for s in ("<tool_call>", "</tool_call>")]
    out.append(Claim("tool-call-token", "§14.5.2 step 2", "<tool_call> and </tool_call> are each one added token "
                     "with special = false, not spelled out character by character.", f"ids {tc['<tool_call>'][0]}, "
                     f"{tc['</tool_call>'][0]}; special {tc['<tool_call>'][1]}, {tc['</tool_call>'][1]}; encode to "
                     f"{one} token(s)", *_verdict(one == [1, 1] and not tc["<tool_call>"][1] and not
                                                  tc["</tool_call>"][1], "flags or lengths differ")))
    special = sorted((i, t.content) for i, t in added.items() if t.special)
    names = [c for _, c in special]
    control = all(c.startswith("<|") and c.endswith("|>") for c in names)
    tags = [c for c in tc if not c.startswith("<|")]
    out.append(Claim("special-set", "§14.5.2 step 2", "Only control tokens of the <|im_start|> / <|im_end|> kind are "
                     "marked special; the tool and think tags are not.", f"special=true: {len(names)} tokens, ids "
                     f"{special[0][0]}–{special[-1][0]}, all <|…|> control tokens: {control}; tag tokens "
                     f"({', '.join(tags)}) special: {sorted({tc[c][1] for c in tags})}",
                     *_verdict(control and "<|im_start|>" in names and not any(tc[c][1] for c in tags),
                               "a non-control token is special")))
    out.append(Claim("eos", "§14.5.2 step 3", "<|im_end|> is Qwen3's end-of-sequence token; generating it ends the "
                     "request.", f"tokenizer.eos_token = {tok.eos_token!r} (id {tok.eos_token_id})",
                     *_verdict(tok.eos_token == "<|im_end|>", "another eos token")))
    r = render([{"role": "user", "content": "hi"}], schemas(), "qwen3")
    sys_turn = r.text.split("<|im_end|>", 1)[0]
    out.append(Claim("tools-in-system", "§14.5.2 step 1", "Qwen3's template writes the tool schemas as text into "
                     "the system turn; they are ordinary tokens paid on every request.",
                     f"tool block inside the first (system) turn: {'<tools>' in sys_turn}; {r.counts['tools']} "
                     f"tokens of {len(r)} for the kit's {len(schemas())} tools",
                     *_verdict(sys_turn.startswith("<|im_start|>system") and "<tools>" in sys_turn,
                               "the tool block is not in the system turn")))
    printed14 = ("# Tools", "You may call one or more functions to assist with the user query.",
                 "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
                 "For each function call, return a json object with function name and arguments within "
                 "<tool_call></tool_call> XML tags:\n<tool_call>\n" + FORMAT_EXAMPLE + "\n</tool_call><|im_end|>")
    found = [x in sys_turn + "<|im_end|>" for x in printed14]
    out.append(Claim("system-block-14.5.2", "§14.5.2 step 1", "The system block printed in step 1 (Tools header, "
                     "signatures in <tools>, the call format inside <tool_call>) is what Qwen3's template writes.",
                     f"printed pieces found verbatim in the kit's Qwen3 rendering: {sum(found)} of {len(found)}",
                     *_verdict(all(found), "a printed piece is not in the rendering")))
    msgs = [{"role": "user", "content": "Weather in Paris and Tokyo?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": c}}}
                for c in ("Paris", "Tokyo")]},
            {"role": "tool", "content": '{"temp_c": 18}'}, {"role": "tool", "content": '{"temp_c": 22}'}]
    r2 = render(msgs, schemas(["get_weather"]), "qwen3")
    tail = r2.text.split("</tool_call><|im_end|>")[-1]
    users, blocks = tail.count("<|im_start|>user"), tail.count("<tool_response>")
    out.append(Claim("tool-merge", "§14.5.2 step 5", "Qwen3 puts consecutive tool results into one user turn, "
                     "each inside <tool_response>…</tool_response>; no 'tool' role reaches the token stream.",
                     f"two tool messages → {users} user turn(s) with {blocks} <tool_response> blocks; "
                     f"'<|im_start|>tool' in text: {'<|im_start|>tool' in r2.text}",
                     *_verdict(users == 1 and blocks == 2 and "<|im_start|>tool" not in r2.text,
                               "the results are not merged into one user turn")))
    out.append(Claim("generation-prompt", "§14.5.2 step 5", "The rendering ends with <|im_start|>assistant\\n, the "
                     "generation prompt the next turn continues from.", "the rendering after the two tool results "
                     f"ends with {r2.text[-36:]!r}",
                     *_verdict(r2.text.endswith("<|im_start|>assistant\n"), "the rendering ends otherwise")))
    out.append(_prefix_extends_claim(render, shared_prefix, tokenizer_for))
    base = [{"role": "system", "content": "Current time: 2026-11-29T10:00:00\nYou are helpful."},
            {"role": "user", "content": "hi"}]
    later = [dict(base[0], content=base[0]["content"].replace("10:00:00", "10:00:07")), base[1]]
    a, b = render(base, schemas(), "qwen3"), render(later, schemas(), "qwen3")
    sp = shared_prefix(a, b)
    out.append(Claim("timestamp", "§14.5.8", "A timestamp at the start of the prompt makes the prefix cache hit "
                     "drop to (nearly) zero.", f"two renderings 7 s apart share {sp} of {len(a)} tokens "
                     f"({sp / len(a):.1%})", *_verdict(sp < 0.05 * len(a), "most of the prefix survives")))
    # §14.5.8: compressing history changes the prefix and so breaks the cache
    hist = [{"role": "user", "content": f"step {i}: what is {i} * 7?"} if i % 2 == 0 else
            {"role": "assistant", "content": f"{(i - 1) * 7}"} for i in range(12)]
    full = render(hist + [{"role": "user", "content": "and now?"}], schemas(), "qwen3")
    squeezed = render([{"role": "user", "content": "Summary of steps 0-5: products of 0..10 by 7."}] + hist[6:] +
                      [{"role": "user", "content": "and now?"}], schemas(), "qwen3")
    keep = shared_prefix(full, squeezed)
    tok3 = tokenizer_for("qwen3")
    before = len(tok3.encode(full.text[:full.text.index("step 0")], add_special_tokens=False))
    out.append(Claim("compression-breaks-cache", "§14.5.8", "Compressing the history changes the prefix and so "
                     "invalidates the cache: the two goals conflict.", f"12-message history vs the same with its "
                     f"first 6 messages summarised: {keep} of {len(full)} tokens still shared; the first changed "
                     f"message starts at token {before}", *_verdict(keep <= before, "the cache survives the change", [
                         (keep > len(full) / 2, f"the cache is lost from the first changed message on; the {keep} "
                          "tokens before it (tool block included) still hit")])))
    return out


def _prefix_extends_claim(render, shared_prefix, tokenizer_for) -> Claim:
    """Does request k+1 start with what the cache holds after request k? The cache holds request k's prompt plus
    the generated tokens that were fed back in, i.e. all but the last sampled token (<|im_end|> is sampled and
    ends the request; it never runs through the model), exactly as ``toolkit.host`` counts reuse."""
    tools = schemas(["calculator"])
    user = [{"role": "user", "content": CALCULATOR["question"]}]
    call = call_text(CALCULATOR)
    rows = []
    for tpl in ("qwen2.5", "qwen3"):
        tok = tokenizer_for(tpl)
        first = render(user, tools, tpl)
        for label, written, reasoning in (("plain call", call, None),
                                          ("empty think + call", "<think>\n\n</think>\n\n" + call, None),
                                          ("think kept as reasoning_content", "<think>\nx\n</think>\n\n" + call, "x")):
            if tpl == "qwen2.5" and "think" in written:  # Qwen2.5 does not think
                continue
            cached = first.ids + tok.encode(written, add_special_tokens=False)  # <|im_end|> sampled, not fed
            msg = {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": CALCULATOR["tool"], "arguments": CALCULATOR["arguments"]}}]}
            if reasoning:
                msg["reasoning_content"] = reasoning
            nxt = render(user + [msg, {"role": "tool", "content": '{"result": 37.5}'}], tools, tpl)
            rows.append((tpl, label, min(shared_prefix(cached, nxt), len(cached)), len(cached), len(nxt)))
    ev = "; ".join(f"{t} {lab}: {s} of {n} cached tokens reused (next request {m})" for t, lab, s, n, m in rows)
    plain_ok = all(s == n for t, lab, s, n, m in rows if lab != "empty think + call")
    broken = [(t, s, n) for t, lab, s, n, m in rows if lab == "empty think + call" and s < n]
    return Claim("prefix-extends", "§14.5.3/§14.5.8", "Inside one tool loop each request extends the previous "
                 "request plus the model's output, so the cache can serve all of it.", ev,
                 *_verdict(plain_ok, "a plain call already breaks the prefix", [
                     (bool(broken), "holds when the history re-renders exactly what the model wrote; a think block "
                      "the host drops (empty, or not kept as reasoning_content) is not re-rendered, so the hit ends "
                      f"at that assistant turn ({broken[0][1]} of {broken[0][2]} in {broken[0][0]})"
                      if broken else "")]))


# The system block as the second chapter prints it (§3.1, readable form), line by line; tools elided.
PRINTED_SYSTEM_LINES = (
    "# Tools",
    "You may call one or more functions to assist with the user query.",
    "You are provided with function signatures within <tools></tools> XML tags:",
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    "XML tags.",
)


FORMAT_EXAMPLE = '{"name": <function-name>, "arguments": <args-json-object>}'


def tool_use_claims() -> list[Claim]:
    msgs, tools = tool_use_conversation()
    r = {t: render(msgs, tools, t, add_generation_prompt=False) for t in ("qwen2.5", "qwen3")}
    out = []
    tool_turn = {t: "<|im_start|>tool" in x.text for t, x in r.items()}
    in_user = {t: "<|im_start|>user\n<tool_response>" in x.text for t, x in r.items()}
    out.append(Claim("tool-role-turn", "Tool Use §3.1", "The printed token sequence shows the result in its own "
                     "'<|im_start|>tool' turn.", "rendered: " + "; ".join(
                         f"{t}: tool turn {tool_turn[t]}, result in a user turn {in_user[t]}" for t in r),
                     *_verdict(all(tool_turn.values()), "both Qwen2.5's and Qwen3's templates put tool results in a "
                               "user turn wrapped in <tool_response>; the 'tool' role exists only in the API message "
                               "list (as §14.5.2 step 5 says)")))
    colon = {t: any(f"<|im_start|>{role}:" in x.text for role in ("system", "user", "assistant"))
             for t, x in r.items()}
    newline = {t: "<|im_start|>system\n" in x.text for t, x in r.items()}
    out.append(Claim("im-start-colon", "Tool Use §3.1", "In the one-line token sequence a role is followed by a "
                     "colon: <|im_start|>system:…", "rendered: " + "; ".join(
                         f"{t}: '<|im_start|>role:' {colon[t]}, '<|im_start|>system\\n' {newline[t]}" for t in r),
                     *_verdict(all(colon.values()), "the templates put a newline after the role, never a colon; "
                               "the colon is not in the token stream (the readable form below it is right)")))
    sys25 = r["qwen2.5"].text.split("<|im_end|>", 1)[0]
    present = [line in sys25 for line in PRINTED_SYSTEM_LINES]
    last_rendered = PRINTED_SYSTEM_LINES[-1][:-1] + ":"
    dropped = FORMAT_EXAMPLE in sys25
    out.append(Claim("system-block", "Tool Use §3.1", "The printed system block is what the Qwen2.5 template writes "
                     "for the book's messages and tools.", f"printed lines found verbatim in the rendered system "
                     f"turn: {sum(present)} of {len(present)}; the rendering ends the last line with ':' "
                     f"({last_rendered in sys25}) and follows it with the call-format example {FORMAT_EXAMPLE} "
                     f"({dropped}); blank lines between sections in the rendering: {sys25.count(chr(10) * 2)}",
                     *_verdict(sum(present) >= len(present) - 1, "most printed lines are not in the rendering", [
                         (dropped and not present[-1], "the wording matches except the last line: the template ends "
                          "it with ':' and then shows the expected call format (<tool_call> with name and "
                          "<args-json-object>), which the printout drops; the printout also drops the blank lines")])))
    tok25 = tokenizer_for("qwen2.5")
    got = tok25.apply_chat_template(msgs[:2], tools=tools)
    kind = type(got).__name__
    ids = got["input_ids"] if hasattr(got, "keys") else got
    as_text = tok25.apply_chat_template(msgs[:2], tools=tools, tokenize=False)

    out.append(Claim("apply-chat-template", "Tool Use §3.1", "tokenizer.apply_chat_template(messages, tools=tools) "
                     "does the template conversion, giving the text shown.", f"transformers {version('transformers')}"
                     f", offline Qwen2.5 tokenizer: the snippet returns a {kind} of {len(ids)} token ids; with "
                     f"tokenize=False it returns a str of {len(as_text)} characters that starts "
                     f"{as_text[:22]!r}", *_verdict(isinstance(got, str), "as written the call returns token ids "
                                                    f"({kind} with input_ids), not text; pass tokenize=False for the "
                                                    "text the chapter then prints")))
    body = {t: x.segment_text("tool_response") for t, x in r.items()}
    printed = '{"name": "calculator", "content": "37.5"}'
    out.append(Claim("tool-response-body", "Tool Use §3.1", f"Inside <tool_response> the template writes {printed}.",
                     "rendered bodies: " + "; ".join(f"{t}: {json.dumps(b[0] if b else '')}" for t, b in body.items()),
                     *_verdict(all(printed in (b[0] if b else "") for b in body.values()),
                               "both templates write the message content as is (37.5); name and the wrapper object "
                               "are not added")))
    listed = {t: "<tools>\n[" in x.text or "<tools>[" in x.text for t, x in r.items()}
    out.append(Claim("tools-as-array", "Tool Use §3.1", "The tool definitions appear inside <tools> as one JSON array.",
                     "rendered: " + "; ".join(f"{t}: array {v}" for t, v in listed.items()),
                     *_verdict(all(listed.values()), "both templates write one JSON object per tool, one per line, "
                               "with no enclosing [ ]")))
    # What the model writes: arguments as a JSON object inside <tool_call>. Checked on the generation side (the
    # format the template asks for, and what the host parser accepts); replaying OpenAI-style string arguments
    # through a template is a separate, computed caveat.
    _, calls = parse_tool_calls('<tool_call>\n{"name": "calculator", "arguments": {"expression": "250 * 0.15"}}'
                                '\n</tool_call>')
    args_obj = {t: '"arguments": {"expression": "250 * 0.15"}' in x.text for t, x in r.items()}
    out.append(Claim("arguments-object", "Tool Use §3.1", "Inside <tool_call> the arguments are a JSON object "
                     "({\"expression\": \"250 * 0.15\"}), although the message list carries them as a string.",
                     f"the template's call format asks for <args-json-object> ({FORMAT_EXAMPLE in sys25}); the host "
                     f"parser reads the object form as {calls[0].arguments} (ok {calls[0].ok}); replaying the "
                     "printed message list (string arguments): " + "; ".join(f"{t} writes an object {v}"
                                                                             for t, v in args_obj.items()),
                     *_verdict(FORMAT_EXAMPLE in sys25 and calls[0].ok and isinstance(calls[0].arguments, dict),
                               "the object form is not what the template asks for or the parser reads", [
                                   (not all(args_obj.values()), "when the history is replayed with OpenAI-style "
                                    "string arguments, " + ", ".join(t for t, v in args_obj.items() if not v) +
                                    " writes the string escaped, not as an object: pass a dict")])))
    n_tr = len([t for t in r["qwen2.5"].tokens if t.segment == "tool_response"])
    pieces = len(tokenize("<tool_response>", "qwen2.5").ids)
    out.append(Claim("qwen25-tool-response", "Tool Use §3.1", "The Qwen2.5 sequence wraps the result in "
                     "<tool_response> tags.", f"Qwen2.5: <tool_response> is {pieces} ordinary tokens, {n_tr} tokens "
                     "for the wrapped result; Qwen3: 1 added token",
                     *_verdict("<tool_response>" in r["qwen2.5"].text, "no <tool_response> in the rendering")))
    calc = {e: TOOLS["calculator"].fn(e)["result"] for e in ("250 * 0.15", "250 * 15%")}
    out.append(Claim("calc-37.5", "Tool Use §3.1", "250 × 15% = 37.5, the result the calculator returns.",
                     f"toolkit.tools calculator: {calc}", *_verdict(all(v == 37.5 for v in calc.values()),
                                                                    "the calculator returns another value")))
    # Two messages per call, checked against the book's own list and what the template does with it
    roles = [m["role"] + ("(tool_calls)" if m.get("tool_calls") else "") for m in msgs]
    i_call = roles.index("assistant(tool_calls)")
    t25 = r["qwen2.5"].text
    call_turn = t25.count("<|im_start|>assistant\n<tool_call>")
    out.append(Claim("two-messages", "Tool Use §3.1", "One tool call adds two messages: the assistant's call and a "
                     "'tool' message with the result; then the model answers.", f"the printed list: {', '.join(roles)}"
                     f"; Qwen2.5 renders the call as {call_turn} assistant turn opening with <tool_call> and the "
                     f"result as {t25.count('<tool_response>')} <tool_response> block, then the answer turn",
                     *_verdict(roles[i_call:i_call + 3] == ["assistant(tool_calls)", "tool", "assistant"] and
                               call_turn == 1 and t25.count("<tool_response>") == 1,
                               "the list or its rendering has another shape")))
    return out
