"""Claims about where tool calling comes from (§14.5.2, §14.5.7), checked on the real model's fine-tune.

What it does
- ``learned_claims()``: §14.5.2's "the ability comes from training data: the template was seen, the format was
  learned" from the saved BFCL runs of the base model (every native-mode answer, no grammar) and of the kit's LoRA
  adapter on the same cases (the counting ``toolkit.eval.learned`` does for the notebook, read here from the files); §14.5.7's "rendered into one token sequence with the same
  chat template, tool results excluded from the loss" from the adapter's manifest and its training data, relabelled
  here with the kit's mask (``toolkit.sft.data``); §14.5.7's "without the mask the model learns to make up tool
  output" from the saved masked-vs-unmasked fine-tunes of the stand-in (``benchmarks/sft_mask.py``).

One check per claim; the adapter's manifest and the saved runs are read once per ledger run.

What it leaves out
- Training from scratch (the base model already writes JSON calls: the fine-tune teaches the template's format).
"""

from __future__ import annotations

from toolkit.book.ledger import BOOK, Claim, make_verdict
from toolkit.book.registry import Group, loader
from toolkit.models import adapter_manifest
from toolkit.parse import wrote_tag
from toolkit.paths import saved_json
from toolkit.sft.data import dataset, labelled
from toolkit.sft.labels import IGNORE_INDEX
from toolkit.tokenizer import qwen_tokenizer

BASE, ADAPTER = "bfcl_qwen2.5-coder-0.5b.json", "bfcl_qwen2.5-coder-0.5b+lora.json"
MASK = "sft_mask.json"  # benchmarks/sft_mask.py: the stand-in fine-tuned with and without the tool-result mask
LEARNED = Group("learned")


def _due(doc: dict) -> dict[str, dict]:
    """Native-mode answers where a call is due (every category but irrelevance), by case id."""
    cases = doc["accuracy"]["data"]["cases"]
    return {c["id"]: c for c in cases if c["mode"] == "native" and not c["id"].startswith("irrelevance")}


def _tagged(cases) -> int:
    return sum(wrote_tag(c.get("text")) for c in cases)


@loader
def adapter() -> dict | None:
    """The shipped LoRA adapter's manifest (``toolkit.models.adapter_manifest``), or None: then nothing is claimed."""
    return adapter_manifest()


@loader
def adapter_runs() -> tuple[dict, dict] | None:
    """The saved BFCL runs of the base model and of the adapter (native-mode answers where a call is due), or None."""
    base, lora = saved_json(BASE), saved_json(ADAPTER)
    return None if base is None or lora is None else (_due(base), _due(lora))


@loader
def mask_doc() -> dict | None:
    return saved_json(MASK)


@LEARNED(
    "format-from-training",
    f"{BOOK}.2",
    "Calling tools in the template's format is learned from training data rendered with that template: a model that "
    "never saw the format does not write it; trained on it, it does.",
    answers=("能力来自训练数据——模板见过、格式学会了",),
)
def format_from_training(adapter, adapter_runs):
    if adapter is None or adapter_runs is None:
        return None
    base, lora = adapter_runs
    tagged, n_all = _tagged(base.values()), len(base)
    same = [i for i in lora if i in base]
    n_due = len(same)
    if not n_due:
        return None
    a_rate, b_rate = _tagged(lora[i] for i in same) / n_due, _tagged(base[i] for i in same) / n_due
    return (
        f"BFCL native mode (no grammar, no forced prefix): the base Qwen2.5-Coder-0.5B wrote a <tool_call> block in "
        f"{tagged} of {n_all} answers where a call was due; after {adapter['steps']} LoRA steps on "
        f"{adapter['data']['examples']} generated conversations rendered with its own template, on the same {n_due} "
        f"cases: {100 * a_rate:.1f}% (base {100 * b_rate:.1f}%)",
        *make_verdict(
            a_rate >= 0.8 and b_rate <= 0.05,
            "the fine-tune did not make the model write the template's format by itself",
            [
                (
                    n_due < 200,
                    f"the adapter's rate comes from a seeded subset of {n_due} cases (the base rate from all "
                    f"{n_all}); and the base model already wrote the calls' JSON untagged, so what training "
                    "added here is the template's format, not the skill of calling",
                )
            ],
        ),
    )


