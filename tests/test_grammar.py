"""Tests for toolkit.grammar: grammars, the mask protocol, traces vs xgrammar's own generate, distortion, CLI."""

import json
import math
from collections import Counter

import numpy as np
import pytest

from toolkit.commands.constrain import cli
from toolkit.grammar.check import chat_prompt, check, check_output
from toolkit.grammar.compile import SchemaError, bounded, call_schema, compile_schema, compile_tools
from toolkit.grammar.distortion import distortion
from toolkit.grammar.hf import generate, sample
from toolkit.grammar.inspect import score, trace
from toolkit.grammar.mask import GrammarMask, replay
from toolkit.grammar.precheck import precheck
from toolkit.qwen import IM_END_ID, STOP_IDS, TOOL_CALL_END_ID, TOOL_CALL_ID, VOCAB_WIDTH

WEATHER_ARGS = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 16},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_ARGS}},
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string", "maxLength": 24}},
                "required": ["expression"],
                "additionalProperties": False,
            },
        },
    },
]
CITIES = {"enum": ["Paris", "Parma", "Pavia", "Perth", "Lyon"]}


@pytest.fixture(scope="module")
def stand_in():
    import torch

    from toolkit import models

    torch.set_num_threads(1)
    return models.load("stand-in", quiet=True)


@pytest.fixture(scope="module")
def real():
    from toolkit import models

    return models.load("qwen2.5-coder-0.5b", quiet=True)


def _bits(g, ids_so_far=()):
    m = GrammarMask(g)
    for i in ids_so_far:
        assert m.accept(i)
    bm = m.allocate()
    m.fill(bm)
    return m, bm


# ---------------------------------------------------------------- grammars and the mask
def test_bitmask_is_sized_from_the_model_vocab_not_the_tokenizer(qwen3_tok):
    import xgrammar as xgr
    from xgrammar.testing import bitmask_to_bool_mask

    g = compile_schema(WEATHER_ARGS, qwen3_tok)
    assert len(qwen3_tok) < VOCAB_WIDTH == g.vocab_width
    m, bm = _bits(g, qwen3_tok.encode('{"city": "'))
    assert tuple(bm.shape) == (1, math.ceil(VOCAB_WIDTH / 32)) and bm.dtype == xgr.bitmask_dtype
    ours = m.allowed(bm)
    theirs = bitmask_to_bool_mask(bm, VOCAB_WIDTH)[0].numpy()  # xgrammar's own decoding of the bits
    assert ours.shape == (VOCAB_WIDTH,) and (ours == theirs).all()
    assert 1_000 < m.allowed_count(bm) < len(qwen3_tok)  # inside a string: most tokens, never padding rows
    assert not ours[len(qwen3_tok) :].any()
    # Applying the mask leaves exactly the allowed logits finite.
    import torch

    logits = torch.zeros(1, VOCAB_WIDTH)
    m.apply(logits, bm)
    assert int(torch.isfinite(logits).sum()) == m.allowed_count(bm)


def test_schema_grammar_text_and_compact_json(qwen3_tok):
    g = compile_schema(WEATHER_ARGS, qwen3_tok)
    assert g.kind == "schema" and "root ::=" in g.text and str(g) == g.text
    assert "celsius" in g.text and "{0, 16}" in g.text  # the enum and the maxLength are in the grammar
    text = '{"city": "Paris", "unit": "celsius", "days": 3}'
    ok, done = replay(g, qwen3_tok.encode(text) + [IM_END_ID])
    assert ok and done
    ok, _ = replay(g, qwen3_tok.encode('{"city":"Paris"'))  # no space after ':' is not compact-Qwen JSON
    assert not ok


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "strin"},
        {"type": "object", "properties": 5},
        {"type": "string", "maxLength": "x"},
        {"type": "string", "pattern": "(["},
        {"$ref": "#/defs/nope"},
        "{not json",
        5,
    ],
)
def test_malformed_schema_is_one_clear_line(qwen3_tok, bad):
    with pytest.raises(SchemaError) as e:
        compile_schema(bad, qwen3_tok)
    msg = str(e.value)
    assert msg and "\n" not in msg and len(msg) < 320
    assert ".cc:" not in msg and "Traceback" not in msg and "Check failed" not in msg
    # No chained xgrammar traceback under it.
    assert e.value.__cause__ is None and (e.value.__context__ is None or e.value.__suppress_context__)


