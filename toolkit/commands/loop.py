"""``python -m toolkit loop``: run the host loop on an example and print its steps."""

from __future__ import annotations

import json

from toolkit import cliargs
from toolkit.artifact import ArtifactError
from toolkit.backends import http, http_chat
from toolkit.conversations import LOOP_EXAMPLES
from toolkit.schema import openai_schema
from toolkit.settings import MODEL_MAX_NEW_TOKENS, STAND_IN_SETTINGS, LoopConfig
from toolkit.tokenizer import qwen_tokenizer
from toolkit.tools import TOOLS
from toolkit.untrusted import UntrustedInputError, decode

TOOL_MODES = ("auto", "required", "none")  # or a mounted tool's name (the loop's check_tool_choice agrees)


def _epilog(argv: list[str]) -> str | None:
    """The loop's rule, for --help only: it lives in toolkit.loop.loop, which imports xgrammar and torch."""
    if not {"-h", "--help"} & set(argv):
        return None
    from toolkit.loop.loop import RULE  # lazy: heavy (xgrammar, torch); only a help request pays for it

    return f"Rule printed in every trace: {RULE}"


def cli(argv: list[str]) -> int:
    p = cliargs.Parser(
        prog="python -m toolkit loop",
        description="Run the host loop on your question (or an example) with the kit's demo tools.",
        epilog=_epilog(argv),
    )
    p.add_argument("question", nargs="?", help="what to ask (quote it); or use --example")
    p.add_argument("--example", choices=sorted(LOOP_EXAMPLES), default=None)
    p.add_argument(
        "--tools",
        type=cliargs.one_of(TOOLS, "tool"),
        default=None,
        help=f"comma-separated tools to mount (default all: {','.join(TOOLS)})",
    )
    p.add_argument("--tool-choice", default="auto", help="auto | required | none | a mounted tool's name")
    p.add_argument(
        "--model",
        type=cliargs.model,
        default="auto",
        help="auto | stand-in | qwen2.5-coder-0.5b | folder (default auto)",
    )
    p.add_argument("--constrain", choices=["tag", "none"], default="tag")
    p.add_argument(
        "--answer-prefix",
        default=None,
        help="text that starts the answer when the rule says so; default 'auto' (by the question's language); '' for none",
    )
    p.add_argument("--no-reuse", action="store_true", help="prefill the whole prompt every turn")
    p.add_argument(
        "--max-turns", type=cliargs.count(1, 20), default=LoopConfig.max_turns, help="model turns (default %(default)s)"
    )
    p.add_argument(
        "--max-new-tokens",
        type=cliargs.count(1, 4096),
        default=None,
        help=f"per turn (default {MODEL_MAX_NEW_TOKENS}; stand-in {STAND_IN_SETTINGS['max_new_tokens']})",
    )
    p.add_argument(
        "--backend",
        default=None,
        help=f"an OpenAI-compatible server's base URL, e.g. http://127.0.0.1:8000/v1 (default: ${http.ENV} if set); "
        "the model is the server's",
    )
    p.add_argument("--backend-mode", choices=http.MODES, default="tokens", help="tokens (kit renders) | chat")
    p.add_argument(
        "--timeout", type=cliargs.count(1, 3600), default=int(http.DEFAULT_TIMEOUT_S), help="seconds per request"
    )
    p.add_argument("--json", action="store_true", help="print the steps as JSON")
    a = p.parse_args(argv)
    # Everything a user typed is checked before the loop's modules (xgrammar, torch) import and a model loads.
    if (a.question is None) == (a.example is None):
        p.error("give a question or --example NAME (one of them)")
    if a.question is not None and not a.question.strip():
        p.error("the question is empty")
    try:  # bytes that are not UTF-8 reach argv as lone surrogates: refused here, not as a traceback in the tokenizer
        a.question = None if a.question is None else decode(a.question, "the question")
    except UntrustedInputError as e:
        p.error(str(e))
    if a.example and a.tools:
        p.error("--tools goes with a question; an example brings its own tools")
    names = a.tools if a.question is not None and a.tools else LOOP_EXAMPLES[a.example]["tools"] if a.example else TOOLS
    if a.tool_choice not in TOOL_MODES and a.tool_choice not in names:
        p.error(
            f"tool_choice must be one of {list(TOOL_MODES)} or a mounted tool's name {sorted(names)}, "
            f"got {a.tool_choice[:60]!r}"
        )
    try:
        url = http.check_url(a.backend) if a.backend else http.from_env()
    except ValueError as e:
        p.error(f"--backend / ${http.ENV}: {e}")
    if url is not None and a.model != "auto":
        p.error("--model and --backend exclude each other: the server decides the model")

    # lazy: these import xgrammar and torch (~14 s on a busy machine); a usage error above never waits for them
    from toolkit.loop.examples import MAX_QUESTION_CHARS, ask, example, pick_tools
    from toolkit.loop.loop import RULE, check_tool_choice

    if a.question is not None and len(a.question) > MAX_QUESTION_CHARS:
        p.error(f"the question is {len(a.question)} characters; at most {MAX_QUESTION_CHARS}")
    try:
        mounted = pick_tools(a.tools) if a.question is not None else example(a.example)["tools"]
        choice = check_tool_choice(a.tool_choice, mounted)
    except ValueError as e:
        p.error(str(e))
    if url is not None:
        return _served(a, p, url, mounted, choice)
    import torch  # torch loads only after the arguments are checked

    from toolkit.backends import choose  # lazy: torch and transformers, after the arguments are checked

    torch.manual_seed(0)
    try:
        chosen = choose.choose(a.model, quiet=a.json, reuse=not a.no_reuse)  # no server here: the local model
    except ArtifactError as e:
        cliargs.damaged(p, e)
    except (OSError, ConnectionError, ValueError) as e:
        p.error(f"could not load model {a.model!r}: {str(e).splitlines()[0][:300]}")
    loaded, messages = chosen.loaded, example(a.example)["messages"] if a.example else a.question
    settings = _settings(a, chosen.settings, choice)
    trace = ask(messages, loaded, tools=mounted, reuse=not a.no_reuse, config=settings)
    if a.json:
        out = trace.to_json()
        out.update(semantic=loaded.semantic, settings=settings.values(), settings_from=settings.sources())
        out.update(tools=list(mounted), rule=RULE)
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
        return 0
    print(f"model: {loaded.description}")
    if not loaded.semantic:
        print("NOTE: random weights — the calls below are well-formed but meaningless (mechanics only).")
    print(f"tools: {', '.join(mounted)} | settings: {settings.describe()}\nrule: {RULE}")
    for s in trace.steps:
        if s.lines():
            print(s.lines())
    print(f"answer: {trace.answer}")
    return 0


