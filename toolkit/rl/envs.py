"""Tasks with verifiable rewards, and one rollout of a policy through them with the kit's tools run for real.

What it does
- :func:`call_tasks` / :func:`decline_tasks`: single-turn tasks drawn from the kit's SFT generator
  (:func:`toolkit.sft.data.dataset`) under :data:`SEED_BASE` + seed, so they never reuse the SFT run's seeds:
  the calls the request asks for are known (kinds single, multiple, parallel, parallel_multiple), or no shown tool
  fits (irrelevance, near_miss: a tool beside the request's job).
- :func:`multi_tasks`: multi-turn tasks on the kit's own tools — which of two cities is warmer (two look-ups), and
  an arithmetic result (one calculator call). Their truth comes from the real tools; the phrasings are this
  module's own and the city pairs avoid those of the loop questions (:data:`LOOP_PAIRS`; a test checks both).
- :func:`tasks(family, seed, n)`: one family's tasks by name (``call``, ``decline``, ``multi``, ``all``; ``calc`` and
  ``warmer``: the first ``n`` multi-turn tasks of that kind under ``seed``; ``mix``: ``n`` each of ``call``,
  ``decline``, ``calc`` and ``warmer``, so a step that draws one task at random draws each kind as often — ``all``
  holds about three single-turn tasks per multi-turn one; ``ask``: free-form questions of the loop questions' kinds,
  :func:`ask_tasks`; ``blend``: ``2n`` of ``ask`` and ``n`` each of ``call`` and ``decline``; ``askcall``: ``2n`` of
  ``ask`` and ``n`` of ``call``, the generator's calls keeping the arguments a request states; ``askmix``: ``4n``
  of ``ask``, ``2n`` of ``call`` and ``n`` of ``decline``; ``askpair``: ``askmix``'s tasks, each decline with a
  ``partner``, :func:`paired_decline_tasks`). :data:`EVAL_SEED` and above: held out.
- :func:`finish_episode`: the scoring that ends an episode (also TRL's reward in ``benchmarks/rl_trl.py``).
- :func:`rollout(policy, task)`: runs ``policy(messages, tools) -> text`` turn by turn; every ``<tool_call>`` is
  parsed by the kit's parser and executed by the host loop's executor (:func:`toolkit.loop.execute.execute`), its
  result appended as a ``role="tool"`` message; returns an :class:`Episode` with the reward of
  :mod:`toolkit.rl.reward`.

What it leaves out
- The loop's crutches (answer prefix, repeat guard, grammar): the policy is judged on what it writes itself.
- Tools that need a person's approval (``write_note``): not offered here.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from toolkit.calculator import calculator
from toolkit.eval.questions import compared, judge
from toolkit.loop.execute import CallResult, execute
from toolkit.parse import parse_tool_calls
from toolkit.rl.asks import LOOP_PAIRS, asks  # LOOP_PAIRS: the loop questions' city pairs, never drawn
from toolkit.rl.reward import call_reward, decline_reward, numbers_ok, outcome_reward
from toolkit.sft.data import dataset, groups_of
from toolkit.sft.kit_turns import assistant_calls
from toolkit.tools import TOOLS, WEATHER_TABLE, city_aliases, get_weather, schemas

SEED_BASE = 7_000_000  # SFT data uses seeds 0..; RL draws from here on
EVAL_SEED = 1_000  # held-out tasks (evaluations): training draws its tasks with seeds below this
CALL_KINDS = ("single", "multiple", "parallel", "parallel_multiple")
DECLINE_KINDS = ("irrelevance", "near_miss")
WARMER_Q = (
    "Using the weather tool, tell me where it is warmer at the moment: {a} or {b}? Name the city and its temperature.",
    "查一下天气：{a}和{b}现在哪个更暖和？请说出城市和它的温度。",
)
CALC_Q = ("Please compute {x} × {y} − {z} with the calculator and give me only the result.",)
MULTI_TOOLS = ("calculator", "get_weather", "convert_units")


@dataclass
class Task:
    family: str  # "call" | "decline" | "warmer" | "calc" | "ask"
    messages: list[dict]  # the prompt: system (maybe) + user
    tools: list[dict]
    want: list[dict] = field(default_factory=list)  # call: the calls; warmer: the city and its temperature
    truth: dict = field(default_factory=dict)
    partner: Task | None = None  # paired declines: a call task with the same tool list, trained in the same step

    @property
    def question(self) -> str:
        return next(m["content"] for m in self.messages if m["role"] == "user")


@dataclass
class Episode:
    task: Task
    messages: list[dict]  # prompt + everything the policy wrote and the tools answered
    results: list[CallResult]
    answer: str
    reward: float
    met: bool


def _prompt(messages: list[dict]) -> list[dict]:
    out = []
    for m in messages:
        if m["role"] == "assistant":
            break
        out.append(m)
    return out


def _single_turn(seed: int, n_groups: int, kinds: tuple[str, ...], family: str, paired: bool = False) -> list[Task]:
    examples, tasks = dataset(n_groups, seed=SEED_BASE + seed, mix="v2"), []
    group_of = {i: g for g in groups_of(examples) for i in g}  # the examples sharing one tool list and system prompt

    def single(ex) -> bool:
        return sum(m["role"] == "user" for m in ex.messages) == 1

    for i, ex in enumerate(examples):
        if ex.kind in kinds and single(ex):
            tasks.append(Task(family, _prompt(ex.messages), ex.tools, list(ex.calls)))
            if paired:  # the first single-turn call of the same generator group: the same tools, a request they serve
                mates = [examples[j] for j in group_of[i] if examples[j].kind in CALL_KINDS and single(examples[j])]
                if mates:
                    tasks[-1].partner = Task("call", _prompt(mates[0].messages), mates[0].tools, list(mates[0].calls))
    return tasks


def call_tasks(seed: int = 0, n_groups: int = 8) -> list[Task]:
    """Single-call (and parallel) tasks from the SFT generator with their known calls."""
    return _single_turn(seed, n_groups, CALL_KINDS, "call")


def decline_tasks(seed: int = 0, n_groups: int = 8) -> list[Task]:
    """Requests no shown tool serves (near-miss tools among them): the right move is text and no call."""
    return _single_turn(seed, n_groups, DECLINE_KINDS, "decline")


def paired_decline_tasks(seed: int = 0, n_groups: int = 8) -> list[Task]:
    """:func:`decline_tasks` (the same tasks), each with a ``partner``: a call task from the same generator group, so
    with the same system prompt and tool list and a request one of those tools serves (None where the group has
    none). A step that trains the decline trains its partner beside it, so a decline update meets, in the same
    batch, the case where those tools must be called."""
    return _single_turn(seed, n_groups, DECLINE_KINDS, "decline", paired=True)


def multi_tasks(seed: int = 0, n: int = 8) -> list[Task]:
    """Warmer-of-two-cities and calculator tasks on the kit's own tools; truth from the real tools."""
    rng, tools, tasks = random.Random(SEED_BASE + seed), schemas(MULTI_TOOLS), []
    cities = list(WEATHER_TABLE)
    while len(tasks) < n:
        if rng.random() < 0.5:
            a, b = rng.sample(cities, 2)
            ta, tb = get_weather(a)["temperature"], get_weather(b)["temperature"]
            if {a, b} in LOOP_PAIRS or ta == tb:
                continue
            q = rng.choice(WARMER_Q).format(a=a, b=b)
            warm, cold = (a, b) if ta > tb else (b, a)
            truth = {"warm": warm, "cold": cold, "temp": max(ta, tb), "needed": 2}
            tasks.append(Task("warmer", [{"role": "user", "content": q}], tools, truth=truth))
        else:
            x, y, z = rng.randint(12, 99), rng.randint(12, 99), rng.randint(1, 999)
            value = float(calculator(f"{x} * {y} - {z}")["result"])
            q = rng.choice(CALC_Q).format(x=x, y=y, z=z)
            tasks.append(Task("calc", [{"role": "user", "content": q}], tools, truth={"value": value, "needed": 1}))
    return tasks


