"""Claims about what the kit itself shows (the loss mask, parallel calls, the cache, shape vs meaning,
renormalisation computed exactly on the random-weight stand-in) and §14.5.1's exact multiplication, checked on the
kit's own runs and saved measurements: one check per claim.

Leaves out: re-running the real-model measurement (its saved results are read).
"""

from __future__ import annotations

import json

from toolkit.backends.scripted import ScriptedBackend
from toolkit.book import evidence  # noqa: F401  (registers the shared loaders)
from toolkit.book.claims_grammar import strict_unknown_field
from toolkit.book.ledger import Claim, make_verdict
from toolkit.book.registry import Group, loader
from toolkit.conversations import CALCULATOR, answer_text, call_text
from toolkit.grammar.check import chat_prompt
from toolkit.grammar.compile import compile_schema, compile_tools
from toolkit.grammar.distortion import distortion
from toolkit.grammar.mask import replay
from toolkit.loop.examples import example
from toolkit.loop.loop import run
from toolkit.loop.steps import Executed, Generated
from toolkit.models import STAND_IN, stand_in
from toolkit.parse import parse_tool_calls
from toolkit.paths import saved_json
from toolkit.sft.labels import IGNORE_INDEX, label
from toolkit.tools import TOOLS, schemas

KIT = Group("kit")
MULTIPLICATION_RESULTS = "multiplication.json"  # in benchmarks/results (toolkit.paths.results_file finds it)


# ================================================================ what the notebooks show, as claims
# §14.5.2 (constrained decoding), §14.5.7 (loss mask), §14.5.8 (engines, parallel calls), §14.5.1
@KIT(
    "shape-not-meaning",
    "§14.5.2 constrained decoding",
    "Constrained decoding guarantees the shape (braces, field names, types), not the meaning of the arguments.",
    answers=(
        "JSON Schema 编译成文法，每步为 logits 生成一个掩码",
        "保证输出形状合法——括号配对、字段名在集合内、类型正确",
        "不保证参数语义正确（城市名写成邻市）",
        "约束解码可以挡住参数名不在 schema 里的情况，挡不住语义错误",
    ),
    supports=("切出 <tool_call> 与 </tool_call> 之间的 JSON，校验参数，执行",),
)
def shape_not_meaning(qwen3_tokenizer):
    # xgrammar accepts a schema-valid call with the wrong city and rejects an unknown field
    tok = qwen3_tokenizer
    grammar = compile_tools(schemas(["get_weather"]), tok)

    def ids_of(args):
        body = json.dumps({"name": "get_weather", "arguments": args}, ensure_ascii=False)
        return tok.encode(f"<tool_call>\n{body}\n</tool_call>", add_special_tokens=False)

    wrong_city = replay(grammar, ids_of({"city": "上海"}) + [tok.convert_tokens_to_ids("<|im_end|>")])
    unknown_field = replay(grammar, ids_of({"town": "北京"}))
    strict = strict_unknown_field(tok)  # the unknown field again, with and without xgrammar's strict_mode
    return (
        "xgrammar mask compiled from get_weather's schema, replaying Qwen3 token ids of a call for a user who asked "
        f"about 北京: city 上海 → accepted {wrong_city[0]}, complete {wrong_city[1]}; unknown field 'town' → accepted "
        f"{unknown_field[0]}; the arguments alone with 'town': accepted with strict_mode {strict['strict']}, without "
        f"{strict['loose']}; the schema has an additionalProperties rule: {strict['schema_forbids']}",
        *make_verdict(
            wrong_city == (True, True) and not unknown_field[0],
            "the grammar rejects a valid shape or accepts an unknown field",
            [
                (
                    strict["loose"] and not strict["schema_forbids"],
                    "the unknown field is refused only in xgrammar's strict mode (its default, which the kit keeps): "
                    "get_weather's schema does not forbid extra fields, JSON Schema allows them, and with "
                    "strict_mode=False the grammar accepts 'town'",
                )
            ],
        ),
    )


