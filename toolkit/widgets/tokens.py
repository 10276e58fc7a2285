"""Token view: a rendering shown token by token, coloured by segment; hover shows id and flags, click selects.

``TokenView(rendering)`` is an anywidget whose Python state is plain data (``tokens``: one dict per token;
``selected``: index) — tests set ``selected`` and read ``details`` without a browser; the browser only draws.
``segment_table(rendering)`` and ``compare(a, b)`` return plain rows for tables.

Leaves out: editing, and views of more than a few thousand tokens (every token is one DOM span).
"""

from __future__ import annotations

import html

import anywidget
import traitlets

COLOURS = {
    "control": "#d9d9d9",
    "system": "#c6dbef",
    "tools": "#fdd0a2",
    "user": "#c7e9c0",
    "assistant": "#dadaeb",
    "think": "#f2f0f7",
    "tool_call": "#fc9272",
    "tool_response": "#9ecae1",
    "generation_prompt": "#fdae6b",
}

_ESM = r"""
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "tk-tokens";
  const info = document.createElement("div");
  info.className = "tk-info";
  const draw = () => {
    box.innerHTML = "";
    const colours = model.get("colours");
    const sel = model.get("selected");
    model.get("tokens").forEach((t, i) => {
      const s = document.createElement("span");
      s.className = "tk-tok" + (i === sel ? " tk-sel" : "") + (t.special ? " tk-special" : "");
      s.dataset.index = i;
      s.style.background = colours[t.segment] || "#eee";
      s.title = `#${i} id=${t.id} ${JSON.stringify(t.text)} segment=${t.segment} special=${t.special} added=${t.added}`;
      s.textContent = t.text.replace(/\n/g, "\u21b5\n");
      s.addEventListener("click", () => { model.set("selected", i); model.save_changes(); });
      box.appendChild(s);
    });
    info.textContent = model.get("details");
  };
  model.on("change:tokens", draw);
  model.on("change:selected", draw);
  model.on("change:details", draw);
  draw();
  el.appendChild(info);
  el.appendChild(box);
}
export default { render };
"""
_CSS = """
.tk-tokens { font-family: monospace; white-space: pre-wrap; line-height: 1.9; font-size: 12px; }
.tk-tok { border: 1px solid #fff; border-radius: 3px; padding: 0 1px; cursor: pointer; }
.tk-special { outline: 1px solid #444; }
.tk-sel { outline: 2px solid #d62728; }
.tk-info { font-family: monospace; font-size: 12px; margin-bottom: 6px; min-height: 1.4em; color: #333; }
"""


def _token_rows(rendering) -> list[dict]:
    return [dict(id=t.id, text=t.text, segment=t.segment, special=t.special, added=t.added) for t in rendering.tokens]


class TokenView(anywidget.AnyWidget):
    """Every token of a rendering as a coloured chip; ``selected`` is the clicked token's index."""

    _esm = _ESM
    _css = _CSS
    tokens = traitlets.List([]).tag(sync=True)
    colours = traitlets.Dict(COLOURS).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    details = traitlets.Unicode("click a token").tag(sync=True)

    def __init__(self, rendering=None, **kw):
        super().__init__(**kw)
        if rendering is not None:
            self.show(rendering)

    def show(self, rendering) -> None:
        self.tokens = _token_rows(rendering)
        self.selected = -1
        self.details = f"{len(self.tokens)} tokens ({rendering.template}); click a token"

    @traitlets.observe("selected")
    def _on_select(self, change) -> None:
        i = change["new"]
        if 0 <= i < len(self.tokens):
            t = self.tokens[i]
            self.details = (
                f"token #{i}: id {t['id']}  {t['text']!r}  segment={t['segment']}  "
                f"special={t['special']}  added={t['added']}"
            )


def segment_table(rendering) -> list[dict]:
    """Per-segment token counts and share of the prompt."""
    total = len(rendering) or 1
    return [dict(segment=s, tokens=n, share=round(n / total, 3)) for s, n in rendering.counts.items() if n]


def legend_html() -> str:
    chips = "".join(
        f'<span style="background:{c};padding:1px 6px;margin-right:4px;border-radius:3px">{html.escape(s)}</span>'
        for s, c in COLOURS.items()
    )
    return f'<div style="font-family:monospace;font-size:12px">{chips}</div>'
