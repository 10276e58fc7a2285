"""toolkit.widgets.trace: the panels' titles fit a notebook column."""

from toolkit.widgets.trace import _figure

NOTEBOOK_WIDTH_PX = 650  # JupyterLab's output column beside the file browser, and Binder's default window
CHAR_PX = 7.5  # plotly's default 12 px font: about 7 px per character (measured on the PNG, 2026-12-05)


def test_panel_titles_fit_their_panels_in_a_notebook_column():
    fig = _figure([])
    margin = fig.layout.margin.l + fig.layout.margin.r
    for note in fig.layout.annotations:
        axis = next(a for a in ("xaxis1", "xaxis2", "xaxis3") if sum(fig.layout[a].domain) / 2 == note.x)
        a, b = fig.layout[axis].domain
        room = (b - a) * (NOTEBOOK_WIDTH_PX - margin)
        longest = max(len(line) for line in note.text.split("<br>"))
        assert longest * CHAR_PX <= room, (note.text, longest * CHAR_PX, room)
        assert note.xanchor == "center"  # centred over its panel, not anchored at one edge
