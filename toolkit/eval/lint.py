"""Check tool definitions against the description guidelines of the "Tool Use" chapter (§3.1) plus the structural
rules a host needs; each finding cites its rule (``python -m toolkit lint-tools``: ``toolkit/commands/lint_tools.py``).

What it does
- ``lint(tools)`` takes OpenAI-style (``{"type": "function", "function": {...}}``), bare (``{name, description,
  parameters}``) or MCP (``{name, description, inputSchema}``) tools and returns :class:`Finding` rows
  ``(level, rule, tool, message)``; ``level`` is ``error`` (the tool is broken or breaks a hard limit) or
  ``warning`` (the guidelines advise against it).
- Rules (ids are stable; "§3.1" = "Tool Use" chapter, description guidelines):
  S1 error: a name matching ``^[A-Za-z0-9_.-]{1,64}$``; S2 error: parameters a valid JSON Schema object;
  S3 error: every ``required`` name is a property; S4 error: duplicate tool names;
  G1 warning (§3.1): the description starts with a verb ("Fetches", "Calculates");
  G2 warning (§3.1): it says when NOT to use the tool;
  G3 warning (§3.1): strong typing — a numeric parameter without ``minimum``/``maximum``, or a string whose
  description lists choices ("one of", "either", "e.g. a, b") without an ``enum``;
  G4 error (§3.1): every parameter has a description; G5 warning (§3.1): at most 5 top-level parameters;
  G6 error (§3.1): the description is at most 1024 characters; G0 error: a description at all;
  G7 error (§3.1 strong typing): every parameter has a ``type`` (or an ``enum``/``const``/``anyOf``/``$ref``);
  G8 error (§3.1 "do not assume the model understands from the name", §14.5.9 tool-selection errors): a name
  made only of generic words (``do``, ``run``, ``process_data``) or of one or two characters;
  G9 error (§3.1 start with a verb that says what it does): a description whose words are all generic ("Gets
  data.", "Handles things."); G10 error (§3.1: what it does and when not to use it need a sentence): a
  description of fewer than ``MIN_WORDS`` words (``MIN_CJK_CHARS`` characters in Chinese);
  G11 error (§3.1 every parameter has a description): one shorter than ``MIN_PARAM_CHARS`` characters ("v")
  or one that only repeats the parameter's name;
  K1 warning (kit rule, measured by the description benchmark): two tools whose names look alike (``look_alikes``:
  every pair up to 300 names, sorted neighbours beyond, at most 50 findings and a summary line).
- ``RULES``: each rule id and what it says (the command prints it beside each finding).

What it leaves out
- Judging whether a description is *true* or *clear*: these are text checks, and the verb check is a word
  list plus an English "-s" heuristic, so it can be wrong on unusual verbs (a warning, never an error).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from toolkit.errors import bounded_message, describe

NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MAX_DESCRIPTION = 1024
MAX_PARAMS = 5
MIN_WORDS = 5  # "Fetches the weather." (3 words) cannot also say when not to use it
MIN_CJK_CHARS = 6
MIN_PARAM_CHARS = 3
TYPED = ("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref")
_GENERIC_NAME = {
    "do", "run", "exec", "execute", "process", "handle", "handler", "tool", "tools", "func", "function", "fn",
    "helper", "util", "utils", "misc", "data", "get", "set", "call", "action", "task", "thing", "stuff", "api",
    "main", "test", "foo", "bar", "baz", "method", "op", "operation", "query", "request", "info", "item",
    "object", "perform", "work", "my", "the", "a", "it", "new", "tmp", "temp", "generic", "general", "any",
}  # fmt: skip
_GENERIC_WORDS = _GENERIC_NAME | {
    "gets", "does", "handles", "manages", "processes", "performs", "helps", "works", "deals", "runs", "returns",
    "things", "something", "some", "information", "results", "result", "items", "values", "value", "objects",
    "of", "with", "for", "and", "or", "to", "an", "this", "that", "stuff", "input", "output", "inputs", "outputs",
    "requests", "operations", "tasks", "actions", "given", "specified", "relevant", "various", "certain",
}  # fmt: skip
_NOT_VERBS = {
    "this",
    "the",
    "a",
    "an",
    "tool",
    "function",
    "api",
    "it",
    "is",
    "gets",
    "does",
    "has",
    "helper",
    "utility",
    "data",
    "information",
    "handles",
    "manages",
    "processes",
    "deals",
    "works",
}
_VERBS = {
    "get",
    "fetch",
    "find",
    "search",
    "calculate",
    "compute",
    "send",
    "create",
    "delete",
    "update",
    "list",
    "read",
    "write",
    "convert",
    "return",
    "look",
    "check",
    "retrieve",
    "generate",
    "set",
    "add",
    "remove",
    "query",
    "book",
    "play",
    "translate",
    "estimate",
    "predict",
    "save",
    "open",
    "run",
    "solve",
}
_VAGUE = {"handles", "manages", "processes", "does", "deals", "works", "performs", "helps"}
_WHEN_NOT = re.compile(
    r"\b(do not|don't|not for|never use|only for|only use|use only|instead use|"
    r"use [a-z_.]+ instead|not use)\b",
    re.IGNORECASE,
)
_CHOICES = re.compile(r"\b(one of|either|options?:|possible values|allowed values|choose from|e\.g\.)\b", re.IGNORECASE)
RULES = {
    "S1": "name is 1-64 characters of letters, digits, _ . -",
    "S2": "parameters form a valid JSON Schema object",
    "S3": "every required parameter is defined",
    "S4": "tool names are unique",
    "G0": "the tool has a description",
    "G1": "§3.1: the description starts with a verb (Fetches, Calculates …)",
    "G2": "§3.1: the description says when not to use the tool",
    "G3": "§3.1: strong typing — enum for a fixed set, minimum/maximum for numbers",
    "G4": "§3.1: every parameter has a description",
    "G5": f"§3.1: few top-level parameters (≤ {MAX_PARAMS})",
    "G6": f"§3.1: the description is at most {MAX_DESCRIPTION} characters",
    "G7": "§3.1: strong typing — every parameter has a type",
    "G8": "§3.1 / §14.5.9: a name that says what the tool does (generic names cause wrong tool choices)",
    "G9": "§3.1: the description says specifically what the tool does, not 'gets data'",
    "G10": f"§3.1: the description is a sentence (≥ {MIN_WORDS} words) saying what it does and when not to use it",
    "G11": "§3.1: every parameter has a real description, not a letter or its own name",
    "K1": "kit rule: tool names do not look alike (measured: look-alike names cost selection accuracy)",
}


@dataclass
class Finding:
    level: str  # "error" | "warning"
    rule: str
    tool: str
    message: str


def _fn(tool) -> dict:
    if not isinstance(tool, dict):
        return {}
    if isinstance(tool.get("function"), dict):
        return tool["function"]
    fn = dict(tool)
    if "inputSchema" in fn and "parameters" not in fn:
        fn["parameters"] = fn.pop("inputSchema")
    return fn


def _verb_first(desc: str) -> bool:
    m = re.match(r"\W*([A-Za-z]+)", desc)
    if not m:
        return bool(re.match(r"\s*[\u4e00-\u9fff]", desc))  # a Chinese description: not judged here
    w = m.group(1).lower()
    if w in _VAGUE:
        return False
    if w in _VERBS or (w.endswith("s") and w[:-1] in _VERBS) or (w.endswith("es") and w[:-2] in _VERBS):
        return True
    return w not in _NOT_VERBS and w.endswith("s") and not w.endswith("ss") and len(w) > 3


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _name_parts(name: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)]


def _vague_name(name: str) -> bool:
    parts = _name_parts(name)
    return len(name) <= 2 or not parts or all(p in _GENERIC_NAME for p in parts)


def _cjk(text: str) -> int:
    return len(re.findall(r"[\u4e00-\u9fff]", text))


def _describes(desc: str, param: str) -> bool:
    """Whether a parameter's description says more than a letter or the parameter's own name."""
    d = desc.strip()
    if len(d) < MIN_PARAM_CHARS and not _cjk(d):
        return False
    return re.sub(r"[\W_]", "", d.lower()) != re.sub(r"[\W_]", "", param.lower())


def lint(tools) -> list[Finding]:
    """All findings for a list of tools (see the module docstring for the rules)."""
    out: list[Finding] = []
    if isinstance(tools, dict) and "tools" in tools:
        tools = tools["tools"]  # a tools/list result
    if not isinstance(tools, list):
        return [Finding("error", "S2", "(file)", 'expected a list of tools (or {"tools": [...]})')]
    names = []
    for i, tool in enumerate(tools):
        fn = _fn(tool)
        name = fn.get("name") if isinstance(fn.get("name"), str) else f"#{i}"
        names.append(name)

        def add(level, rule, msg, name=name):
            out.append(Finding(level, rule, name, msg))

        if not isinstance(fn.get("name"), str) or not NAME.match(fn["name"]):
            add("error", "S1", f"invalid name {describe(fn.get('name'))}")
        elif _vague_name(fn["name"]):
            add("error", "G8", f"name {fn['name']!r} says nothing about what the tool does")
        desc = fn.get("description")
        if not isinstance(desc, str) or not desc.strip():
            add("error", "G0", "no description: the model only sees the name")
            desc = ""
        else:
            if len(desc) > MAX_DESCRIPTION:
                add(
                    "error", "G6", f"description is {len(desc)} characters (> {MAX_DESCRIPTION}): it dilutes the signal"
                )
            if not _verb_first(desc):
                add("warning", "G1", f"description starts with {desc.split()[0]!r}, not a verb saying what it does")
            words = _words(desc)
            chinese = _cjk(desc) > len(words)  # judged by characters, not words
            if words and not chinese and all(w in _GENERIC_WORDS for w in words):
                add("error", "G9", f"description {bounded_message(desc, 80)!r} says nothing specific")
            if (_cjk(desc) < MIN_CJK_CHARS) if chinese else (len(words) < MIN_WORDS):
                n = f"{_cjk(desc)} characters" if chinese else f"{len(words)} word(s)"
                add("error", "G10", f"description is {n}: too short to say what it does and when not to use it")
            if not _WHEN_NOT.search(desc):
                add("warning", "G2", "description never says when not to use it (e.g. 'Do not use for …')")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            add("error", "S2", "parameters must be a JSON Schema object")
            continue
        import jsonschema  # lazy: ~1-6 s (its IRI format checker builds a parser); `lint-tools` parses first

        try:
            jsonschema.validators.validator_for(params, default=jsonschema.Draft202012Validator).check_schema(params)
        except jsonschema.SchemaError as e:
            add("error", "S2", f"invalid JSON Schema: {e.message[:160]}")
            continue
        if params.get("type") not in ("object", None):
            add("error", "S2", f"parameters type is {params.get('type')!r}, not 'object'")
        props = params.get("properties") or {}
        for r in params.get("required") or []:
            if r not in props:
                add("error", "S3", f"required parameter {r!r} is not defined")
        if len(props) > MAX_PARAMS:
            add("warning", "G5", f"{len(props)} top-level parameters (> {MAX_PARAMS}): more to forget")
        for p, s in props.items():
            if not isinstance(s, dict):
                continue
            if not str(s.get("description", "")).strip():
                add("error", "G4", f"parameter {p!r} has no description")
            elif not _describes(str(s["description"]), p):
                add(
                    "error",
                    "G11",
                    f"parameter {p!r} is described only as {bounded_message(str(s['description']), 40)!r}",
                )
            if not set(TYPED) & set(s):
                add("error", "G7", f"parameter {p!r} has no type: the model must guess what to send")
            t = s.get("type")
            if (
                t in ("integer", "number")
                and "enum" not in s
                and not ({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(s))
            ):
                add("warning", "G3", f"numeric parameter {p!r} has no minimum/maximum")
            if t == "string" and "enum" not in s and _CHOICES.search(str(s.get("description", ""))):
                add("warning", "G3", f"string parameter {p!r} lists choices in prose but has no enum")
    seen = {}
    for n in names:
        if n in seen:
            out.append(Finding("error", "S4", n, "duplicate tool name"))
        seen[n] = True
    out += look_alikes(list(dict.fromkeys(names)))
    return out


PAIRWISE_UP_TO = 300  # names compared pair by pair up to here (45k pairs, well under a second); beyond, neighbours
NEIGHBOURS = 16  # each name against the next 16 in sorted order: n * 16 comparisons, not n^2 / 2
MAX_K1 = 50  # look-alike findings printed; the rest is one summary line


def look_alikes(names: list[str]) -> list[Finding]:
    """K1: pairs of names whose letters (``_.-`` dropped, lower case) are at least 85% alike. Up to
    ``PAIRWISE_UP_TO`` names every pair; more (a 2,000-tool file took 40 s and printed 779,701 warnings), each name
    against its ``NEIGHBOURS`` nearest in sorted order (alike names that differ in their first letters are then
    missed, which the summary says). At most ``MAX_K1`` findings, then one summary finding with the count."""
    keys = [re.sub(r"[_.\-]", "", n.lower()) for n in names]
    order = sorted(range(len(names)), key=lambda i: keys[i])
    window = len(names) if len(names) <= PAIRWISE_UP_TO else NEIGHBOURS
    found: list[Finding] = []
    hits = 0
    for pos, i in enumerate(order):
        for j in order[pos + 1 : pos + 1 + window]:
            m = difflib.SequenceMatcher(None, keys[i], keys[j])
            if m.real_quick_ratio() >= 0.85 and m.quick_ratio() >= 0.85 and m.ratio() >= 0.85:
                hits += 1
                if len(found) < MAX_K1:
                    a, b = (names[i], names[j]) if i < j else (names[j], names[i])
                    found.append(Finding("warning", "K1", a, f"looks like {b!r}: the model may pick the wrong one"))
    if hits > MAX_K1 or window < len(names):
        how = "every pair" if window == len(names) else f"each name against its {NEIGHBOURS} neighbours in sorted order"
        found.append(
            Finding(
                "warning",
                "K1",
                "(all)",
                f"{hits:,} look-alike pair(s) in {len(names):,} names ({how}); {len(found)} shown",
            )
        )
    return found
