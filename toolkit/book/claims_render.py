"""Claims about tokens and rendering (§14.5.2, "Tool Use" §3.1), checked with the offline tokenizers, the kit's
templates and the host loop: one check per claim.

The token facts (added tokens, special flags, eos) are read from sources independent of the kit's own tables: the
installed real model's tokenizer.json and generation_config.json, and the official Qwen3 template's golden
renderings (``toolkit.book.evidence``: ``real_files``, ``golden``). Leaves out: Qwen3's own tokenizer_config.json
(not on this machine; Qwen2.5 shares its added tokens).
"""

from __future__ import annotations

from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.claims_tool_use import FORMAT_EXAMPLE
from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group
from toolkit.conversations import CALCULATOR, call_text
from toolkit.prefix import shared_prefix
from toolkit.render import render
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import schemas

TOKENS = Group("tokens")
TAGS = ("<tool_call>", "</tool_call>")
FAMILY = (
    "checked on Qwen2.5's files, which carry the same added tokens 151643–151664 as Qwen3; Qwen3's own "
    "tokenizer_config.json is not on this machine"
)


def _source(real_files) -> str:
    return f"the installed model's own tokenizer.json ({real_files['folder']}, read with the tokenizers library)"


# ================================================================ §14.5.2 tokens and rendering
@TOKENS(
    "tool-call-token",
    "§14.5.2 step 2",
    "<tool_call> and </tool_call> are each one added token with special = false, not spelled out character by "
    "character.",
    answers=(
        "没有新的模型结构",
        "模型生成的仍然是普通词元，执行由宿主完成",
        "<tool_call> 与 </tool_call> 各是一个新增词元",
        "special 字段为 false",
    ),
)
def tool_call_token(real_files):
    added, tk = real_files["added"], real_files["tokenizer"]
    one = [len(tk.encode(t, add_special_tokens=False).ids) for t in TAGS]
    ids, flags = [added[t][0] for t in TAGS], [added[t][1] for t in TAGS]
    untouched = not set(ids) & real_files["reset"]
    return (
        f"{_source(real_files)}: ids {ids}, special {flags} (flags as the model file carried them: the install reset "
        f"none of these ids: {untouched}); each encodes to {one} token(s)",
        *make_verdict(
            one == [1, 1] and flags == [False, False] and untouched,
            "flags or lengths differ",
            [(real_files["folder"].startswith("qwen2.5"), FAMILY)],
        ),
    )


@TOKENS(
    "special-set",
    "§14.5.2 step 2",
    "Only control tokens of the <|im_start|> / <|im_end|> kind are marked special; the tool tags are not.",
    answers=("标 true 的只有 <|im_start|> 与 <|im_end|> 一类控制词元",),
)
def special_set(real_files):
    added = real_files["added"]
    special = sorted((i, c) for c, (i, sp) in added.items() if sp)
    names = [c for _, c in special]
    control = all(c.startswith("<|") and c.endswith("|>") for c in names)
    tags = [c for c in added if not c.startswith("<|")]
    return (
        f"{_source(real_files)}: special=true: {len(names)} tokens, ids {special[0][0]}–{special[-1][0]}, all <|…|> "
        f"control tokens: {control}; tag tokens ({', '.join(tags)}) special: {sorted({added[c][1] for c in tags})}; "
        f"ids whose flag the install reset: {sorted(real_files['reset'])}",
        *make_verdict(
            control and "<|im_start|>" in names and "<|im_end|>" in names and not any(added[c][1] for c in tags),
            "a non-control token is special",
            [(real_files["folder"].startswith("qwen2.5"), FAMILY)],
        ),
    )


def closed_turns(golden: list[dict]) -> list[bool]:
    """For every finished assistant turn of the golden renderings (less a trailing generation prompt): is it
    closed by <|im_end|>?"""
    turns = []
    for c in golden:
        parts = c["text"].split("<|im_start|>assistant")[1:]
        prompt = parts[-1].replace("<think>", "").replace("</think>", "").strip() if parts else "x"
        if not prompt:  # the generation prompt: a header with nothing rendered after it
            parts = parts[:-1]
        turns += parts
    return [seg.split("<|im_start|>")[0].rstrip("\n").endswith("<|im_end|>") for seg in turns]


@TOKENS(
    "eos",
    "§14.5.2 step 3",
    "<|im_end|> is Qwen3's end-of-sequence token; generating it ends the request.",
    answers=("<|im_end|> 是 Qwen3 的 eos_token",),
)
def eos(real_files, golden):
    eos_id = real_files["generation"].get("eos_token_id")
    eos_text = [real_files["tokenizer"].id_to_token(i) for i in (eos_id if isinstance(eos_id, list) else [eos_id])]
    closed = closed_turns(golden)
    return (
        f"{real_files['folder']}/generation_config.json: eos_token_id {eos_id} = {eos_text}; the official Qwen3 "
        f"template's golden renderings: every finished assistant turn closed by <|im_end|> in {sum(closed)} of "
        f"{len(closed)} cases",
        *make_verdict(
            "<|im_end|>" in eos_text and all(closed),
            "the generation config names another eos token, or a Qwen3 rendering closes a turn otherwise",
            [
                (not closed, "no Qwen3 golden renderings found (a checkout has them in tests/fixtures)"),
                (real_files["folder"].startswith("qwen2.5"), FAMILY),
            ],
        ),
    )


