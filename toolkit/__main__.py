"""Command line: ``python -m toolkit <command> ...`` for people without Jupyter.

Each command is one small module, ``toolkit/commands/<name>.py`` with ``cli(argv) -> int``, imported by name when
it is asked for (the one kit import that is not at the top of a file: a command loads only what it needs).
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "render": ("toolkit.commands.render", "render a conversation with tools into text and token ids"),
    "models": ("toolkit.commands.models", "install / inspect the optional real offline model"),
    "constrain": ("toolkit.commands.constrain", "sample outputs under a JSON-Schema grammar"),
    "loop": ("toolkit.commands.loop", "run the host execute-and-feed-back loop on an example"),
    "claims": ("toolkit.commands.claims", "check the chapters' numbers and claims"),
    "figures": ("toolkit.commands.figures", "regenerate the book's figures and their data"),
    "mcp": ("toolkit.commands.mcp", "serve the kit's tools over MCP / print wire logs"),
    "lint-tools": (
        "toolkit.commands.lint_tools",
        "check tool definitions against the description guidelines (exit 1 on errors)",
    ),
    "train": (
        "toolkit.commands.train",
        "fine-tune the stand-in with and without the SFT loss mask; compare what each learned",
    ),
    "rl": ("toolkit.commands.rl", "learn from a verifiable reward (GRPO) on the kit's tool environments"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for stream in (sys.stdout, sys.stderr):  # an ASCII-only terminal (LANG=C) cannot print "→" or 北京: escape them
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):  # a replaced stream (a test's capture) keeps its own settings
            pass
    if argv and argv[0] not in COMMANDS and argv[0] not in ("-h", "--help"):
        shown = argv[0] if len(argv[0]) <= 40 else argv[0][:40] + "…"
        print(
            f"python -m toolkit: error: unknown command {shown!r}; choose from {', '.join(COMMANDS)}", file=sys.stderr
        )
        return 2
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m toolkit <command> [options]\n\ncommands:")
        for name, (_, help_) in COMMANDS.items():
            print(f"  {name:<10} {help_}")
        return 0
    module = importlib.import_module(COMMANDS[argv[0]][0])
    try:
        rc = int(module.cli(argv[1:]) or 0)
        sys.stdout.flush()  # a full disk fails here, inside the try, not in the interpreter's exit
        return rc
    except BrokenPipeError:  # output piped into `head` & co.: stop quietly, as other command-line tools do
        sys.stderr.close()
        return 0
    except OSError as e:  # a full disk, a cache path that is a file, a read-only folder: one line, not a traceback
        where = f": {e.filename}" if e.filename else ""
        print(f"python -m toolkit {argv[0]}: {e.strerror or e}{where}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
