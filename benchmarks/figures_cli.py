"""How long ``python -m toolkit figures`` takes as is, with a CPU burner on every core, and beside another Chromium
(the browser test's situation, where an earlier version sat at 0 % CPU in image export until killed at 900 s) —
side by side in one run. Each condition writes into its own temporary folder; the 1-minute load is printed
before and after, because on a shared machine a time is only as good as the load beside it.

Saves ``benchmarks/results/figures_cli.json`` (date, machine, commit via ``toolkit.paths.provenance``). No timed
asserts.

    python benchmarks/figures_cli.py [--only idle,burn,beside] [--timeout 300]
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402
from toolkit.paths import provenance, script_module  # noqa: E402

CONDITIONS = ("idle", "burn", "beside")


def _test_module(name: str):
    """A module of tests/ by its file (the tests are not a package; the kit itself is installed)."""
    return script_module(ROOT / "tests" / f"{name}.py")


_browser = _test_module("test_browser")
CHROMIUM, CHROMIUM_ARGS, burn_cpu = _browser.CHROMIUM, _browser.CHROMIUM_ARGS, _browser.burn_cpu


def run_cli(timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="figures-bench-") as out:
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "toolkit", "figures", "--out", out, "--timeout", str(timeout)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout + 300,
        )
        secs = time.perf_counter() - t0
        data = sorted(f.name for f in Path(out).iterdir() if f.suffix in (".json", ".csv", ".md", ".tex"))
    line = (p.stdout.strip() or p.stderr.strip()).splitlines()[-1:] or [""]
    return dict(rc=p.returncode, seconds=round(secs, 1), data_files=len(data), last_line=line[0])


def beside_chromium():
    """A headless Chromium on a DevTools port with a default-style profile, as a browser test leaves running."""
    profile = tempfile.mkdtemp(prefix="other-chromium-")
    return subprocess.Popen(
        [CHROMIUM, "--headless", *CHROMIUM_ARGS, f"--user-data-dir={profile}", "--remote-debugging-port=0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main(argv=None) -> int:
    ap = cliargs.Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", type=cliargs.one_of(CONDITIONS, "condition"), default=list(CONDITIONS))
    ap.add_argument("--timeout", type=cliargs.number(lo=1), default=300)
    a = ap.parse_args(argv)
    rows = {}
    for cond in a.only:
        load0 = os.getloadavg()[0]
        if cond == "burn":
            with burn_cpu(os.cpu_count() or 2, seconds=1200):
                r = run_cli(a.timeout)
        elif cond == "beside":
            other = beside_chromium()
            try:
                time.sleep(3)
                r = run_cli(a.timeout)
            finally:
                other.kill()
                other.wait(timeout=10)
        else:
            r = run_cli(a.timeout)
        rows[cond] = dict(r, load_before=round(load0, 2), load_after=round(os.getloadavg()[0], 2))
    print(f"{'condition':<10} {'rc':>3} {'seconds':>8} {'data files':>10} {'load before/after':>18}  last line")
    for k, r in rows.items():
        print(
            f"{k:<10} {r['rc']:>3} {r['seconds']:>8.1f} {r['data_files']:>10} "
            f"{r['load_before']:>8.2f} /{r['load_after']:>6.2f}  {r['last_line'][:90]}"
        )
    out = ROOT / "benchmarks" / "results" / "figures_cli.json"
    meta = dict(date=time.strftime("%Y-%m-%d %H:%M"), machine=platform.node(), cpus=os.cpu_count(), **provenance(ROOT))
    out.write_text(json.dumps(dict(meta, rows=rows), indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