def _system_turn():
    r = render([{"role": "user", "content": "hi"}], schemas(), "qwen3")
    return r, r.text.split("<|im_end|>", 1)[0]


@TOKENS(
    "tools-in-system",
    "§14.5.2 step 1",
    "Qwen3's template writes the tool schemas as text into the system turn; they are ordinary tokens paid on every "
    "request.",
    answers=(
        "把工具的 JSON Schema 逐个写进系统段",
        "工具定义就是普通文本，要占词元",
        "与任务难度无关，只与挂了多少工具有关，且每一轮都付一次",
    ),
    supports=(
        "没有新的模型结构",
        "inputSchema 就是…第 1 步要渲染进提示的那份 JSON Schema",
        "把远程工具包装成本地工具放到 Agent 的上下文提示中",
    ),
)
def tools_in_system():
    r, sys_turn = _system_turn()
    return (
        f"tool block inside the first (system) turn: {'<tools>' in sys_turn}; {r.counts['tools']} tokens of {len(r)} "
        f"for the kit's {len(schemas())} tools",
        *make_verdict(
            sys_turn.startswith("<|im_start|>system") and "<tools>" in sys_turn,
            "the tool block is not in the system turn",
        ),
    )


@TOKENS(
    "system-block-14.5.2",
    "§14.5.2 step 1",
    "The system block printed in step 1 (Tools header, signatures in <tools>, the call format inside <tool_call>) is "
    "what Qwen3's template writes.",
    answers=("# Tools … <tools> … <tool_call> 格式示例（系统段全文）",),
)
def system_block_14_5_2():
    printed14 = (
        "# Tools",
        "You may call one or more functions to assist with the user query.",
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n" + FORMAT_EXAMPLE + "\n</tool_call><|im_end|>",
    )
    found = [x in _system_turn()[1] + "<|im_end|>" for x in printed14]
    return (
        f"printed pieces found verbatim in the kit's Qwen3 rendering: {sum(found)} of {len(found)}",
        *make_verdict(all(found), "a printed piece is not in the rendering"),
    )


def two_results() -> str:
    """Two parallel get_weather calls and their two tool messages, rendered by the kit's Qwen3 template."""
    calls = [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": c}}} for c in ("Paris", "Tokyo")
    ]
    msgs = [
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": '{"temp_c": 18}'},
        {"role": "tool", "content": '{"temp_c": 22}'},
    ]
    return render(msgs, schemas(["get_weather"]), "qwen3").text


@TOKENS(
    "tool-merge",
    "§14.5.2 step 5",
    "Qwen3 puts consecutive tool results into one user turn, each inside <tool_response>…</tool_response>; no "
    "'tool' role reaches the token stream.",
    answers=(
        "Qwen3 把连续的 tool 消息合并进一个 user 轮次",
        "每条包在 <tool_response> 与 </tool_response> 之间",
        "“工具角色”…未必存在于最终的词元流里",
    ),
    supports=("宿主解析出多个调用后并行执行，再把多条结果合并回灌",),
)
def tool_merge():
    text = two_results()
    tail = text.split("</tool_call><|im_end|>")[-1]
    users, blocks = tail.count("<|im_start|>user"), tail.count("<tool_response>")
    return (
        f"two tool messages → {users} user turn(s) with {blocks} <tool_response> blocks; "
        f"'<|im_start|>tool' in text: {'<|im_start|>tool' in text}",
        *make_verdict(
            users == 1 and blocks == 2 and "<|im_start|>tool" not in text,
            "the results are not merged into one user turn",
        ),
    )


@TOKENS(
    "generation-prompt",
    "§14.5.2 step 5",
    "The rendering ends with <|im_start|>assistant\\n, the generation prompt the next turn continues from.",
    answers=("末尾的 <|im_start|>assistant\\n 是生成提示",),
)
def generation_prompt():
    text = two_results()
    return (
        f"the rendering after the two tool results ends with {text[-36:]!r}",
        *make_verdict(text.endswith("<|im_start|>assistant\n"), "the rendering ends otherwise"),
    )


