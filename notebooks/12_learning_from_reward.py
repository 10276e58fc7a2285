# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -all
#     formats: ipynb,py:percent
#     notebook_metadata_filter: kernelspec,jupytext
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 12 · Learning from reward: rollouts, one reward per trajectory, credit over the model's own tokens
#
# §14.5.7 names two ways a model learns to call tools. Notebook 11 showed the first, imitation: supervised
# fine-tuning on conversations the kit wrote, with the tool results masked out of the loss. The second is
# reinforcement learning in an environment whose outcome a program can check: the model tries, the host runs its
# calls for real, and a rule says whether the task got done. Nobody tells the model *which* of its tokens were
# good; one number arrives at the end of the whole trajectory, and the hard part the chapter names — credit
# assignment — is deciding what that number says about each token.
#
# The kit's version (`toolkit.rl`) is GRPO, the method of DeepSeekMath and of TRL's `GRPOTrainer`: sample a
# *group* of trajectories for the same task, score each, and use each one's reward relative to its group's as
# the signal for every token it wrote. Its loss equals TRL's on a fixed batch (`tests/test_rl_trl.py`).

# %%
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import json
import time

import pandas as pd
import plotly.graph_objects as go
import torch
from IPython.display import HTML, Markdown, display

from toolkit.book.claims_rl import rl_base_ask
from toolkit.cliargs import count, from_env
from toolkit.eval.learned import compare, lost
from toolkit.eval.questions import SETS, judge_saved, summary
from toolkit.eval.read import written_call
from toolkit.memory import memory_available
from toolkit.models import FULL_MODEL_BYTES, load
from toolkit.paths import cpu_threads, saved_json
from toolkit.rl import envs, grpo
from toolkit.rl.evaluate import changed, evaluate
from toolkit.rl.policy import Sampler
from toolkit.sft.labels import label
from toolkit.widgets.mask import MaskData, mask_html

torch.set_num_threads(cpu_threads())  # the CPUs this kernel may use, at most 2
torch.manual_seed(0)
loaded = load("auto")
print("model:", loaded.description)
REAL = loaded.semantic

# %% [markdown]
# ## 1 · An environment and one rollout
#
# A task from `toolkit.rl.envs`: which of two cities is warmer, on the kit's own weather tool. The truth comes
# from the tool itself; the city pairs never repeat the loop questions' (a test checks). The policy is the model,
# sampling at temperature 1; every `<tool_call>` it writes is parsed by the kit's parser and run by the host
# loop's executor, its result appended as a `role="tool"` message, until the model answers in text.

# %%
task = next(t for t in envs.multi_tasks(seed=3, n=12) if t.family == "warmer")
sampler = Sampler(loaded, max_new=96, temperature=1.0, seed=0)
print("task:", task.question)
print("truth:", task.truth)
episode = envs.rollout_group(sampler, [task])[0]
for m in episode.messages:
    print(f"[{m['role']}]", m.get("content") or json.dumps(m.get("tool_calls"), ensure_ascii=False))
print(f"\nreward {episode.reward:+.2f}   met: {episode.met}   calls run: {len(episode.results)}")

# %% [markdown]
# The reward is a rule (`toolkit.rl.reward.outcome_reward`): 1 when the host's strict check says the answer names
# the warmer city with its looked-up temperature and both cities were actually looked up; minus a cost for each
# failed, repeated or unneeded call. Gaming it earns nothing — listing many numbers, calling every tool, an empty
# answer, or a call written as prose all score 0 or less (`tests/test_rl_reward.py`, `tests/test_rl_envs.py`).

# %% [markdown]
# ## 2 · A group, and each member's advantage
#
# GRPO samples several trajectories of the same task and compares them with each other: a member's advantage is
# its reward minus the group's mean, divided by the group's spread. A group whose members all scored the same
# teaches nothing — its advantages are all zero.

# %%
GROUP = 4
group = envs.rollout_group(sampler, [task] * GROUP)
adv = grpo.advantages([e.reward for e in group], GROUP)
table = pd.DataFrame(
    [
        {
            "member": i,
            "calls": ", ".join(f"{r.name}({r.arguments.get('city', '')})" for r in e.results) or "—",
            "answer": e.answer[:90],
            "reward": e.reward,
            "advantage": round(a, 3),
        }
        for i, (e, a) in enumerate(zip(group, adv))
    ]
)
display(table)
spread = any(abs(a) > 0 for a in adv)
display(
    Markdown(
        f"Rewards {[e.reward for e in group]}: "
        + (
            "they differ, so this group would move the model."
            if spread
            else "all equal, so this group teaches nothing (every advantage is 0)."
        )
    )
)

