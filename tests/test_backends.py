"""One sampler, one decode loop: the same seed, temperature, top-p and grammar give the same tokens on every backend
(the transformers backend and the kit's engine, on the CPU), and the sampler draws exactly as torch.multinomial."""

import pytest
import torch

from toolkit.backends.engine import Engine
from toolkit.backends.hf import HFBackend
from toolkit.backends.sampling import choose, draw_noise, generator, nucleus
from toolkit.grammar.compile import bounded, compile_tools
from toolkit.grammar.mask import GrammarMask
from toolkit.models import stand_in
from toolkit.schema import openai_schema
from toolkit.tokenizer import qwen_tokenizer
from toolkit.tools import TOOLS

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def lm():
    return stand_in("qwen3", seed=3)


@pytest.fixture(scope="module")
def tag_grammar():
    tok = qwen_tokenizer("qwen3")
    schemas = [bounded(openai_schema(TOOLS[n]), max_length=6) for n in ("get_weather", "calculator")]
    return compile_tools(schemas, tok, mode="tag")


def _prompt(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 151_643, (n,), generator=g).tolist()


@pytest.mark.parametrize("temperature,top_p", [(0.0, 1.0), (0.8, 1.0), (1.3, 0.9), (0.7, 0.5)])
@pytest.mark.parametrize("constrained", [False, True])
def test_hf_backend_and_engine_give_the_same_tokens(lm, tag_grammar, temperature, top_p, constrained):
    engine = Engine(lm, graphs=False)
    for seed in range(3):
        prompt = _prompt(40, seed=seed)
        out = []
        for backend in (HFBackend(lm), engine):
            backend.reset()
            mask = GrammarMask(tag_grammar) if constrained else None
            g = backend.generate(
                prompt, max_new_tokens=24, stop_ids={151645}, mask=mask, temperature=temperature, top_p=top_p, seed=seed
            )
            out.append((g.new_ids, g.stopped_by))
        assert out[0] == out[1], (seed, out)
        assert len(out[0][0]) > 1


def test_sampler_draws_as_multinomial():
    logits = torch.randn(151_936) * 3
    for seed in range(50):
        p = torch.softmax(logits / 0.7, -1)
        want = int(torch.multinomial(p, 1, generator=generator(seed)))
        assert int(choose(logits, 0.7, gen=generator(seed))) == want
    batch = torch.randn(4, 1000)
    want = torch.multinomial(torch.softmax(batch, -1), 1, generator=generator(5))[:, 0]
    assert torch.equal(choose(batch, 1.0, gen=generator(5)), want)


def test_nucleus_keeps_the_smallest_set_reaching_top_p():
    p = torch.tensor([0.05, 0.5, 0.3, 0.15])
    assert torch.equal(nucleus(p, 0.7) > 0, torch.tensor([False, True, True, False]))
    assert torch.equal(nucleus(p, 0.8) > 0, torch.tensor([False, True, True, False]))
    assert torch.equal(nucleus(p, 0.81) > 0, torch.tensor([False, True, True, True]))
    noise = draw_noise(p, generator(0))
    for _ in range(20):  # a token outside the nucleus is never drawn
        assert int(choose(torch.log(p), 1.0, 0.7, gen=generator(_))) in (1, 2)
    assert noise.shape == p.shape


def test_greedy_ignores_the_seed_and_respects_the_mask(lm):
    logits = torch.tensor([1.0, 3.0, 3.0, 2.0])
    assert int(choose(logits)) == 1  # first index on ties
    allowed = torch.tensor([True, False, False, True])
    assert int(choose(logits, allowed=allowed)) == 3
    assert int(choose(logits, 5.0, allowed=allowed, gen=generator(1))) in (0, 3)


@pytest.mark.parametrize("temperature", [0.0, 0.9])
@pytest.mark.parametrize("constrained", [False, True])
def test_grammar_trace_draws_what_the_backend_draws(lm, tag_grammar, temperature, constrained):
    """``toolkit.grammar.inspect.trace`` (the notebooks' step-by-step view) decodes through the same loop and
    sampler: for the same seed, temperature and grammar it picks the tokens ``HFBackend.generate`` picks."""
    from toolkit.grammar.compile import stop_ids_of
    from toolkit.grammar.inspect import trace

    tok = qwen_tokenizer("qwen3")
    grammar = tag_grammar if constrained else None
    stops = set(grammar.stop_token_ids if grammar else stop_ids_of(tok))
    for seed in range(2):
        prompt = _prompt(30, seed=seed + 10)
        g = HFBackend(lm).generate(
            prompt,
            max_new_tokens=16,
            stop_ids=stops,
            mask=GrammarMask(grammar) if grammar else None,
            temperature=temperature,
            seed=seed,
        )
        t = trace(lm, tok, prompt, grammar, max_new_tokens=16, temperature=temperature, seed=seed)
        assert t.ids == g.new_ids and len(t.ids) > 1, (seed, t.ids, g.new_ids)


