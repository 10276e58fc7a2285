"""The argument layer (toolkit/cliargs.py): each converter refuses what it names; every entry point — each
``python -m toolkit`` command and each ``benchmarks/*.py`` — answers a bad value of every option type with exit 2
and one line on stderr, no traceback, and no model load (``tests/fixtures/guarded_run.py`` makes a load exit 99;
and it makes importing torch/transformers/xgrammar fail, so every entry point checks its arguments before those
imports). Times are printed, not asserted (``benchmarks/cli_errors.py`` measures them). Every option with a
``type=`` or ``choices=`` in a command's or benchmark's source must appear in the table."""

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toolkit import cliargs

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests" / "fixtures" / "guarded_run.py"
SCHEMA = ROOT / "tests" / "fixtures" / "cli_schema.json"
# a schema file that is not JSON, one that is not an object, one the meta-schema refuses: refused before xgrammar
BAD_SCHEMAS = [str(ROOT / "tests" / "fixtures" / f"cli_schema_{k}.json") for k in ("not_json", "a_list", "invalid")]

# bad values per option type
COUNT = ["-5", "0", "1.5", "many"]
NON_NEGATIVE = ["-1", "x"]
REAL = ["nan", "inf", "-1", "x"]
PORT = ["-1", "70000", "http"]
OUT_FILE = ["/nonexistent/dir/out.json", "/tmp", "/etc/passwd/x", "/dev/full"]  # /dev/full: writable, fails on write
OUT_DIR = ["/etc/passwd", "/nonexistent/dir/x.json"]
IN_FILE = ["/nonexistent/in.json", "/tmp"]
MODEL = ["/nonexistent/model", "nonexistent-org/nonexistent-model", "not a model!", "/etc/passwd"]
URL = ["notaurl", "ftp://127.0.0.1/x", "http://127.0.0.1:70000/v1", "http://"]


def _cases(entry, base, table):
    for option, bad in table.items():
        for value in bad:
            yield pytest.param(entry, [*base, option, value], id=f"{entry}:{' '.join(base)}:{option}={value}")


def _tk(cmd, base, table):
    return list(_cases("toolkit", [cmd, *base], table))


def _bench(name, base, table):
    return list(_cases(f"benchmarks/{name}", base, table))


