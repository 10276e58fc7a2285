"""Start and stop the kit's own MCP server as a subprocess, and check by PID that it is gone.

What it does
- ``stdio_server(...)`` returns the SDK's ``StdioServerParameters`` for ``python -m toolkit mcp serve --stdio``
  (the SDK's stdio client launches it; the server prints ``READY_MARK`` and its PID to stderr once imported).
- :class:`HTTPServer` runs ``python -m toolkit mcp serve --http --port 0``, reads the URL the server announces
  (a free 127.0.0.1 port chosen by the OS, no race), and ``stop()`` ends it by PID (SIGTERM, then SIGKILL);
  ``wait_for_stderr(text)`` waits for an event the server reports on stderr (a session's expiry).
- ``pid_alive(pid)`` says whether a process still exists (a zombie counts as gone).

What it leaves out
- Windows process handling; starting third-party servers (pass their own ``StdioServerParameters`` or URL to
  ``toolkit.mcp.client.Connection``).
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import StdioServerParameters

from toolkit.mcp.wire import read_shared
from toolkit.paths import kit_root

READY_MARK = "toolcall-kit MCP server ready"  # the kit's stdio server prints this (and its PID) to stderr
REPO_ROOT = kit_root()  # the folder holding this toolkit package: the child imports the same copy


def _server_args(demo: bool, test_tools: bool, notes_dir: str | os.PathLike | None) -> list[str]:
    args = ["--demo"] if demo else []
    args += ["--test-tools"] if test_tools else []
    args += ["--notes-dir", str(notes_dir)] if notes_dir else []
    return args


def _child_env() -> dict[str, str]:
    # the SDK passes only a few safe variables to a stdio server; the kit must still import and stay offline
    env = {
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    for key in ("TOOLKIT_CACHE", "TOOLKIT_NOTES_DIR", "HF_HOME"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def stdio_server(demo: bool = False, test_tools: bool = False, notes_dir=None, pid_file=None) -> StdioServerParameters:
    """How to launch ``python -m toolkit mcp serve --stdio`` as the host's subprocess."""
    args = ["-m", "toolkit", "mcp", "serve", "--stdio", *_server_args(demo, test_tools, notes_dir)]
    args += ["--pid-file", str(pid_file)] if pid_file else []
    return StdioServerParameters(command=sys.executable, args=args, env=_child_env(), cwd=str(REPO_ROOT))


class HTTPServer:
    """``python -m toolkit mcp serve --http --port 0`` as a subprocess; ``url`` once it listens, ``stop()`` by PID."""

    def __init__(
        self,
        demo: bool = False,
        test_tools: bool = False,
        notes_dir=None,
        startup_timeout: float = 60,
        session_idle: float | None = None,
    ):
        cmd = [
            sys.executable,
            "-m",
            "toolkit",
            "mcp",
            "serve",
            "--http",
            "--port",
            "0",
            *_server_args(demo, test_tools, notes_dir),
        ]
        cmd += ["--session-idle", str(session_idle)] if session_idle else []
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, **_child_env()},
            cwd=str(REPO_ROOT),
        )
        self.pid = self.proc.pid
        atexit.register(self.stop)  # never leave a server behind when the notebook or test process ends
        self.url = self._wait_for_url(startup_timeout)

    def _wait_for_url(self, timeout: float) -> str:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.stop()
            raise TimeoutError(f"MCP HTTP server did not start within {timeout} s")
        line = self.proc.stdout.readline()
        if "http://" not in line:
            self.stop()
            raise RuntimeError(f"MCP HTTP server failed to start: {line!r} {self.stderr()[-2000:]}")
        return line.split("on ", 1)[1].split()[0]

    def stderr(self) -> str:
        return read_shared(self._stderr)

    def wait_for_stderr(self, text: str, timeout: float = 30, after: int = 0) -> bool:
        """Wait until ``text`` appears in the server's stderr past offset ``after`` (an event the server reports,
        such as a session's expiry); False after ``timeout`` seconds or once the server has exited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.stderr()[after:]:
                return True
            if self.proc.poll() is not None:
                return text in self.stderr()[after:]
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 10) -> int:
        """SIGTERM, then SIGKILL if it lingers; returns the exit code."""
        atexit.unregister(self.stop)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self) -> HTTPServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID still exists (a zombie we have not reaped counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # Linux: a zombie still answers kill(0); its state letter says it is dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
