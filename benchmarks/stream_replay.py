"""The same generations, in the same chunkings, through the kit's stream parser and through vLLM's own hermes
streaming tool parser; every difference from the one-shot parse, with its cause (book §14.5.8, issue #39).

    python benchmarks/stream_replay.py [--random 5] [--generated 150] [--no-vllm]

What it does
- Cases: real generations with ``<tool_call>`` blocks from the saved BFCL runs (``benchmarks/results/bfcl_*.json``),
  named cases (a tag split across chunks, braces and quotes inside strings, empty arguments ``{}``, two calls back
  to back, a call after text, a call inside ``<think>``, a stream cut mid-call, and the shapes the kit's parser
  accepts: no ``arguments``, ``parameters``, ``arguments`` first, double-encoded arguments, an escaped name) and
  seeded random compositions of them.
- Chunkings per case: one character at a time, the Qwen2.5 tokenizer's own pieces (what a server streams), and
  ``--random`` seeded random splits.
- (a) the kit: ``toolkit.streamparse.stream_events`` then ``assemble``; (b) vLLM: ``benchmarks/stream_replay_vllm.py``
  run by ``.venv-vllm``'s interpreter as a subprocess speaking JSON lines (the venvs differ), which calls
  ``Hermes2ProToolParser.extract_tool_calls_streaming`` per chunk with the kit's offline Qwen2.5 tokenizer.
- Both are compared with the one-shot parse (``toolkit.parse.parse_tool_calls``): the free text (stripped) and the
  calls as (name, arguments object) — a call the one-shot parse rejects is ``("error", its type)``; vLLM's
  arguments text is read with ``json.loads`` (text that is not JSON is shown as such). Each difference gets the
  causes of :data:`CAUSES` whose tests fit the case (the table counts each case under the first), each stating
  the code in vLLM's parser behind it (read in its installed source); one no cause explains is ``unexplained``.
- The worker also runs the same parser's one-shot ``extract_tool_calls`` on the whole text: the streams where
  vLLM's streamed result differs from its own one-shot result are what streaming itself changes in vLLM.
- Prints a table (cause, cases, streams) and saves ``benchmarks/results/stream_replay.json``: date, machine,
  commit, vLLM version and parser file, counts, the causes, and every differing case with its text, which
  chunkings differ, and both results.

What it leaves out
- A live server: the replay calls the parser the way vLLM's chat server does (one call per detokenized delta),
  without a reasoning parser (the kit's vLLM server sets none) and without its end-of-stream argument flush (for
  this parser the flush adds nothing: it returns the arguments it already streamed).
- The other families' streaming parsers (vLLM's llama3_json, mistral, openai): the kit's side of them is
  ``toolkit.familystream``.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from toolkit import cliargs
from toolkit.eval.read import call_texts
from toolkit.parse import parse_tool_calls
from toolkit.paths import cache_dir, provenance, results_file
from toolkit.streamparse import assemble, stream_events
from toolkit.tokenizer import qwen_tokenizer

ROOT = Path(__file__).resolve().parents[1]

VLLM_PYTHON = Path(os.environ.get("VLLM_PYTHON", "/work/main/.venv-vllm/bin/python"))
WORKER = ROOT / "benchmarks" / "stream_replay_vllm.py"
OUT = ROOT / "benchmarks" / "results" / "stream_replay.json"


def _call(name, args, **dump):
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, **dump) + "\n</tool_call>"


NAMED = {
    "call after text": "Let me check the weather first. " + _call("get_weather", {"city": "Paris"}),
    "text after a call": _call("get_weather", {"city": "Paris"}) + "\nI will wait for the result.",
    "text between two calls": _call("f", {"x": 1}) + " and then " + _call("g", {"y": 2}),
    "two calls back to back": _call("get_weather", {"city": "Paris"}) + _call("get_weather", {"city": "Tokyo"}),
    "braces and quotes inside strings": _call("echo", {"s": 'a}{"]\\[', "t": "</tool", "u": "<tool_call>"}),
    "empty arguments": '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
    "empty arguments, spaced": '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
    "no arguments key": '<tool_call>{"name": "get_time"}</tool_call>',
    "parameters instead of arguments": '<tool_call>{"name": "f", "parameters": {"x": 1}}</tool_call>',
    "arguments before name": '<tool_call>{"arguments": {"x": 1}, "name": "f"}</tool_call>',
    "argument named name, first": '<tool_call>{"arguments": {"name": "Bob"}, "name": "greet"}</tool_call>',
    "double-encoded arguments": '<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>',
    "escaped name": _call("näme", {"x": 1}),  # json.dumps writes n\u00e4me
    "unicode arguments": _call("get_weather", {"city": "北京"}, ensure_ascii=False),
    "call inside think": '<think>I could call <tool_call>{"name": "f", "arguments": {}}</tool_call> here.</think>'
    "The answer is 4.",
    "call after think": "<think>need the weather</think>\n\n" + _call("get_weather", {"city": "Oslo"}),
    "stream cut mid-call": 'Checking. <tool_call>{"name": "get_weather", "arguments": {"city": "Par',
    "stream cut before the name closed": '<tool_call>{"name": "get_wea',
    "malformed json": '<tool_call>{"name": "f", "arguments": {"x": 1}</tool_call>',
    "arguments not an object": '<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>',
    "nested arguments": _call("plan", {"steps": [{"a": {"b": [1, {"c": "}"}]}}], "n": None}),
    "indented body": "<tool_call>\n"
    + json.dumps({"name": "f", "arguments": {"x": [1, 2]}}, indent=2)
    + "\n</tool_call>",
    "a lone < in text": "1 < 2 and 3 > 2, so " + _call("f", {}),
    "text only": "The answer is 42.",
}


def _real(limit: int = 60) -> dict[str, str]:
    """Real generations with a ``<tool_call>`` block from the saved BFCL runs."""
    found: set[str] = set()
    for name in ("bfcl_qwen2.5-coder-0.5b.json", "bfcl_qwen2.5-coder-0.5b+lora.json"):
        path = results_file(name, required=False)
        if path is not None:
            found |= call_texts(json.loads(path.read_text()))
    return {f"real {i + 1}": t for i, t in enumerate(sorted(found)[:limit])}


def _generated(n: int, seed: int = 0) -> dict[str, str]:
    """``n`` seeded compositions of 1-3 named cases (the cut ones only last)."""
    rng = random.Random(seed)
    whole = [k for k in NAMED if "cut" not in k]
    cut = [k for k in NAMED if "cut" in k]
    out = {}
    for i in range(n):
        parts = rng.sample(whole, rng.randint(1, 3)) + (rng.sample(cut, 1) if rng.random() < 0.2 else [])
        out[f"generated {i + 1}: " + " + ".join(parts)] = "".join(NAMED[p] for p in parts)
    return out


def chunkings(text: str, tokenizer, n_random: int, seed: int) -> dict[str, list[str]]:
    out = {"chars": list(text)}
    ids = tokenizer.encode(text, add_special_tokens=False)
    pieces, prev = [], ""
    for k in range(1, len(ids) + 1):  # the tokenizer's pieces as a server's detokenizer sends them
        now = tokenizer.decode(ids[:k], skip_special_tokens=False)
        if not now.endswith("\ufffd") and now.startswith(prev):
            pieces.append(now[len(prev) :])
            prev = now
    if prev == text:
        out["tokens"] = pieces
    rng = random.Random(seed)
    for r in range(n_random):
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 12))))
        out[f"random {r + 1}"] = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return {k: [c for c in v if c] for k, v in out.items()}


# ================================================================ normal forms
def kit_form(content: str, calls) -> dict:
    return {"content": content, "calls": [[c.name, c.arguments] if c.ok else ["error", c.error["type"]] for c in calls]}


def vllm_form(out: dict) -> dict:
    calls = []
    for c in out["calls"]:
        args = c.get("arguments")
        try:
            value = json.loads(args) if args is not None else "(no arguments sent)"
        except ValueError:
            value = f"(not JSON) {args}"
        calls.append([c.get("name"), value])
    form = {"content": out["content"].strip(), "calls": calls}
    if out.get("raised"):
        form["raised"] = out["raised"]
    return form


# ================================================================ causes
HERMES = "vllm/tool_parsers/hermes_tool_parser.py"
CAUSES = [
    (
        "call inside <think>",
        lambda t, one, got: "<think>" in t and "<tool_call>" in t[t.find("<think>") : t.find("</think>") + 1 or None],
        f"{HERMES}: the parser knows no <think>; _extract_tool_call_jsons finds every <tool_call> in current_text, so "
        "a call written while thinking is streamed as a call and the thought after its tag never reaches content "
        "(vLLM separates thinking only when the server runs a --reasoning-parser first; the kit's one-shot parse "
        "keeps a thought's call as text)",
    ),
    (
        "stream cut mid-call",
        lambda t, one, got: any(c[0] == "error" and c[1] == "unclosed_tag" for c in one["calls"]),
        f"{HERMES}: an open <tool_call> at the end of the stream keeps whatever name and partial arguments were "
        "streamed; nothing marks the call as cut (the kit's one-shot parse returns an unclosed_tag error)",
    ),
    (
        "malformed call",
        lambda t, one, got: any(c[0] == "error" for c in one["calls"]),
        f"{HERMES}: _compute_args_diff streams the raw text after '\"arguments\":' without checking it is a JSON "
        "object, and the name by regex; a block the one-shot parse rejects (bad JSON, arguments not an object) "
        "still reaches the client as a call",
    ),
    (
        "text after or between calls",
        lambda t, one, got: one["content"] != got["content"] and _text_after_first_call(t) != "",
        f"{HERMES}: _extract_content sends only text before the first <tool_call> (sendable_idx = "
        "current_text.index(tool_call_start_token)): text after or between calls is dropped",
    ),
    (
        "no arguments key",
        lambda t, one, got: any(c[1] == "(no arguments sent)" for c in got["calls"]) and '"parameters"' not in t,
        f"{HERMES}: _extract_tool_args returns None when the body has no '\"arguments\"' key, so no argument delta "
        "is ever sent: the client gets a call without arguments (vLLM issue #21301); the one-shot parse reads {}",
    ),
    (
        "parameters instead of arguments",
        lambda t, one, got: '"parameters"' in t,
        f"{HERMES}: _extract_tool_args looks for '\"arguments\"' only; the kit also accepts 'parameters'",
    ),
    (
        "double-encoded arguments",
        lambda t, one, got: any(isinstance(c[1], str) and not c[1].startswith("(") for c in got["calls"]),
        f"{HERMES}: arguments are streamed as raw text, so a JSON-encoded string stays a string; the kit decodes it",
    ),
    (
        "arguments before name",
        lambda t, one, got: any(
            '"arguments"' in b.split('"name"')[0] for b in t.split("<tool_call>")[1:] if '"name"' in b
        ),
        f"{HERMES}: _extract_tool_args takes everything after '\"arguments\":' to the end of the body, so a "
        "'\"name\"' key after the arguments is streamed into them (not JSON), and _extract_tool_name's regex "
        '\'"name"\\s*:\\s*"([^"]+)"\' takes the first "name" string anywhere, an argument\'s included',
    ),
    (
        "escaped name",
        lambda t, one, got: any(
            isinstance(a[0], str) and isinstance(b[0], str) and a[0] != b[0] and "\\" in b[0]
            for a, b in zip(one["calls"], got["calls"])
        ),
        f"{HERMES}: _extract_tool_name returns the regex's raw match, JSON escapes (\\u00e4) not decoded",
    ),
]


CHUNKING = (
    f"{HERMES}: _extract_tool_call_jsons marks a closed block complete without parsing it, and _extract_tool_args "
    "then strips a last '}' as the outer object's; _compute_args_diff only ever appends (nothing when the new "
    "arguments text is not longer than what was sent). So where the text was cut into chunks decides what the "
    "client holds: a body missing its outer '}' streamed one character at a time ends with valid arguments, "
    "the same body in bigger chunks with arguments that are not JSON"
)


def _text_after_first_call(text: str) -> str:
    """The free text from the first ``<tool_call>`` on, blocks taken out."""
    at = text.find("<tool_call>")
    return "" if at < 0 else re.sub(r"<tool_call>.*?(</tool_call>|$)", "", text[at:], flags=re.S).strip()


def causes_of(text: str, one: dict, got: dict) -> list[str]:
    """Every cause whose test fits (the first is the row's ``cause``), or ``["unexplained"]``."""
    return [name for name, test, _ in CAUSES if test(text, one, got)] or ["unexplained"]


# ================================================================ the run
def run_vllm(jobs: list[dict], tokenizer_dir: str) -> tuple[dict, dict]:
    """Replays ``jobs`` in vLLM's venv; (results by id, the worker's header)."""
    proc = subprocess.run(
        [str(VLLM_PYTHON), str(WORKER), tokenizer_dir],
        input="".join(json.dumps(j, ensure_ascii=False) + "\n" for j in jobs),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines or not lines[0].get("ready"):
        raise RuntimeError(f"vLLM worker failed (rc {proc.returncode}): {proc.stderr[-800:]}")
    return {r["id"]: r for r in lines[1:]}, lines[0]


def compare(cases: dict[str, str], tokenizer, n_random: int, vllm: bool, tokenizer_dir: str) -> dict:
    jobs, meta = [], []
    for i, (name, text) in enumerate(cases.items()):
        for kind, chunks in chunkings(text, tokenizer, n_random, seed=i).items():
            jobs.append({"id": len(jobs), "chunks": chunks})
            meta.append((name, kind))
    t0 = time.perf_counter()
    kit = [kit_form(*assemble(stream_events(j["chunks"]))) for j in jobs]
    kit_s = time.perf_counter() - t0
    header, got = {}, {}
    if vllm:
        t0 = time.perf_counter()
        got, header = run_vllm(jobs, tokenizer_dir)
    vllm_s = time.perf_counter() - t0 if vllm else None
    rows: dict[str, dict] = {}
    kit_diffs, own_diffs, own_cases = 0, 0, {}
    for j, (name, kind), k in zip(jobs, meta, kit):
        text = cases[name]
        one = kit_form(*parse_tool_calls(text))
        if k != one:
            kit_diffs += 1
            rows.setdefault(name, _row(text, one))["kit"].append(kind)
        if vllm:
            v = vllm_form(got[j["id"]])
            own = vllm_form(got[j["id"]].get("one_shot") or {"content": "", "calls": []})
            if v != own:  # streaming changed what vLLM's own parser says of the same text
                own_diffs += 1
                own_cases.setdefault(name, {"text": text, "vllm_one_shot": own, "chunkings": []})["chunkings"].append(
                    {"chunking": kind, "streamed": v}
                )
            if v != one:
                row = rows.setdefault(name, _row(text, one))
                row["vllm_chunkings"].append(kind)
                row["vllm"].setdefault(json.dumps(v, ensure_ascii=False, sort_keys=True), []).append(kind)
    for name, row in rows.items():
        results = [json.loads(k) for k in row.pop("vllm")]
        row["vllm_results"] = results
        row["causes"] = sorted({c for r in results for c in causes_of(row["text"], row["one_shot"], r)})
        row["cause"] = next((n for n, _, _ in CAUSES if n in row["causes"]), "unexplained") if results else None
        row["n_chunkings"] = sum(1 for n, _ in meta if n == name)
        row["depends_on_chunking"] = len(results) > 1 or 0 < len(row["vllm_chunkings"]) < row["n_chunkings"]
    return dict(
        streams=len(jobs),
        cases=len(cases),
        kit_differences=kit_diffs,
        vllm_differences=sum(len(r["vllm_chunkings"]) for r in rows.values()),
        vllm_stream_vs_own_one_shot=own_diffs,
        vllm_stream_vs_own_one_shot_cases=own_cases,
        kit_s=round(kit_s, 3),
        vllm_s=round(vllm_s, 3) if vllm_s is not None else None,
        worker=header,
        rows=rows,
    )


def _row(text, one):
    return {"text": text, "one_shot": one, "kit": [], "vllm_chunkings": [], "vllm": {}, "n_chunkings": 0}


def table(result: dict) -> list[dict]:
    """One line per cause: how many cases and streams differ, and the cause in words."""
    words = dict((n, w) for n, _, w in CAUSES)
    by: dict[str, dict] = {}
    for name, row in result["rows"].items():
        if row["cause"] is None:
            continue
        b = by.setdefault(row["cause"], {"cause": row["cause"], "cases": 0, "streams": 0, "examples": []})
        b["cases"] += 1
        b["streams"] += len(row["vllm_chunkings"])
        if len(b["examples"]) < 3:
            b["examples"].append(name)
    order = [n for n, _, _ in CAUSES] + ["unexplained"]
    return [dict(by[c], why=words.get(c, "no cause in CAUSES fits: read the row")) for c in order if c in by]


def main(argv=None) -> int:
    p = cliargs.Parser(description=__doc__.split("\n\n")[0])
    p.add_argument("--random", type=cliargs.count(0, 1_000), default=5, help="random chunkings per case (default 5)")
    p.add_argument("--generated", type=cliargs.count(0, 100_000), default=150, help="generated cases (default 150)")
    p.add_argument("--no-vllm", action="store_true", help="the kit's side only")
    p.add_argument("--out", type=cliargs.out_file, default=OUT)
    a = p.parse_args(argv)
    tokenizer = qwen_tokenizer("qwen2.5")
    tokenizer_dir = str(cache_dir() / "tokenizers" / "qwen2.5")
    vllm = not a.no_vllm and VLLM_PYTHON.exists()
    cases = {**NAMED, **_real(), **_generated(a.generated)}
    result = compare(cases, tokenizer, a.random, vllm, tokenizer_dir)
    rows = table(result)
    meta = dict(
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        machine=f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cpus)",
        **provenance(ROOT),
        vllm_python=str(VLLM_PYTHON) if vllm else f"absent ({VLLM_PYTHON}): vLLM side not run",
        random_chunkings_per_case=a.random,
        generated_cases=a.generated,
    )
    dep = sorted(n for n, r in result["rows"].items() if r.get("depends_on_chunking"))
    chunk = dict(cases=len(dep), examples=dep[:5], why=CHUNKING)
    out = dict(
        meta,
        **{k: v for k, v in result.items() if k != "rows"},
        table=rows,
        chunking_dependent=chunk,
        differences=result["rows"],
    )
    print(
        f"{result['cases']} cases, {result['streams']} streams (chunkings); kit vs one-shot: "
        f"{result['kit_differences']} differences; vLLM hermes vs one-shot: {result['vllm_differences']} "
        f"differing streams" + ("" if vllm else " (vLLM not run)")
    )
    own = result["vllm_stream_vs_own_one_shot"]
    print(
        f"vLLM streaming vs vLLM's own one-shot extract_tool_calls on the same text: {own} differing streams in "
        f"{len(result['vllm_stream_vs_own_one_shot_cases'])} cases"
    )
    print(f"{'cause':34} {'cases':>5} {'streams':>7}  example")
    for r in rows:
        print(f"{r['cause']:34} {r['cases']:5} {r['streams']:7}  {r['examples'][0]}")
    for r in rows:
        print(f"- {r['cause']}: {r['why']}")
    print(f"- {len(dep)} case(s) get different vLLM results in different chunkings: {CHUNKING}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
