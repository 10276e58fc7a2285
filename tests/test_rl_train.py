"""The GRPO loop on the stand-in: it runs, writes its reward curve, its adapter round-trips, and a run resumes."""

import json
import random
import re

import pytest
import torch

from toolkit.models import load
from toolkit.rl import train as T


def test_two_steps_save_an_adapter_that_loads_back_and_a_run_resumes(tmp_path):
    loaded = load("stand-in", quiet=True, dtype=torch.float32)
    prompt = loaded.tokenizer("Say something.")["input_ids"]
    reward = lambda ids: sum(i % 2 == 0 for i in ids) / max(1, len(ids))  # noqa: E731  a toy reward with spread
    lines = []
    res = T.train(
        loaded,
        [prompt],
        reward,
        steps=2,
        group=4,
        lr=1e-2,
        max_new=3,
        temperature=40.0,
        out=tmp_path,
        save_every=2,
        log=lines.append,
    )
    assert [s["step"] for s in res["steps"]] == [1, 2] and "mean reward" in lines[-1] and "ETA" in lines[-1]
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == res["steps"]
    ids = torch.tensor([prompt])
    with torch.no_grad():
        trained = loaded.model(input_ids=ids).logits
    fresh = load("stand-in", quiet=True, dtype=torch.float32)
    with torch.no_grad():
        before = fresh.model(input_ids=ids).logits
    T.load_adapter(fresh, tmp_path / "adapter")
    with torch.no_grad():
        after = fresh.model(input_ids=ids).logits
    assert not torch.allclose(before, trained)  # training moved the model
    torch.testing.assert_close(after, trained)  # and the saved adapter reproduces it
    more = T.train(
        fresh, [prompt], reward, steps=3, group=4, lr=1e-2, max_new=3, temperature=40.0, out=tmp_path, log=lines.append
    )
    assert "resuming at step 2" in lines and [s["step"] for s in more["steps"]] == [1, 2, 3]


def _call(name, **args):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_episodes_train_on_the_models_own_tokens_and_resume(tmp_path):
    """train_tasks on a multi-turn task with a scripted group: two members look the cities up and answer right,
    two guess. The rewards differ, so the adapter moves; the trained tokens are exactly the SFT-labelled ones of
    the rendered episodes (tool results excluded); a second run resumes."""
    from toolkit.rl import envs
    from toolkit.sft.labels import label

    task = next(t for t in envs.multi_tasks(0, 20) if t.family == "warmer")
    warm, cold, temp = task.truth["warm"], task.truth["cold"], task.truth["temp"]

    def scripted(batch):
        out = []
        for j, (msgs, _) in enumerate(batch):
            if msgs[-1]["role"] == "tool":  # the look-ups came back
                out.append(f"{warm} is warmer, at {temp} degrees.")
            elif j % 2 == 1:
                out.append(f"{cold} is warmer.")  # a guess: no look-up, wrong
            else:
                out.append(_call("get_weather", city=warm) + "\n" + _call("get_weather", city=cold))
        return out

    loaded = load("stand-in", quiet=True, dtype=torch.float32)
    lines = []
    res = T.train_tasks(
        loaded, [task], steps=1, group=4, lr=1e-2, out=tmp_path, save_every=1, log=lines.append, policy=scripted
    )
    row = res["steps"][0]
    assert row["rewards"] == [1.0, 0.0, 1.0, 0.0] and row["met"] == 2 and row["calls"] == [2, 0, 2, 0]
    eps = envs.rollout_group(scripted, [task] * 4)
    labelled = [label(e.messages, task.tools, "qwen3", tokenizer=loaded.tokenizer) for e in eps]
    assert row["trained_tokens"] == sum(sum(r.trained) for r in labelled)
    tool_tokens = sum(1 for e in eps for m in e.messages if m["role"] == "tool")
    assert tool_tokens == 4 and "mean reward +0.500" in lines[-1]
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    again = load("stand-in", quiet=True, dtype=torch.float32)
    more = T.train_tasks(
        again, [task], steps=2, group=4, lr=1e-2, out=tmp_path, save_every=1, log=lines.append, policy=scripted
    )
    assert "resuming at step 1" in lines and [s["step"] for s in more["steps"]] == [1, 2]
    # KL to the starting model: 0 before the first update (LoRA starts as the identity), > 0 once it has moved
    assert more["steps"][0]["kl"] == 0.0 < more["steps"][1]["kl"]
    with pytest.raises(ValueError, match="group"):
        T.train_tasks(again, [task], group=1, policy=scripted)


