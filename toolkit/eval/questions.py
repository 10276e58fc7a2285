"""The host loop's free-form questions as data, and their one strict judge.

What it does
- ``questions(set=None)``: the question records of ``toolkit/data/loop_questions.json`` (sets "main", "fresh",
  "heldout", written before the RL adapter of issue 38 ran, and "heldout2", written after "heldout" had been used to
  choose between RL runs),
  each a :class:`Question` (id, set, kind, question, note, the tool results it needs, the answer it needs).
- ``judge_saved(row)``: a saved row judged again. ``summary(rows)``: a saved run counted (met, answers that refuse with no call, junk calls); ``refuses(answer)``.
- ``judge(question, answer, steps) -> Verdict``: met or not, with the reason. ``steps`` are the calls the loop ran
  (dicts or objects with ``name``, ``arguments``, ``status``, ``result``: ``steps_of(trace)`` reads them from a
  ``toolkit.loop.steps.Trace``; ``steps_from_saved(calls)`` re-runs the demo tools on a saved row's calls).
- Strict: the answer must state the right value or conclusion, not contain it. Numbers are read as whole numbers
  (``1,250`` is 1250; ``1000`` never contains 100; ``137.5`` is not 37.5), and the value judged is the answer's
  stated result: its last number that is neither one of the question's own numbers nor a tool's value written as
  an observation with its unit (a looked-up "21°C" is an observation, the figure after it the result). A
  comparison is judged by the city the answer names beside its comparative ("X is colder", "the colder one is X",
  "X比Y热"), so "Sydney is colder" does not meet a Berlin-colder question. Words count from the start of a word, and not in an answer that also says one
  of the record's negations ("no need", "不需要"). A tool call written as text (no tags, so nothing ran) is not an
  answer, whatever result it claims (``toolkit.eval.read.written_call``).

What it leaves out
- Running the loop (``benchmarks/loop_questions.py`` does) and the lenient checks the saved runs were first scored
  with (their ``met`` stays in the saved files; ``benchmarks/results/loop_questions_strict.md`` shows both).
- Paraphrase: a right conclusion in words the record does not list is not met (a judge model is not used).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from toolkit.eval.read import written_call
from toolkit.loop.steps import Executed
from toolkit.paths import data_file
from toolkit.tools import TOOLS

DATA = data_file("loop_questions.json")
SETS = ("main", "fresh", "heldout", "heldout2")


@dataclass(frozen=True)
class Question:
    id: str
    set: str
    kind: str
    question: str
    note: str  # the worked answer, for a reader
    answer: dict  # what the answer must state (see the data file's "fields")
    tools: tuple = ()  # tool results that must have come back ok
    no_tools: bool = False


@dataclass(frozen=True)
class Verdict:
    met: bool
    reason: str
    parts: dict = field(default_factory=dict)  # each requirement: met or not

    def __bool__(self) -> bool:
        return self.met


def questions(set: str | None = None, path=DATA) -> list[Question]:
    """The question records, in file order; ``set``: one of :data:`SETS` (default: all)."""
    if set is not None and set not in SETS:
        raise ValueError(f"unknown question set {set!r}; known: {', '.join(SETS)}")
    doc = json.loads(path.read_text(encoding="utf-8"))
    rows = [r for r in doc["questions"] if set is None or r["set"] == set]
    return [Question(**{**r, "tools": tuple(r.get("tools", ()))}) for r in rows]


def by_id(qid: str) -> Question:
    return next(q for q in questions() if q.id == qid)


# ---------------------------------------------------------------- reading an answer
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?![A-Za-z0-9_])")


def numbers(text: str) -> list[float]:
    """The whole numbers written in ``text``, in order: thousands separators read, a number inside a word or a
    larger number never split out ("Qwen2" has none; "1000" is 1000, not 100)."""
    return [v for v, _unit in _numbers_with_units(text)]


_UNIT = re.compile(r"\s?(?:[°%℃℉度]|[A-Za-z])")


def _numbers_with_units(text: str) -> list[tuple[float, bool]]:
    """Each number of ``text`` and whether a unit follows it (°, %, 度, or a unit's letters: "24°C", "55%", "3 km")."""
    out = []
    for m in _NUMBER.finditer(text or ""):
        out.append((float(m.group(0).replace(",", "")), _UNIT.match(text, m.end()) is not None))
    return out


def _leaves(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def _field(step, name: str):
    return step.get(name) if isinstance(step, dict) else getattr(step, name, None)


def _ok(steps) -> list:
    return [s for s in steps if _field(s, "status") == "ok"]


def stated_result(q: Question, answer: str, steps) -> float | None:
    """The answer's stated result: its last number that is neither one of the question's numbers nor a value a tool
    returned written as an observation (with its unit: "21°C", "55% humidity"); the expected value always counts.
    A tool's number written bare after the observations ("so they add up to 52") is a result like any other."""
    lo, hi = _range(q)
    asked = set(numbers(q.question))
    seen = {x for s in _ok(steps) for x in _leaves(_field(s, "result"))}
    own = [
        n
        for n, unit in _numbers_with_units(answer)
        if (lo is not None and lo <= n <= hi) or not (n in asked or (n in seen and unit))
    ]
    return own[-1] if own else None


def _range(q: Question):
    parts = q.answer.get("any", []) + q.answer.get("all", [])
    spec = q.answer.get("number") or next((a["number"] for a in parts if "number" in a), None)
    return (spec[0], spec[1]) if spec else (None, None)


def _word(word: str) -> re.Pattern:
    """``word`` at the start of a word, any case ("rain" finds "raining", not "brain"; "thunder" finds
    "thunderstorms"); a CJK word as text (CJK has no spaces to bound it)."""
    if re.search(r"[^\x00-\x7f]", word):
        return re.compile(re.escape(word))
    return re.compile(rf"(?<![A-Za-z]){re.escape(word)}", re.I)


def _has_word(text: str, word: str) -> bool:
    return _word(word).search(text) is not None


def _clauses(text: str) -> list[str]:
    return [c for c in re.split(r"[.;:!?。；：！？，,]|\bbut\b|\bwhile\b|\bso\b|所以|但", text or "") if c.strip()]


def named(clause: str, at: int, cities: list[str]) -> str | None:
    """The city a comparative at ``at`` speaks of: the nearest before it ("X is colder"; "X比Y热": the one before
    比), else the nearest after it ("the colder one is X")."""
    low = clause.lower()
    before = [(low.rfind(c.lower(), 0, at), c) for c in cities if low.rfind(c.lower(), 0, at) >= 0]
    if before:
        pos, city = max(before)
        bi = low.rfind("比", 0, pos)
        left = [(low.rfind(c.lower(), 0, bi), c) for c in cities if bi >= 0 and low.rfind(c.lower(), 0, bi) >= 0]
        return max(left)[1] if left else city  # "A比B更热": the comparative's subject is A, before 比
    after = [(low.find(c.lower(), at), c) for c in cities if low.find(c.lower(), at) >= 0]
    return min(after)[1] if after else None


def compared(spec: dict, answer: str) -> tuple[bool, str]:
    """Whether the answer names ``spec['more']`` as the one the question asks for, and never the other way."""
    cities, claims = [spec["more"], spec["than"]], []
    for clause in _clauses(answer):
        for words, side in ((spec["more_words"], "more"), (spec["less_words"], "less")):
            for w in words:
                for m in _word(w).finditer(clause):
                    city = named(clause, m.start(), cities)
                    if city is not None:
                        right = city == (spec["more"] if side == "more" else spec["than"])
                        claims.append((f"{city} {m.group(0)}", right))
    ok = bool(claims) and all(r for _, r in claims)
    return ok, f"comparisons named: {[c for c, _ in claims] or 'none'} (right: {spec['more']})"


def _prose(answer: str, kind: str = "any") -> bool:
    text = (answer or "").strip()
    plain = bool(text) and "{" not in text and "<tool_call>" not in text
    return plain and (kind != "zh" or re.search(r"[\u4e00-\u9fff]", text) is not None)


def _answer_part(q: Question, spec: dict, answer: str, steps) -> tuple[bool, str]:
    if "any" in spec or "all" in spec:
        got = [_answer_part(q, s, answer, steps) for s in spec.get("any") or spec["all"]]
        if "all" in spec:
            return all(ok for ok, _ in got), " and ".join(why for _, why in got)
        return any(ok for ok, _ in got), " or ".join(why for _, why in got)
    if "number" in spec:
        lo, hi = spec["number"]
        got = stated_result(q, answer, steps)
        want = f"{lo:g}" if lo == hi else f"{lo:g}..{hi:g}"
        return got is not None and lo <= got <= hi, f"stated result {got if got is None else f'{got:g}'} (want {want})"
    if "words" in spec:
        said = [w for w in spec["words"] if _has_word(answer or "", w)]
        negated = [w for w in spec.get("unless", []) if _has_word(answer or "", w)]
        return bool(said) and not negated, f"says {said or 'none of ' + str(spec['words'])}" + (
            f" but also {negated}" if negated else ""
        )
    if "prose" in spec:
        return _prose(answer, spec["prose"]), f"{'Chinese ' if spec['prose'] == 'zh' else ''}prose without JSON"
    if "compare" in spec:
        return compared(spec["compare"], answer or "")
    raise ValueError(f"{q.id}: unknown answer requirement {sorted(spec)}")


def _tool_part(need: dict, steps) -> bool:
    for s in _ok(steps):
        result = _field(s, "result") or {}
        if _field(s, "name") != need["name"] or not isinstance(result, dict):
            continue
        if "city" in need and result.get("city") == need["city"]:
            return True
        lo, hi = need.get("result", (None, None))
        if lo is not None and isinstance(result.get("result"), (int, float)) and lo <= result["result"] <= hi:
            return True
    return False


def judge(question: Question, answer: str | None, steps=()) -> Verdict:
    """Met only when every requirement of the record holds: the tool results it needs came back ok (or no tool
    ran, for a question that needs none, and the answer is prose), the answer is not a tool call written as text
    (no host ran it: a result inside it is the model's guess), and it states the right value or conclusion."""
    steps, parts = list(steps), {}
    for need in question.tools:
        parts[f"{need['name']}({need.get('city', '')})".replace("()", "") + " ok"] = _tool_part(need, steps)
    if question.no_tools:
        parts[f"no tool ran ({len(steps)} calls)"] = not steps
        parts["prose without JSON"] = _prose(answer or "")
    else:  # a call written out with a made-up result is not an answer, even where the number in it is right
        parts["not a call written as text"] = not written_call(answer or "")
    ok, why = _answer_part(question, question.answer, answer or "", steps)
    parts[why] = ok
    return Verdict(all(parts.values()), "; ".join(f"{k}: {v}" for k, v in parts.items()), parts)


def judge_saved(row: dict, question: Question | None = None) -> Verdict:
    """A saved row (``benchmarks/loop_questions.py``: id, answer, calls) judged again, its calls replayed on the demo
    tools (:func:`steps_from_saved`); ``question``: its record, where the caller has it."""
    return judge(question or by_id(row["id"]), row["answer"], steps_from_saved(row["calls"]))


# ---------------------------------------------------------------- steps from a run
def steps_of(trace) -> list:
    """The tool results of a ``toolkit.loop.steps.Trace`` (each has name, arguments, status, result)."""
    return [r for s in trace.of(Executed) for r in s.results]


_SAVED_CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*)\)->(?P<status>[a-z_]+)$", re.S)


