"""The kit installed non-editable (a wheel into a fresh venv, the dependencies taken from this environment): the
CLI runs from site-packages and packaged data (chat templates, notebook 07's saved GPU results) is found there."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # builds and installs a wheel: ~1-2 min


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"  # a copy: setuptools writes build/ and *.egg-info beside the sources, never into the repo
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "toolkit", src / "toolkit", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the dependencies come from this environment (--no-deps); its editable finder for `toolkit` is a .pth that a
    # path line does not execute, so only the installed copy can be imported
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["HF_HUB_OFFLINE"] = "1"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(src),
        ],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return py, env, tmp, site


def run(installed, *args):
    py, env, cwd, _ = installed
    return subprocess.run([str(py), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_imports_come_from_the_installed_copy(installed):
    res = run(installed, "-c", "import toolkit, toolkit.tokenizer; print(toolkit.__file__)")
    assert res.returncode == 0, res.stderr[-2000:]
    assert Path(res.stdout.strip()).is_relative_to(installed[3]), res.stdout


def test_render_cli_from_site_packages(installed):
    res = run(installed, "-m", "toolkit", "render", "--example", "calculator", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    here = subprocess.run(
        [sys.executable, "-m", "toolkit", "render", "--example", "calculator", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert json.loads(res.stdout) == json.loads(here.stdout)  # the packaged template renders the same tokens


def test_notebook_07_data_is_packaged(installed):
    res = run(
        installed,
        "-c",
        "from toolkit import speed; r = speed.saved_gpu_result(); "
        "print(r is not None and bool(r.get('machine') or r.get('device')))",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "True"


def test_saved_results_outside_a_checkout_are_missing_with_a_clear_message(installed):
    code = (
        "from toolkit.paths import ResultsMissing, results_file\n"
        "try:\n    print(results_file('bfcl_qwen2.5-coder-0.5b.json'))\n"
        "except ResultsMissing as e:\n    print('MISSING', e)\n"
    )
    res = run(installed, "-c", code)  # cwd: a temporary folder, no checkout above it
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith("MISSING") and "TOOLKIT_RESULTS" in res.stdout, res.stdout


def test_saved_results_through_toolkit_results(installed):
    """Pointed at a checkout's benchmarks/results, the installed kit computes the claims that read them as here."""
    py, env, cwd, _ = installed
    code = "import json; from toolkit.book.claims_chains import chain_claims; print(json.dumps([c.__dict__ for c in chain_claims()], default=str))"
    there = subprocess.run(
        [str(py), "-c", code],
        env={**env, "TOOLKIT_RESULTS": str(ROOT / "benchmarks" / "results")},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert there.returncode == 0, there.stderr[-2000:]
    here = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert json.loads(there.stdout) == json.loads(here.stdout)
    assert "not measured" not in there.stdout  # the saved chains were read
