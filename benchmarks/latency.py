"""The kit's small latency targets, measured and printed next to each target (never asserted).

The unit tests check what these paths do; how fast they do it depends on the machine and on its load, so the
timings live here instead (tests/test_tools.py, test_cost.py and test_models.py used to assert them):
- calculator: every hostile input of ``tests/test_tools.py::HOSTILE`` rejected, each in ≤ 100 ms;
- cost views (notebook 04): moving a slider re-renders the figure kernel-side in ≤ 100 ms;
- stand-in model: built in < 1 s once transformers is imported;
- hub probe: ``hub_reachable()`` answers in < 0.1 s with HF_HUB_OFFLINE=1 and gives up within its timeout
  when the network refuses (a refusing socket is simulated, nothing leaves the machine);
- server errors (tests/test_backends_http.py used to assert these): ``http.probe`` of a closed loopback port fails
  in < 10 s, of a port that accepts and never answers (``timeout_s=1``) in < 8 s.
Each row is the worst of ``--repeats`` runs (default 3) beside the median; the 1-minute load average is printed,
because on a shared machine a number is only as good as the load beside it. ``--json-out`` saves the rows with
date, machine, model and commit.

Leaves out: browser-side rendering of the cost views (tests/test_browser.py) and anything that needs a model's
weights.

    python benchmarks/latency.py [--repeats 3] [--json-out benchmarks/results/latency.json]
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
from toolkit import cliargs  # noqa: E402
from toolkit.paths import provenance, script_module  # noqa: E402  (results name a clean commit or say they do not)


def _test_module(name: str):
    """A module of tests/ by its file (the tests are not a package; the kit itself is installed)."""
    return script_module(ROOT / "tests" / f"{name}.py")


def _ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def calculator_rows(repeats: int) -> list[dict]:
    HOSTILE = _test_module("test_tools").HOSTILE

    from toolkit.calculator import calculator
    from toolkit.errors import ToolError
    from toolkit.tools import TOOLS

    def reject(expr):
        try:
            TOOLS["calculator"].call({"expression": expr}) if len(expr) <= 200 else calculator(expr)
        except ToolError:
            return
        raise AssertionError(f"hostile input accepted: {expr[:40]!r}")

    per_input = []
    for expr in HOSTILE:
        runs = [_ms(lambda e=expr: reject(e)) for _ in range(repeats)]
        per_input.append((max(runs), expr))
    per_input.sort(reverse=True)
    worst = [f"{e[:24]!r}{'…' if len(e) > 24 else ''} {t:.1f} ms" for t, e in per_input[:3]]
    return [
        {
            "what": f"calculator rejects {len(HOSTILE)} hostile inputs (slowest input)",
            "target_ms": 100,
            "worst_ms": per_input[0][0],
            "median_ms": statistics.median(t for t, _ in per_input),
            "note": "slowest: " + "; ".join(worst),
        }
    ]


def cost_view_rows(repeats: int) -> list[dict]:
    from toolkit.widgets.cost import DecayView, DecodeView, GrowthView

    moves = {
        "GrowthView": (GrowthView, [("sliders.T", 4000), ("sliders.delta", 1024), ("sliders.R", 45), ("warm", False)]),
        "DecayView": (DecayView, [("p", 0.97), ("k", 33), ("target", 0.8)]),
        "DecodeView": (
            DecodeView,
            [
                ("model", "DeepSeek-V3 (37B active)"),
                ("precision", "INT4 (0.5 byte)"),
                ("hardware", "NVIDIA H200 (4.8 TB/s)"),
                ("tokens", 30_000),
            ],
        ),
    }
    rows = []
    for name, (cls, steps) in moves.items():
        times = []
        for _ in range(repeats):
            view = cls()
            initial = {}
            for attr, value in steps:
                control = _control(view, attr)
                initial[attr] = control.value
                times.append(_ms(lambda c=control, v=value: setattr(c, "value", v)))
            for attr, value in initial.items():  # and back, so every repeat moves every control
                control = _control(view, attr)
                times.append(_ms(lambda c=control, v=value: setattr(c, "value", v)))
        rows.append(
            {
                "what": f"{name}: one control moved, figure re-rendered (kernel side)",
                "target_ms": 100,
                "worst_ms": max(times),
                "median_ms": statistics.median(times),
                "note": f"{len(times)} moves of {', '.join(a for a, _ in steps)}",
            }
        )
    return rows


def _control(view, attr: str):
    obj = view
    for part in attr.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj


def model_rows(repeats: int) -> list[dict]:
    from toolkit import models, paths
    from toolkit.paths import hub_reachable

    models.stand_in()  # the one-off transformers import is not the target
    builds = [_ms(models.stand_in) for _ in range(repeats)]
    rows = [
        {
            "what": "stand-in model built (after the first)",
            "target_ms": 1000,
            "worst_ms": max(builds),
            "median_ms": statistics.median(builds),
            "note": "toolkit.models.stand_in(), 9.8M params",
        }
    ]
    offline = [_ms(hub_reachable) for _ in range(repeats)]
    rows.append(
        {
            "what": "hub_reachable() with HF_HUB_OFFLINE=1",
            "target_ms": 100,
            "worst_ms": max(offline),
            "median_ms": statistics.median(offline),
            "note": "answers without touching the network",
        }
    )
    saved, real = os.environ.pop("HF_HUB_OFFLINE", None), paths.socket.create_connection

    def refuse(*a, **k):
        raise OSError("no route (simulated)")

    paths.socket.create_connection = refuse
    try:
        refused = [_ms(lambda: hub_reachable(timeout=0.5)) for _ in range(repeats)]
    finally:
        paths.socket.create_connection = real
        if saved is not None:
            os.environ["HF_HUB_OFFLINE"] = saved
    rows.append(
        {
            "what": "hub_reachable(timeout=0.5) when the network refuses",
            "target_ms": 500,
            "worst_ms": max(refused),
            "median_ms": statistics.median(refused),
            "note": "simulated refusing socket",
        }
    )
    return rows


def server_error_rows(repeats: int) -> list[dict]:
    import socket

    from toolkit.backends import http

    def fail(url, **kw):
        try:
            http.probe(url, **kw)
        except http.ServerError:
            return
        raise AssertionError(f"{url} answered")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    down = [_ms(lambda: fail(f"http://127.0.0.1:{closed}/v1")) for _ in range(repeats)]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)  # accepts connections (the kernel does), never reads or replies
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        silent = [_ms(lambda: fail(url, timeout_s=1.0)) for _ in range(repeats)]
    finally:
        listener.close()
    return [
        {
            "what": "http.probe of a closed loopback port: one-line error",
            "target_ms": 10_000,
            "worst_ms": max(down),
            "median_ms": statistics.median(down),
            "note": "",
        },
        {
            "what": "http.probe of a server that never answers (timeout_s=1)",
            "target_ms": 8_000,
            "worst_ms": max(silent),
            "median_ms": statistics.median(silent),
            "note": "",
        },
    ]


def main(argv=None) -> int:
    ap = cliargs.Parser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=cliargs.count(1), default=3)
    ap.add_argument("--json-out", type=cliargs.out_file, default=None)
    a = ap.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows = calculator_rows(a.repeats) + cost_view_rows(a.repeats) + model_rows(a.repeats) + server_error_rows(a.repeats)
    load_after = os.getloadavg()[0]
    head = f"{'what':<66} {'target':>8} {'worst':>9} {'median':>9} {'met?':>5}"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        r["met"] = r["worst_ms"] <= r["target_ms"]
        print(
            f"{r['what']:<66} {r['target_ms']:>6} ms {r['worst_ms']:>6.1f} ms {r['median_ms']:>6.1f} ms "
            f"{'yes' if r['met'] else 'NO':>5}"
        )
    for r in rows:
        if r["note"]:
            print(f"  {r['what'].split(':')[0]}: {r['note']}")
    print(
        f"(worst of {a.repeats} repeats; {os.cpu_count()} CPUs, 1-min load {load_before:.1f} → {load_after:.1f}; "
        "no model weights involved)"
    )
    if a.json_out:
        meta = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs",
            "model": "none (stand-in built for its own row)",
            **provenance(ROOT),
            "load_1min": [round(load_before, 2), round(load_after, 2)],
            "repeats": a.repeats,
        }
        Path(a.json_out).write_text(json.dumps({**meta, "rows": rows}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
