"""Claims about the "Tool Use" chapter's printed conversation (§3.1), checked against the kit's templates, tokenizers
and parser; its request body ("model": "gpt-4o", messages, tools) built by the pinned ``openai`` client and
caught by a recording transport (nothing is sent). One check per claim; the conversation and its renderings by the
kit's two templates are loaded once per ledger run (``conversation``, ``renders``).

Leaves out: the chapter's prose about why to use tools (not checkable here).
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version

from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group, loader
from toolkit.conversations import tool_use_conversation
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


TOOL_USE, REQUEST_BODY = Group("tool-use"), Group("request-body")
TEMPLATES = ("qwen2.5", "qwen3")


@loader
def conversation():
    """The "Tool Use" chapter's message list and tools (``toolkit.conversations.tool_use_conversation``)."""
    return tool_use_conversation()


@loader
def renders(conversation):
    """The conversation rendered by the kit's Qwen2.5 and Qwen3 templates, without a generation prompt."""
    msgs, tools = conversation
    return {t: render(msgs, tools, t, add_generation_prompt=False) for t in TEMPLATES}


def real_rendering(msgs, tools, real_tokenizer) -> str | None:
    """The messages rendered by the installed real model's own chat template (transformers), or None."""
    return None if real_tokenizer is None else real_tokenizer.apply_chat_template(msgs, tools=tools, tokenize=False)


def system_turn(renders, template: str = "qwen2.5") -> str:
    return renders[template].text.split("<|im_end|>", 1)[0]


@TOOL_USE(
    "tool-role-turn",
    "Tool Use §3.1",
    "The printed token sequence shows the result in its own '<|im_start|>tool' turn.",
    answers=("<|im_start|>tool<tool_response>",),
    supports=("“工具角色”…未必存在于最终的词元流里",),
)
def tool_role_turn(renders):
    tool_turn = {t: "<|im_start|>tool" in x.text for t, x in renders.items()}
    in_user = {t: "<|im_start|>user\n<tool_response>" in x.text for t, x in renders.items()}
    return (
        "rendered: " + "; ".join(f"{t}: tool turn {tool_turn[t]}, result in a user turn {in_user[t]}" for t in renders),
        *make_verdict(
            all(tool_turn.values()),
            "both Qwen2.5's and Qwen3's templates put tool results in a user turn wrapped in <tool_response>; the "
            "'tool' role exists only in the API message list (as §14.5.2 step 5 says)",
        ),
    )


@TOOL_USE(
    "im-start-colon",
    "Tool Use §3.1",
    "In the one-line token sequence a role is followed by a colon: <|im_start|>system:…",
    answers=("<|im_start|>system:你是一个计算助手",),
    supports=("从 token 序列的角度来看…（一行的词元序列）",),
)
def im_start_colon(renders):
    roles = ("system", "user", "assistant")
    colon = {t: any(f"<|im_start|>{role}:" in x.text for role in roles) for t, x in renders.items()}
    newline = {t: "<|im_start|>system\n" in x.text for t, x in renders.items()}
    return (
        "rendered: "
        + "; ".join(f"{t}: '<|im_start|>role:' {colon[t]}, '<|im_start|>system\\n' {newline[t]}" for t in renders),
        *make_verdict(
            all(colon.values()),
            "the templates put a newline after the role, never a colon; the colon is not in the token stream (the "
            "readable form below it is right)",
        ),
    )


