"""Shared test setup: offline always, markers that explain their skips, and a per-phase time account.

- ``hub`` tests are skipped with the reason when huggingface.co is unreachable.
- ``real_model`` tests are skipped, with the reason, when the optional real model is not installed. Where it was
  installed on purpose (``make test`` installs it and sets TOOLKIT_REQUIRE_REAL_MODEL=1, as CI does), a missing or
  incomplete install, or an error while checking it, stops the run at the start with an error (exit 4) instead.
- ``vllm`` tests (a real vLLM server, CPU build) are skipped with the reason when ``make vllm`` has not made its
  venv; with TOOLKIT_REQUIRE_VLLM=1 (``make test``, CI) a missing or incomplete one stops the run at the start.
- Tests are ordered longest first: the browser test, then the notebook runs, then the rest. Under pytest-xdist
  (``make test``: two workers, ``--dist loadfile --no-loadscope-reorder``) each file stays on one worker (one
  JupyterLab and one Chromium for the browser test, one model load per module), so one worker starts on the
  browser test and the other on the notebooks. (``--dist loadgroup`` would be finer, but xdist 3.8 cannot tag
  pytest 9's node ids with a group, so it splits groups silently.)
- At the end the run prints, per phase (unit, notebooks, browser), how many tests ran, the wall-clock span from
  the first test's start to the last one's end, the summed test time and the CPU seconds the tests used (their
  processes and the children they waited for). With TOOLKIT_PHASE_LOG set the same rows are appended to that file
  (``make test`` prints them beside the setup and model-install times).
"""

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REQUIRE_REAL_MODEL = os.environ.get("TOOLKIT_REQUIRE_REAL_MODEL", "").lower() in ("1", "true", "yes", "on")
REQUIRE_VLLM = os.environ.get("TOOLKIT_REQUIRE_VLLM", "").lower() in ("1", "true", "yes", "on")


def _real_model_state() -> tuple[bool, str]:
    """(installed, why not)."""
    try:
        from toolkit import fetch

        if fetch.is_installed():
            return True, ""
        return False, f"not installed (or incomplete) in {fetch.target_folder()}"
    except Exception as e:
        return False, f"unusable: checking it failed with {type(e).__name__}: {e}"


def _require_real_model() -> None:
    real, why = _real_model_state()
    if not real:
        raise pytest.UsageError(
            f"TOOLKIT_REQUIRE_REAL_MODEL=1 but the real offline model is {why}: run `make "
            "real-model` (without the variable its tests would be skipped)"
        )


def pytest_configure(config):
    # Checked once, up front, in the main process: an error raised later inside an xdist worker loses its message.
    if REQUIRE_REAL_MODEL and not hasattr(config, "workerinput"):
        _require_real_model()
    if REQUIRE_VLLM and not hasattr(config, "workerinput"):
        from toolkit.backends import vllm_local

        usable, why = vllm_local.state()
        if not usable:
            raise pytest.UsageError(f"TOOLKIT_REQUIRE_VLLM=1 but {why} (without the variable its tests are skipped)")


def pytest_collection_modifyitems(config, items):
    from toolkit.paths import hub_reachable

    hub = None
    real = why = None
    for item in items:
        if "hub" in item.keywords:
            if hub is None:
                hub = hub_reachable(timeout=2.0)
            if not hub:
                item.add_marker(
                    pytest.mark.skip(
                        reason="huggingface.co is unreachable here (HF_HUB_OFFLINE=1 or "
                        "no network); this test compares against the live hub copy"
                    )
                )
        if "vllm" in item.keywords:
            from toolkit.backends import vllm_local

            usable, why_vllm = vllm_local.state()
            if not usable:
                item.add_marker(pytest.mark.skip(reason=why_vllm))
        if "real_model" in item.keywords:
            item.add_marker(pytest.mark.slow)  # every real-model test decodes for tens of seconds: not in test-fast
            if real is None:
                if REQUIRE_REAL_MODEL:
                    _require_real_model()
                real, why = _real_model_state()
            if not real:
                item.add_marker(pytest.mark.skip(reason=f"real offline model {why}: run `make real-model`"))
    # Longest first, so that two xdist workers end together: `make test` hands out whole files in this order
    # (--dist loadfile --no-loadscope-reorder), so one worker starts on the browser test while the other runs the
    # notebooks (real-model runs first), and both then share the unit-test files: those that decode with the real
    # model or start vLLM (minutes each) before the rest, so that none of them starts last.
    heavy = {it.path for it in items if "real_model" in it.keywords or "vllm" in it.keywords}

    def order(it) -> int:
        if "browser" in it.keywords:
            return 0
        if "notebook" in it.keywords:
            return 1 if "machine" in it.name else 2
        return 3 if it.path in heavy else 4

    items.sort(key=order)


@pytest.fixture(scope="session")
def qwen3_tok():
    from toolkit.tokenizer import tokenizer_for

    return tokenizer_for("qwen3")


