"""The host loop on free-form questions, real offline model, all four demo tools mounted: met / not met, seconds.

Eight questions written for this benchmark (math, units, weather, comparisons needing two calls, questions that
need no tool; Chinese and English). Each has a checker written BEFORE any run: it looks only at the trace (which
tools ran with which results) and the final answer text. The script runs one configuration per call and saves a
JSON file with date, machine, model, the toolkit commit it imported, the settings and one row per question.

Run:  nice python benchmarks/loop_questions.py --pass after          # the loop's current defaults
      nice python benchmarks/loop_questions.py --pass before --cap-s 240   # the defaults before issue 13
The "before" settings are passed explicitly (a call forced on turn 1, up to 4 calls per turn, the answer started
after every tool result, 160 new tokens per turn); run it with PYTHONPATH pointing at a checkout of the old
commit to measure the old loop itself (the saved file records which commit ran). ``--cap-s`` stops a task after
that many seconds (checked between steps; the task counts as not met and the row says "capped").

Leaves out: sampling (greedy only: one run per question is the whole distribution) and any timing assert.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from toolkit.paths import provenance  # noqa: E402  (standard library only: a usage error stays fast)


# ---------------------------------------------------------------- what the trace did
def _results(trace) -> list:
    from toolkit.loop.steps import Executed

    return [r for s in trace.of(Executed) for r in s.results]


def _ok(trace, name: str) -> list:
    return [r for r in _results(trace) if r.name == name and r.status == "ok"]


def _numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"-?\d[\d,]*(?:\.\d+)?", text or "")]


def _answer(trace) -> str:
    return trace.answer or ""


# ---------------------------------------------------------------- the questions and their checkers
def check_percent(t):
    ran = any(r.result.get("result") == 37.5 for r in _ok(t, "calculator"))
    return ran and "37.5" in _answer(t), f"calculator gave 37.5: {ran}; answer says 37.5: {'37.5' in _answer(t)}"


def check_product(t):
    said = any(n == 7006652 for n in _numbers(_answer(t)))
    return said, f"answer states 7006652: {said}"


def check_miles(t):  # 26.2 mi = 42.1648 km
    said = any(42.1 <= n <= 42.2 for n in _numbers(_answer(t)))
    return said, f"answer states 42.1..42.2 (km): {said}"


def check_shanghai(t):
    looked = any(r.result.get("city") == "上海" for r in _ok(t, "get_weather"))
    said = any(n == 28 for n in _numbers(_answer(t)))
    return looked and said, f"get_weather(上海) ran: {looked}; answer says 28: {said}"


def check_warmer(t):  # Paris 18 °C, Tokyo 21 °C
    cities = {r.result.get("city") for r in _ok(t, "get_weather")}
    both = {"Paris", "Tokyo"} <= cities
    a = _answer(t)
    says_tokyo = bool(re.search(r"Tokyo[^.]*\bwarmer\b|\bwarmer[^.]*\bTokyo\b|Tokyo[^.]*higher", a))
    says_paris = bool(re.search(r"Paris (is|was) (the )?warmer|warmer (city )?is Paris", a))
    return (
        both and says_tokyo and not says_paris,
        f"both cities looked up: {both}; answer says Tokyo is warmer: {says_tokyo}; says Paris is: {says_paris}",
    )


def check_difference(t):  # 北京 25 °C, London 14 °C: 11 degrees
    cities = {r.result.get("city") for r in _ok(t, "get_weather")}
    both = {"北京", "London"} <= cities
    said = any(n == 11 for n in _numbers(_answer(t)))
    return both and said, f"both cities looked up: {both}; answer says 11: {said}"


def check_hello(t):
    calls = len(_results(t))
    said = "bonjour" in _answer(t).lower()
    return calls == 0 and said, f"tool calls: {calls}; answer has 'bonjour': {said}"


def check_intro(t):
    calls = len(_results(t))
    a = _answer(t)
    prose = bool(re.search(r"[\u4e00-\u9fff]", a)) and "{" not in a and "<tool_call>" not in a
    return (
        calls == 0 and prose and t.stop.reason == "answered",
        f"tool calls: {calls}; Chinese prose without JSON: {prose}; stop: {t.stop.reason}",
    )


# ---- added 2026-12-01 before the fine-tune of issue 25 (never trained on; the training generator is tested
# ---- against these strings)
def _ran_with(t, name: str, pred) -> bool:
    return any(pred(r.arguments, r.result) for r in _ok(t, name))


def _states(t, lo: float, hi: float) -> bool:
    return any(lo <= n <= hi for n in _numbers(_answer(t)))


def _no_calls(t) -> bool:
    return len(_results(t)) == 0


def check_tip(t):  # 18% of 64.50 = 11.61
    said = _states(t, 11.6, 11.62)
    return said, f"answer states 11.61: {said}"


def check_pounds(t):  # 5 kg = 11.0231 lb
    ran = _ran_with(t, "convert_units", lambda a, r: 11.0 <= r.get("result", 0) <= 11.03)
    said = _states(t, 11.0, 11.03)
    return ran and said, f"convert_units gave 11.02 lb: {ran}; answer says it: {said}"


def check_fahrenheit(t):  # 37 C = 98.6 F
    said = _states(t, 98.59, 98.61)
    return said, f"answer states 98.6: {said}"


def check_tokyo_f(t):  # Tokyo 21 C = 69.8 F
    looked = any(r.result.get("city") == "Tokyo" for r in _ok(t, "get_weather"))
    said = _states(t, 69.7, 69.9)
    return looked and said, f"get_weather(Tokyo) ran: {looked}; answer says 69.8: {said}"


def check_sydney(t):  # Sydney 24 C, sunny
    looked = any(r.result.get("city") == "Sydney" for r in _ok(t, "get_weather"))
    said = _states(t, 24, 24) or "sunny" in _answer(t).lower()
    return looked and said, f"get_weather(Sydney) ran: {looked}; answer says 24 or sunny: {said}"


def check_guangzhou_rain(t):  # 广州: thunderstorms
    looked = any(r.result.get("city") == "广州" for r in _ok(t, "get_weather"))
    a = _answer(t)
    said = bool(re.search(r"雷|雨|thunder|storm|rain|伞|umbrella", a, re.I))
    return looked and said, f"get_weather(广州) ran: {looked}; answer mentions the storms/rain: {said}"


def check_colder(t):  # Berlin 12 C, New York 16 C: Berlin is colder
    cities = {r.result.get("city") for r in _ok(t, "get_weather")}
    both = {"Berlin", "New York"} <= cities
    says = bool(re.search(r"Berlin[^.]*\bcolder\b|\bcolder[^.]*\bBerlin\b|Berlin[^.]*lower", _answer(t)))
    return both and says, f"both cities looked up: {both}; answer says Berlin is colder: {says}"


def check_avg(t):  # 成都 22, 杭州 27: mean 24.5
    cities = {r.result.get("city") for r in _ok(t, "get_weather")}
    both = {"成都", "杭州"} <= cities
    said = _states(t, 24.5, 24.5)
    return both and said, f"both cities looked up: {both}; answer says 24.5: {said}"


def check_sqrt(t):  # sqrt(1764) = 42
    said = _states(t, 42, 42)
    return said, f"answer states 42: {said}"


def check_feet(t):  # 3 m = 9.84252 ft
    ran = _ran_with(t, "convert_units", lambda a, r: 9.84 <= r.get("result", 0) <= 9.85)
    said = _states(t, 9.84, 9.85)
    return ran and said, f"convert_units gave 9.84 ft: {ran}; answer says it: {said}"


def check_liters(t):  # 2 gal = 7.5708 l
    said = _states(t, 7.57, 7.58)
    return said, f"answer states 7.57: {said}"


def check_thanks(t):
    calls = len(_results(t))
    a = _answer(t)
    prose = bool(a.strip()) and "{" not in a and "<tool_call>" not in a
    return calls == 0 and prose, f"tool calls: {calls}; prose answer without JSON: {prose}"


def check_poem(t):
    calls = len(_results(t))
    a = _answer(t)
    prose = bool(re.search(r"[\u4e00-\u9fff]", a)) and "{" not in a and "<tool_call>" not in a
    return calls == 0 and prose, f"tool calls: {calls}; Chinese prose without JSON: {prose}"


def check_capital(t):
    calls = len(_results(t))
    said = "canberra" in _answer(t).lower()
    return calls == 0 and said, f"tool calls: {calls}; answer says Canberra: {said}"


def check_temp_times(t):  # Singapore 32 C, times 3 = 96
    looked = any(r.result.get("city") == "Singapore" for r in _ok(t, "get_weather"))
    said = _states(t, 96, 96)
    return looked and said, f"get_weather(Singapore) ran: {looked}; answer says 96: {said}"


QUESTIONS = [
    dict(id="percent_zh", kind="math", q="250的15%是多少？", check=check_percent),
    dict(id="product_en", kind="math", q="What is 1234 * 5678?", check=check_product),
    dict(id="miles_en", kind="units", q="How many kilometres is 26.2 miles?", check=check_miles),
    dict(id="shanghai_zh", kind="weather", q="今天上海天气怎么样？", check=check_shanghai),
    dict(id="warmer_en", kind="two calls", q="Which is warmer today, Paris or Tokyo?", check=check_warmer),
    dict(id="difference_zh", kind="two calls", q="北京今天比伦敦热几度？", check=check_difference),
    dict(id="hello_en", kind="no tool", q="Say hello in French.", check=check_hello),
    dict(id="intro_zh", kind="no tool", q="用一句话介绍一下你自己。", check=check_intro),
    # added before the fine-tune of issue 25 (never trained on)
    dict(id="tip_en", kind="math", q="Our bill is $64.50. How much is an 18% tip?", check=check_tip),
    dict(id="sqrt_en", kind="math", q="What's the square root of 1764?", check=check_sqrt),
    dict(id="pounds_zh", kind="units", q="5公斤等于多少磅？", check=check_pounds),
    dict(id="fahrenheit_en", kind="units", q="Convert 37 degrees Celsius to Fahrenheit.", check=check_fahrenheit),
    dict(id="feet_en", kind="units", q="I am 3 metres away. How far is that in feet?", check=check_feet),
    dict(id="liters_zh", kind="units", q="2加仑是多少升？", check=check_liters),
    dict(
        id="tokyo_f_en",
        kind="weather",
        q="What's the temperature in Tokyo right now, in Fahrenheit?",
        check=check_tokyo_f,
    ),
    dict(id="sydney_en", kind="weather", q="Is it nice out in Sydney today?", check=check_sydney),
    dict(id="guangzhou_zh", kind="weather", q="我今天去广州，需要带伞吗？", check=check_guangzhou_rain),
    dict(id="colder_en", kind="two calls", q="Which city is colder right now, Berlin or New York?", check=check_colder),
    dict(id="avg_zh", kind="two calls", q="成都和杭州今天的平均气温是多少度？", check=check_avg),
    dict(
        id="temp_times_en",
        kind="tool then math",
        q="Take Singapore's current temperature in Celsius and multiply it by 3.",
        check=check_temp_times,
    ),
    dict(id="thanks_en", kind="no tool", q="Thanks a lot, that's all I needed!", check=check_thanks),
    dict(id="poem_zh", kind="no tool", q="写一句关于秋天的诗。", check=check_poem),
    dict(id="capital_en", kind="no tool", q="What is the capital city of Australia?", check=check_capital),
]


# ---- a fresh set, written 2026-12-02 before the v3 data mix was trained: v3's new kinds of training data were
# ---- chosen from what the v2 adapter got wrong on QUESTIONS above, so QUESTIONS no longer measure v3 cleanly; these
# ---- do (same kinds, new wording and numbers; never trained on, and the generator is tested against them too)
def check_f_pct(t):  # 7.5% of 1240 = 93
    said = _states(t, 93, 93)
    return said, f"answer states 93: {said}"


def check_f_cuberoot(t):  # 2197 ** (1/3) = 13
    said = _states(t, 13, 13)
    return said, f"answer states 13: {said}"


def check_f_discount(t):  # 360 * 0.8 = 288
    said = _states(t, 288, 288)
    return said, f"answer states 288: {said}"


def check_f_height(t):  # 180 cm = 5.9055 ft
    ran = _ran_with(t, "convert_units", lambda a, r: 5.9 <= r.get("result", 0) <= 5.91)
    said = _states(t, 5.9, 5.91)
    return ran and said, f"convert_units gave 5.91 ft: {ran}; answer says it: {said}"


def check_f_mile(t):  # 1 mi = 1609.344 m
    said = _states(t, 1609, 1609.35)
    return said, f"answer states 1609.3: {said}"


def check_f_newyork_f(t):  # New York 16 C = 60.8 F
    looked = any(r.result.get("city") == "New York" for r in _ok(t, "get_weather"))
    said = _states(t, 60.7, 60.9)
    return looked and said, f"get_weather(New York) ran: {looked}; answer says 60.8: {said}"


def check_f_london_coat(t):  # London 14 C, drizzle
    looked = any(r.result.get("city") == "London" for r in _ok(t, "get_weather"))
    said = _states(t, 14, 14) or bool(re.search(r"drizzle|rain", _answer(t), re.I))
    return looked and said, f"get_weather(London) ran: {looked}; answer says 14 or drizzle: {said}"


def check_f_hotter(t):  # 深圳 30, 上海 28: 深圳 is hotter
    cities = {r.result.get("city") for r in _ok(t, "get_weather")}
    both = {"深圳", "上海"} <= cities
    a = _answer(t)
    says = bool(re.search(r"深圳[^。，,]*(更热|热一些|更高|高)|(更热|较热)的是深圳", a))
    wrong = bool(re.search(r"上海[^。，,]*(更热|热一些)|(更热|较热)的是上海", a))
    return (
        both and says and not wrong,
        f"both cities looked up: {both}; says 深圳 is hotter: {says}; says 上海: {wrong}",
    )


def check_f_sum(t):  # London 14 + Sydney 24 = 38
    cities = {r.result.get("city") for r in _ok(t, "get_weather")}
    both = {"London", "Sydney"} <= cities
    said = _states(t, 38, 38)
    return both and said, f"both cities looked up: {both}; answer says 38: {said}"


def check_f_divide(t):  # San Francisco 15 C / 5 = 3
    looked = any(r.result.get("city") == "San Francisco" for r in _ok(t, "get_weather"))
    said = _states(t, 3, 3)
    return looked and said, f"get_weather(San Francisco) ran: {looked}; answer says 3: {said}"


def check_f_spanish(t):
    calls = len(_results(t))
    said = "buenas" in _answer(t).lower()
    return calls == 0 and said, f"tool calls: {calls}; answer has 'buenas': {said}"


def check_f_continent(t):
    calls = len(_results(t))
    said = "亚洲" in _answer(t) or "asia" in _answer(t).lower()
    return calls == 0 and said, f"tool calls: {calls}; answer says 亚洲: {said}"


FRESH = [
    dict(id="f_pct_en", kind="math", q="Work out 7.5% of 1,240 for me.", check=check_f_pct),
    dict(id="f_cuberoot_en", kind="math", q="What number cubed gives 2197?", check=check_f_cuberoot),
    dict(id="f_discount_zh", kind="math", q="一件衣服原价360元，打八折后是多少钱？", check=check_f_discount),
    dict(id="f_height_en", kind="units", q="My brother is 180 cm tall. What is that in feet?", check=check_f_height),
    dict(id="f_mile_zh", kind="units", q="一英里合多少米？", check=check_f_mile),
    dict(id="f_newyork_f_zh", kind="weather", q="纽约此刻的气温换成华氏是多少？", check=check_f_newyork_f),
    dict(
        id="f_london_coat_en",
        kind="weather",
        q="Flying into London tonight. Pack a raincoat?",
        check=check_f_london_coat,
    ),
    dict(id="f_hotter_zh", kind="two calls", q="深圳跟上海，现在哪边更热？", check=check_f_hotter),
    dict(
        id="f_sum_en", kind="two calls", q="Add today's temperatures in London and Sydney together.", check=check_f_sum
    ),
    dict(id="f_divide_zh", kind="tool then math", q="旧金山当前的摄氏气温除以5等于几？", check=check_f_divide),
    dict(id="f_spanish_en", kind="no tool", q="How would I say 'good evening' in Spanish?", check=check_f_spanish),
    dict(id="f_continent_zh", kind="no tool", q="世界上面积最大的洲是哪个？", check=check_f_continent),
]
SETS = {"main": QUESTIONS, "fresh": FRESH}

# The loop's defaults before issue 13 (run_example in toolkit/host.py, since moved to toolkit.loop.examples, at commit 2b68bc0 with a real model).
BEFORE = dict(
    constrain="tag",
    parallel=True,
    max_calls=4,
    answer_prefix="auto",
    max_new_tokens=160,
    max_turns=4,
    template="qwen2.5",
)


# No crutches (issue 25): tool_choice auto, free decoding (no first-token gate, no grammar), no answer prefix and
# no cap on calls per turn. The repeat guard stays (a repeated call is not run twice) and is counted as junk.
NO_CRUTCHES = dict(
    tool_choice="auto",
    constrain="none",
    answer_prefix="",
    max_calls=10**6,
    max_new_tokens=160,
    max_turns=4,
    template="qwen2.5",
)
PASSES = {
    "before": ("qwen2.5-coder-0.5b", "the defaults before issue 13"),
    "after": ("qwen2.5-coder-0.5b", "the loop's current defaults"),
    "lora": ("qwen2.5-coder-0.5b+lora", "the kit's LoRA adapter, no crutches"),
    "lora-int8": ("qwen2.5-coder-0.5b+lora-int8", "the adapter model in int8 (toolkit.small), no crutches"),
    "base-free": ("qwen2.5-coder-0.5b", "the base model, no crutches (like for like with 'lora')"),
}


class Capped(Exception):
    pass


def _commit(root: str | None = None) -> str:
    """The commit of the kit that was imported (default) or of the checkout at ``root``, ``+dirty`` if changed."""
    return provenance(root)["commit"]


def run_one(qd: dict, loaded, which: str, cap_s: float | None):
    from toolkit.backends.hf import HFBackend
    from toolkit.loop.examples import ask
    from toolkit.loop.loop import loop
    from toolkit.loop.steps import Generated, Trace
    from toolkit.tools import TOOLS

    msgs = [{"role": "user", "content": qd["q"]}]
    t0 = time.perf_counter()

    def guard(step):
        if cap_s and time.perf_counter() - t0 > cap_s:
            raise Capped

    capped = False
    if which == "before":
        backend = HFBackend.from_loaded(loaded)
        trace = Trace(backend.name, messages=msgs)
        try:
            for step in loop(backend, loaded.tokenizer, msgs, dict(TOOLS), **BEFORE):
                trace.steps.append(step)
                guard(step)
        except Capped:
            capped = True
    else:
        trace = None
        steps = []
        kw = NO_CRUTCHES if which in ("lora", "lora-int8", "base-free") else {}
        try:
            trace = ask(qd["q"], loaded, tools=list(TOOLS), on_step=lambda s: (steps.append(s), guard(s)), **kw)
        except Capped:
            capped = True
            trace = Trace(loaded.description, steps=steps, messages=msgs)
    secs = time.perf_counter() - t0
    if capped:
        met, why = False, f"capped after {secs:.0f} s (> {cap_s:g} s)"
    else:
        met, why = qd["check"](trace)
    calls = [f"{r.name}({json.dumps(r.arguments, ensure_ascii=False)})->{r.status}" for r in _results(trace)]
    junk = [c for c in calls if not c.endswith("->ok")]  # repeats the host blocked, invalid or failed calls
    return dict(
        id=qd["id"],
        kind=qd["kind"],
        question=qd["q"],
        met=bool(met),
        why=why,
        seconds=round(secs, 1),
        turns=len(trace.turns()),
        calls=calls,
        junk_calls=len(junk),
        tagged_turns=sum("<tool_call>" in s.text for s in trace.of(Generated)),
        answer=trace.answer,
        stop=trace.stop.reason if trace.stop else ("capped" if capped else None),
    )


def main(argv=None) -> int:
    from toolkit import cliargs  # here: after the PYTHONPATH choice above (it may name another checkout)

    p = cliargs.Parser(description=__doc__.split("\n")[0])
    p.add_argument("--pass", dest="which", choices=list(PASSES), required=True)
    p.add_argument(
        "--set",
        dest="qset",
        choices=list(SETS),
        default="main",
        help="main (23 questions) or fresh (12, written later)",
    )
    p.add_argument("--only", default="", help="comma-separated question ids (default: all)")
    p.add_argument(
        "--cap-s", type=cliargs.number(0.0, lo_open=True), default=None, help="stop a task after this many seconds"
    )
    p.add_argument("--threads", type=cliargs.count(1, 1024), default=1, help="torch threads (1 on a shared machine)")
    p.add_argument(
        "--out",
        type=cliargs.out_file,
        default=None,
        help="JSON file (default benchmarks/results/loop_questions_<pass>[_fresh].json)",
    )
    a = p.parse_args(argv)
    pool = SETS[a.qset]
    chosen = [q for q in pool if not a.only or q["id"] in a.only.split(",")]
    if a.only and len(chosen) != len(a.only.split(",")):
        p.error(f"unknown id in --only; known: {[q['id'] for q in pool]}")
    import torch

    from toolkit.models import load
    from toolkit.settings import LoopConfig

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    from toolkit import fetch

    if not fetch.is_installed():
        print("the real offline model is not installed: this benchmark needs it (make real-model)")
        return 2
    loaded = load(PASSES[a.which][0], quiet=True)
    settings = (
        BEFORE
        if a.which == "before"
        else NO_CRUTCHES
        if a.which in ("lora", "lora-int8", "base-free")
        else LoopConfig.for_model(loaded).values()
    )
    print(f"model: {loaded.description}\ncommit: {_commit()}\npass: {a.which} settings: {settings}")
    name = f"loop_questions_{a.which}{'' if a.qset == 'main' else '_' + a.qset}.json"
    path = a.out or os.path.join(os.path.dirname(__file__), "results", name)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    commit = _commit()  # what was imported: read once, before any later commit moves HEAD
    script_commit = _commit(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    rows: list[dict] = []

    def save(complete: bool) -> dict:  # after every question, so an interrupted run keeps what it measured
        out = dict(
            date=started,
            complete=complete,
            asked=[q["id"] for q in chosen],
            machine=dict(
                platform=platform.platform(), cpus=os.cpu_count(), threads=a.threads, load_avg_at_end=os.getloadavg()
            ),
            model=loaded.description,
            commit=commit,
            script_commit=script_commit,
            which=a.which,
            question_set=a.qset,
            adapter=getattr(loaded, "adapter", None),
            settings=settings,
            cap_s=a.cap_s,
            met=sum(r["met"] for r in rows),
            total=len(rows),
            rows=rows,
        )
        with open(path, "w", encoding="utf-8") as f:
            json.dump(out, f, ensure_ascii=False, indent=1, default=str)
        return out

    for qd in chosen:
        row = run_one(qd, loaded, a.which, a.cap_s)
        rows.append(row)
        save(False)
        print(
            f"{row['id']:<14} {'met' if row['met'] else 'NOT met':<8} {row['seconds']:7.1f} s  "
            f"{row['why']}\n{'':14} calls: {row['calls']}\n{'':14} answer: {row['answer']!r}",
            flush=True,
        )
    out = save(True)
    print(f"\n{out['met']}/{out['total']} met; saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