@pytest.mark.parametrize("constrained", [False, True])
def test_batched_decode_gives_the_tokens_of_the_single_path(lm, tag_grammar, constrained):
    """``HFBackend.generate_batch`` (padded rows, shared prefix prefilled once) runs the one decode loop and sampler:
    greedy, every row gets the tokens ``generate`` gives that prompt alone; one row sampled, the same draw."""
    backend = HFBackend(lm)
    shared = _prompt(24, seed=9)  # a common leading part (prefilled once) and rows of different lengths
    prompts = [shared + _prompt(n, seed=n) for n in (5, 12, 8)]

    def masks():
        return [GrammarMask(tag_grammar) for _ in prompts] if constrained else None

    seen = []  # each step's [rows, V] logits, as a logits processor sees them
    record = lambda ids, scores: seen.append(scores.clone()) or scores
    rows = backend.generate_batch(prompts, max_new_tokens=12, stop_ids={151645}, masks=masks(), processors=[record])
    assert rows[0].reused == 24 and rows[1].prefilled == 12
    for i, p in enumerate(prompts):  # padding and positions: each row's logits are those of the prompt alone
        alone = []
        keep = lambda ids, scores: alone.append(scores.clone()) or scores
        one_mask = masks() and masks()[:1]
        backend.generate_batch(
            [p], max_new_tokens=3, stop_ids=set(), masks=one_mask, share_prefix=False, processors=[keep]
        )
        for step in range(3):
            assert torch.allclose(seen[step][i], alone[step][0], atol=1e-4), (i, step)
    for i, p in enumerate(prompts):
        backend.reset()
        one = backend.generate(
            p, max_new_tokens=12, stop_ids={151645}, mask=GrammarMask(tag_grammar) if constrained else None
        )
        assert (rows[i].new_ids, rows[i].stopped_by) == (one.new_ids, one.stopped_by), i
        assert len(one.new_ids) > 1
    for seed in range(2):
        (row,) = backend.generate_batch(
            prompts[:1], max_new_tokens=12, stop_ids={151645}, masks=masks() and masks()[:1], temperature=0.9, seed=seed
        )
        backend.reset()
        one = backend.generate(
            prompts[0],
            max_new_tokens=12,
            stop_ids={151645},
            mask=GrammarMask(tag_grammar) if constrained else None,
            temperature=0.9,
            seed=seed,
        )
        assert row.new_ids == one.new_ids, seed


def test_decode_rows_stops_each_row_on_its_own():
    """A row that stops keeps its tokens while the others go on; stop ids and the grammar's end per row."""
    from toolkit.backends.decode import decode_rows

    class Rows:
        depth = 1
        script = [[5, 7, 9, 9], [5, 1, 2, 3], [4, 4, 4, 4]]

        def launch(self, i, bitmasks):
            assert bitmasks is None

        def token(self, i):
            return [r[i] for r in self.script]

    out = decode_rows(Rows(), rows=3, max_new_tokens=4, stop_ids={7, 2})
    assert out == [([5, 7], "stop"), ([5, 1, 2], "stop"), ([4, 4, 4, 4], "length")]


def test_decode_runs_ahead_by_depth_and_stops_in_order():
    """The engine's CUDA path keeps ``depth`` launches in flight (no grammar): launches run ahead of the tokens read,
    never more than ``depth``, and a stop id ends the turn at once (later launches' tokens are dropped)."""
    from toolkit.backends.decode import decode

    class Ahead:
        depth = 3

        def __init__(self):
            self.events = []

        def launch(self, i, bitmask):
            assert bitmask is None
            self.events.append(("launch", i))

        def token(self, i):
            self.events.append(("token", i))
            return 7 if i == 4 else 100 + i

    s = Ahead()
    assert decode(s, max_new_tokens=10, stop_ids={7}) == ([100, 101, 102, 103, 7], "stop")
    launched = [i for kind, i in s.events if kind == "launch"]
    assert launched == list(range(7))  # tokens 0..4 read, 3 launches ahead of each read
    for n, (kind, i) in enumerate(s.events):
        if kind == "token":
            ahead = sum(k == "launch" for k, _ in s.events[:n]) - i
            assert 1 <= ahead <= 3
