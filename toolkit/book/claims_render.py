"""Claims about tokens and rendering (§14.5.2, "Tool Use" §3.1), checked with the offline tokenizers, the kit's
templates and the host loop.

The token facts (added tokens, special flags, eos) are read from sources independent of the kit's own tables: the
installed real model's tokenizer.json and generation_config.json, and the official Qwen3 template's golden
renderings. Leaves out: Qwen3's own tokenizer_config.json (not on this machine; Qwen2.5 shares its added tokens).
"""

from __future__ import annotations

import json

from toolkit.book.claims_tool_use import FORMAT_EXAMPLE
from toolkit.book.ledger import Claim, make_verdict
from toolkit.conversations import CALCULATOR, call_text
from toolkit.fetch import installed_folder, manifest
from toolkit.paths import kit_root
from toolkit.prefix import shared_prefix
from toolkit.render import render
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import schemas


# ================================================================ §14.5.2 tokens and rendering
def real_model_files() -> dict | None:
    """The installed real model's own files, independent of the kit's tables: its ``tokenizer.json`` (loaded with
    the ``tokenizers`` library itself), ``generation_config.json`` and the manifest of what the install changed.
    None when ``make real-model`` has not run."""
    folder = installed_folder()
    if folder is None:
        return None
    from tokenizers import Tokenizer  # lazy: only for the ledger's token claims

    tj = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    return dict(
        folder=folder.name,
        tokenizer=Tokenizer.from_file(str(folder / "tokenizer.json")),
        added={t["content"]: (t["id"], t["special"]) for t in tj["added_tokens"]},
        generation=json.loads((folder / "generation_config.json").read_text(encoding="utf-8")),
        reset=set((manifest() or {}).get("tokenizer", {}).get("special_flag_reset_to_false", [])),
    )


def qwen3_golden() -> list[dict]:
    """The official Qwen3 template's renderings kept as the golden fixtures (tests/fixtures/qwen3_golden.json):
    strings the published template produced, not the kit's template. Empty outside a checkout."""
    path = kit_root() / "tests" / "fixtures" / "qwen3_golden.json"
    return json.loads(path.read_text(encoding="utf-8"))["cases"] if path.exists() else []