# %% [markdown]
# ## 3 · The advantage laid over the tokens
#
# Each trajectory is rendered again with the chat template and labelled exactly as the SFT loss labels it
# (`toolkit.sft.labels`): the tokens the model wrote carry the trajectory's advantage; the system prompt, the
# tool list, the user's question and every tool result are masked — the environment spoke them, and they get no
# gradient. Green: a positive advantage pushed up; red: a negative one pushed down; grey: masked.

# %%
order = sorted(range(GROUP), key=lambda i: adv[i])
shown = [order[-1], order[0]] if spread else [order[0]]
for i in shown:
    lab = label(group[i].messages, task.tools, sampler.template, tokenizer=loaded.tokenizer)
    data = MaskData.from_labelled(lab, f"member {i}: reward {group[i].reward:+.2f}", advantage=adv[i])
    display(HTML(mask_html(data)))
s = data.summary()
env_tokens = sum(v["masked"] for k, v in s["segments"].items() if k == "tool_response")
display(
    Markdown(
        f"In the last trajectory shown, {s['trained']} of {s['tokens']} tokens are the model's own and share its "
        f"one advantage; {s['masked']} are masked, {env_tokens} of them the tools' results."
    )
)

# %% [markdown]
# ## 4 · The saved run: the reward over the steps
#
# `python benchmarks/rl.py train --start lora --family multi` ran GRPO from the shipped SFT adapter on this
# machine's CPU. Each point is one step's mean reward over its group, coloured by the step's task family: one task
# per step, so the curve mixes an easy family and a hard one — compare a family with itself, not the first steps
# with the last.

# %%
run = saved_json("rl/train_lora_multi.json")
if run is None:
    print("no saved run in this checkout: `python benchmarks/rl.py train --start lora --family multi` makes one")
if run:
    steps = pd.DataFrame(run["steps"])
    fig = go.Figure(
        [
            go.Scatter(x=g["step"], y=g["mean_reward"], mode="markers+lines", name=fam)
            for fam, g in steps.groupby("family")
        ],
        layout=dict(title=f"GRPO on {run['family']} tasks", xaxis_title="step", yaxis_title="mean reward", height=340),
    )
    fig.show()
    per = []
    for fam, g in steps.groupby("family"):
        half = len(g) // 2
        per.append(
            {
                "family": fam,
                "steps": len(g),
                "first half": round(g["mean_reward"].head(half).mean(), 3) if half else None,
                "second half": round(g["mean_reward"].tail(len(g) - half).mean(), 3),
                "groups with a spread": int((g["trained_tokens"] > 0).sum()),
            }
        )
    display(pd.DataFrame(per))
    display(
        Markdown(
            f"{run['model']}; {len(steps)} steps of {run['settings']['group']} rollouts in "
            f"{steps['seconds'].iloc[-1] / 60:.0f} min ({run['machine']}, commit {run['commit']}). "
            f"{int((steps['trained_tokens'] == 0).sum())} of {len(steps)} groups had no spread and taught nothing."
        )
    )

# %% [markdown]
# ## 5 · Before and after, on tasks the run never saw
#
# Greedy episodes on held-out tasks (other seeds), with the starting model and with the RL adapter
# (`python benchmarks/rl.py eval`).

# %%
ev = saved_json("rl/eval_lora_multi.json")
if ev is None:
    print("no saved evaluation in this checkout: `python benchmarks/rl.py eval --start lora --family multi [--rl]`")
if ev:
    display(pd.DataFrame({k: ev[k]["summary"] for k in ("before", "after") if k in ev}).T)

# %% [markdown]
# The same family from two starting points — the base model and the SFT adapter — with the same settings
# (`python benchmarks/rl.py train|eval --start base|lora --family calc`, `results/rl/README.md`): sampled held-out
# episodes, two per task, the same random draws before and after. The published anchors disagree on whether RL
# needs SFT first; with a reward that pays only for an outcome the host verified, the first row shows why it can.

