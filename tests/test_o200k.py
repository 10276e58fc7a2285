"""gpt-oss's o200k vocabulary offline: the file rebuilt from quicktok-v1's data has the sha256 harmony checks, and the
binary-to-tiktoken conversion is exact on a small hand-made input."""

import hashlib
import struct

import pytest

from toolkit.o200k import FILE, O200K_SHA256, o200k_dir, tiktoken_text, use_offline_o200k


def test_o200k_rebuilt_with_harmonys_checksum(tmp_path, monkeypatch):
    pytest.importorskip("quicktok", reason="pinned in requirements-nodeps.txt; `make setup` installs it")
    monkeypatch.setenv("TOOLKIT_CACHE", str(tmp_path))
    monkeypatch.setenv("TIKTOKEN_ENCODINGS_BASE", "")  # recorded, so the one use_offline_o200k sets is undone
    path = o200k_dir() / FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == O200K_SHA256
    assert "sha256" in use_offline_o200k()
    assert o200k_dir() == path.parent  # second call: checked, not rebuilt


def test_tiktoken_text_format_and_truncation():
    raw = struct.pack("<I", 2) + struct.pack("<H", 1) + b"a" + struct.pack("<I", 0)
    raw += struct.pack("<H", 2) + b"\xff\x00" + struct.pack("<I", 1)
    assert tiktoken_text(raw) == b"YQ== 0\n/wA= 1\n"
    with pytest.raises(ValueError, match="bytes left"):
        tiktoken_text(raw + b"x")