def ask_tasks(seed: int = 0, n: int = 8) -> list[Task]:
    """Free-form questions of the loop questions' kinds (:mod:`toolkit.rl.asks`), all four of the kit's tools shown
    as the loop shows them; met when the loop questions' strict judge says so."""
    out = []
    for q, needed in asks(SEED_BASE + seed, n):
        truth = {"question": q, "needed": needed}
        out.append(Task("ask", [{"role": "user", "content": q.question}], schemas(), truth=truth))
    return out


FAMILIES = ("call", "decline", "multi", "calc", "warmer", "all", "mix", "ask", "blend", "askcall", "askmix", "askpair")


def _first(draw: Callable[[int, int], list[Task]], seed: int, n: int, family: str | None = None) -> list[Task]:
    """The first ``n`` tasks (of ``family``, if named) that ``draw(seed, k)`` yields, ``k`` doubled until enough."""
    k = 2 * n + 8
    while len(got := [t for t in draw(seed, k) if family in (None, t.family)]) < n:
        k *= 2
    return got[:n]


def tasks(family: str, seed: int = 0, n: int = 8) -> list[Task]:
    """The tasks of one family (``multi``: warmer-of-two and calculator; ``calc`` / ``warmer``: ``n`` of that kind
    alone, the same tasks ``multi`` draws under ``seed``, in order; ``all``: every family; ``mix``: ``n`` of each
    kind) under ``seed``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown task family {family!r}; known: {', '.join(FAMILIES)}")
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a whole number of tasks, at least 0, not {n!r}")
    if family in ("calc", "warmer"):
        return _first(multi_tasks, seed, n, family)
    if family == "ask":
        return ask_tasks(seed, n)
    if family == "blend":  # half free-form questions, a quarter each of single calls and declines
        return ask_tasks(seed, 2 * n) + _first(call_tasks, seed, n) + _first(decline_tasks, seed, n)
    if family == "askcall":  # two free-form questions to each single call (no declines: they taught refusing)
        return ask_tasks(seed, 2 * n) + _first(call_tasks, seed, n)
    if family == "askmix":  # four free-form questions, two single calls, one decline: declines kept, outweighed
        return ask_tasks(seed, 4 * n) + _first(call_tasks, seed, 2 * n) + _first(decline_tasks, seed, n)
    if family == "askpair":  # askmix's tasks, each decline with its partner call on the same tools
        return ask_tasks(seed, 4 * n) + _first(call_tasks, seed, 2 * n) + _first(paired_decline_tasks, seed, n)
    if family == "mix":
        single = _first(call_tasks, seed, n) + _first(decline_tasks, seed, n)
        return single + _first(multi_tasks, seed, n, "calc") + _first(multi_tasks, seed, n, "warmer")
    out = []
    if family in ("call", "all"):
        out += call_tasks(seed, n)
    if family in ("decline", "all"):
        out += decline_tasks(seed, n)
    if family in ("multi", "all"):
        out += multi_tasks(seed, n)
    return out


WARMER_WORDS = (["warmer", "hotter", "higher", "更暖和", "更热", "更高"], ["colder", "cooler", "lower", "更冷", "更低"])


def _canonical(answer: str, cities: list[str]) -> str:
    """The answer with every other name of a city (Beijing, Peking) written as the table's name (北京)."""
    for city in cities:
        for alias in city_aliases(city)[1:]:
            answer = re.sub(rf"(?<![A-Za-z]){re.escape(alias)}(?![A-Za-z])", city, answer, flags=re.I)
    return answer