CITIES = {"enum": ["Paris", "Parma", "Pavia", "Perth", "Lyon"]}  # shared prefixes: masking acts mid-word


@KIT(
    "renormalisation-distorts",
    "§14.5.2 constrained decoding",
    "Constrained decoding renormalises step by step, and that changes the distribution: an output's chance under the "
    "mask is not its chance under the model among the valid outputs.",
    answers=("逐步归一化会改变分布",),
)
def renormalisation_claim(qwen3_tokenizer):
    """§14.5.2 (book §9.4.5): step-wise masking + renormalisation is not the model's distribution restricted to
    valid outputs — computed exactly (``toolkit.grammar.distortion``: every token path of a five-city enum) on the
    random-weight stand-in, built from its config in well under a second (no weights are read)."""
    tok, model = qwen3_tokenizer, stand_in("qwen3", seed=0)
    d = distortion(model, tok, chat_prompt(tok, "Which city?"), compile_schema(CITIES, tok))
    tv = sum(abs(pm - pk) for _t, pm, pk, _n in d.rows) / 2  # total variation between the two distributions
    table = ", ".join(f"{t} {pm:.3f} vs {pk:.3f}" for t, pm, pk, _n in d.rows)
    return (
        f"toolkit.grammar.distortion, exact over {sum(r[3] for r in d.rows)} token paths ({d.nodes} forwards; "
        f"masked mass cut as negligible {d.pruned:.1g}) of a {len(CITIES['enum'])}-city enum, xgrammar mask, on the "
        f"{STAND_IN} (random weights, Qwen3 shape): P(model, renormalised over valid outputs) vs P(masked): {table}; "
        f"total variation {tv:.3f}; likeliest output {d.argmax_model} vs {d.argmax_masked} under the mask",
        *make_verdict(
            tv > 10 * d.pruned + 1e-3,
            "masked decoding gives the valid outputs the model's own (renormalised) probabilities",
            [
                (
                    model.config.num_hidden_layers < 8,
                    "shown on a random-weight stand-in: the mechanism is exact, its size on a trained model is not "
                    "measured here (notebook 02 runs the same function on the loaded model)",
                ),
                (
                    d.valid_mass < 0.01,
                    f"the valid outputs hold only {d.valid_mass:.1g} of this model's own probability, so "
                    "renormalising has much to redistribute",
                ),
            ],
        ),
    )


@loader
def mask_parts() -> dict:
    """Per template segment, [masked, trained] token counts of the SFT labels on a rendered calculator trajectory."""
    ex = example("calculator")
    call = {"type": "function", "function": {"name": CALCULATOR["tool"], "arguments": CALCULATOR["arguments"]}}
    traj = ex["messages"] + [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": '{"result": 37.5}'},
        {"role": "assistant", "content": answer_text(CALCULATOR, {"result": 37.5})},
    ]
    lab = label(traj, [t.schema for t in ex["tools"].values()], "qwen3")
    parts = {}
    for t, y in zip(lab.rendering.tokens, lab.labels):
        parts.setdefault(t.segment, [0, 0])[y != IGNORE_INDEX] += 1
    return parts


@KIT(
    "loss-mask",
    "§14.5.7",
    "In SFT on tool trajectories the tool results are masked out of the loss; the model's calls and answers are "
    "trained.",
    answers=("按同一套聊天模板渲染成一条词元序列", "工具返回的结果…从损失里排除"),
)
def loss_mask(mask_parts):
    tr, calls = mask_parts.get("tool_response", [0, 0]), mask_parts.get("tool_call", [0, 0])
    return (
        f"toolkit.sft.labels.label on a rendered calculator trajectory: <tool_response> tokens trained {tr[1]} of "
        f"{sum(tr)}; <tool_call> tokens trained {calls[1]} of {sum(calls)}",
        *make_verdict(
            tr[1] == 0 and sum(tr) > 0 and calls[1] == sum(calls) > 0, "tool results are trained or calls are not"
        ),
    )