def test_a_resumed_run_takes_the_steps_an_unbroken_one_takes(tmp_path):
    """Three steps in one go, and two steps then a resume in a fresh load, end on the same adapter: the optimizer's
    moments are saved beside it. With them deleted, the resumed third step differs and the log says why."""
    from toolkit.rl import envs

    task = next(t for t in envs.multi_tasks(0, 20) if t.family == "calc")

    value = int(task.truth["value"])

    def scripted(batch):  # half compute and answer right, half guess: a spread every step
        out = []
        for j, (msgs, _) in enumerate(batch):
            if msgs[-1]["role"] == "tool":
                out.append(f"The result is {value}.")
            else:
                out.append("It is 12." if j % 2 else _call("calculator", expression=str(value)))
        return out

    def run(out, steps, lines=None):
        torch.manual_seed(0)  # the same fresh LoRA init for every run
        loaded = load("stand-in", quiet=True, dtype=torch.float32)
        T.train_tasks(loaded, [task], steps=steps, group=4, lr=1e-2, out=out, save_every=1, policy=scripted,
                      log=(lines.append if lines is not None else lambda s: None))  # fmt: skip
        return {n: p.detach().clone() for n, p in loaded.model.named_parameters() if "lora_" in n}

    unbroken = run(tmp_path / "a", 3)
    run(tmp_path / "b", 2)
    lines = []
    resumed = run(tmp_path / "b", 3, lines)
    assert "resuming at step 2" in lines and (tmp_path / "b" / T.OPTIMIZER_FILE).exists()
    saved = json.loads((tmp_path / "b" / "results.json").read_text())
    assert [(r["after_step"], r["optimizer"]) for r in saved["resumed"]] == [(2, "saved")]  # the file says so
    assert "resumed" not in json.loads((tmp_path / "a" / "results.json").read_text())
    for n, w in unbroken.items():
        torch.testing.assert_close(resumed[n], w)
    run(tmp_path / "c", 2)
    (tmp_path / "c" / T.OPTIMIZER_FILE).unlink()
    lines = []
    afresh = run(tmp_path / "c", 3, lines)
    assert any("no optimizer state saved: AdamW starts afresh" in x for x in lines)
    assert any(not torch.allclose(afresh[n], w) for n, w in unbroken.items())
    run(tmp_path / "d", 2)
    (tmp_path / "d" / T.OPTIMIZER_FILE).write_bytes(b"\x80\x02truncated")  # a damaged file: one line, no traceback
    lines = []
    run(tmp_path / "d", 3, lines)
    assert any("optimizer.pt unreadable" in x and "AdamW starts afresh" in x for x in lines)


