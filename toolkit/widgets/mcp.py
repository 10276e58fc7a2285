"""Views for the MCP notebook: a wire-log table and a confirmation panel for risky tool calls.

What it does
- ``wire_rows(log)`` turns a ``toolkit.mcp.client.WireLog`` into plain rows (ms since the first message,
  direction, kind, method — for a reply, the method of the request it answers — id, JSON); ``wire_html(rows)`` renders them as an HTML table (host->server and server->host in two colours,
  JSON-RPC errors and ``isError`` results marked). Tests check both without a browser.
- :class:`WireLogView` shows a log with a filter (all / requests / replies / errors) and a "hide _meta" switch,
  re-rendering on ``observe(..., names="value")``; ``refresh()`` after more traffic.
- :class:`ConfirmPanel` lists the calls a ``toolkit.mcp.safety.ConfirmGate`` refused, each with an "Approve"
  button. The host loop cannot wait for a click inside a running cell, so approval is two-step: the loop runs,
  the gate says no and records the call; a click approves that exact call once and calls ``on_approve`` (which
  typically runs the loop again). ``button.click()`` drives it in tests.

What it leaves out
- Live streaming of messages while a request is in flight (call ``refresh()``); editing a call before approval.
"""

from __future__ import annotations

import html
import json

import ipywidgets as w
from IPython.display import display

from toolkit.mcp.wire import without_meta

KIND_FILTERS = {
    "all": None,
    "requests": ("request", "notification"),
    "replies": ("result", "error"),
    "errors": ("error", "is_error"),
}


def wire_rows(log, hide_meta: bool = True) -> list[dict]:
    rows, asked, t0 = [], {}, None
    for e in log:
        msg = without_meta(e.message) if hide_meta else e.message
        kind = e.kind
        if kind == "result" and isinstance(e.message.get("result"), dict) and e.message["result"].get("isError"):
            kind = "is_error"  # a tool failure: a normal JSON-RPC result the model will read
        if kind == "request":
            asked[(e.direction, e.message.get("id"))] = e.method
        # a reply names no method; show the one its id answers, in parentheses
        other = "<-" if e.direction == "->" else "->"
        method = e.method or (
            f"({asked[(other, e.message.get('id'))]})" if (other, e.message.get("id")) in asked else ""
        )
        t0 = e.t if t0 is None else t0
        rows.append(
            {
                "seq": e.seq,
                "ms": round((e.t - t0) * 1e3, 1),
                "dir": e.direction,
                "kind": kind,
                "method": method,
                "id": e.message.get("id", ""),
                "transport": e.transport,
                "json": json.dumps(msg, ensure_ascii=False),
            }
        )
    return rows


def _colour(row: dict) -> str:
    if row["kind"] == "error":
        return "#fde2e1"
    if row["kind"] == "is_error":
        return "#fff3cd"
    return "#e8f0fe" if row["dir"] == "->" else "#e6f4ea"


def wire_html(rows: list[dict], width: int = 400) -> str:
    head = "<tr><th>ms</th><th></th><th>kind</th><th>method</th><th>id</th><th>JSON-RPC message</th></tr>"
    body = []
    for r in rows:
        text = r["json"] if len(r["json"]) <= width else r["json"][: width - 1] + "…"
        body.append(
            f'<tr style="background:{_colour(r)}"><td>{r["ms"]}</td><td><b>{html.escape(r["dir"])}</b>'
            f"</td><td>{r['kind']}</td><td>{html.escape(r['method'])}</td><td>{r['id']}</td>"
            f'<td style="font-family:monospace;white-space:pre-wrap;word-break:break-all">'
            f"{html.escape(text)}</td></tr>"
        )
    legend = (
        "<div style='font-size:90%'>-> host to server, &lt;- server to host. "
        "<span style='background:#fde2e1'>JSON-RPC error</span> (protocol level) · "
        "<span style='background:#fff3cd'>isError result</span> (the tool failed; the model reads it)</div>"
    )
    return f"{legend}<table style='font-size:85%'>{head}{''.join(body)}</table>"


class WireLogView:
    """A filterable table of one session's JSON-RPC messages."""

    def __init__(self, log, title: str = "", width: int = 400):
        self.log, self.width = log, width
        self.filter = w.ToggleButtons(options=list(KIND_FILTERS), value="all", description="show")
        self.hide_meta = w.Checkbox(value=True, description="hide _meta", indent=False)
        self.html = w.HTML()
        self.filter.observe(lambda _: self.refresh(), names="value")
        self.hide_meta.observe(lambda _: self.refresh(), names="value")
        parts = ([w.HTML(f"<b>{html.escape(title)}</b>")] if title else []) + [
            w.HBox([self.filter, self.hide_meta]),
            self.html,
        ]
        self.widget = w.VBox(parts)
        self.refresh()

    def rows(self) -> list[dict]:
        kinds = KIND_FILTERS[self.filter.value]
        rows = wire_rows(self.log, self.hide_meta.value)
        return rows if kinds is None else [r for r in rows if r["kind"] in kinds]

    def refresh(self) -> None:
        self.html.value = wire_html(self.rows(), self.width)

    def _ipython_display_(self):
        display(self.widget)


class ConfirmPanel:
    """Approve buttons for the calls a ConfirmGate refused; nothing runs until a person clicks."""

    def __init__(self, gate, on_approve=None):
        self.gate, self.on_approve = gate, on_approve
        self.buttons: list = []
        self.status = w.HTML()
        self.box = w.VBox()
        self.widget = w.VBox([w.HTML("<b>Calls waiting for a person's approval</b>"), self.box, self.status])
        self.refresh()

    def refresh(self) -> None:
        rows, self.buttons = [], []
        for name, args in self.gate.pending:
            b = w.Button(description=f"Approve {name}", button_style="danger", icon="check")
            b.on_click(lambda _b, n=name, a=args: self._approve(n, a))
            self.buttons.append(b)
            rows.append(
                w.HBox(
                    [
                        b,
                        w.HTML(
                            f"<code>{html.escape(name)}({html.escape(json.dumps(args, ensure_ascii=False))})</code>"
                        ),
                    ]
                )
            )
        self.box.children = rows or [w.HTML("<i>none: no risky call was asked for, or all were decided</i>")]

    def _approve(self, name: str, args: dict) -> None:
        self.gate.approve({"name": name, "arguments": args})
        self.status.value = f"approved once: <code>{html.escape(name)}</code>"
        if self.on_approve:
            self.on_approve(name, args)
        self.refresh()

    def _ipython_display_(self):
        display(self.widget)
