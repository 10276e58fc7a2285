"""BFCL cases: load them from the installed ``bfcl-eval`` package, turn their function docs into JSON Schema
tools, build the prompt for each of three modes, and read the calls back out of a model's text.

What it does
- ``load(category)`` reads ``bfcl_eval/data/BFCL_v4_<category>.json`` and its ``possible_answer`` file (one JSON
  object per line) into :class:`Case` objects; ``subset`` picks a seeded sample.
- ``to_schema(doc)`` converts one BFCL function doc to an OpenAI-style tool: ``dict``→``object``,
  ``float``→``number``, ``tuple``→``array``, ``any``→``string`` (BFCL's own FC conversion does the same),
  recursively, dropping keys JSON Schema does not know (``optional``; ``required: true`` on a property).
- Three modes, side by side, on the same case:
  ``prompt``: BFCL's "Prompt" style — the function docs as JSON in the system prompt (text assembled at run
  time from ``bfcl_eval.constants.default_prompts``, nothing copied), the model answers
  ``[f(a=1), g(b=2)]`` in plain text; ``native``: the chat template's ``tools=``, calls parsed from
  ``<tool_call>`` blocks with :func:`toolkit.parse.parse_tool_calls`; ``constrained``: the native prompt decoded
  under :func:`constrained_grammar` — either one or more ``<tool_call>`` blocks that fit the tools' schemas, or
  a plain-text answer (so a model can still decline, which irrelevance needs) that may not contain ``{``,
  ``````` or ``<tool_call>`` (so JSON cannot hide in prose).
- Reading the calls back out of each mode's text is :mod:`toolkit.eval.read`'s job (``decode``).

What it leaves out
- BFCL's per-model prompt tweaks and its other output formats (JSON, XML); the live, multi-turn and non-Python
  categories; positional arguments in prompt mode (BFCL ignores them too).
"""

from __future__ import annotations

import copy
import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from toolkit.eval.choices import CATEGORIES, MODES
from toolkit.grammar.compile import compile_grammar, compile_tools
from toolkit.loop.gate import FirstTokenGate, starting_ids
from toolkit.qwen import TOOL_CALL_ID

TYPE_MAP = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "any": "string",
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "number": "number",
    "object": "object",
}
_DROP = ("optional",)


def data_dir() -> Path:
    """``bfcl_eval/data`` of the installed package (``pip install --no-deps bfcl-eval``)."""
    try:
        import bfcl_eval  # lazy: only when BFCL runs
    except ImportError:
        raise ImportError(
            "bfcl-eval is not installed: `pip install --no-deps -r requirements-nodeps.txt` (or `make setup`)"
        ) from None
    return Path(str(files(bfcl_eval))) / "data"


@dataclass
class Case:
    id: str
    category: str
    messages: list  # the first turn's messages (BFCL's question[0])
    functions: list  # BFCL function docs, as shipped
    answers: list | None = None  # BFCL possible answers [{name: {arg: [allowed values]}}]; None for irrelevance

    @property
    def tools(self) -> list[dict]:
        return [to_schema(f) for f in self.functions]


def _read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@lru_cache(maxsize=16)
def _load(category: str) -> tuple:
    d = data_dir()
    path = d / f"BFCL_v4_{category}.json"
    if not path.exists():
        have = sorted(p.name.removeprefix("BFCL_v4_").removesuffix(".json") for p in d.glob("BFCL_v4_*.json"))
        raise ValueError(f"unknown BFCL category {category!r}; the package has {have}")
    answers = {}
    ans_path = d / "possible_answer" / path.name
    if ans_path.exists():
        answers = {a["id"]: a["ground_truth"] for a in _read_lines(ans_path)}
    return tuple(
        Case(e["id"], category, e["question"][0], e["function"], answers.get(e["id"])) for e in _read_lines(path)
    )


def load(category: str) -> list[Case]:
    """All cases of one BFCL category (fresh copies: callers may mutate them)."""
    return [copy.deepcopy(c) for c in _load(category)]


