"""The SFT loss mask is exactly right, labels line up with ids, and a short fine-tune learns."""

import json

import pytest

from toolkit.render import render
from toolkit.sft.finetune import (
    Run,
    VocabHead,
    batch_of,
    data_vocab,
    fine_tune,
    fresh_model,
    loss_on,
    shared_prefix_len,
)
from toolkit.sft.labels import IGNORE_INDEX, MaskError, label
from toolkit.sft.probes import AFTER_CALL, classify, continue_batch, continue_ids, probes
from toolkit.tools import schemas

TEMPLATES = ["qwen3", "qwen2.5"]
TOOLS = schemas(["calculator", "get_weather"])


def _call(name, args, i):
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}


CALC = {"expression": "1+2"}
PARIS = {"city": "Paris", "unit": "celsius"}
# Two user turns; a parallel call; a second call turn; tool results written by hand (the mask ignores content).
MULTI = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "Q1"},
    {"role": "assistant", "content": "", "tool_calls": [_call("calculator", CALC, 1), _call("get_weather", PARIS, 2)]},
    {"role": "tool", "name": "calculator", "content": "R1"},
    {"role": "tool", "name": "get_weather", "content": "R2"},
    {"role": "assistant", "content": "A1"},
    {"role": "user", "content": "Q2"},
    {"role": "assistant", "content": "", "tool_calls": [_call("calculator", CALC, 3)]},
    {"role": "tool", "name": "calculator", "content": "R3"},
    {"role": "assistant", "content": "A2"},
]
CALC_BLOCK = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+2"}}\n</tool_call>'
PARIS_BLOCK = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
HEAD = "<|im_start|>assistant\n"


def _expected_runs(template):
    """The (trained, text) runs written out by hand from the Qwen chat format, after the first (prompt) run."""
    think = "<think>\n\n</think>\n\n" if template == "qwen3" else ""  # Qwen3: last turn after the last query
    return [
        (True, CALC_BLOCK + "\n" + PARIS_BLOCK + "<|im_end|>"),
        (
            False,
            "\n<|im_start|>user\n<tool_response>\nR1\n</tool_response>\n<tool_response>\nR2\n</tool_response>"
            "<|im_end|>\n" + HEAD,
        ),
        (True, "A1<|im_end|>"),
        (False, "\n<|im_start|>user\nQ2<|im_end|>\n" + HEAD),
        (True, CALC_BLOCK + "<|im_end|>"),
        (False, "\n<|im_start|>user\n<tool_response>\nR3\n</tool_response><|im_end|>\n" + HEAD),
        (True, think + "A2<|im_end|>"),
        (False, "\n"),
    ]


@pytest.mark.parametrize("template", TEMPLATES)
def test_multi_turn_parallel_runs_exact(template):
    ex = label(MULTI, TOOLS, template)
    runs = [(r["trained"], r["text"]) for r in ex.runs()]
    first_trained, first = runs[0]
    assert not first_trained
    assert first.startswith("<|im_start|>system\nS") and "# Tools" in first
    assert first.endswith("<|im_start|>user\nQ1<|im_end|>\n" + HEAD)
    assert runs[1:] == _expected_runs(template)
    assert "".join(t for _, t in runs) == ex.rendering.text  # runs tile the text: nothing lost or doubled


def _trained_by_segments(rendering):
    """Independent expectation from the renderer's own segments: tokens the model writes are the assistant
    text, think and tool_call segments, plus the <|im_end|> that closes such a turn."""
    out = []
    for t in rendering.tokens:
        if t.segment in ("assistant", "think", "tool_call"):
            out.append(True)
        elif t.text == "<|im_end|>":
            prev = rendering.tokens[t.index - 1].segment
            out.append(prev in ("assistant", "think", "tool_call"))
        else:
            out.append(False)
    return out


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("which", ["multi", "parallel", "chain", "multi_turn"])
def test_mask_equals_rendered_segments_token_for_token(template, which):
    if which == "multi":
        messages, tools = MULTI, TOOLS
    else:
        import random

        from toolkit.trajectories import make

        t = make(which, random.Random(3))
        messages, tools = t.messages, t.tools
    ex = label(messages, tools, template)
    r = render(messages, tools, template, add_generation_prompt=False)
    assert ex.ids == r.ids
    assert len(ex.labels) == len(ex.ids)
    assert ex.trained == _trained_by_segments(r)
    masked_segments = {t.segment for t, keep in zip(r.tokens, ex.trained) if not keep}
    assert {"system", "tools", "user", "tool_response"} & masked_segments
    for t, lab in zip(r.tokens, ex.labels):
        if t.segment in ("system", "tools", "user", "tool_response"):
            assert lab == IGNORE_INDEX, (t.index, t.text, t.segment)
        assert lab in (IGNORE_INDEX, t.id)
    # every character of every system/tools/user/tool_response span is covered by masked tokens only
    covered = [None] * len(r.text)
    for t, keep in zip(r.tokens, ex.trained):
        for c in range(t.start, t.end):
            covered[c] = keep if covered[c] is None else (covered[c] or keep)
    for a, b, seg in r.spans:
        if seg in ("system", "tools", "user", "tool_response"):
            assert covered[a:b] == [False] * (b - a), (seg, r.text[a:b])
        if seg in ("assistant", "think", "tool_call"):
            assert covered[a:b] == [True] * (b - a), (seg, r.text[a:b])


