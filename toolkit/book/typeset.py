"""Typesetting for the book's figures: print sizes, text widths from the real font, and line breaking.

What it does
- Print geometry: every figure is drawn on a ``CANVAS_PX``-wide canvas meant to print at ``PRINT_MM`` (the book's
  text width, 130 mm); ``print_pt(px, canvas)`` is the printed size of a ``px`` font, and ``FONT_PX`` is the one
  text size the figures use (≥ ``MIN_PT`` = 7 pt printed; tests read it back from the exported SVG).
- ``text_width`` measures a string with the advance widths of the installed Noto Sans CJK SC (proportional) or
  Noto Sans Mono CJK SC (code and JSON), so a label is wrapped to the pixels it really takes.
- ``break_points`` are the places a line may end: the Unicode line-breaking algorithm (UAX #14, ``uniseg``) says
  where a break is allowed at all (never before "，" or "）", never after "（", not inside a number); between two
  Chinese characters a break is further allowed only at a word boundary from the ``rjieba`` segmenter (jieba's
  dictionary; UAX #14 alone would allow a break between any two ideographs, "模/板"); a number stays with the
  measure word or unit after it ("225 个", "14 tokens": a typesetting rule UAX #14 does not know).
- ``rich_lines`` lays out a label written with ``code`` spans in backquotes: code is set in the monospace face and
  never broken inside; it returns plotly rich text (``<br>`` between lines) and its width in px.

What it leaves out
- Hyphenation, justification, kerning (widths are advance widths) and any script other than Latin and Chinese.
"""

from __future__ import annotations

import functools
import re

from toolkit.book.fonts import font_file

PRINT_MM = 130.0  # the book's text width


CANVAS_PX = 720  # every figure's width in CSS px; 1 px prints at 130/720 mm


MIN_PT = 7.0


FONT_PX = 14  # 14 px on 720 px prints at 7.17 pt


SANS = "Noto Sans CJK SC"


MONO = "Noto Sans Mono CJK SC"


NO_LINE_START = set(",.;:!?)]}，。、；：！？）》」』”’")


NBSP = "\u00a0"  # code keeps every space: SVG would collapse runs of plain ones


def print_pt(px: float, canvas_px: float = CANVAS_PX, print_mm: float = PRINT_MM) -> float:
    """The printed size in points of a ``px`` font on a canvas ``canvas_px`` wide printed ``print_mm`` wide."""
    return px * print_mm / canvas_px * 72 / 25.4


@functools.lru_cache(maxsize=2)
def _metrics(family: str) -> tuple[dict, dict, int]:
    from fontTools.ttLib import TTCollection  # lazy: fontTools loads only when a figure is laid out

    path = font_file(400)
    if path is None:
        raise RuntimeError(f"{SANS} not found: run `make system` (fonts-noto-cjk)")
    font = next(f for f in TTCollection(str(path), lazy=True).fonts if f["name"].getDebugName(1) == family)
    cmap, hmtx = font.getBestCmap(), font["hmtx"]
    widths = {cp: hmtx[g][0] for cp, g in cmap.items()}
    return widths, cmap, font["head"].unitsPerEm


def text_width(text: str, px: float = FONT_PX, mono: bool = False, bold: bool = False) -> float:
    """Width in px of ``text`` set at ``px`` in the sans (or, with ``mono``, the monospace) face."""
    widths, _, upm = _metrics(MONO if mono else SANS)
    units = sum(widths.get(ord(c), upm) for c in text)
    return units * px / upm * (1.04 if bold else 1.0)  # bold Noto is about 4 % wider


# ---------------------------------------------------------------- where a line may break
def _cjk(ch: str) -> bool:
    return "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def break_points(text: str) -> list[int]:
    """Offsets ``i`` (0 < i < len) where a line may end before ``text[i]``: UAX #14, words kept whole."""
    import rjieba  # lazy: the segmenter loads its dictionary only when a figure is laid out
    from uniseg.linebreak import line_break_boundaries  # lazy: with the segmenter, only for a layout

    words, pos = set(), 0
    for w in rjieba.cut(text):
        pos += len(w)
        words.add(pos)
    out = []
    for i in line_break_boundaries(text):
        if not 0 < i < len(text):
            continue
        if _cjk(text[i - 1]) and _cjk(text[i]) and i not in words:
            continue  # inside a Chinese word
        before = text[:i].rstrip(" ")
        if text[i - 1] == " " and before and before[-1].isdigit():
            continue  # a number stays with its measure word or unit ("225 个", "14 tokens")
        out.append(i)
    return out


