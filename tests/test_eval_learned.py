"""toolkit.eval.learned (base vs adapter on the same cases) and toolkit.eval.budget (budgets from the answers)."""

from toolkit.eval import budget, learned
from toolkit.eval.bfcl import CATEGORIES
from toolkit.tokenizer import qwen_tokenizer


def _doc(cases, model):
    return {"accuracy": {"meta": {"model": model}, "data": {"cases": cases}}}


def _case(cid, mode, ok, kind, text):
    return dict(id=cid, mode=mode, ok=ok, kind=kind, text=text)


def test_compare_scores_the_base_on_exactly_the_adapters_cases():
    tag = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    base = _doc(
        [_case(f"simple_python_{i}", "native", False, "no_call", "```json {}```") for i in range(10)]
        + [_case(f"irrelevance_{i}", "native", True, "ok", "{}") for i in range(4)],
        "base",
    )
    adapter = _doc(
        [_case(f"simple_python_{i}", "native", i < 3, "ok" if i < 3 else "wrong_value", tag) for i in range(4)]
        + [
            _case("irrelevance_0", "native", False, "call_when_none", tag),
            _case("irrelevance_1", "native", True, "ok", "no"),
        ],
        "adapter",
    )
    cmp = learned.compare(base, adapter)
    rows = {r["category"]: r for r in cmp["rows"]}
    assert rows["simple_python"]["adapter"]["n"] == rows["simple_python"]["base"]["n"] == 4
    assert rows["simple_python"]["adapter"]["correct"] == 3 and rows["simple_python"]["base"]["correct"] == 0
    assert (rows["simple_python"]["gained"], rows["simple_python"]["lost"]) == (3, 0)
    assert (rows["irrelevance"]["gained"], rows["irrelevance"]["lost"]) == (0, 1)  # irrelevance_0: base ok, adapter not
    assert cmp["adapter_tag_rate_due"] == 1.0 and cmp["base_tag_rate_due"] == 0.0
    assert cmp["adapter_tag_rate_none"] == 0.5
    t = {x["target"]: x for x in learned.targets(cmp)}
    assert t["<tool_call> where a call is due"]["met"]
    assert not t["native simple_python"]["met"] and t["native simple_python"]["bar"] == 76.75
    assert t["native irrelevance"]["bar"] == 60.0 and not t["native irrelevance"]["met"]
    md = learned.markdown(cmp)
    assert "like for like" in md and "wrong_value 1" in md and "native simple_python: +3 / -0" in md


def test_a_constrained_only_run_is_compared_and_targeted_without_native_rows():
    """A run of one mode (the whole-category constrained run) gets that mode's targets and taxonomy, no empty
    native section and no tag-rate target it has no cases for."""
    base = _doc(
        [_case(f"multiple_{i}", "constrained", i < 2, "ok" if i < 2 else "wrong_value", "x") for i in range(4)], "b"
    )
    adapter = _doc(
        [_case(f"multiple_{i}", "constrained", i < 3, "ok" if i < 3 else "no_call", "x") for i in range(4)], "a"
    )
    cmp = learned.compare(base, adapter)
    (t,) = learned.targets(cmp)
    assert t["target"] == "constrained multiple: adapter >= base" and t["met"] and t["gap"] == 25.0
    md = learned.markdown(cmp)
    assert (
        "did not fix (native mode" not in md and "constrained mode, adapter, failure kinds" in md and "no_call 1" in md
    )


def test_published_rows_are_the_like_for_like_columns():
    row = learned.LIKE_FOR_LIKE[learned.TARGET_ROW]
    assert row["simple_python"] == 76.75 and row["irrelevance"] == 12.92  # not the averaged 58.25 / 16.44
    assert all(set(CATEGORIES) <= set(r) for r in learned.LIKE_FOR_LIKE.values())
    assert "data_non_live" in row["source"]


def test_budgets_fit_the_longest_possible_answer():
    tok = qwen_tokenizer("qwen2.5")
    for cat in CATEGORIES:
        n, which = budget.longest_answer(cat, tok)
        b = budget.budget(cat, tok)
        if cat == "irrelevance":
            assert n == 0 and b == budget.TEXT_BUDGET
            continue
        assert which and n > 0 and b >= n + budget.MARGIN and b % 16 == 0
    # the saved runs' fixed 64 / 128 cut the longest answers of three categories
    assert budget.longest_answer("simple_python", tok)[0] > 64
    assert budget.longest_answer("parallel", tok)[0] > 128


def test_lost_counts_what_the_second_model_missed_and_the_arguments_it_left_out():
    def c(cid, ok, kind, calls, mode="native"):
        return dict(_case(cid, mode, ok, kind, ""), calls=calls)

    full = [{"f": {"a": 1, "detail": True}}]
    before = _doc(
        [
            c("simple_python_0", True, "ok", full),
            c("simple_python_1", True, "ok", full),
            c("parallel_0", True, "ok", [{"f": {"a": 1}}, {"g": {"b": 2, "c": 3}}]),
            c("multiple_0", True, "ok", [{"f": {"a": 1}}]),
            c("multiple_1", False, "wrong_value", [{"f": {"a": 9}}]),
            c("irrelevance_0", True, "ok", []),
            c("simple_python_2", True, "ok", full, mode="prompt"),
        ],
        "before",
    )
    after = _doc(
        [
            c("simple_python_0", False, "missing_param", [{"f": {"a": 1}}]),  # an argument left out
            c("simple_python_1", False, "wrong_value", [{"f": {"a": 2, "detail": True}}]),  # same names: not dropped
            c("parallel_0", False, "missing_param", [{"f": {"a": 1}}, {"g": {"b": 2}}]),  # left out in the second call
            c("multiple_0", False, "wrong_function", [{"h": {}}]),  # another function: not dropped
            c("multiple_1", True, "ok", [{"f": {"a": 1}}]),  # gained, not lost
            c("irrelevance_0", False, "call_when_none", [{"f": {}}]),  # no call was due: left to compare()
            c("simple_python_2", False, "missing_param", [{"f": {"a": 1}}], mode="prompt"),  # another mode
            c("simple_python_9", False, "no_call", []),  # only in the second file
        ],
        "after",
    )
    got = learned.lost(before, after)
    assert got["n"] == 4 and got["dropped"] == 2
    assert got["kinds"] == {"missing_param": 2, "wrong_value": 1, "wrong_function": 1}
    assert got["ids"] == ["simple_python_0", "simple_python_1", "parallel_0", "multiple_0"]
    assert learned.lost(before, after, mode="prompt")["dropped"] == 1
    back = learned.lost(after, before)  # the other way round: only multiple_1
    assert (back["n"], back["kinds"], back["dropped"]) == (1, {"wrong_value": 1}, 0)
    assert learned.lost(_doc([], "x"), after)["n"] == 0