def subset(categories=CATEGORIES, limit: int | None = None, seed: int = 0) -> list[Case]:
    """Up to ``limit`` cases per category: the first ``limit`` of a seeded shuffle (so a larger limit extends a
    smaller one, and cached outputs carry over), returned in BFCL's order within each category."""
    out = []
    for cat in categories:
        cases = load(cat)
        if limit is not None and limit < len(cases):
            order = list(range(len(cases)))
            random.Random(f"{seed}:{cat}").shuffle(order)
            keep = set(order[:limit])
            cases = [c for i, c in enumerate(cases) if i in keep]
        out.extend(cases)
    return out


# ---------------------------------------------------------------- BFCL doc -> JSON Schema
def _convert(s):
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k in _DROP:
            continue
        if k == "type":
            out[k] = TYPE_MAP.get(v, "string") if isinstance(v, str) else v
        elif k == "properties" and isinstance(v, dict):
            out[k] = {name: _convert(p) for name, p in v.items()}
        elif k == "items":
            out[k] = _convert(v)
        elif k == "required" and not isinstance(v, list):
            continue  # `required: true` on a property is not JSON Schema
        else:
            out[k] = copy.deepcopy(v)
    return out


def to_schema(doc: dict) -> dict:
    """One BFCL function doc → ``{"type": "function", "function": {name, description, parameters}}``."""
    params = _convert(doc.get("parameters") or {"type": "dict", "properties": {}})
    params["type"] = "object"
    params.setdefault("properties", {})
    return {
        "type": "function",
        "function": {"name": doc["name"], "description": doc.get("description", ""), "parameters": params},
    }


# ---------------------------------------------------------------- the three modes
def prompt_system(functions: list[dict]) -> str:
    """BFCL's default "Prompt" system text (python call format, JSON function docs, plaintext, classic style),
    assembled from the pieces ``bfcl_eval`` ships."""
    from bfcl_eval.constants.default_prompts import (
        OUTPUT_FORMAT_MAPPING,
        PARAM_TYPE_MAPPING,
        PROMPT_STYLE_TEMPLATES,
        PROMPT_TEMPLATE_MAPPING,
    )  # lazy: only when BFCL runs

    style = PROMPT_STYLE_TEMPLATES["classic"]
    fmt = style["tool_call_no_tag"].format(
        output_format=OUTPUT_FORMAT_MAPPING["python"], param_types=PARAM_TYPE_MAPPING["python"]
    )
    return PROMPT_TEMPLATE_MAPPING["plaintext"].format(
        persona=style["persona"],
        task=style["task"],
        tool_call_format=fmt,
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=style["available_tools"].format(format="json", functions=json.dumps(functions, indent=4)),
    )


def default_system(template: str = "qwen2.5") -> str:
    """The system line a kit template renders when the messages bring none ("" if it has none)."""
    src = (files("toolkit") / "templates" / f"{template}.jinja").read_text(encoding="utf-8")
    m = re.search(r"set default_system = '([^']*)'", src)
    return m.group(1) if m else ""


