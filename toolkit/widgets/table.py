"""Rows of plain data (a list of dicts) shown as an HTML table, without pandas.

What it does
- ``Table(rows, columns=None)``: the rows as they are (``table.rows``, ``table.columns``: what tests read), shown by
  Jupyter through ``_repr_html_`` (every value escaped; integers with thousands separators, floats to ``digits``
  places (2 by default), ``None`` as an empty cell) and by a terminal through ``str()`` (aligned text).
- ``columns`` picks and orders the columns; by default every key, in the order they first appear.

Why it exists: notebook 03 runs the real model where memory is short (Binder's 2 GB, its loop kernel's target
1.1 GB), and importing pandas costs its kernel ~62 MB (pyarrow included) for tables of a few rows.

What it leaves out
- Sorting, grouping, styling per cell, indexes: a notebook that needs them uses pandas.
"""

from __future__ import annotations

import html


class Table:
    def __init__(self, rows, columns=None, digits: int = 2):
        self.rows = [dict(r) for r in rows]
        if columns is None:
            columns = list(dict.fromkeys(k for r in self.rows for k in r))
        self.columns = list(columns)
        unknown = [c for c in self.columns if not any(c in r for r in self.rows)] if self.rows else []
        if unknown:
            raise KeyError(f"no row has the column(s) {', '.join(map(repr, unknown))}")
        self.digits = digits

    def cell(self, value) -> str:
        """One value as the table writes it."""
        if value is None:
            return ""
        if isinstance(value, bool):
            return str(value)
        if isinstance(value, int):
            return f"{value:,}"
        if isinstance(value, float):
            return f"{value:,.{self.digits}f}"
        return str(value)

    def _repr_html_(self) -> str:
        def td(value) -> str:
            align = "right" if _numeric(value) else "left"
            return f"<td style='text-align:{align}'>{html.escape(self.cell(value))}</td>"

        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(td(r.get(c)) for c in self.columns) + "</tr>" for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __str__(self) -> str:
        cells = [[str(c) for c in self.columns]] + [[self.cell(r.get(c)) for c in self.columns] for r in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells)

    __repr__ = __str__


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