@KIT(
    "prompt-mask-same",
    "§14.5.7",
    "Leaving the tool results out of the loss is the same technique as masking the prompt's positions in ordinary "
    "SFT (§8.1.2).",
    answers=("与 8.1.2 节对提示词位置做掩码是同一手法",),
)
def prompt_mask_claim(mask_parts: dict):
    """§14.5.7: masking the tool results is the technique that masks the prompt (the book's §8.1.2), checked by
    torch's own loss: positions labelled ``IGNORE_INDEX`` add nothing, whichever segment they belong to."""
    import torch  # lazy: the loss check only

    parts = mask_parts
    prompt = [parts.get(k, [0, 0]) for k in ("system", "tools", "user")]
    result = parts.get("tool_response", [0, 0])
    same_value = IGNORE_INDEX == torch.nn.CrossEntropyLoss().ignore_index
    # torch's cross-entropy on random logits: the labelled loss equals the mean over the trained positions alone
    g = torch.Generator().manual_seed(0)
    n = sum(sum(v) for v in parts.values())
    labels = torch.randint(0, 64, (n,), generator=g)
    masked = torch.rand(n, generator=g) < 0.5
    logits = torch.randn(n, 64, generator=g)
    lab = labels.masked_fill(masked, IGNORE_INDEX)
    whole = torch.nn.functional.cross_entropy(logits, lab)
    alone = torch.nn.functional.cross_entropy(logits[~masked], labels[~masked])
    ignored = bool(torch.allclose(whole, alone))
    ends = parts.get("control", [0, 0])
    return (
        f"the labelled calculator trajectory: prompt tokens (system, tools, user) trained "
        f"{sum(p[1] for p in prompt)} of {sum(sum(p) for p in prompt)}, tool-result tokens trained {result[1]} of "
        f"{sum(result)}, both labelled {IGNORE_INDEX} = torch's CrossEntropyLoss ignore_index: {same_value}; "
        f"torch's loss with those labels equals the loss over the trained positions alone: {ignored}. §8.1.2 "
        "itself is not in the text we have: its technique is read as this sentence states it",
        *make_verdict(
            same_value and ignored and sum(p[1] for p in prompt) == 0 and result[1] == 0 and sum(result) > 0,
            "the tool results and the prompt are not excluded the same way (see the evidence)",
            [
                (
                    ends[1] > 0,
                    f"the mask goes by token span, not by message: {ends[1]} of the template's {sum(ends)} control "
                    "tokens are trained (the <|im_end|> that ends each answer: the model must learn to stop)",
                )
            ],
        ),
    )


@KIT(
    "no-suspend",
    "§14.5.8",
    "Engines do not suspend a request while the tool runs: the request ends at <|im_end|>; the next turn is a new "
    "request with a longer prefix, served from the prefix cache.",
    answers=(
        "把 LLM 当作推理与决策引擎，由宿主执行…再把结果回灌",
        "每一轮请求都要重新渲染一遍，因为模型无状态",
        "请求到此结束，引擎把整段文本返回给宿主",
        "这一步完全在模型之外",
        "带着更长的前缀重新走一次完整的前向",
        "主流引擎并不在工具等待期间挂起请求",
        "第 6 步是一个新请求，只是前缀更长",
    ),
    supports=("模型生成的仍然是普通词元，执行由宿主完成",),
)
def no_suspend(qwen3_tokenizer):
    # engines end the request at <|im_end|>; the next turn is a new request with a longer prefix (§14.5.8)
    ex = example("calculator")
    backend = ScriptedBackend(qwen3_tokenizer, [call_text(CALCULATOR), answer_text(CALCULATOR, {"result": 37.5})])
    trace = run(backend, qwen3_tokenizer, ex["messages"], ex["tools"], template="qwen3", parallel=False)
    gens = [s.generation for s in trace.steps if isinstance(s, Generated)]
    p1, p2 = backend.prompts[0], backend.prompts[1]
    ends = [g.stopped_by for g in gens]
    return (
        f"host loop (scripted model): {len(backend.prompts)} separate generate calls, each ended by {ends}; request 2 "
        f"({len(p2)} tokens) starts with request 1 ({len(p1)}): {p2[: len(p1)] == p1}; reused from the cache "
        f"{gens[1].reused}",
        *make_verdict(
            len(backend.prompts) == 2
            and ends == ["stop", "stop"]
            and p2[: len(p1)] == p1
            and gens[1].reused >= len(p1),
            "the requests do not chain as described",
        ),
    )