def test_the_expected_reward_rises_on_a_toy_task():
    """The smoke test of learning itself: one prompt, one token to write, reward 1 for any token but the one the
    untrained model writes a third of the time (the stand-in's random weights need temperature 6 for that spread).
    The expected reward (1 minus that token's probability at the sampling temperature, computed exactly from the
    logits, no sampling noise) must rise within a few GRPO steps; the logged mean rewards are the groups' own."""
    loaded = load("stand-in", quiet=True, dtype=torch.float32)
    prompt = loaded.tokenizer("Pick a word.")["input_ids"]
    ids, temperature = torch.tensor([prompt]), 6.0

    def expected_reward(model, avoid):
        with torch.no_grad():
            return 1 - float(torch.softmax(model(input_ids=ids).logits[0, -1].float() / temperature, -1)[avoid])

    with torch.no_grad():
        avoid = int(loaded.model(input_ids=ids).logits[0, -1].argmax())
    before = expected_reward(loaded.model, avoid)
    res = T.train(
        loaded,
        [prompt],
        lambda completion: float(completion[:1] != [avoid]),
        steps=6,
        group=8,
        lr=1e-2,
        max_new=1,
        temperature=temperature,
        log=lambda line: None,
    )
    after = expected_reward(loaded.model, avoid)
    assert 0.5 < before < 0.8 and after > before + 0.2, (before, after)
    assert all(s["mean_reward"] == sum(s["rewards"]) / 8 for s in res["steps"])


def test_the_kl_penalty_enters_the_loss_once_the_adapter_has_moved():
    """beta > 0 adds beta * KL to the starting model: nothing at step 1 (the LoRA starts as the identity), more
    loss at step 2 than the same run without it; the setting is saved with the run."""
    from toolkit.rl import envs

    task = next(t for t in envs.multi_tasks(0, 20) if t.family == "calc")
    x, y, z = re.findall(r"\d+", task.question)[:3]

    def scripted(batch):  # two members use the calculator and answer right, two guess
        return [
            f"The result is {task.truth['value']:g}."
            if msgs[-1]["role"] == "tool"
            else _call("calculator", expression=f"{x}*{y}-{z}")
            if j % 2 == 0
            else "I think it is 7."
            for j, (msgs, _) in enumerate(batch)
        ]

    runs = {}
    for beta in (0.0, 50.0):
        torch.manual_seed(0)
        loaded = load("stand-in", quiet=True, dtype=torch.float32)
        runs[beta] = T.train_tasks(
            loaded, [task], steps=2, group=4, lr=5e-2, log=lambda s: None, policy=scripted, beta=beta
        )
    (s0, s1), (b0, b1) = runs[0.0]["steps"], runs[50.0]["steps"]
    assert s0["rewards"] == b0["rewards"] and s0["rewards"] != [s0["rewards"][0]] * 4
    assert s0["loss"] == pytest.approx(b0["loss"]) and s1["kl"] > 0
    assert b1["loss"] > s1["loss"] + 1e-6
    assert runs[50.0]["settings"]["beta"] == 50.0 and "beta" not in runs[0.0]["settings"]


def _spread_only_on(learnable, seen: list | None = None):
    """A scripted batch policy: on ``learnable`` (a calc task) half the members compute it with the calculator and
    half guess, so its group has a spread; on every other task all members guess alike. ``seen`` collects the
    questions rolled out."""
    x, y, z = re.findall(r"\d+", learnable.question)[:3]

    def scripted(batch):
        out = []
        for j, (msgs, _) in enumerate(batch):
            q = next(m["content"] for m in msgs if m["role"] == "user")
            if seen is not None:
                seen.append(q)
            if q != learnable.question:
                out.append("I think it is 7.")
            elif msgs[-1]["role"] == "tool":
                out.append(f"The result is {learnable.truth['value']:g}.")
            else:
                out.append(_call("calculator", expression=f"{x}*{y}-{z}") if j % 2 == 0 else "I think it is 7.")
        return out

    return scripted


