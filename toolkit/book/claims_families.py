"""§14.5.2's "where the tools go is the template's choice: Qwen3 puts them in the system segment, other models may
open a segment of their own", checked on the renderings of each family's own package (``toolkit.families``).

What it does
- ``tools-segment-per-family``: in each family's rendering of the same round trip, the segment marker (a role
  header or a section token) that stands last before the first tool definition — read from the rendered text, not
  from the families module's descriptions.

What it leaves out
- Families whose package is not installed here (they are named in the evidence, never guessed).
"""

from __future__ import annotations

import re

from toolkit.book.ledger import BOOK, make_verdict
from toolkit.book.registry import Group, loader
from toolkit.families import FamilyRendering, render_all

FAMILY_GROUP = Group("families")
# segment openers of the families' formats: role headers and section tokens
MARKERS = re.compile(
    r"<\|im_start\|>\w+|\[AVAILABLE_TOOLS\]|\[INST\]|\[SYSTEM_PROMPT\]|<\|start_header_id\|>\w+|<\|start\|>\w+"
)


@loader
def family_renderings() -> dict:
    return render_all("weather")


def tools_segment(text: str, tool: str = "get_weather") -> str | None:
    """The last segment marker before the first mention of ``tool`` (its definition comes before any call)."""
    at = text.find(tool)
    found = [m.group(0) for m in MARKERS.finditer(text[:at])] if at >= 0 else []
    return found[-1] if found else None


@FAMILY_GROUP(
    "tools-segment-per-family",
    f"{BOOK}.2",
    "Where the tool definitions go is decided by the chat template: Qwen3 puts them in the system segment; other "
    "models may open a segment of their own.",
    answers=("放在哪里由模板决定…别的模型可能另开一段",),
)
def tools_segment_per_family(family_renderings):
    seen = {f: tools_segment(r.text) for f, r in family_renderings.items() if isinstance(r, FamilyRendering)}
    missing = sorted(f for f, r in family_renderings.items() if not isinstance(r, FamilyRendering))
    qwen = seen.get("qwen3")
    others = {f: s for f, s in seen.items() if not f.startswith("qwen")}
    own = sorted(f for f, s in others.items() if s and "system" not in s)
    text = "; ".join(f"{f}: {s}" for f, s in seen.items())
    return (
        f"the segment that holds the tool list, read from each package's rendering of one round trip: {text}"
        + (f"; not installed here: {', '.join(missing)}" if missing else ""),
        *make_verdict(
            qwen == "<|im_start|>system" and bool(own),
            "Qwen3's tool list is not in its system segment, or no other family places it elsewhere",
            [(bool(missing), f"{len(missing)} families could not be rendered here")],
        ),
    )
