"""Start and stop a local OpenAI-compatible server on 127.0.0.1, by PID: ``transformers serve`` or vLLM's CPU build.

What it does
- :class:`LocalServer` runs ``transformers serve MODEL --host 127.0.0.1 --port P --device cpu`` (``engine=
  "transformers"``, in the kit's own venv) or vLLM's OpenAI server (``engine="vllm"``, from vLLM's own venv: its
  command, environment and workarounds are ``toolkit.backends.vllm_local``'s), P a free port; waits for ``GET
  /health`` (bounded; an early exit or a timeout is one line with the end of the server's log), and ``stop()`` ends
  it by PID (SIGTERM to its process group, then SIGKILL) and removes a model folder ``folder_for`` saved; it also
  runs at exit, and when the process that started it is sent SIGTERM (``stop_on_sigterm``). ``url`` is
  the ``/v1`` base the kit's HTTP backend takes. The model defaults to the real offline model's folder
  (``toolkit.fetch.installed_folder()``); ``folder_for(loaded)`` gives a folder for any loaded model (the stand-in is
  saved to a temporary folder). The server's log goes to a file (``log_tail()`` shows its end, ``log_text()`` all).
- ``model_to_serve(name)``: the model a server started here holds for ``load(name)``'s choice, and a note where
  "auto" picks the int8 build (memory is short, as in Binder's 2 GB): the server holds that build, and the kernel
  drops its own weights before the server starts (notebook 10 prints the note).
- ``default_engine(loaded)``: what the notebooks and benchmarks start — ``$TOOLKIT_SERVE_ENGINE`` if set, else vLLM
  where it is installed and the weights are real and not the int8 build, else ``transformers serve`` (which serves
  the int8 build through ``toolkit.backends.serve_small``).
- ``engines_to_run(choice, url)``: the servers a benchmark's ``--engine`` starts (both, where vLLM is installed).
- ``command(...)`` is the exact ``transformers serve`` command line, for the README and for a teacher who starts it
  by hand; ``LocalServer.argv`` is the one a server was started with.

What it leaves out
- SGLang (CUDA only); GPUs; Windows; several base models per server.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from toolkit import fetch, memory, models, small
from toolkit.backends import vllm_local
from toolkit.backends.serve_small import is_int8_folder

START_TIMEOUT_S = 180.0
VLLM_START_TIMEOUT_S = 420.0  # measured here: ready in 70-140 s on 2 cores (eager mode), longer on a busy machine
ENGINES = ("transformers", "vllm")
SAVED_PREFIX = "toolkit-served-model-"  # folder_for's temporary folders: LocalServer.stop() removes them


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (the server binds it itself; a lost race fails its start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _executable() -> list[str]:
    exe = Path(sys.executable).with_name("transformers")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("transformers")
    if found:
        return [found]
    return [sys.executable, "-m", "transformers.cli.transformers"]


def command(model: str, port: int, *, device: str = "cpu", dtype: str | None = None, extra=()) -> list[str]:
    """The ``transformers serve`` command line the kit runs (bound to 127.0.0.1). ``dtype`` defaults to what this
    CPU multiplies fast, as for vLLM (``vllm_local.dtype()``: bf16 only with avx512_bf16 or AMX, else float32). The
    kit's int8 build is served by the same server through ``python -m toolkit.backends.serve_small`` (its loader
    swapped for ``toolkit.small``'s), with no ``--dtype``: the artifact's precision is fixed."""
    int8 = is_int8_folder(model)
    exe = [sys.executable, "-m", "toolkit.backends.serve_small"] if int8 else [*_executable(), "serve"]
    args = [str(model), "--host", "127.0.0.1", "--port", str(port), "--device", device]
    return [*exe, *args, *([] if int8 else ["--dtype", dtype or vllm_local.dtype()]), *extra]


ENGINE_ENV = "TOOLKIT_SERVE_ENGINE"


def default_engine(loaded=None) -> str:
    """The engine a notebook or benchmark starts: ``$TOOLKIT_SERVE_ENGINE`` (transformers | vllm) if set, else vLLM
    where ``make vllm`` installed it and the model has real weights, else ``transformers serve``."""
    named = os.environ.get(ENGINE_ENV, "").strip().lower()
    if named:
        if named not in ENGINES:
            raise ValueError(f"{ENGINE_ENV}={named!r}: expected one of {ENGINES}")
        return named
    real = loaded is None or getattr(loaded, "semantic", True)
    int8 = "int8" in str(getattr(loaded, "dtype", ""))  # vLLM cannot load the kit's int8 build
    return "vllm" if real and not int8 and vllm_local.state()[0] else "transformers"


def engines_to_run(choice: str, url: str | None = None) -> tuple[list[str], str]:
    """The servers a benchmark starts for ``--engine`` (transformers | vllm | both) and a note ("" or why vLLM is left
    out of "both"); ``["url"]`` for a server given by URL. ``ValueError`` (one line) when vLLM alone is asked for
    and cannot run."""
    if url:
        return ["url"], ""
    engines = ["transformers", "vllm"] if choice == "both" else [choice]
    usable, why = vllm_local.state()
    if "vllm" in engines and not usable:
        if choice == "vllm":
            raise ValueError(why)
        return ["transformers"], f"{why}: transformers serve only"
    return engines, ""


def folder_for(loaded, out_dir: str | os.PathLike | None = None) -> str:
    """A folder ``transformers serve`` can load for a ``toolkit.models.Loaded``: the real offline model's own folder,
    a local folder as given, otherwise (the random-weight stand-in, a GGUF, the real model with the kit's adapter
    merged) the model and tokenizer saved to ``out_dir`` (a new temporary folder by default), so that the server runs
    exactly the weights the kernel loaded. The int8 build is its artifact folder (``small.target_folder``), which
    ``command`` serves through ``toolkit.backends.serve_small``."""
    if "int8" in str(getattr(loaded, "dtype", "")):
        return str(small.target_folder(bool(getattr(loaded, "adapter", None))))
    adapted = bool(getattr(loaded, "adapter", None))
    if loaded.kind == "real-offline" and fetch.installed_folder() is not None and not adapted:
        return str(fetch.installed_folder())
    if loaded.kind == "local" and Path(loaded.name).is_dir():
        return str(loaded.name)
    # A random-weight model's folder says so in its name: a server's model id is the folder, and
    # toolkit.backends.choose reads "stand-in" in it as "mechanics only".
    prefix = SAVED_PREFIX + ("" if getattr(loaded, "semantic", True) else "stand-in-") + ("lora-" if adapted else "")
    out = Path(out_dir or tempfile.mkdtemp(prefix=prefix))
    loaded.model.save_pretrained(out)
    loaded.tokenizer.save_pretrained(out)
    return str(out)


def model_to_serve(name: str = "auto") -> tuple[str, str | None]:
    """(model name, note or None) for a server started on this machine. ``TOOLKIT_MODEL`` overrides "auto", as in
    ``models.load``. Where "auto" picks the int8 build (``models.pick_auto``: memory is short, as in Binder's 2 GB),
    the server holds that build (``command``: ``toolkit.backends.serve_small``) and the note says so, and that the
    kernel should drop its own copy before the server starts: both would not fit. Reads no model."""
    name = os.environ.get("TOOLKIT_MODEL") or name
    if name != "auto" or models.pick_auto()[0] != models.SMALL:
        return name, None
    have = memory.memory_available() / 2**30
    return models.SMALL, (
        f"only {have:.1f} GB of memory here: the server started below holds the int8 build (transformers serve, "
        "its loader swapped for the kit's), and this kernel drops its own copy of the weights before it starts."
    )


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def stop_on_sigterm() -> None:
    """Make a SIGTERM to this process (``kill PID``, a stopped job) leave through ``SystemExit``, so ``finally``
    blocks and ``atexit`` stop the servers it started; Python's default would end it at once and leave them
    running. Only from the main thread, and only where no one has set a handler (a Jupyter kernel keeps its own)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


class LocalServer:
    """A server subprocess on 127.0.0.1 (``engine``: transformers | vllm); a context manager, or call ``stop()``.
    vLLM only: ``lora`` = {name: LoRA adapter folder}, served beside the base model under that name; ``served_name``:
    the model id the server answers to (default: the folder); ``kv_cache_gib``: its KV-cache memory. ``env``: more
    environment for the server process (e.g. vLLM's ``VLLM_ALLOW_RUNTIME_LORA_UPDATING``)."""

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        engine: str = "transformers",
        port: int | None = None,
        device: str = "cpu",
        dtype: str | None = None,
        threads: int | None = None,
        lora: dict | None = None,
        served_name: str | None = None,
        kv_cache_gib: float = vllm_local.KV_CACHE_GIB,
        extra=(),
        start_timeout_s: float | None = None,
        env: dict | None = None,
    ):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if model is None:
            folder = fetch.installed_folder()
            if folder is None:
                raise FileNotFoundError("the real offline model is not installed: run `make real-model`")
            model = folder
        self.engine, self.model, self.lora = engine, str(model), dict(lora or {})
        self.port = int(port or free_port())
        self.url = f"http://127.0.0.1:{self.port}/v1"
        if engine == "vllm":
            if is_int8_folder(self.model):
                raise ValueError(
                    "vLLM cannot load the kit's int8 build: use engine='transformers', or serve the float model"
                )
            usable, why = vllm_local.state()
            if not usable:
                raise FileNotFoundError(why)
            for name, folder in self.lora.items():
                problem = vllm_local.unsupported_adapter(folder)
                if problem:
                    raise ValueError(f"LoRA adapter {name!r}: {problem}")
            self.argv = vllm_local.command(
                self.model, self.port, served_name=served_name, lora=self.lora, dtype_name=dtype, extra=extra
            )
            env = vllm_local.environment(dict(os.environ, **(env or {})), kv_cache_gib=kv_cache_gib)
            timeout = VLLM_START_TIMEOUT_S if start_timeout_s is None else start_timeout_s
        else:
            if self.lora or served_name:
                raise ValueError("lora and served_name are vLLM options (engine='vllm')")
            self.argv = command(self.model, self.port, device=device, dtype=dtype, extra=extra)
            env = dict(os.environ, **(env or {}), HF_HUB_OFFLINE="1")
            timeout = START_TIMEOUT_S if start_timeout_s is None else start_timeout_s
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)
        self._log = tempfile.NamedTemporaryFile("w+", prefix=f"toolkit-{engine}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.pid = self.proc.pid
        atexit.register(self.stop)  # a kernel or script that ends without stop() does not leave the server behind
        stop_on_sigterm()  # ... nor one that is killed with SIGTERM
        self.started_s = time.monotonic()
        try:
            self._wait(timeout)
            self.ready_s = time.monotonic() - self.started_s  # seconds from start to a healthy server
        except BaseException:
            self.stop()
            raise

    def _wait(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.engine} server exited with {self.proc.returncode}: {self.failure()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{self.engine} server did not answer /health within {timeout_s:g} s: {self.failure()}")

    def log_text(self) -> str:
        try:
            return Path(self._log.name).read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 600) -> str:
        return " ".join(self.log_text()[-chars:].split())

    def failure(self, chars: int = 400) -> str:
        """The log's last ``SomethingError: ...`` line (a failed start ends in a traceback, then shutdown noise),
        else its tail; one line, bounded."""
        errors = [ln for ln in self.log_text().splitlines() if re.search(r"\b\w*(Error|Exception): ", ln)]
        return " ".join((errors[-1] if errors else self.log_tail(chars)).split())[:chars]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM by PID (its process group), then SIGKILL after ``grace_s``; removes the log."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        if not self._log.closed:
            self._log.close()
            Path(self._log.name).unlink(missing_ok=True)
        saved = Path(self.model)
        if saved.parent == Path(tempfile.gettempdir()) and saved.name.startswith(SAVED_PREFIX):
            shutil.rmtree(saved, ignore_errors=True)  # a model folder_for saved for this server

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
