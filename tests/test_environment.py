"""The pins live in requirements.txt; environment.yml (Binder) must list exactly the same pip pins."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pins(lines):
    out = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert m, f"not an exact pin: {line!r}"
        out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_requirements_are_exact_pins():
    pins = _pins((ROOT / "requirements.txt").read_text().splitlines())
    assert pins["torch"] == "2.13.0" and len(pins) > 10


def test_environment_yml_pip_section_equals_requirements():
    import yaml  # shipped with jupyter's dependencies

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert any("download.pytorch.org/whl/cpu" in p for p in pip), "Binder must get the CPU torch build"
    assert _pins(pip) == _pins((ROOT / "requirements.txt").read_text().splitlines())


def test_installed_versions_match_pins():
    from importlib.metadata import PackageNotFoundError, version

    pins = _pins((ROOT / "requirements.txt").read_text().splitlines())
    wrong = {}
    for name, want in pins.items():
        try:
            got = version(name)
        except PackageNotFoundError:
            wrong[name] = "missing"
            continue
        if got.split("+")[0] != want:
            wrong[name] = got
    assert not wrong, f"installed versions differ from requirements.txt: {wrong}"