@TOOL_USE(
    "system-block",
    "Tool Use §3.1",
    "The printed system block is what the Qwen2.5 template writes for the book's messages and tools.",
    answers=("系统段展开：# Tools … XML tags.",),
)
def system_block(renders):
    sys25 = system_turn(renders)
    present = [line in sys25 for line in PRINTED_SYSTEM_LINES]
    last_rendered = PRINTED_SYSTEM_LINES[-1][:-1] + ":"
    dropped = FORMAT_EXAMPLE in sys25
    return (
        f"printed lines found verbatim in the rendered system turn: {sum(present)} of {len(present)}; the rendering "
        f"ends the last line with ':' ({last_rendered in sys25}) and follows it with the call-format example "
        f"{FORMAT_EXAMPLE} ({dropped}); blank lines between sections in the rendering: {sys25.count(chr(10) * 2)}",
        *make_verdict(
            sum(present) >= len(present) - 1,
            "most printed lines are not in the rendering",
            [
                (
                    dropped and not present[-1],
                    "the wording matches except the last line: the template ends it with ':' and then shows the "
                    "expected call format (<tool_call> with name and <args-json-object>), which the printout drops; "
                    "the printout also drops the blank lines",
                )
            ],
        ),
    )


@TOOL_USE(
    "apply-chat-template",
    "Tool Use §3.1",
    "tokenizer.apply_chat_template(messages, tools=tools) does the template conversion, giving the text shown.",
    answers=("AutoTokenizer…Qwen2.5-7B-Instruct…apply_chat_template(messages, tools=tools)",),
)
def apply_chat_template(conversation):
    msgs, tools = conversation
    tok25 = tokenizer_for("qwen2.5")
    got = tok25.apply_chat_template(msgs[:2], tools=tools)
    kind, ids = type(got).__name__, got["input_ids"] if hasattr(got, "keys") else got
    as_text = tok25.apply_chat_template(msgs[:2], tools=tools, tokenize=False)
    return (
        f"transformers {version('transformers')}, offline Qwen2.5 tokenizer: the snippet returns a {kind} of "
        f"{len(ids)} token ids; with tokenize=False it returns a str of {len(as_text)} characters that starts "
        f"{as_text[:22]!r}",
        *make_verdict(
            as_text.startswith("<|im_start|>system") and "<tools>" in as_text and len(ids) > 0,
            "the call does not render the messages and tools through the template",
            [
                (
                    not isinstance(got, str),
                    "it converts, as the chapter says; as written it returns the converted text already tokenized "
                    f"({kind} with input_ids); tokenize=False gives the text the chapter prints",
                )
            ],
        ),
    )


PRINTED_BODY = '{"name": "calculator", "content": "37.5"}'


@TOOL_USE(
    "tool-response-body",
    "Tool Use §3.1",
    f"Inside <tool_response> the template writes {PRINTED_BODY}.",
    answers=('{"name": "calculator", "content": "37.5"}',),
)
def tool_response_body(renders):
    body = {t: x.segment_text("tool_response") for t, x in renders.items()}
    return (
        "rendered bodies: " + "; ".join(f"{t}: {json.dumps(b[0] if b else '')}" for t, b in body.items()),
        *make_verdict(
            all(PRINTED_BODY in (b[0] if b else "") for b in body.values()),
            "both templates write the message content as is (37.5); name and the wrapper object are not added",
        ),
    )


@TOOL_USE(
    "tools-as-array",
    "Tool Use §3.1",
    "The tool definitions appear inside <tools> as one JSON array.",
    answers=('<tools>[{"type": "function", …}]</tools>',),
)
def tools_as_array(renders):
    listed = {t: "<tools>\n[" in x.text or "<tools>[" in x.text for t, x in renders.items()}
    return (
        "rendered: " + "; ".join(f"{t}: array {v}" for t, v in listed.items()),
        *make_verdict(
            all(listed.values()), "both templates write one JSON object per tool, one per line, with no enclosing [ ]"
        ),
    )


