"""Claims about cost and reliability (book §14.5.3, §14.5.4), checked with ``toolkit.cost`` and real schemas: one
check per claim, in three groups (the prefill arithmetic, the tool definitions' cost, table 14-11 and p^k).

Leaves out: measured wall-clock timings (benchmarks do those).
"""

from __future__ import annotations

import importlib.util
import json
import random
from functools import partial
from pathlib import Path
from statistics import median

from toolkit import cost
from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.catalog import realistic_tools
from toolkit.book.ledger import Claim, make_verdict, rounds_to
from toolkit.book.registry import Group, loader
from toolkit.render import tool_definition_cost

COST, TOOL_COST, DECAY = Group("cost"), Group("tool-cost"), Group("decay")


# ================================================================ §14.5.3 cost
def _walk(turns: int = 30):
    """The book's loop (T = 10,000, Δ = 2,048) walked turn by turn, warm and with a cold first turn."""
    return cost.growth(10_000, 2048, turns), cost.growth(10_000, 2048, turns, warm=False)


@COST(
    "prefill-no-cache",
    "§14.5.3",
    "Prefilling the whole prefix every turn for 30 turns (T=10,000, Δ=2,048) costs 1,252,320 tokens.",
    answers=(
        "工具定义 1 万词元、每轮新增 2048 词元",
        "第 k 轮的前缀长度是 10,000 + 2048k",
        "300,000 + 2048 × 465 = 1,252,320",
    ),
)
def prefill_no_cache():
    g, _ = _walk()
    walk = sum(10_000 + 2048 * k for k in range(1, 31))
    return (
        f"turn-by-turn sum {g.total_no_cache:,}; closed form {cost.total_no_cache(10_000, 2048, 30):,}; plain Python "
        f"sum {walk:,}",
        *make_verdict(g.total_no_cache == walk == 1_252_320, "the sums differ from 1,252,320"),
    )


@COST(
    "prefill-cache",
    "§14.5.3",
    "With every prefix served from the cache, only 2,048 × 30 = 61,440 tokens are computed.",
    answers=("2048 × 30 = 61,440",),
)
def prefill_cache():
    g, cold = _walk()
    return (
        f"{g.total_cache:,} (warm); {cold.total_cache:,} if the tool block is not cached before turn 1",
        *make_verdict(
            g.total_cache == 61_440,
            "the cached total is not 61,440",
            [
                (
                    cold.total_cache != g.total_cache,
                    "assumes the tool block is already cached when the loop starts (another request used the same "
                    f"tools); a cold first turn computes T too: {cold.total_cache:,}",
                )
            ],
        ),
    )


@COST("ratio-30", "§14.5.3", "The gap at 30 turns is 20.4×.", answers=("相差 20.4 倍", "前缀缓存是第一位的（20.4 倍）"))
def ratio_30():
    g, cold = _walk()
    return (
        f"{g.total_no_cache:,} / {g.total_cache:,} = {g.ratio:.3f}; cold start {cold.ratio:.2f}×",
        *make_verdict(
            rounds_to(g.ratio, 20.4, 1),
            f"rounds to {g.ratio:.1f}",
            [
                (
                    not rounds_to(cold.ratio, 20.4, 1),
                    "needs a full cache hit on every turn, the tool block included; with a cold first turn it is "
                    f"{cold.ratio:.1f}×",
                )
            ],
        ),
    )


@COST("ratio-60", "§14.5.3", "At 60 turns the gap is 35.4×.", answers=("60 轮 35.4 倍",))
def ratio_60():
    r60 = _walk(60)[0].ratio
    return (
        f"walk {r60:.3f}; closed form {cost.ratio_closed(10_000, 2048, 60):.3f}",
        *make_verdict(rounds_to(r60, 35.4, 1), f"rounds to {r60:.1f}"),
    )


@COST(
    "ratio-formula",
    "§14.5.3",
    "The ratio equals T/Δ + (R+1)/2, growing about linearly in R.",
    answers=("比值是 10,000/2048 + (R+1)/2", "随轮数近似线性增长"),
)
def ratio_formula():
    grid = [(t, d, r) for t in (0, 500, 10_000, 40_000) for d in (1, 300, 2048) for r in (1, 7, 30, 100)]
    bad = [x for x in grid if abs(cost.growth(*x).ratio - cost.ratio_closed(*x)) > 1e-9 * cost.growth(*x).ratio]
    return (
        f"walk vs formula on {len(grid)} (T, Δ, R) settings: {len(bad)} mismatches",
        *make_verdict(not bad, f"mismatches at {bad[:3]}"),
    )


