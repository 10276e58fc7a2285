"""Claims about learning from reward (§14.5.7), checked on the kit's environments, its GRPO loss and its saved run.

What it does
- ``rl-verifiable-env``: "let the model try things in a verifiable environment and reward it by whether the task
  got done" — the rewards a right answer and gaming answers earn on each task family, computed by running them
  (:func:`toolkit.rl.evidence.evidence`), and, where ``benchmarks/rl.py`` has saved a real-model run, how many of its
  groups had a spread, and the held-out evaluation before and after (greedy, tasks the run never drew): the
  verdict rests on that, since the training curve mixes easy and hard task families; and the calculator family
  from the SFT adapter and from the base model (sampled held-out episodes, the same draws before and after), with
  a caveat where a start had no group with a spread to learn from; and the free-form questions (``ask``) from the
  base model, judged on the loop questions before and after, with a caveat where it never wrote a call to reinforce.
- ``rl-credit-assignment``: "the hard part is trajectory-level credit assignment" — with one reward per
  trajectory, GRPO gives every token the model wrote the same advantage and the environment's tokens none; the
  loss cannot say which step was the wrong one (computed on a two-turn trajectory with a tool result).

What it leaves out
- §14.6's algorithms beyond GRPO (process rewards, per-step critics): the kit does not implement them.
"""

from __future__ import annotations

from toolkit.book.ledger import BOOK, Claim, make_verdict
from toolkit.book.registry import Group, loader
from toolkit.eval.questions import SETS, judge_saved
from toolkit.paths import saved_json
from toolkit.rl.evidence import evidence
from toolkit.tokenizer import qwen_tokenizer

RL = Group("rl")
TRAIN, EVAL = "rl/train_lora_multi.json", "rl/eval_lora_multi.json"
STARTS = {"the SFT adapter": "lora", "the base model": "base"}  # benchmarks/rl.py --start, the calc family, sampled
BASE_ASK = "rl/train_base_ask-resample3_vllm.json"  # --start base --family ask, judged by loop_questions.py below
BASE_ASK_LOOP = "rl/base-ask-resample3/loop_questions_base-{side}_{set}.json"  # side: free (before), rl (after)


@loader
def rl_evidence() -> dict:
    return evidence(qwen_tokenizer("qwen2.5"))


@loader
def rl_run() -> dict | None:
    return saved_json(TRAIN)


@loader
def rl_eval() -> dict | None:
    return saved_json(EVAL)


@loader
def rl_starts() -> dict:
    """Per starting point: (training run, sampled held-out evaluation) of the calc family, where both are saved."""
    out = {}
    for name, start in STARTS.items():
        run, ev = saved_json(f"rl/train_{start}_calc.json"), saved_json(f"rl/eval_{start}_calc_sampled.json")
        if run and ev and "before" in ev and "after" in ev:
            out[name] = (run, ev)
    return out


@loader
def rl_base_ask() -> dict | None:
    """The base model's run on the free-form questions and its loop questions before and after, every set saved."""
    run = saved_json(BASE_ASK)
    loops = {side: [saved_json(BASE_ASK_LOOP.format(side=side, set=s)) for s in SETS] for side in ("free", "rl")}
    if not run or not all(all(docs) for docs in loops.values()):
        return None
    return {"run": run, "before": loops["free"], "after": loops["rl"]}


def _base_ask_text(base_ask: dict | None) -> tuple[str, list]:
    """The base model's ``ask`` run: its calls, and the loop questions met judged by today's judge, before and after;
    a caveat where it never wrote a call the host ran."""
    if base_ask is None:
        return "", []
    steps = base_ask["run"]["steps"]
    calls = sum(sum(s["calls"]) for s in steps)
    spread = sum(s["trained_tokens"] > 0 for s in steps)
    rows = {side: [r for d in base_ask[side] for r in d["rows"]] for side in ("before", "after")}
    met = {side: sum(judge_saved(r).met for r in rs) for side, rs in rows.items()}
    tags = {side: sum(r["tagged_turns"] for r in rs) for side, rs in rows.items()}
    n = len(rows["after"])
    text = (
        f"; from the base model, {len(steps)} steps on free-form questions (ask), {spread} with a spread, {calls} "
        f"calls run by the host in the groups kept: loop questions met {met['before']} -> {met['after']} of {n} "
        f"(judged now), the <tool_call> tag in {tags['before']} -> {tags['after']} turns"
    )
    caveat = (
        calls == 0 and tags["after"] == 0,
        "from the base model on free-form questions it never wrote a call the host could run: there was no call to "
        "reinforce, and what moved was the shape of its text",
    )
    return text, [caveat]