# %%
starts = {}
for start in ("base", "lora"):
    ev, run = saved_json(f"rl/eval_{start}_calc_sampled.json"), saved_json(f"rl/train_{start}_calc.json")
    if not (ev and run and "after" in ev):
        print(f"no saved {start} run: `python benchmarks/rl.py train --start {start} --family calc` and `eval`")
        continue
    b, a = ev["before"], ev["after"]
    starts[start] = {
        "model": run["model"].split(" [")[0],
        "held-out reward before": b["summary"]["mean_reward"],
        "after": a["summary"]["mean_reward"],
        "met": f"{b['summary']['met']} → {a['summary']['met']} of {a['summary']['n']}",
        "named the calculator": sum('"calculator"' in r["answer"] or r["calls"] > 0 for r in b["rows"]),
        "wrote the tag": sum("<tool_call>" in r["answer"] or r["calls"] > 0 for r in b["rows"]),
        "groups that trained": sum(s["trained_tokens"] > 0 for s in run["steps"]),
        "steps": len(run["steps"]),
        "episodes": b["summary"]["n"],
    }
if starts:
    display(pd.DataFrame(starts).T)
if "base" in starts:
    base = starts["base"]
    display(
        Markdown(
            f"Before training, the base model named the calculator in {base['named the calculator']} of its "
            f"{base['episodes']} sampled episodes and wrote the `<tool_call>` tag in {base['wrote the tag']}; "
            f"{base['groups that trained']} of its {base['steps']} groups had a spread. "
            + (
                "With no call the host can run, every episode earns the same reward, every advantage is 0, and "
                "nothing is learned: GRPO reinforces what the model already does sometimes, and here that is what "
                "SFT gave it."
                if base["groups that trained"] == 0
                else "Some groups had a spread, so the base model could learn from its own successes."
            )
        )
    )

# %% [markdown]
# The base model again, on the free-form questions of the loop questions' kinds (`--family ask`), with the settings
# of the best run from the SFT adapter (32 steps, groups without a spread redrawn up to three times, the KL
# penalty), then judged on all four sets of loop questions before and after, without crutches.

# %%
base_ask = rl_base_ask() or {}  # the ledger's loader: the run and its loop questions, every set, or None
base_run, b4, af = base_ask.get("run"), base_ask.get("before", [None]), base_ask.get("after", [None])
bfcl_base_rl = saved_json("rl/base-ask-resample3/bfcl_qwen2.5-coder-0.5b+rl.json")


def judged(doc):  # each saved row judged again by today's judge (the run's own verdict stays in its file)
    return [judge_saved(r).met for r in doc["rows"]]


if not (base_run and all(b4) and all(af)):
    print("no saved run: `python benchmarks/rl.py train --start base --family ask --resample 3 --engine vllm`")
else:
    steps = base_run["steps"]
    per_set, written = {}, {}
    for name, before, after in zip(SETS, b4, af):
        per_set[name] = {
            "met before": f"{sum(judged(before))}/{before['total']}",
            "met after": f"{sum(judged(after))}/{after['total']}",
            "met after, as the run judged it": f"{after['met']}/{after['total']}",
            "tagged turns before → after": f"{sum(r['tagged_turns'] for r in before['rows'])} → "
            f"{sum(r['tagged_turns'] for r in after['rows'])}",
        }
        for who, doc in (("before", before), ("after", after)):
            written[who] = written.get(who, 0) + sum(written_call(r["answer"]) for r in doc["rows"])
    display(pd.DataFrame(per_set).T)
    n = sum(len(d["rows"]) for d in af)
    was, now = sum(sum(judged(d)) for d in b4), sum(sum(judged(d)) for d in af)
    as_run = sum(d["met"] for d in af)
    made_up = [
        sum(written_call(r["answer"]) and '"result"' in r["answer"] for d in ds for r in d["rows"]) for ds in (b4, af)
    ]
    paid = sum(r["met"] and written_call(r["answer"]) for d in af for r in d["rows"])
    tags = sum(r["tagged_turns"] for d in af for r in d["rows"])
    bfcl_rows = (bfcl_base_rl or {}).get("accuracy", {}).get("data", {}).get("rows", [])
    bfcl_said = "; ".join(
        f"BFCL {r['category']} (native, seeded {r['n']}): {r['correct']} right, a call written as text in "
        f"{r['untagged_json']}"
        for r in bfcl_rows
    )
    display(
        Markdown(
            f"Over its {len(steps)} steps the model wrote no call the host could run "
            f"({sum(sum(s['calls']) for s in steps)} calls in the episodes the steps kept), and "
            f"{sum(s['trained_tokens'] > 0 for s in steps)} of its {len(steps)} groups had a spread. "
            f"After the run it wrote the `<tool_call>` tag in {tags} turns of the {n} loop questions. "
            f"What changed is the shape of its answers: a tool call written as text, with no tags, in "
            f"{written['before']} answers before and {written['after']} after; {made_up[1]} of them after the run "
            f'(against {made_up[0]} before) carry a `"result"` the model made up (no tool ran). The run judged {as_run} of {n} met, {paid} of them '
            "such calls whose made-up result happened to be right. The reward scores these questions with the same "
            "judge, so during the run it paid for them whenever the guess was right: a hack that the judge now "
            f"refuses (a call written as text is not an answer). Judged today, the loop questions went {was} → "
            f"{now} of {n}. "
            + (bfcl_said + ". " if bfcl_said else "")
            + "RL from this start could only reinforce what it already wrote, and the call format never appeared "
            "for the reward to pay."
        )
    )