@TOOL_USE(
    "arguments-object",
    "Tool Use §3.1",
    "Rendering the chapter's message list (arguments as a JSON string) gives its printed <tool_call> with the "
    'arguments as a JSON object ({"expression": "250 * 0.15"}).',
    answers=(
        '{"name": "get_weather", "arguments": {"city": "北京"}}',
        '<tool_call> {"name": "calculator", "arguments": {"expression": "250 * 0.15"}}',
    ),
)
def arguments_object(conversation, renders, real_tokenizer):
    # The chapter prints <tool_call> with the arguments as a JSON object, from a message list that carries them as a
    # JSON string. Rendered by the real model's own template (its chat_template.jinja, through transformers),
    # independent of the kit's templates.
    _, calls = parse_tool_calls(
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "250 * 0.15"}}\n</tool_call>'
    )
    printed_obj = '"arguments": {"expression": "250 * 0.15"}'
    real = real_rendering(*conversation, real_tokenizer)
    kit_obj = {t: printed_obj in x.text for t, x in renders.items()}
    real_obj = real is not None and printed_obj in real
    real_str = real is not None and '"arguments": "{\\"expression\\"' in real
    form = "a JSON object" if real_obj else "an escaped JSON string" if real_str else "neither form"
    return (
        (
            f"the real model's chat_template.jinja (transformers apply_chat_template) writes the arguments as {form}"
            if real is not None
            else "the real model's template is not installed (make real-model)"
        )
        + "; the kit's templates: "
        + "; ".join(f"{t} object {v}" for t, v in kit_obj.items())
        + f"; the template's call format asks the model for <args-json-object> ({FORMAT_EXAMPLE in system_turn(renders)}) "
        f"and the host parser reads the object form as {calls[0].arguments}",
        *make_verdict(
            real_obj or real is None,
            "the template writes `tojson` of what the list holds: string arguments come out as an escaped JSON "
            "string, not the object the chapter prints; the object form is what the model itself generates "
            "(the format line asks for <args-json-object>), so the printed sequence needs arguments as a dict",
            [(real is None, "not checked: the real model's template is not on this machine")],
        ),
    )


@TOOL_USE(
    "qwen25-tool-response",
    "Tool Use §3.1",
    "The Qwen2.5 sequence wraps the result in <tool_response> tags.",
    answers=("<tool_response>…</tool_response> 包裹结果",),
)
def qwen25_tool_response(renders):
    n_tr = len([t for t in renders["qwen2.5"].tokens if t.segment == "tool_response"])
    pieces = len(tokenize("<tool_response>", "qwen2.5").ids)
    return (
        f"Qwen2.5: <tool_response> is {pieces} ordinary tokens, {n_tr} tokens for the wrapped result; Qwen3: 1 added "
        "token",
        *make_verdict("<tool_response>" in renders["qwen2.5"].text, "no <tool_response> in the rendering"),
    )


@TOOL_USE(
    "calc-37.5", "Tool Use §3.1", "250 × 15% = 37.5, the result the calculator returns.", answers=("250的15%是37.5",)
)
def calc_37_5():
    calc = {e: TOOLS["calculator"].fn(e)["result"] for e in ("250 * 0.15", "250 * 15%")}
    return (
        f"toolkit.tools calculator: {calc}",
        *make_verdict(all(v == 37.5 for v in calc.values()), "the calculator returns another value"),
    )


@TOOL_USE(
    "two-messages",
    "Tool Use §3.1",
    "One tool call adds two messages: the assistant's call and a 'tool' message with the result; then the model "
    "answers.",
    answers=(
        '结果作为一条 role = "tool" 的消息加进消息列表',
        "消息序列：system, user, assistant(tool_calls), tool, assistant",
        "一次 tool call 会产生两条 message",
    ),
    supports=("把 LLM 当作推理与决策引擎，由宿主执行…再把结果回灌", "按照同样的工具名以及参数来执行该工具"),
)
def two_messages(conversation, renders):
    # Two messages per call, checked against the book's own list and what the template does with it
    roles = [m["role"] + ("(tool_calls)" if m.get("tool_calls") else "") for m in conversation[0]]
    i_call = roles.index("assistant(tool_calls)")
    t25 = renders["qwen2.5"].text
    call_turn = t25.count("<|im_start|>assistant\n<tool_call>")
    return (
        f"the printed list: {', '.join(roles)}; Qwen2.5 renders the call as {call_turn} assistant turn opening with "
        f"<tool_call> and the result as {t25.count('<tool_response>')} <tool_response> block, then the answer turn",
        *make_verdict(
            roles[i_call : i_call + 3] == ["assistant(tool_calls)", "tool", "assistant"]
            and call_turn == 1
            and t25.count("<tool_response>") == 1,
            "the list or its rendering has another shape",
        ),
    )


