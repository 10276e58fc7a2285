"""Claims about the "Tool Use" chapter's printed conversation (§3.1), checked against the kit's templates, tokenizers
and parser; its request body ("model": "gpt-4o", messages, tools) built by the pinned ``openai`` client and
caught by a recording transport (nothing is sent).

Leaves out: the chapter's prose about why to use tools (not checkable here).
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version

from toolkit.book.ledger import Claim, make_verdict
from toolkit.conversations import tool_use_conversation
from toolkit.fetch import installed_folder
from toolkit.parse import parse_tool_calls
from toolkit.paths import kit_root
from toolkit.render import render, tokenize
from toolkit.tokenizer import tokenizer_for
from toolkit.tools import TOOLS

# The system block as the second chapter prints it (§3.1, readable form), line by line; tools elided.
PRINTED_SYSTEM_LINES = (
    "# Tools",
    "You may call one or more functions to assist with the user query.",
    "You are provided with function signatures within <tools></tools> XML tags:",
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> "
    "XML tags.",
)


FORMAT_EXAMPLE = '{"name": <function-name>, "arguments": <args-json-object>}'


def real_rendering(msgs, tools) -> str | None:
    """The messages rendered by the installed real model's own chat template (transformers), or None."""
    folder = installed_folder()
    if folder is None:
        return None
    from transformers import AutoTokenizer  # lazy: transformers loads only for this check

    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    return tok.apply_chat_template(msgs, tools=tools, tokenize=False)