# %% [markdown]
# ### Which tasks the reward sees decides what is learned
# A second saved run trained on every family at once (`python benchmarks/rl.py train --family all --engine vllm`):
# the generator's calls, requests that no shown tool serves (the reward pays for text and no call), and the kit's
# own multi-turn tasks. Below: BFCL's whole irrelevance category before and after, paired case by case, and the
# kit's free-form loop questions (main, fresh and held out, judged strictly), with how many answers are the SFT
# data's refusal sentence and no call.

# %%
REFUSAL = ("Sorry, the available tools don't cover this request.", "抱歉，现有的函数都无法完成这个请求")
irr_before = saved_json("full/bfcl_qwen2.5-coder-0.5b+lora.json")
irr_after = saved_json("rl/all/whole/bfcl_qwen2.5-coder-0.5b+lora+rl.json")
mix_run = saved_json("rl/train_lora_all_vllm.json")
if not (irr_before and irr_after and mix_run):
    print("no saved run in this checkout: `python benchmarks/rl.py train --start lora --family all --engine vllm`")
else:
    irr = next(r for r in compare(irr_before, irr_after)["rows"] if r["category"] == "irrelevance")
    sets = {
        "SFT adapter": [f"rl/loop_questions_lora{s}.json" for s in ("", "_fresh", "_heldout")],
        "SFT + RL, every family": [f"rl/all/loop_questions_lora-rl-all_{s}.json" for s in ("main", "fresh", "heldout")],
    }
    loops = {}
    for who, names in sets.items():
        docs = [saved_json(n) for n in names]
        rows = [r for d in docs if d for r in d["rows"]]
        loops[who] = {
            "loop questions run in": docs[0]["model"].rsplit(", ", 1)[-1].rstrip("]") if docs[0] else "?",
            "loop questions met": f"{sum(r['met'] for r in rows)} of {len(rows)}",
            "no call, the SFT refusal sentence": sum(
                not r["calls"] and any(x in (r["answer"] or "") for x in REFUSAL) for r in rows
            ),
        }
    precisions = {d["accuracy"]["meta"]["model"].rsplit(", ", 1)[-1].rstrip("]") for d in (irr_before, irr_after)}
    col = f"BFCL irrelevance, all {irr['adapter']['n']} ({' / '.join(sorted(precisions))})"
    loops["SFT adapter"][col] = f"{100 * irr['base']['accuracy']:.1f}%"
    loops["SFT + RL, every family"][col] = f"{100 * irr['adapter']['accuracy']:.1f}%"
    display(pd.DataFrame(loops).T)
    fams = pd.Series([st["family"] for st in mix_run["steps"]]).value_counts()
    display(
        Markdown(
            f"On {irr['adapter']['n']} irrelevance cases the run gained {irr['gained']} and lost {irr['lost']}. "
            f"Its {len(mix_run['steps'])} steps drew "
            + ", ".join(f"{n} `{f}`" for f, n in fams.items())
            + ". A refusal earns 1 only on a `decline` task; on every other task it earns 0. But the tasks on the "
            f"kit's own tools (`calc`, `warmer`), the ones the loop questions resemble, were "
            f"{fams.get('calc', 0) + fams.get('warmer', 0)} of the {len(mix_run['steps'])} steps, so the model "
            "learned the refusal as the safe answer for whatever does not look like a BFCL request. The reward decides "
            "what counts as success; the mix of tasks decides what the policy practises."
        )
    )

