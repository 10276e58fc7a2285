"""The house rules the README states, checked by tools: import-linter's contracts in pyproject.toml (layers, forbidden
imports), ruff (lint and format), kit imports at the top of each file, lazy third-party imports that say why, and
module sizes."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "toolkit"
MAX_LINES = 420  # "no kit module over ~400 lines"
CHECKED = ["toolkit", "tests", "benchmarks", "notebooks"]


def _bin(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable}: run `make setup` (requirements.txt pins it)")
    return str(path)


def _kit_files():
    return sorted(p for p in KIT.rglob("*.py") if "__pycache__" not in p.parts)


def test_import_contracts_hold():
    res = subprocess.run([_bin("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert "broken" in res.stdout and " 0 broken" in res.stdout


def test_ruff_lint():
    res = subprocess.run([_bin("ruff"), "check", "--no-cache", *CHECKED], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-6000:]


def test_ruff_format():
    res = subprocess.run(
        [_bin("ruff"), "format", "--check", "--no-cache", *CHECKED], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout[-6000:]


def _imports_inside_functions(tree):
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    yield node


def _is_kit(node) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "toolkit"
    return any(a.name.split(".")[0] == "toolkit" for a in node.names)


def _says_why(lines, node) -> bool:
    """A ``# lazy: why`` on the import's line, on a line of the block of imports it belongs to, or just above."""
    i = node.lineno - 1
    while i >= 0 and lines[i].strip().startswith(("from ", "import ")):
        if "# lazy" in lines[i] or (i == node.lineno - 1 and "# lazy" in lines[node.end_lineno - 1]):
            return True
        i -= 1
    return i >= 0 and lines[i].strip().startswith("# lazy")  # or on a comment line just above the block


def test_kit_imports_sit_at_the_top_of_each_file():
    """Except in a command (``toolkit/commands/``): it checks its arguments first, then imports the kit modules
    that pull torch, xgrammar or the MCP SDK, saying why (#28: a usage error must not wait ~14 s for torch)."""
    lazy = []
    for p in _kit_files():
        src = p.read_text(encoding="utf-8")
        lines, command = src.splitlines(), p.parent.name == "commands"
        lazy += [
            f"{p.relative_to(ROOT)}:{n.lineno}"
            for n in _imports_inside_functions(ast.parse(src))
            if _is_kit(n) and not (command and _says_why(lines, n))
        ]
    assert not lazy, f"kit imports inside functions (move them to the top, or in a command say '# lazy: why'): {lazy}"


def test_lazy_third_party_imports_give_a_reason():
    """A third-party import inside a function must say why on its line (e.g. ``# torch: only when a model runs``)."""
    missing = []
    for p in _kit_files():
        src = p.read_text(encoding="utf-8")
        lines = src.splitlines()
        for n in _imports_inside_functions(ast.parse(src)):
            top = (n.module if isinstance(n, ast.ImportFrom) else n.names[0].name) or ""
            if _is_kit(n) or top.split(".")[0] in sys.stdlib_module_names:
                continue
            if "#" not in lines[n.end_lineno - 1]:
                missing.append(f"{p.relative_to(ROOT)}:{n.lineno} {top}")
    assert not missing, f"lazy third-party imports without a reason on their line: {missing}"


def test_no_kit_module_is_a_monolith():
    big = {
        str(p.relative_to(ROOT)): n
        for p in _kit_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_every_kit_module_says_what_it_does_and_leaves_out():
    missing = []
    for p in _kit_files():
        doc = ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or ""
        if not doc:
            missing.append(str(p.relative_to(ROOT)))
    assert not missing, f"modules without a docstring: {missing}"


def test_only_paths_finds_files_through_the_package_location():
    """A module that reads ``<repo>/...`` through ``__file__`` breaks a non-editable install (the fault speed.py and the
    claims had): ``toolkit.paths`` is the one place that locates the package and the saved results."""
    offenders = []
    for p in _kit_files():
        if p == KIT / "paths.py":
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if "__file__" in code or "parents[" in code:
                offenders.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "use toolkit.paths (results_file, data_file, kit_root):\n" + "\n".join(offenders)


HOUSE_TESTS = {"architecture", "binder", "browser", "environment", "house", "install", "notebooks", "notebook_numbers"}


def test_tests_mirror_the_kit():
    """tests/test_<module>[_<part>].py: each test file is named after the kit module or package it tests (or is one of
    the house-wide checks), so the test of toolkit/loop/gate.py is tests/test_loop_gate.py."""
    top = {p.stem for p in KIT.glob("*.py")} | {p.name for p in KIT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    stray = []
    for p in sorted((ROOT / "tests").glob("test_*.py")):
        name = p.stem[len("test_") :]
        if name in HOUSE_TESTS:
            continue
        if not any(name == t or name.startswith(t + "_") for t in top):
            stray.append(p.name)
    assert not stray, f"name these after the toolkit module they test: {stray}"