def tool_use_claims() -> list[Claim]:
    msgs, tools = tool_use_conversation()
    r = {t: render(msgs, tools, t, add_generation_prompt=False) for t in ("qwen2.5", "qwen3")}
    out = []
    tool_turn = {t: "<|im_start|>tool" in x.text for t, x in r.items()}
    in_user = {t: "<|im_start|>user\n<tool_response>" in x.text for t, x in r.items()}
    out.append(
        Claim(
            "tool-role-turn",
            "Tool Use §3.1",
            "The printed token sequence shows the result in its own '<|im_start|>tool' turn.",
            "rendered: " + "; ".join(f"{t}: tool turn {tool_turn[t]}, result in a user turn {in_user[t]}" for t in r),
            *make_verdict(
                all(tool_turn.values()),
                "both Qwen2.5's and Qwen3's templates put tool results in a "
                "user turn wrapped in <tool_response>; the 'tool' role exists only in the API message "
                "list (as §14.5.2 step 5 says)",
            ),
        )
    )
    colon = {t: any(f"<|im_start|>{role}:" in x.text for role in ("system", "user", "assistant")) for t, x in r.items()}
    newline = {t: "<|im_start|>system\n" in x.text for t, x in r.items()}
    out.append(
        Claim(
            "im-start-colon",
            "Tool Use §3.1",
            "In the one-line token sequence a role is followed by a colon: <|im_start|>system:…",
            "rendered: "
            + "; ".join(f"{t}: '<|im_start|>role:' {colon[t]}, '<|im_start|>system\\n' {newline[t]}" for t in r),
            *make_verdict(
                all(colon.values()),
                "the templates put a newline after the role, never a colon; "
                "the colon is not in the token stream (the readable form below it is right)",
            ),
        )
    )
    sys25 = r["qwen2.5"].text.split("<|im_end|>", 1)[0]
    present = [line in sys25 for line in PRINTED_SYSTEM_LINES]
    last_rendered = PRINTED_SYSTEM_LINES[-1][:-1] + ":"
    dropped = FORMAT_EXAMPLE in sys25
    out.append(
        Claim(
            "system-block",
            "Tool Use §3.1",
            "The printed system block is what the Qwen2.5 template writes for the book's messages and tools.",
            f"printed lines found verbatim in the rendered system "
            f"turn: {sum(present)} of {len(present)}; the rendering ends the last line with ':' "
            f"({last_rendered in sys25}) and follows it with the call-format example {FORMAT_EXAMPLE} "
            f"({dropped}); blank lines between sections in the rendering: {sys25.count(chr(10) * 2)}",
            *make_verdict(
                sum(present) >= len(present) - 1,
                "most printed lines are not in the rendering",
                [
                    (
                        dropped and not present[-1],
                        "the wording matches except the last line: the template ends "
                        "it with ':' and then shows the expected call format (<tool_call> with name and "
                        "<args-json-object>), which the printout drops; the printout also drops the blank lines",
                    )
                ],
            ),
        )
    )
    tok25 = tokenizer_for("qwen2.5")
    got = tok25.apply_chat_template(msgs[:2], tools=tools)
    kind = type(got).__name__
    ids = got["input_ids"] if hasattr(got, "keys") else got
    as_text = tok25.apply_chat_template(msgs[:2], tools=tools, tokenize=False)

    out.append(
        Claim(
            "apply-chat-template",
            "Tool Use §3.1",
            "tokenizer.apply_chat_template(messages, tools=tools) does the template conversion, giving the text shown.",
            f"transformers {version('transformers')}"
            f", offline Qwen2.5 tokenizer: the snippet returns a {kind} of {len(ids)} token ids; with "
            f"tokenize=False it returns a str of {len(as_text)} characters that starts "
            f"{as_text[:22]!r}",
            *make_verdict(
                as_text.startswith("<|im_start|>system") and "<tools>" in as_text and len(ids) > 0,
                "the call does not render the messages and tools through the template",
                [
                    (
                        not isinstance(got, str),
                        "it converts, as the chapter says; as written it returns the converted text already "
                        f"tokenized ({kind} with input_ids); tokenize=False gives the text the chapter prints",
                    )
                ],
            ),
        )
    )
    body = {t: x.segment_text("tool_response") for t, x in r.items()}
    printed = '{"name": "calculator", "content": "37.5"}'
    out.append(
        Claim(
            "tool-response-body",
            "Tool Use §3.1",
            f"Inside <tool_response> the template writes {printed}.",
            "rendered bodies: " + "; ".join(f"{t}: {json.dumps(b[0] if b else '')}" for t, b in body.items()),
            *make_verdict(
                all(printed in (b[0] if b else "") for b in body.values()),
                "both templates write the message content as is (37.5); name and the wrapper object are not added",
            ),
        )
    )
    listed = {t: "<tools>\n[" in x.text or "<tools>[" in x.text for t, x in r.items()}
    out.append(
        Claim(
            "tools-as-array",
            "Tool Use §3.1",
            "The tool definitions appear inside <tools> as one JSON array.",
            "rendered: " + "; ".join(f"{t}: array {v}" for t, v in listed.items()),
            *make_verdict(
                all(listed.values()),
                "both templates write one JSON object per tool, one per line, with no enclosing [ ]",
            ),
        )
    )
    # The chapter prints <tool_call> with the arguments as a JSON object, from a message list that carries them
    # as a JSON string. Rendered by the real model's own template (its chat_template.jinja, through transformers),
    # independent of the kit's templates.
    _, calls = parse_tool_calls(
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "250 * 0.15"}}\n</tool_call>'
    )
    printed_obj = '"arguments": {"expression": "250 * 0.15"}'
    real = real_rendering(msgs, tools)
    kit_obj = {t: printed_obj in x.text for t, x in r.items()}
    real_obj = real is not None and printed_obj in real
    real_str = real is not None and '"arguments": "{\\"expression\\"' in real
    out.append(
        Claim(
            "arguments-object",
            "Tool Use §3.1",
            "Rendering the chapter's message list (arguments as a JSON string) gives its printed <tool_call> with "
            'the arguments as a JSON object ({"expression": "250 * 0.15"}).',
            (
                "the real model's chat_template.jinja (transformers apply_chat_template) writes the arguments as "
                + ("a JSON object" if real_obj else "an escaped JSON string" if real_str else "neither form")
                if real is not None
                else "the real model's template is not installed (make real-model)"
            )
            + "; the kit's templates: "
            + "; ".join(f"{t} object {v}" for t, v in kit_obj.items())
            + f"; the template's call format asks the model for <args-json-object> ({FORMAT_EXAMPLE in sys25}) and "
            f"the host parser reads the object form as {calls[0].arguments}",
            *make_verdict(
                real_obj or real is None,
                "the template writes `tojson` of what the list holds: string arguments come out as an escaped JSON "
                "string, not the object the chapter prints; the object form is what the model itself generates "
                "(the format line asks for <args-json-object>), so the printed sequence needs arguments as a dict",
                [(real is None, "not checked: the real model's template is not on this machine")],
            ),
        )
    )
    n_tr = len([t for t in r["qwen2.5"].tokens if t.segment == "tool_response"])
    pieces = len(tokenize("<tool_response>", "qwen2.5").ids)
    out.append(
        Claim(
            "qwen25-tool-response",
            "Tool Use §3.1",
            "The Qwen2.5 sequence wraps the result in <tool_response> tags.",
            f"Qwen2.5: <tool_response> is {pieces} ordinary tokens, {n_tr} tokens "
            "for the wrapped result; Qwen3: 1 added token",
            *make_verdict("<tool_response>" in r["qwen2.5"].text, "no <tool_response> in the rendering"),
        )
    )
    calc = {e: TOOLS["calculator"].fn(e)["result"] for e in ("250 * 0.15", "250 * 15%")}
    out.append(
        Claim(
            "calc-37.5",
            "Tool Use §3.1",
            "250 × 15% = 37.5, the result the calculator returns.",
            f"toolkit.tools calculator: {calc}",
            *make_verdict(all(v == 37.5 for v in calc.values()), "the calculator returns another value"),
        )
    )
    # Two messages per call, checked against the book's own list and what the template does with it
    roles = [m["role"] + ("(tool_calls)" if m.get("tool_calls") else "") for m in msgs]
    i_call = roles.index("assistant(tool_calls)")
    t25 = r["qwen2.5"].text
    call_turn = t25.count("<|im_start|>assistant\n<tool_call>")
    out.append(
        Claim(
            "two-messages",
            "Tool Use §3.1",
            "One tool call adds two messages: the assistant's call and a "
            "'tool' message with the result; then the model answers.",
            f"the printed list: {', '.join(roles)}"
            f"; Qwen2.5 renders the call as {call_turn} assistant turn opening with <tool_call> and the "
            f"result as {t25.count('<tool_response>')} <tool_response> block, then the answer turn",
            *make_verdict(
                roles[i_call : i_call + 3] == ["assistant(tool_calls)", "tool", "assistant"]
                and call_turn == 1
                and t25.count("<tool_response>") == 1,
                "the list or its rendering has another shape",
            ),
        )
    )
    return out