def _settings(a, cfg: LoopConfig, choice) -> LoopConfig:
    """The model's settings with what the command line sets (the same for a local and a served model)."""
    kw = dict(constrain=a.constrain, max_turns=a.max_turns, tool_choice=choice)
    if a.max_new_tokens:
        kw["max_new_tokens"] = a.max_new_tokens
    if a.answer_prefix is not None:
        kw["answer_prefix"] = a.answer_prefix or None
    return cfg.but("command line", **kw)


def _served(a, p, url: str, mounted: dict, choice) -> int:
    """The same loop against a server (toolkit.backends.http); every failure is one line, exit 1."""
    from toolkit.backends import choose  # lazy, as in cli: torch and transformers
    from toolkit.loop.examples import example  # lazy: xgrammar and torch
    from toolkit.loop.loop import RULE, run  # lazy: xgrammar and torch

    messages = example(a.example)["messages"] if a.example else [{"role": "user", "content": a.question}]
    try:
        info = http.probe(url, timeout_s=min(a.timeout, http.PROBE_TIMEOUT_S))
        template = choose.template_of(info.model)  # the served folder's config.json, else the model's name
        tokenizer = qwen_tokenizer(template)
        settings = _settings(a, LoopConfig.for_model(choose.Served(info, tokenizer, template)), choice)
        notes = []
        if a.backend_mode == "chat":
            notes.append("chat mode: the server renders and parses; no grammar, no answer prefix")
            settings = settings.but("chat mode (the server renders and parses)", constrain="none", answer_prefix=None)
        schemas = [openai_schema(t) for t in mounted.values()]
        backend = http_chat.backend_from(url, tokenizer, mode=a.backend_mode, messages=messages, tools=schemas,
                                    timeout_s=a.timeout, info=info)  # fmt: skip
        trace = run(backend, tokenizer, messages, mounted, config=settings)
    except http.ServerError as e:
        p.exit(1, f"{p.prog}: server error ({e.kind}): {e}\n")
    notes += backend.notes
    if a.json:
        out = trace.to_json()
        out.update(server=info.description, url=url, mode=a.backend_mode, notes=notes, rule=RULE)
        out.update(settings=settings.values(), settings_from=settings.sources())
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
        return 0
    print(f"model: {info.model} | server: {url} ({info.kind}, {a.backend_mode} mode)")
    print(f"tools: {', '.join(mounted)} | settings: {settings.describe()}\nrule: {RULE}")
    for s in trace.steps:
        if s.lines():
            print(s.lines())
    for n in notes:
        print(f"note: {n}")
    print(f"answer: {trace.answer}")
    print(f"(model {info.model} served at {url})")
    return 0
