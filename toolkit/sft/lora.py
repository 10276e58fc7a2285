"""LoRA on the real offline model, on CPU, with ``peft``: the fine-tune that teaches it the template's call format.

What it does
- ``train(settings, out_dir)`` fine-tunes low-rank adapters (``peft.LoraConfig``) on the upper layers of the loaded
  model over :mod:`toolkit.sft.data`'s generated conversations, labelled with the kit's loss mask, one group of
  conversations per optimizer step. Resumable: a checkpoint (adapter, optimizer, step, loss curve) is written every
  ``checkpoint_every`` steps and a rerun with the same settings and data continues from it.
- Three exact savings make it fit a 2-core CPU (``benchmarks/sft_speed.py`` measures each): the conversations of a
  group share their system prompt and tool list, so that prefix runs once and its keys/values are repeated for the
  group (the same numbers as running each row in full: a test checks loss and gradients); logits are computed only
  at trained positions (the 151,936-wide head is the single largest matmul); adapters sit on the upper layers only,
  so autograd records nothing below them and the backward pass stops there. The dtype is the one ``toolkit.models``
  picks (float32 on CPUs without bf16 instructions, where bf16 measured 5-10x slower).
- ``group_loss(model, rows)`` is that loss for one group; ``save_adapter`` writes the adapter with its manifest
  (base model sha256, data seed and hash, settings, commit, loss, seconds); :func:`toolkit.models.load` applies it
  (``load("qwen2.5-coder-0.5b+lora")``).

What it leaves out
- GPUs, mixed precision, packing several groups into one step, RL and preference tuning; evaluation (that is
  ``benchmarks/bfcl.py`` and ``benchmarks/loop_questions.py`` with the adapter).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from toolkit import fetch
from toolkit.artifact import file_sha256
from toolkit.paths import cpu_threads, provenance
from toolkit.qwen import TOOL_CALL_END_ID, TOOL_CALL_ID
from toolkit.sft.data import MIX, data_hash, dataset, groups_of, labelled
from toolkit.sft.labels import IGNORE_INDEX, Labelled

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class LoraSettings:
    """Everything that decides a run's numbers (it keys the checkpoint: change one and the run starts over)."""

    groups: int = 50  # optimizer steps; one group of ``per_group`` conversations each
    per_group: int = 10
    data_seed: int = 0
    mix: str = MIX  # the data mix (toolkit.sft.data.MIXES); a manifest without one was trained on "v1"
    seed: int = 0
    rank: int = 8
    alpha: int = 16
    first_layer: int = 12  # adapters on layers first_layer .. last (Qwen2.5-0.5B has 24)
    targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    lr: float = 4e-4
    warmup: int = 5
    max_len: int = 1536  # longer conversations are dropped (counted in the results)
    threads: int = field(default_factory=cpu_threads)  # the CPUs this process may use, at most 2 (paths.cpu_threads)
    epochs: int = 1  # passes over the groups (a smoke test repeats one small group)
    # Rows of the embedding and the output head trained too: in this model's weights <tool_call> and </tool_call>
    # have identical head rows (never trained), so no adapter on the layers can tell them apart.
    token_rows: tuple[int, ...] = (TOOL_CALL_ID, TOOL_CALL_END_ID)

    def key(self) -> str:
        """What names a checkpoint: every setting but the thread count, which changes speed, not the run."""
        d = {k: v for k, v in asdict(self).items() if k != "threads"}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Result:
    settings: dict
    losses: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # tokens run per step (shared prefix once)
    trained_tokens: list[int] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    dropped: int = 0


# ---------------------------------------------------------------- the loss of one group
def common_prefix(rows: list[Labelled]) -> int:
    """Leading tokens every row shares, stopping before the first trained token (the prefix is never trained)."""
    n = min(len(r.ids) for r in rows)
    first_trained = min(r.labels.index(next(x for x in r.labels if x != IGNORE_INDEX)) for r in rows)
    k = 0
    while k < min(n, first_trained) and all(r.ids[k] == rows[0].ids[k] for r in rows):
        k += 1
    return k


