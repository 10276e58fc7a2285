"""A measured number in a notebook's text must come from its code.

Notebooks are committed without outputs, so their markdown must not carry numbers the kit measured (timings,
token counts, rates, sizes): those belong in code cells that compute or read them. This test reads every
notebook's py:percent source and flags a measured-looking number in a markdown cell (a number with a unit, a
decimal, or four or more digits) unless
- the paragraph cites the chapters (a "§" section): a book fact quoted as text, with its section;
- the same number is written in the notebook's code (an input the code uses, e.g. the question's 250 × 15%);
- it is one of the tokenizer / model facts below, each checked here against the kit's own constants;
- it is a date, a version or an address (2025-11-25, 2.0, 127.0.0.1).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
UNIT = r"(?:µs|us|ms|s\b|GB/s|TB/s|GB|MB|GiB|MiB|KB|tokens/s|tok/s|×|x\b|%|GFLOPs?|TFLOPS|PFLOPs|M\b|k\b)"
NUM = re.compile(r"(?<![\w§.\-/#:])(\d[\d,]*(?:\.\d+)?)(\s?" + UNIT + r")?")
# model sizes in names, dates, versions and addresses, code spans
SKIP = re.compile(r"\d+(?:\.\d+)?B\b|\d{4}-\d{2}-\d{2}|\d+\.\d+\.\d+(?:\.\d+)?|`[^`]*`")


def _facts() -> dict[str, object]:
    """Numbers a notebook may state as facts, each recomputed from the kit."""
    from toolkit.qwen import VOCAB_WIDTH
    from toolkit.tokenizer import tokenizer_for

    tok = tokenizer_for("qwen3")
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<tool_call>", "</tool_call>", "<|im_end|>")}
    return {
        "151936": VOCAB_WIDTH,
        "151669": len(tok),
        "151657": ids["<tool_call>"],
        "151658": ids["</tool_call>"],
        "151645": ids["<|im_end|>"],
    }


def cells(path: Path) -> list[tuple[str, str]]:
    src = path.read_text(encoding="utf-8")
    parts = re.split(r"^# %%(.*)$", src, flags=re.M)
    out = []
    for hdr, body in zip(parts[1::2], parts[2::2]):
        if "[markdown]" in hdr:
            body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.splitlines())
            out.append(("markdown", body))
        else:
            out.append(("code", body))
    return out


def flagged(path: Path, facts: dict) -> list[str]:
    cs = cells(path)
    code = "\n".join(b for k, b in cs if k == "code")
    code_numbers = {n.replace(",", "").replace("_", "") for n in re.findall(r"\d[\d,_]*(?:\.\d+)?", code)}
    out = []
    for kind, body in cs:
        if kind != "markdown":
            continue
        for para in re.split(r"\n\s*\n", body):
            if "§" in para:
                continue
            text = SKIP.sub(" ", para)
            for m in NUM.finditer(text):
                n, unit = m.group(1).rstrip(","), (m.group(2) or "").strip()
                bare = n.replace(",", "")
                if not (unit or "." in n or len(bare) >= 4):
                    continue
                if bare in code_numbers or bare in facts:
                    continue
                out.append(f"{path.name}: {n}{unit!s} in “…{text[max(0, m.start() - 40) : m.end() + 20]}…”")
    return out


def test_facts_are_the_kits():
    facts = _facts()
    assert all(str(v) == k for k, v in facts.items()), facts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_measured_number_is_typed_into_markdown(path):
    bad = flagged(path, _facts())
    assert not bad, "measured numbers typed into markdown (compute them in code):\n" + "\n".join(bad)


def test_the_check_catches_a_typed_measurement(tmp_path):
    nb = tmp_path / "99_x.py"
    nb.write_text(
        "# %% [markdown]\n# The engine ran at 662 tokens/s and used 2.6 GB.\n\n# %%\nx = 1\n", encoding="utf-8"
    )
    bad = flagged(nb, _facts())
    assert len(bad) == 2 and "662" in bad[0] and "2.6" in bad[1]
    nb.write_text(
        "# %% [markdown]\n# The book says 20.4× (§14.5.3); the question is 250 × 15%.\n\n# %%\nq = '250 * 15%'\n",
        encoding="utf-8",
    )
    assert flagged(nb, _facts()) == []
