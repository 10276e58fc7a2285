"""§14.5.7's prediction measured and saved: fine-tuned without the tool-result mask, a model learns to write tool
results itself; with the mask it does not.

Runs ``toolkit.sft.experiment.experiment()`` (the notebook 06 settings: the random-weight stand-in, the same seeded
data, start and vocabulary, masked vs unmasked) and saves the side-by-side table and the counts the claims ledger
reads (``toolkit/book/claims_learned.py``) to benchmarks/results/sft_mask.json (date, machine, model, commit). The
stand-in learns the format, never meaning: that is the point measured. Never asserts a time.

Run:  python benchmarks/sft_mask.py [--out FILE]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from toolkit import cliargs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=cliargs.out_file, default=ROOT / "benchmarks" / "results" / "sft_mask.json")
    a = p.parse_args(argv)
    from toolkit.eval.report import commit, meta

    at = commit(ROOT)  # the code that runs, read before the run
    from toolkit.sft.experiment import experiment

    res = experiment()
    counts = {
        name: {
            mode: {
                key: list(res.measurements[name].count(mode, key))
                for key in ("tool_response", "user_turn", "matches_real")
            }
            for mode in ("greedy", "sampled")
        }
        for name in res.runs
    }
    doc = meta("stand-in (random weights, qwen3 shape)", ROOT, **{"commit": at}, settings=res.settings,
               table=res.table(), counts=counts, nll=res.nll)  # fmt: skip
    Path(a.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str) + "\n")
    for row in res.table():
        print(" | ".join(str(v) for v in row.values()))
    print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