def test_bad_tool_list(qwen3_tok):
    for tools in ([], [{"function": {"description": "no name"}}], ["get_weather"]):
        with pytest.raises(SchemaError):
            compile_tools(tools, qwen3_tok)
    with pytest.raises(SchemaError):
        compile_tools(TOOLS, qwen3_tok, mode="xml")


def test_structural_tag_binds_single_tool_call_tokens(qwen3_tok):
    g = compile_tools(TOOLS, qwen3_tok, mode="tag")
    assert "Token(151657)" in g.text and "Token(151658)" in g.text
    m, bm = _bits(g)
    assert np.flatnonzero(m.allowed(bm)).tolist() == [TOOL_CALL_ID]  # only the single <tool_call> token
    # Spelling the marker from ordinary pieces is refused.
    pieces = [qwen3_tok.convert_tokens_to_ids(t) for t in ("<", "tool", "_call", ">")]
    assert not GrammarMask(g).accept(pieces[0])
    body = '\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n'
    m, bm = _bits(g, [TOOL_CALL_ID] + qwen3_tok.encode(body))
    assert np.flatnonzero(m.allowed(bm)).tolist() == [TOOL_CALL_END_ID]
    assert m.accept(TOOL_CALL_END_ID) and m.accept(IM_END_ID) and m.is_terminated()
    # A call to an unknown tool, or arguments of the wrong tool, are not in the grammar.
    ok, _ = replay(g, [TOOL_CALL_ID] + qwen3_tok.encode('\n{"name": "delete_all"'))
    assert not ok


def test_parallel_calls_only_when_asked(qwen3_tok):
    one = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+1"}}\n</tool_call>'
    two = one + "\n" + one.replace("1+1", "2*3")
    ids2 = qwen3_tok.encode(two) + [IM_END_ID]
    assert ids2.count(TOOL_CALL_ID) == 2
    assert replay(compile_tools(TOOLS, qwen3_tok, parallel=True), ids2) == (True, True)
    assert replay(compile_tools(TOOLS, qwen3_tok, parallel=False), ids2)[0] is False
    assert check(two, call_schema(TOOLS), tool_tags=True).valid


def test_optional_calls_allow_free_text_first(qwen3_tok):
    g = compile_tools(TOOLS, qwen3_tok, required=False)
    call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+1"}}\n</tool_call>'
    assert replay(g, qwen3_tok.encode("Let me compute.\n" + call) + [IM_END_ID]) == (True, True)
    assert replay(g, qwen3_tok.encode("No tool is needed.") + [IM_END_ID]) == (True, True)
    ok, _ = replay(g, qwen3_tok.encode('<tool_call>\n{"name": "rm"'))  # once triggered, the call is checked
    assert not ok


def test_one_of_mode_is_plain_json(qwen3_tok):
    g = compile_tools(TOOLS, qwen3_tok, mode="one_of")
    assert g.kind == "one_of" and "Token(" not in g.text
    assert replay(g, qwen3_tok.encode('{"name": "calculator", "arguments": {"expression": "7"}}') + [IM_END_ID]) == (
        True,
        True,
    )


def test_bounded_adds_limits_but_keeps_enums():
    s = bounded(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "enum": ["x"]},
                "c": {"type": "array", "items": {"type": "string"}},
                "d": {"type": "string", "maxLength": 3},
                "e": {"type": "string", "maxLength": 99},
            },
        },
        max_length=9,
    )
    p = s["properties"]
    assert p["a"]["maxLength"] == 9 and "maxLength" not in p["b"] and p["d"]["maxLength"] == 3
    assert p["e"]["maxLength"] == 9  # a looser bound is tightened
    assert p["c"]["maxItems"] == 4 and p["c"]["items"]["maxLength"] == 9