@pytest.fixture(scope="session")
def qwen25_tok():
    from toolkit.tokenizer import tokenizer_for

    return tokenizer_for("qwen2.5")


# ------------------------------------------------------------------------------------------ per-phase account
PHASES = ("unit", "notebooks", "browser")
SLOWEST_FILES = 12  # the files and the single tests .ci/phases.py lists after the phase table


def _phase(keywords) -> str:
    return "browser" if "browser" in keywords else "notebooks" if "notebook" in keywords else "unit"


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item._phase_cpu_mark = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    now = _cpu_seconds()
    # Travels with the report to the xdist controller (extra report attributes are serialised).
    outcome.get_result().cpu_s = now - getattr(item, "_phase_cpu_mark", now)
    item._phase_cpu_mark = now


_ACCOUNT: dict[str, dict] = {}


_FILES: dict[str, list] = {}  # test file -> [test time, CPU]: what a slow run spends its time on, file by file
_TESTS: dict[str, list] = {}  # test id -> [test time, CPU], for the slowest single tests (a notebook run is one)


_NOTEBOOKS: list[dict] = []  # each notebook run's seconds and peak memory (record_property in test_notebooks.py and
# test_browser.py; ``run`` names the run where the test id does not)


def pytest_runtest_logreport(report):
    props = dict(report.user_properties or ())
    if report.when == "call" and "peak_rss_mb" in props:
        name = props.pop("run", None) or report.nodeid.split("[", 1)[-1].rstrip("]")
        _NOTEBOOKS.append({"kind": "notebook", "test": name, **props})
    for f in (
        _FILES.setdefault(report.nodeid.split("::", 1)[0], [0.0, 0.0]),
        _TESTS.setdefault(report.nodeid, [0.0, 0.0]),
    ):
        f[0] += report.duration
        f[1] += getattr(report, "cpu_s", 0.0) or 0.0
    a = _ACCOUNT.setdefault(_phase(report.keywords), {"tests": 0, "start": None, "stop": None, "busy": 0.0, "cpu": 0.0})
    start, stop = getattr(report, "start", None), getattr(report, "stop", None)
    if report.when == "call" or (report.when == "setup" and report.skipped):
        a["tests"] += 1
    if start is not None:
        a["start"] = start if a["start"] is None else min(a["start"], start)
        a["stop"] = stop if a["stop"] is None else max(a["stop"], stop)
    a["busy"] += report.duration
    a["cpu"] += getattr(report, "cpu_s", 0.0) or 0.0


def _fmt(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput") or not _ACCOUNT:  # an xdist worker: the controller prints
        return
    tr = terminalreporter
    tr.section("time per phase")
    tr.write_line(f"{'phase':<10} {'tests':>6} {'wall span':>10} {'test time':>10} {'CPU':>9}")
    rows = []
    for name in PHASES:
        a = _ACCOUNT.get(name)
        if not a or a["start"] is None:
            continue
        rows.append(
            {
                "kind": "pytest",
                "phase": name,
                "start": a["start"],
                "stop": a["stop"],
                "cpu": a["cpu"],
                "busy": a["busy"],
                "tests": a["tests"],
            }
        )
        tr.write_line(
            f"{name:<10} {a['tests']:>6} {_fmt(a['stop'] - a['start']):>10} {_fmt(a['busy']):>10} {_fmt(a['cpu']):>9}"
        )
    workers = getattr(config.option, "numprocesses", None) or 1
    tr.write_line(
        f"wall span: first test's start to last test's end ({workers} worker(s): spans overlap when more "
        "than one); test time: summed over tests; CPU: user+system of the test processes and the children "
        "they waited for"
    )
    slow = sorted(_FILES.items(), key=lambda kv: -kv[1][0])[:SLOWEST_FILES]
    rows += [{"kind": "file", "file": name, "busy": busy, "cpu": cpu} for name, (busy, cpu) in slow]
    slow = sorted(_TESTS.items(), key=lambda kv: -kv[1][0])[:SLOWEST_FILES]
    rows += [{"kind": "test", "file": name, "busy": busy, "cpu": cpu} for name, (busy, cpu) in slow]
    rows += _NOTEBOOKS
    log = os.environ.get("TOOLKIT_PHASE_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)


@pytest.fixture(scope="session")
def stand_in_server():
    """A real `transformers serve` on 127.0.0.1 serving the random-weight stand-in (fast to decode), stopped by PID."""
    from toolkit.backends.serve import LocalServer, folder_for
    from toolkit.models import load
    from toolkit.paths import cpu_threads

    folder = folder_for(load("stand-in", quiet=True))
    assert "stand-in" in Path(folder).name  # the id the server reports says "stand-in" (toolkit.backends.choose)
    srv = LocalServer(folder, threads=cpu_threads())
    try:
        yield srv
    finally:
        srv.stop()
        assert not srv.alive()
        assert not Path(folder).exists()  # stop() removed the saved folder
