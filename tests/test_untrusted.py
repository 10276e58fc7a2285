"""The bounded reader (toolkit/untrusted.py): each hostile input the issue names is one ``UntrustedInputError``
line naming the input, never another exception; and generated JSON (huge numbers, deep nesting, odd encodings)
either parses to a plain, finite, shallow value or is refused that way (hypothesis, a fixed small budget)."""

import json
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit import untrusted
from toolkit.untrusted import UntrustedInputError, depth, parse_json, read_json_file

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"a": ' + "9" * 5000 + "}", "digits"),
        ("[" + "-" + "9" * 41 + "]", "digits"),
        ('{"a": NaN}', "NaN"),
        ("[Infinity]", "Infinity"),
        ("[-Infinity]", "Infinity"),
        ("[1e999]", "not finite"),
        ("[" * 450 + "]" * 450, "nested"),
        ("[" * 100_000 + "]" * 100_000, "nested"),
        ('{"a": 1', "not valid JSON"),
        (b'{"a": "\xff\xfe"}', "not UTF-8"),
        ("x" * 101, "limit"),
    ],
)
def test_hostile_json_is_one_line_naming_the_input(text, why):
    with pytest.raises(UntrustedInputError) as e:
        parse_json(text, "the test input", max_bytes=100 if why == "limit" else untrusted.MAX_BYTES)
    msg = str(e.value)
    assert why in msg and "the test input" in msg and "\n" not in msg and len(msg) < 300


def test_plain_json_passes_unchanged():
    value = {"a": [1, -2, 3.5, None, True, "é"], "b": {"c": 10**38}}
    assert parse_json(json.dumps(value)) == value
    assert parse_json("\ufeff[1]") == [1]


def test_depth_counts_levels_without_recursion():
    deep = []
    for _ in range(10_000):
        deep = [deep]
    assert depth(deep) == 10_001 and depth(1) == 0 and depth({"a": [{}]}) == 3


def test_files_that_block_or_are_not_files_are_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, why in [
        (fifo, "FIFO"),
        (tmp_path, "folder"),
        (tmp_path / "none", "No such file"),
        ("/dev/zero", "device"),
    ]:
        with pytest.raises(UntrustedInputError, match=why):
            read_json_file(path, "schema file")
    big = tmp_path / "big.json"
    big.write_text("[" + "1," * 100 + "1]")
    with pytest.raises(UntrustedInputError, match="limit"):
        read_json_file(big, "schema file", max_bytes=50)


def test_an_unknown_home_is_one_line():
    with pytest.raises(UntrustedInputError, match="no such user 'nosuchuser_x9'"):
        untrusted.expand_path("~nosuchuser_x9/schema.json", "schema file")
    with pytest.raises(UntrustedInputError, match="empty"):
        untrusted.expand_path("  ")


def test_undecodable_argv_text_is_refused():
    bad = b"caf\xe9?".decode("utf-8", "surrogateescape")  # how Python hands a non-UTF-8 argument over
    with pytest.raises(UntrustedInputError, match="not UTF-8"):
        untrusted.decode(bad, "the question")


# ---------------------------------------------------------------- fuzzing
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**60), max_value=10**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=30,
)


def _plain(v) -> bool:
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain(x) for k, x in v.items())
    if isinstance(v, list):
        return all(_plain(x) for x in v)
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return len(str(abs(v))) <= untrusted.MAX_INT_DIGITS
    return v is None or isinstance(v, (bool, str))


def _check(text):
    try:
        out = parse_json(text, "fuzz", max_depth=8)
    except UntrustedInputError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz")
        return
    assert _plain(out) and depth(out) <= 8


@FUZZ
@given(values)
def test_fuzz_generated_json_is_parsed_bounded_or_refused(value):
    _check(json.dumps(value))


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_random_bytes_are_parsed_bounded_or_refused(data):
    _check(data)


@FUZZ
@given(
    st.integers(min_value=1, max_value=3000),
    st.sampled_from(["[", '{"a":', "[[", '{"x":[']),
    st.sampled_from(["1", "NaN", "1e400", "9" * 60, '"\\ud800"', ""]),
)
def test_fuzz_deep_and_huge_are_refused_in_one_line(levels, opener, leaf):
    _check(opener * levels + leaf)


@FUZZ
@given(st.one_of(values.map(lambda v: json.dumps(v).encode()), st.binary(max_size=300)))
def test_fuzz_the_schema_and_tools_file_readers(tmp_path_factory, data):
    """The readers built on this module (constrain's schema file, lint-tools' tools file) refuse in one line of
    their own error type, or return what they promise."""
    from toolkit.commands.lint_tools import CannotRead, read_tools_file
    from toolkit.grammar.valid import SchemaError, read_schema_file

    path = tmp_path_factory.mktemp("fuzz") / "in.json"
    path.write_bytes(data)
    for reader, error, kind in ((read_schema_file, SchemaError, dict), (read_tools_file, CannotRead, list)):
        try:
            out = reader(path)
        except error as e:
            assert "\n" not in str(e) and len(str(e)) < 400
            continue
        assert isinstance(out, kind) and depth(out) <= untrusted.MAX_DEPTH


@pytest.mark.parametrize(
    "text, kind",
    [
        ("x" * 101, "size"),
        (b"[\xff]", "encoding"),
        ("[1,", "syntax"),
        ("[" + "9" * 41 + "]", "integer"),
        ("[NaN]", "number"),
        ("[1e999]", "number"),
        ("[" * 65 + "]" * 65, "depth"),
        ("[" * 100_000 + "]" * 100_000, "depth"),
    ],
)
def test_each_refusal_names_the_check_that_made_it(text, kind):
    """``kind`` tells a caller which check refused (the MCP transports read an id back only from text that was
    JSON); a stack-deep nesting and a shallower one over the limit get the same words, wherever the caller is."""
    with pytest.raises(UntrustedInputError) as e:
        parse_json(text, "x", max_bytes=100 if kind == "size" else untrusted.MAX_BYTES)
    assert e.value.kind == kind, (e.value.kind, str(e.value))
    if kind == "depth":
        assert str(e.value) == f"x: JSON nested too deeply (the limit is {untrusted.MAX_DEPTH} levels)"
