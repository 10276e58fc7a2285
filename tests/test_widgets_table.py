"""toolkit.widgets.table: rows of plain data as an HTML table (notebook 03's tables, without pandas)."""

import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.widgets.table import Table


def test_columns_in_first_seen_order_and_picked():
    t = Table([{"a": 1, "b": 2}, {"c": 3, "a": 4}])
    assert t.columns == ["a", "b", "c"]
    assert Table([{"a": 1, "b": 2}], columns=["b", "a"]).columns == ["b", "a"]
    with pytest.raises(KeyError, match="'z'"):
        Table([{"a": 1}], columns=["a", "z"])


def test_cells_are_written_as_numbers_and_escaped():
    t = Table([{"n": 12345, "x": 2.3456, "ok": True, "none": None, "s": "<b>&</b>"}])
    page = t._repr_html_()
    assert "<td style='text-align:right'>12,345</td>" in page
    assert "<td style='text-align:right'>2.35</td>" in page  # digits=2
    assert "<td style='text-align:left'>True</td>" in page  # a bool is not a number
    assert "<td style='text-align:left'></td>" in page  # None: an empty cell
    assert "&lt;b&gt;&amp;&lt;/b&gt;" in page and "<b>" not in page
    assert page.count("<tr>") == 2


def test_text_form_aligns_columns():
    lines = str(Table([{"name": "a", "value": 1}, {"name": "long", "value": 1000}])).splitlines()
    assert lines == ["name  value", "a     1", "long  1,000"]


def test_table_of_no_rows():
    assert Table([], columns=["a"])._repr_html_() == "<table><thead><tr><th>a</th></tr></thead><tbody></tbody></table>"


def test_notebook_03_imports_no_pandas():
    """The point of the module: notebook 03's kernel does not pay for pandas (its loop's memory target)."""
    code = "import sys, toolkit.widgets.table, toolkit.widgets.trace; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    src = (Path(__file__).parents[1] / "notebooks" / "03_host_loop.py").read_text(encoding="utf-8")
    assert "import pandas" not in src