def test_check_reports_parse_and_schema_failures():
    assert not check('```json\n{"city": "Paris"}\n```', WEATHER_ARGS).parses
    bad = check('{"city": "Paris", "unit": "kelvin", "days": 3}', WEATHER_ARGS)
    assert bad.parses and not bad.valid and "kelvin" in bad.error
    assert not check('{"name": "x"}', WEATHER_ARGS, tool_tags=True).parses  # no <tool_call> block


# ---------------------------------------------------------------- decoding with the stand-in
@pytest.mark.slow
def test_fifty_constrained_samples_all_validate_unconstrained_mostly_not(stand_in):
    tok = stand_in.tokenizer
    g = compile_schema(WEATHER_ARGS, tok)
    prompt = chat_prompt(tok, "Weather in Paris for 3 days, as JSON.", system=json.dumps(WEATHER_ARGS))
    # 64 tokens is enough: the longest valid output is ~20 structure tokens + a 16-character city.
    con = sample(stand_in.model, tok, prompt, g, n=50, temperature=1.0, seed=0, max_new_tokens=64)
    unc = sample(stand_in.model, tok, prompt, None, n=50, temperature=1.0, seed=0, max_new_tokens=64)
    n_con = sum(check(x.text, WEATHER_ARGS).valid for x in con)
    n_unc = sum(check(x.text, WEATHER_ARGS).valid for x in unc)
    print(
        f"\n{stand_in.description}\nconstrained: {n_con}/50 parse+validate; unconstrained: {n_unc}/50 "
        f"({len(set(x.text for x in con))} distinct constrained outputs)"
    )
    assert all(x.terminated for x in con)
    assert n_con == 50
    assert n_unc < 25


def test_trace_equals_xgrammar_generate_under_greedy(stand_in):
    tok = stand_in.tokenizer
    g = compile_tools(TOOLS, tok, mode="tag")
    prompt = chat_prompt(tok, "What is 2+2?", tools=TOOLS)
    tr = trace(stand_in.model, tok, prompt, g, max_new_tokens=60)
    gen = generate(stand_in.model, tok, prompt, g, max_new_tokens=60)
    assert tr.ids == gen.ids and tr.terminated and gen.terminated
    assert tr.ids[0] == TOOL_CALL_ID and tr.ids[-1] in STOP_IDS  # <|im_end|> or <|endoftext|>
    assert check_output(gen.text, g).valid


def test_trace_records_each_step_consistently(stand_in):
    tok = stand_in.tokenizer
    g = compile_schema(WEATHER_ARGS, tok)
    prompt = chat_prompt(tok, "Weather?")
    a = trace(stand_in.model, tok, prompt, g, max_new_tokens=40, temperature=1.0, seed=7, top_k=5)
    b = trace(stand_in.model, tok, prompt, g, max_new_tokens=40, temperature=1.0, seed=7, top_k=5)
    assert a.ids == b.ids  # seeded sampling is reproducible
    replay_mask = GrammarMask(g)
    bm = replay_mask.allocate()
    for s in a.steps:
        replay_mask.fill(bm)
        allowed = replay_mask.allowed(bm)
        assert s.allowed == int(allowed.sum()) and allowed[s.chosen]
        assert 0.0 <= s.removed_mass <= 1.0 and len(s.top_before) <= 5
        assert all(allowed[t[0]] for t in s.top_after)  # after the mask only allowed tokens keep probability
        assert sum(t[3] for t in s.top_after) <= 1.0 + 1e-5
        # Removed mass = the model's probability on everything the mask forbids.
        assert s.removed_mass >= sum(t[2] for t in s.top_before if not allowed[t[0]]) - 1e-5
        replay_mask.accept(s.chosen)
    assert replay_mask.is_terminated() == a.terminated
    unc = trace(stand_in.model, tok, prompt, None, max_new_tokens=5)
    assert all(s.allowed == VOCAB_WIDTH and s.removed_mass == 0.0 for s in unc.steps)


