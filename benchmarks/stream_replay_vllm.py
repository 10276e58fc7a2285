"""The vLLM half of ``benchmarks/stream_replay.py``: runs inside vLLM's own venv (``.venv-vllm``), never imports the kit.

What it does
- Reads JSON lines ``{"id": ..., "chunks": [str, ...]}`` on stdin; for each, makes a fresh
  ``vllm.tool_parsers.hermes_tool_parser.Hermes2ProToolParser`` on the given tokenizer (the kit's offline Qwen2.5
  tokenizer folder) and feeds the chunks one by one to ``extract_tool_calls_streaming`` with ``previous_text``,
  ``current_text``, ``delta_text`` and their token ids, as vLLM's chat server does per detokenized delta.
- Writes one JSON line per stream: the concatenated ``content`` deltas, the calls reassembled from the
  ``DeltaToolCall`` deltas (index -> name, concatenated ``arguments`` text), the number of deltas, and
  ``one_shot``: the same parser's non-streaming ``extract_tool_calls`` on the whole text (content, calls), so
  streaming can be compared with vLLM's own one-shot result, not only the kit's.
- The first line it writes is ``{"ready": ..., "vllm": version, "parser": file}``.

What it leaves out
- A reasoning parser (vLLM's server runs one first only with ``--reasoning-parser``; the kit's server does not
  set it) and the serving layer's end-of-stream flush (``get_remaining_unstreamed_args``: for this parser the
  streamed arguments are what it recorded, so the flush adds nothing).
"""

import json
import os
import sys

USAGE = "usage: .venv-vllm/bin/python benchmarks/stream_replay_vllm.py TOKENIZER_FOLDER (benchmarks/stream_replay.py starts it)"


def _refuse(why: str) -> None:
    print(f"stream_replay_vllm.py: error: {why}"[:400], file=sys.stderr)
    sys.exit(2)  # a usage error, as argparse answers one


if __name__ == "__main__" and (len(sys.argv) != 2 or not os.path.isdir(sys.argv[1])):
    _refuse(USAGE)
try:
    import vllm
    from transformers import AutoTokenizer
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.tool_parsers import hermes_tool_parser
    from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser
except ImportError as e:
    _refuse(f"vLLM's own venv is needed ({e}); {USAGE}")


def _field(x, name):
    return x.get(name) if isinstance(x, dict) else getattr(x, name, None)


def replay(tokenizer, request, chunks):
    parser = Hermes2ProToolParser(tokenizer)
    previous, prev_ids, content, calls, n = "", [], [], {}, 0
    for delta in chunks:
        current = previous + delta
        delta_ids = tokenizer.encode(delta, add_special_tokens=False)
        msg = parser.extract_tool_calls_streaming(
            previous, current, delta, prev_ids, prev_ids + delta_ids, delta_ids, request
        )
        previous, prev_ids = current, prev_ids + delta_ids
        if msg is None:
            continue
        n += 1
        if msg.content:
            content.append(msg.content)
        for tc in msg.tool_calls or []:
            call = calls.setdefault(tc.index, {"name": None, "arguments": None})
            fn = tc.function
            name, args = _field(fn, "name"), _field(fn, "arguments")
            if name and call["name"] is None:
                call["name"] = name
            if args is not None:
                call["arguments"] = (call["arguments"] or "") + args
    whole = Hermes2ProToolParser(tokenizer).extract_tool_calls(previous, request)
    one_shot = {
        "content": whole.content or "",
        "calls": [{"name": c.function.name, "arguments": c.function.arguments} for c in whole.tool_calls],
    }
    return {"content": "".join(content), "calls": [calls[i] for i in sorted(calls)], "deltas": n, "one_shot": one_shot}


def main():
    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
    request = ChatCompletionRequest(model="replay", messages=[{"role": "user", "content": "x"}])
    print(json.dumps({"ready": True, "vllm": vllm.__version__, "parser": hermes_tool_parser.__file__}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        try:
            out = replay(tokenizer, request, job["chunks"])
        except Exception as e:  # noqa: BLE001 - reported as a difference, never hidden
            out = {"content": "", "calls": [], "deltas": 0, "raised": f"{type(e).__name__}: {e}"[:300]}
        print(json.dumps({"id": job["id"], **out}, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