def wrap_plain(text: str, max_px: float, px: float = FONT_PX, mono: bool = False) -> list[str]:
    """Greedy line filling at ``break_points``; a piece wider than ``max_px`` stays whole on its own line."""
    lines = []
    for para in text.split("\n"):
        cuts = [0, *break_points(para), len(para)]
        line_start, last_fit = 0, None
        for c in cuts[1:]:
            if text_width(para[line_start:c].rstrip(" "), px, mono) <= max_px:
                last_fit = c
                continue
            if last_fit is not None and last_fit > line_start:
                lines.append(para[line_start:last_fit].rstrip(" "))
                line_start = last_fit
                if text_width(para[line_start:c].rstrip(" "), px, mono) <= max_px:
                    last_fit = c
                    continue
            lines.append(para[line_start:c].rstrip(" "))  # one unbreakable piece longer than the line
            line_start, last_fit = c, None
        if line_start < len(para) or not para:
            lines.append(para[line_start:].rstrip(" "))
    return lines


# ---------------------------------------------------------------- labels with code spans
_CODE = re.compile(r"`([^`]*)`")


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _runs(label: str) -> list[tuple[str, bool]]:
    """Split a label into (text, is_code) runs; code is what stands between backquotes."""
    runs, pos = [], 0
    for m in _CODE.finditer(label):
        if m.start() > pos:
            runs.append((label[pos : m.start()], False))
        runs.append((m.group(1), True))
        pos = m.end()
    if pos < len(label):
        runs.append((label[pos:], False))
    return runs


def plain(label: str) -> str:
    """The label's text without its code markers (what a reader sees)."""
    return "".join(t for t, _ in _runs(label))


def rich_lines(label: str, max_px: float, px: float = FONT_PX, mono_family: str = MONO) -> tuple[str, float]:
    """Lay out ``label`` (code in backquotes) in lines of at most ``max_px``; return plotly rich text and its width.

    A code span never breaks inside (a span with newlines keeps them: it is shown as written); prose breaks at
    ``break_points``. A span wider than the line overflows visibly rather than being cut."""
    # atoms: unbreakable pieces, each (text, is_code, space_before_ok)
    atoms: list[tuple[str, bool]] = []
    for text, code in _runs(label):
        if code:
            atoms.append((text, True))
            continue
        cuts = [0, *break_points(text), len(text)]
        atoms += [(text[a:b], False) for a, b in zip(cuts, cuts[1:]) if b > a]
    lines: list[list[tuple[str, bool]]] = [[]]
    width = 0.0

    def w(piece, code):
        return max(text_width(p, px, mono=code) for p in piece.split("\n"))

    for text, code in atoms:
        if code and "\n" in text:  # a block of code: its own lines, as written
            if lines[-1]:
                lines.append([])
            for row in text.split("\n"):
                lines[-1].append((row, True))
                lines.append([])
            continue
        cur = sum(w(t, c) for t, c in lines[-1])
        trimmed = text.rstrip(" ")
        no_start = not code and text[:1] in NO_LINE_START  # "," or "）" never begins a line: it overflows instead
        if lines[-1] and cur + w(trimmed, code) > max_px and not no_start:
            lines.append([])
            text = text.lstrip(" ")
        lines[-1].append((text, code))
    rows = []
    for line in lines:
        if not line:
            continue
        if not line[-1][1]:
            line[-1] = (line[-1][0].rstrip(" "), False)
        width = max(width, sum(w(t, c) for t, c in line))
        rows.append(
            "".join(
                f'<span style="font-family:{mono_family}">{_esc(t).replace(" ", NBSP)}</span>' if c else _esc(t)
                for t, c in line
            )
        )
    return "<br>".join(rows), width
