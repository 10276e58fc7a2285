"""The HTTP server's deadline for a partial request: a connection whose request head or body is not complete
within ``PARTIAL_REQUEST_S`` seconds of its first byte (or of the connection, when nothing comes) gets HTTP 408
with a JSON-RPC ``-32600`` body and is closed.

What it does
- :func:`deadline_protocol` returns uvicorn's h11 protocol class with one timer: armed when a connection opens and when the
  first bytes of a request arrive, disarmed once h11 has read the whole request (its state ``DONE``). uvicorn's own
  ``timeout_keep_alive`` runs only between requests, so headers sent and then silence, or half a body, held a
  connection (and a task) open forever: 50 of 50 after 10 s.

What it leaves out
- A slow answer: once the request is read, the tool call, the SSE stream and the session have their own limits
  (``toolkit.mcp.server``). The deadline counts from the first byte, not per chunk, so a 4 MiB body must arrive
  within it (about 40 ms on the loopback interface).
"""

from __future__ import annotations

import mcp_types as types

from toolkit.mcp.stdio import error_line

PARTIAL_REQUEST_S = 10.0


def timeout_reply(seconds: float) -> bytes:
    body = error_line(
        types.INVALID_REQUEST, f"Invalid Request: the request was not complete within {seconds:g} s"
    ).rstrip(b"\n")
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def deadline_protocol(seconds: float = PARTIAL_REQUEST_S):
    """uvicorn's h11 protocol whose partial requests end after ``seconds`` (see the module), for
    ``uvicorn.Config(http=...)``."""
    import h11  # lazy: uvicorn's HTTP parser, loaded only by the transport that runs (the server starts fast)
    from uvicorn.protocols.http.h11_impl import H11Protocol  # lazy: as above

    class DeadlineProtocol(H11Protocol):
        """uvicorn's h11 protocol whose partial requests end after ``partial_request_s`` seconds (see the module)."""

        partial_request_s = seconds

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._deadline = None
            self._arm()

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(self.partial_request_s, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY):  # a head or a body begun, not finished
                self._arm()
            else:
                self._disarm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _expired(self) -> None:
            self._deadline = None
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY) or self.transport.is_closing():
                return
            if self.cycle is None or not self.cycle.response_started:
                self.transport.write(timeout_reply(self.partial_request_s))
            self.transport.close()

    return DeadlineProtocol