# %% [markdown]
# ### Task mixes and sampling, side by side
# Each saved run started from the SFT adapter and was evaluated the same way: BFCL's seeded 50 cases per category
# (native mode, paired case by case with the SFT adapter's run over every case) and the 51 loop questions judged
# strictly. `mix` draws each kind of task equally; `blend` is half free-form questions of the loop questions' kinds
# (`toolkit.rl.asks`: new phrasings, values and city pairs, judged by the loop questions' own judge) and a quarter
# each of single calls and declines; `ask` is the free-form questions alone; `ask-resample3` is the same with
# dynamic sampling (where all four members of a group earn the same reward, up to three other tasks are drawn, so
# that the step has something to learn from); `askcall-resample3` adds one single call to every two free-form
# questions, with no declines; `askmix-resample3` draws four free-form questions to two single calls and one
# decline, so declines are kept but outweighed; `askmix-resample3-family` is the same mix with each redraw taken from
# the step's own family, so a drawn decline or single call stays one (without it, the free-form questions, whose
# groups most often have a spread, took most redrawn steps); `askpair-resample3-family` is that run with each decline
# drawn together with a single call from the same generated group — the same system prompt and tools, a request one
# of them serves — rolled out beside it and trained in the same update (its "call beside a decline" counts the steps
# where that call's own group had a spread); `askpair-resample3-family-seed1` is the same recipe with another seed
# (another draw of steps and other samples), to show how far two runs of one recipe land apart, and
# `askmix-resample3-seed1` is the same for `askmix-resample3`, the run with the most loop questions met. `KL penalty` is each
# run's penalty weight towards the starting model. "Refuses" counts answers that say they cannot help and made no
# call.

# %%
RUNS = {"all": "every family", "mix": "each kind equally", "blend": "half free-form", "ask": "free-form only"}
RUNS["ask-resample3"] = "free-form only, groups without spread redrawn"
RUNS["askcall-resample3"] = "two free-form to one single call, redrawn"
RUNS["askmix-resample3"] = "four free-form, two single calls, one decline, redrawn"
RUNS["askmix-resample3-family"] = "as askmix, redrawn within the step's family"
RUNS["askpair-resample3-family"] = "as askmix-family, each decline trained beside a call on its tools"
RUNS["askpair-resample3-family-seed1"] = "the same recipe, seed 1"
RUNS["askmix-resample3-seed1"] = "askmix-resample3 again, seed 1"
TWINS = [("askpair-resample3-family", "askpair-resample3-family-seed1"), ("askmix-resample3", "askmix-resample3-seed1")]
sft_bfcl = saved_json("full/bfcl_qwen2.5-coder-0.5b+lora.json")
sft_loop = [saved_json(f"rl/loop_questions_lora{s}.json") for s in ("", "_fresh", "_heldout")]
table, seen = [], {}
if sft_bfcl and all(sft_loop):
    row = {"run": "SFT adapter (start)", "steps trained": "-", "KL penalty": "-"}
    for name in RUNS:
        bfcl = saved_json(f"rl/{name}/bfcl_qwen2.5-coder-0.5b+lora+rl.json")
        train = saved_json(f"rl/train_lora_{name}_vllm.json")
        loop = [saved_json(f"rl/{name}/loop_questions_lora-rl-{name}_{s}.json") for s in ("main", "fresh", "heldout")]
        if not (bfcl and train and all(loop)):
            continue
        rows = {r["category"]: r for r in compare(sft_bfcl, bfcl)["rows"]}
        # the family each step trained on: a group with no spread trains nothing and is not counted; a decline's
        # partner (askpair) is counted apart, where its own group had a spread
        trained = [st["family"] for st in train["steps"] if grpo.has_spread(st["rewards"])]
        trained += [
            "call beside a decline"
            for st in train["steps"]
            if grpo.has_spread(st.get("partner", {}).get("rewards", []))
        ]
        drawn = pd.Series(trained, dtype=str).value_counts()
        counted = summary([r for d in loop for r in d["rows"]])
        seen[name] = dict(rows=rows, loop=counted, declines=int(drawn.get("decline", 0)))
        seen[name]["paired"] = train["settings"].get("paired", 0)
        seen[name]["held"] = summary(loop[2]["rows"])["met"]
        table.append(
            {
                "run": f"{name} ({RUNS[name]})",
                "steps trained": ", ".join(f"{n} {f}" for f, n in drawn.items()),
                "KL penalty": train["settings"].get("beta", 0),
            }
            | {f"{c} (seeded {r['adapter']['n']})": f"{100 * r['adapter']['accuracy']:.0f}" for c, r in rows.items()}
            | {"loop met": f"{counted['met']}/{counted['total']}", "refuses": counted["refused"]}
        )
    if seen:
        start = summary([r for d in sft_loop for r in d["rows"]])
        start_held, held_n = summary(sft_loop[2]["rows"])["met"], len(sft_loop[2]["rows"])
        for v in seen.values():  # every run's seeded cases are the same 50 per category
            row |= {
                f"{c} (seeded {r['base']['n']})": f"{100 * r['base']['accuracy']:.0f}" for c, r in v["rows"].items()
            }
        row |= {"loop met": f"{start['met']}/{start['total']}", "refuses": start["refused"]}
        # the SFT adapter run again beside the last run (same machine, day and dtype): the fair row to read it by
        again = [saved_json(f"rl/ask-resample3/loop_questions_lora_{s}.json") for s in ("main", "fresh", "heldout")]
        extra = []
        if all(again) and "ask-resample3" in seen:
            beside = summary([r for d in again for r in d["rows"]])
            seen["ask-resample3"]["beside"] = beside
            extra.append(
                {k: v for k, v in row.items() if "seeded" in k}
                | {"run": "SFT adapter, run again beside ask-resample3", "steps trained": "-", "KL penalty": "-"}
                | {"loop met": f"{beside['met']}/{beside['total']}", "refuses": beside["refused"]}
            )
        display(pd.DataFrame([row] + table + extra).set_index("run").fillna("-"))
