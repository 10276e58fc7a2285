"""Re-tokenization drift on real trajectories, and the fix (keep the generated ids, send ids), before and after.

For each worked example and both kit templates (qwen2.5, qwen3) the host loop runs in-process on the model
(HFBackend, greedy, a prefix cache kept across turns). Per turn it prints where the model's own ids (what the
cache holds) and the ids of the re-rendered conversation (what the host sends next) stop matching, the pieces on
both sides, whether the text differs or only its tokenization, and the tokens prefilled again:
- before: the loop as it is (re-rendered text): ``reused`` as HFBackend measured it during the run;
- after: the spliced prompt (``toolkit.backends.drift.splice``): the shared prefix by the same rule HFBackend uses.
With ``--server`` it starts a local ``transformers serve`` (127.0.0.1, stopped by PID) and sends both prompts of
every turn (one new token each): the server refuses ids, so they travel as text and the server tokenizes them
again — its ``prompt_tokens`` against the kit's count shows what a text transport does to the fix.

Run:  python benchmarks/retokenization.py [--server] [--examples calculator,weather] [--json]
Saves benchmarks/results/retokenization-<date>.json (date, machine, model, commit). No timed asserts.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402
from toolkit.conversations import LOOP_EXAMPLES  # noqa: E402  (light: data only)
from toolkit.tokenizer import TEMPLATES  # noqa: E402  (light: torch loads inside tokenizer_for)


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=cliargs.model, default="qwen2.5-coder-0.5b")
    p.add_argument(
        "--examples", type=cliargs.one_of(sorted(LOOP_EXAMPLES), "example"), default=["calculator", "weather"]
    )
    p.add_argument("--templates", type=cliargs.one_of(TEMPLATES, "template"), default=["qwen2.5", "qwen3"])
    p.add_argument("--max-new-tokens", type=cliargs.count(1, 4096), default=40)
    p.add_argument("--server", action="store_true", help="also send before/after prompts to a local transformers serve")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    import torch

    from toolkit.backends.drift import splice, turn_drift
    from toolkit.backends.hf import HFBackend
    from toolkit.loop.examples import example
    from toolkit.loop.loop import run
    from toolkit.loop.steps import Generated, Rendered
    from toolkit.models import load
    from toolkit.prefix import shared_prefix
    from toolkit.qwen import IM_END_ID

    torch.manual_seed(0)
    loaded = load(a.model, quiet=True)
    tok = loaded.tokenizer
    rows = []
    for name in a.examples:
        for template in a.templates:
            ex = example(name)
            backend = HFBackend.from_loaded(loaded)
            trace = run(backend, tok, ex["messages"], ex["tools"], template=template, tool_choice="required",
                        max_turns=2, max_new_tokens=a.max_new_tokens)  # fmt: skip
            prompts = [s.prompt_ids for s in trace.of(Rendered)]
            gens = trace.of(Generated)
            for t in range(len(prompts) - 1):
                d = turn_drift(prompts[t], gens[t].ids, prompts[t + 1], tok)
                fixed = splice(prompts[t], gens[t].ids, prompts[t + 1])
                cached = list(prompts[t]) + list(gens[t].ids)
                d.update(
                    example=name,
                    template=template,
                    turn=t + 1,
                    text=gens[t].text,
                    reused_before=gens[t + 1].generation.reused,
                    prefilled_before=gens[t + 1].generation.prefilled,
                    reused_after=min(shared_prefix(cached, fixed), len(fixed) - 1),
                    prefilled_after=len(fixed) - min(shared_prefix(cached, fixed), len(fixed) - 1),
                    fixed_prompt=len(fixed),
                    _before=list(prompts[t + 1]),
                    _after=fixed,
                )
                rows.append(d)
    server = None
    if a.server:
        from toolkit.backends.http import probe
        from toolkit.backends.http_tokens import TokensBackend
        from toolkit.backends.serve import LocalServer

        with LocalServer(threads=2) as srv:
            server = probe(srv.url).description
            b = TokensBackend(srv.url, tok, stream=False)
            for d in rows:
                for side in ("before", "after"):
                    r = b.complete(d[f"_{side}"], max_new_tokens=1, stop_ids={IM_END_ID})
                    d[f"server_prompt_tokens_{side}"] = r["usage"].get("prompt_tokens")
    for d in rows:
        d.pop("_before"), d.pop("_after")
    from toolkit.eval.report import meta  # date, machine, model and commit, as every saved benchmark result

    res = meta(loaded.description, ROOT, server=server, rows=rows)
    if a.json:
        print(json.dumps(res, ensure_ascii=False, indent=1))
    else:
        print(f"model: {loaded.description}" + (f" | server: {server}" if server else ""))
        hdr = f"{'example':<11}{'tmpl':<8}{'turn':>4}{'gen':>5}{'at':>5} {'same text':<9}{'reused b/a':>12}{'prefill b/a':>13}"
        hdr += f"{'server vs kit (before | after)':>34}" if server else ""
        print(hdr)
        for d in rows:
            line = (f"{d['example']:<11}{d['template']:<8}{d['turn']:>4}{d['generated']:>5}{str(d['at']):>5} "
                    f"{str(d['same_text']):<9}{d['reused_before']:>6}/{d['reused_after']:<5}"
                    f"{d['prefilled_before']:>7}/{d['prefilled_after']:<5}")  # fmt: skip
            if server:
                line += (f"   {d['server_prompt_tokens_before']} vs {d['next_prompt']} | "
                         f"{d['server_prompt_tokens_after']} vs {d['fixed_prompt']}")  # fmt: skip
            print(line)
            if d.get("generated_ids"):
                print(f"{'':>15}generated {d['generated_pieces']} {d['generated_ids']}")
                print(f"{'':>15}re-encoded {d['reencoded_pieces']} {d['reencoded_ids']}")
    out = ROOT / "benchmarks" / "results" / f"retokenization-{res['date'][:10]}.json"
    out.write_text(json.dumps(res, ensure_ascii=False, indent=1) + "\n")
    print(f"saved {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
