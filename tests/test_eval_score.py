"""The BFCL scorer: canonical answers score correct, targeted mutations score wrong with the right kind, and it
agrees with bfcl-eval's own ``ast_checker`` (imported with its model-config module stubbed, in this process only)."""

import copy
import json
import sys
import types
from pathlib import Path

import pytest

from toolkit.eval import bfcl
from toolkit.eval.read import Decoded, decode
from toolkit.eval.score import KINDS, score

AST_CATS = ("simple_python", "multiple", "parallel", "parallel_multiple")


def _pick(value):
    """A dict answer holds allowed values per key too: pick the first real one, recursively."""
    if isinstance(value, dict):
        return {k: _pick(next(x for x in v if x != "")) for k, v in value.items() if any(x != "" for x in v)}
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        return [_pick(x) for x in value]
    return copy.deepcopy(value)


def canonical(case) -> list[dict]:
    """One call per possible answer, each parameter at its first allowed value ("" = optional: left out)."""
    calls = []
    for ans in case.answers:
        ((name, params),) = ans.items()
        props = next(f for f in case.functions if f["name"] == name)["parameters"]["properties"]
        args = {}
        for p, allowed in params.items():
            vals = [v for v in allowed if v != ""]
            if vals and p in props:  # parallel_multiple_12's answer lists a parameter of the other function
                args[p] = _pick(vals[0])
        calls.append({name: args})
    return calls


@pytest.fixture(scope="module")
def cases():
    return {cat: bfcl.load(cat) for cat in AST_CATS + ("irrelevance",)}


def test_every_canonical_answer_scores_correct(cases):
    n = 0
    for cat in AST_CATS:
        for c in cases[cat]:
            s = score(c, Decoded(canonical(c)))
            assert s.ok, (c.id, s)
            n += 1
    assert n == 1000


def test_parallel_calls_score_in_any_order(cases):
    for c in cases["parallel"][:50] + cases["parallel_multiple"][:50]:
        calls = canonical(c)
        assert score(c, Decoded(list(reversed(calls)))).ok, c.id


def _first_param(call):
    ((name, args),) = call.items()
    return name, args


def mutations(case):
    """(kind, calls) pairs that must all score wrong with that kind."""
    calls = canonical(case)
    name, args = _first_param(calls[0])
    doc = next(f for f in case.functions if f["name"] == name)
    props = doc["parameters"]["properties"]
    ((_, allowed),) = case.answers[0].items()
    out = [("unknown_function", [{name + "_x": args}] + calls[1:])]
    others = [f["name"] for f in case.functions if f["name"] != name]
    if others and "parallel" not in case.category:
        out.append(("wrong_function", [{others[0]: args}]))
    req = [p for p in doc["parameters"].get("required", []) if p in args]
    if req:
        out.append(("missing_param", [{name: {k: v for k, v in args.items() if k != req[0]}}] + calls[1:]))
    out.append(("extra_param", [{name: {**args, "zz_not_a_param": 1}}] + calls[1:]))
    for p, v in args.items():
        t = props[p].get("type")
        if t == "string" and isinstance(v, str):
            out.append(("wrong_type", [{name: {**args, p: 12345}}] + calls[1:]))
            out.append(("wrong_value", [{name: {**args, p: v + " zzz"}}] + calls[1:]))
            break
        if t == "integer" and type(v) is int and all(type(a) is int or a == "" for a in allowed[p]):
            out.append(("wrong_value", [{name: {**args, p: max(a for a in allowed[p] if a != "") + 7}}] + calls[1:]))
            break
    if "parallel" in case.category:
        out.append(("wrong_count", calls[:-1]))
    else:
        out.append(("wrong_count", calls + calls))
    out.append(("no_call", []))
    return out


def test_targeted_mutations_score_wrong_with_their_kind(cases):
    seen = {}
    for cat in AST_CATS:
        for c in cases[cat]:
            for kind, calls in mutations(c):
                s = score(c, Decoded(calls))
                assert not s.ok, (c.id, kind, calls)
                if "parallel" in cat and kind in (
                    "unknown_function",
                    "missing_param",
                    "extra_param",
                    "wrong_type",
                    "wrong_value",
                ):
                    # in any-order matching another same-named call may be the closest: wrong, but the kind
                    # reported is the most telling of the candidates
                    assert s.kind in KINDS
                else:
                    assert s.kind == kind, (c.id, kind, s)
                seen[kind] = seen.get(kind, 0) + 1
    assert set(seen) >= {
        "unknown_function",
        "wrong_function",
        "missing_param",
        "extra_param",
        "wrong_type",
        "wrong_value",
        "wrong_count",
        "no_call",
    }, seen


