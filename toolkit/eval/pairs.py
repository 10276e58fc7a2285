"""The pair-lookup chain: the §14.5.4 lever "shorten the chain — several calls at once instead of in series".

What it does
- ``pair_task(a, b, k, parallel)`` asks for the cities of two landmarks, both cities' temperatures and their
  difference (k = 2, 4 or 5 calls, :data:`PAIR_STAGES`). ``parallel=False`` asks for one call at a time (k round
  trips); ``parallel=True`` asks for a stage's two independent calls in one turn (1, 2 or 3 round trips). Both
  run with the same turn budget (``toolkit.eval.chains.run_chain``).
- ``score_pair`` accepts a stage's two calls in either order (in one turn or two) and, like the serial chains,
  lets one retry follow a call the tool rejected; ``ChainScore.rounds`` says how many round trips the model used.
- ``pair_step_tasks`` measures the one step a pair needs beyond :data:`toolkit.eval.chains.STEPS`
  (``difference``) alone; ``pairs()`` pairs each landmark with the next.

What it leaves out
- Forcing parallel calls (the question asks; the grammar allows up to the loop's ``max_calls`` per turn).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit.eval.chains import TOOL_ERRORS, ChainScore, as_number, step_ok
from toolkit.eval.choices import CITY_OF, LANDMARKS, PAIR_KS
from toolkit.tools import get_weather

PAIR_STAGES = (("city", "city"), ("weather", "weather"), ("difference",))


@dataclass
class PairTask:
    landmarks: tuple
    k: int  # calls
    parallel: bool  # asked for a stage's two calls in one turn
    question: str

    @property
    def rounds(self) -> int:
        """Round trips the question asks for: one per call in series, one per stage in parallel."""
        return stages_for(self.k) if self.parallel else self.k

    def score(self, calls) -> ChainScore:
        return score_pair(calls, self)


def stages_for(k: int) -> int:
    if k not in PAIR_KS:
        raise ValueError(f"a pair task has k in {PAIR_KS} calls, got {k}")
    return PAIR_KS.index(k) + 1


def pair_task(a: str, b: str, k: int, parallel: bool) -> PairTask:
    n = stages_for(k)
    if parallel:
        parts = [
            f"find the cities the {a} and the {b} are in, with both calls in the same turn",
            "get both cities' current temperatures in Celsius, with both calls in the same turn",
            "subtract the second temperature from the first with the calculator",
        ][:n]
        lead = "Use the tools; calls that do not depend on each other go together in one turn: "
    else:
        parts = [
            f"find the city the {a} is in",
            f"find the city the {b} is in",
            "get the first city's current temperature in Celsius",
            "get the second city's current temperature in Celsius",
            "subtract the second temperature from the first with the calculator",
        ][:k]
        lead = "Use the tools, one call at a time, each step using the earlier results: "
    q = lead + "; then ".join(parts) + ". Finally tell me the last result."
    return PairTask((a, b), k, parallel, q)


def pairs() -> list[tuple[str, str]]:
    """Each landmark with the next one (so every landmark is looked up twice over the set)."""
    return [(LANDMARKS[i], LANDMARKS[(i + 1) % len(LANDMARKS)]) for i in range(len(LANDMARKS))]


def pair_expected(k: int) -> list[tuple]:
    keys = [("city", 0), ("city", 1), ("weather", 0), ("weather", 1), ("difference",)]
    return keys[:k]


def _pair_ok(key, c, done: dict, t: PairTask) -> bool:
    if key[0] == "city":
        return step_ok("landmark_city", c.name, c.arguments, None, t.landmarks[key[1]])
    if key[0] == "weather":
        return step_ok("get_weather", c.name, c.arguments, done[("city", key[1])], "")
    t0, t1 = (as_number(done[("weather", i)].get("temperature")) for i in (0, 1))
    if t0 is None or t1 is None:
        return False
    return step_ok("difference", c.name, c.arguments, {"result": t0 - t1}, "")


def score_pair(calls, t: PairTask) -> ChainScore:
    """Like :func:`score_calls`, but the two calls of a stage may come in either order (or in one turn)."""
    expected = pair_expected(t.k)
    stage = {key: next(i for i, s in enumerate(PAIR_STAGES) if key[0] in s) for key in expected}

    def walk(allow_retry: bool) -> tuple[int, bool, bool]:
        done: dict = {}
        retried = False
        for c in calls:
            left = [key for key in expected if key not in done]
            if not left:
                break
            now = [key for key in left if stage[key] == stage[left[0]]]
            res = c.result if isinstance(c.result, dict) else {}
            hit = next((key for key in now if c.status == "ok" and _pair_ok(key, c, done, t)), None)
            if hit is not None:
                done[hit] = res
                continue
            if allow_retry and not retried and c.status in TOOL_ERRORS:
                retried = True
                continue
            return len(done), retried, True
        return len(done), retried, len(done) >= t.k

    strict, _, d1 = walk(False)
    retry, retried, d2 = walk(True)
    return ChainScore(t.k, strict, retry, len(calls), retried, decided=d1 and d2)


def pair_step_tasks(a: str, b: str) -> list[tuple[str, str, dict]]:
    """The pair's last step alone: subtract one stated temperature from another."""
    ta, tb = (get_weather(CITY_OF[x])["temperature"] for x in (a, b))
    return [("difference", f"Use the calculator to subtract {tb:g} from {ta:g}.", {"result": ta - tb})]
