"""How long a usage error takes: each ``python -m toolkit`` command given a bad value, timed from spawn to exit,
and a few ``benchmarks/*.py`` scripts given one, beside the bare interpreter start and ``import toolkit``, which bound
it from below.

    python benchmarks/cli_errors.py [--repeats 3]

Prints one table and saves ``benchmarks/results/cli_errors.json`` with date, machine, load and commit. No asserts:
``tests/test_cliargs.py`` checks the behaviour (exit 2, one line, no model load); this reports the time.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOOLKIT_BACKEND": ""}
CASES = [
    ("interpreter start (floor)", [sys.executable, "-c", "pass"]),
    ("import toolkit (floor)", [sys.executable, "-c", "import toolkit"]),
    ("loop --max-new-tokens -1", [sys.executable, "-m", "toolkit", "loop", "hi", "--max-new-tokens", "-1"]),
    ("loop --model /nonexistent", [sys.executable, "-m", "toolkit", "loop", "hi", "--model", "/nonexistent/model"]),
    ("constrain --samples -3", [sys.executable, "-m", "toolkit", "constrain", "--schema", "x.json", "--samples", "-3"]),
    ("constrain --temperature nan", [sys.executable, "-m", "toolkit", "constrain", "--schema", "x", "--temperature", "nan"]),
    ("render --limit -5", [sys.executable, "-m", "toolkit", "render", "--limit", "-5"]),
    ("mcp serve --http --port 70000", [sys.executable, "-m", "toolkit", "mcp", "serve", "--http", "--port", "70000"]),
    ("lint-tools --mcp notaurl", [sys.executable, "-m", "toolkit", "lint-tools", "--mcp", "notaurl"]),
    ("train --lr nan", [sys.executable, "-m", "toolkit", "train", "--lr", "nan"]),
    ("figures --out /etc/passwd", [sys.executable, "-m", "toolkit", "figures", "--out", "/etc/passwd"]),
    ("bfcl.py accuracy --limit -5", [sys.executable, "benchmarks/bfcl.py", "accuracy", "--limit", "-5"]),
    ("bfcl.py chains --pair-ks 3", [sys.executable, "benchmarks/bfcl.py", "chains", "--pair-ks", "3"]),
    ("engine_probe.py --bogus", [sys.executable, "benchmarks/engine_probe.py", "--bogus"]),
    ("patterns.py --n 0", [sys.executable, "benchmarks/patterns.py", "--n", "0"]),
]  # fmt: skip
ENV["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout's kit


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=cliargs.count(1, 50), default=3)
    p.add_argument("--out", type=cliargs.out_file, default=ROOT / "benchmarks" / "results" / "cli_errors.json")
    a = p.parse_args(argv)
    rows = []
    for label, cmd in CASES:
        times, rc = [], None
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300, check=False)
            times.append(time.perf_counter() - t0)
            rc = r.returncode
        rows.append({"case": label, "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                     "exit": rc, "stderr_lines": len(r.stderr.strip().splitlines())})  # fmt: skip
    floor = rows[0]["median_s"]
    print(f"{'case':<32} {'median s':>9} {'max s':>7} {'x start':>8} {'exit':>5} {'lines':>6}")
    for row in rows:
        print(
            f"{row['case']:<32} {row['median_s']:>9.3f} {row['max_s']:>7.3f} {row['median_s'] / floor:>8.1f} "
            f"{row['exit']:>5} {row['stderr_lines']:>6}"
        )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    meta = dict(date=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine=platform.node(),
                cpus=os.cpu_count(), load=os.getloadavg(), commit=commit.strip(), model="none (no model loads)")  # fmt: skip
    print(f"(load {meta['load'][0]:.2f} on {meta['cpus']} CPUs, commit {meta['commit']})")
    a.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