@pytest.mark.parametrize("template", TEMPLATES)
def test_no_tool_sample(template):
    msgs = [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi there."}]
    ex = label(msgs, TOOLS, template)
    trained = "".join(t.text for t, k in zip(ex.rendering.tokens, ex.trained) if k)
    think = "<think>\n\n</think>\n\n" if template == "qwen3" else ""
    assert trained == think + "Hi there.<|im_end|>"
    assert len(ex.labels) == len(ex.ids)
    assert ex.counts().get("tool_call", {}).get("trained", 0) == 0


def test_errors_are_structured():
    with pytest.raises(MaskError) as e:
        label([{"role": "user", "content": "hi"}], None, "qwen3")
    assert e.value.reason == "nothing-to-train"
    # A template that writes the message count into the system turn rewrites earlier text every turn.
    from toolkit.tokenizer import qwen_tokenizer

    tok = qwen_tokenizer(
        "qwen3",
        template="{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
        "{{ messages | length }}",
    )
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    with pytest.raises(MaskError) as e:
        label(msgs, None, "native", tokenizer=tok)
    assert e.value.reason == "prefix-unstable"


def test_probes_cut_after_the_call():
    from toolkit.trajectories import dataset

    ds = dataset(12, seed=5)
    exs = [label(t.messages, t.tools, "qwen3") for t in ds]
    ps = probes(exs, [t.kind for t in ds])
    assert len(ps) == sum(t.kind != "no_tool" for t in ds)
    for p in ps:
        assert p.prompt_text.endswith(AFTER_CALL)
        assert p.real_results and all(json.loads(r) for r in p.real_results)
        assert render(ds[0].messages, ds[0].tools).ids[:5] == p.prompt_ids[:5]


def test_classify():
    real = ['{"result": 3}']
    c = classify('<|im_start|>user\n<tool_response>\n{"result": 7}\n</tool_response>', real)
    assert c["tool_response"] and c["user_turn"] and c["invented"] == '{"result": 7}' and not c["matches_real"]
    assert classify('<tool_response>\n{"result": 3}\n</tool_response>', real)["matches_real"]
    c = classify("The answer is 3.<|im_end|>", real)
    assert not c["tool_response"] and not c["user_turn"] and c["invented"] == ""


def _small_set(template="qwen3", n=16, seed=0):
    from toolkit.trajectories import dataset

    return [label(t.messages, t.tools, template) for t in dataset(n, seed=seed)]


@pytest.mark.parametrize("masked", [True, False])
def test_fine_tune_smoke_loss_decreases(masked):
    import torch

    exs = _small_set()
    run = fine_tune(exs, masked=masked, steps=25, batch_size=4, lr=5e-3, seed=0)
    assert len(run.losses) == 25 and run.target_tokens > 0
    assert sum(run.losses[-3:]) / 3 < 0.7 * sum(run.losses[:3]) / 3
    # rows of the full embedding outside the data vocabulary are untouched by the compact training copy
    from toolkit.models import stand_in

    start = stand_in("qwen3", seed=0).get_input_embeddings().weight
    now = run.model.get_input_embeddings().weight
    outside = torch.ones(start.shape[0], dtype=torch.bool)
    outside[run.vocab] = False
    assert torch.equal(start[outside], now[outside])
    assert not torch.equal(start[run.vocab], now[run.vocab])
    # masked training sees only the model's own tokens as targets
    per_example = sum(sum(e.trained) for e in exs) if masked else sum(len(e.ids) - 1 for e in exs)
    assert run.target_tokens == pytest.approx(per_example / len(exs) * 25 * 4, rel=0.35)


def test_fine_tune_is_seeded():
    exs = _small_set(n=8)
    a = fine_tune(exs, masked=True, steps=3, batch_size=4, seed=1)
    b = fine_tune(exs, masked=True, steps=3, batch_size=4, seed=1)
    assert a.losses == b.losses


def test_mask_view_is_a_thin_view_over_plain_data():
    import re

    from toolkit.widgets.mask import MaskData, MaskView, mask_html

    ex = label(MULTI, TOOLS, "qwen3")
    data = MaskData.from_labelled(ex, "multi")
    assert len(data.rows) == len(ex.ids)
    s = data.summary()
    assert s["trained"] == sum(ex.trained) and s["masked"] == len(ex.ids) - sum(ex.trained)
    assert s["segments"]["tool_response"]["trained"] == 0 and s["segments"]["tool_call"]["masked"] == 0
    page = mask_html(data)
    assert page.count('data-trained="1"') == s["trained"] and page.count('data-trained="0"') == s["masked"]
    first_call = next(t for t, k in zip(ex.rendering.tokens, ex.trained) if k and t.text == "<tool_call>")
    tip = re.search(rf'data-index="{first_call.index}" data-trained="1" title="([^"]*)"', page).group(1)
    assert f"id={first_call.id}" in tip and "segment=tool_call" in tip

    view = MaskView({"multi": ex, "no tool": label(MULTI[:2] + [{"role": "assistant", "content": "ok"}], TOOLS)})
    assert view.data.masked and view.data.summary()["trained"] == s["trained"]
    view.mode.value = "without mask"
    assert not view.data.masked and view.data.summary()["masked"] == 0
    view.picker.value = "no tool"
    assert view.data.title == "no tool" and 'data-trained="0"' not in view.html.value


def test_the_mask_view_lays_an_rl_advantage_over_the_trained_tokens_only():
    from toolkit.widgets.mask import MaskData, mask_html

    ex = label(MULTI, TOOLS, "qwen3")
    up, down = (mask_html(MaskData.from_labelled(ex, "x", advantage=a)) for a in (1.5, -1.5))
    n = sum(ex.trained)
    assert up.count("advantage=+1.500") == n and down.count("advantage=-1.500") == n
    green, red = "background:#4ca264", "background:#d7413e"  # |a| = 1.5 of 2: three quarters pale to deep
    assert up.count(green) == n and down.count(red) == n and red not in up
    assert "every trained token carries the advantage +1.500" in up


def test_shared_prefix_gives_the_same_loss_and_gradients():
    import torch

    exs = _small_set(n=6)
    model = fresh_model("qwen3", 0, None)
    head = VocabHead(model, data_vocab(exs))
    params = head.body_parameters() + [head.weight]
    batch = batch_of(exs, range(6), False, 151643)
    assert shared_prefix_len(batch[0], batch[2]) > 300  # system prompt + tool definitions
    got = {}
    for share in (False, True):
        for p in params:
            p.grad = None
        loss, n = loss_on(head, *batch, share_prefix=share)
        loss.backward()
        got[share] = (loss.item(), n, [p.grad.clone() for p in params])
    assert got[True][1] == got[False][1]
    assert got[True][0] == pytest.approx(got[False][0], rel=1e-5)
    for a, b in zip(got[True][2], got[False][2]):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6 * float(b.abs().max()))


def test_batched_continuation_equals_one_by_one():
    from toolkit.models import stand_in

    exs = _small_set(n=6)
    run = Run(True, stand_in("qwen3", seed=3), data_vocab(exs), [], 0.0, 0, 0, {"template": "qwen3"})
    prompts = [p.prompt_ids for p in probes(exs)][:3]
    assert len({len(p) for p in prompts}) > 1  # different lengths: left padding is exercised
    batched = continue_batch(run, prompts, max_new_tokens=6)
    assert batched == [continue_ids(run, p, max_new_tokens=6) for p in prompts]
    assert all(set(c) <= set(run.vocab) for c in batched)


def test_full_vocabulary_option_runs():
    from toolkit.qwen import VOCAB_WIDTH

    exs = _small_set(n=2)
    run = fine_tune(exs, masked=True, steps=2, batch_size=1, vocab="full")
    assert len(run.vocab) == VOCAB_WIDTH and run.settings["vocab"] == VOCAB_WIDTH
    assert all(loss == loss for loss in run.losses)  # finite, not NaN
    out = continue_ids(run, probes(exs)[0].prompt_ids, max_new_tokens=3)
    assert len(out) == 3 and all(0 <= i < VOCAB_WIDTH for i in out)
