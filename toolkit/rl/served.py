"""Rollouts sampled by the kit's vLLM server, the trainer's LoRA adapter handed over whenever it changed.

What it does
- :class:`ServedSampler` ``(loaded, max_new, temperature)`` is a batch policy (``policy(batch of (messages,
  tools)) -> texts``, as :class:`toolkit.rl.policy.Sampler`) that samples on a vLLM server (``LocalServer(engine=
  "vllm")``, the CPU build ``make vllm`` installs) holding the trainer's starting weights: the SFT-merged folder
  (``toolkit.sft.export.merged_folder``) where the loaded model carries the shipped adapter, else the base model's
  folder. The server runs float32, as the trainer does, with LoRA enabled at run time.
- The server starts at the first call (its LoRA room sized by the adapter's rank then); ``server=`` takes one
  already started (tests). Before each call it compares the trainer's LoRA weights with those it last handed over
  (each tensor's version counter: an optimizer step bumps it); when they changed it saves the adapter (peft), loads
  it into the server (``POST /v1/load_lora_adapter``) under a new name and unloads the previous one, so every
  rollout samples the policy being trained. ``handovers`` and ``handover_s`` count them. The kit renders every
  prompt (the same template and token ids as the trainer) and sends ids to ``/v1/completions``.
- A server that refuses a request, answers with an error or a broken reply, or died mid-run raises one
  ``toolkit.backends.http.ServerError`` line (the kit's one server-error type, with its ``kind``): the route, the
  cause, and a dead server's exit status and last error. Requests go through the official ``openai`` client, as
  every served backend's do (``toolkit.backends.http``); ``benchmarks/rl.py`` prints it and keeps the checkpoints.
- Measured on 2 cores (``benchmarks/rl_engines.py``, ``benchmarks/results/rl/engines_calc.json``): 16 episodes a
  step, 59.7 s against the transformers sampler's 87.8 s (1.47x), a handover 0.05-0.09 s, the server's start 34 s
  once per run.

What it leaves out
- Adapters that retrain token rows (the SFT adapter's ``trainable_token_indices``: vLLM's LoRA does not load them);
  the RL adapter has none. Several servers; a server the trainer did not start (its weights must be the trainer's).
- Bit-identical sampling to the transformers sampler: the two engines draw different random numbers.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from toolkit import fetch
from toolkit.backends.http import ServerError, call_server, openai_client
from toolkit.backends.serve import LocalServer
from toolkit.models import template_for
from toolkit.qwen import STOP_IDS
from toolkit.render import render
from toolkit.sft.export import merged_folder

TIMEOUT_S = 600.0  # one request: a step's 16 episodes on 2 CPU cores take about a minute


def _guarded(server, route: str, fn, timeout: float):
    """Run one request to ``server``; any failure (refused, timed out, an HTTP error, a reply that is not JSON) is one
    ``ServerError`` line naming the route, the cause and, where the server has died, its exit and last error."""
    try:
        return call_server(server.url, f"POST {route}", fn, timeout)
    except ServerError as e:
        msg = f"the rollouts' vLLM server failed: {e}"
        if hasattr(server, "alive") and not server.alive():
            msg += f"; the server exited with {server.proc.returncode}: {server.failure()}"
        raise ServerError(e.kind, msg[:900]) from None


def complete(server, client, body: dict, timeout: float = TIMEOUT_S) -> dict:
    """``POST /completions`` through the official ``openai`` client's ``completions.create``: the kit's ids as the
    prompt, vLLM's own fields (``stop_token_ids``, ``skip_special_tokens``) in ``extra_body``. The reply as a dict."""
    own = {k: body[k] for k in ("model", "prompt", "max_tokens", "temperature") if k in body}
    extra = {k: v for k, v in body.items() if k not in own}

    def fn():
        reply = client.completions.create(**own, extra_body=extra)
        if not hasattr(reply, "model_dump"):  # the client hands back a reply that is not JSON as its text
            raise ValueError(f"a reply that is not a JSON completion: {' '.join(str(reply).split())[:80]!r}")
        return reply.model_dump()

    return _guarded(server, "/completions", fn, timeout)


def lora_route(server, client, route: str, body: dict, timeout: float = TIMEOUT_S) -> str:
    """``POST`` to one of vLLM's LoRA routes (``/load_lora_adapter``, ``/unload_lora_adapter``) through the client's
    plain ``post``; vLLM answers them in plain text."""
    return _guarded(server, route, lambda: client.post(route, body=body, cast_to=str), timeout)


