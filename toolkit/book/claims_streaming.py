"""§14.5.8's "streaming does not change any of the mechanisms above", checked on the kit's stream parser (random
chunkings, computed here) and on vLLM's own streaming parser replayed on the same generations (a saved run).

What it does
- ``stream_chunkings`` (computed on every run): the real generations with ``<tool_call>`` blocks from the saved BFCL
  runs plus :data:`HARD` (a tag inside ``<think>``, empty arguments, braces and quotes in strings, two calls back to
  back, a call after text, a stream cut mid-call), each cut :data:`PER_TEXT` times at seeded random places (one
  character at a time once), read by ``toolkit.streamparse`` and compared with ``toolkit.parse``'s one-shot parse.
- ``stream_replay``: ``benchmarks/results/stream_replay.json`` (``benchmarks/stream_replay.py``): vLLM's hermes
  parser on the same generations in the same chunkings, its differing streams by cause, and the cases whose result
  depends on the chunking.
- ``streaming-same-mechanism``: holds when the kit's streamed calls and text equal the one-shot parse on every
  chunking (at least 10,000); a caveat names what the vLLM replay found: where vLLM's result changes with the
  chunking alone, where its streamed result differs from its own one-shot ``extract_tool_calls`` on the same text
  (both: streaming itself changing what the client gets), and how many streams differ from the kit's one-shot
  parse for any cause. It supports the statement: its main check, ``served-stream``
  (``toolkit.book.claims_serving``), shows a served model streams the same tokens; this one, that the same tokens
  are read as the same calls.

What it leaves out
- Running vLLM: the replay is read from its saved result (it needs vLLM's own venv); without it the check says so.
"""

from __future__ import annotations

import json
import random

from toolkit.book.ledger import BOOK, make_verdict
from toolkit.book.registry import Group, NotCheckable, loader
from toolkit.eval.read import call_texts
from toolkit.parse import parse_tool_calls
from toolkit.paths import saved_json
from toolkit.streamparse import assemble, stream_events

STREAMING = Group("streaming")
PER_TEXT = 70
MIN_CHUNKINGS = 10_000
HARD = (
    '<think>maybe <tool_call>{"name": "f", "arguments": {}}</tool_call> no</think>The answer is 4.',
    '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
    '<tool_call>\n{"name": "echo", "arguments": {"s": "a}{\\"]\\\\[", "t": "</tool"}}\n</tool_call>',
    '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>',
    'Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "北京"}}\n</tool_call>',
    'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Par',
)


def _texts() -> list[str]:
    found: set[str] = set()
    for name in ("bfcl_qwen2.5-coder-0.5b.json", "bfcl_qwen2.5-coder-0.5b+lora.json"):
        found |= call_texts(saved_json(name))
    return sorted(found)[:150] + list(HARD)


@loader
def stream_chunkings() -> dict:
    """Every text cut one character at a time and :data:`PER_TEXT` times at random: streamed vs one-shot."""
    texts = _texts()
    rng = random.Random(14_5_8)
    total, equal, bad = 0, 0, []
    for text in texts:
        cuts_list = [list(range(1, len(text)))] + [
            sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(1, 16)))) for _ in range(PER_TEXT)
        ]
        one = parse_tool_calls(text)
        for cuts in cuts_list:
            chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
            total += 1
            if assemble(stream_events(chunks)) == one:
                equal += 1
            elif len(bad) < 3:
                bad.append(text[:80])
    return {"texts": len(texts), "real": len(texts) - len(HARD), "chunkings": total, "equal": equal, "bad": bad}


@loader
def stream_replay() -> dict:
    saved = saved_json("stream_replay.json")
    if saved is None:
        raise NotCheckable("benchmarks/results/stream_replay.json is missing: run benchmarks/stream_replay.py")
    return saved


@STREAMING(
    "streaming-same-mechanism",
    f"{BOOK}.8",
    "Streaming does not change any of the mechanisms above: the host still parses the same calls from the same text.",
    supports=("流式…不改变上面任何一条机制",),  # the main check is served-stream (claims_serving): same tokens
)
def streaming_same_mechanism(stream_chunkings, stream_replay):
    s, r = stream_chunkings, stream_replay
    ran_vllm = r.get("worker", {}).get("vllm")
    causes = ", ".join(f"{t['cause']} {t['streams']}" for t in r.get("table", []))
    dep = r.get("chunking_dependent", {}).get("cases", 0)
    differ, streams = r.get("vllm_differences", 0), r.get("streams", 0)
    own = r.get("vllm_stream_vs_own_one_shot")  # streamed vs the same parser's own one-shot result
    evidence = (
        f"kit: {s['equal']} of {s['chunkings']} random chunkings of {s['texts']} generations ({s['real']} real) "
        f"stream to exactly the one-shot parse"
        + (f" (first that does not: {json.dumps(s['bad'], ensure_ascii=False)})" if s["bad"] else "")
        + (
            f"; vLLM {ran_vllm}'s hermes parser on {r['streams']} streams of {r['cases']} cases "
            f"(saved {r['date'][:10]}, commit {r['commit']}): {r['vllm_differences']} differ from the one-shot parse "
            f"({causes}); {dep} case(s) get a different vLLM result in a different chunking"
            + (
                f"; streamed vs vLLM's own one-shot extract_tool_calls: {own} of {streams} streams differ"
                if own
                else ""
            )
            if ran_vllm
            else "; the vLLM replay was not run (no .venv-vllm where it was saved)"
        )
    )
    return (
        evidence,
        *make_verdict(
            s["equal"] == s["chunkings"] and s["chunkings"] >= MIN_CHUNKINGS,
            f"the kit's streamed parse differs from the one-shot parse, or fewer than {MIN_CHUNKINGS} chunkings ran",
            [
                (
                    bool(ran_vllm) and dep > 0,
                    f"holds for the kit's loop; a server's streaming parser can change it: vLLM's hermes parser "
                    f"gives {dep} case(s) different calls depending only on where the stream was cut",
                ),
                (
                    bool(ran_vllm) and bool(own),
                    f"vLLM's hermes parser, streamed, says something else than its own one-shot parse of the same "
                    f"text on {own} of {streams} streams (a malformed or cut call streamed as a call, arguments "
                    "before the name streamed into the arguments, a name's JSON escapes kept)",
                ),
                (
                    bool(ran_vllm) and differ > 0,
                    f"vLLM's hermes parser streams something other than the one-shot parse on {differ}"
                    f" of {streams} streams (content after a call dropped, cut and malformed calls sent as calls)",
                ),
                (not ran_vllm, "vLLM's own streaming parser was not replayed"),
            ],
        ),
    )
