"""Hostile inputs through the commands as a user runs them (``tests/fixtures/guarded_run.py``: a model load exits
99, torch/transformers/xgrammar cannot import): each is refused in one line, exit 1 or 2, no traceback, no model
load, in well under the time a model takes. And every option a command parses is read somewhere in its file, or
refused where it does not apply (``train``: an option of the other run)."""

import ast
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit.models import adapter_folder

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests" / "fixtures" / "guarded_run.py"
HUGE = "9" * 5000


def _files(tmp: Path) -> dict[str, Path]:
    out = {}
    for name, data in {
        "huge_int.json": '{"type": "object", "properties": {"a": {"type": "integer", "maximum": ' + HUGE + "}}}",
        "deep.json": '{"type": "array", "items": ' * 450 + "{}" + "}" * 450,
        "nan.json": '{"type": "number", "maximum": NaN}',
        "inf.json": '[{"name": "get_weather", "description": "x", "parameters": {"type": "object", "properties": {"a": {"type": "number", "maximum": Infinity}}}}]',
        "min_items.json": '{"type": "array", "items": {"type": "integer"}, "minItems": 1000000}',
        "min_length.json": '{"type": "string", "minLength": 100000000}',
        "tools_huge.json": '[{"name": "f", "description": "Fetches x.", "parameters": {"type": "object", "properties": {"n": {"type": "integer", "maximum": '
        + HUGE
        + "}}}}]",
    }.items():
        (tmp / name).write_text(data)
        out[name] = tmp / name
    os.mkfifo(tmp / "fifo.json")
    out["fifo"] = tmp / "fifo.json"
    return out


CASES = [  # (argv with @file placeholders, words the one line must hold)
    (["constrain", "--schema", "@huge_int.json"], "digits"),
    (["constrain", "--schema", "@deep.json"], "nested too deeply"),
    (["constrain", "--schema", "@nan.json"], "NaN"),
    (["constrain", "--schema", "@min_items.json"], "--max-new-tokens"),
    (["constrain", "--schema", "@min_length.json"], "--max-new-tokens"),
    (["constrain", "--schema", "@fifo"], "pipe"),
    (["constrain", "--schema", "~nosuchuser_x9/s.json"], "no such user"),
    (["lint-tools", "@inf.json"], "Infinity"),
    (["lint-tools", "@tools_huge.json"], "digits"),
    (["lint-tools", "@deep.json"], "nested too deeply"),
    (["lint-tools", "@fifo"], "pipe"),
    (["render", "--out", "~nosuchuser_x9/out.json"], None),
    (["train", "--model", "real", "--steps", "5"], "--steps"),
    (["train", "--model", "real", "--template", "qwen2.5"], "--template"),
    (["train", "--groups", "5"], "--groups"),
]