def met(task: Task, answer: str, results: list[CallResult]) -> bool:
    """The host's strict outcome check for the multi-turn families. ``calc``: the stated result is the value and the
    calculator ran; ``warmer``: both cities looked up, the comparison names the warmer one and never the other way
    (the loop questions' judge, :func:`toolkit.eval.questions.compared`), and its temperature is stated; ``ask``: the
    loop questions' strict judge on the task's record."""
    t = task.truth
    if task.family == "ask":
        spec = t["question"].answer.get("compare")
        said = _canonical(answer, [spec["more"], spec["than"]]) if spec else answer
        return judge(t["question"], said, results).met
    if task.family == "calc":
        return numbers_ok(answer, t["value"], task.question) and any(r.ok and r.name == "calculator" for r in results)
    looked = {r.result.get("city") for r in results if r.ok and r.name == "get_weather"}
    if not {t["warm"], t["cold"]} <= looked:
        return False
    more, less = WARMER_WORDS
    spec = {"more": t["warm"], "than": t["cold"], "more_words": more, "less_words": less}
    said = _canonical(answer, [t["warm"], t["cold"]])
    return compared(spec, said)[0] and str(t["temp"]) in re.findall(r"-?\d+", said)


Policy = Callable[[list[dict], list[dict]], str]
BatchPolicy = Callable[[list[tuple[list[dict], list[dict]]]], list[str]]


