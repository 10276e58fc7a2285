"""``python -m toolkit loop``: run the host loop on an example and print its steps."""

from __future__ import annotations

import argparse
import json
import os
import re

from toolkit.conversations import LOOP_EXAMPLES
from toolkit.loop.examples import MAX_QUESTION_CHARS, ask, example, pick_tools, settings_for
from toolkit.loop.loop import ANSWER_PREFIXES, DEFAULTS, RULE, check_tool_choice
from toolkit.models import REAL_OFFLINE, STAND_IN, load
from toolkit.tools import TOOLS


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would print the whole usage first)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(limit: int):
    def conv(text):
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not 1 <= n <= limit:
            raise argparse.ArgumentTypeError(f"{n} is not between 1 and {limit}")
        return n

    return conv


def cli(argv: list[str]) -> int:
    p = _Parser(
        prog="python -m toolkit loop",
        description="Run the host loop on your question (or an example) with the kit's demo tools.",
        epilog=f"Rule printed in every trace: {RULE}",
    )
    p.add_argument("question", nargs="?", help="what to ask (quote it); or use --example")
    p.add_argument("--example", choices=sorted(LOOP_EXAMPLES), default=None)
    p.add_argument("--tools", default=None, help=f"comma-separated tools to mount (default all: {','.join(TOOLS)})")
    p.add_argument("--tool-choice", default="auto", help="auto | required | none | a mounted tool's name")
    p.add_argument("--model", default="auto", help="auto | stand-in | qwen2.5-coder-0.5b | folder (default auto)")
    p.add_argument("--constrain", choices=["tag", "none"], default="tag")
    p.add_argument(
        "--answer-prefix",
        default=None,
        help="text that starts the answer when the rule says so; "
        f"default 'auto' (by the question's language: {ANSWER_PREFIXES}); '' for none",
    )
    p.add_argument("--no-reuse", action="store_true", help="prefill the whole prompt every turn")
    p.add_argument("--max-turns", type=_positive(20), default=DEFAULTS["max_turns"])
    p.add_argument("--max-new-tokens", type=_positive(4096), default=None, help="per turn (default 160; stand-in 48)")
    p.add_argument("--json", action="store_true", help="print the steps as JSON")
    a = p.parse_args(argv)
    # Everything a user typed is checked before a model loads.
    if (a.question is None) == (a.example is None):
        p.error("give a question or --example NAME (one of them)")
    if a.question is not None and not a.question.strip():
        p.error("the question is empty")
    if a.question is not None and len(a.question) > MAX_QUESTION_CHARS:
        p.error(f"the question is {len(a.question)} characters; at most {MAX_QUESTION_CHARS}")
    try:
        mounted = pick_tools(a.tools) if a.question is not None else example(a.example)["tools"]
        if a.example and a.tools:
            raise ValueError("--tools goes with a question; an example brings its own tools")
        choice = check_tool_choice(a.tool_choice, mounted)
    except ValueError as e:
        p.error(str(e))
    if not (
        a.model in ("auto", REAL_OFFLINE)
        or a.model.startswith(STAND_IN)
        or os.path.exists(a.model)
        or re.fullmatch(r"[\w.-]+/[\w.-]+", a.model)
    ):
        p.error(f"--model {a.model!r}: not auto, {STAND_IN}, {REAL_OFFLINE}, an existing folder/.gguf or a hub id")
    import torch  # torch loads only after the arguments are checked

    torch.manual_seed(0)
    try:
        loaded = load(a.model, quiet=a.json)
    except (OSError, ConnectionError, ValueError) as e:
        p.error(f"could not load model {a.model!r}: {str(e).splitlines()[0][:300]}")
    kw = dict(constrain=a.constrain, max_turns=a.max_turns, tool_choice=choice)
    if a.max_new_tokens:
        kw["max_new_tokens"] = a.max_new_tokens
    if a.answer_prefix is not None:
        kw["answer_prefix"] = a.answer_prefix or None
    messages = example(a.example)["messages"] if a.example else a.question
    settings = settings_for(loaded, **kw)
    trace = ask(messages, loaded, tools=mounted, reuse=not a.no_reuse, **kw)
    if a.json:
        out = trace.to_json()
        out.update(semantic=loaded.semantic, settings=settings, tools=list(mounted), rule=RULE)
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
        return 0
    print(f"model: {loaded.description}")
    if not loaded.semantic:
        print("NOTE: random weights — the calls below are well-formed but meaningless (mechanics only).")
    print(f"tools: {', '.join(mounted)} | settings: {settings}\nrule: {RULE}")
    for s in trace.steps:
        if s.lines():
            print(s.lines())
    print(f"answer: {trace.answer}")
    return 0