def steps_from_saved(calls: list[str], tools: dict = TOOLS) -> list[dict]:
    """A saved row's calls (``name(json arguments)->status``) as steps; each ok call's result is recomputed with
    ``tools`` (the kit's demo tools are deterministic: the same arguments give the same result; a tool with a side
    effect, one that needs confirmation, is not run again and its result stays unknown)."""
    out = []
    for c in calls:
        m = _SAVED_CALL.match(c)
        if not m:
            continue
        args, tool = json.loads(m["args"]), tools.get(m["name"])
        rerun = m["status"] == "ok" and tool is not None and not tool.needs_confirmation
        result = tool.fn(**args) if rerun else None
        out.append(dict(name=m["name"], arguments=args, status=m["status"], result=result))
    return out


# ---------------------------------------------------------------- a saved run in three numbers
REFUSAL_WORDS = [
    "can't",
    "cannot",
    "can not",
    "unable",
    "don't have",
    "do not have",
    "not able",
    "no tool",
    "don't cover",
]
REFUSAL_WORDS += ["无法", "不能", "没办法", "做不到", "不支持"]


def refuses(answer: str | None) -> bool:
    """The answer says it cannot help (one of :data:`REFUSAL_WORDS`, as the judge reads words)."""
    return any(_has_word(answer or "", w) for w in REFUSAL_WORDS)


def summary(rows: list[dict]) -> dict:
    """Saved rows (``benchmarks/loop_questions.py``) counted: met, total, answers that refuse with no call, and junk
    calls (failed, refused or repeated: every call whose status is not ok)."""
    refused = sum(1 for r in rows if not r["calls"] and refuses(r["answer"]))
    junk = sum(1 for r in rows for c in r["calls"] if not c.endswith("->ok"))
    return {"met": sum(r["met"] for r in rows), "total": len(rows), "refused": refused, "junk": junk}
