"""A catalogue of realistic tool definitions, for measuring what tool definitions cost per request.

The kit's own four demo tools (``toolkit.tools``) are small; production agents mount dozens of tools whose
schemas carry descriptions, enums, bounds and nested objects. These twenty definitions follow the description
habits the "Tool Use" chapter recommends (§3.1: start with a verb, say when not to use it, type parameters
strongly, describe every parameter) so that token counts measured on them are representative (book §14.5.3:
"about 200 tokens per tool" is the usual order of magnitude).

``realistic_tools(n)`` returns ``n`` definitions; past twenty it repeats the set under new names (``_2``,
``_3``…), which keeps the per-tool size realistic. Nothing here is executable: these are schemas only.
"""

from __future__ import annotations

import copy


def _fn(name, description, properties, required):
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _s(desc, **kw):
    return {"type": "string", "description": desc, **kw}


def _i(desc, **kw):
    return {"type": "integer", "description": desc, **kw}


_BASE = [
    _fn(
        "search_web",
        "Searches the public web and returns the top results with title, URL and snippet. Use only "
        "for public information; do not use for internal documents.",
        {
            "query": _s("Search terms, 2-12 words."),
            "max_results": _i("How many results to return.", minimum=1, maximum=20),
            "freshness": _s("Only results newer than this.", enum=["day", "week", "month", "any"]),
        },
        ["query"],
    ),
    _fn(
        "fetch_url",
        "Fetches a web page and returns its main text, without scripts or navigation.",
        {
            "url": _s("Absolute http(s) URL."),
            "max_chars": _i("Truncate the text to this many characters.", minimum=100, maximum=50000),
        },
        ["url"],
    ),
    _fn(
        "get_weather",
        "Fetches current weather and a short forecast for a city.",
        {
            "city": _s("City name, e.g. 'Paris' or '北京'."),
            "unit": _s("Temperature unit.", enum=["celsius", "fahrenheit"]),
            "days": _i("Forecast days including today.", minimum=1, maximum=7),
        },
        ["city"],
    ),
    _fn(
        "calculator",
        "Calculates an arithmetic expression exactly. Use it for any arithmetic instead of mental math.",
        {"expression": _s("Expression such as '250 * 0.15' or '(3 + 4) ** 2'.")},
        ["expression"],
    ),
    _fn(
        "send_email",
        "Sends an email on the user's behalf. Requires the user's explicit confirmation; never send without it.",
        {
            "to": {
                "type": "array",
                "items": {"type": "string", "format": "email"},
                "description": "Recipient addresses.",
            },
            "subject": _s("Subject line, under 120 characters.", maxLength=120),
            "body": _s("Plain-text body."),
            "cc": {"type": "array", "items": {"type": "string"}, "description": "Optional CC addresses."},
        },
        ["to", "subject", "body"],
    ),
    _fn(
        "search_email",
        "Searches the user's mailbox and returns matching messages (sender, date, subject, snippet).",
        {
            "query": _s("Search terms; supports from:, to:, before:, after:."),
            "folder": _s("Mailbox folder.", enum=["inbox", "sent", "archive", "all"]),
            "limit": _i("Maximum messages.", minimum=1, maximum=50),
        },
        ["query"],
    ),
    _fn(
        "create_calendar_event",
        "Creates an event in the user's calendar and returns its id.",
        {
            "title": _s("Event title."),
            "start": _s("Start time, ISO 8601 with timezone.", format="date-time"),
            "end": _s("End time, ISO 8601 with timezone.", format="date-time"),
            "attendees": {"type": "array", "items": {"type": "string"}, "description": "Attendee emails."},
            "location": _s("Room or address."),
        },
        ["title", "start", "end"],
    ),
    _fn(
        "list_calendar_events",
        "Lists calendar events between two times.",
        {
            "start": _s("Range start, ISO 8601.", format="date-time"),
            "end": _s("Range end, ISO 8601.", format="date-time"),
        },
        ["start", "end"],
    ),
    _fn(
        "query_database",
        "Runs a read-only SQL query against the analytics warehouse and returns at most "
        "`limit` rows. Do not use for writes.",
        {"sql": _s("A single SELECT statement."), "limit": _i("Row limit.", minimum=1, maximum=1000)},
        ["sql"],
    ),
    _fn(
        "read_file",
        "Reads a text file from the project workspace and returns its content.",
        {
            "path": _s("Path relative to the workspace root."),
            "start_line": _i("First line, 1-based.", minimum=1),
            "end_line": _i("Last line, inclusive.", minimum=1),
        },
        ["path"],
    ),
    _fn(
        "write_file",
        "Writes text to a file in the project workspace, replacing its content. Needs confirmation for existing files.",
        {"path": _s("Path relative to the workspace root."), "content": _s("The full new content.")},
        ["path", "content"],
    ),
    _fn(
        "run_python",
        "Runs a short Python snippet in a sandbox without network and returns stdout, stderr "
        "and the value of the last expression.",
        {"code": _s("Python source."), "timeout_s": _i("Wall-clock limit in seconds.", minimum=1, maximum=60)},
        ["code"],
    ),
    _fn(
        "translate_text",
        "Translates text between languages.",
        {
            "text": _s("Text to translate."),
            "source_lang": _s("ISO 639-1 code, or 'auto'."),
            "target_lang": _s("ISO 639-1 code, e.g. 'en', 'zh'."),
        },
        ["text", "target_lang"],
    ),
    _fn(
        "get_stock_quote",
        "Fetches the latest quote for a listed stock.",
        {
            "symbol": _s("Ticker symbol, e.g. 'AAPL'."),
            "exchange": _s("Exchange code.", enum=["NASDAQ", "NYSE", "HKEX", "SSE"]),
        },
        ["symbol"],
    ),
    _fn(
        "convert_currency",
        "Converts an amount between currencies at today's reference rate.",
        {
            "amount": {"type": "number", "description": "Amount to convert.", "minimum": 0},
            "from_currency": _s("ISO 4217 code."),
            "to_currency": _s("ISO 4217 code."),
        },
        ["amount", "from_currency", "to_currency"],
    ),
    _fn(
        "create_ticket",
        "Opens an issue in the team's tracker and returns its URL.",
        {
            "title": _s("One-line summary."),
            "description": _s("Steps to reproduce, expected and actual result."),
            "priority": _s("Priority.", enum=["low", "medium", "high", "urgent"]),
            "labels": {"type": "array", "items": {"type": "string"}, "description": "Labels to add."},
        },
        ["title", "description"],
    ),
    _fn(
        "search_docs",
        "Searches the company's internal documentation. Use for internal policies and "
        "runbooks; do not use for the public web.",
        {
            "query": _s("What to look for."),
            "space": _s("Documentation space.", enum=["engineering", "hr", "finance", "support"]),
            "top_k": _i("Passages to return.", minimum=1, maximum=10),
        },
        ["query"],
    ),
    _fn(
        "get_directions",
        "Plans a route between two places and returns distance, duration and steps.",
        {
            "origin": _s("Start address or place name."),
            "destination": _s("End address or place name."),
            "mode": _s("Travel mode.", enum=["driving", "walking", "cycling", "transit"]),
        },
        ["origin", "destination"],
    ),
    _fn(
        "set_reminder",
        "Schedules a reminder notification for the user.",
        {
            "text": _s("What to remind about."),
            "at": _s("When, ISO 8601 with timezone.", format="date-time"),
            "repeat": _s("Repeat rule.", enum=["none", "daily", "weekly", "monthly"]),
        },
        ["text", "at"],
    ),
    _fn(
        "summarize_document",
        "Summarizes a long document into key points with citations to its sections.",
        {
            "document_id": _s("Id returned by the upload tool."),
            "max_points": _i("How many key points.", minimum=1, maximum=20),
            "language": _s("Language of the summary.", enum=["en", "zh", "ja", "fr", "de"]),
        },
        ["document_id"],
    ),
]


def realistic_tools(n: int = 20) -> list[dict]:
    """``n`` realistic tool definitions (repeating the twenty under new names past twenty)."""
    out = []
    for i in range(n):
        t = copy.deepcopy(_BASE[i % len(_BASE)])
        if i >= len(_BASE):
            t["function"]["name"] += f"_{i // len(_BASE) + 1}"
        out.append(t)
    return out
