"""Batched generation (shared prefix prefilled once), the cached resumable runner, schema rejections counted."""

import json

import pytest

from toolkit.eval import bfcl
from toolkit.eval.levers import Levers
from toolkit.eval.run import Cache, CacheConflict, generate_batch, prompt_ids, run_cases


@pytest.fixture(scope="module")
def tok():
    from toolkit.tokenizer import qwen_tokenizer

    return qwen_tokenizer("qwen2.5")


class _Record:
    """A transformers logits processor that keeps each step's scores (first call = first new token)."""

    def __init__(self):
        self.steps = []

    def __call__(self, input_ids, scores):
        self.steps.append(scores.detach().float().clone())
        return scores


def test_shared_prefix_batch_gives_the_same_logits_as_one_prompt_at_a_time(tok):
    import torch

    from toolkit.backends.hf import HFBackend
    from toolkit.models import stand_in

    backend = HFBackend(stand_in("qwen2.5"), "stand-in")
    cases = bfcl.load("simple_python")[:3]
    prompts = [prompt_ids(c, "native", tok) for c in cases]
    assert len({len(p) for p in prompts}) > 1  # different lengths: padding is exercised
    rec = _Record()
    generate_batch(backend, prompts, max_new_tokens=2, tokenizer=tok, processors=[rec])
    for i, p in enumerate(prompts):
        one = _Record()
        generate_batch(backend, [p], max_new_tokens=2, tokenizer=tok, processors=[one], share_prefix=False)
        for step in range(2):
            assert torch.allclose(rec.steps[step][i], one.steps[step][0], atol=1e-3), (i, step)


def test_runner_scores_caches_and_resumes(tok, tmp_path):
    from toolkit.backends.scripted import ScriptedBackend

    cases = bfcl.load("simple_python")[:2] + bfcl.load("irrelevance")[:1]
    texts = [
        '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>',
        '```json\n{"name": "math.factorial", "arguments": {"number": 5}}\n```',
        "I cannot compute that with these tools.",
    ]
    keys = [
        "Find the area of a triangle",
        "factorial",
        None,
    ]  # the runner sorts by prompt length: answer by what is asked

    def answer(ids):
        q = tok.decode(ids).rsplit("<|im_start|>user", 1)[-1]
        return next((t for k, t in zip(keys, texts) if k and k in q), texts[-1])

    backend = ScriptedBackend(tok, [answer] * 3)
    levers = Levers(mode="native", max_new_tokens=32)
    cache = Cache(tmp_path, "scripted", levers)
    first = list(run_cases(cases, backend, levers, tokenizer=tok, cache=cache, batch_size=8))
    assert len(backend.prompts) == 3 and not any(r.cached for r in first)
    by = {r.id: r for r in first}
    assert by["simple_python_0"].ok and by["simple_python_0"].kind == "ok"
    assert (
        not by["simple_python_1"].ok and by["simple_python_1"].kind == "no_call" and by["simple_python_1"].untagged_json
    )
    assert by["irrelevance_0"].ok
    again = list(run_cases(cases, ScriptedBackend(tok, []), levers, tokenizer=tok, cache=cache))
    assert all(r.cached for r in again) and {r.id: r.ok for r in again} == {r.id: r.ok for r in first}
    assert (
        list(
            run_cases(
                bfcl.load("parallel")[:2],
                ScriptedBackend(tok, []),
                levers,
                tokenizer=tok,
                cache=cache,
                cached_only=True,
            )
        )
        == []
    )


def test_prompt_mode_runs_through_the_same_runner(tok, tmp_path):
    from toolkit.backends.scripted import ScriptedBackend

    case = bfcl.load("parallel")[0]
    text = "[spotify.play(artist='Maroon 5', duration=15), spotify.play(artist='Taylor Swift', duration=20)]"
    (r,) = run_cases([case], ScriptedBackend(tok, [text]), Levers(mode="prompt"), tokenizer=tok)
    assert r.ok and len(r.calls) == 2
    assert r.prompt_tokens > len(prompt_ids(case, "native", tok))  # BFCL's instructions cost tokens