def test_list_items_are_typed_one_level_deep(cases):
    # found by comparing with bfcl-eval on the kit's saved outputs: [1, 3] for an array of floats is a type error
    c = next(c for c in cases["simple_python"] if c.id == "simple_python_13")
    good = {"function": "x**2", "interval": [1.0, 3.0]}
    assert score(c, Decoded([{"calculate_area_under_curve": good}])).ok
    s = score(c, Decoded([{"calculate_area_under_curve": {**good, "interval": [1, 3]}}]))
    assert not s.ok and s.kind == "wrong_type"


def test_irrelevance_passes_only_without_a_call(cases):
    c = cases["irrelevance"][0]
    fn = c.functions[0]["name"]
    assert score(c, Decoded([])).ok
    assert score(c, Decoded(error="not a call")).ok  # BFCL: text that does not decode is no call
    s = score(c, Decoded([{fn: {}}]))
    assert not s.ok and s.kind == "call_when_none"


def test_optional_marker_and_int_for_float(cases):
    c = next(c for c in cases["simple_python"] if c.id == "simple_python_0")
    assert score(c, Decoded([{"calculate_triangle_area": {"base": 10, "height": 5}}])).ok  # unit optional ("")
    assert score(c, Decoded([{"calculate_triangle_area": {"base": 10, "height": 5, "unit": "Units"}}])).ok
    assert not score(c, Decoded([{"calculate_triangle_area": {"base": 10.0, "height": 5}}])).ok  # float for int
    f = next(
        c
        for c in cases["simple_python"]
        for fd in c.functions
        for p in fd["parameters"]["properties"].values()
        if p.get("type") == "float"
    )
    calls = canonical(f)
    name, args = _first_param(calls[0])
    fp = next(
        p
        for p, d in next(x for x in f.functions if x["name"] == name)["parameters"]["properties"].items()
        if d.get("type") == "float" and p in args
    )
    if float(args[fp]).is_integer():
        args[fp] = int(args[fp])
        assert score(f, Decoded(calls)).ok  # an int is accepted where BFCL expects a float


# ---------------------------------------------------------------- agreement with bfcl-eval's ast_checker
@pytest.fixture(scope="module")
def bfcl_checker():
    """bfcl-eval's ast_checker, importable once its model-config module (which imports every vendor SDK) is
    replaced by a stub in this test process."""
    name = "bfcl_eval.constants.model_config"
    saved = sys.modules.get(name)
    stub = types.ModuleType(name)

    class _Cfg:
        underscore_to_dot = False

    class _Map(dict):
        def __missing__(self, key):
            return _Cfg()

    stub.MODEL_CONFIG_MAPPING = _Map()
    sys.modules[name] = stub
    try:
        for mod in [m for m in sys.modules if m.startswith("bfcl_eval.eval_checker.ast_eval")]:
            del sys.modules[mod]
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

        yield lambda case, calls: ast_checker(
            case.functions, calls, case.answers, Language.PYTHON, case.category, "kit"
        )["valid"]
    finally:
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved


def test_agrees_with_bfcl_ast_checker_on_canonical_and_mutated_calls(cases, bfcl_checker):
    agree = total = 0
    disagreements = []
    for cat in AST_CATS:
        for c in cases[cat]:
            for kind, calls in [("canonical", canonical(c))] + mutations(c):
                if not calls:
                    continue  # BFCL scores "no call" before the checker (empty output fails)
                ours, theirs = score(c, Decoded(calls)).ok, bfcl_checker(c, calls)
                total += 1
                agree += ours == theirs
                if ours != theirs:
                    disagreements.append((c.id, kind))
    assert total > 5000
    assert not disagreements, disagreements[:10]


SAVED = sorted((Path(__file__).parents[1] / "benchmarks" / "results").glob("bfcl_*.json"))


@pytest.mark.skipif(not SAVED, reason="no saved BFCL results yet (benchmarks/bfcl.py writes them)")
def test_agrees_with_bfcl_ast_checker_on_saved_model_outputs(cases, bfcl_checker):
    by_id = {c.id: c for cat in cases.values() for c in cat}
    total = 0
    for path in SAVED:
        doc = json.loads(path.read_text())
        for row in doc.get("accuracy", {}).get("data", {}).get("cases", []):
            c = by_id.get(row["id"])
            if c is None or c.category == "irrelevance":
                continue
            d = decode(row["text"], row["mode"])
            if d.error is not None or not d.calls:
                continue  # BFCL fails these before its checker, as we do
            assert score(c, d).ok == bfcl_checker(c, d.calls), (path.name, row["id"], row["mode"], row["text"])
            total += 1
    assert total > 0, f"no saved output in {[p.name for p in SAVED]} was compared with BFCL's checker"
