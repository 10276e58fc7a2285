"""Fonts for the book's figures: the CJK font embedded into SVGs so they read without the font installed.

What it does
- Finds Noto Sans CJK on the system (``FONT_DIRS``), and rewrites an SVG so its text uses embedded
  ``@font-face`` rules (the sans in two weights, and the monospace face the figures set code in) (``embed_font``); ``svg_text`` lists the text an SVG draws.

What it leaves out
- Subsetting the font and outlining text (the embedded font is the whole file).
"""

from __future__ import annotations

import base64
import html
import io
import logging
import re
from pathlib import Path

# The SVGs carry their own font: the text's characters, subset from Noto Sans CJK SC (regular and bold), are
# embedded as base64 OpenType in an @font-face rule, so the figures read the same where the font is not installed.
FONT_DIRS = ("/usr/share/fonts/opentype/noto", "/usr/share/fonts/noto-cjk", "/usr/share/fonts/opentype/noto-cjk")


FONT_FILES = {400: "NotoSansCJK-Regular.ttc", 700: "NotoSansCJK-Bold.ttc"}


FONT_FACE = "Noto Sans CJK SC"


EMBEDDED_FAMILY = "FigureText"


EMBEDDED_MONO = "FigureMono"  # code and JSON: Noto Sans Mono CJK SC


FACES = (
    (EMBEDDED_FAMILY, FONT_FACE, 400),
    (EMBEDDED_FAMILY, FONT_FACE, 700),
    (EMBEDDED_MONO, "Noto Sans Mono CJK SC", 400),
)


def font_file(weight: int) -> Path | None:
    for d in FONT_DIRS:
        p = Path(d) / FONT_FILES[weight]
        if p.exists():
            return p
    return None


def svg_text(svg: str) -> str:
    """Every character drawn as text in a plotly SVG (tags stripped, entities decoded)."""
    bodies = re.findall(r"<text\b[^>]*>(.*?)</text>", svg, flags=re.S)
    return html.unescape("".join(re.sub(r"<[^>]+>", "", b) for b in bodies))


def font_style(chars: str) -> str:
    """A ``<style>`` with the embedded faces, subset to ``chars`` (one subset can serve several SVGs).

    Raises ``RuntimeError`` if the font files are missing (``make system`` installs fonts-noto-cjk)."""

    from fontTools import subset  # lazy: only when an SVG is written
    from fontTools.ttLib import TTCollection  # lazy: only when an SVG is written

    logging.getLogger("fontTools").setLevel(logging.WARNING)  # it logs every table it subsets at INFO

    chars = "".join(sorted(set(chars) - {"\n"}))
    faces = []
    for family, face, weight in FACES:
        path = font_file(weight)
        if path is None:
            raise RuntimeError(f"font {FONT_FILES[weight]} not found in {FONT_DIRS}: run `make system`")
        font = next(f for f in TTCollection(str(path)).fonts if f["name"].getDebugName(1) == face)
        opts = subset.Options()
        opts.name_IDs, opts.notdef_outline, opts.layout_features = ["*"], True, ["kern", "liga", "locl"]
        sub = subset.Subsetter(opts)
        sub.populate(text=chars)
        sub.subset(font)
        buf = io.BytesIO()
        font.save(buf)
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        faces.append(
            f"@font-face{{font-family:'{family}';font-weight:{weight};"
            f"src:url(data:font/otf;base64,{data}) format('opentype');}}"
        )
    return "<style>" + "".join(faces) + "</style>"


def embed_font(svg: str, style: str | None = None) -> str:
    """Embed the fonts (``style`` from ``font_style``, else subset to what ``svg`` draws); text then names the
    embedded family first."""
    style = style if style is not None else font_style(svg_text(svg))
    svg = svg.replace("font-family: 'Noto Sans CJK SC'", f"font-family: '{EMBEDDED_FAMILY}', 'Noto Sans CJK SC'")
    svg = svg.replace('font-family="Noto Sans CJK SC', f'font-family="{EMBEDDED_FAMILY}, Noto Sans CJK SC')
    svg = re.sub(
        r"font-family: ?'?Noto Sans Mono CJK SC'?", f"font-family: '{EMBEDDED_MONO}', 'Noto Sans Mono CJK SC'", svg
    )
    head = re.search(r"<svg\b[^>]*>", svg)
    return svg[: head.end()] + style + svg[head.end() :]