def _starts_text(rl_starts: dict) -> tuple[str, list]:
    """The calc runs from each start, and a caveat for a start where no group had a spread."""
    text, caveats = "", []
    for name, (run, ev) in rl_starts.items():
        b, a = ev["before"]["summary"], ev["after"]["summary"]
        spread = sum(s["trained_tokens"] > 0 for s in run["steps"])
        text += (
            f"; from {name}, {len(run['steps'])} steps on calc tasks, {spread} with a spread: sampled held-out mean "
            f"reward {b['mean_reward']:+.2f} -> {a['mean_reward']:+.2f} ({b['met']} -> {a['met']} of {a['n']} met)"
        )
        caveats.append(
            (
                spread == 0,
                f"from {name} no group had a spread ({b['met']} of {b['n']} met before): trial and error teaches "
                "only what the model already does sometimes",
            )
        )
    return text, caveats


def _per_family(run: dict) -> dict[str, tuple[int, int]]:
    """Per task family: (steps, steps whose group had a spread and so moved the model)."""
    out: dict[str, tuple[int, int]] = {}
    for s in run["steps"]:
        n, k = out.get(s["family"], (0, 0))
        out[s["family"]] = (n + 1, k + (s["trained_tokens"] > 0))
    return out


@RL(
    "rl-verifiable-env",
    f"{BOOK}.7",
    "A model can learn by trial and error in a verifiable environment, rewarded by whether the task got done.",
    answers=("让模型在可验证环境里自己试错",),
)
def verifiable_env(rl_evidence, rl_run, rl_eval, rl_starts, rl_base_ask):
    env = rl_evidence["environment"]
    gamed = [env["call"]["in_prose"], env["decline"]["empty"]]
    families = ", ".join(f"{f}: {v['tasks']} tasks" for f, v in env.items())
    text = (
        f"the kit's environments ({families}): a right call "
        f"earns {env['call']['right']:.0f}, the same call inside prose {env['call']['in_prose']:.0f}; a decline in "
        f"text {env['decline']['text']:.0f}, an empty answer {env['decline']['empty']:.0f}"
    )
    if rl_run is None:
        return (
            text + "; no real-model run saved yet (benchmarks/rl.py train)",
            *make_verdict(False, "the reward is verifiable, but no saved run shows a model learning from it"),
        )
    fams = _per_family(rl_run)
    text += (
        f"; {rl_run['model']}, {rl_run['date'][:10]}, commit {rl_run['commit']}: {len(rl_run['steps'])} GRPO steps "
        f"on {rl_run['family']} tasks ("
        + ", ".join(f"{f}: {n} steps, {s} with a spread" for f, (n, s) in fams.items())
        + ")"
    )
    if not (rl_eval and "before" in rl_eval and "after" in rl_eval):
        return (
            text + "; no held-out evaluation before and after saved (benchmarks/rl.py eval)",
            *make_verdict(False, "no held-out evaluation shows the run changed what the model does"),
        )
    b, a = rl_eval["before"]["summary"], rl_eval["after"]["summary"]
    text += (
        f"; {a['n']} held-out tasks, greedy: met {b['met']} before, {a['met']} after (mean reward "
        f"{b['mean_reward']:+.3f} -> {a['mean_reward']:+.3f}; failed calls {b['failed_calls']} -> {a['failed_calls']})"
    )
    more, start_caveats = _starts_text(rl_starts)
    ask_text, ask_caveats = _base_ask_text(rl_base_ask)
    return (
        text + more + ask_text,
        *make_verdict(
            a["met"] > b["met"] and all(g <= 0 for g in gamed),
            "the saved run did not raise the held-out tasks met (or gaming earned a reward)",
            [
                (len(rl_run["steps"]) < 200, f"a small run ({len(rl_run['steps'])} steps on a 0.5B model, CPU)"),
                (a["n"] < 100, f"{a['n']} held-out tasks: a difference of a few is within sampling noise"),
                *start_caveats,
                *ask_caveats,
            ],
        ),
    )


@RL(
    "rl-credit-assignment",
    f"{BOOK}.7",
    "The hard part is trajectory-level credit assignment: one outcome for a whole trajectory must be spread over "
    "its steps.",
    answers=("轨迹级的信用分配",),
)
def credit_assignment(rl_evidence):
    c = rl_evidence["credit_assignment"]
    return (
        f"GRPO on a two-turn trajectory with a tool result ({c['tokens']} tokens): one reward, one advantage; "
        f"each of the model's {c['model_tokens']} tokens gets a gradient between "
        f"{c['min_grad_on_model_tokens']:.2e} and {c['max_grad_on_model_tokens']:.2e}, the environment's {c['environment_tokens']} tokens "
        f"{c['max_grad_on_environment_tokens']:.1f}: the loss spreads the outcome evenly and cannot single out the "
        "step that went wrong",
        *make_verdict(
            c["max_grad_on_environment_tokens"] == 0.0 < c["min_grad_on_model_tokens"] and c["model_tokens"] > 0,
            "an environment token got a gradient, or a model token none",
            [
                (
                    c["max_grad_on_model_tokens"] == c["min_grad_on_model_tokens"],
                    "every token the model wrote got the same weight: the mechanism that makes it hard is shown; "
                    "how hard it is (which step a long failed trajectory should blame) is a judgement",
                )
            ],
        ),
    )


def rl_claims() -> list[Claim]:
    return RL.run()
