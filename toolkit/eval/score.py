"""Score decoded calls against BFCL's possible answers by BFCL's AST rules, and name the way each one failed.

What it does
- ``score(case, decoded)`` → :class:`Score` ``(ok, kind, detail)``. Rules (BFCL's AST checker, Python
  typing): the function name must be one the case expects; every required parameter present; no parameter
  outside the doc or the possible answer; a parameter the answer lists without ``""`` (BFCL's mark for
  "optional") must be present; types as in the doc (an ``int`` passes for ``float``; a value of the answer's
  own type passes as a "variable"; list items typed one level deep); values: strings compared after removing
  spaces and ``,./-_*^`` and lower-casing, lists element-wise the same way, dicts key by key, everything else by
  ``==`` against the allowed values. ``simple`` and ``multiple`` expect exactly one call; ``parallel*`` expect
  as many calls as answers, matched in any order; ``irrelevance`` passes when no call was made. One kit rule is
  stricter than BFCL: in the tagged modes a ``<tool_call>`` block that does not parse (e.g. cut off by the
  token cap) counts as a call attempt on irrelevance (BFCL counts any undecodable output as "no call").
- The failure taxonomy (book §14.5.9): :data:`KINDS`.

What it leaves out
- Java/JavaScript typing and BFCL's name conversion for APIs that forbid dots in names (not needed here).
- Partial credit: a case is right or wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolkit.eval.bfcl import Case
from toolkit.eval.read import Decoded

KINDS = {
    "ok": "correct",
    "no_call": "no call when one was needed",
    "call_when_none": "a call when none was needed",
    "malformed": "malformed output (could not be read as calls)",
    "unknown_function": "a function that does not exist",
    "wrong_function": "a real function, but the wrong one",
    "missing_param": "missing parameter",
    "extra_param": "extra (unexpected) parameter",
    "wrong_type": "wrong type",
    "wrong_value": "wrong value",
    "wrong_count": "wrong number of (parallel) calls",
}
PY_TYPES = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
NESTED = ("array", "tuple")


@dataclass
class Score:
    ok: bool
    kind: str  # one of KINDS
    detail: str = ""


def _norm(s: str) -> str:
    return re.sub(r"[ ,./\-_*^]", "", s).lower().replace("'", '"')


def _answer_type(allowed: list):
    return next((type(a) for a in allowed if a != ""), None)


def _type_ok(value, allowed: list, want, inner) -> tuple[bool, bool]:
    """(type fits, is a "variable"). BFCL: exact Python type; a value of the answer's type counts as a variable
    name; for arrays every item must fit the inner type for at least one listed answer."""
    ans_t = _answer_type(allowed)
    variable = ans_t is not None and ans_t is not want
    if type(value) is want:
        if inner is None:
            return True, variable
        for a in allowed:
            if not isinstance(a, list) or all(_type_ok(v, a, inner, None)[0] for v in value):
                return True, variable
        return False, variable  # BFCL: a failed item check is final (no "variable" escape for the list)
    if ans_t is not None and type(value) is ans_t:
        return True, True
    return False, variable


def _dict_ok(value: dict, allowed: list) -> bool:
    for a in allowed:
        if a == "":
            continue
        if all(
            k in a
            and (_norm(v) if isinstance(v, str) else v) in [(_norm(x) if isinstance(x, str) else x) for x in a[k]]
            for k, v in value.items()
        ) and all(k in value or "" in vs for k, vs in a.items()):
            return True
    return False


def _list_ok(value: list, allowed: list) -> bool:
    # BFCL walks every allowed answer as a sequence: the optional mark "" becomes the empty list.
    got = [_norm(v) if isinstance(v, str) else v for v in value]
    return got in [[_norm(x) if isinstance(x, str) else x for x in a] for a in allowed if isinstance(a, (list, str))]


def _list_dict_ok(value: list, allowed: list) -> bool:
    return any(
        isinstance(a, (list, str)) and len(a) == len(value) and all(_dict_ok(v, [d]) for v, d in zip(value, a))
        for a in allowed
    )


def check_call(doc: dict, call: dict, answer: dict, known: set[str]) -> Score:
    """One call ``{name: args}`` against one possible answer ``{name: {param: [allowed]}}`` and its doc."""
    ((want_name, allowed),) = answer.items()
    ((name, args),) = call.items()
    if name != want_name:
        return Score(False, "wrong_function" if name in known else "unknown_function", f"{name} instead of {want_name}")
    params = doc["parameters"].get("properties", {})
    for p in doc["parameters"].get("required", []):
        if p not in args:
            return Score(False, "missing_param", f"required {p!r} missing")
    for p, value in args.items():
        if p not in params or p not in allowed:
            return Score(False, "extra_param", f"unexpected {p!r}")
        t = params[p].get("type", "string")
        want = PY_TYPES.get(t, str)
        inner = PY_TYPES.get(params[p].get("items", {}).get("type", "string"), str) if t in NESTED else None
        if t == "tuple" and isinstance(value, tuple):
            value = list(value)
        if t == "float" and type(value) is int:
            value = float(value)
        fits, variable = _type_ok(value, allowed[p], want, inner)
        if not fits:
            return Score(False, "wrong_type", f"{p!r}: {type(value).__name__} for {t}")
        if not variable:
            if want is dict:
                good = _dict_ok(value, allowed[p])
            elif want is list and inner is dict:
                good = _list_dict_ok(value, allowed[p])
            elif want is str:
                good = _norm(value) in [_norm(a) for a in allowed[p] if isinstance(a, str)]
            elif want is list:
                good = _list_ok(value, allowed[p])
            else:
                good = value in allowed[p]
        else:
            good = value in allowed[p]
        if not good:
            return Score(False, "wrong_value", f"{p!r}={value!r}, allowed {allowed[p]!r}"[:200])
    for p, vs in allowed.items():
        if p not in args and "" not in vs:
            return Score(False, "missing_param", f"{p!r} missing (not optional in the answer)")
    return Score(True, "ok")


def _doc(case: Case, name: str) -> dict | None:
    return next((f for f in case.functions if f["name"] == name), None)


def score(case: Case, decoded: Decoded) -> Score:
    """Right or wrong, and how, for one case (see the module docstring for the rules)."""
    cat = case.category
    if "irrelevance" in cat:
        if decoded.error is None and decoded.calls:
            return Score(False, "call_when_none", f"called {next(iter(decoded.calls[0]))}")
        if decoded.attempted:  # kit rule, stricter than BFCL: a broken <tool_call> block is still a call attempt
            return Score(False, "call_when_none", f"a malformed call: {decoded.error}")
        return Score(True, "ok")
    if decoded.error is not None:
        return Score(False, "malformed", decoded.error)
    if not decoded.calls:
        why = "untagged JSON call" if decoded.untagged_json else "a prose answer" if decoded.prose else ""
        return Score(False, "no_call", why)
    answers = case.answers or []
    known = {f["name"] for f in case.functions}
    calls = decoded.calls
    if "parallel" not in cat:
        if len(calls) != 1:
            return Score(False, "wrong_count", f"{len(calls)} calls, expected 1")
        (want,) = answers[:1] or [{}]
        return check_call(_doc(case, next(iter(want))), calls[0], want, known)
    if len(calls) != len(answers):
        return Score(False, "wrong_count", f"{len(calls)} calls, expected {len(answers)}")
    used: set[int] = set()
    for want in answers:
        doc = _doc(case, next(iter(want)))
        first_fail = None
        for i, c in enumerate(calls):
            if i in used:
                continue
            s = check_call(doc, c, want, known)
            if s.ok:
                used.add(i)
                break
            if first_fail is None or (s.kind != "wrong_function" and first_fail.kind == "wrong_function"):
                first_fail = s  # the most telling reason: a same-name call's error beats "another function"
        else:
            return first_fail or Score(False, "wrong_count", "no call left to match")
    return Score(True, "ok")
