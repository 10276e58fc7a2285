"""A shared, seeded set of multi-step questions on the kit's own tools, each with an answer a program can check.

What it does (book §14.5.4, §14.5.5)
- ``tasks(n, seed)``: ``n`` questions drawn (seeded) from a few templates over ``toolkit.tools``: the fixed
  weather table (``get_weather``), ``convert_units`` and ``calculator``. Each needs two to three tool results
  combined; its ``expected`` number is computed by calling the kit's tool functions themselves, so a change to a
  table changes the answer key with it.
- ``Task.check(answer)``: success when any number in the answer text is within ``tol`` (relative, default 0.1%, at
  least 0.05) of ``expected``. (1% let the real model's "humidity of 90%" pass for 89.6 °F: unrelated numbers in
  an answer sit close to the expected one more often than a loose tolerance allows.)

What it leaves out
- Judging wording or units in the answer: a number close enough counts (an answer listing several numbers passes
  if one of them is right — say so wherever the rate is shown).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from toolkit.tools import convert_units, get_weather

CITIES = ("Paris", "London", "Tokyo", "New York", "Berlin", "Sydney", "Singapore", "San Francisco")
NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


@dataclass(frozen=True)
class Task:
    id: str
    question: str
    expected: float
    kind: str
    min_calls: int  # tool results the question needs (a call may fetch two in parallel)
    tol: float = 0.001

    def numbers(self, answer: str | None) -> list[float]:
        return [float(m.replace(",", "")) for m in NUMBER.findall(answer or "")]

    def check(self, answer: str | None) -> bool:
        slack = max(0.05, self.tol * abs(self.expected))
        return any(abs(x - self.expected) <= slack for x in self.numbers(answer))

    def to_json(self) -> dict:
        return dict(
            id=self.id, question=self.question, expected=self.expected, kind=self.kind, min_calls=self.min_calls
        )


def _t(city: str, field: str = "temperature") -> float:
    return float(get_weather(city)[field])


def _c_to_f(c: float) -> float:
    return float(convert_units(c, "c", "f")["result"])


def _diff(rng: random.Random) -> Task:
    a, b = sorted(rng.sample(CITIES, 2), key=lambda c: -_t(c))
    if _t(a) == _t(b):
        a, b = "Singapore", "Berlin"
    q = f"How many degrees Celsius warmer is it in {a} than in {b} right now?"
    return Task("", q, _t(a) - _t(b), "diff", 3)


def _mean(rng: random.Random) -> Task:
    a, b = rng.sample(CITIES, 2)
    q = f"What is the average of the current temperatures in {a} and {b}, in degrees Celsius?"
    return Task("", q, (_t(a) + _t(b)) / 2, "mean", 3)


def _fahrenheit(rng: random.Random) -> Task:
    a = rng.choice(CITIES)
    q = f"Look up the current temperature in {a} and convert it to degrees Fahrenheit."
    return Task("", q, _c_to_f(_t(a)), "fahrenheit", 2)


def _humidity(rng: random.Random) -> Task:
    a, b = sorted(rng.sample(CITIES, 2), key=lambda c: -_t(c, "humidity"))
    q = f"How many percentage points higher is the humidity in {a} than in {b} right now?"
    return Task("", q, _t(a, "humidity") - _t(b, "humidity"), "humidity", 3)


def _distance(rng: random.Random) -> Task:
    miles, days = rng.choice((3, 5, 6, 10)), rng.choice((4, 7, 12))
    q = f"A runner covers {miles} miles every day. How many kilometres is that in {days} days?"
    km = float(convert_units(miles, "mi", "km")["result"])
    return Task("", q, round(km * days, 4), "distance", 2)


TEMPLATES = (_diff, _fahrenheit, _mean, _distance, _humidity)


def tasks(n: int = 10, seed: int = 0) -> list[Task]:
    """``n`` tasks, the templates taken in turn, their cities and numbers drawn with ``random.Random(seed)``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = TEMPLATES[i % len(TEMPLATES)](rng)
        out.append(Task(f"{t.kind}-{i}", t.question, t.expected, t.kind, t.min_calls))
    return out
