"""Where the kit keeps things outside the repo, and whether the hub can be reached.

What it does
- ``cache_dir()``: ``~/.cache/toolcall-kit`` (or ``$TOOLKIT_CACHE``): built tokenizers, the converted real model,
  the notes sandbox.
- ``hub_reachable()``: never hangs (``HF_HUB_OFFLINE=1`` answers at once, otherwise one TCP connect with a timeout).
- ``data_file(name)``: a file shipped inside the package (``toolkit/data/``), read with ``importlib.resources`` so it
  works from a wheel as well as from a checkout.

What it leaves out
- Downloading anything (``toolkit.fetch`` does that) and any cache eviction.
"""

from __future__ import annotations

import os
import socket
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path


def cache_dir() -> Path:
    """Where built tokenizers and converted models live (outside the repo)."""
    root = Path(os.environ.get("TOOLKIT_CACHE", Path.home() / ".cache" / "toolcall-kit"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def hub_reachable(timeout: float = 3.0) -> bool:
    """False at once when HF_HUB_OFFLINE is set, else whether huggingface.co:443 answers within ``timeout``."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    try:
        with socket.create_connection(("huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


def data_file(name: str) -> Traversable:
    """A file shipped inside the package, under ``toolkit/data/`` (a wheel carries it; no repo checkout needed)."""
    return files("toolkit") / "data" / name


def package_text(*parts: str) -> str:
    """The text of a file shipped inside the package, e.g. ``package_text("templates", "qwen3.jinja")``."""
    return files("toolkit").joinpath(*parts).read_text(encoding="utf-8")