@COST(
    "constant",
    "§14.5.3",
    "The constant term 10,000/2,048 ≈ 4.9 comes from the tool definitions and does not vanish however many turns.",
    answers=("常数项 10,000/2048 = 4.9", "轮数再多也不消失"),
)
def constant():
    c = 10_000 / 2048
    rest = [cost.growth(10_000, 2048, r).ratio - (r + 1) / 2 for r in (1, 30, 60, 1000)]
    return (
        f"10,000/2,048 = {c:.4f}; ratio − (R+1)/2 at R = 1, 30, 60, 1000: {', '.join(f'{x:.4f}' for x in rest)}",
        *make_verdict(
            rounds_to(c, 4.9, 1) and all(abs(x - c) < 1e-9 for x in rest),
            "the constant does not round to 4.9 or changes with R",
        ),
    )


def bfcl_tools() -> dict[str, list[dict]]:
    """Public tool definitions from the installed BFCL data (``bfcl_eval``, installed ``--no-deps`` for its data).

    ``multi_turn``: the 161 functions of BFCL's multi-turn API suites (file system, math, trading, travel, …),
    in file order; ``live``: BFCL's "live" functions (user-contributed real-world APIs), unique by name.
    BFCL's Python-flavoured types (dict, float, tuple, any) are mapped to JSON Schema; response schemas dropped.
    Raises ``FileNotFoundError`` when bfcl_eval's data is not installed (``make setup`` installs it).
    """
    spec = importlib.util.find_spec("bfcl_eval")  # found, not imported: its runtime deps are not installed
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("bfcl_eval is not installed (requirements-nodeps.txt; make setup)")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    types = {
        "dict": "object",
        "float": "number",
        "tuple": "array",
        "list": "array",
        "int": "integer",
        "str": "string",
        "bool": "boolean",
    }

    def fix(node):
        if isinstance(node, dict):
            out = {k: fix(v) for k, v in node.items()}
            if isinstance(out.get("type"), str):
                t = types.get(out["type"], out["type"])
                if t == "any":
                    out.pop("type")
                else:
                    out["type"] = t
            return out
        return [fix(x) for x in node] if isinstance(node, list) else node

    def wrap(f):
        return {"type": "function", "function": {k: fix(f[k]) for k in ("name", "description", "parameters") if k in f}}

    multi = [
        wrap(json.loads(line))
        for p in sorted((data / "multi_turn_func_doc").glob("*.json"))
        for line in p.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    live, seen = [], set()
    for line in (data / "BFCL_v4_live_multiple.json").read_text(encoding="utf-8").splitlines():
        for f in json.loads(line)["function"]:
            if f["name"] not in seen:
                seen.add(f["name"])
                live.append(wrap(f))
    return {"multi_turn": multi, "live": live}


@loader
def bfcl_sets() -> dict[str, list[dict]]:
    """Public tool definitions from BFCL's installed data (``bfcl_tools``)."""
    return bfcl_tools()


@TOOL_COST(
    "tokens-per-tool",
    "§14.5.3",
    "One tool's JSON Schema (name, description, typed parameters with descriptions) is typically about 200 tokens.",
    answers=("一个工具的 JSON Schema…约 200 词元",),
)
def tokens_per_tool(qwen3_tokenizer, bfcl_sets):
    def per_tool(tools):
        enc = qwen3_tokenizer.encode
        return [len(enc("\n" + json.dumps(t, ensure_ascii=False), add_special_tokens=False)) for t in tools]

    meds = {name: median(per_tool(tools)) for name, tools in bfcl_sets.items()}
    m, kit = meds["multi_turn"], median(per_tool(realistic_tools(20)))
    return (
        f"public BFCL function docs, Qwen3 tokenizer: median {m:.0f} tokens over {len(bfcl_sets['multi_turn'])} "
        f"multi-turn API functions, {meds['live']:.0f} over {len(bfcl_sets['live'])} live (user-contributed) "
        f"functions; the kit's own 20 schemas (toolkit.book.catalog): {kit:.0f}",
        *make_verdict(
            all(0.5 * 200 <= v <= 2 * 200 for v in meds.values()),
            "a public set's median is off by more than a factor of two",
            [
                (
                    any(abs(v - 200) > 0.25 * 200 for v in meds.values()),
                    f"same order of magnitude; the public medians are {m / 200:.0%} and {meds['live'] / 200:.0%} of "
                    "200",
                )
            ],
        ),
    )


def tools_n(n: int, book: int, qwen3_tokenizer, bfcl_sets):
    """The first ``n`` BFCL multi-turn functions rendered by the Qwen3 template, against the book's figure."""
    c = tool_definition_cost(bfcl_sets["multi_turn"][:n], "qwen3", tokenizer=qwen3_tokenizer, per_tool=False)["total"]
    return (
        f"the first {n} BFCL multi-turn API functions (public, file order) in the Qwen3 template: {c:,} tokens "
        f"({c / book:.0%} of the book's figure)",
        *make_verdict(
            0.5 * book <= c <= 2 * book,
            "off by more than a factor of two",
            [
                (
                    abs(c - book) > 0.15 * book,
                    "the cost does grow linearly with the number of tools, but these public definitions come to "
                    f"~{c / n:.0f} tokens per tool, so the total is {c / book:.0%} of the book's",
                )
            ],
        ),
    )


for _n, _book, _quote in (
    (10, 2000, "10 个工具是 2000 词元"),
    (50, 10_000, "50 个是 1 万"),
    (100, 20_000, "100 个是 2 万"),
):
    TOOL_COST.add(
        f"tools-{_n}",
        "§14.5.3",
        f"{_n} tools cost about {_book:,} tokens per request.",
        partial(tools_n, _n, _book),
        answers=(_quote,),
        supports=("与任务难度无关，只与挂了多少工具有关，且每一轮都付一次",) if _n == 100 else (),
    )


# ================================================================ §14.5.4 p^k
BOOK_TABLE = {0.99: (0.904, 0.818, 0.605), 0.95: (0.599, 0.358, 0.077), 0.90: (0.349, 0.122, 0.005)}


def table_entry(p: float, k: int, printed: float):
    v = cost.success(p, k)
    return f"{p}^{k} = {v:.5f}", *make_verdict(rounds_to(v, printed, 3), f"rounds to {v:.3f}")


for _p, _vals in BOOK_TABLE.items():
    for _k, _printed in zip(cost.BOOK_KS, _vals):
        DECAY.add(
            f"table-{_p:.2f}-{_k}",
            "§14.5.4 table 14-11",
            f"p = {_p:.2f} over {_k} steps gives {_printed:.3f}.",
            partial(table_entry, _p, _k, _printed),
            answers=(f"{_p:.2f}: {_printed:.3f}",)
            + (("整体成功率是 p^k", "0.95…20 步之后只剩 0.358") if (_p, _k) == (0.95, 20) else ()),
        )


@DECAY(
    "inverse-0.9947",
    "§14.5.4",
    "For 0.9 over 20 steps each step needs 0.9^(1/20) = 0.9947.",
    answers=("0.9^{1/20} = 0.9947",),
)
def inverse():
    need = cost.required_p(0.9, 20)
    return f"{need:.6f}", *make_verdict(rounds_to(need, 0.9947, 4), f"rounds to {need:.4f}")


@DECAY(
    "error-rate", "§14.5.4", "So the per-step error rate must stay under 0.53%.", answers=("单步错误率要低于 0.53%",)
)
def error_rate():
    need = cost.required_p(0.9, 20)
    return f"1 − {need:.6f} = {1 - need:.4%}", *make_verdict(rounds_to((1 - need) * 100, 0.53, 2), f"{1 - need:.4%}")


@DECAY("one-per-190", "§14.5.4", "That is about one error per 190 steps.", answers=("约每 190 步才允许错一次",))
def one_per_190():
    spe = cost.steps_per_error(cost.required_p(0.9, 20))
    return f"1 / (1 − p) = {spe:.1f}", *make_verdict(185 <= spe <= 195, f"{spe:.0f}")


def cost_claims() -> list[Claim]:
    return COST.run()


def tool_cost_claims() -> list[Claim]:
    return TOOL_COST.run()


def decay_claims() -> list[Claim]:
    return DECAY.run()


def upper_bound_simulation(p: float = 0.95, k: int = 20, trials: int = 20_000, seed: int = 0) -> dict:
    """§14.5.4 calls p^k an upper-bound model because steps are dependent and a failure need not end the task.
    Simulate those two departures, seeded: ``above`` says whether both push success above p^k."""
    rng = random.Random(seed)
    base = cost.success(p, k)
    # (a) failures are recoverable: a failed step is noticed and retried once
    retry = sum(all(rng.random() < p or rng.random() < p for _ in range(k)) for _ in range(trials)) / trials
    # (b) steps are dependent: a task's difficulty sets one p for all its steps (mean p over tasks)
    a = 19.0  # Beta(a·p/(1−p), a) has mean p
    dep = (
        sum(
            all(rng.random() < q for _ in range(k))
            for q in (rng.betavariate(a * p / (1 - p), a) for _ in range(trials))
        )
        / trials
    )
    text = (
        f"p = {p}, k = {k}: p^k = {base:.3f}; {trials:,} tasks each: one retry per failed step → {retry:.3f}; "
        f"dependent steps (per-task p ~ Beta with mean {p}) → {dep:.3f}"
    )
    return dict(above=retry > base and dep > base, text=text)