def tool_use_claims() -> list[Claim]:
    return TOOL_USE.run()


# ================================================================ the request body, sent by the official client
def pinned(package: str) -> str | None:
    """The exact pin of ``package`` in the checkout's requirements.txt (the kit's one place for pins), or None."""
    req = kit_root() / "requirements.txt"
    if not req.exists():
        return None
    m = re.search(rf"^{re.escape(package)}==(\S+)", req.read_text(encoding="utf-8"), re.M)
    return m.group(1) if m else None


def sent_body(msgs, tools) -> dict:
    """ "Tool Use" §3.1's request body ("model": "gpt-4o", messages, tools), built by the installed ``openai`` client
    and caught by a transport that records it: nothing leaves the machine."""
    import httpx  # lazy: the client's HTTP stack loads only for this claim
    import openai  # lazy: the official client loads only for this claim

    sent: list[dict] = []

    def record(request):
        sent.append(json.loads(request.content))
        raise httpx.ConnectError("recorded, not sent", request=request)

    http = httpx.Client(transport=httpx.MockTransport(record))
    client = openai.OpenAI(api_key="none", base_url="http://127.0.0.1:9/v1", max_retries=0, http_client=http)
    try:
        client.chat.completions.create(model="gpt-4o", messages=msgs, tools=tools)
    except openai.APIConnectionError:
        pass
    return sent[0] if sent else {}


def untyped_fields(msgs) -> list[str]:
    """``role.field`` of each message field the client's typed message params do not define."""
    from openai.types import chat as oc  # lazy: the official client loads only for this claim

    typed = {
        "system": oc.ChatCompletionSystemMessageParam,
        "user": oc.ChatCompletionUserMessageParam,
        "assistant": oc.ChatCompletionAssistantMessageParam,
        "tool": oc.ChatCompletionToolMessageParam,
    }
    return [f"{m['role']}.{k}" for m in msgs for k in m if k not in typed[m["role"]].__annotations__]


@REQUEST_BODY(
    "openai-request-body",
    "Tool Use §3.1",
    'The message list is the body of an OpenAI Chat Completions request: "model", "messages" (system, user, the '
    "assistant's tool_calls with arguments as a JSON string, the tool result by tool_call_id, the answer) and "
    '"tools".',
    answers=('"model": "gpt-4o"（请求体）',),
)
def openai_request_body(conversation):
    msgs, tools = conversation
    body, untyped = sent_body(msgs, tools), untyped_fields(msgs)
    args = [c["function"]["arguments"] for m in body.get("messages", []) for c in m.get("tool_calls") or []]
    pin, have = pinned("openai"), version("openai")
    same = body == {"model": "gpt-4o", "messages": msgs, "tools": tools}
    return (
        f"openai {have} (pinned {pin or 'nowhere found'} in requirements.txt) sent the chapter's request to a "
        f"recording transport: keys {sorted(body)}, model {body.get('model')!r}, roles "
        f"{[m['role'] for m in body.get('messages', [])]}, arguments {args}; the body equals the chapter's messages "
        f"and tools: {same}; fields the client's typed message params do not define: {untyped or 'none'}",
        *make_verdict(
            same and bool(args) and all(isinstance(a, str) for a in args),
            "the official client does not send the chapter's body as printed",
            [
                (
                    bool(untyped),
                    f"the chapter's {', '.join(untyped)} is not in the client's typed API (a tool message is role, "
                    "content, tool_call_id): it is sent as given, and a server may ignore it",
                ),
                (pin is not None and pin != have, f"the installed client ({have}) is not the pinned one ({pin})"),
                (pin is None, "no requirements.txt beside the kit (an installed wheel): the pin is not checked"),
            ],
        ),
    )


def request_body_claims() -> list[Claim]:
    return REQUEST_BODY.run()
