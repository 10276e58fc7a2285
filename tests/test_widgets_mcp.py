"""The MCP views (toolkit/widgets/mcp.py) checked as plain data and widget state, without a browser."""

import html

from toolkit.mcp.safety import ConfirmGate
from toolkit.mcp.wire import WireLog
from toolkit.widgets.mcp import ConfirmPanel, WireLogView, wire_html, wire_rows


def _log() -> WireLog:
    log = WireLog()
    log.record(
        "->",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "calculator", "arguments": {"expression": "1/0"}, "_meta": {"k": "v"}},
        },
    )
    log.record(
        "<-",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"content": [{"type": "text", "text": "division by zero"}], "isError": True},
        },
    )
    log.record("->", {"jsonrpc": "2.0", "id": 2, "method": "tools/frobnicate"})
    log.record("<-", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32601, "message": "Method not found"}})
    return log


def test_rows_tell_tool_failures_from_protocol_errors():
    rows = wire_rows(_log())
    assert [r["kind"] for r in rows] == ["request", "is_error", "request", "error"]
    assert [r["dir"] for r in rows] == ["->", "<-", "->", "<-"]
    assert [r["method"] for r in rows] == ["tools/call", "(tools/call)", "tools/frobnicate", "(tools/frobnicate)"]
    assert rows[0]["ms"] == 0.0 and rows[-1]["ms"] >= 0
    assert '"_meta": "…"' in rows[0]["json"] and '"k": "v"' in wire_rows(_log(), hide_meta=False)[0]["json"]
    page = wire_html(rows)
    assert page.count("<tr") == 5 and "#fde2e1" in page and "#fff3cd" in page and "tools/frobnicate" in page
    assert "&lt;-" in page  # the direction arrow is escaped, not read as a tag


def test_wire_log_view_filters_and_refreshes():
    log = _log()
    view = WireLogView(log, title="stdio")
    assert view.html.value.count("<tr") == 5
    view.filter.value = "errors"  # observe(..., names="value") re-renders
    assert [r["kind"] for r in view.rows()] == ["is_error", "error"] and view.html.value.count("<tr") == 3
    view.hide_meta.value = False
    view.filter.value = "all"
    assert html.escape('"k": "v"') in view.html.value
    log.record("->", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
    view.refresh()
    assert "notifications/cancelled" in view.html.value


def test_confirm_panel_approves_one_refused_call():
    gate = ConfirmGate()
    approved = []
    panel = ConfirmPanel(gate, on_approve=lambda name, args: approved.append((name, args)))
    assert panel.buttons == []
    assert gate({"name": "delete_notes", "arguments": {}}) is False  # the loop asked; the default is no
    panel.refresh()
    assert len(panel.buttons) == 1 and "delete_notes" in panel.buttons[0].description
    panel.buttons[0].click()
    assert approved == [("delete_notes", {})] and panel.buttons == [] and "approved once" in panel.status.value
    assert gate({"name": "delete_notes", "arguments": {}}) is True  # the approved call runs once
    assert gate({"name": "delete_notes", "arguments": {}}) is False  # and only once
