"""Binder: what repo2docker reads from binder/ (it ignores the root's config files once binder/ exists).

Checks that binder/environment.yml is the root environment.yml (whose pip pins tests/test_environment.py
compares with requirements.txt), that postBuild installs the kit and the JupyterLab overrides where JupyterLab
reads them (run with a stand-in `python` that records what it is asked to do), that the overrides are valid
JupyterLab settings that turn the news popup off, and that postBuild installs the real model and its int8 build (toolkit.small), which
load("auto") picks in Binder's 2 GB (the notebooks' Binder runs in tests/test_notebooks.py check that in a cgroup).

Leaves out: building the image (needs Docker and the network) — the browser test serves the same overrides.
"""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"


def test_binder_environment_is_the_root_one():
    env = BINDER / "environment.yml"
    assert env.is_symlink(), "binder/environment.yml should link to ../environment.yml (one file to keep in sync)"
    assert env.resolve() == (ROOT / "environment.yml").resolve()
    assert env.read_bytes() == (ROOT / "environment.yml").read_bytes()


def test_scripts_are_executable_bash():
    for name in ("postBuild", "start"):
        path = BINDER / name
        assert path.stat().st_mode & stat.S_IXUSR, f"binder/{name} must be executable"
        assert path.read_text().startswith("#!/bin/bash\n")
        subprocess.run(["bash", "-n", str(path)], check=True)


def test_overrides_are_valid_lab_settings_without_news():
    import jsonschema
    from jupyterlab.commands import get_app_dir

    overrides = json.loads((BINDER / "overrides.json").read_text())
    schemas = Path(get_app_dir()) / "schemas"
    for plugin, values in overrides.items():
        package, name = plugin.split(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        jsonschema.validate(values, schema)  # the schema forbids unknown keys, so a typo fails here
    notification = overrides["@jupyterlab/apputils-extension:notification"]
    assert notification["fetchNews"] == "false" and notification["checkForUpdates"] is False


def test_postbuild_installs_kit_and_overrides(tmp_path):
    # A stand-in `python` first on PATH: answers the app-dir question with a temp folder, records the rest.
    bin_dir, app_dir, log = tmp_path / "bin", tmp_path / "app", tmp_path / "calls.log"
    bin_dir.mkdir()
    shim = bin_dir / "python"
    shim.write_text(f"""#!/bin/bash
if [[ "$*" == *get_app_dir* ]]; then echo {app_dir}; exit 0; fi
echo "$*" >> {log}
""")
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    subprocess.run([str(BINDER / "postBuild")], cwd=ROOT, env=env, check=True)
    assert (app_dir / "settings" / "overrides.json").read_bytes() == (BINDER / "overrides.json").read_bytes()
    calls = log.read_text().splitlines()
    assert "-m pip install --no-cache-dir --no-deps -e ." in calls
    assert any("qwen_tokenizer('qwen3')" in c for c in calls)
    real, small = calls.index("-m toolkit models install-real"), calls.index("-m toolkit models install-small --base")
    assert real < small, "the int8 build needs the real model first"


def test_start_without_a_model_gives_the_stand_in_loudly(tmp_path):
    """Through binder/start, with no real model installed (an empty cache: postBuild failed), load("auto") is the
    stand-in, announced; with the model installed, tests/test_notebooks.py's Binder runs show what auto picks."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env["TOOLKIT_CACHE"] = str(tmp_path)
    code = (
        "import os, torch; torch.set_num_threads(1); from toolkit import models; m = models.load('auto'); "
        "print(os.environ['HF_HUB_OFFLINE'], m.kind, m.semantic, m.description)"
    )
    out = (
        subprocess.run(
            [str(BINDER / "start"), sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    offline, kind, semantic, description = out.split(" ", 3)
    assert (offline, kind, semantic) == ("1", "stand-in", "False"), out
    assert "STAND-IN" in description


def test_voila_reads_progressive_rendering_from_the_repository_root(monkeypatch):
    """`make app`, Binder's /voila/render/... and the browser test start Voila in the repository root (the test
    copies voila.json next to its notebooks), where Voila's own config loader finds voila.json. Without progressive
    rendering, Voila 0.5.13 showed "Error displaying widget: model not found" on 4 of 6 loads of notebook 04
    (with it: 0 of 6)."""
    from voila.server_extension import load_config_file

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(ROOT / "no-such-config-dir"))
    config = load_config_file()
    assert config is not None and config.VoilaConfiguration.progressive_rendering is True
    assert "voila notebooks" in (ROOT / "Makefile").read_text()  # `make app` runs from the root, where voila.json is