CASES = [
    *_tk("render", [], {"--limit": NON_NEGATIVE, "--example": ["nosuch"], "--template": ["x"], "--stage": ["x"]}),
    *_tk(
        "constrain",
        ["--schema", str(SCHEMA)],
        {
            "--samples": COUNT,
            "--temperature": REAL,
            "--max-new-tokens": COUNT,
            "--seed": NON_NEGATIVE,
            "--model": MODEL,
            "--schema": IN_FILE + BAD_SCHEMAS,
        },
    ),
    *_tk(
        "loop",
        ["what is 2+2?"],
        {
            "--max-turns": [*COUNT, "21"],
            "--max-new-tokens": COUNT,
            "--timeout": COUNT,
            "--model": MODEL,
            "--backend": URL,
            "--tools": ["nosuch", ","],
            "--tool-choice": ["nosuch"],
            "--backend-mode": ["x"],
            "--constrain": ["x"],
            "--example": ["nosuch"],
        },
    ),
    *_tk(
        "mcp",
        ["serve", "--http"],
        {"--port": PORT, "--session-idle": [*REAL, "0"], "--pid-file": OUT_FILE, "--notes-dir": OUT_DIR},
    ),
    *_tk("lint-tools", [], {"--mcp": URL}),
    *_cases("toolkit", ["lint-tools"], {"--json": []}),
    *[pytest.param("toolkit", ["lint-tools", v], id=f"lint-tools:file={v}") for v in IN_FILE],
    *_tk("claims", [], {"--write": OUT_FILE}),
    *_tk("figures", [], {"--out": OUT_DIR, "--formats": ["gif"], "--lang": ["fr"], "--timeout": REAL}),
    *_tk(
        "train",
        [],
        {
            "--steps": COUNT,
            "--lr": [*REAL, "0"],
            "--seed": NON_NEGATIVE,
            "--data-seed": NON_NEGATIVE,
            "--mix": ["v9", ""],
            "--groups": COUNT,
            "--per-group": ["65", *COUNT],
            "--limit-steps": COUNT,
            "--model": ["other"],
            "--template": ["x"],
            "--out": OUT_DIR,
            "--results": OUT_FILE,
        },
    ),
    *_tk(
        "rl",
        [],
        {
            "--model": ["qwen2.5-coder-0.5b+lora-int8", "nosuch"],
            "--family": ["x"],
            "--steps": COUNT,
            "--group": ["1", *COUNT],
            "--tasks": COUNT,
            "--lr": [*REAL, "0", "2"],
            "--max-new": COUNT,
            "--temperature": [*REAL, "0"],
            "--seed": NON_NEGATIVE,
            "--out": OUT_DIR,
        },
    ),
    *_tk("models", [], {"--bogus": ["1"]}),
    pytest.param("toolkit", ["no-such-command"], id="toolkit:unknown command"),
    pytest.param("toolkit", ["x" * 5000], id="toolkit:huge unknown command"),
    *_bench(
        "bfcl.py",
        ["accuracy"],
        {
            "--limit": COUNT,
            "--batch": COUNT,
            "--model": MODEL,
            "--cache": OUT_DIR,
            "--out": OUT_DIR,
            "--seed": ["-1"],
            "--modes": ["nosuch"],
            "--budget": ["nosuch"],
            "--categories": ["nosuch"],
            "--dtype": ["float16", ""],
        },
    ),
    *_bench(
        "rl.py",
        ["train"],
        {
            "--start": ["x"],
            "--family": ["x"],
            "--steps": COUNT,
            "--group": ["1"],
            "--lr": REAL,
            "--beta": ["-1", "11", "nan", "x"],
            "--resample": ["-1", "17", "x"],
            "--resample-within": ["x", "all"],
            "--max-new": COUNT,
            "--tasks": COUNT,
            "--engine": ["x"],
        },
    ),
    *_bench("rl.py", ["train", "--resample-within", "family"], {"--resample": ["0"]}),  # nothing to redraw
    *_bench(
        "rl_engines.py",
        [],
        {
            "--family": ["x"],
            "--n": COUNT,
            "--group": ["1"],
            "--steps": COUNT,
            "--max-new": COUNT,
            "--move": REAL,
            "--check-move": REAL,
            "--threads": COUNT,
        },
    ),
    *_bench(
        "rl_trl.py",
        [],
        {"--steps": COUNT, "--tasks": COUNT, "--group": ["1", "17"], "--max-new": ["7", *COUNT], "--threads": COUNT},
    ),
    *_bench(
        "rl.py",
        ["eval"],
        {"--n": COUNT, "--threads": COUNT, "--seed": NON_NEGATIVE, "--temperature": REAL, "--samples": COUNT},
    ),
    *_bench("bfcl.py", ["passk"], {"--temperature": REAL, "--samples": ["0"], "--tasks": COUNT, "--mode": ["x"]}),
    *_bench(
        "bfcl.py",
        ["chains"],
        {"--landmarks": COUNT, "--first": NON_NEGATIVE, "--ks": COUNT, "--pair-ks": ["3", "x"], "--levers": ["x"]},
    ),
    *_bench("bfcl.py", ["descriptions"], {"--limit": COUNT, "--mode": ["x"], "--variants": ["nosuch"]}),
    *_bench("bfcl.py", ["levers"], {"--limit": COUNT, "--batch": ["0"], "--levers": ["x"], "--section": ["x"]}),
    *_bench("bfcl.py", ["gate"], {"--limit": COUNT}),
    *_bench("bfcl.py", ["report"], {"--out": OUT_DIR}),
    *_bench("cli_errors.py", [], {"--repeats": COUNT, "--out": OUT_FILE}),
    *_bench(
        "classroom.py",
        [],
        {
            "--sessions": ["0,4", "x", ","],
            "--max-new-tokens": COUNT,
            "--timeout": REAL,
            "--deadline": ["-1"],
            "--url": URL,
            "--check": IN_FILE,
            "--model": MODEL,
            "--turns": ["3", "0"],
            "--engine": ["sglang", ""],
        },
    ),
    *_bench(
        "constrained_overhead.py",
        [],
        {
            "--repeats": COUNT,
            "--max-new-tokens": ["0"],
            "--threads": ["0"],
            "--json-out": OUT_FILE,
            "--models": [*MODEL, ","],
            "--devices": ["tpu", ","],
        },
    ),
    *_bench(
        "engine.py",
        [],
        {
            "--prompt": COUNT,
            "--new": ["-1"],
            "--agent-budget-s": REAL,
            "--threads": ["0"],
            "--out": OUT_FILE,
            "--hf-new": COUNT,
            "--T": ["0"],
            "--delta": ["0"],
            "--R": ["0"],
            "--decode-per-round": ["0"],
            "--device": ["tpu"],
            "--model": MODEL,
            "--skip": ["nosuch"],
        },
    ),
    *_bench("engine_probe.py", [], {"--bogus": ["1"]}),
    *_bench("figures_cli.py", [], {"--only": ["nosuch", ","], "--timeout": REAL}),
    *_bench("sft_speed.py", [], {"--per-group": ["1", *COUNT], "--reps": COUNT, "--threads": COUNT, "--out": OUT_FILE}),
    *_bench("sft_mask.py", [], {"--out": OUT_FILE}),
    *_bench("figure_render.py", [], {"--figures": COUNT, "--wait": REAL, "--only": ["nosuch", ","]}),
    *_bench("latency.py", [], {"--repeats": COUNT, "--json-out": OUT_FILE}),
    *_bench(
        "loop_questions.py",
        ["--pass", "before"],
        {
            "--cap-s": REAL,
            "--threads": COUNT,
            "--out": OUT_FILE,
            "--only": ["nosuch"],
            "--set": ["stale", ""],
            "--dtype": ["int8"],
        },
    ),
    pytest.param(
        "benchmarks/loop_questions.py", ["--pass", "lora-int8", "--dtype", "float32"], id="loop_questions:int8 dtype"
    ),
    *_bench("mcp_server.py", [], {"--calls": COUNT, "--starts": ["-1"]}),
    *_bench(
        "multiplication.py",
        [],
        {"--n": COUNT, "--digits": ["-1"], "--seed": ["-1"], "--out": OUT_FILE, "--threads": ["0"]},
    ),
    *_bench("notebooks.py", [], {"--mode": ["nosuch"], "--only": ["99", "1", ","]}),
    *_bench(
        "small_model.py", [], {"--tokens": ["0", "x", "5000"], "--notebook-runs": ["-1", "x", "11"], "--out": OUT_FILE}
    ),
    *_bench("int8_decisions.py", [], {"--category": ["nosuch"], "--models": ["x", ",", "float32,x"], "--limit": COUNT}),
    *_bench("stream_replay.py", [], {"--random": ["-1", "x", "5000"], "--generated": ["-1", "1e9"], "--out": OUT_FILE}),
    *_bench("stream_replay_vllm.py", [], {"--bogus": ["1"]}),  # the vLLM-venv worker: one folder argument only
    *_bench(
        "patterns.py",
        [],
        {
            "--n": COUNT,
            "--k": ["-1"],
            "--max-new-tokens": ["0"],
            "--model": MODEL,
            "--out": OUT_FILE,
            "--seed": ["-1"],
            "--what": ["x"],
            "--depth": ["0"],
            "--threads": ["0"],
            "--merge": IN_FILE,
            "--patterns": ["nosuch", ","],
            "--modes": ["nosuch"],
        },
    ),
    *_bench(
        "prefix_reuse.py",
        [],
        {
            "--T": COUNT,
            "--R": ["-1"],
            "--model": MODEL,
            "--json-out": OUT_FILE,
            "--delta": ["0"],
            "--every": ["0"],
            "--threads": ["0"],
            "--backend": ["x"],
        },
    ),
    *_bench(
        "retokenization.py",
        [],
        {"--model": MODEL, "--max-new-tokens": ["0"], "--examples": ["nosuch", ","], "--templates": ["qwen4"]},
    ),
    *_bench(
        "serving.py",
        [],
        {"--url": URL, "--max-new-tokens": ["0"], "--model": MODEL, "--out": OUT_FILE, "--engine": ["vllm2", ""]},
    ),
]