def messages_for(
    case: Case, mode: str, tools: list[dict] | None = None, system_hint: str | None = None
) -> tuple[list[dict], list[dict] | None]:
    """``(messages, tools)`` to render for ``mode``. ``tools`` overrides the case's converted tools
    (description variants). ``system_hint`` (native/constrained only) is appended to the case's system message,
    or to the template's default system line when the case has none (a prompt lever:
    :data:`toolkit.eval.choices.HINTS`)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    msgs = [dict(m) for m in case.messages]
    if system_hint and mode != "prompt":
        if msgs and msgs[0]["role"] == "system":
            msgs[0]["content"] = msgs[0]["content"] + "\n\n" + system_hint
        else:
            msgs.insert(0, {"role": "system", "content": (default_system() + "\n\n" + system_hint).strip()})
    if mode == "prompt":
        system = prompt_system(case.functions)
        if msgs and msgs[0]["role"] == "system":
            msgs[0]["content"] = system + "\n\n" + msgs[0]["content"]
        else:
            msgs.insert(0, {"role": "system", "content": system})
        return msgs, None
    return msgs, (tools if tools is not None else case.tools)


STRUCTURED_STARTS = ("```", "{", "<", "[")
DECLINE_MAX_TOKENS = 32


def constrained_grammar(
    tools: list[dict],
    tokenizer,
    vocab_width: int | None = None,
    max_calls: int = 4,
    more_calls: bool = False,
    list_calls: bool = False,
):
    """Either 1..``max_calls`` ``<tool_call>`` blocks whose JSON fits one of ``tools``, or a short text answer
    (at most :data:`DECLINE_MAX_TOKENS` tokens) free of :data:`STRUCTURED_STARTS`, so a call cannot hide in
    prose as fenced JSON, XML or a Python list. Raises :class:`toolkit.grammar.compile.SchemaError` for schemas
    xgrammar rejects (the caller counts that, it does not crash). ``more_calls``: every call is followed by
    ``"\n"``, so the turn's only end decision (another ``<tool_call>`` or the stop token) comes right after
    ``</tool_call>\n`` — the point :class:`toolkit.eval.levers.MoreCallsGate` acts on. ``list_calls``: one block
    holding a JSON list of 1..``max_calls`` calls (the end decision is ``,`` or ``]`` inside the list, where a
    model that writes ``[f(a=1), g(b=2)]`` in BFCL's prompt style already decides);
    ``toolkit.eval.read.decode`` with ``list_calls=True`` splits it. The names are the levers' own
    (:class:`toolkit.eval.levers.Levers`)."""
    calls = compile_tools(
        tools, tokenizer, mode="tag", parallel=False, vocab_width=vocab_width, as_list=list_calls, max_calls=max_calls
    )
    tag = calls.source["format"]
    nl = {"type": "const_string", "value": "\n"}
    optional_nl = {"type": "repeat", "min": 0, "max": 1, "content": nl}
    if list_calls:  # one block (a list inside), then an optional newline before the end
        calls_format = {"type": "sequence", "elements": [tag, optional_nl]}
    elif more_calls:  # (tag "\n"){1,max}: after each newline, another call or the end
        calls_format = {
            "type": "repeat",
            "min": 1,
            "max": max_calls,
            "content": {"type": "sequence", "elements": [tag, nl]},
        }
    else:
        # tag ("\n" tag)* with an optional trailing "\n", so after a newline the model still chooses between
        # another call and <|im_end|> (without it, a newline after </tool_call> would force one more call)
        more = {"type": "sequence", "elements": [nl, tag]}
        calls_format = {
            "type": "sequence",
            "elements": [tag, {"type": "repeat", "min": 0, "max": max_calls - 1, "content": more}, optional_nl],
        }
    text = {"type": "any_text", "excludes": list(STRUCTURED_STARTS) + ["<tool_call>"], "max_tokens": DECLINE_MAX_TOKENS}
    structural = {"type": "structural_tag", "format": {"type": "or", "elements": [calls_format, text]}}
    what = "the call-list-or-text tag" if list_calls else "the call-or-text tag"
    return compile_grammar(tokenizer, vocab_width, "tag_or_text", calls.schema, what, structural)


def _structured_ids(tokenizer) -> tuple:
    return starting_ids(tokenizer, STRUCTURED_STARTS)


GATE_THRESHOLD = 0.85


class IntentGate(FirstTokenGate):
    """The kit's first-token gate (:class:`toolkit.loop.gate.FirstTokenGate`) as BFCL's constrained mode uses it: call
    or answer in text, decided by how much probability the model puts on *starting structured output* (````` ``,
    ``{``, ``<``, ``[`` …, i.e. a call in its own habit, plus ``<tool_call>`` itself). At or above ``threshold`` the
    first token is forced to ``<tool_call>``; below it ``<tool_call>`` is forbidden and the grammar's text branch
    (which excludes those starts) takes over. ``threshold=None``: no forcing — the structured mass is moved onto
    ``<tool_call>`` and the argmax decides. Later steps are untouched. A kit lever, reported wherever it is used.

    Why: measured on the real 0.5B model, p(<tool_call>) at the first step is ~0 on BFCL prompts while ```` ``` ````
    and ``{`` take 70–95% on questions a tool answers — and less on questions none of the tools fits, so the mass
    is a usable relevance signal. ``GATE_THRESHOLD`` = 0.85 was read off 10 probe cases (8 of which are in the
    seeded evaluation subset): a weak, stated choice, not a tuned one.
    """

    def __init__(self, tokenizer, threshold: float | None = GATE_THRESHOLD, tool_call_id: int = TOOL_CALL_ID):
        super().__init__(tokenizer, STRUCTURED_STARTS, threshold, tool_call_id)