def finish_episode(task: Task, msgs: list[dict], results: list[CallResult], text: str) -> Episode:
    """The :class:`Episode` that ``text``, the policy's last turn, ends: single-turn families scored on the text
    alone; multi-turn ones on the answer (none if ``text`` still calls a tool) and the calls run (``results``)."""
    if task.family in ("call", "decline"):
        r = call_reward(text, task.tools, task.want) if task.family == "call" else decline_reward(text)
        return Episode(task, msgs + [{"role": "assistant", "content": text}], [], text, r, r > 0)
    answer = "" if parse_tool_calls(text)[1] else text.strip()
    msgs = msgs + [{"role": "assistant", "content": text}]
    ok = bool(answer) and met(task, answer, results)
    return Episode(task, msgs, results, answer, outcome_reward(ok, results, task.truth["needed"]), ok)


def rollout_group(policy: BatchPolicy, tasks: list[Task], max_turns: int = 4) -> list[Episode]:
    """Episodes for ``tasks`` (a group: usually one task repeated) in lockstep: each turn, one batched call of the
    policy for every episode still running; the host runs each episode's calls for real and feeds the results
    back, until the episode answers in text (or ``max_turns`` rounds of calls)."""
    msgs = [[dict(m) for m in t.messages] for t in tasks]
    results: list[list[CallResult]] = [[] for _ in tasks]
    done: dict[int, Episode] = {}
    texts = policy([(m, t.tools) for m, t in zip(msgs, tasks)])
    live = list(range(len(tasks)))
    for turn in range(max_turns + 1):
        ask = []
        for i, text in zip(live, texts):
            task = tasks[i]
            content, calls = parse_tool_calls(text)
            if task.family in ("call", "decline") or not calls or turn == max_turns:
                done[i] = finish_episode(task, msgs[i], results[i], text)
                continue
            batch = execute(calls, {k: TOOLS[k] for k in MULTI_TOOLS}, parallel=False)
            results[i] += batch
            msgs[i].append(assistant_calls([{"name": c.name or "", "arguments": c.arguments or {}} for c in calls]))
            msgs[i][-1]["content"] = content.strip()
            msgs[i] += [r.message() for r in batch]
            ask.append(i)
        if not ask:
            break
        live = ask
        texts = policy([(msgs[i], tasks[i].tools) for i in live])
    return [done[i] for i in range(len(tasks))]


def rollout(policy: Policy, task: Task, max_turns: int = 4) -> Episode:
    """One episode: the policy writes, the host runs its calls for real, until it answers in text."""
    return rollout_group(lambda batch: [policy(m, t) for m, t in batch], [task], max_turns)[0]