def test_resample_rolls_out_other_tasks_where_a_group_has_no_spread():
    """Dynamic sampling: a task every member answers alike is replaced by another drawn task (up to ``resample``
    times), so the step trains; without it the step has no spread and no update."""
    from toolkit.rl import envs

    calc = [t for t in envs.multi_tasks(0, 40) if t.family == "calc"][:6]
    learnable = calc[0]
    scripted = _spread_only_on(learnable)

    pool = calc[1:3] + [learnable]
    seed = next(s for s in range(100) if random.Random(s).choice(pool) is not learnable)  # step 1 draws a dull task
    runs = {}
    for resample in (0, 16):
        torch.manual_seed(0)
        loaded = load("stand-in", quiet=True, dtype=torch.float32)
        runs[resample] = T.train_tasks(
            loaded, pool, steps=1, group=4, lr=5e-2, log=lambda s: None, policy=scripted, seed=seed, resample=resample
        )
    plain, again = runs[0]["steps"][0], runs[16]["steps"][0]
    assert len(set(plain["rewards"])) == 1 and plain["trained_tokens"] == 0 and "resampled" not in plain
    assert len(set(again["rewards"])) > 1 and again["trained_tokens"] > 0 and 1 <= again["resampled"] <= 16
    assert runs[16]["settings"]["resample"] == 16 and "resample" not in runs[0]["settings"]


def test_resample_within_the_family_keeps_the_mix():
    """``resample_within="family"``: a step drawn from one family redraws only from that family, so a mix's
    proportions of trained steps hold; a family with no spread anywhere skips its step instead of handing it to
    another family. Without the option the same draw rolls out other families' tasks."""
    from toolkit.rl import envs

    tasks = envs.multi_tasks(0, 40)
    calc = [t for t in tasks if t.family == "calc"][:3]
    warmer = [t for t in tasks if t.family == "warmer"][:6]
    learnable = calc[0]
    seen: list[str] = []
    scripted = _spread_only_on(learnable, seen)

    family_of = {t.question: t.family for t in tasks}
    pool = calc[1:] + warmer  # the learnable task is left out: no task has a spread
    pool_learnable = calc + warmer
    dull_calc = lambda p, s: random.Random(s).choice(p) in calc[1:]  # noqa: E731
    seed = next(s for s in range(200) if dull_calc(pool, s) and dull_calc(pool_learnable, s))  # step 1: dull calc
    rows = {}
    for within, p in ((None, pool), ("family", pool), ("family", pool_learnable)):
        seen.clear()
        torch.manual_seed(0)
        loaded = load("stand-in", quiet=True, dtype=torch.float32)
        res = T.train_tasks(
            loaded,
            p,
            steps=1,
            group=4,
            lr=5e-2,
            log=lambda s: None,
            policy=scripted,
            seed=seed,
            resample=8,
            resample_within=within,
        )
        rows[(within, len(p))] = (res["steps"][0], {family_of[q] for q in seen}, res["settings"])
    (plain, fam_plain, _), (kept, fam_kept, settings), (found, fam_found, _) = rows.values()
    assert plain["drawn"] == "calc" and "warmer" in fam_plain  # without the option: other families' tasks too
    assert fam_kept == {"calc"} and kept["family"] == "calc" and kept["resampled"] == 8 and kept["trained_tokens"] == 0
    assert settings["resample_within"] == "family"
    assert fam_found == {"calc"} and found["family"] == "calc" and found["trained_tokens"] > 0
    with pytest.raises(ValueError, match="resample_within"):
        T.train_tasks(loaded, pool, steps=1, resample=2, resample_within="all", policy=scripted)


def test_a_run_resumes_in_a_fresh_process_whose_adapter_changes_the_parameter_count(tmp_path):
    """A fresh process loads the starting model and attaches a new adapter before it compares with the saved run;
    the adapter's own weights must not make it another model (rank 64 from layer 0 adds ~0.2M to the stand-in's
    count, which a description rounds to 0.1M)."""
    first = load("stand-in", quiet=True, dtype=torch.float32)
    ids = first.tokenizer("Say something.")["input_ids"]
    before = first.describe(unmerged_lora=False)
    reward = lambda got: sum(i % 2 == 0 for i in got) / max(1, len(got))  # noqa: E731
    how = dict(group=4, lr=1e-2, max_new=3, temperature=40.0, rank=64, first_layer=0, out=tmp_path)
    lines = []
    T.train(first, [ids], reward, steps=1, save_every=1, log=lines.append, **how)
    assert first.description != before  # the adapter is counted in the description ...
    assert first.describe(unmerged_lora=False) == before  # ... and left out of the name a run is matched on
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["model"] == before
    again = load("stand-in", quiet=True, dtype=torch.float32)  # as a new process has it: no adapter yet
    more = T.train(again, [ids], reward, steps=2, log=lines.append, **how)
    assert "resuming at step 1" in lines and [s["step"] for s in more["steps"]] == [1, 2]
    fresh = load("stand-in", quiet=True, dtype=torch.float32)
    other = T.train(fresh, [ids], reward, steps=1, log=lines.append, **how | {"lr": 2e-2})  # says why it starts over
    assert any(x.endswith("saved with another lr; starting over") for x in lines)
    assert [s["step"] for s in other["steps"]] == [1]