def start_folder(loaded) -> Path:
    """The folder holding the weights the trainer starts from (before any RL adapter)."""
    if getattr(loaded, "adapter", None):
        return merged_folder(say=lambda m: None)
    folder = fetch.installed_folder()
    if folder is None:
        raise FileNotFoundError("the real offline model is not installed: run `make real-model`")
    return folder


class ServedSampler:
    def __init__(self, loaded, max_new: int = 96, temperature: float = 1.0, threads: int = 2, server=None):
        if not temperature >= 0:
            raise ValueError(f"temperature must be >= 0 (0: greedy), not {temperature}")
        self.loaded, self.max_new, self.temperature = loaded, max_new, temperature
        self.template, self.tokens, self.calls = template_for(loaded), 0, 0
        self.handovers, self.handover_s, self._stamp, self._name = 0, 0.0, None, None
        self._dir = Path(tempfile.mkdtemp(prefix="toolkit-rl-served-"))
        self.threads, self.server = threads, server  # started at the first call, when the adapter's rank is known
        self._client = None  # one openai client (one connection pool) per server, made with it

    def _ensure_server(self, rank: int):
        if self.server is None:
            self.server = LocalServer(
                start_folder(self.loaded),
                engine="vllm",
                dtype="float32",  # the trainer's precision: both sample the same policy
                threads=self.threads,
                extra=["--enable-lora", "--max-lora-rank", str(rank), "--max-loras", "1"],
                env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
            )
        if self._client is None:
            self._client = openai_client(self.server.url, TIMEOUT_S)
        return self.server

    def _lora(self):
        m = self.loaded.model
        return [(n, p) for n, p in m.named_parameters() if "lora_" in n] if hasattr(m, "peft_config") else []

    def _rank(self) -> int:
        cfg = getattr(self.loaded.model, "peft_config", {}).get("default")
        return max(8, int(getattr(cfg, "r", 8)))

    def model_name(self) -> str:
        """The name the server samples the trainer's current weights under, handing them over first if changed."""
        lora = self._lora()
        server = self._ensure_server(self._rank())
        if not lora:
            return str(server.model)
        stamp = tuple((n, p._version) for n, p in lora)
        if stamp != self._stamp:
            t0 = time.perf_counter()
            name = f"rl-{self.handovers}"
            self.loaded.model.save_pretrained(self._dir / name)
            body = {"lora_name": name, "lora_path": str(self._dir / name)}
            lora_route(server, self._client, "/load_lora_adapter", body)
            if self._name:
                lora_route(server, self._client, "/unload_lora_adapter", {"lora_name": self._name})
                shutil.rmtree(self._dir / self._name, ignore_errors=True)
            self._stamp, self._name = stamp, name
            self.handovers += 1
            self.handover_s += time.perf_counter() - t0
        return self._name

    def __call__(self, batch: list[tuple[list[dict], list[dict]]]) -> list[str]:
        tok = self.loaded.tokenizer
        prompts = [render(m, t, self.template, tokenizer=tok).ids for m, t in batch]
        body = dict(model=self.model_name(), prompt=prompts, max_tokens=self.max_new, temperature=self.temperature)
        body |= dict(stop_token_ids=sorted(STOP_IDS), skip_special_tokens=False)
        out = self.complete(body)
        try:
            texts = [c["text"] for c in sorted(out["choices"], key=lambda c: c["index"])]
            used = int(out["usage"]["completion_tokens"])
        except (KeyError, TypeError, ValueError) as e:
            msg = f"the rollouts' vLLM server sent a reply without {e} in it: {str(out)[:200]}"
            raise ServerError("malformed_response", msg) from None
        if len(texts) != len(prompts):
            msg = f"the rollouts' vLLM server answered {len(texts)} of {len(prompts)} prompts"
            raise ServerError("malformed_response", msg)
        self.calls, self.tokens = self.calls + 1, self.tokens + used
        return texts

    def complete(self, body: dict) -> dict:
        """One ``/completions`` request to this sampler's server with its client, ``body`` sent as given."""
        return complete(self._ensure_server(self._rank()), self._client, body)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self.server is not None:
            self.server.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> ServedSampler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