@pytest.mark.parametrize("argv, says", CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_hostile_input_is_one_line_before_any_model_loads(tmp_path, argv, says):
    files = _files(tmp_path)
    argv = [str(files[a[1:]]) if a.startswith("@") else a for a in argv]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"), TOOLKIT_BACKEND="")
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, str(RUNNER), "--block-heavy", "toolkit", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    print(f"{time.perf_counter() - t0:.2f} s  {' '.join(argv)[:80]}  ->  {r.stderr.strip()[:160]}")
    assert "MODEL LOAD" not in r.stderr and "Traceback" not in r.stderr + r.stdout, r.stderr[-1500:]
    assert r.returncode in (1, 2), (r.returncode, r.stderr[-500:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and (says is None or says in lines[0]), lines


def _toolkit(argv, tmp_path, block=True, **env):
    """``render`` builds the tokenizer with transformers (no model): ``block=False`` lets it import."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOOLKIT_BACKEND="", **env)
    cmd = [sys.executable, str(RUNNER), *(["--block-heavy"] if block else []), "toolkit", *argv]
    return subprocess.run(cmd, capture_output=True, cwd=tmp_path, env=env, timeout=120)


def test_undecodable_question_huge_seed_and_a_cache_that_is_a_file(tmp_path):
    r = _toolkit(["loop", b"caf\xe9?".decode("utf-8", "surrogateescape")], tmp_path)
    assert r.returncode == 2 and b"not UTF-8" in r.stderr and b"MODEL LOAD" not in r.stderr, r.stderr[-600:]
    r = _toolkit(
        ["constrain", "--schema", str(ROOT / "tests/fixtures/cli_schema.json"), "--seed", "1" + "0" * 20], tmp_path
    )
    assert r.returncode == 2 and b"--seed" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr[-600:]
    (tmp_path / "cache").write_text("x")
    r = _toolkit(["render", "--example", "weather"], tmp_path, False, TOOLKIT_CACHE=str(tmp_path / "cache"))
    assert r.returncode == 1 and b"is a file, not a folder" in r.stderr and b"Traceback" not in r.stderr, r.stderr


def test_an_ascii_terminal_and_a_full_disk_are_not_tracebacks(tmp_path):
    r = _toolkit(["render", "--example", "weather", "--json"], tmp_path, False, PYTHONIOENCODING="ascii")
    assert r.returncode == 0 and b"Traceback" not in r.stderr, r.stderr[-600:]
    r.stdout.decode("ascii")  # escaped, not refused
    with open("/dev/full", "w") as full:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TOOLKIT_BACKEND="")
        cmd = [sys.executable, "-m", "toolkit", "render", "--example", "weather"]
        r = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [b"python -m toolkit render: No space left on device"]


def test_prefix_reuse_refuses_a_prompt_longer_than_the_models_positions(tmp_path):
    cmd = [sys.executable, str(RUNNER), "--block-heavy", str(ROOT / "benchmarks/prefix_reuse.py"), "--T", "40000"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "32,768 positions" in r.stderr and "MODEL LOAD" not in r.stderr, r.stderr[-600:]


def test_a_password_in_an_mcp_url_is_not_echoed(tmp_path):
    r = _toolkit(["lint-tools", "--mcp", "http://u:hunter2@127.0.0.1:9/mcp"], tmp_path, block=False)
    assert r.returncode == 2 and b"hunter2" not in r.stderr and b"***@127.0.0.1:9" in r.stderr, r.stderr


def test_a_bad_toolkit_model_is_refused_like_the_option(tmp_path):
    for pinned, says in (("~nosuchuser_x9/model", b"no such user"), ("/nonexistent/model", b"no such model")):
        r = _toolkit(["loop", "--example", "calculator"], tmp_path, TOOLKIT_MODEL=pinned)
        assert r.returncode == 2 and b"TOOLKIT_MODEL" in r.stderr and says in r.stderr, r.stderr[-600:]
        assert b"MODEL LOAD" not in r.stderr


def test_a_bad_adapter_is_refused_before_the_base_model_loads(tmp_path):
    """``loop --model qwen2.5-coder-0.5b+lora`` with ``TOOLKIT_ADAPTER`` naming truncated weights: a usage error,
    with no model load (the runner makes one exit 99)."""
    bad = tmp_path / "adapter"
    shutil.copytree(adapter_folder(), bad)
    w = bad / "adapter_model.safetensors"
    w.write_bytes(w.read_bytes()[:5000])
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOOLKIT_ADAPTER=str(bad), TOOLKIT_BACKEND="")
    cmd = [sys.executable, str(RUNNER), "--block-heavy", "toolkit", "loop", "--example", "calculator"]
    r = subprocess.run([*cmd, "--model", "qwen2.5-coder-0.5b+lora"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "MODEL LOAD" not in r.stderr and "truncated" in r.stderr, r.stderr[-800:]


def _broken_adapters(tmp_path) -> dict[str, Path]:
    """Copies of the shipped adapter, each broken one way, and a ``TOOLKIT_ADAPTER`` naming no user's home."""
    out = {}
    for how in ("no weights", "truncated weights", "no manifest"):
        bad = tmp_path / how.replace(" ", "_")
        shutil.copytree(adapter_folder(), bad)
        w = bad / "adapter_model.safetensors"
        if how == "no weights":
            w.unlink()
        elif how == "truncated weights":
            w.write_bytes(w.read_bytes()[:5000])
        else:
            (bad / "manifest.json").unlink()
        out[how] = bad
    out["unknown home"] = Path("~nosuchuser_x9/adapter")
    return out


@pytest.mark.parametrize("which", ["lora", "lora-int8"])
def test_loop_questions_refuses_a_broken_adapter_before_any_model_loads(tmp_path, which):
    """``benchmarks/loop_questions.py --pass lora`` found a broken adapter only after the base model had loaded;
    now one line, exit 1, with torch never imported and no model load (the runner makes either fail loudly)."""
    script = ROOT / "benchmarks" / "loop_questions.py"
    for how, bad in _broken_adapters(tmp_path).items():
        env = dict(os.environ, HF_HUB_OFFLINE="1", TOOLKIT_ADAPTER=str(bad), TOOLKIT_BACKEND="")
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, str(RUNNER), "--block-heavy", str(script), "--pass", which, "--only", "product_en"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        took = time.perf_counter() - t0
        print(f"{took:.2f} s  {which} {how}  ->  {r.stderr.strip()[:160]}")
        assert "MODEL LOAD" not in r.stderr and "HEAVY IMPORT" not in r.stderr, (how, r.stderr[-800:])
        assert r.returncode == 1 and "Traceback" not in r.stderr, (how, r.returncode, r.stderr[-800:])
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and (str(bad.name) in lines[0] or "nosuchuser" in lines[0]), (how, lines)


def _parsed_dests(tree) -> set[str]:
    dests = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("dest"), ast.Constant):
                dests.add(kw["dest"].value)
                continue
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            long = [n for n in names if n.startswith("--")]
            if long or names:
                dests.add((long or names)[0].lstrip("-").replace("-", "_"))
    return dests


def _read_names(tree) -> set[str]:
    read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    read |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return read


def test_every_parsed_option_is_read():
    """An option parsed and never read is a silent no-op (``train --model real --steps``): each ``add_argument`` of
    a command must be read as ``args.<dest>`` (or named as a string, as ``train`` does for its per-run options)."""
    unread = {}
    for src in sorted((ROOT / "toolkit" / "commands").glob("*.py")):
        tree = ast.parse(src.read_text(encoding="utf-8"))
        missing = _parsed_dests(tree) - _read_names(tree) - {"help"}
        if missing:
            unread[src.name] = sorted(missing)
    assert unread == {}, f"options parsed but never read: {unread}"


def test_the_unread_check_can_fail():
    tree = ast.parse("p.add_argument('--ghost', type=int)\np.add_argument('--seen')\nprint(a.seen)")
    assert _parsed_dests(tree) - _read_names(tree) == {"ghost"}
    assert json.loads("1") == 1


def _rl_adapters(tmp_path) -> dict[str, Path]:
    """RL adapter folders broken one way each (``benchmarks/rl.py train`` writes peft's files, no manifest)."""
    out = {"no folder": tmp_path / "missing", "unknown home": Path("~nosuchuser_x9/adapter")}
    for how in ("no weights", "truncated weights", "not lora", "binary config"):
        bad = tmp_path / how.replace(" ", "_")
        bad.mkdir()
        cfg = {"peft_type": "PREFIX_TUNING" if how == "not lora" else "LORA", "r": 8}
        (bad / "adapter_config.json").write_bytes(b"\xff\xfe" if how == "binary config" else json.dumps(cfg).encode())
        if how != "no weights":
            (bad / "adapter_model.safetensors").write_bytes(
                _safetensors()[: 20 if how == "truncated weights" else None]
            )
        out[how] = bad
    return out


def _safetensors() -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    return len(header).to_bytes(8, "little") + header + bytes(8)


def _sound_adapter(folder: Path, started_from: str) -> Path:
    """A sound RL adapter whose run's ``results.json`` names the model it started from."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    (folder / "adapter_model.safetensors").write_bytes(_safetensors())
    (folder.parent / "results.json").write_text(json.dumps({"model": started_from}))
    return folder


def test_loop_questions_and_bfcl_refuse_a_broken_rl_adapter_before_any_model_loads(tmp_path):
    """``--pass lora-rl|base-rl`` / ``--model qwen2.5-coder-0.5b[+lora]+rl`` with ``TOOLKIT_RL_ADAPTER`` naming a
    missing or damaged folder, or a sound run that started from the other model: one line (exit 1 for the loop
    questions, a usage error for BFCL), torch never imported."""
    runs = {  # script: (argv, exit status, the start the model name wants)
        "loop_questions.py": (["--pass", "lora-rl", "--set", "heldout", "--only", "h_mean_en"], 1, "lora"),
        "bfcl.py": (["accuracy", "--model", "qwen2.5-coder-0.5b+lora+rl", "--limit", "1", "--no-save"], 2, "lora"),
        "loop_questions.py base-rl": (["--pass", "base-rl", "--set", "heldout", "--only", "h_mean_en"], 1, "base"),
        "bfcl.py +rl": (["accuracy", "--model", "qwen2.5-coder-0.5b+rl", "--limit", "1", "--no-save"], 2, "base"),
    }
    other_start = {  # a sound adapter from the other start: wrong for every run that wants this one
        "lora": _sound_adapter(tmp_path / "from_base" / "adapter", "Qwen base [cpu]"),
        "base": _sound_adapter(tmp_path / "from_sft" / "adapter", "Qwen + LoRA adapter x (weights 07ad3f3e) [cpu]"),
    }
    broken = _rl_adapters(tmp_path)
    for script, (argv, rc, start) in runs.items():
        for how, bad in (broken | {"another start": other_start[start]}).items():
            env = dict(os.environ, HF_HUB_OFFLINE="1", TOOLKIT_RL_ADAPTER=str(bad), TOOLKIT_BACKEND="")
            env.pop("TOOLKIT_ADAPTER", None)
            cmd = [sys.executable, str(RUNNER), "--block-heavy", str(ROOT / "benchmarks" / script.split()[0]), *argv]
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
            assert "MODEL LOAD" not in r.stderr and "HEAVY IMPORT" not in r.stderr, (script, how, r.stderr[-800:])
            assert r.returncode == rc and "Traceback" not in r.stderr, (script, how, r.returncode, r.stderr[-800:])
            last = r.stderr.strip().splitlines()[-1]
            assert "RL adapter" in last or "nosuchuser" in last, (script, how, r.stderr[-800:])
            if how == "another start":
                assert "was trained from" in last, (script, last)


def test_an_rl_adapter_from_another_start_is_refused_before_peft(tmp_path):
    """The run's ``results.json`` names the model it started from; applying it to another model is one line."""
    from toolkit.artifact import ArtifactError, verify_rl_adapter
    from toolkit.models import Loaded
    from toolkit.rl_adapter import apply_rl_adapter

    good = tmp_path / "run" / "adapter"
    good.mkdir(parents=True)
    (good / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8}))
    (good / "adapter_model.safetensors").write_bytes(_safetensors())
    (good.parent / "results.json").write_text(json.dumps({"model": "Base + LoRA adapter x (weights 07ad3f3e) [cpu]"}))
    info = verify_rl_adapter(good)
    assert info["rank"] == 8 and info["started_from"].startswith("Base + LoRA") and len(info["weights_sha256"]) == 64
    other = Loaded(None, None, "Base + LoRA adapter x (weights deadbeef)", "real-offline", "cpu", "float32")
    with pytest.raises(ArtifactError, match="was trained from Base \\+ LoRA adapter x \\(weights 07ad3f3e\\), not"):
        apply_rl_adapter(other, good)