if not seen:
    print("no saved runs in this checkout: `python benchmarks/rl.py train --start lora --family blend --engine vllm`")
else:
    best = max(seen, key=lambda n: seen[n]["loop"]["met"])
    pct = lambda r, who: f"{100 * r[who]['accuracy']:.0f}"  # noqa: E731
    said = lambda names: ", ".join(  # noqa: E731
        f"`{n}` irrelevance {pct(seen[n]['rows']['irrelevance'], 'base')} → "
        f"{pct(seen[n]['rows']['irrelevance'], 'adapter')}, refusing {seen[n]['loop']['refused']}"
        for n in names
    )
    declined = [n for n in seen if seen[n]["declines"]]
    others = [n for n in seen if not seen[n]["declines"]]
    more = [n for n in declined if seen[n]["loop"]["refused"] > start["refused"]]
    held = [n for n in declined if n not in more]
    held_said = "".join(
        f"`{n}` does not: it refuses {seen[n]['loop']['refused']}"
        + ("; each of its declines was trained beside a call on the same tools. " if seen[n]["paired"] else ". ")
        for n in held
    )
    display(
        Markdown(
            f"On the loop questions the SFT adapter met {start['met']} of {start['total']} ({start_held} of the "
            f"{held_n} held out); the best RL run here, `{best}`, met {seen[best]['loop']['met']} "
            f"({seen[best]['held']} held out). Runs that practised declining: {said(declined)}; the SFT adapter "
            f"refused {start['refused']} of the loop questions. "
            + (
                f"{'Every one of them refuses' if not held else f'{len(more)} of these {len(declined)} refuse'}"
                " more loop questions than the SFT adapter: a reward that pays for plain "
                "text where no tool fits teaches the refusal as an answer, and it turns up where a tool or plain "
                "knowledge would have served. "
                if more
                else ""
            )
            + held_said
            + (f"Without declines: {said(others)}." if others else "")
            + "".join(
                f" One recipe, two seeds: `{a}` met {seen[a]['loop']['met']} of these loop questions and "
                f"its seed-1 run {seen[b]['loop']['met']}."
                for a, b in TWINS
                if a in seen and b in seen
            )
            + (
                f" Loop questions are greedy single runs, and the saved SFT row is older and from another machine: "
                f"run again beside `ask-resample3` (same machine, day and dtype), the SFT adapter met "
                f"{seen['ask-resample3']['beside']['met']} of 51 and `ask-resample3` "
                f"{seen['ask-resample3']['loop']['met']}."
                if "beside" in seen.get("ask-resample3", {})
                else ""
            )
        )
    )