def test_a_schema_xgrammar_rejects_is_counted_not_raised(tok, monkeypatch):
    from toolkit.backends.scripted import ScriptedBackend
    from toolkit.eval import run
    from toolkit.grammar.compile import SchemaError

    def reject(*a, **k):
        raise SchemaError("xgrammar rejected the schema: test")

    monkeypatch.setattr(run, "constrained_grammar", reject)
    cases = bfcl.load("simple_python")[:1] + bfcl.load("irrelevance")[:1]
    rs = list(run_cases(cases, ScriptedBackend(tok, []), Levers(mode="constrained"), tokenizer=tok))
    assert [r.kind for r in rs] == ["malformed", "ok"] and all(r.grammar_error for r in rs)


def test_constrained_batch_on_the_stand_in_is_well_formed(tok):
    from toolkit.backends.hf import HFBackend
    from toolkit.eval.bfcl import constrained_grammar
    from toolkit.grammar.mask import replay
    from toolkit.models import stand_in

    backend = HFBackend(stand_in("qwen2.5"), "stand-in")
    cases = bfcl.load("multiple")[:2]
    grammars = [constrained_grammar(c.tools, tok, backend.vocab_width) for c in cases]
    outs = generate_batch(
        backend, [prompt_ids(c, "constrained", tok) for c in cases], grammars=grammars, max_new_tokens=12, tokenizer=tok
    )
    for (ids, _stopped), g in zip(outs, grammars):
        ok, _ = replay(g, ids)
        assert ok  # every generated token was allowed by the row's own grammar


def test_a_row_ends_at_either_stop_id(tok):
    """The grammars end a turn at <|im_end|> or <|endoftext|> (toolkit.qwen.STOP_IDS); so does a batch row, and the
    stop token is not part of the text."""
    from toolkit.backends.scripted import ScriptedBackend

    case = bfcl.load("simple_python")[0]
    call = '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>'

    class EndsWithEndOfText(ScriptedBackend):
        def generate(self, prompt_ids, **kw):
            g = super().generate(prompt_ids, **kw)
            g.new_ids = [i for i in g.new_ids if i != 151645] + [151643]  # <|endoftext|> instead of <|im_end|>
            return g

    (r,) = run_cases([case], EndsWithEndOfText(tok, [call]), Levers(mode="native"), tokenizer=tok)
    assert r.ok and r.stopped_by == "stop" and "<|endoftext|>" not in r.text


def test_cache_folders_of_models_whose_names_share_a_long_prefix_differ(tmp_path):
    """Two RL adapters on the same base and SFT adapter: names equal in their first 80 characters. They shared one
    folder, and the second adapter's BFCL run read the first one's outputs as its own."""
    base = "Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M → bf16, offline) + LoRA adapter qwen2.5-coder-0.5b-toolcall (r=8)"
    a, b = Cache(tmp_path, base + " + RL adapter a"), Cache(tmp_path, base + " + RL adapter b")
    assert a.dir != b.dir and a.dir.name == b.dir.name  # same settings, other model folders
    a.put("native", "simple_1", 0, {"text": "from a"})
    assert b.get("native", "simple_1") is None
    assert Cache(tmp_path, base + " + RL adapter a").get("native", "simple_1") == {"text": "from a"}  # resumes
    assert Cache(tmp_path, "stand-in").dir.parent.name == "stand-in"  # a short plain name is its own folder
    assert Cache(tmp_path, "a b").dir.parent != Cache(tmp_path, "a_b").dir.parent


def test_cache_refuses_a_folder_that_holds_another_models_outputs(tmp_path):
    c = Cache(tmp_path, "m1")
    (c.dir / "settings.json").write_text(json.dumps({"model": "m2"}))
    with pytest.raises(CacheConflict, match="another model"):
        Cache(tmp_path, "m1")