@KIT(
    "parallel-calls",
    "§14.5.8",
    "Parallel calls are the model's and the template's doing: one generation holds several <tool_call> blocks; the "
    "host runs them and feeds the results back together.",
    answers=(
        "切出 <tool_call> 与 </tool_call> 之间的 JSON，校验参数，执行",
        "并行工具调用由模型和模板决定",
        "宿主解析出多个调用后并行执行，再把多条结果合并回灌",
        "按照同样的工具名以及参数来执行该工具",
    ),
    supports=('{"name": "get_weather", "arguments": {"city": "北京"}}',),
)
def parallel_calls(qwen3_tokenizer):
    # the model writes several <tool_call> blocks; the template and the host do the rest
    two = (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "北京"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "上海"}}\n</tool_call>'
    )
    _, calls = parse_tool_calls(two)
    back = ScriptedBackend(qwen3_tokenizer, [two, "北京和上海的天气如上。"])
    user = [{"role": "user", "content": "北京和上海天气？"}]
    trace = run(back, qwen3_tokenizer, user, {"get_weather": TOOLS["get_weather"]}, template="qwen3", parallel=True)
    tail = qwen3_tokenizer.decode(back.prompts[-1]).rsplit("<|im_start|>assistant", 2)[-2]
    executed = [r for s in trace.steps if isinstance(s, Executed) for r in s.results]
    blocks, users = tail.count("<tool_response>"), tail.count("<|im_start|>user")
    return (
        f"parser: {len(calls)} calls from one generation; host executed {len(executed)} "
        f"({', '.join(r.status for r in executed)}); the next prompt has {blocks} <tool_response> blocks in {users} "
        "user turn",
        *make_verdict(
            len(calls) == 2 and len(executed) == 2 and blocks == 2 and users == 1,
            "the calls are not parsed, run and merged as described",
        ),
    )


@loader
def multiplication_doc() -> dict | None:
    return saved_json(MULTIPLICATION_RESULTS)


@KIT(
    "exact-multiplication",
    "§14.5.1",
    "A model predicting token by token is unreliable at exact multiplication of large numbers; a calculator tool "
    "fixes it.",
    answers=("大数乘法…精确进位的运算不可靠",),
)
def exact_multiplication(multiplication_doc):
    """§14.5.1 from a measured run (``python benchmarks/multiplication.py`` writes it: real model, greedy)."""
    r = multiplication_doc
    if r is None:
        return None
    alone, tool, n = r["summary"]["alone_exact"], r["summary"]["tool_exact"], r["summary"]["n"]
    return (
        f"{r['model']}, {n} seeded products of {r['digits']}-digit numbers (seed {r['seed']}, {r['date']}, commit "
        f"{r['commit']}): exact without a tool {alone}/{n}, with the calculator {tool}/{n}",
        *make_verdict(alone < n / 2 and tool > alone, "the model alone multiplies exactly as well as with the tool"),
    )


def kit_claims() -> list[Claim]:
    """§14.5.2 (constrained decoding), §14.5.7 (loss mask), §14.5.8 (engines, parallel calls), §14.5.1."""
    return KIT.run()