def token_claims() -> list[Claim]:
    out = []
    real = real_model_files()
    golden = qwen3_golden()
    missing = "the real model's files are not installed (make real-model): no independent source on this machine"
    if real is None:
        for cid, step, claim in (
            (
                "tool-call-token",
                "§14.5.2 step 2",
                "<tool_call> and </tool_call> are each one added token, special = false.",
            ),
            ("special-set", "§14.5.2 step 2", "Only <|im_start|> / <|im_end|>-kind control tokens are special."),
            ("eos", "§14.5.2 step 3", "<|im_end|> is the end-of-sequence token; generating it ends the request."),
        ):
            out.append(
                Claim(cid, step, claim, "not checked", *make_verdict(real is None, missing, [(real is None, missing)]))
            )
    else:
        added, tk = real["added"], real["tokenizer"]
        one = [len(tk.encode(t, add_special_tokens=False).ids) for t in ("<tool_call>", "</tool_call>")]
        ids = [added[t][0] for t in ("<tool_call>", "</tool_call>")]
        flags = [added[t][1] for t in ("<tool_call>", "</tool_call>")]
        untouched = not set(ids) & real["reset"]
        src = f"the installed model's own tokenizer.json ({real['folder']}, read with the tokenizers library)"
        fam = (
            "checked on Qwen2.5's files, which carry the same added tokens 151643–151664 as Qwen3; Qwen3's own "
            "tokenizer_config.json is not on this machine"
        )
        out.append(
            Claim(
                "tool-call-token",
                "§14.5.2 step 2",
                "<tool_call> and </tool_call> are each one added token "
                "with special = false, not spelled out character by character.",
                f"{src}: ids {ids}, special {flags} (flags as the model file carried them: the install reset "
                f"none of these ids: {untouched}); each encodes to {one} token(s)",
                *make_verdict(
                    one == [1, 1] and flags == [False, False] and untouched,
                    "flags or lengths differ",
                    [(real["folder"].startswith("qwen2.5"), fam)],
                ),
            )
        )
        special = sorted((i, c) for c, (i, sp) in added.items() if sp)
        names = [c for _, c in special]
        control = all(c.startswith("<|") and c.endswith("|>") for c in names)
        tags = [c for c in added if not c.startswith("<|")]
        out.append(
            Claim(
                "special-set",
                "§14.5.2 step 2",
                "Only control tokens of the <|im_start|> / <|im_end|> kind are marked special; the tool tags are not.",
                f"{src}: special=true: {len(names)} tokens, ids {special[0][0]}–{special[-1][0]}, all <|…|> "
                f"control tokens: {control}; tag tokens ({', '.join(tags)}) special: "
                f"{sorted({added[c][1] for c in tags})}; ids whose flag the install reset: {sorted(real['reset'])}",
                *make_verdict(
                    control
                    and "<|im_start|>" in names
                    and "<|im_end|>" in names
                    and not any(added[c][1] for c in tags),
                    "a non-control token is special",
                    [(real["folder"].startswith("qwen2.5"), fam)],
                ),
            )
        )
        eos_id = real["generation"].get("eos_token_id")
        eos_ids = eos_id if isinstance(eos_id, list) else [eos_id]
        eos_text = [tk.id_to_token(i) for i in eos_ids]
        turns = []  # every assistant turn the official template rendered, less a trailing generation prompt
        for c in golden:
            parts = c["text"].split("<|im_start|>assistant")[1:]
            prompt = parts[-1].replace("<think>", "").replace("</think>", "").strip() if parts else "x"
            if not prompt:  # the generation prompt: a header with nothing rendered after it
                parts = parts[:-1]
            turns += parts
        closed = [seg.split("<|im_start|>")[0].rstrip("\n").endswith("<|im_end|>") for seg in turns]
        out.append(
            Claim(
                "eos",
                "§14.5.2 step 3",
                "<|im_end|> is Qwen3's end-of-sequence token; generating it ends the request.",
                f"{real['folder']}/generation_config.json: eos_token_id {eos_id} = {eos_text}; the official Qwen3 "
                f"template's golden renderings: every finished assistant turn closed by <|im_end|> in "
                f"{sum(closed)} of {len(closed)} cases",
                *make_verdict(
                    "<|im_end|>" in eos_text and all(closed),
                    "the generation config names another eos token, or a Qwen3 rendering closes a turn otherwise",
                    [
                        (not closed, "no Qwen3 golden renderings found (a checkout has them in tests/fixtures)"),
                        (real["folder"].startswith("qwen2.5"), fam),
                    ],
                ),
            )
        )
    r = render([{"role": "user", "content": "hi"}], schemas(), "qwen3")
    sys_turn = r.text.split("<|im_end|>", 1)[0]
    out.append(
        Claim(
            "tools-in-system",
            "§14.5.2 step 1",
            "Qwen3's template writes the tool schemas as text into "
            "the system turn; they are ordinary tokens paid on every request.",
            f"tool block inside the first (system) turn: {'<tools>' in sys_turn}; {r.counts['tools']} "
            f"tokens of {len(r)} for the kit's {len(schemas())} tools",
            *make_verdict(
                sys_turn.startswith("<|im_start|>system") and "<tools>" in sys_turn,
                "the tool block is not in the system turn",
            ),
        )
    )
    printed14 = (
        "# Tools",
        "You may call one or more functions to assist with the user query.",
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n" + FORMAT_EXAMPLE + "\n</tool_call><|im_end|>",
    )
    found = [x in sys_turn + "<|im_end|>" for x in printed14]
    out.append(
        Claim(
            "system-block-14.5.2",
            "§14.5.2 step 1",
            "The system block printed in step 1 (Tools header, "
            "signatures in <tools>, the call format inside <tool_call>) is what Qwen3's template writes.",
            f"printed pieces found verbatim in the kit's Qwen3 rendering: {sum(found)} of {len(found)}",
            *make_verdict(all(found), "a printed piece is not in the rendering"),
        )
    )
    msgs = [
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": c}}}
                for c in ("Paris", "Tokyo")
            ],
        },
        {"role": "tool", "content": '{"temp_c": 18}'},
        {"role": "tool", "content": '{"temp_c": 22}'},
    ]
    r2 = render(msgs, schemas(["get_weather"]), "qwen3")
    tail = r2.text.split("</tool_call><|im_end|>")[-1]
    users, blocks = tail.count("<|im_start|>user"), tail.count("<tool_response>")
    out.append(
        Claim(
            "tool-merge",
            "§14.5.2 step 5",
            "Qwen3 puts consecutive tool results into one user turn, "
            "each inside <tool_response>…</tool_response>; no 'tool' role reaches the token stream.",
            f"two tool messages → {users} user turn(s) with {blocks} <tool_response> blocks; "
            f"'<|im_start|>tool' in text: {'<|im_start|>tool' in r2.text}",
            *make_verdict(
                users == 1 and blocks == 2 and "<|im_start|>tool" not in r2.text,
                "the results are not merged into one user turn",
            ),
        )
    )
    out.append(
        Claim(
            "generation-prompt",
            "§14.5.2 step 5",
            "The rendering ends with <|im_start|>assistant\\n, the generation prompt the next turn continues from.",
            f"the rendering after the two tool results ends with {r2.text[-36:]!r}",
            *make_verdict(r2.text.endswith("<|im_start|>assistant\n"), "the rendering ends otherwise"),
        )
    )
    out.append(_prefix_extends_claim(render, shared_prefix, tokenizer_for))
    base = [
        {"role": "system", "content": "Current time: 2026-11-29T10:00:00\nYou are helpful."},
        {"role": "user", "content": "hi"},
    ]
    later = [dict(base[0], content=base[0]["content"].replace("10:00:00", "10:00:07")), base[1]]
    a, b = render(base, schemas(), "qwen3"), render(later, schemas(), "qwen3")
    sp = shared_prefix(a, b)
    out.append(
        Claim(
            "timestamp",
            "§14.5.8",
            "A timestamp at the start of the prompt makes the prefix cache hit drop to (nearly) zero.",
            f"two renderings 7 s apart share {sp} of {len(a)} tokens ({sp / len(a):.1%})",
            *make_verdict(sp < 0.05 * len(a), "most of the prefix survives"),
        )
    )
    # §14.5.8: compressing history changes the prefix and so breaks the cache
    hist = [
        {"role": "user", "content": f"step {i}: what is {i} * 7?"}
        if i % 2 == 0
        else {"role": "assistant", "content": f"{(i - 1) * 7}"}
        for i in range(12)
    ]
    full = render(hist + [{"role": "user", "content": "and now?"}], schemas(), "qwen3")
    squeezed = render(
        [{"role": "user", "content": "Summary of steps 0-5: products of 0..10 by 7."}]
        + hist[6:]
        + [{"role": "user", "content": "and now?"}],
        schemas(),
        "qwen3",
    )
    keep = shared_prefix(full, squeezed)
    tok3 = tokenizer_for("qwen3")
    before = len(tok3.encode(full.text[: full.text.index("step 0")], add_special_tokens=False))
    out.append(
        Claim(
            "compression-breaks-cache",
            "§14.5.8",
            "Compressing the history changes the prefix and so invalidates the cache: the two goals conflict.",
            f"12-message history vs the same with its "
            f"first 6 messages summarised: {keep} of {len(full)} tokens still shared; the first changed "
            f"message starts at token {before}",
            *make_verdict(
                keep <= before,
                "the cache survives the change",
                [
                    (
                        keep > len(full) / 2,
                        f"the cache is lost from the first changed message on; the {keep} "
                        "tokens before it (tool block included) still hit",
                    )
                ],
            ),
        )
    )
    return out