# %% [markdown]
# ### Every BFCL case, not the seeded 50
# The seeded cases are a sample of each category, and their intervals are wide. These adapters also ran over every
# case of the five categories, paired case by case with the SFT adapter's run over every case: `ask-resample3`
# (free-form questions only), `askmix-resample3` (single calls and declines mixed in), `askmix-resample3-family`
# (the same mix, redrawn within each step's family), `askpair-resample3-family` (each decline beside a call on the
# same tools), and the replicates with seed 1 of `askpair-resample3-family` and `askmix-resample3`. For the cases the SFT adapter got right
# and an RL adapter missed, the taxonomy says what the RL answer became, and `dropped` counts the answers that are the
# SFT adapter's own call with an argument left out.

# %%
WHOLE = ("ask-resample3", "askmix-resample3", "askmix-resample3-family", "askpair-resample3-family")
WHOLE += tuple(b for _, b in TWINS)  # a recipe above run again with seed 1
wholes = {n: w for n in WHOLE if (w := saved_json(f"rl/{n}/whole/bfcl_qwen2.5-coder-0.5b+lora+rl.json"))}
if wholes and sft_bfcl:
    paired = {n: {r["category"]: r for r in compare(sft_bfcl, w)["rows"]} for n, w in wholes.items()}
    delta = {n: {c: 100 * (r["adapter"]["accuracy"] - r["base"]["accuracy"]) for c, r in rows.items()}
             for n, rows in paired.items()}  # fmt: skip
    mp = lambda r, who: r[who]["kinds"].get("missing_param", 0)  # noqa: E731
    by_cat = []
    for c, first in next(iter(paired.values())).items():
        row = {"category": c, "cases": first["base"]["n"], "SFT adapter": f"{100 * first['base']['accuracy']:.2f}"}
        row["missing_param, SFT"] = mp(first, "base")
        for n, rows in paired.items():
            if c in rows:
                r = rows[c]
                row[n] = f"{100 * r['adapter']['accuracy']:.2f} ({delta[n][c]:+.2f})"
                row[f"{n}: gained / lost, missing_param"] = f"{r['gained']} / {r['lost']}, {mp(r, 'adapter')}"
        by_cat.append(row)
    display(pd.DataFrame(by_cat).set_index("category"))
    said = []
    for n, w in wholes.items():
        gone, won = lost(sft_bfcl, w), lost(w, sft_bfcl)
        below = [c for c, d in delta[n].items() if round(d, 6) < -2]
        said.append(
            f"`{n}`: where a call is due it loses {gone['n']} cases the SFT adapter got right and gains {won['n']}; "
            f"{gone['kinds'].get('missing_param', 0)} of the lost are `missing_param` and "
            f"{gone['kinds'].get('no_call', 0)} `no_call` (text where a call was due), and {gone['dropped']} are the "
            f"SFT adapter's own call with an argument left out ({won['dropped']} of the gained the other way round). "
            + (
                f"{len(below)} {'category is' if len(below) == 1 else 'categories are'} more than 2 points below "
                f"the SFT adapter ({', '.join(below)})."
                if below
                else "No category is more than 2 points below the SFT adapter."
            )
        )
    for twins in (t for t in TWINS if all(n in delta for n in t)):  # one recipe, two seeds: the scale to read by
        apart = {c: abs(delta[twins[0]][c] - delta[twins[1]][c]) for c in delta[twins[0]] if c in delta[twins[1]]}
        far = max(apart, key=apart.get)
        said.append(
            f"`{twins[0]}` with seeds 0 and 1 lands {min(apart.values()):.2f} to {max(apart.values()):.2f} points "
            f"apart per category, most in {far} ({delta[twins[0]][far]:+.2f} and {delta[twins[1]][far]:+.2f} "
            "against the SFT adapter)."
        )
    if any(all(n in delta for n in t) for t in TWINS):
        said.append(
            "Where two recipes, one run each, differ in a category by less than two seeds of one recipe do there, "
            "the runs do not tell the recipes apart."
        )
    display(
        Markdown(
            " ".join(said)
            + " The free-form tasks are judged on the final answer, not on the call's arguments: leaving out an "
            "argument the answer does not need costs nothing there. The single-call tasks are scored on every "
            "argument, which is why `askmix` mixes them in."
        )
    )
else:
    print("no whole-category run saved in this checkout: see benchmarks/results/rl/README.md for its command")

