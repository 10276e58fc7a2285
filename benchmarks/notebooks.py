"""Wall time and peak memory of every notebook, run top to bottom in a fresh kernel, printed as one table.

Two model settings side by side (``--mode both``, the default):
- machine: what this machine has (the real offline model after `make real-model`, else the stand-in);
- binder: Binder's defaults, the random-weight stand-in (on Binder, binder/start sets HF_HUB_OFFLINE=1 and no
  real model is installed, so ``load("auto")`` falls back to it; here the test's MODES pin it).
Targets (issue 7): each notebook ≤ 3 min and ≤ 2 GB peak RSS (kernel plus its children), all ≤ 10 min.

Execution reuses ``tests/test_notebooks.py::execute_notebook`` and its ``MODES`` (nbclient, two threads, per-cell
timeout, HF_HUB_OFFLINE=1), so the benchmark measures exactly what the notebook test runs. The 1-minute load
average is printed before and after each run: on a shared machine the times are only as good as the load beside
them.

Leaves out: browser rendering time (tests/test_browser.py) and GPU runs.

    python benchmarks/notebooks.py [--mode both|machine|binder] [--only 01,04]
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402


def parser():
    """The command line, built before the imports below (notebook runner (nbformat, jsonschema: ~1-7 s)): a usage error skips them."""
    ap = cliargs.Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["both", "machine", "binder"], default="both")
    numbers = sorted({p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")})
    ap.add_argument(
        "--only", type=cliargs.one_of(numbers, "notebook number"), default=None, help="comma list, e.g. 01,04"
    )
    return ap


if __name__ == "__main__":
    parser().parse_args()  # exits 2 on a bad value, before the imports below


from toolkit.paths import script_module  # noqa: E402


def _test_module(name: str):
    """A module of tests/ by its file (the tests are not a package; the kit itself is installed)."""
    return script_module(ROOT / "tests" / f"{name}.py")


_nb = _test_module("test_notebooks")
MODES, NOTEBOOKS, execute_notebook = _nb.MODES, _nb.NOTEBOOKS, _nb.execute_notebook

EACH_S, ALL_S, EACH_MB = 180, 600, 2048


def model_line(nb) -> str:
    """Which model the notebook says it ran: every ``Loaded.description`` names it (stand-in or real weights)."""
    text = "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    found = [
        label for label, mark in (("stand-in", "RANDOM-WEIGHT STAND-IN"), ("real", "real weights")) if mark in text
    ]
    return "+".join(found) or "none"


def run(path: Path, mode: str) -> dict:
    load0 = os.getloadavg()[0]
    try:
        nb, seconds, peak = execute_notebook(path, env=MODES[mode])
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        status = f"error: {errors[0]['ename']}" if errors else "ok"
        model = model_line(nb)
    except Exception as e:  # a failing cell raises in nbclient; the table still gets a row
        seconds, peak, status, model = float("nan"), 0, f"FAILED: {type(e).__name__}", "-"
    mb = math.ceil(peak / 2**20)  # rounded up, so a peak a little over 2 GB never prints as 2048
    return dict(seconds=seconds, mb=mb, status=status, model=model, load=(load0, os.getloadavg()[0]))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    wanted = [p for p in NOTEBOOKS if not args.only or p.name[:2] in args.only]
    modes = ["machine", "binder"] if args.mode == "both" else [args.mode]
    print(
        f"{len(wanted)} notebooks, {os.cpu_count()} CPUs, targets: ≤ {EACH_S} s and ≤ {EACH_MB} MB each, "
        f"≤ {ALL_S} s all",
        flush=True,
    )
    results = {m: {} for m in modes}
    for mode in modes:
        for path in wanted:
            r = results[mode][path.name] = run(path, mode)
            print(
                f"  [{mode}] {path.name}: {r['seconds']:.0f} s, {r['mb']:.0f} MB, {r['model']}, {r['status']}, "
                f"load {r['load'][0]:.1f}→{r['load'][1]:.1f}",
                flush=True,
            )

    head = f"{'notebook':<32}" + "".join(
        f" | {m + ' s':>10} {'MB':>6} {'model':>8} {'load':>9} {'ok?':>4}" for m in modes
    )
    print("\n" + head + "\n" + "-" * len(head))
    for path in wanted:
        row = f"{path.name:<32}"
        for m in modes:
            r = results[m][path.name]
            ok = r["status"] == "ok" and r["seconds"] <= EACH_S and r["mb"] <= EACH_MB
            row += (
                f" | {r['seconds']:>10.0f} {r['mb']:>6.0f} {r['model']:>8} "
                f"{r['load'][0]:>4.1f}→{r['load'][1]:<4.1f} {'yes' if ok else 'NO':>4}"
            )
        print(row)
    for m in modes:
        total = sum(r["seconds"] for r in results[m].values())
        over = [
            f"{n} ({r['status']}, {r['seconds']:.0f} s, {r['mb']:.0f} MB)"
            for n, r in results[m].items()
            if not (r["status"] == "ok" and r["seconds"] <= EACH_S and r["mb"] <= EACH_MB)
        ]
        print(
            f"{m}: all notebooks {total:.0f} s ({'within' if total <= ALL_S else 'OVER'} {ALL_S} s); "
            f"outside targets: {', '.join(over) or 'none'}"
        )
    if "machine" in modes:
        print(
            "(the 2 GB budget is Binder's, where the stand-in runs; with the real model, about 1.3 GB of bf16 weights, "
            "machine-mode peaks are for information)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