# ================================================================ the request body, sent by the official client
def pinned(package: str) -> str | None:
    """The exact pin of ``package`` in the checkout's requirements.txt (the kit's one place for pins), or None."""
    req = kit_root() / "requirements.txt"
    if not req.exists():
        return None
    m = re.search(rf"^{re.escape(package)}==(\S+)", req.read_text(encoding="utf-8"), re.M)
    return m.group(1) if m else None


def request_body_claims() -> list[Claim]:
    """ "Tool Use" §3.1's request body ("model": "gpt-4o", messages, tools), built by the installed ``openai`` client
    and caught by a transport that records it: nothing leaves the machine."""
    import httpx  # lazy: the client's HTTP stack loads only for this claim
    import openai  # lazy: the official client loads only for this claim
    from openai.types import chat as oc  # lazy: as above

    msgs, tools = tool_use_conversation()
    sent: list[dict] = []

    def record(request):
        sent.append(json.loads(request.content))
        raise httpx.ConnectError("recorded, not sent", request=request)

    client = openai.OpenAI(
        api_key="none",
        base_url="http://127.0.0.1:9/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(record)),
    )
    try:
        client.chat.completions.create(model="gpt-4o", messages=msgs, tools=tools)
    except openai.APIConnectionError:
        pass
    body = sent[0] if sent else {}
    typed = {
        "system": oc.ChatCompletionSystemMessageParam,
        "user": oc.ChatCompletionUserMessageParam,
        "assistant": oc.ChatCompletionAssistantMessageParam,
        "tool": oc.ChatCompletionToolMessageParam,
    }
    untyped = [f"{m['role']}.{k}" for m in msgs for k in m if k not in typed[m["role"]].__annotations__]
    args = [c["function"]["arguments"] for m in body.get("messages", []) for c in m.get("tool_calls") or []]
    pin, have = pinned("openai"), version("openai")
    return [
        Claim(
            "openai-request-body",
            "Tool Use §3.1",
            'The message list is the body of an OpenAI Chat Completions request: "model", "messages" (system, user, '
            "the assistant's tool_calls with arguments as a JSON string, the tool result by tool_call_id, the answer) "
            'and "tools".',
            f"openai {have} (pinned {pin or 'nowhere found'} in requirements.txt) sent the chapter's request to a "
            f"recording transport: keys {sorted(body)}, model {body.get('model')!r}, roles "
            f"{[m['role'] for m in body.get('messages', [])]}, arguments {args}; the body equals the chapter's "
            f"messages and tools: {body == {'model': 'gpt-4o', 'messages': msgs, 'tools': tools}}; fields the "
            f"client's typed message params do not define: {untyped or 'none'}",
            *make_verdict(
                body == {"model": "gpt-4o", "messages": msgs, "tools": tools}
                and bool(args)
                and all(isinstance(a, str) for a in args),
                "the official client does not send the chapter's body as printed",
                [
                    (
                        bool(untyped),
                        f"the chapter's {', '.join(untyped)} is not in the client's typed API (a tool message is "
                        "role, content, tool_call_id): it is sent as given, and a server may ignore it",
                    ),
                    (pin is not None and pin != have, f"the installed client ({have}) is not the pinned one ({pin})"),
                    (pin is None, "no requirements.txt beside the kit (an installed wheel): the pin is not checked"),
                ],
            ),
        )
    ]