def _chunks(rows: list[Labelled], n: int, max_waste: float = 0.25) -> list[list[int]]:
    """Row indices sorted by continuation length and cut so that padding stays under ``max_waste`` of a chunk."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i].ids))
    out: list[list[int]] = []
    for i in order:
        if out:
            cur = out[-1] + [i]
            lens = [len(rows[j].ids) - n for j in cur]
            if 1 - sum(lens) / (max(lens) * len(lens)) <= max_waste:
                out[-1] = cur
                continue
        out.append([i])
    return out


def _padded(rows: list[Labelled], start: int, dev):
    import torch  # lazy: heavy

    width = max(len(r.ids) for r in rows) - start
    ids = torch.zeros((len(rows), width), dtype=torch.long, device=dev)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long, device=dev)
    attn = torch.zeros((len(rows), width), dtype=torch.long, device=dev)
    for j, r in enumerate(rows):
        k = len(r.ids) - start
        ids[j, :k] = torch.tensor(r.ids[start:])
        labels[j, :k] = torch.tensor(r.labels[start:])
        attn[j, :k] = 1
    return ids, labels, attn


def group_pieces(model, rows: list[Labelled], share_prefix: bool = True):
    """The forward pass behind :func:`group_loss`: ``(pieces, ran)`` with pieces ``(row indices, hidden, labels)``,
    where ``hidden[j, t]`` predicts ``labels[j, t]`` of row ``indices[j]`` (the reinforcement-learning loss reads
    the same pieces for per-token log-probabilities)."""
    import torch  # lazy: heavy
    from transformers import DynamicCache  # lazy: heavy

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body, head = base.model, base.lm_head
    dev = head.weight.device
    n = common_prefix(rows) if share_prefix and len(rows) > 1 else 0
    pieces = []
    if n >= 2:
        pre = body(input_ids=torch.tensor([rows[0].ids[:n]], device=dev), use_cache=True)
        kv = [(layer.keys, layer.values) for layer in pre.cache.layers]
        last = pre.last_hidden_state[:, -1:]
        for chunk in _chunks(rows, n):
            sub = [rows[i] for i in chunk]
            cache = DynamicCache()
            for li, (k, v) in enumerate(kv):
                cache.update(k.expand(len(sub), -1, -1, -1), v.expand(len(sub), -1, -1, -1), li)
            ids, labels, attn = _padded(sub, n, dev)
            full_attn = torch.cat([torch.ones((len(sub), n), dtype=torch.long, device=dev), attn], 1)
            rest = body(input_ids=ids, attention_mask=full_attn, cache=cache, use_cache=True).last_hidden_state
            hidden = torch.cat([last.expand(len(sub), -1, -1), rest[:, :-1]], 1)  # position n-1 predicts token n
            pieces.append((chunk, hidden, labels))
        ran = n + sum(len(r.ids) - n for r in rows)
    else:
        ids, labels, attn = _padded(rows, 0, dev)
        hidden = body(input_ids=ids, attention_mask=attn).last_hidden_state
        pieces.append((list(range(len(rows))), hidden[:, :-1], labels[:, 1:]))
        ran = sum(len(r.ids) for r in rows)
    return pieces, ran


def group_loss(model, rows: list[Labelled], share_prefix: bool = True, head_at_trained_only: bool = True):
    """Mean next-token cross-entropy over the trained tokens of ``rows``; also returns (tokens run, trained).

    With ``share_prefix`` the rows' common prefix (system prompt + tool list) runs once; the rest runs in chunks
    of similar length (little padding), each on a copy of the prefix's keys/values. Gradients flow through the
    prefix from every chunk, so the numbers are those of running every row in full."""
    import torch.nn.functional as F  # lazy: heavy

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.lm_head
    pieces, ran = group_pieces(model, rows, share_prefix)
    total, count = 0.0, 0
    for _, hidden, target in pieces:
        keep = target != IGNORE_INDEX
        logits = head(hidden[keep]) if head_at_trained_only else head(hidden)[keep]
        total = total + F.cross_entropy(logits.float(), target[keep], reduction="sum")
        count += int(keep.sum())
    return total / count, ran, count


# ---------------------------------------------------------------- model + adapters
def attach(model, s: LoraSettings):
    """Wrap ``model`` with fresh LoRA adapters on layers ``first_layer``.. (everything else frozen)."""
    from peft import LoraConfig, get_peft_model  # lazy: heavy, training only

    n_layers = model.config.num_hidden_layers
    rows = list(s.token_rows)
    tokens = None
    if rows:
        tied = getattr(model.config, "tie_word_embeddings", False)
        tokens = {"embed_tokens": rows} if tied else {"embed_tokens": rows, "lm_head": rows}
    cfg = LoraConfig(
        r=s.rank,
        lora_alpha=s.alpha,
        lora_dropout=0.0,
        target_modules=list(s.targets),
        layers_to_transform=list(range(s.first_layer, n_layers)),
        bias="none",
        task_type="CAUSAL_LM",
        trainable_token_indices=tokens,
    )
    return get_peft_model(model, cfg)


def base_sha256(folder: Path) -> str:
    h = hashlib.sha256()
    with open(folder / "model.safetensors", "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def save_adapter(model, out: Path, manifest: dict) -> Path:
    """The adapter as float16 safetensors (half the bytes; loading casts back) + ``manifest.json``."""
    import torch  # lazy: heavy
    from safetensors.torch import load_file, save_file  # lazy: heavy

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    (out / "README.md").unlink(missing_ok=True)  # peft's generated model card: the manifest says what matters
    st = out / "adapter_model.safetensors"
    save_file({k: v.to(torch.float16).contiguous() for k, v in load_file(str(st)).items()}, str(st))
    # peft writes the base model's local path into its config: replace it with the kit's name for it
    cfg_path = out / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = "qwen2.5-coder-0.5b"
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    made = [p for p in sorted(out.iterdir()) if p.name != MANIFEST]  # what toolkit.artifact checks before a load
    manifest = dict(
        manifest, files={p.name: p.stat().st_size for p in made}, sha256={p.name: file_sha256(p) for p in made}
    )
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return out


# ---------------------------------------------------------------- training
def train(
    loaded, s: LoraSettings, out: Path, ckpt_dir: Path, results: Path | None = None, progress=True, limit_steps=None
) -> Result:
    """Fine-tune ``loaded`` (a :class:`toolkit.models.Loaded` of the real model) and save the adapter to ``out``."""
    import torch  # lazy: heavy

    commit = provenance()["commit"]  # the code that trains: read before the run (HEAD may move while it runs)
    torch.manual_seed(s.seed)
    torch.set_num_threads(s.threads)
    examples = dataset(s.groups, seed=s.data_seed, per_group=s.per_group, mix=s.mix)
    rows = labelled(examples, loaded.tokenizer)
    groups = []
    dropped = 0
    for idx in groups_of(examples):
        keep = [rows[i] for i in idx if len(rows[i].ids) <= s.max_len]
        dropped += len(idx) - len(keep)
        if keep:
            groups.append(keep)
    groups = groups * s.epochs
    model = attach(loaded.model, s)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=s.lr, weight_decay=0.0)
    total = min(len(groups), limit_steps or len(groups))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda k: min(1.0, (k + 1) / s.warmup) * max(0.05, 1 - k / max(1, len(groups)))
    )
    res = Result(asdict(s), dropped=dropped)
    ckpt = ckpt_dir / f"lora-{s.key()}.pt"
    start = 0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        model.load_state_dict(state["adapter"], strict=False)
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        res = Result(**state["result"])
        start = len(res.losses)
        torch.set_rng_state(state["rng"])
        missing = sorted(n for n, p in model.named_parameters() if p.requires_grad and n not in state["adapter"])
        if missing:  # trained from their initial values again from here: the manifest says so
            res.settings = dict(res.settings, resumed_without=dict(step=start, tensors=missing))
    bar = None
    if progress:
        from tqdm import tqdm  # lazy: a CLI nicety

        bar = tqdm(total=total, initial=start, desc="lora", unit="step", dynamic_ncols=True)
    for step in range(start, total):
        t0 = time.perf_counter()
        loss, ran, trained = group_loss(model, groups[step])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        res.losses.append(round(loss.item(), 5))
        res.tokens.append(ran)
        res.trained_tokens.append(trained)
        res.step_seconds.append(round(time.perf_counter() - t0, 3))
        if bar:
            recent = res.step_seconds[-10:]
            bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{sum(res.tokens[-10:]) / sum(recent):.0f}")
            bar.update(1)
        if (step + 1) % 10 == 0 or step + 1 == total:
            # every trained tensor: the LoRA matrices and the trained token rows (a checkpoint that kept only the
            # lora_ tensors lost the token rows when the shipped adapter's run resumed after an out-of-memory kill)
            names = {n for n, p in model.named_parameters() if p.requires_grad}
            trainable = {k: v for k, v in model.state_dict().items() if k in names or "lora_" in k}
            tmp = ckpt.with_suffix(".tmp")
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            torch.save(
                dict(
                    adapter=trainable,
                    opt=opt.state_dict(),
                    sched=sched.state_dict(),
                    result=asdict(res),
                    rng=torch.get_rng_state(),
                ),
                tmp,
            )
            os.replace(tmp, ckpt)
    if bar:
        bar.close()
    model.eval()
    secs = sum(res.step_seconds)
    manifest = dict(
        name="qwen2.5-coder-0.5b+lora (toolkit tool-call adapter)",
        base=dict(
            name=fetch.DISPLAY_NAME,
            gguf_sha256=fetch.GGUF_SHA256,
            safetensors_sha256=base_sha256(fetch.installed_folder()),
        ),
        data=dict(
            seed=s.data_seed,
            groups=s.groups,
            per_group=s.per_group,
            mix=s.mix,
            examples=len(examples),
            dropped_over_max_len=res.dropped,
            sha256=data_hash(examples),
            generator="toolkit.sft.data (templates + the kit's real tools; no BFCL text)",
        ),
        settings=asdict(s),
        resumed_without=res.settings.get("resumed_without"),
        steps=len(res.losses),
        loss_first10=round(sum(res.losses[:10]) / max(1, len(res.losses[:10])), 4),
        loss_last10=round(sum(res.losses[-10:]) / max(1, len(res.losses[-10:])), 4),
        seconds=round(secs, 1),
        tokens_per_s=round(sum(res.tokens) / secs, 1) if secs else None,
        commit=commit,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        machine=dict(platform=platform.platform(), cpus=os.cpu_count(), threads=s.threads, dtype=loaded.dtype),
    )
    save_adapter(model, out, manifest)
    if results is not None:
        results.write_text(json.dumps(dict(manifest=manifest, curve=asdict(res)), indent=1, ensure_ascii=False) + "\n")
    return res