# %% [markdown]
# ## 6 · A live mini-run
#
# GRPO here and now, on one family: "compute x × y − z with the calculator and give me only the result". Sampling
# at temperature 1, the model often writes numbers of its own beside the calculator's result — an intermediate
# product, sometimes a wrong one — and the host's check (the result, and no number the question did not contain)
# fails the episode. First the model answers six held-out tasks (seeds the run never draws) twice each; then a few
# GRPO steps on other tasks of the same family, with a fresh adapter on the float model; then the same six tasks
# again with the same random draws, so an answer that changed was changed by the update, not by the dice.

# %%
TRAINABLE = loaded.kind == "real-offline" and "int8" not in loaded.dtype  # the int8 build has no float weights to move
MINI = {"family": "calc", "steps": from_env("TOOLKIT_RL_MINI_STEPS", 3, count(1, 50)), "group": 4, "lr": 4e-4}
HELD = {"samples": 2, "temperature": 1.0, "seed": 99, "max_new": 40, "batch": 12}
if not TRAINABLE:
    print(
        f"the live mini-run trains the float model (~{FULL_MODEL_BYTES['float32'] / 2**30:.1f} GB); this kernel has "
        f"{loaded.name} and {memory_available() / 2**30:.1f} GB available, so it is not run here: "
        "the saved run above is the measured one"
    )
else:
    from toolkit.rl.train import train_tasks  # lazy: it imports peft (~170 MB), needed only where the model trains

    t_mini = time.perf_counter()
    held = envs.tasks(MINI["family"], seed=envs.EVAL_SEED, n=6)
    before = evaluate(loaded, held, **HELD)
    print(f"before: mean reward {before['summary']['mean_reward']:+.2f} on {before['summary']['n']} held-out episodes")
    mini = train_tasks(
        loaded,
        envs.tasks(MINI["family"], seed=5, n=6),
        steps=MINI["steps"],
        group=MINI["group"],
        lr=MINI["lr"],
        max_new=HELD["max_new"],
    )
    after = evaluate(loaded, held, **HELD)
    mini_s = time.perf_counter() - t_mini
    curve = pd.DataFrame(mini["steps"])
    bars = [before["summary"]["mean_reward"], *curve["mean_reward"], after["summary"]["mean_reward"]]
    steps_x = [f"step {r.step}<br>{'trained' if r.trained_tokens else 'no spread'}" for r in curve.itertuples()]
    fig = go.Figure(
        [
            go.Bar(
                x=["held out<br>before", *steps_x, "held out<br>after"],
                y=bars,
                text=[f"{v:+.2f}" for v in bars],
                textposition="outside",
                marker_color=["#888", *["#4a7"] * len(curve), "#27a"],
            )
        ],
        layout=dict(
            title=f"Mean reward: held-out {MINI['family']} tasks before and after, each training group between",
            yaxis=dict(title="mean reward", range=[min(0, *bars) - 0.05, 1.15]),
            height=320,
        ),
    )
    fig.show()
    moved = pd.DataFrame(changed(before, after))
    if len(moved):
        display(moved)
    b, a = before["summary"], after["summary"]
    display(
        Markdown(
            f"Held-out mean reward **{b['mean_reward']:+.2f} → {a['mean_reward']:+.2f}** ({b['met']} → {a['met']} of "
            f"{a['n']} episodes met, the same random draws); {len(moved)} episodes changed their reward. "
            f"{int((curve['trained_tokens'] > 0).sum())} of {len(curve)} training groups had a spread and moved the "
            f"model; groups whose members all scored the same taught nothing. The whole cell took {mini_s:.0f} s: "
            f"{b['seconds'] + a['seconds']:.0f} s for the two evaluations, {curve['seconds'].iloc[-1]:.0f} s for "
            f"{len(curve)} training steps ({cpu_threads()} threads, {loaded.dtype})."
        )
    )

# %% [markdown]
# ## What this does not show
#
# The reward here checks outcomes the host can verify — a call's name and arguments, a declined request, an
# answer that states what the tools returned. It cannot check what no rule states (a good explanation, a polite
# refusal), and a policy that finds a gap in the rule is rewarded for it: the tests above exist because of that.
# The run is small — tens of steps on a 0.5B model on two CPU cores, where published runs use thousands of
# prompts and GPUs — and the held-out tasks are the same kinds as the training ones.
