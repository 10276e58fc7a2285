"""The small-memory build of the real offline model: int8 weights (the adapter merged in), loaded without a float peak.

What it does
- ``int8_tensors(model)`` quantises every ``nn.Linear``'s weights to int8 with one scale per output row (symmetric,
  computed by torch's own per-channel observer). Norms and biases stay float32. Qwen2.5-0.5B ties its token
  embedding to its output layer (one 151,936 x 896 table); the GGUF file the kit converts from stores two roundings
  of it (every row within 6%, measured), and the adapter trained two rows apart (``<tool_call>``, ``</tool_call>``:
  60%). Where all but a few rows agree within :data:`OWN_ROW`, the artifact holds the table once, as the output
  layer's int8 rows, plus the embedding's own rows (float32): 136 MB less. Other models: 8-bit embedding rows.
- At run time the linears are weight-only: torch's int8 weight-only kernel (``_weight_int8pack_mm``) multiplies the
  int8 weights with bf16 activations, never quantised. Measured on a 2-core AVX2 EPYC, one 4,864 x 896 matmul at
  one thread: float32 0.70 ms, this kernel 0.36 ms (2.0x) at decode, but 59 ms vs 30 ms at a 256-token prefill.
  torch's dynamic int8 linear (activations quantised too) is faster (0.18 ms, 17 ms) and was shipped first, but it
  cost 10 BFCL points in three categories and made the model decline every loop question it should have answered
  with a tool (``benchmarks/results/int8/README.md``); torchao 0.18's int8 kernels were slower than float32 here.
  ``benchmarks/small_model.py`` prints the kernel table on the machine it runs on.
- ``save(model, folder, manifest)`` writes the quantised tensors as plain int8/uint8 + float32 safetensors (no
  pickles) with a manifest naming the base weights, the adapter, the scheme and the file's size and sha256.
- ``load(folder)`` builds the model skeleton on the meta device and fills it module by module, each tensor read
  and packed while the file is open only for that module, so no float copy of the model and no mapped file is
  ever resident: peak ≈ the final size. The file's sha256 is checked against the manifest first (once per file:
  the size and mtime of a checked file are remembered beside it).
- A Qwen2 artifact loads into the kit's own forward (``toolkit.small_forward``: transformers' math without its
  modeling stack, ~185 MB less RSS); ``load(folder, transformers_class=True)`` into transformers' class (what
  ``transformers serve`` needs).
- How much memory a load may use: ``toolkit.memory``.

What it leaves out
- Training: the quantised modules have no gradients (train on the float model, then rebuild this artifact).
- Other schemes (int4, weight-only kernels, activation calibration): measured slower here or not needed for a
  0.5B model; the accuracy cost of this one is measured against the float model on BFCL and the loop questions.
- GPUs: fbgemm's kernels are CPU only; on CUDA the kit loads the float model.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from toolkit import small_forward
from toolkit.fetch import sha256_of
from toolkit.memory import give_back
from toolkit.paths import cache_dir

WEIGHTS = "model.int8.safetensors"
MANIFEST = "manifest.json"


FOLDER_NAME = "qwen2.5-coder-0.5b-instruct-toolcall-int8"  # the real model with the kit's adapter merged


BASE_FOLDER_NAME = "qwen2.5-coder-0.5b-instruct-int8"  # the base alone (notebook 11's "before" where memory is short)


SCHEME = (
    "int8 weights, a scale per output row (torch observer); tied embedding = output rows; activations not quantised"
)
OWN_ROW = 0.25  # relative row difference above which a tied embedding keeps its own row (rounding: <= 6%, trained: 60%)


_COPY = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


class ArtifactError(ValueError):
    """The small-memory artifact is missing, partial, corrupted or built from other weights, or this machine has
    too little memory to load it: one line, raised before anything large is read."""


def target_folder(adapter: bool = True) -> Path:
    return cache_dir() / "models" / (FOLDER_NAME if adapter else BASE_FOLDER_NAME)


# ------------------------------------------------------------------ build
def int8_tensors(model) -> dict:
    """The model as the artifact's plain tensors, quantised by torch's own modules one at a time (each float source
    module is dropped as soon as it is converted, so the peak stays near the float model's size):
    ``<linear>.qweight`` int8 + ``.scales`` (one per output row, symmetric) + ``.bias``; a tied embedding's
    ``.own_ids`` + ``.own_rows`` (its rows that are not the output layer's), an untied one's ``.qweight`` uint8 +
    ``.scales`` + ``.zero_points`` (one per row); every other parameter float32."""
    import torch  # lazy: heavy
    from torch.ao.nn.quantized import Embedding as QEmbedding  # lazy: heavy
    from torch.ao.nn.quantized.dynamic import Linear as QLinear  # lazy: heavy
    from torch.ao.quantization import float_qparams_weight_only_qconfig, per_channel_dynamic_qconfig  # lazy

    torch.backends.quantized.engine = "fbgemm"  # the x86 engine (oneDNN) keeps a second copy of every weight
    out: dict = {}

    def linear(name, child):
        f = torch.nn.Linear(child.in_features, child.out_features, bias=child.bias is not None)
        f.weight.data = child.weight.data.float()
        if child.bias is not None:
            f.bias.data = child.bias.data.float()
        f.qconfig = per_channel_dynamic_qconfig
        q = QLinear.from_float(f)  # kept alive until its values are copied out: the unpacked views borrow from it
        w, b = q._weight_bias()
        if int(w.q_per_channel_zero_points().abs().max()) != 0:
            raise ArtifactError(f"{name}: expected symmetric int8 weights")
        out[f"{name}.qweight"], out[f"{name}.scales"] = w.int_repr().clone(), w.q_per_channel_scales().float().clone()
        if b is not None:
            out[f"{name}.bias"] = b.detach().float().clone()

    def embedding(name, child):
        f = torch.nn.Embedding(child.num_embeddings, child.embedding_dim)
        f.weight.data = child.weight.data.float()
        f.qconfig = float_qparams_weight_only_qconfig
        q = QEmbedding.from_float(f)  # kept alive until its values are copied out (as above)
        w = q.weight()
        out[f"{name}.qweight"], out[f"{name}.scales"] = w.int_repr().clone(), w.q_per_channel_scales().float().clone()
        out[f"{name}.zero_points"] = w.q_per_channel_zero_points().float().clone()
        del w, q

    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    own = None  # the rows a tied embedding keeps as its own; None: not one table (stored as the embedding's own)
    if emb.weight.shape == head.weight.shape:
        e, h = emb.weight.detach().float(), head.weight.detach().float()
        own = ((e - h).norm(dim=1) > OWN_ROW * e.norm(dim=1).clamp_min(1e-12)).nonzero().flatten()
        own = own if len(own) <= len(e) // 1000 else None  # one table (the config may say untied: GGUF's copies)
        del e, h

    def shared(name, child):
        """The tied table once: only the rows the embedding does not share with the output layer are stored."""
        out[f"{name}.own_ids"] = own.to(torch.int64).clone()
        out[f"{name}.own_rows"] = child.weight.detach()[own].float().clone()

    def walk(mod, prefix=""):
        for name, child in list(mod.named_children()):
            if isinstance(child, torch.nn.Linear):
                linear(prefix + name, child)
            elif isinstance(child, torch.nn.Embedding):
                (shared if own is not None and child is emb else embedding)(prefix + name, child)
            else:
                walk(child, f"{prefix}{name}.")
                continue
            setattr(mod, name, torch.nn.Identity())  # the float source goes now, not at the end
            give_back()

    walk(model)
    for name, p in model.named_parameters():
        out[name] = p.detach().float().clone()
    return {k: v.contiguous() for k, v in out.items()}


def save(model, src_folder: Path, out: Path, manifest: dict, before_publish=None) -> Path:
    """Quantise ``model`` (already merged with its adapter; it is consumed) and write the artifact folder atomically;
    ``before_publish(staging)`` may rewrite the weights first and returns what it adds to the manifest."""
    import shutil

    from safetensors.torch import save_file  # lazy: heavy

    tensors = int8_tensors(model)
    staging = out.parent / f".staging-{out.name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        save_file(tensors, str(staging / WEIGHTS))
        del tensors
        for f in _COPY:
            if (Path(src_folder) / f).exists():
                shutil.copy2(Path(src_folder) / f, staging / f)
        man = dict(
            manifest,
            **(before_publish(staging) if before_publish else {}),
            scheme=SCHEME,
            torch_quantized_engine="fbgemm",
            weights={
                "file": WEIGHTS,
                "bytes": (staging / WEIGHTS).stat().st_size,
                "sha256": sha256_of(staging / WEIGHTS),
            },
            built=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        )
        (staging / MANIFEST).write_text(json.dumps(man, indent=1) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


# ------------------------------------------------------------------ check + load
def read_manifest(folder: Path) -> dict:
    f = Path(folder) / MANIFEST
    try:
        man = json.loads(f.read_text(encoding="utf-8"))
        man["weights"]["bytes"], man["weights"]["sha256"], man["base"]["safetensors_sha256"]  # noqa: B018
    except FileNotFoundError:
        raise ArtifactError(
            f"no small-memory model at {folder} (build it: python -m toolkit models install-small)"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise ArtifactError(
            f"{f}: unreadable manifest ({type(e).__name__}); rebuild: models install-small --force"
        ) from None
    return man


def verify(folder: Path, base_sha256: str | None = None, adapter_sha256: str | None = None) -> dict:
    """Check the artifact: manifest, file size, sha256 (cached by size + mtime), and what it was built from."""

    folder = Path(folder)
    man = read_manifest(folder)
    w = folder / man["weights"]["file"]
    if not w.is_file():
        raise ArtifactError(f"{w} is missing (partial build?): rebuild with models install-small --force")
    st = w.stat()
    if st.st_size != man["weights"]["bytes"]:
        raise ArtifactError(f"{w.name}: {st.st_size:,} bytes, manifest says {man['weights']['bytes']:,} (truncated?)")
    stamp = folder / ".verified"
    key = f"{st.st_size}:{st.st_mtime_ns}:{man['weights']['sha256']}"
    if not (stamp.is_file() and stamp.read_text() == key):
        if sha256_of(w) != man["weights"]["sha256"]:
            raise ArtifactError(f"{w.name}: sha256 differs from the manifest (corrupted): rebuild with --force")
        try:
            stamp.write_text(key)
        except OSError:
            pass  # a read-only cache still loads; it is just hashed again next time
    if man.get("scheme") != SCHEME:
        raise ArtifactError(
            "the small-memory model was built by another version of the kit: rebuild (models install-small)"
        )
    if base_sha256 and man["base"]["safetensors_sha256"] != base_sha256:
        raise ArtifactError("the small-memory model was built from other base weights: rebuild with --force")
    if adapter_sha256 and (man.get("adapter") or {}).get("weights_sha256") != adapter_sha256:
        raise ArtifactError("the small-memory model was built with another adapter: rebuild with --force")
    return man


def load(folder: Path, transformers_class: bool = False):
    """The quantised model, built module by module from the artifact (call :func:`verify` first): a Qwen2 artifact
    into the kit's own forward (``toolkit.small_forward``), anything else, or ``transformers_class=True``, into
    transformers' class."""
    import torch  # lazy: heavy
    from safetensors import safe_open  # lazy: heavy
    from torch.ao.nn.quantized import Embedding as QEmbedding  # lazy: heavy
    from transformers import AutoConfig  # lazy: heavy

    torch.backends.quantized.engine = "fbgemm"
    path = str(Path(folder) / WEIGHTS)

    class Int8Linear(torch.nn.Module):
        """Weight-only int8: the int8 weights and one scale per output row stay as they are in the file, and torch's
        int8 weight-only kernel multiplies them with the activations in bf16 (never quantised: quantising them too,
        as torch's dynamic int8 linear does, cost up to 10 BFCL points and made the model decline every loop
        question; benchmarks/results/int8/README.md)."""

        def __init__(self, w, s, b):
            super().__init__()
            self.register_buffer("qweight", w)
            self.register_buffer("scales", s.to(torch.bfloat16))
            self.register_buffer("bias", b)
            self.out_features, self.in_features = w.shape

        def forward(self, x):
            flat = x.reshape(-1, self.in_features).to(torch.bfloat16).contiguous()
            y = torch.ops.aten._weight_int8pack_mm(flat, self.qweight, self.scales).to(x.dtype)
            return (y if self.bias is None else y + self.bias).reshape(*x.shape[:-1], self.out_features)

    class Embedding(QEmbedding):
        def forward(self, indices):  # fbgemm's lookup wants contiguous ids; a batch's slice of ids is not always
            return super().forward(indices.contiguous())

    class SharedEmbedding(torch.nn.Module):
        """A tied embedding: its rows are the output layer's int8 rows times their float32 scales, except the rows
        it keeps as its own (an adapter trained them apart from the output layer's)."""

        def __init__(self, head, scales, own_ids, own_rows):
            super().__init__()
            self.head = [head]  # a reference, not a submodule: the output layer is registered once, where it is
            self.register_buffer("scales", scales)  # float32 (the output layer keeps bf16 ones for its kernel)
            self.register_buffer("own_ids", own_ids)
            self.register_buffer("own_rows", own_rows)
            self.num_embeddings, self.embedding_dim = head.out_features, head.in_features

        def forward(self, ids):
            out = self.head[0].qweight[ids].float() * self.scales[ids].unsqueeze(-1)
            for i, row in zip(self.own_ids.tolist(), self.own_rows):
                out[ids == i] = row
            return out

    cfg = AutoConfig.from_pretrained(str(folder))
    with torch.device("meta"):
        if small_forward.supports(cfg) and not transformers_class:  # no transformers modeling stack: ~185 MB less
            model = small_forward.Qwen2(cfg)
        else:
            from transformers import AutoModelForCausalLM  # lazy: its modeling stack imports torch._dynamo

            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)

    def read(*keys, keep=True):
        # Opened per module, so the mapping closes with the last view of it: what is kept (norms, biases, scales) is
        # copied out, or it would pin the file's pages in our RSS; a weight that is packed at once is not.
        with safe_open(path, "pt") as f:
            got = [f.get_tensor(k) if k in f.keys() else None for k in keys]
        return [t.clone() if keep and t is not None else t for t in got]

    packed = [0]
    with safe_open(path, "pt") as f:
        stored = set(f.keys())

    def build(prefix, child):
        if isinstance(child, torch.nn.Linear):
            (w,), (s, b) = read(f"{prefix}.qweight", keep=False), read(f"{prefix}.scales", f"{prefix}.bias")
            packed[0] += w.numel() + (b.numel() if b is not None else 0)
            return Int8Linear(w.clone(), s, b)
        if isinstance(child, torch.nn.Embedding) and f"{prefix}.own_ids" in stored:
            head = model.get_output_embeddings()
            if not isinstance(head, Int8Linear) or head.out_features != child.num_embeddings:
                raise ArtifactError(f"{WEIGHTS}: {prefix} shares a table with no int8 output layer of its size")
            (hs,) = read(f"{head_name}.scales")
            own_ids, own_rows = read(f"{prefix}.own_ids", f"{prefix}.own_rows")
            packed[0] += own_rows.numel()
            return SharedEmbedding(head, hs.float(), own_ids, own_rows)
        if isinstance(child, torch.nn.Embedding):
            (w,), (s, z) = read(f"{prefix}.qweight", keep=False), read(f"{prefix}.scales", f"{prefix}.zero_points")
            packed[0] += w.numel()
            q = Embedding(1, 1, dtype=torch.quint8)
            q.set_weight(torch._make_per_channel_quantized_tensor(w, s.double(), z.double(), 0))
            q.num_embeddings, q.embedding_dim = child.num_embeddings, child.embedding_dim
            return q
        return None

    def walk(mod, prefix=""):
        for name, child in list(mod.named_children()):
            q = build(prefix + name, child)
            if q is not None:
                setattr(mod, name, q)
                del q
                give_back()  # each module's transient copies go back before the next is read
            else:
                walk(child, f"{prefix}{name}.")

    # The output head first: its transient copies (the largest: vocabulary x hidden) then sit on an almost empty heap
    # instead of on top of everything already loaded.
    head_name = next(n for n, c in model.named_children() if c is model.get_output_embeddings())
    setattr(model, head_name, build(head_name, model.get_output_embeddings()))
    walk(model)
    names = [n for n, _ in model.named_parameters()]
    for n, t in zip(names, read(*names), strict=True):
        if t is None:
            raise ArtifactError(f"{WEIGHTS} has no tensor {n}: not this model's artifact")
        owner, attr = n.rsplit(".", 1)
        setattr(model.get_submodule(owner), attr, torch.nn.Parameter(t, requires_grad=False))
    for mod in model.modules():  # buffers computed from the config (rotary frequencies) were made on meta
        if type(mod).__name__.endswith("RotaryEmbedding"):
            mod.__init__(cfg)
    if any(t.is_meta for t in list(model.parameters()) + list(model.buffers())):
        raise ArtifactError("the small-memory model left tensors unfilled: not this model's artifact")
    model._quantized_values = packed[0]  # what parameters() no longer sees (for the printed size)
    give_back()
    return model.eval()


def count_params(model) -> int:
    """Parameters, counting a quantised module's packed weight as the values it holds (``parameters()`` skips it)."""
    return sum(p.numel() for p in model.parameters()) + getattr(model, "_quantized_values", 0)