@TOKENS(
    "prefix-extends",
    "§14.5.3/§14.5.8",
    "Inside one tool loop each request extends the previous request plus the model's output, so the cache can serve "
    "all of it.",
    supports=("带着更长的前缀重新走一次完整的前向", "第 6 步是一个新请求，只是前缀更长"),
)
def prefix_extends():
    rows = reuse_rows()
    plain_ok = all(s == n for t, lab, s, n, m in rows if lab != "empty think + call")
    broken = [(t, s, n) for t, lab, s, n, m in rows if lab == "empty think + call" and s < n]
    return (
        "; ".join(f"{t} {lab}: {s} of {n} cached tokens reused (next request {m})" for t, lab, s, n, m in rows),
        *make_verdict(
            plain_ok,
            "a plain call already breaks the prefix",
            [
                (
                    bool(broken),
                    "holds when the history re-renders exactly what the model wrote; a think block "
                    "the host drops (empty, or not kept as reasoning_content) is not re-rendered, so the hit ends "
                    f"at that assistant turn ({broken[0][1]} of {broken[0][2]} in {broken[0][0]})"
                    if broken
                    else "",
                )
            ],
        ),
    )


@TOKENS(
    "timestamp",
    "§14.5.8",
    "A timestamp at the start of the prompt makes the prefix cache hit drop to (nearly) zero.",
    answers=("在提示开头插入时间戳…命中率归零",),
)
def timestamp():
    base = [
        {"role": "system", "content": "Current time: 2026-11-29T10:00:00\nYou are helpful."},
        {"role": "user", "content": "hi"},
    ]
    later = [dict(base[0], content=base[0]["content"].replace("10:00:00", "10:00:07")), base[1]]
    a, b = render(base, schemas(), "qwen3"), render(later, schemas(), "qwen3")
    sp = shared_prefix(a, b)
    return (
        f"two renderings 7 s apart share {sp} of {len(a)} tokens ({sp / len(a):.1%})",
        *make_verdict(sp < 0.05 * len(a), "most of the prefix survives"),
    )


@TOKENS(
    "compression-breaks-cache",
    "§14.5.8",
    "Compressing the history changes the prefix and so invalidates the cache: the two goals conflict.",
    answers=("压缩会改变前缀，从而使缓存失效",),
)
def compression_breaks_cache(qwen3_tokenizer):
    hist = [
        {"role": "user", "content": f"step {i}: what is {i} * 7?"}
        if i % 2 == 0
        else {"role": "assistant", "content": f"{(i - 1) * 7}"}
        for i in range(12)
    ]
    now = [{"role": "user", "content": "and now?"}]
    full = render(hist + now, schemas(), "qwen3")
    summary = [{"role": "user", "content": "Summary of steps 0-5: products of 0..10 by 7."}]
    keep = shared_prefix(full, render(summary + hist[6:] + now, schemas(), "qwen3"))
    before = len(qwen3_tokenizer.encode(full.text[: full.text.index("step 0")], add_special_tokens=False))
    return (
        f"12-message history vs the same with its first 6 messages summarised: {keep} of {len(full)} tokens still "
        f"shared; the first changed message starts at token {before}",
        *make_verdict(
            keep <= before,
            "the cache survives the change",
            [
                (
                    keep > len(full) / 2,
                    f"the cache is lost from the first changed message on; the {keep} tokens before it (tool block "
                    "included) still hit",
                )
            ],
        ),
    )


def token_claims() -> list[Claim]:
    return TOKENS.run()


def reuse_rows() -> list[tuple]:
    """Does request k+1 start with what the cache holds after request k? The cache holds request k's prompt plus
    the generated tokens that were fed back in, i.e. all but the last sampled token (<|im_end|> is sampled and
    ends the request; it never runs through the model), exactly as ``toolkit.loop.loop`` counts reuse.
    One row per template and way of writing the call: (template, label, reused, cached, next request)."""
    tools, call = schemas(["calculator"]), call_text(CALCULATOR)
    user = [{"role": "user", "content": CALCULATOR["question"]}]
    fn = {"name": CALCULATOR["tool"], "arguments": CALCULATOR["arguments"]}
    rows = []
    for tpl in ("qwen2.5", "qwen3"):
        tok, first = tokenizer_for(tpl), render(user, tools, tpl)
        for label, written, reasoning in (
            ("plain call", call, None),
            ("empty think + call", "<think>\n\n</think>\n\n" + call, None),
            ("think kept as reasoning_content", "<think>\nx\n</think>\n\n" + call, "x"),
        ):
            if tpl == "qwen2.5" and "think" in written:  # Qwen2.5 does not think
                continue
            cached = first.ids + tok.encode(written, add_special_tokens=False)  # <|im_end|> sampled, not fed
            msg = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": fn}]}
            if reasoning:
                msg["reasoning_content"] = reasoning
            nxt = render(user + [msg, {"role": "tool", "content": '{"result": 37.5}'}], tools, tpl)
            rows.append((tpl, label, min(shared_prefix(cached, nxt), len(cached)), len(cached), len(nxt)))
    return rows