def _prefix_extends_claim(render, shared_prefix, tokenizer_for) -> Claim:
    """Does request k+1 start with what the cache holds after request k? The cache holds request k's prompt plus
    the generated tokens that were fed back in, i.e. all but the last sampled token (<|im_end|> is sampled and
    ends the request; it never runs through the model), exactly as ``toolkit.loop.loop`` counts reuse."""
    tools = schemas(["calculator"])
    user = [{"role": "user", "content": CALCULATOR["question"]}]
    call = call_text(CALCULATOR)
    rows = []
    for tpl in ("qwen2.5", "qwen3"):
        tok = tokenizer_for(tpl)
        first = render(user, tools, tpl)
        for label, written, reasoning in (
            ("plain call", call, None),
            ("empty think + call", "<think>\n\n</think>\n\n" + call, None),
            ("think kept as reasoning_content", "<think>\nx\n</think>\n\n" + call, "x"),
        ):
            if tpl == "qwen2.5" and "think" in written:  # Qwen2.5 does not think
                continue
            cached = first.ids + tok.encode(written, add_special_tokens=False)  # <|im_end|> sampled, not fed
            msg = {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": CALCULATOR["tool"], "arguments": CALCULATOR["arguments"]}}
                ],
            }
            if reasoning:
                msg["reasoning_content"] = reasoning
            nxt = render(user + [msg, {"role": "tool", "content": '{"result": 37.5}'}], tools, tpl)
            rows.append((tpl, label, min(shared_prefix(cached, nxt), len(cached)), len(cached), len(nxt)))
    ev = "; ".join(f"{t} {lab}: {s} of {n} cached tokens reused (next request {m})" for t, lab, s, n, m in rows)
    plain_ok = all(s == n for t, lab, s, n, m in rows if lab != "empty think + call")
    broken = [(t, s, n) for t, lab, s, n, m in rows if lab == "empty think + call" and s < n]
    return Claim(
        "prefix-extends",
        "§14.5.3/§14.5.8",
        "Inside one tool loop each request extends the previous "
        "request plus the model's output, so the cache can serve all of it.",
        ev,
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