@pytest.mark.parametrize("entry,argv", CASES)
def test_every_entry_point_refuses_a_bad_value_in_one_line(entry, argv, tmp_path):
    target = entry if entry == "toolkit" else str(ROOT / entry)
    cmd = [sys.executable, str(RUNNER), "--block-heavy", target, *argv]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "hub"), TOOLKIT_BACKEND="")
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env, check=False)
    took = time.perf_counter() - t0
    print(f"{took:.2f} s  {entry} {' '.join(argv)}  ->  {r.stderr.strip()[:160]}")
    assert "MODEL LOAD" not in r.stderr, "a model loaded before the bad value was refused"
    assert "Traceback" not in r.stderr + r.stdout, r.stderr[-2000:]
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and 10 < len(lines[0]) <= 500, lines


def test_every_benchmark_script_is_in_the_table():
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    covered = {e.split("/", 1)[1] for e, *_ in (c.values for c in CASES) if e.startswith("benchmarks/")}
    assert scripts - covered == set(), "add the new benchmark's options to CASES"


FLAGS = ("store_true", "store_false", "count", "version")
# options that take any text on purpose, each checked where it is used (or not a name at all)
FREE_TEXT = {
    "loop": {"--answer-prefix"},  # any text starts the answer
    "constrain": {"--prompt"},  # the user message
    "lint-tools": {"--mcp-stdio"},  # a command line (shlex-checked, then started)
    "bfcl.py": {"--cached-only"},  # a flag (action="store_true" passed as **cached, which this AST reader cannot see)
}