def test_a_damaged_save_is_one_error_and_is_kept(tmp_path):
    """``saved_run``: none, a run, and a file that is not one (truncated, binary, the wrong shape): a ValueError
    naming the file, which stays as it was."""
    assert T.saved_run(tmp_path) is None
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"steps": [{"step": 1}], "resumed": []}))
    assert T.saved_run(tmp_path)["steps"] == [{"step": 1}]
    for bad in (b'{"steps": [', b"\xff\xfe", b"[]", b'{"steps": 3}', b'{"steps": [], "resumed": {}}'):
        path.write_bytes(bad)
        with pytest.raises(ValueError, match="results.json") as e:
            T.saved_run(tmp_path)
        assert "\n" not in str(e.value) and path.read_bytes() == bad


def test_a_paired_decline_trains_its_partner_in_the_same_update():
    """A decline task with a ``partner`` rolls out a group of each: here every member declines the decline task
    (no spread) and half the partner's members make its call. The step trains on both groups (the partner's spread,
    the decline's tokens with advantage 0 in the same batch); the same task without its partner has nothing to learn.
    The row keeps the task's own rewards and the partner's beside them."""
    import dataclasses

    from toolkit.rl import envs
    from toolkit.sft.labels import label

    task = envs.paired_decline_tasks(0, 8)[0]
    mate = task.partner
    made = "".join(_call(c["name"], **c["arguments"]) for c in mate.want)

    def scripted(batch):
        out = []
        for j, (msgs, _) in enumerate(batch):
            q = next(m["content"] for m in msgs if m["role"] == "user")
            out.append(made if q == mate.question and j % 2 == 0 else "Sorry, none of these tools can do that.")
        return out

    rows, settings = {}, {}
    for t in (task, dataclasses.replace(task, partner=None)):
        torch.manual_seed(0)
        loaded = load("stand-in", quiet=True, dtype=torch.float32)
        lines = []
        res = T.train_tasks(loaded, [t], steps=1, group=4, lr=5e-2, log=lines.append, policy=scripted, seed=0)
        rows[t.partner is not None] = (res["steps"][0], lines[-1], loaded)
        settings[t.partner is not None] = res["settings"]
    (paired, line, loaded), (alone, _, _) = rows[True], rows[False]
    assert len(set(paired["rewards"])) == 1 and paired["family"] == "decline"
    assert paired["partner"]["family"] == "call" and sorted(paired["partner"]["rewards"]) == [0.0, 0.0, 1.0, 1.0]
    assert paired["partner"]["met"] == 2 and "partner +0.500" in line

    def own_tokens(x):  # the labelled tokens of the first member's answer to ``x`` (the call, for the partner)
        said = {"role": "assistant", "content": scripted([(x.messages, None)])[0]}
        return sum(label(x.messages + [said], x.tools, tokenizer=loaded.tokenizer).trained)

    # both groups' own tokens: four declines of the task, two declines and two calls of the partner
    assert paired["trained_tokens"] == 6 * own_tokens(task) + 2 * own_tokens(mate)
    assert alone["trained_tokens"] == 0 and "partner" not in alone and alone["kl"] is None
    assert settings[True]["paired"] == 1 and "paired" not in settings[False]  # a saved run says it was paired
