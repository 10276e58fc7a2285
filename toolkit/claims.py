"""The claims ledger: every number and checkable statement of the two chapters, checked by code.

``python -m toolkit claims`` prints each claim (in our words, with its section), the computed value or the
evidence, and a verdict — **holds**, **holds with a caveat** or **does not hold** — with the reason whenever it
is not a plain "holds". ``--json`` prints the same as JSON; ``--write [PATH]`` writes Markdown (default
``figures/claims.md``; ``python -m toolkit figures`` writes it too).

Evidence comes from running things: ``toolkit.cost`` for the arithmetic, the offline Qwen tokenizers and the
kit's templates (``toolkit.render``) for tokens and rendering, ``toolkit.catalog`` for realistic tool schemas,
``toolkit.host`` for the message flow, and the installed ``mcp`` SDK (its types, its version registry and an
in-process server) for the protocol. Sections: "§14.5.x" is the book, "Tool Use §3.x" the second chapter.

What it leaves out
- Claims that are advice or history rather than checkable facts (agent patterns, RL, RAG, who proposed MCP
  beyond the date of the first revision), and the real Qwen tokenizer_config itself: flags are read from the
  kit's offline tokenizer, whose added-token table was transcribed from Qwen's files (tests/test_models.py).
- The MCP specification text: protocol facts are what the installed SDK encodes, which may lag or lead the spec.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from . import cost

HOLDS, CAVEAT, FAILS = "holds", "holds with a caveat", "does not hold"
VERDICTS = (HOLDS, CAVEAT, FAILS)
BOOK, TOOL_USE = "§14.5", "Tool Use §3"


@dataclass
class Claim:
    id: str
    section: str
    claim: str  # our words
    evidence: str  # the computed value or what was observed
    verdict: str  # one of VERDICTS
    why: str = ""  # required unless the verdict is a plain "holds"

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"{self.id}: unknown verdict {self.verdict!r}")
        if self.verdict != HOLDS and not self.why:
            raise ValueError(f"{self.id}: a verdict of {self.verdict!r} needs a reason")


def _rounds_to(value: float, printed: float, decimals: int) -> bool:
    return round(value, decimals) == round(printed, decimals)


def _verdict(ok: bool, caveat: str = "", why_not: str = "") -> tuple[str, str]:
    if not ok:
        return FAILS, why_not or "the computed value does not match the claim (see the evidence)"
    return (CAVEAT, caveat) if caveat else (HOLDS, "")


# ================================================================ §14.5.3 cost
def cost_claims() -> list[Claim]:
    out = []
    g = cost.growth(10_000, 2048, 30)
    cold = cost.growth(10_000, 2048, 30, warm=False)
    walk = sum(10_000 + 2048 * k for k in range(1, 31))
    out.append(Claim("prefill-no-cache", "§14.5.3", "Prefilling the whole prefix every turn for 30 turns (T=10,000, "
                     "Δ=2,048) costs 1,252,320 tokens.", f"turn-by-turn sum {g.total_no_cache:,}; closed form "
                     f"{cost.total_no_cache(10_000, 2048, 30):,}; plain Python sum {walk:,}",
                     *_verdict(g.total_no_cache == walk == 1_252_320, why_not="the sums differ from 1,252,320")))
    out.append(Claim("prefill-cache", "§14.5.3", "With every prefix served from the cache, only 2,048 × 30 = 61,440 "
                     "tokens are computed.", f"{g.total_cache:,} (warm); {cold.total_cache:,} if the tool block is "
                     "not cached before turn 1", *_verdict(g.total_cache == 61_440,
                     "assumes the tool block is already cached when the loop starts (another request used the same "
                     f"tools); a cold first turn computes T too: {cold.total_cache:,}")))
    r30, r60 = g.ratio, cost.growth(10_000, 2048, 60).ratio
    out.append(Claim("ratio-30", "§14.5.3", "The gap at 30 turns is 20.4×.", f"{g.total_no_cache:,} / "
                     f"{g.total_cache:,} = {r30:.3f}; cold start {cold.ratio:.2f}×",
                     *_verdict(_rounds_to(r30, 20.4, 1), "needs a full cache hit on every turn, the tool block "
                               f"included; with a cold first turn it is {cold.ratio:.1f}× (see prefix-extends for "
                               "when a template breaks the hit)")))
    out.append(Claim("ratio-60", "§14.5.3", "At 60 turns the gap is 35.4×.", f"walk {r60:.3f}; closed form "
                     f"{cost.ratio_closed(10_000, 2048, 60):.3f}", *_verdict(_rounds_to(r60, 35.4, 1))))
    grid = [(t, d, r) for t in (0, 500, 10_000, 40_000) for d in (1, 300, 2048) for r in (1, 7, 30, 100)]
    bad = [x for x in grid if abs(cost.growth(*x).ratio - cost.ratio_closed(*x)) > 1e-9 * cost.growth(*x).ratio]
    out.append(Claim("ratio-formula", "§14.5.3", "The ratio equals T/Δ + (R+1)/2, growing about linearly in R.",
                     f"walk vs formula on {len(grid)} (T, Δ, R) settings: {len(bad)} mismatches",
                     *_verdict(not bad, why_not=f"mismatches at {bad[:3]}")))
    c = 10_000 / 2048
    out.append(Claim("constant", "§14.5.3", "The constant term 10,000/2,048 ≈ 4.9 comes from the tool definitions and "
                     "never goes away, however many turns.", f"10,000/2,048 = {c:.4f}",
                     *_verdict(_rounds_to(c, 4.9, 1), "4.88 rounded; it is the ratio's floor only in the sense "
                               "that (R+1)/2 is added to it, the ratio itself always grows with R")))
    return out


def tool_cost_claims() -> list[Claim]:
    from statistics import mean, median

    from .catalog import realistic_tools
    from .render import tool_definition_cost

    out = []
    c20 = tool_definition_cost(realistic_tools(20), "qwen3")
    per = list(c20["per_tool"].values())
    m = median(per)
    out.append(Claim("tokens-per-tool", "§14.5.3", "One tool's JSON Schema (name, description, typed parameters "
                     "with descriptions) is typically about 200 tokens.", f"20 realistic schemas "
                     f"(toolkit.catalog), Qwen3 tokenizer: median {m:.0f}, mean {mean(per):.0f}, range "
                     f"{min(per)}–{max(per)} tokens; the template's fixed tool preamble adds {c20['preamble']}",
                     *_verdict(0.5 * 200 <= m <= 2 * 200, f"same order of magnitude, but these schemas come out "
                               f"near {m:.0f}, i.e. {m / 200:.0%} of 200; deeper nesting or longer descriptions "
                               "push a tool past 200", "off by more than a factor of two")))
    for n, book in ((10, 2000), (50, 10_000), (100, 20_000)):
        tot = tool_definition_cost(realistic_tools(n), "qwen3")["total"]
        close = abs(tot - book) <= 0.15 * book
        out.append(Claim(f"tools-{n}", "§14.5.3", f"{n} tools cost about {book:,} tokens per request.",
                         f"measured on {n} realistic schemas with the Qwen3 template: {tot:,} tokens "
                         f"({tot / book:.0%} of the book's figure)",
                         *_verdict(0.5 * book <= tot <= 2 * book, "" if close else
                                   "the cost does grow linearly with the number of tools, but at the measured "
                                   f"~{(tot - c20['preamble']) / n:.0f} tokens per tool the total is lower",
                                   "off by more than a factor of two")))
    return out


# Peak dense BF16 throughput of an H100 SXM (vendor spec sheet), for the wall-clock comparison only.
H100_BF16_FLOPS = 989e12


def flops_claims() -> list[Claim]:
    out = []
    llama, ds = cost.MODELS["Llama 3 8B"], cost.MODELS["DeepSeek-V3 (37B active)"]
    f8, f8x, f37 = cost.decode_flops_per_token(8e9), cost.decode_flops_per_token(llama.active_params), \
        cost.decode_flops_per_token(ds.active_params)
    ctx_mid, ctx_end = 10_000 + 2048 * 15, 10_000 + 2048 * 30
    att_mid = cost.attention_flops_per_token(llama.layers, llama.attn_width, ctx_mid)
    att_end = cost.attention_flops_per_token(llama.layers, llama.attn_width, ctx_end)
    out.append(Claim("flops-llama", "§14.5.3", "Decoding one token of Llama 3 8B takes about 2 × parameters ≈ 16 "
                     "GFLOPs.", f"2 × 8e9 = {f8 / 1e9:.1f} GFLOPs (2 × 8.03e9 = {f8x / 1e9:.2f}); attention over "
                     f"the context adds {att_mid / 1e9:.1f} GFLOPs at {ctx_mid:,} tokens and {att_end / 1e9:.1f} at "
                     f"{ctx_end:,}", *_verdict(_rounds_to(f8x / 1e9, 16, 0), "the 2N rule counts the weights only; "
                                               "at this loop's context lengths attention adds "
                                               f"{att_mid / f8x:.0%}–{att_end / f8x:.0%} on top")))
    out.append(Claim("flops-deepseek", "§14.5.3", "DeepSeek-V3 with 37B active parameters takes about 74 GFLOPs per "
                     "token.", f"2 × 37e9 = {f37 / 1e9:.0f} GFLOPs (of 671B parameters only the active ones count)",
                     *_verdict(_rounds_to(f37 / 1e9, 74, 0))))
    t = 30 * 500
    p8, p37 = cost.decode_flops(8e9, t) / 1e15, cost.decode_flops(ds.active_params, t) / 1e15
    out.append(Claim("pflops", "§14.5.3", "30 turns × 500 output tokens = 15,000 tokens: ≈ 0.24 PFLOPs (Llama 3 8B) "
                     "and ≈ 1.11 PFLOPs (DeepSeek-V3).", f"{t:,} tokens: {p8:.3f} and {p37:.3f} PFLOPs "
                     f"(with 8.03e9: {cost.decode_flops(llama.active_params, t) / 1e15:.3f})",
                     *_verdict(_rounds_to(p8, 0.24, 2) and _rounds_to(p37, 1.11, 2))))
    g = cost.growth()
    fold = g.total_no_cache / t
    out.append(Claim("decode-vs-prefill-tokens", "§14.5.3", "Decoded tokens are two orders of magnitude fewer "
                     "than the 1.25M prefilled ones.", f"{g.total_no_cache:,} / {t:,} = {fold:.0f}×; against the "
                     f"cached prefill ({g.total_cache:,}) only {g.total_cache / t:.1f}×",
                     *_verdict(fold >= 50, f"{fold:.0f}× is just under two orders (100×), and it holds only "
                               "against the uncached prefill", "less than ~two orders of magnitude")))
    ai = cost.arithmetic_intensity(llama.active_params)
    ridge = H100_BF16_FLOPS / 3.35e12
    out.append(Claim("decode-memory-bound", "§14.5.3", "Decoding is limited by memory bandwidth, not compute.",
                     f"batch-1 BF16 decode does {ai:.1f} FLOP per byte of weights read; an H100 SXM needs "
                     f"{ridge:.0f} FLOP/byte (989 TFLOPS / 3.35 TB/s) to be compute-bound",
                     *_verdict(ai < ridge / 10, "at batch 1; batching B sequences multiplies the FLOPs per byte "
                               "by about B", "intensity is near the ridge point")))
    tps = cost.bandwidth_tokens_per_s(llama.active_params, 3.35e12)
    dec_s = t / tps
    pre_s = cost.decode_flops(llama.active_params, g.total_no_cache) / H100_BF16_FLOPS
    pre_c = cost.decode_flops(llama.active_params, g.total_cache) / H100_BF16_FLOPS
    out.append(Claim("decode-wall-clock", "§14.5.3", "In wall-clock time decode often dominates despite its few "
                     "tokens.", f"Llama 3 8B on one H100 SXM, batch 1: decode ≥ {dec_s:.0f} s ({tps:.0f} tok/s "
                     f"bandwidth bound); prefill ≥ {pre_s:.0f} s uncached / {pre_c:.1f} s cached at 100% of peak "
                     "FLOPs", *_verdict(dec_s > pre_c, "these are lower bounds from spec sheets at batch 1, not "
                                        "measurements; real prefill runs below peak FLOPs (uncached it can come "
                                        "close to decode), and batching raises decode throughput per GPU",
                                        "prefill is slower")))
    return out


# ================================================================ §14.5.4 p^k
def decay_claims() -> list[Claim]:
    book = {0.99: (0.904, 0.818, 0.605), 0.95: (0.599, 0.358, 0.077), 0.90: (0.349, 0.122, 0.005)}
    out = []
    for p, vals in book.items():
        for k, printed in zip(cost.BOOK_KS, vals):
            v = cost.success(p, k)
            out.append(Claim(f"table-{p:.2f}-{k}", "§14.5.4 table 14-11", f"p = {p:.2f} over {k} steps gives "
                             f"{printed:.3f}.", f"{p}^{k} = {v:.5f}", *_verdict(_rounds_to(v, printed, 3),
                             why_not=f"rounds to {v:.3f}")))
    need = cost.required_p(0.9, 20)
    out.append(Claim("inverse-0.9947", "§14.5.4", "For 0.9 over 20 steps each step needs 0.9^(1/20) = 0.9947.",
                     f"{need:.6f}", *_verdict(_rounds_to(need, 0.9947, 4))))
    out.append(Claim("error-rate", "§14.5.4", "So the per-step error rate must stay under 0.53%.",
                     f"1 − {need:.6f} = {1 - need:.4%}", *_verdict(_rounds_to((1 - need) * 100, 0.53, 2))))
    spe = cost.steps_per_error(need)
    out.append(Claim("one-per-190", "§14.5.4", "That is about one error per 190 steps.", f"1 / (1 − p) = {spe:.1f}",
                     *_verdict(185 <= spe <= 195, why_not=f"{spe:.0f}")))
    return out


# ================================================================ §14.5.2 tokens and rendering
def token_claims() -> list[Claim]:
    from .render import render, shared_prefix, tokenizer_for

    out = []
    tok = tokenizer_for("qwen3")
    added = tok.added_tokens_decoder
    tc = {t.content: (i, t.special) for i, t in added.items()}
    one = [len(tok.encode(s, add_special_tokens=False)) for s in ("<tool_call>", "</tool_call>")]
    out.append(Claim("tool-call-token", "§14.5.2", "<tool_call> and </tool_call> are each one added token with "
                     "special = false, not spelled out character by character.", f"ids {tc['<tool_call>'][0]}, "
                     f"{tc['</tool_call>'][0]}; special {tc['<tool_call>'][1]}, {tc['</tool_call>'][1]}; encode to "
                     f"{one} token(s)", *_verdict(one == [1, 1] and not tc["<tool_call>"][1] and not
                                                  tc["</tool_call>"][1], why_not="flags or lengths differ")))
    special = sorted((i, t.content) for i, t in added.items() if t.special)
    names = [c for _, c in special]
    control = all(c.startswith("<|") and c.endswith("|>") for c in names)
    out.append(Claim("special-set", "§14.5.2", "Only control tokens like <|im_start|> and <|im_end|> are marked "
                     "special; the tool and think tags are not.", f"special=true: {len(names)} tokens, ids "
                     f"{special[0][0]}–{special[-1][0]}: {', '.join(names)}",
                     *_verdict(control and "<|im_start|>" in names, "the true set also holds <|endoftext|> and the "
                               "vision/box placeholders (all <|…|> control-style); the <|fim_*|> ones are <|…|> "
                               "too but false. Flags read from the kit's offline tokenizer",
                               "a non-control token is special")))
    out.append(Claim("eos", "§14.5.2", "<|im_end|> is Qwen3's end-of-sequence token; generating it ends the request.",
                     f"tokenizer.eos_token = {tok.eos_token!r} (id {tok.eos_token_id})",
                     *_verdict(tok.eos_token == "<|im_end|>", "the kit's offline tokenizer sets it as Qwen3's "
                               "tokenizer_config does; generation configs also stop on <|endoftext|>")))
    from .tools import schemas

    r = render([{"role": "user", "content": "hi"}], schemas(), "qwen3")
    sys_turn = r.text.split("<|im_end|>", 1)[0]
    out.append(Claim("tools-in-system", "§14.5.2 step 1", "Qwen3's template writes the tool schemas as text into "
                     "the system turn; they are ordinary tokens paid on every request.",
                     f"tool block inside the first (system) turn: {'<tools>' in sys_turn}; {r.counts['tools']} "
                     f"tokens of {len(r)} for the kit's {len(schemas())} tools",
                     *_verdict(sys_turn.startswith("<|im_start|>system") and "<tools>" in sys_turn)))
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
                     *_verdict(users == 1 and blocks == 2 and "<|im_start|>tool" not in r2.text)))
    out.append(_prefix_extends_claim(render, shared_prefix, tokenizer_for))
    base = [{"role": "system", "content": "Current time: 2026-11-29T10:00:00\nYou are helpful."},
            {"role": "user", "content": "hi"}]
    later = [dict(base[0], content=base[0]["content"].replace("10:00:00", "10:00:07")), base[1]]
    a, b = render(base, schemas(), "qwen3"), render(later, schemas(), "qwen3")
    sp = shared_prefix(a, b)
    out.append(Claim("timestamp", "§14.5.8", "A timestamp at the start of the prompt makes the prefix cache hit "
                     "drop to (nearly) zero.", f"two renderings 7 s apart share {sp} of {len(a)} tokens",
                     *_verdict(sp < 0.05 * len(a), f"the {sp} tokens before the changed digit still match; "
                               "everything after it (tools included) is recomputed", "most of the prefix survives")))
    return out


def _prefix_extends_claim(render, shared_prefix, tokenizer_for) -> Claim:
    """Does request k+1 start with request k plus what the model wrote? That is what a full hit needs."""
    from .tools import schemas

    tools = schemas(["calculator"])
    user = [{"role": "user", "content": "250的15%是多少？"}]
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "250 * 15%"}}\n</tool_call>'
    rows = []
    for tpl in ("qwen2.5", "qwen3"):
        tok = tokenizer_for(tpl)
        first = render(user, tools, tpl)
        for label, written, reasoning in (("plain call", call, None),
                                          ("empty think + call", "<think>\n\n</think>\n\n" + call, None),
                                          ("think kept as reasoning_content", "<think>\nx\n</think>\n\n" + call, "x")):
            if tpl == "qwen2.5" and "think" in written:  # Qwen2.5 does not think
                continue
            seen = first.ids + tok.encode(written, add_special_tokens=False) + [tok.eos_token_id]
            msg = {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "250 * 15%"}}}]}
            if reasoning:
                msg["reasoning_content"] = reasoning
            nxt = render(user + [msg, {"role": "tool", "content": '{"result": 37.5}'}], tools, tpl)
            rows.append((tpl, label, shared_prefix(seen, nxt), len(seen)))
    ev = "; ".join(f"{t} {lab}: {s}/{n}" for t, lab, s, n in rows)
    plain_ok = all(s == n for t, lab, s, n in rows if lab != "empty think + call")
    broken = [(t, s, n) for t, lab, s, n in rows if lab == "empty think + call" and s < n]
    return Claim("prefix-extends", "§14.5.3/§14.5.8", "Inside one tool loop each request extends the previous "
                 "request plus the model's output, so the cache can serve all of it.",
                 f"reused/previous tokens — {ev}",
                 *_verdict(plain_ok, "holds when the history re-renders exactly what the model wrote; a think block "
                           "the host drops (empty, or not kept as reasoning_content) is not re-rendered, so the hit "
                           f"ends at that assistant turn ({broken[0][1]} of {broken[0][2]} in {broken[0][0]})"
                           if broken else "", "a plain call already breaks the prefix"))


# ================================================================ "Tool Use" §3.1 (Qwen2.5 printout)
def _tool_use_conversation():
    sys_msg = {"role": "system", "content": "你是一个计算助手。你可以调用外部工具。"}
    user = {"role": "user", "content": "250的15%是多少？"}
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_abc123xyz", "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "250 * 0.15"}'}}]}
    result = {"role": "tool", "tool_call_id": "call_abc123xyz", "name": "calculator", "content": "37.5"}
    answer = {"role": "assistant", "content": "250的15%是37.5。"}
    tools = [{"type": "function", "function": {"name": "calculator", "description": "计算数学表达式", "parameters": {
        "type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]
    return [sys_msg, user, call, result, answer], tools


def tool_use_claims() -> list[Claim]:
    from .render import render

    msgs, tools = _tool_use_conversation()
    r = {t: render(msgs, tools, t, add_generation_prompt=False) for t in ("qwen2.5", "qwen3")}
    out = []
    tool_turn = {t: "<|im_start|>tool" in x.text for t, x in r.items()}
    in_user = {t: "<|im_start|>user\n<tool_response>" in x.text for t, x in r.items()}
    out.append(Claim("tool-role-turn", "Tool Use §3.1", "The printed token sequence shows the result in its own "
                     "'<|im_start|>tool' turn.", "rendered: " + "; ".join(
                         f"{t}: tool turn {tool_turn[t]}, result in a user turn {in_user[t]}" for t in r),
                     *_verdict(all(tool_turn.values()), why_not="both Qwen2.5's and Qwen3's templates put tool "
                               "results in a user turn wrapped in <tool_response>; the 'tool' role exists only in "
                               "the API message list (as §14.5.2 step 5 says)")))
    body = {t: x.segment_text("tool_response") for t, x in r.items()}
    printed = '{"name": "calculator", "content": "37.5"}'
    out.append(Claim("tool-response-body", "Tool Use §3.1", f"Inside <tool_response> the template writes {printed}.",
                     "rendered bodies: " + "; ".join(f"{t}: {json.dumps(b[0] if b else '')}" for t, b in body.items()),
                     *_verdict(all(printed in (b[0] if b else "") for b in body.values()),
                               why_not="both templates write the message content as is (37.5); name and the "
                               "wrapper object are not added")))
    listed = {t: "<tools>\n[" in x.text or "<tools>[" in x.text for t, x in r.items()}
    out.append(Claim("tools-as-array", "Tool Use §3.1", "The tool definitions appear inside <tools> as one JSON array.",
                     "rendered: " + "; ".join(f"{t}: array {v}" for t, v in listed.items()),
                     *_verdict(all(listed.values()), why_not="both templates write one JSON object per tool, one "
                               "per line, with no enclosing [ ]")))
    args_obj = {t: '"arguments": {"expression": "250 * 0.15"}' in x.text for t, x in r.items()}
    out.append(Claim("arguments-object", "Tool Use §3.1", "With the message list as printed (arguments given as a JSON "
                     "string, OpenAI style), the token sequence shows arguments as a JSON object.",
                     "rendered: " + "; ".join(f"{t}: object {v}" for t, v in args_obj.items()),
                     *_verdict(args_obj["qwen2.5"], why_not="Qwen2.5's template applies tojson to the arguments, so a "
                               "string is written as an escaped string (\"{\\\"expression\\\": …}\"); pass a dict, or "
                               "use Qwen3's template, which passes strings through" +
                               (" (Qwen3 here: object)" if args_obj["qwen3"] else ""))))
    tok25 = r["qwen2.5"]
    n_tr = len([t for t in tok25.tokens if t.segment == "tool_response"])
    from .render import tokenize

    pieces = len(tokenize("<tool_response>", "qwen2.5").ids)
    out.append(Claim("qwen25-tool-response", "Tool Use §3.1", "The Qwen2.5 sequence wraps the result in "
                     "<tool_response> tags.", f"Qwen2.5: <tool_response> is {pieces} ordinary tokens (no added "
                     f"token), {n_tr} tokens for the wrapped result; Qwen3: 1 added token",
                     *_verdict("<tool_response>" in tok25.text, "in Qwen2.5 the tag is plain text split into "
                               f"{pieces} pieces; only Qwen3 added it as one token")))
    from . import host
    from .render import tokenizer_for

    tok = tokenizer_for("qwen2.5")
    ex = host.example("calculator")
    n0 = len(ex["messages"])
    backend = host.ScriptedBackend(tok, ['<tool_call>\n{"name": "calculator", "arguments": '
                                         '{"expression": "250 * 15%"}}\n</tool_call>', "250的15%是37.5。"])
    trace = host.run(backend, tok, ex["messages"], ex["tools"], template="qwen2.5", parallel=False)
    added = [m["role"] + ("(tool_calls)" if m.get("tool_calls") else "") for m in trace.messages[n0:]]
    out.append(Claim("two-messages", "Tool Use §3.1", "One tool call adds two messages: the assistant's call and a "
                     "'tool' message with the result; then the model answers.", f"host loop (scripted model) "
                     f"appended: {', '.join(added)}",
                     *_verdict(added[:2] == ["assistant(tool_calls)", "tool"] and added[-1] == "assistant")))
    return out


# ================================================================ §14.5.6 / Tool Use §3.2: MCP
def _probe_server():
    """Run a one-tool MCP server in-process and record what a client sees (no network, no subprocess)."""
    import concurrent.futures as cf
    import logging

    import anyio
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # the server logs the deliberate failure loudly
    srv = MCPServer("claims-probe")  # it also calls logging.basicConfig(INFO): undone below

    @srv.tool()
    def divide(a: float, b: float) -> float:
        """Divides a by b."""
        return a / b

    seen = {}

    async def main():
        for mode in ("legacy", "auto"):
            async with Client(srv, mode=mode) as c:
                listed = await c.list_tools()
                bad = await c.call_tool("divide", {"a": 1, "b": 0})
                unknown = await c.call_tool("no_such_tool", {})
                seen[mode] = dict(version=c.protocol_version,
                                  tool_keys=sorted(listed.tools[0].model_dump(by_alias=True, exclude_none=True)),
                                  error=bad.is_error, unknown=unknown.is_error)

    try:  # in a thread of its own: Jupyter already runs an event loop in the main thread
        with cf.ThreadPoolExecutor(1) as pool:
            pool.submit(anyio.run, main).result()
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
    return seen


def mcp_claims() -> list[Claim]:
    from importlib.metadata import version

    import mcp.types as mt
    from mcp.types import methods, version as v

    sdk = f"mcp {version('mcp')}"
    out = []
    example = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "get_weather", "arguments": {"location": "New York"}}}
    req = mt.JSONRPCRequest.model_validate(example)
    call = mt.CallToolRequest.model_validate({"method": req.method, "params": req.params})
    out.append(Claim("jsonrpc", "§14.5.6; Tool Use §3.2", "MCP messages are JSON-RPC 2.0; a tool call is "
                     "method tools/call with params name and arguments.", f"{sdk}: JSONRPC_VERSION = "
                     f"{mt.JSONRPC_VERSION!r}; the book's example validates as JSONRPCRequest and CallToolRequest "
                     f"(name={call.params.name!r}, arguments={call.params.arguments})",
                     *_verdict(mt.JSONRPC_VERSION == "2.0")))
    probe = _probe_server()
    keys = mt.Tool(name="t", description="d", input_schema={"type": "object"}).model_dump(by_alias=True)
    extra = sorted(set(keys) - {"name", "description", "inputSchema"})
    out.append(Claim("tools-list-fields", "§14.5.6; Tool Use §3.2", "tools/list returns tools with name, "
                     "description and inputSchema (the JSON Schema a template renders into the prompt).",
                     f"{sdk} Tool wire fields: {sorted(keys)}; a live in-process server listed "
                     f"{probe['legacy']['tool_keys']}", *_verdict(
                         {"name", "description", "inputSchema"} <= set(keys), "those three are the core; the SDK's "
                         f"Tool also has optional {', '.join(extra)}", "a field is missing")))
    res = mt.CallToolResult(content=[], is_error=True).model_dump(by_alias=True)
    out.append(Claim("is-error", "§14.5.6", "A tool's own failure comes back as a normal result with isError = true "
                     "(the model sees it); protocol failures are JSON-RPC errors.", f"CallToolResult wire fields "
                     f"{sorted(res)}; live server: a tool raising ZeroDivisionError → isError "
                     f"{probe['legacy']['error']}; JSONRPCError type present: {hasattr(mt, 'JSONRPCError')}",
                     *_verdict("isError" in res and probe["legacy"]["error"] and probe["auto"]["error"],
                               "this SDK's server also reports an unknown tool name as isError="
                               f"{probe['legacy']['unknown']} rather than as a JSON-RPC error"
                               if probe["legacy"]["unknown"] else "", "the failure did not set isError")))
    caps = set(mt.ServerCapabilities.model_fields)
    out.append(Claim("primitives", "§14.5.6; Tool Use §3.2", "Servers offer three kinds of things: tools, resources "
                     "and prompts, and declare which in their capabilities.", f"ServerCapabilities fields: "
                     f"{sorted(caps)}", *_verdict({"tools", "resources", "prompts"} <= caps)))
    import importlib.util as iu

    have = {name: iu.find_spec(mod) is not None for name, mod in
            (("stdio", "mcp.client.stdio"), ("Streamable HTTP", "mcp.client.streamable_http"),
             ("HTTP+SSE", "mcp.client.sse"))}
    out.append(Claim("transports", "§14.5.6; Tool Use §3.2", "The standard transports are stdio and Streamable HTTP.",
                     f"{sdk} client transports present: {have}",
                     *_verdict(have["stdio"] and have["Streamable HTTP"], "the SDK still ships an HTTP+SSE transport "
                               "too (see sse-deprecated)" if have["HTTP+SSE"] else "", "one is missing")))
    import inspect

    from mcp.server.mcpserver import MCPServer

    run_sig = str(inspect.signature(MCPServer.run))
    out.append(Claim("sse-deprecated", "§14.5.6", "HTTP+SSE was replaced by Streamable HTTP and is deprecated, kept "
                     "only for backward compatibility.", f"{sdk}: mcp.client.sse present {have['HTTP+SSE']}; "
                     f"MCPServer.run{run_sig}", *_verdict(True, "the deprecation is the specification's; this SDK "
                                                          "still offers 'sse' beside 'streamable-http' without marking "
                                                          "it deprecated in code, so the SDK cannot confirm it")))
    handshake = sorted({m for m, ver in methods.CLIENT_REQUESTS if ver == v.LATEST_HANDSHAKE_VERSION})
    modern = sorted({m for m, ver in methods.CLIENT_REQUESTS if ver == v.LATEST_PROTOCOL_VERSION})
    out.append(Claim("initialize-era", "Tool Use §3.2", "Every connection starts with an initialize request "
                     "(protocolVersion, capabilities, clientInfo), then lists tools, then calls them.",
                     f"{sdk}: revisions {', '.join(v.KNOWN_PROTOCOL_VERSIONS)}; initialize exists for "
                     f"{v.OLDEST_SUPPORTED_VERSION}…{v.LATEST_HANDSHAKE_VERSION} ({'initialize' in handshake}); "
                     f"latest {v.LATEST_PROTOCOL_VERSION} has initialize: {'initialize' in modern}, has "
                     f"server/discover: {'server/discover' in modern}; live client negotiated "
                     f"{probe['legacy']['version']} (legacy) and {probe['auto']['version']} (auto)",
                     *_verdict("initialize" in handshake, "true of the handshake revisions up to "
                               f"{v.LATEST_HANDSHAKE_VERSION}; the latest revision {v.LATEST_PROTOCOL_VERSION} drops "
                               "initialize for an optional server/discover and per-request _meta"
                               if "initialize" not in modern else "", "no initialize in any revision")))
    out.append(Claim("versions-perishable", "§14.5.6", "Protocol revision numbers and field sets change; check the "
                     "current revision instead of memorising them.", f"{sdk} knows {len(v.KNOWN_PROTOCOL_VERSIONS)} "
                     f"revisions ({v.KNOWN_PROTOCOL_VERSIONS[0]} … {v.LATEST_PROTOCOL_VERSION}); the latest changed "
                     "the request set (initialize, ping, logging/setLevel removed)",
                     *_verdict(len(v.KNOWN_PROTOCOL_VERSIONS) > 1 and handshake != modern)))
    out.append(Claim("mcp-2024", "§14.5.6", "MCP dates from 2024.", f"oldest revision the SDK knows: "
                     f"{v.KNOWN_PROTOCOL_VERSIONS[0]}", *_verdict(v.KNOWN_PROTOCOL_VERSIONS[0].startswith("2024"),
                                                                  "the SDK shows the first revision's date; who "
                                                                  "proposed it is not checkable here")))
    return out


# ================================================================ ledger
GROUPS = (cost_claims, tool_cost_claims, flops_claims, decay_claims, token_claims, tool_use_claims, mcp_claims)


def check_all() -> list[Claim]:
    return [c for group in GROUPS for c in group()]


def to_markdown(claims: list[Claim]) -> str:
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    lines = ["# Claims ledger", "", "Generated by `python -m toolkit claims --write` (also by `python -m toolkit "
             "figures`). Each claim is restated in our words with its section (§14.5.x: the book; Tool Use §3.x: "
             "the second chapter), then checked by running code.", "",
             "Summary: " + ", ".join(f"{n} {v}" for v, n in counts.items()), "",
             "| id | section | claim | evidence | verdict | why |", "|---|---|---|---|---|---|"]
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines += [f"| {c.id} | {c.section} | {esc(c.claim)} | {esc(c.evidence)} | **{c.verdict}** | {esc(c.why)} |"
              for c in claims]
    return "\n".join(lines) + "\n"


def write_markdown(path: str | Path = "figures/claims.md", claims: list[Claim] | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_markdown(claims if claims is not None else check_all()), encoding="utf-8")
    return path


def _print(claims: list[Claim]) -> None:
    mark = {HOLDS: "✓", CAVEAT: "~", FAILS: "✗"}
    for c in claims:
        print(f"{mark[c.verdict]} [{c.verdict}] {c.section} — {c.claim}")
        print(f"    evidence: {c.evidence}")
        if c.why:
            print(f"    why: {c.why}")
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    print("\n" + ", ".join(f"{n} {v}" for v, n in counts.items()) + f" ({len(claims)} claims)")


def cli(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m toolkit claims", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the ledger as JSON")
    ap.add_argument("--write", nargs="?", const="figures/claims.md", default=None, metavar="PATH",
                    help="also write Markdown (default figures/claims.md)")
    args = ap.parse_args(argv)
    claims = check_all()
    if args.json:
        print(json.dumps([asdict(c) for c in claims], ensure_ascii=False, indent=1))
    else:
        _print(claims)
    if args.write:
        print(f"wrote {write_markdown(args.write, claims)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