def test_distortion_is_exact_and_matches_sampling(stand_in):
    tok = stand_in.tokenizer
    g = compile_schema(CITIES, tok)
    prompt = chat_prompt(tok, "Which city?")
    d = distortion(stand_in.model, tok, prompt, g, eps=1e-6, max_nodes=1000)
    print("\n" + d.table(), f"\nchanged={d.changed} pruned={d.pruned:.2g}")
    assert {r[0] for r in d.rows} <= {json.dumps(c) for c in CITIES["enum"]}
    assert abs(sum(r[1] for r in d.rows) - 1) < 1e-9
    assert abs(sum(r[2] for r in d.rows) + d.pruned - 1) < 1e-6
    # One path checked independently: greedy decoding's path has masked probability = product of its steps.
    tr = trace(stand_in.model, tok, prompt, g, max_new_tokens=12)
    path = [p for p in d.paths if p[0] == tr.ids[:-1]]
    # The path ends at any stop id (<|im_end|> or <|endoftext|>): its probability sums over them.
    stop_mass = sum(t[3] for t in tr.steps[-1].top_after if t[0] in STOP_IDS)
    expected = math.prod(s.p_after for s in tr.steps[:-1]) * stop_mass
    assert len(path) == 1 and math.isclose(path[0][2], expected, rel_tol=1e-3)
    assert d.greedy == tr.text
    # Scoring a whole output in one forward (no KV cache) agrees with the tree walk's path probabilities.
    for text in ('"Paris"', '"Lyon"'):
        ids = tok.encode(text)
        (leaf,) = [p for p in d.paths if p[0] == ids]
        sc = score(stand_in.model, tok, prompt, g, text)
        assert sc.accepted and sc.terminated
        assert math.isclose(sc.logp_model, math.log(leaf[1]), rel_tol=1e-4, abs_tol=1e-3)
        assert math.isclose(sc.logp_masked, math.log(leaf[2]), rel_tol=1e-4, abs_tol=1e-3)
    assert not score(stand_in.model, tok, prompt, g, '"Rome"').accepted
    # Step-wise masking + renormalisation is what sampling under the mask actually draws from.
    n = 300
    got = Counter(
        x.text for x in sample(stand_in.model, tok, prompt, g, n=n, temperature=1.0, seed=3, max_new_tokens=12)
    )
    for text, _, p_masked, _ in d.rows:
        sd = math.sqrt(max(p_masked * (1 - p_masked), 1e-4) / n)
        assert abs(got[text] / n - p_masked) < 5 * sd + 0.01, (text, got[text], p_masked)


