"""How long a refusal takes: each ``python -m toolkit`` command given a bad value, timed from spawn to exit, a few
``benchmarks/*.py`` scripts given one, and issue 40's hostile inputs (a 5,000-digit integer, 450-deep nesting, NaN
and Infinity in a schema or tools file, a FIFO, a non-UTF-8 question, an option that does not apply, a broken
adapter, a damaged converted model folder), beside the bare interpreter start and ``import toolkit``, which bound
it from below. Issue 40's target: each refusal in at most ``TARGET_S`` (0.5 s).

    python benchmarks/cli_errors.py [--repeats 3]

Prints one table and the slowest refusal against the target, and saves ``benchmarks/results/cli_errors.json`` with
date, machine, load and commit. Bounded: the hostile files are made in a temporary folder (the adapter a truncated
copy of the shipped one, the model folder a few bytes under ``TOOLKIT_CACHE``), ``TOOLKIT_MODEL`` is the stand-in
and each run has a 60 s timeout, so a refusal that fails to happen cannot load the real model. No asserts:
``tests/test_cliargs.py`` and ``tests/test_commands_hostile.py`` check the behaviour (one line, no model load);
this reports the time.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
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
ENV["TOOLKIT_MODEL"] = "stand-in"  # were a refusal to fail, "auto" would load the stand-in, never the real model
TARGET_S = 0.5
HUGE = "9" * 5000


def hostile_cases(tmp: Path) -> list[tuple[str, list[str], dict]]:
    """Issue 40's inputs, as (label, command, extra environment), their files made under ``tmp``."""
    files = {
        "huge_int.json": '{"type": "object", "properties": {"a": {"type": "integer", "maximum": ' + HUGE + "}}}",
        "deep.json": '{"type": "array", "items": ' * 450 + "{}" + "}" * 450,
        "nan.json": '{"type": "number", "maximum": NaN}',
        "inf.json": '[{"name": "f", "description": "Fetches x.", "parameters": {"type": "object", '
        '"properties": {"a": {"type": "number", "maximum": Infinity}}}}]',
    }
    for name, text in files.items():
        (tmp / name).write_text(text)
    os.mkfifo(tmp / "fifo.json")
    from toolkit.models import adapter_folder  # light: torch loads inside load()

    adapter = tmp / "adapter"
    shutil.copytree(adapter_folder(), adapter)
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    from toolkit import fetch

    model = tmp / "cache" / "models" / fetch.FOLDER_NAME  # a converted folder whose weights are not the listed size
    model.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (model / name).write_text("{}")
    listed = {n: 2 for n in ("config.json", "tokenizer.json", "tokenizer_config.json")} | {"model.safetensors": 99}
    manifest = {"gguf_sha256": fetch.GGUF_SHA256, "files": listed, "sha256": dict.fromkeys(listed, "0" * 64)}
    (model / "manifest.json").write_text(json.dumps(manifest))
    tk = [sys.executable, "-m", "toolkit"]
    bad_adapter, bad_model = {"TOOLKIT_ADAPTER": str(adapter)}, {"TOOLKIT_CACHE": str(tmp / "cache")}
    return [
        ("constrain 5,000-digit integer", [*tk, "constrain", "--schema", str(tmp / "huge_int.json")], {}),
        ("constrain 450-deep schema", [*tk, "constrain", "--schema", str(tmp / "deep.json")], {}),
        ("constrain NaN in schema", [*tk, "constrain", "--schema", str(tmp / "nan.json")], {}),
        ("constrain --schema FIFO", [*tk, "constrain", "--schema", str(tmp / "fifo.json")], {}),
        ("lint-tools Infinity", [*tk, "lint-tools", str(tmp / "inf.json")], {}),
        ("lint-tools 450-deep", [*tk, "lint-tools", str(tmp / "deep.json")], {}),
        ("loop non-UTF-8 question", [*tk, "loop", b"caf\xe9?".decode("utf-8", "surrogateescape")], {}),
        ("train --model real --steps 5", [*tk, "train", "--model", "real", "--steps", "5"], {}),
        ("loop +lora, truncated adapter", [*tk, "loop", "hi", "--model", "qwen2.5-coder-0.5b+lora"], bad_adapter),
        ("models adapter, truncated", [*tk, "models", "adapter"], bad_adapter),
        ("loop_questions.py --pass lora", [sys.executable, "benchmarks/loop_questions.py", "--pass", "lora"], bad_adapter),
        ("models info, damaged folder", [*tk, "models", "info"], bad_model),
    ]  # fmt: skip


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=cliargs.count(1, 50), default=3)
    p.add_argument("--out", type=cliargs.out_file, default=ROOT / "benchmarks" / "results" / "cli_errors.json")
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, cmd, extra in [(label, cmd, {}) for label, cmd in CASES] + hostile_cases(Path(tmp)):
            times, rc = [], None
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True, text=True, env={**ENV, **extra}, cwd=ROOT, timeout=60)
                times.append(time.perf_counter() - t0)
                rc = r.returncode
            rows.append({"case": label, "median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3),
                         "exit": rc, "stderr_lines": len(r.stderr.strip().splitlines()),
                         "traceback": "Traceback" in r.stderr})  # fmt: skip
    floor = rows[0]["median_s"]
    print(f"{'case':<32} {'median s':>9} {'max s':>7} {'x start':>8} {'exit':>5} {'lines':>6} {'traceback':>10}")
    for row in rows:
        print(
            f"{row['case']:<32} {row['median_s']:>9.3f} {row['max_s']:>7.3f} {row['median_s'] / floor:>8.1f} "
            f"{row['exit']:>5} {row['stderr_lines']:>6} {'YES' if row['traceback'] else 'no':>10}"
        )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    meta = dict(date=datetime.now(timezone.utc).isoformat(timespec="seconds"), machine=platform.node(),
                cpus=os.cpu_count(), load=os.getloadavg(), commit=commit.strip(), model="none (no model loads)")  # fmt: skip
    refusals = [row for row in rows if row["exit"] != 0]
    slowest = max(refusals, key=lambda row: row["max_s"])
    over = [row["case"] for row in refusals if row["max_s"] > TARGET_S]
    meta.update(target_s=TARGET_S, slowest=slowest["case"], slowest_max_s=slowest["max_s"], over_target=over)
    print(f"(load {meta['load'][0]:.2f} on {meta['cpus']} CPUs, commit {meta['commit']})")
    print(
        f"slowest refusal: {slowest['case']} {slowest['max_s']:.3f} s (max of {a.repeats}); target {TARGET_S} s; "
        f"{len(over)} of {len(refusals)} over it{': ' + ', '.join(over) if over else ''}"
    )
    a.out.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
