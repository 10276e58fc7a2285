"""benchmarks/stream_replay.py: the kit's side equals the one-shot parse on every case and chunking, the causes
read the right cases, the table has its columns, and (where vLLM's venv exists) vLLM's hermes parser is replayed on
the named cases with every difference explained."""

import json
from pathlib import Path

import pytest

from toolkit.parse import parse_tool_calls
from toolkit.paths import script_module
from toolkit.streamparse import assemble, stream_events
from toolkit.tokenizer import qwen_tokenizer

ROOT = Path(__file__).resolve().parents[1]
bench = script_module(ROOT / "benchmarks" / "stream_replay.py", "bench_stream_replay")


@pytest.fixture(scope="module")
def tok():
    return qwen_tokenizer("qwen2.5")


def test_chunkings_rebuild_the_text_and_split_tags(tok):
    text = bench.NAMED["call after text"]
    ch = bench.chunkings(text, tok, 3, seed=1)
    assert set(ch) == {"chars", "tokens", "random 1", "random 2", "random 3"}
    assert all("".join(c) == text for c in ch.values())
    assert any("<tool_call>" in p for p in ch["tokens"])  # the tag is one token: one piece
    assert not any("<tool_call>" in p for p in ch["chars"])  # one character at a time: the tag split 10 times


def test_kit_side_equals_the_one_shot_parse_everywhere(tok):
    cases = {**bench.NAMED, **bench._generated(20, seed=3)}
    result = bench.compare(cases, tok, 2, vllm=False, tokenizer_dir="")
    assert result["kit_differences"] == 0 and result["streams"] >= 4 * len(cases)
    for text in cases.values():
        assert bench.kit_form(*assemble(stream_events(list(text)))) == bench.kit_form(*parse_tool_calls(text))


def test_causes_fit_their_cases():
    one = bench.kit_form(*parse_tool_calls(bench.NAMED["text after a call"]))
    dropped = {"content": "", "calls": one["calls"]}
    assert bench.causes_of(bench.NAMED["text after a call"], one, dropped) == ["text after or between calls"]
    think = bench.NAMED["call inside think"]
    assert bench.causes_of(think, bench.kit_form(*parse_tool_calls(think)), {"content": "", "calls": []})[0] == (
        "call inside <think>"
    )
    same = bench.NAMED["empty arguments"]
    form = bench.kit_form(*parse_tool_calls(same))
    assert bench.causes_of(same, form, form) == ["unexplained"]  # no difference, no cause fits
    assert bench.vllm_form({"content": " a ", "calls": [{"name": "f", "arguments": '{"x'}]})["calls"] == [
        ["f", '(not JSON) {"x']
    ]


def test_table_rows_have_their_columns():
    row = {"text": "t", "one_shot": {}, "vllm_chunkings": ["chars", "tokens"], "cause": "escaped name"}
    rows = bench.table({"rows": {"case": row, "same": dict(row, cause=None)}})
    assert rows == [
        {
            "cause": "escaped name",
            "cases": 1,
            "streams": 2,
            "examples": ["case"],
            "why": dict((n, w) for n, _, w in bench.CAUSES)["escaped name"],
        }
    ]


@pytest.mark.skipif(
    not bench.VLLM_PYTHON.exists(),
    reason=f"vLLM's own venv ({bench.VLLM_PYTHON}) is absent: its hermes parser cannot be replayed here",
)
def test_vllm_hermes_replay_every_difference_has_a_cause(tok):
    from toolkit.paths import cache_dir

    result = bench.compare(bench.NAMED, tok, 0, vllm=True, tokenizer_dir=str(cache_dir() / "tokenizers" / "qwen2.5"))
    assert result["worker"]["vllm"] and result["kit_differences"] == 0
    rows = result["rows"]
    assert rows and all(r["cause"] != "unexplained" for r in rows.values()), {
        n: r for n, r in rows.items() if r["cause"] == "unexplained"
    }
    assert "empty arguments" not in rows and "call after text" not in rows  # these stream right
    assert rows["text after a call"]["cause"] == "text after or between calls"
    own = result["vllm_stream_vs_own_one_shot"]  # streamed vs the same parser's one-shot result of the same text
    assert 0 <= own <= result["streams"] and own == sum(
        len(c["chunkings"]) for c in result["vllm_stream_vs_own_one_shot_cases"].values()
    )
    json.dumps(result)  # the saved table is plain JSON