def test_cli_prints_samples_and_model(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
    rc = cli(
        [
            "--schema",
            str(f),
            "--samples",
            "3",
            "--temperature",
            "1.0",
            "--json",
            "--model",
            "stand-in",
            "--max-new-tokens",
            "40",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and "STAND-IN" in out["model"] and not out["semantic"]
    assert len(out["samples"]) == 3 and out["valid"] == 3 and all(s["valid"] for s in out["samples"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "strin"}')
    assert cli(["--schema", str(bad), "--model", "stand-in"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "strin" in err


# ---------------------------------------------------------------- the real offline model
@pytest.mark.real_model
def test_real_model_tag_emits_single_token_and_valid_call(real):
    from toolkit import models

    tok = real.tokenizer
    g = compile_tools(TOOLS, tok, mode="tag", vocab_width=models.vocab_width(real.model))
    prompt = chat_prompt(tok, "What is the weather in Paris in fahrenheit for the next 2 days?", tools=TOOLS)
    tr = trace(real.model, tok, prompt, g, max_new_tokens=48)
    gen = generate(real.model, tok, prompt, g, max_new_tokens=48)
    print(f"\n{real.description}\n{gen.text}")
    assert tr.ids[0] == TOOL_CALL_ID == gen.ids[0]
    assert gen.ids == tr.ids and gen.terminated
    chk = check_output(gen.text, g)
    assert chk.valid, chk.error
    assert chk.values[0]["name"] == "get_weather"


# ---------------------------------------------------------------- schemas checked before any model loads
UNENFORCED = [  # (schema, the keyword named in the one-line error)
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"required": ["a"]}}, "not"),
    ({"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 3}}}}, "#/properties/a: not"),
    ({"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {}}, "if"),
    ({"type": "string", "format": "regex"}, "format 'regex'"),
    ({"type": "string", "format": "idn-email"}, "format 'idn-email'"),
    ({"type": "string", "format": "made-up"}, "format 'made-up'"),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, "dependentRequired"),
    ({"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}}, "dependentSchemas"),
    ({"type": "object", "dependencies": {"a": ["b"]}}, "dependencies"),
    ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties"),
    ({"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False}, "unevaluatedItems"),
    ({"type": "array", "contains": {"const": 3}}, "contains"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "string", "pattern": "^(?=.*\\d)[a-z0-9]+$"}, "lookaround"),
    ({"type": "string", "pattern": "^(?!abc)[a-z]+$"}, "lookaround"),
    (
        {"$defs": {"x": {"$anchor": "xa", "type": "integer"}}, "type": "object", "properties": {"a": {"$ref": "#xa"}}},
        "$ref '#xa'",
    ),
    ({"$defs": {"x": {"type": "integer"}}, "$ref": "#/$defs/x", "minimum": 5}, "beside $ref"),
    ({"$dynamicAnchor": "n", "type": "object", "properties": {"a": {"$dynamicRef": "#n"}}}, "$dynamicRef"),
    (
        {"anyOf": [{"type": "object", "properties": {"deep": {"type": "array", "items": {"not": {}}}}}]},
        "#/anyOf/0/properties/deep/items: not",
    ),
]


@pytest.mark.parametrize("schema,named", UNENFORCED, ids=[n for _, n in UNENFORCED])
def test_unenforced_keywords_are_named_in_one_line(schema, named):
    with pytest.raises(SchemaError) as e:
        precheck(schema)
    assert named in str(e.value) and "\n" not in str(e.value) and "--allow-unenforced" in str(e.value)
    assert any(named.split(": ")[-1].split(" ")[0] in w for w in precheck(schema, allow_unenforced=True))


def test_what_xgrammar_enforces_passes_and_is_really_enforced(qwen3_tok):
    """The control: keywords left out of the list are enforced by xgrammar 0.2.9, checked on its own grammar."""
    import xgrammar as xgr
    from xgrammar.testing import _is_grammar_accept_string as accepts

    enforced = [
        ({"type": "object", "patternProperties": {"^x": {"type": "integer"}}}, '{"xa": "s"}'),
        ({"type": "object", "propertyNames": {"pattern": "^x"}, "additionalProperties": True}, '{"b": 1}'),
        ({"type": "object", "maxProperties": 1, "additionalProperties": True}, '{"a": 1, "b": 2}'),
        ({"type": "integer", "multipleOf": 3}, "4"),
        ({"type": "string", "format": "email"}, '"x"'),
        ({"type": "string", "format": "date"}, '"2020-13-45"'),
        (
            {
                "$defs": {"x": {"type": "integer"}},
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/x"}},
                "required": ["a"],
            },
            '{"a": "s"}',
        ),
    ]
    for schema, invalid in enforced:
        assert precheck(schema) == []
        assert not accepts(xgr.Grammar.from_json_schema(schema, any_whitespace=False), invalid), schema
    ignored = [
        ({"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 3}}}}, '{"a": 3}'),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "if": {"required": ["a"]},
                "then": {"required": ["b"]},
            },
            '{"a": 1}',
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "dependentRequired": {"a": ["b"]},
            },
            '{"a": 1}',
        ),
        ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}, "[1]"),
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "[1, 1]"),
        ({"type": "string", "format": "regex"}, '"("'),
        ({"type": "string", "pattern": "^(?!abc)[a-z]+$"}, '"abc"'),
    ]
    for schema, invalid in ignored:  # and the listed ones really are not: xgrammar accepts what they forbid
        assert precheck(schema, allow_unenforced=True)
        assert accepts(xgr.Grammar.from_json_schema(schema, any_whitespace=False), invalid), schema


def test_xgrammar_warnings_are_caught_and_named():
    with pytest.raises(SchemaError, match="multipleOf is not supported for type:number"):
        precheck({"type": "number", "multipleOf": 0.5})
    assert precheck({"type": "string", "pattern": "^a+$", "minLength": 3}, allow_unenforced=True)


@pytest.mark.parametrize(
    "schema,named",
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}, "unresolvable $ref '#/$defs/nope'"),
        ({"type": "object", "properties": {"a": {"$dynamicRef": "#nope"}}}, "unresolvable $dynamicRef '#nope'"),
        ({"type": "object", "properties": {"a": {"$ref": "http://example.com/s.json"}}}, "unresolvable $ref"),
        ({"type": "object", "properties": {"a": {"$ref": "#/properties/b"}}}, "unresolvable $ref"),
        ({"type": "object", "properties": {"a": {"$ref": 5}}}, "is not of type 'string'"),
    ],
)
def test_unresolvable_references_are_one_line_errors(schema, named):
    with pytest.raises(SchemaError) as e:
        precheck(schema, allow_unenforced=True)
    assert named in str(e.value) and "\n" not in str(e.value)


def _files(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    nested = '{"type": "object", "properties": {"a": ' * 600 + "{}" + "}}" * 600
    yield "missing", tmp_path / "nope.json", "no such file"  # refused while parsing (toolkit.cliargs)
    yield "folder", tmp_path, "is a folder"
    for name, data, why in [
        ("empty", b"", "not valid JSON"),
        ("not json", b'{"type": ', "not valid JSON"),
        ("binary", bytes(range(256)) * 10, "not UTF-8"),
        ("list", b"[1, 2]", "must hold an object, got list"),
        ("string", b'"a"', "got str"),
        ("number", b"3", "got int"),
        ("null", b"null", "got NoneType"),
        ("deep", deep.encode(), "nested too deeply"),
        ("nested schema", nested.encode(), "nested too deeply"),
        ("huge", b" " * (2 << 20), "limit is 1,048,576"),
        ("meta", b'{"type": 5}', "invalid JSON Schema"),
        ("bad ref", b'{"properties": {"a": {"$dynamicRef": "#gone"}}}', "unresolvable $dynamicRef"),
        ("unenforced", b'{"type": "object", "not": {}}', "xgrammar does not enforce: #: not"),
        ("nan", b'{"type": "number", "maximum": NaN}', "NaN is not a JSON value"),
        ("utf-16", '{"type": "string"}'.encode("utf-16"), "not UTF-8"),
    ]:
        path = tmp_path / f"{name}.json"
        path.write_bytes(data)
        yield name, path, why


def _constrain_cli(schema, *args, timeout):
    """``python -m toolkit constrain --schema SCHEMA ARGS`` as a user runs it."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "toolkit", "constrain", "--schema", str(schema), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_cli_rejects_every_bad_file_in_one_line_before_any_model_loads(tmp_path):
    """Through the command line as a user runs it, with the stand-in: had a bad schema reached the model, the
    command would sample and exit 0; each must be refused in one line about the schema, rc 2."""
    seen = 0
    for name, path, why in _files(tmp_path):
        r = _constrain_cli(path, "--model", "stand-in", timeout=120)
        err = r.stderr.strip()
        assert r.returncode == 2, (name, r.returncode, err[-500:])
        assert "Traceback" not in err and len(err.splitlines()) == 1 and "error:" in err, (name, err)
        assert why in err and "loaded" not in err, (name, err)
        seen += 1
    assert seen == 17


def test_cli_allow_unenforced_warns_and_samples(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(
        json.dumps({"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 3}}}, "required": ["n"]})
    )
    args = ["--model", "stand-in", "--samples", "2", "--max-new-tokens", "16", "--allow-unenforced", "--json"]
    r = _constrain_cli(f, *args, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "warning: not enforced by the grammar: #/properties/n: not (ignored)" in r.stderr
    out = json.loads(r.stdout)
    assert "STAND-IN" in out["model"] and any("not (ignored)" in n for n in out["notes"])