def tool_results_in_trained_spans(man: dict) -> tuple[int, int, int]:
    """The adapter's answer-after-a-result conversations relabelled with the kit's mask: (tool results, of them
    inside a trained span, conversations)."""
    s = man["settings"]
    data = dataset(s["groups"], seed=s["data_seed"], per_group=s["per_group"], mix=s.get("mix", "v1"))
    exs = [e for e in data if e.kind == "follow_up"]
    leaked = tool_tokens = 0
    for e, r in zip(exs, labelled(exs, qwen_tokenizer("qwen2.5"))):
        trained = "".join(t.text for t, lab in zip(r.rendering.tokens, r.labels) if lab != IGNORE_INDEX)
        for m in e.messages:
            if m["role"] == "tool":
                tool_tokens += 1
                leaked += m["content"] in trained
    return tool_tokens, leaked, len(exs)


@LEARNED(
    "sft-same-template-real",
    f"{BOOK}.7",
    "Training conversations are rendered into one token sequence with the chat template the model is served with, "
    "and the tool results are left out of the loss.",
    supports=("按同一套聊天模板渲染成一条词元序列", "工具返回的结果…从损失里排除"),
)
def sft_same_template_real(adapter):
    if adapter is None:
        return None
    tool_tokens, leaked, n = tool_results_in_trained_spans(adapter)
    return (
        f"the kit's adapter was trained on conversations rendered by the installed model's own chat template "
        f"(toolkit.sft.data.labelled), generator {adapter['data']['generator']!r}, data sha256 "
        f"{adapter['data']['sha256'][:12]}…; relabelled here: {tool_tokens} tool results in its {n} "
        f"answer-after-a-result conversations, {leaked} of them inside a trained span",
        *make_verdict(tool_tokens > 0 and leaked == 0, "a tool result is inside the trained tokens"),
    )


@LEARNED(
    "unmasked-invents",
    f"{BOOK}.7",
    "Leave the tool results in the loss and the model learns to write them itself, made up.",
    answers=("漏掉这一步，模型会学着自己编造工具输出",),
)
def _invents_claim(mask_doc):
    """§14.5.7: leave the tool results in the loss and the model learns to write them itself — from the saved
    masked-vs-unmasked fine-tunes of the stand-in (``benchmarks/sft_mask.py``; it needs no shipped adapter)."""
    doc = mask_doc
    if doc is None:
        return None
    c = doc["counts"]
    (um, n), (mm, _) = c["unmasked"]["greedy"]["tool_response"], c["masked"]["greedy"]["tool_response"]
    real_u = c["unmasked"]["greedy"]["matches_real"][0]
    return (
        f"{doc['model']}, {doc['date'][:10]}, commit {doc['commit']}: the same data, start and vocabulary fine-tuned "
        f"twice ({doc['settings'].get('steps')} steps each); greedy on {n} held-out prompts cut after a call, the "
        f"unmasked run wrote a <tool_response> block itself {um}/{n} times, the masked run {mm}/{n}; of the "
        f"unmasked run's made-up results {real_u} equalled the real tool's",
        *make_verdict(
            n > 0 and um / n > 0.5 and mm / n < um / n - 0.4,
            "the unmasked run did not write tool results itself much more often than the masked one",
            [
                (
                    doc["model"].startswith("stand-in"),
                    "measured on the kit's random-weight stand-in, which learns the format and never meaning: the "
                    "mechanism, not the rate a real model would show",
                )
            ],
        ),
    )


def learned_claims() -> list[Claim]:
    return LEARNED.run()