def _options(path: Path, checked: bool) -> set[str]:
    """The options a source file declares with a ``type=`` converter or ``choices=`` (``checked``), or with neither
    and not a flag (free text: a bad name there reaches the run unless the command checks it)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
            kw = {k.arg: k.value for k in node.keywords}
            flag = isinstance(kw.get("action"), ast.Constant) and kw["action"].value in FLAGS
            if names and not flag and checked == ("type" in kw or "choices" in kw):
                found.add(names[0])
    return found


def _checked_options(path: Path) -> set[str]:
    return _options(path, checked=True)


def test_every_checked_option_of_every_entry_point_is_in_the_table():
    from toolkit.__main__ import COMMANDS

    tried: dict[str, set[str]] = {}
    for entry, argv in (c.values for c in CASES):
        key = argv[0] if entry == "toolkit" else entry.split("/", 1)[1]
        tried.setdefault(key, set()).update(a for a in argv if a.startswith("--"))
    sources = {name: ROOT / (mod.replace(".", "/") + ".py") for name, (mod, _) in COMMANDS.items()}
    sources |= {p.name: p for p in (ROOT / "benchmarks").glob("*.py")}
    assert set(COMMANDS) - set(tried) == set(), "every python -m toolkit command needs rows in CASES"
    missing = {k: sorted(_checked_options(src) - tried.get(k, set())) for k, src in sources.items()}
    assert {k: v for k, v in missing.items() if v} == {}, "add a bad value for these options to CASES"
    free = {
        k: sorted(_options(src, False) - tried.get(k, set()) - FREE_TEXT.get(k, set())) for k, src in sources.items()
    }
    assert {k: v for k, v in free.items() if v} == {}, "free-text options: check them at parse time, or say why not"


# ---------------------------------------------------------------- the converters themselves
def _refuses(conv, text):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        conv(text)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300
    return str(e.value)


def test_counts_numbers_ports():
    c = cliargs.count(1, 20)
    assert c("3") == 3 and c("20") == 20
    for bad in ("0", "21", "-5", "1.5", "x", ""):
        _refuses(c, bad)
    assert cliargs.count(0)("0") == 0
    n = cliargs.number(0.0, 10.0)
    assert n("0") == 0.0 and n("2.5") == 2.5
    for bad in ("nan", "inf", "-inf", "-1", "11", "x"):
        _refuses(n, bad)
    _refuses(cliargs.number(0.0, lo_open=True), "0")
    p = cliargs.port()
    assert p("0") == 0 and p("65535") == 65535
    for bad in ("-1", "65536", "70000", "x"):
        _refuses(p, bad)
    _refuses(cliargs.port(allow_zero=False), "0")
    assert cliargs.counts("1,4,16") == [1, 4, 16]
    _refuses(cliargs.counts, "1,0")


def test_paths(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert cliargs.existing_file(str(f)) == f and cliargs.existing_dir(str(tmp_path)) == tmp_path
    _refuses(cliargs.existing_file, str(tmp_path))
    _refuses(cliargs.existing_file, str(tmp_path / "missing"))
    _refuses(cliargs.existing_dir, str(f))
    assert cliargs.out_file(str(tmp_path / "new.json")) == tmp_path / "new.json"
    assert "folder" in _refuses(cliargs.out_file, str(tmp_path))
    assert "no such folder" in _refuses(cliargs.out_file, str(tmp_path / "a" / "b.json"))
    _refuses(cliargs.out_file, str(f / "x"))
    assert "not a file" in _refuses(cliargs.out_file, "/dev/full") and cliargs.out_file("/dev/null")
    assert cliargs.out_dir(str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"  # made later by the command
    _refuses(cliargs.out_dir, str(f))
    _refuses(cliargs.out_dir, str(f / "sub"))
    _refuses(cliargs.out_dir, "/nonexistent-top/dir")


def test_models_and_urls(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    for ok in ("auto", "stand-in", "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b+lora"):  # every short name load() takes
        assert cliargs.model(ok) == ok
    assert "fits only" in _refuses(cliargs.model, "stand-in+lora")
    (tmp_path / "m").mkdir()
    assert "config.json" in _refuses(cliargs.model, str(tmp_path / "m"))
    (tmp_path / "m" / "config.json").write_text(json.dumps({}))
    assert cliargs.model(str(tmp_path / "m")) == str(tmp_path / "m")
    assert "local cache" in _refuses(cliargs.model, "org/model")
    (tmp_path / "hub" / "models--org--model").mkdir(parents=True)
    assert cliargs.model("org/model") == "org/model"
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert cliargs.model("other/model") == "other/model"  # online: the load will say whether the hub has it
    for bad in ("/nonexistent/model", "nonsense name", str(tmp_path / "m" / "config.json")):
        _refuses(cliargs.model, bad)
    assert cliargs.url("http://127.0.0.1:8000/mcp/") == "http://127.0.0.1:8000/mcp"
    for bad in ("notaurl", "ftp://x/y", "http://127.0.0.1:70000/", "http://h/x?q=1", "http://"):
        _refuses(cliargs.url, bad)


def test_parser_errors_are_one_line(capsys):
    p = cliargs.Parser(prog="prog")
    p.add_argument("--n", type=cliargs.count(1), required=True)
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--n", "-5"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and err.startswith("prog: error: argument --n")


def test_a_notebook_setting_from_the_environment_is_checked_and_never_raises(monkeypatch, capsys):
    conv = cliargs.count(1, 50)
    monkeypatch.delenv("TOOLKIT_X_STEPS", raising=False)
    assert cliargs.from_env("TOOLKIT_X_STEPS", 3, conv) == 3
    monkeypatch.setenv("TOOLKIT_X_STEPS", " 7 ")
    assert cliargs.from_env("TOOLKIT_X_STEPS", 3, conv) == 7
    for bad in ("abc", "0", "-2", "1.5", "999", "9" * 5000):
        monkeypatch.setenv("TOOLKIT_X_STEPS", bad)
        assert cliargs.from_env("TOOLKIT_X_STEPS", 3, conv) == 3
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and "TOOLKIT_X_STEPS=" in out and "using 3" in out and len(out) < 300
