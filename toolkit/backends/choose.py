"""One chooser for every notebook and script: the local model, or the server ``TOOLKIT_BACKEND`` names (§14.5.8).

What it does
- ``choose(name)`` returns what the kit runs on, as one :class:`Choice`: ``loaded`` (``toolkit.models.load(name)``
  when ``TOOLKIT_BACKEND`` is unset, or a :class:`Served` — the server's model, its URL, the kit's tokenizer and
  template for it — when it names an OpenAI-compatible server, ``http://host:port/v1``), ``backend``
  (:func:`backend_for` it) and ``settings`` (``toolkit.settings.LoopConfig.for_model`` it: the same settings for
  a local and a served model). A ``Choice`` reads like the model it holds (``choice.tokenizer``,
  ``choice.description``, ``choice.semantic`` …), so code that treats it as a ``Loaded`` keeps working. A
  ``Served`` reads like a ``toolkit.models.Loaded`` (``name``, ``description``, ``semantic``, ``tokenizer``;
  ``model`` is None: no weights here), so ``LoopConfig.for_model``, the trace view and the patterns take either.
- ``backend_for(loaded)`` is the backend for either: an ``HFBackend`` on local weights, a ``TokensBackend`` (the kit
  renders and counts, the server decodes) on a ``Served``.
- ``model_line(loaded)`` is the one line every output prints: the model, and the server's URL when one decodes.
- ``first_token_probs(loaded, ids, k, tokens)``: the first-token distribution (top k, and named ids), from a server
  that returns log-probabilities (vLLM), else from the local model's logits.
- ``local_for(loaded, step)`` is for a step a server cannot run (per-step logits, a grammar mask's probabilities, a
  loss, GPU timing): it prints one line saying so and returns the local model (``TOOLKIT_MODEL``, default auto),
  loaded once; without a server it returns ``loaded`` itself and prints nothing. ``not_served(step)`` is the one line
  for a step that never uses a server (training, timings); ``cache_note(loaded)`` says what the trace's ``reused``
  column means on a server (its reported cached tokens; ``transformers serve`` reports none).

What it leaves out
- Chat mode in the notebooks (the server renders: no ids to show; ``toolkit.backends.http_chat`` and the CLI have
  it). The served model's weights are unknown here: ``semantic`` is False only for a folder the kit saved for the
  random-weight stand-in (``toolkit.backends.serve.folder_for``), True otherwise.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from toolkit import models
from toolkit.backends import http, http_logprobs
from toolkit.backends.hf import HFBackend
from toolkit.backends.http_tokens import TokensBackend
from toolkit.settings import LoopConfig
from toolkit.tokenizer import tokenizer_for

STAND_IN_MARK = "stand-in"  # in the folder name serve.folder_for gives a random-weight model


def template_of(model_id: str) -> str:
    """The kit template for a served model: its folder's ``config.json`` when the server runs on this machine,
    else its name (``qwen3`` in it → Qwen3's, otherwise Qwen2.5's)."""
    cfg = Path(model_id) / "config.json"
    try:
        if cfg.is_file():
            return "qwen3" if json.loads(cfg.read_text()).get("model_type") == "qwen3" else "qwen2.5"
    except (OSError, ValueError):
        pass
    return "qwen3" if "qwen3" in model_id.lower() else "qwen2.5"


@dataclass
class Served:
    """A model on a server, as the notebooks use a ``Loaded``: see the module docstring."""

    info: http.ServerInfo
    tokenizer: object
    template: str
    mode: str = "tokens"
    model: object = None  # no local weights
    kind: str = "server"
    device: str = "server"
    dtype: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.info.model

    @property
    def url(self) -> str:
        return self.info.url

    @property
    def semantic(self) -> bool:
        return STAND_IN_MARK not in Path(self.info.model).name

    @property
    def description(self) -> str:
        weights = "real weights" if self.semantic else "RANDOM-WEIGHT STAND-IN (shows mechanics, not meaning)"
        return (
            f"{self.info.model} [served by {self.info.kind} at {self.info.url}, {self.mode} mode: the kit renders "
            f"and counts, the server decodes; {weights}]"
        )

    def __repr__(self) -> str:
        return f"Served({self.description})"


@dataclass
class Choice:
    """What the kit runs on: the model (``loaded``: a ``Loaded`` or a :class:`Served`), the backend that decodes
    for it, and the loop's settings for it. Other attributes are the model's (``choice.tokenizer`` …)."""

    loaded: object
    backend: object
    settings: LoopConfig

    def __getattr__(self, name):  # only for names a Choice does not have: read it as the model it holds
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["loaded"], name)

    def __repr__(self) -> str:
        return f"Choice({model_line(self.loaded)}; settings: {self.settings.describe()})"


def unwrap(loaded):
    """The model a :class:`Choice` holds (anything else is returned as it is)."""
    return loaded.loaded if isinstance(loaded, Choice) else loaded


def choose(name: str = "auto", *, quiet: bool = False, url: str | None = None, reuse: bool = True) -> Choice:
    """The server ``url`` (default ``TOOLKIT_BACKEND``) as a :class:`Served`, or the local model ``name``, with its
    backend and settings (a :class:`Choice`). A malformed URL raises ``ValueError``, a server that does not answer
    ``http.ServerError`` (one line each)."""
    url = http.check_url(url) if url else http.from_env()
    if url is None:
        loaded = models.load(name, quiet=quiet)
    else:
        info = http.probe(url)
        template = template_of(info.model)
        loaded = Served(info, tokenizer_for(template), template)  # one shared copy per template (~0.1 GB each)
    return Choice(loaded, backend_for(loaded, reuse=reuse), LoopConfig.for_model(loaded))


def is_served(loaded) -> bool:
    return isinstance(unwrap(loaded), Served)


def backend_for(loaded, reuse: bool = True, **kw):
    """The backend that decodes for ``loaded``: a ``TokensBackend`` on a server, an ``HFBackend`` on local weights."""
    loaded = unwrap(loaded)
    if isinstance(loaded, Served):
        return TokensBackend(loaded.url, loaded.tokenizer, info=loaded.info, **kw)
    return HFBackend.from_loaded(loaded, reuse=reuse)


def model_line(loaded) -> str:
    """One line: which model decodes, and where."""
    loaded = unwrap(loaded)
    if isinstance(loaded, Served):
        return f"model: {loaded.name} | server: {loaded.url} ({loaded.info.kind}, {loaded.mode} mode)"
    return f"model: {loaded.description}"


_LOCAL: dict[str, object] = {}


def local_for(loaded, step: str, name: str | None = None):
    """The local model for ``step`` (a step no server can run); on a server it prints one line saying so."""
    if not isinstance(unwrap(loaded), Served):
        return loaded
    loaded = unwrap(loaded)
    name = name or os.environ.get("TOOLKIT_MODEL", "auto")
    if name not in _LOCAL:
        _LOCAL[name] = models.load(name, quiet=True)
    local = _LOCAL[name]
    print(f"{step}: runs on the local model {local.description}, not on the server at {loaded.url}")
    return local


def first_token_probs(loaded, ids: list[int], k: int = 6, tokens=()) -> dict:
    """The model's distribution over its first token after ``ids``: ``top`` (k pairs of token text and probability,
    most likely first), ``named`` ({id: probability} for each id in ``tokens``) and ``source`` (where it was
    computed). On a server that returns log-probabilities (vLLM: top-k ``logprobs`` and ``prompt_logprobs`` for the
    named ids) it runs there; on one that does not (``transformers serve``) it runs on the local model
    (:func:`local_for` prints that), as it does without a server."""
    served = unwrap(loaded)
    if isinstance(served, Served) and served.info.kind == "vllm":
        b = TokensBackend(served.url, served.tokenizer, info=served.info)
        top = http_logprobs.first_token_logprobs(b, ids, k)
        named = {}
        for t in tokens:
            lp = http_logprobs.token_logprob(b, ids, t)
            named[int(t)] = None if lp is None else math.exp(lp)
        return dict(
            top=[(served.tokenizer.decode([t]), math.exp(lp)) for t, lp in top],
            named=named,
            source=f"the server at {served.url} ({served.info.kind}: logprobs and prompt_logprobs)",
        )
    local = local_for(loaded, "first-token probabilities (this server returns no log-probabilities)")
    import torch  # lazy: only for local logits

    model = unwrap(local).model
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([list(ids)]), logits_to_keep=1).logits[0, -1].float()
    p = torch.softmax(logits, -1)
    top = torch.topk(p, k)
    tok = unwrap(local).tokenizer
    return dict(
        top=[(tok.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices)],
        named={int(t): float(p[int(t)]) for t in tokens},
        source=f"the local model {unwrap(local).description}",
    )


def cache_note(loaded) -> str:
    """On a server, what the trace's ``reused`` column means there (the server's reported cached prompt tokens);
    empty for local weights, whose cache the kit counts itself."""
    loaded = unwrap(loaded)
    if not isinstance(loaded, Served):
        return ""
    if loaded.info.kind == "transformers":
        return (
            f"reused = the cached prompt tokens the server reports; {loaded.info.kind} at {loaded.url} reports none "
            "(no usage.prompt_tokens_details.cached_tokens), so the column reads 0 whatever its cache did"
        )
    return (
        f"reused = the cached prompt tokens {loaded.info.kind} at {loaded.url} reports "
        "(usage.prompt_tokens_details.cached_tokens; vLLM needs --enable-prompt-tokens-details); 0 where it reports none"
    )


def not_served(step: str) -> str:
    """One line for a step that never runs on a server, when ``TOOLKIT_BACKEND`` names one ('' otherwise; no
    network, and a malformed value is reported, not raised)."""
    try:
        url = http.from_env()
    except ValueError as e:
        return f"{step}: runs here, on local weights ({http.ENV} is not usable: {e})"
    return f"{step}: runs here, on local weights, not on the server at {url}" if url else ""
