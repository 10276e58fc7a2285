"""Every notebook in a real browser: JupyterLab and Voila driven by headless Chromium through Playwright.

For each notebook the check opens it in JupyterLab, runs all cells, waits for the kernel and for every widget to
render, then moves controls (slider handle + arrow key, button click, dropdown choice, checkbox, token chip click)
and requires that the view changed in a way only the kernel could cause: a plotly figure's data or title, or text
outside the control itself. Every plotly figure a widget view draws must also equal a figure held by the kernel
(a live ``toolkit.widgets.plot.FigureView``'s figure or a FigureWidget: title and x/y/z data), before and after the
move: a figure that lost its initial state, or a trace changed in the kernel but never redrawn, fails. Every plot
must fit the 1,024-px-wide window (no plot cut off or scrolled sideways). Any error output, Traceback on stderr,
"Error displaying widget" or uncaught page error fails. Every figure the notebook made must be on the page: as
many plots as its cells have plotly outputs plus figures held by live FigureViews in the kernel (and at least
the notebook's ``min_figures``); the check waits for them and fails on fewer, since every other figure check only
looks at the plots that are there. Notebooks 01 and 04 (several figures) are also opened as apps in Voila (what
`make app` serves), where each app's figures and controlled outputs are counted the same way (``figures``,
``others`` in APPS) and every control is moved.

Under load: the whole module runs beside a CPU burner (one busy process per core, as on a busy Binder node; each
exits by itself after an hour and all are killed by PID when the module ends), because that is where figures
went blank (issue 12). TOOLKIT_BROWSER_BURN=N sets the number of burners (0: none, e.g. when the test already
runs beside CPU-bound tests).

The check returns a report instead of asserting, so ``test_check_catches_broken_widgets`` can run the very same
check on ``tests/fixtures/broken_widget.ipynb`` and require that it reports the broken observer and the broken
view (and passes the working widget beside them).

Servers run from a temporary copy of notebooks/ (nothing is written into the repo), bind 127.0.0.1 with a random
token, and are stopped by PID (their process group, then any kernel still alive) even when a test fails. Which
model and which limits (TOOLKIT_BROWSER_MODEL):
- "binder" (default): Binder as binder/postBuild leaves it — the real model and its int8 build in the kit's cache —
  with the servers (JupyterLab, Voila) and every kernel they start inside a cgroup of 2 GB and one CPU (the Binder
  pod; ``BinderLimits`` from tests/test_notebooks.py), one thread, started through binder/start. ``load("auto")``
  picks the int8 build there. Each notebook's seconds, the peak PSS of the server and its kernels, and the cgroup's
  own peak are recorded for the phase summary; a notebook fails if the kernel was killed for memory, if that RSS
  peak passes 2 GB, or, with TOOLKIT_REQUIRE_REAL_MODEL=1 (make test), if it ran the stand-in where it should run
  the real model (notebook 10 says why its local server holds the stand-in there). These are the notebooks'
  Binder runs: tests/test_notebooks.py runs them headless only where this test cannot.
- "stand-in": Binder without a model (the kit's cache hidden): the random-weight stand-in, no cgroup; quicker.
- "machine": this machine's model and both threads, no cgroup.
Screenshots go to a temporary folder whose path is printed; it is deleted after a passing run unless
TOOLKIT_KEEP_SCREENSHOTS=1. Uses Debian's /usr/bin/chromium (`make system`); never downloads a browser.

Leaves out: typing into text boxes, drag gestures, and widgets that only respond to hover.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from toolkit.paths import script_module

# The notebooks' Binder cgroup, memory sampler and checks, from tests/test_notebooks.py: by file, since tests/ is not a
# package and benchmarks/figures_cli.py loads this file by its path too (pytest has usually imported it already).
_nb = sys.modules.get("test_notebooks") or script_module(Path(__file__).with_name("test_notebooks.py"))
AFTER_RUN, CHECK, CHROMIUM = _nb.AFTER_RUN, _nb.CHECK, _nb.CHROMIUM
MINI_STEPS = _nb.MINI_STEPS
PEAK_LIMIT_BYTES, _PeakMemory, binder_limits, picks_a_model = (
    _nb.PEAK_LIMIT_BYTES,
    _nb._PeakMemory,
    _nb.binder_limits,
    _nb.picks_a_model,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FIXTURE = ROOT / "tests" / "fixtures" / "broken_widget.ipynb"
OVERRIDES = ROOT / "binder" / "overrides.json"  # the same settings Binder installs (no news popup)
# Which model and limits the notebooks get (see the docstring): "binder", "stand-in" or "machine".
MODEL_MODES = ("binder", "stand-in", "machine")
MODEL_MODE = os.environ.get("TOOLKIT_BROWSER_MODEL", "binder")
if MODEL_MODE not in MODEL_MODES:
    raise pytest.UsageError(f"TOOLKIT_BROWSER_MODEL={MODEL_MODE!r}: use one of {', '.join(MODEL_MODES)}")
KERNEL_GONE_S = 60  # seconds for a notebook's kernel to exit after its shutdown, before the next notebook starts
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium missing: run `make system`"),
]


@dataclass
class Expect:
    """What one notebook must show. Anything not listed gets the generic checks only."""

    min_widgets: int = 0  # widget outputs that must render
    min_interactive: int = 0  # widgets with a control that must respond
    run_timeout: float = 420  # seconds for "run all cells"
    action_timeout: float = 30  # seconds for the kernel to answer one control move
    extra_controls: tuple = ()  # CSS selectors of clickable elements of custom (anywidget) views
    scope: str = "cell"  # where a response may appear: "cell" (the cell's outputs) or "notebook"
    figure_wait: float = 90  # seconds for drawn figures to agree with the kernel's after run all
    render_wait: float = 90  # seconds for every widget view to render after run all (a broken one never does)
    min_figures: int = 0  # plotly figures that must be drawn (static + widget views), a floor under the
    # count the check computes from the cell outputs and the kernel's live views


# Per-notebook expectations (counts are lower bounds, measured on the committed notebooks).
EXPECT = {
    "01_rendering.ipynb": Expect(min_widgets=5, min_interactive=4, min_figures=1),
    "02_constrained_decoding.ipynb": Expect(min_widgets=1, min_interactive=1, min_figures=1),
    # The "run" button redraws the trace view of an earlier cell: look for the change anywhere in the notebook.
    "03_host_loop.ipynb": Expect(min_widgets=3, min_interactive=2, scope="notebook", action_timeout=120, min_figures=2),
    "04_cost_and_reliability.ipynb": Expect(min_widgets=3, min_interactive=3, min_figures=3),
    "05_mcp.ipynb": Expect(min_widgets=5, min_interactive=4),
    "06_training_mask.ipynb": Expect(min_widgets=1, min_interactive=1),  # the loss curve is a static figure
    "07_gpu_speed.ipynb": Expect(),  # static figures of saved GPU numbers: no widgets
    # pattern/task dropdowns over saved runs, the k slider; the isolation figure is static
    "09_patterns_and_rag.ipynb": Expect(min_widgets=2, min_interactive=2, min_figures=3),
    "10_serving.ipynb": Expect(),  # tables and text from a transformers serve it starts (stand-in in the browser test)
}

# Notebooks as apps in Voila: which control to move and what its figure must say before and after.
# ``title(n)`` computes the expected figure title from the kit itself, so the test checks the initial state the
# notebook asked for (a figure changed after its last draw would show stale state).


def _tool_cost_title(n: int) -> str:
    from toolkit.book.catalog import realistic_tools
    from toolkit.widgets.toolcost import ToolCountCost

    return ToolCountCost(tools=realistic_tools(100), template="qwen3", n=n)._title(n)


def _growth_title(T: int) -> str:
    from toolkit.widgets.cost import GrowthView

    return GrowthView(T=T).figure.layout.title.text


# ``figures``: plotly figures the app must draw; ``others``: outputs with a control besides the named slider's,
# each of which must respond. Both are required (the check waits for them, then fails on fewer): Voila draws
# widgets one by one after the page loads, and a check that only looks at what is there passes a missing figure.
APPS = [
    {
        "notebook": "01_rendering.ipynb",
        "slider": "tools",
        "initial": 10,
        "step": 1,
        "title": _tool_cost_title,
        "figures": 1,
        "others": 3,
    },  # the tool-cost figure; three token views (chips)
    # three figures in one notebook: where FigureWidget's 2 s load limit left one blank under load
    {
        "notebook": "04_cost_and_reliability.ipynb",
        "slider": "T (tool tokens)",
        "initial": 10_000,
        "step": 500,
        "title": _growth_title,
        "figures": 3,
        "others": 2,
    },
]  # growth, decay (p, k sliders), decode (model size)
APP_WAIT = 180  # seconds for every figure and control of an app to appear after its first slider did

NEWS_QUESTION = "Would you like to get notified about official Jupyter news?"
CONTROL_ORDER = ("slider", "button", "select", "checkbox", "chip")
BUTTONS = "button:not([disabled]):not(.mod-active)"  # .mod-active: the chosen one of a ToggleButtons group
BLANK_S = 30  # a figure with no trace this long after its cell finished is blank (issue 12 wants <= 10 s; measured)
MAX_BUTTONS = 3  # buttons tried per widget until one changes the view (a "back" button at step 0 changes nothing)
DEFAULT_CHIPS = (".tk-tok",)  # toolkit.widgets.tokens.TokenView


# ---------------------------------------------------------------------------------------------------- servers
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A Jupyter server (lab or voila) in its own process group; ``stop()`` ends it and its kernels by PID."""

    def __init__(self, argv: list[str], url: str, token: str, cwd: Path, log: Path, env: dict, limits=None):
        self.url, self.token, self.log = url, token, log
        self._log = open(log, "w")
        # With ``limits`` (a BinderLimits) the server joins the cgroup before it runs, so its kernels start inside.
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=(lambda: limits.add(os.getpid())) if limits is not None else None,
        )
        self.pids: set[int] = set()

    def wait_ready(self, path: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}{path}?token={self.token}", timeout=3) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"server not ready after {timeout} s:\n{self.log.read_text()[-3000:]}")

    def remember_children(self) -> None:
        """Kernels start in their own sessions, so killing the server's group misses them: note their PIDs."""
        import psutil

        try:
            self.pids |= {p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)}
        except psutil.Error:
            pass

    def kernels(self) -> list[int]:
        """PIDs of the server's kernels still running (any process below the server)."""
        import psutil

        try:
            return [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True) if p.status() != "zombie"]
        except psutil.Error:
            return []

    def stop(self) -> None:
        import psutil

        self.remember_children()
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
                self.proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        for pid in self.pids:  # anything the server left behind (a kernel it could not shut down)
            try:
                p = psutil.Process(pid)
                p.kill()
                p.wait(timeout=5)
            except psutil.Error:
                pass
        self._log.close()


def _server_env(home: Path) -> dict:
    # a Binder pod has about one CPU; `make test` sets OMP_NUM_THREADS=1 (two test workers on two cores)
    threads = "1" if MODEL_MODE == "binder" else os.environ.get("OMP_NUM_THREADS", "2")
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
        **MINI_STEPS,
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        JUPYTER_ALLOW_INSECURE_WRITES="1",
    )
    env.pop("JUPYTER_TOKEN", None)
    if MODEL_MODE == "stand-in":
        # Binder without a model: nothing in the kit's cache (only the built tokenizers, to save time).
        from toolkit.paths import cache_dir

        cache = home / "toolkit-cache"
        cache.mkdir(exist_ok=True)
        if (cache_dir() / "tokenizers").is_dir() and not (cache / "tokenizers").exists():
            (cache / "tokenizers").symlink_to(cache_dir() / "tokenizers", target_is_directory=True)
        env["TOOLKIT_CACHE"] = str(cache)
    return env


def _launcher() -> list[str]:
    # In the Binder modes the servers start through binder/start, as on mybinder.org.
    return [str(ROOT / "binder" / "start")] if MODEL_MODE != "machine" else []


def _started(server: Server, path: str) -> Server:
    try:
        server.wait_ready(path)
    except BaseException:
        server.stop()  # a server that never answered is still a process to end
        raise
    return server


def start_lab(workdir: Path, limits=None) -> Server:
    """JupyterLab on a free 127.0.0.1 port with a random token, serving ``workdir/notebooks``."""
    settings = workdir / "lab-settings"
    settings.mkdir(exist_ok=True)
    shutil.copy(OVERRIDES, settings / "overrides.json")
    port, token = _free_port(), secrets.token_hex(16)
    argv = _launcher() + [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.token={token}",
        f"--notebook-dir={workdir / 'notebooks'}",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run commands, read cell outputs
        f"--LabApp.app_settings_dir={settings}",
        f"--LabApp.user_settings_dir={workdir / 'lab-user'}",
        f"--LabApp.workspaces_dir={workdir / 'workspaces'}",
    ]
    if hasattr(os, "getuid") and os.getuid() == 0:
        argv.append("--allow-root")
    return _started(
        Server(argv, f"http://127.0.0.1:{port}", token, workdir, workdir / "lab.log", _server_env(workdir), limits),
        "/api/status",
    )


def start_voila(workdir: Path, limits=None) -> Server:
    """Voila the way `make app` runs it (plus a token, since a test server should not be open): from a folder
    holding the repository's ``voila.json``, which Voila reads from its working directory, as `make app` and
    Binder do from the repository root."""
    shutil.copy(ROOT / "voila.json", workdir / "voila.json")
    port, token = _free_port(), secrets.token_hex(16)
    argv = _launcher() + [
        sys.executable,
        "-m",
        "voila",
        str(workdir / "notebooks"),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        f"--Voila.token={token}",
        "--show_tracebacks=True",
    ]
    return _started(
        Server(argv, f"http://127.0.0.1:{port}", token, workdir, workdir / "voila.log", _server_env(workdir), limits),
        "/",
    )


# ---------------------------------------------------------------------------------------------------- load
_SPIN = "import time\nend = time.monotonic() + {s}\nx = 0\nwhile time.monotonic() < end:\n    x = (x * 48271) % 2147483647\n"


@contextlib.contextmanager
def burn_cpu(workers: int | None = None, seconds: float = 3600):
    """Keep ``workers`` cores busy (default: all) while the block runs, as on a shared Binder node. Bounded twice:
    each spinner exits by itself after ``seconds``, and each is killed by its PID when the block exits."""
    workers = (os.cpu_count() or 2) if workers is None else workers
    procs = []
    try:
        for _ in range(workers):
            procs.append(subprocess.Popen([sys.executable, "-c", _SPIN.format(s=float(seconds))]))
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


# ---------------------------------------------------------------------------------------------------- reports
@dataclass
class WidgetResult:
    where: str  # "cell 12 output 0"
    rendered: bool = False
    controls: dict = field(default_factory=dict)
    moved: list = field(default_factory=list)  # (control, changed: bool, what changed)
    problems: list = field(default_factory=list)

    @property
    def responded(self) -> bool:
        return any(changed for _, changed, _ in self.moved)


@dataclass
class Report:
    notebook: str
    seconds: float = 0.0
    errors: list = field(default_factory=list)  # error outputs, Tracebacks, page errors, figure mismatches
    widgets: list = field(default_factory=list)
    drawn_s: float | None = None  # from the last cell finished until every figure had traces
    plots: int | None = None  # plotly figures on the page when the check looked
    shots: Path | None = None
    printed: str = ""  # what the cells printed (stream outputs), for the checks on which model ran
    after: str = ""  # what the ``after`` code printed in the kernel
    marks: list = field(default_factory=list)  # (step, seconds since the check began): where the time went

    def mark(self, step: str, t0: float) -> None:
        self.marks.append((step, round(time.monotonic() - t0, 1)))

    def failures(self, expect: Expect | None = None) -> list[str]:
        out = list(self.errors)
        for w in self.widgets:
            if not w.rendered:
                out.append(f"{w.where}: widget did not render ({'; '.join(w.problems) or 'empty'})")
            elif w.controls and not w.responded:
                tried = ", ".join(f"{c}" for c, _, _ in w.moved) or "nothing"
                out.append(f"{w.where}: moved {tried} but its view did not change")
            out += [f"{w.where}: {p}" for p in w.problems if w.rendered]
        if any("[anywidget] Failed to initialize model" in e for e in self.errors):
            out.append(
                "hint: anywidget (0.9-0.11) gives each model 2 s to load its JavaScript; plotly's FigureWidget "
                "bundle (~5 MB) can take longer on a loaded machine, and that figure then drops every update "
                "from the kernel (blank or frozen figure)"
            )
        if expect:
            rendered = sum(w.rendered for w in self.widgets)
            interactive = sum(w.rendered and w.responded for w in self.widgets)
            if rendered < expect.min_widgets:
                out.append(f"only {rendered} widgets rendered, expected at least {expect.min_widgets}")
            if interactive < expect.min_interactive:
                out.append(
                    f"only {interactive} widgets responded to a control, expected at least {expect.min_interactive}"
                )
        return out

    def summary(self) -> str:
        drawn = "" if self.drawn_s is None else f", every figure drawn {self.drawn_s:.1f} s after the last cell"
        plots = "" if self.plots is None else f", {self.plots} figures"
        marks = " (" + ", ".join(f"{step} by {s:.0f} s" for step, s in self.marks) + ")" if self.marks else ""
        lines = [
            f"{self.notebook}: {self.seconds:.0f} s{marks}, {len(self.widgets)} widgets{plots}{drawn}, "
            f"screenshots in {self.shots}"
        ]
        lines += [f"  error: {e}" for e in self.errors]
        for w in self.widgets:
            moved = "; ".join(f"{c} -> {'changed: ' + what if ch else 'no change'}" for c, ch, what in w.moved)
            lines.append(f"  {w.where}: rendered={w.rendered} controls={w.controls} {moved}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- page code
# Injected into the page. Reads state through the DOM and plotly's graph divs; in JupyterLab also through the
# exposed application (cell models, kernel status).
_JS = r"""
(() => {
  const tk = window.__tk = window.__tk || {};
  const norm = v => (typeof v === 'number') ? v : (v === null || v === undefined ? null : String(v));
  const flat = a => {
    if (a === undefined || a === null) return null;
    if (typeof a === 'string') return [a];
    const out = [];
    const walk = x => { if (x !== null && typeof x === 'object' && typeof x.length === 'number' && typeof x !== 'string')
                          { for (let i = 0; i < x.length; i++) walk(x[i]); } else out.push(norm(x)); };
    walk(a);
    return out;
  };
  tk.figure = gd => {
    const full = gd._fullData || [];
    // The layout as given (the full layout holds plotly's "Click to enter Plot title" placeholder when unset).
    const t = gd.layout ? gd.layout.title : '';
    const title = typeof t === 'string' ? t : ((t && t.text) || '');
    return { title: String(title), traces: full.map(t => ({ type: t.type, x: flat(t.x), y: flat(t.y), z: flat(t.z) })) };
  };
  tk.figures = root => Array.from(root.querySelectorAll('.js-plotly-plot')).map(tk.figure);
  // Figures drawn by widget views only (a static go.Figure is drawn by the plotly mime renderer instead).
  tk.widgetFigures = scope => Array.from(document.querySelectorAll(`${scope} [data-tk] .js-plotly-plot`)).map(tk.figure);
  tk.snapshot = root => {
    // What only the kernel can change: text outside the controls themselves, plus every figure's title and data.
    const clone = root.cloneNode(true);
    clone.querySelectorAll('.widget-readout, input, select, textarea, .noUi-target, .hoverlayer, .modebar, ' +
                           '.jp-OutputPrompt, .jp-InputPrompt').forEach(e => e.remove());
    return JSON.stringify({ text: clone.textContent, figures: tk.figures(root) });
  };
  tk.cutOff = root => {
    // Every plot under root must fit: inside the window and inside its output area (no scrollbar, no clipping).
    const out = [];
    (root || document).querySelectorAll('.js-plotly-plot').forEach(gd => {
      const r = gd.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) return;  // not laid out (a hidden tab)
      const svg = gd.querySelector('.main-svg');
      const w = svg ? svg.getBoundingClientRect().width : r.width;
      const area = gd.closest('.jp-OutputArea-output') || gd.parentElement;
      const a = area.getBoundingClientRect();
      const title = tk.figure(gd).title;
      if (r.left < -1 || r.left + w > window.innerWidth + 1)
        out.push(`figure ${JSON.stringify(title)} spans x ${Math.round(r.left)}..${Math.round(r.left + w)} px ` +
                 `in a ${window.innerWidth}-px window`);
      else if (r.left + w > a.right + 1 || area.scrollWidth > area.clientWidth + 1)
        out.push(`figure ${JSON.stringify(title)} is ${Math.round(w)} px wide in a ${Math.round(a.width)}-px ` +
                 `output area: cut off or scrolled`);
      else {  // text that runs past the figure's own edge is cut off too (plotly does not wrap titles)
        const s = (svg || gd).getBoundingClientRect();
        const cut = Array.from(gd.querySelectorAll('.gtitle, .annotation-text, .xtitle, .ytitle, .xtick text, ' +
                                                   '.ytick text, .legendtext'))
          .filter(t => { const b = t.getBoundingClientRect();
                         return b.width > 0 && (b.right > s.right + 2 || b.left < s.left - 2); });
        if (cut.length)
          out.push(`figure ${JSON.stringify(title)}: text runs past its ${Math.round(s.width)}-px edge: ` +
                   cut.slice(0, 3).map(t => JSON.stringify(t.textContent.slice(0, 60))).join(', '));
      }
    });
    return out;
  };
  tk.blank = root => {
    // Plots that hold scatter/bar data but have not drawn a single trace (empty axes).
    return Array.from((root || document).querySelectorAll('.js-plotly-plot')).filter(gd => {
      const data = (gd._fullData || []).filter(t => (t.type === 'scatter' || t.type === 'bar') && t.visible === true &&
                                                    (flat(t.y) || []).length > 0);
      return !gd._fullData || (data.length > 0 && !gd.querySelector('.scatterlayer .trace, .barlayer .trace'));
    }).map(gd => tk.figure(gd).title);
  };
  tk.plotCount = root => (root || document).querySelectorAll('.js-plotly-plot').length;
  // Outputs plotly's renderer was given (a static figure or a FigureView's Output) that hold no plot (yet).
  tk.undrawn = root => Array.from((root || document).querySelectorAll(
      '[data-mime-type="application/vnd.plotly.v1+json"]')).filter(o => !o.querySelector('.js-plotly-plot')).length;
  tk.rendered = node => {
    // Drawn = the view (not the output prompt beside it) has a visible box and no widget-manager error text.
    const view = node.querySelector('.jp-OutputArea-output') || node;
    const text = view.textContent || '';
    if (/Error displaying widget|Loading widget|model not found/i.test(text)) return { ok: false, why: text.slice(0, 200) };
    const boxes = Array.from(view.querySelectorAll('*')).map(e => e.getBoundingClientRect());
    const drawn = boxes.some(r => r.width > 0 && r.height > 0);
    return { ok: drawn, why: drawn ? '' : 'the view is empty (its render threw or drew nothing)' };
  };
  tk.emptyOutput = node => {
    // An Output widget with nothing in it yet (a later button click fills it): it drew all it has.
    const view = node.querySelector('.jp-OutputArea-output') || node;
    return !!view.querySelector('.widget-output') && !view.querySelector('.jp-OutputArea-child') &&
           !(view.textContent || '').trim();
  };
  tk.controls = (node, chips) => {
    const inPlot = e => !!e.closest('.js-plotly-plot');
    const q = sel => Array.from(node.querySelectorAll(sel)).filter(e => !inPlot(e));
    return {
      slider: q('.noUi-handle, input[type=range]').filter(e => !e.closest('.noUi-target[disabled]')).length,
      select: q('select:not([disabled])').length,
      button: q('button:not([disabled]):not(.mod-active)').length,
      checkbox: q('input[type=checkbox]:not([disabled])').length,
      chip: chips.length ? q(chips.join(',')).length : 0,
    };
  };

  // ---- JupyterLab only
  tk.panel = path => {
    const app = window.jupyterapp;
    if (!app) return null;
    for (const w of app.shell.widgets('main')) if (w.context && w.context.path === path) return w;
    return null;
  };
  tk.kernelStatus = path => {
    const p = tk.panel(path);
    const k = p && p.sessionContext.session && p.sessionContext.session.kernel;
    return k ? k.status : 'none';
  };
  tk.runAll = async path => {
    const p = tk.panel(path);
    window.jupyterapp.shell.activateById(p.id);
    await p.context.ready;
    await p.sessionContext.ready;
    tk.runResult = null;
    if (!(p.sessionContext.session && p.sessionContext.session.kernel)) {
      tk.runResult = { ok: false, value: 'no kernel started (is a kernel selection dialog open?)' };
      return;
    }
    window.jupyterapp.commands.execute('notebook:run-all-cells')
      .then(r => { tk.runResult = { ok: r === true || r === undefined, value: String(r) }; },
            e => { tk.runResult = { ok: false, value: String(e) }; });
  };
  tk.cells = path => {
    // Every code cell's outputs from the model; widget outputs get a data-tk attribute so the test can find them.
    const p = tk.panel(path);
    const out = [];
    p.content.widgets.forEach((cell, i) => {
      if (cell.model.type !== 'code') return;
      const outputs = cell.model.outputs.toJSON();
      const children = cell.outputArea ? cell.outputArea.widgets : [];
      cell.node.dataset.tkCell = String(i);
      const widgets = [];
      outputs.forEach((o, j) => {
        const view = o.data && o.data['application/vnd.jupyter.widget-view+json'];
        if (view && children[j]) { children[j].node.dataset.tk = `${i}:${j}`; widgets.push(j); }
      });
      out.push({ index: i, source: cell.model.sharedModel.getSource(), count: cell.model.executionCount,
                 outputs: outputs.map(o => ({ type: o.output_type, name: o.name || null, ename: o.ename || null,
                                              mimes: Object.keys(o.data || {}),
                                              evalue: o.evalue || null, text: typeof o.text === 'string' ? o.text :
                                              (Array.isArray(o.text) ? o.text.join('') : null) })),
                 widgets });
    });
    return out;
  };
  tk.execute = async (path, code) => {
    // Run code in the notebook's kernel without touching any cell; resolves to its stdout.
    const k = tk.panel(path).sessionContext.session.kernel;
    let text = '';
    const future = k.requestExecute({ code, silent: false, store_history: false });
    future.onIOPub = msg => {
      if (msg.header.msg_type === 'stream') text += msg.content.text;
      if (msg.header.msg_type === 'error') text += `\n${msg.content.ename}: ${msg.content.evalue}`;
    };
    await future.done;
    return text;
  };
})();
"""

# Runs in the kernel: every figure a view should show now (FigureView figures, FigureWidgets), shaped like tk.figure.
_KERNEL_FIGURES = r"""
def __tk_figures():
    import gc, json
    import plotly.graph_objects as go
    def flat(a):
        if a is None:
            return None
        if isinstance(a, str):
            return [a]
        if hasattr(a, "tolist"):
            a = a.tolist()
        if isinstance(a, (list, tuple)):
            return [v for x in a for v in (flat(x) if isinstance(x, (list, tuple)) or hasattr(x, "tolist") and
                                                       not isinstance(x, (int, float)) else [norm(x)])]
        return [norm(a)]
    def norm(v):
        if v is None or isinstance(v, bool):
            return v if v is None else str(v).lower()
        if isinstance(v, (int, float)):
            return v
        try:
            return float(v)
        except (TypeError, ValueError):
            return str(v)
    # Every live widget is in ipywidgets' registry (a closed one leaves it, and then has no view to draw): reading
    # it takes microseconds where a scan of gc.get_objects() took ~7 s in a kernel holding the model on one CPU,
    # once per check. The scan stays as the fallback for an ipywidgets without the registry. type(), not
    # isinstance(): isinstance reads __class__, which a lazy proxy (openai's, torch's deprecated aliases) answers
    # by importing, warning or raising.
    from ipywidgets.widgets import widget as _w
    live = getattr(_w, "_instances", None)
    pool = list(live.values()) if isinstance(live, dict) else gc.get_objects()
    figs = [f for f in pool if issubclass(type(f), go.FigureWidget)]
    try:  # the kit's views: each one's figure as it is now (what its last redraw must have drawn)
        from toolkit.widgets.plot import LIVE
        figs += [v.figure for v in list(LIVE)]
    except ImportError:
        pass
    out = []
    for f in figs:
        out.append({"title": f.layout.title.text or "", "traces": [
            {"type": t.type, "x": flat(getattr(t, "x", None)), "y": flat(getattr(t, "y", None)),
             "z": flat(getattr(t, "z", None))} for t in f.data]})
    print("__TK_FIGURES__" + json.dumps(out))
__tk_figures()
del __tk_figures
"""


def _non_finite(v) -> bool:
    return v is None or isinstance(v, float) and not math.isfinite(v)


def _same_values(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None or not (a or b)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if _non_finite(x) and _non_finite(y):
            continue  # JSON.stringify turns NaN and ±Infinity into null
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if abs(x - y) > 1e-6 * max(1.0, abs(x), abs(y)):
                return False
        elif str(x) != str(y):
            return False
    return True


def figure_difference(browser: dict, kernel: dict) -> str:
    """'' when the drawn figure equals the kernel's: same title and, trace by trace, the same type and x/y/z
    values. plotly.js fills defaults the kernel never set (a trace without x gets 0..n-1), so a key the kernel
    left unset is not compared."""
    if browser["title"] != kernel["title"]:
        return f"title {browser['title']!r} vs {kernel['title']!r}"
    if len(browser["traces"]) != len(kernel["traces"]):
        return f"{len(browser['traces'])} traces vs {len(kernel['traces'])}"
    for n, (b, k) in enumerate(zip(browser["traces"], kernel["traces"])):
        if b["type"] != k["type"]:
            return f"trace {n} type {b['type']} vs {k['type']}"
        for key in ("x", "y", "z"):
            kb, kk = b.get(key), k.get(key)
            if kk is None and kb is not None:
                continue
            if not _same_values(kb, kk):
                first = next(
                    (i for i, (u, v) in enumerate(zip(kb or [], kk or [])) if not _same_values([u], [v])),
                    min(len(kb or []), len(kk or [])),
                )
                return (
                    f"trace {n} {key}: {len(kb or [])} values vs {len(kk or [])}, first difference at {first}: "
                    f"{(kb or [None] * (first + 1))[first : first + 3]!r} vs {(kk or [None] * (first + 1))[first : first + 3]!r}"
                )
    return ""


def figure_matches(browser: dict, kernel: dict) -> bool:
    return not figure_difference(browser, kernel)


def _diff(before: str, after: str) -> str:
    a, b = json.loads(before), json.loads(after)
    parts = []
    ta = [f["title"] for f in a["figures"]]
    tb = [f["title"] for f in b["figures"]]
    if ta != tb:
        parts.append(f"figure title {ta} -> {tb}")
    elif a["figures"] != b["figures"]:
        parts.append("figure data")
    if a["text"] != b["text"]:
        import difflib

        wa, wb = a["text"].split(), b["text"].split()
        sm = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
        new = [" ".join(wb[j1:j2]) for tag, _, _, j1, j2 in sm.get_opcodes() if tag in ("replace", "insert")]
        parts.append("text " + repr(" … ".join(new)[:160]))
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------------- the check
class Checker:
    """Drives one page. ``lab=True``: a JupyterLab notebook page; else a Voila app page."""

    def __init__(self, page, path: str, shots: Path, lab: bool = True, action_timeout: float = 30):
        self.page, self.path, self.shots, self.lab = page, path, shots, lab
        self.action_timeout = action_timeout
        self.page_errors: list[str] = []
        page.on("pageerror", lambda e: self.page_errors.append(str(e)))
        page.add_init_script(_JS)  # defines window.__tk in every document this page loads
        self._n = 0

    def js(self, expr: str, arg=None):
        return self.page.evaluate(expr, arg)

    def shot(self, name: str, locator=None, full_page: bool = False) -> None:
        self._n += 1
        target = self.shots / f"{Path(self.path).stem}-{self._n:03d}-{name}.png"
        try:
            if locator is not None:
                locator.screenshot(path=str(target), timeout=15000)
            else:  # full_page: the whole scrolled page (a Voila app; JupyterLab scrolls inside the notebook)
                self.page.screenshot(path=str(target), timeout=15000, full_page=full_page)
        except Exception as e:  # a screenshot is evidence, not a check
            print(f"screenshot {target.name} failed: {e}")

    def wait_drawn(self, selector: str, timeout: float) -> tuple[float, list[str]]:
        """Seconds until every plot under ``selector`` shows its traces (or ``timeout``), and the still blank ones."""
        t0 = time.monotonic()
        while True:
            blank = self.js("s => window.__tk.blank(document.querySelector(s))", selector)
            if not blank or time.monotonic() - t0 > timeout:
                return time.monotonic() - t0, blank
            time.sleep(0.2)

    def wait_plots(self, selector: str, want: int, timeout: float) -> tuple[int, int]:
        """Wait until ``want`` plotly plots are drawn under ``selector`` and no plotly output is left without its
        plot, or ``timeout``; returns (plots drawn, plotly outputs without a plot). The caller fails on too few."""
        deadline = time.monotonic() + timeout
        while True:
            n = self.js("s => window.__tk.plotCount(document.querySelector(s))", selector)
            undrawn = self.js("s => window.__tk.undrawn(document.querySelector(s))", selector)
            if (n >= want and not undrawn) or time.monotonic() > deadline:
                return n, undrawn
            time.sleep(0.5)

    def kernel_idle(self) -> bool:
        return not self.lab or self.js("p => window.__tk.kernelStatus(p)", self.path) in ("idle", "none")

    def kernel_figures(self) -> list[dict] | None:
        if not self.lab:
            return None
        text = self.js("([p, c]) => window.__tk.execute(p, c)", [self.path, _KERNEL_FIGURES])
        lines = [line for line in text.splitlines() if line.startswith("__TK_FIGURES__")]
        if not lines:
            raise RuntimeError(f"the kernel did not report its figures: {text[-300:]!r}")
        return json.loads(lines[-1][len("__TK_FIGURES__") :])

    def check_figures(self, where: str, root_selector: str = "body", timeout: float = 90) -> list[str]:
        """Every figure a widget view drew under ``root_selector`` must equal some figure the kernel holds
        (static go.Figure outputs have no kernel twin and are left alone). Plotly draws
        asynchronously (an empty plot first, then the data), so this waits up to ``timeout`` s for agreement."""
        deadline = time.monotonic() + timeout
        while True:
            kernel = self.kernel_figures()
            if kernel is None:
                return []
            drawn = self.js("s => window.__tk.widgetFigures(s)", root_selector)
            bad = [f for f in drawn if not any(figure_matches(f, k) for k in kernel)]
            if not bad or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        out = []
        for f in bad:
            # Explain against the likeliest twin: the same title, else the same data under another title.
            twins = [k for k in kernel if k["title"] == f["title"]] or [
                k for k in kernel if not figure_difference(f, dict(k, title=f["title"]))
            ]
            why = f" ({figure_difference(f, twins[0])})" if twins else ""
            out.append(
                f"{where}: figure {f['title']!r} ({len(f['traces'])} traces) in the browser differs from "
                f"every figure the kernel holds{why}"
            )
        return out

    def settle(self, selector: str, quiet: float = 1.0, timeout: float = 30) -> str:
        """Wait until the kernel is idle and the snapshot under ``selector`` stopped changing for ``quiet`` s."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            snap = self.js("s => window.__tk.snapshot(document.querySelector(s))", selector)
            if snap != last:
                last, since = snap, time.monotonic()
            elif time.monotonic() - since >= quiet and self.kernel_idle():
                return snap
            time.sleep(0.25)
        return last

    def move(self, node_sel: str, scope_sel: str, kind: str, chips: tuple, nth: int = 0) -> tuple[bool, str]:
        """Move one control of ``kind`` inside ``node_sel``; return (view changed, what changed)."""
        node = self.page.locator(node_sel)
        before = self.settle(scope_sel, timeout=max(30, self.action_timeout))
        if kind == "slider":
            handle = node.locator(".noUi-handle, input[type=range]").first
            handle.scroll_into_view_if_needed()
            handle.focus()
            now, top = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuemax")
            handle.press("ArrowLeft" if now is not None and now == top else "ArrowRight")
        elif kind == "select":
            sel = node.locator("select:not([disabled])").first
            options = sel.locator("option").all()
            values = [o.get_attribute("value") or o.inner_text() for o in options]
            current = sel.input_value()
            others = [v for v in values if v != current]
            if not others:
                return False, "only one option"
            sel.select_option(others[0])
        elif kind == "button":
            buttons = [b for b in node.locator(BUTTONS).all() if not b.evaluate("e => !!e.closest('.js-plotly-plot')")]
            buttons[nth].click()
        elif kind == "checkbox":
            node.locator("input[type=checkbox]:not([disabled])").first.click()
        elif kind == "chip":
            chip = node.locator(",".join(chips))
            chip.nth(min(3, chip.count() - 1)).click()
        deadline = time.monotonic() + self.action_timeout
        while time.monotonic() < deadline:
            now = self.js("s => window.__tk.snapshot(document.querySelector(s))", scope_sel)
            if now != before:
                after = self.settle(scope_sel, timeout=max(30, self.action_timeout))
                return True, _diff(before, after)
            time.sleep(0.3)
        return False, ""

    def check_widget(self, result: WidgetResult, node_sel: str, scope_sel: str, chips: tuple) -> None:
        state = self.js("s => window.__tk.rendered(document.querySelector(s))", node_sel)
        result.rendered = state["ok"]
        if not state["ok"]:
            result.problems.append(state["why"])
            return
        result.controls = {
            k: v
            for k, v in self.js(
                "([s, c]) => window.__tk.controls(document.querySelector(s), c)", [node_sel, list(chips)]
            ).items()
            if v
        }
        node = self.page.locator(node_sel)
        self.shot(f"{result.where.replace(' ', '')}-before", node)
        tries = [
            (kind, i)
            for kind in CONTROL_ORDER
            if kind in result.controls
            for i in range(min(result.controls[kind], MAX_BUTTONS) if kind == "button" else 1)
        ]
        for kind, i in tries:
            changed, what = self.move(node_sel, scope_sel, kind, chips, nth=i)
            result.moved.append((kind if kind != "button" else f"button {i + 1}", changed, what))
            if changed:
                self.shot(f"{result.where.replace(' ', '')}-after-{kind}", node)
                result.problems += self.check_figures(f"after moving its {kind}", scope_sel)
                result.problems += [
                    f"after moving its {kind}: {c}"
                    for c in self.js("s => window.__tk.cutOff(document.querySelector(s))", node_sel)
                ]
                break


def _where(e: Exception) -> str:
    import traceback

    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__]
    return f"line {frames[-1].lineno} ({frames[-1].line})" if frames else "?"


def wait_rendered(checker: Checker, selectors: list[str], timeout: float = 90) -> None:
    """Wait until every widget view has rendered, or ``timeout``. An empty Output widget (filled by a later button
    click, as in notebook 05) counts once the kernel is idle: waiting for it only ran out the timeout. Whether each
    view rendered is judged later, when ``check_widget`` reaches it."""
    state = (
        "s => { const t = window.__tk, n = document.querySelector(s); "
        "return t.rendered(n).ok ? 1 : t.emptyOutput(n) ? 2 : 0; }"
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [checker.js(state, s) for s in selectors]
        if all(states) and (2 not in states or checker.kernel_idle()):
            return
        time.sleep(0.5)


def check_lab_notebook(
    context, server: Server, relpath: str, shots: Path, expect: Expect, after: str | None = None
) -> Report:
    """Open ``relpath`` in JupyterLab, run all cells, check outputs and move each widget's controls. ``after``: code
    run in the notebook's kernel once all cells ran (its printed text goes to ``report.after``)."""
    report, t0 = Report(relpath, shots=shots), time.monotonic()
    page = context.new_page()
    checker = Checker(page, relpath, shots, lab=True, action_timeout=expect.action_timeout)
    try:
        page.goto(f"{server.url}/lab/tree/{relpath}?reset&token={server.token}")
        page.wait_for_function(
            "p => { const a = window.jupyterapp; if (!a) return false; "
            "for (const w of a.shell.widgets('main')) if (w.context && w.context.path === p) "
            "return true; return false; }",
            arg=relpath,
            timeout=120_000,
        )
        report.mark("opened", t0)
        checker.js("p => window.__tk.runAll(p)", relpath)
        page.wait_for_function(
            "() => window.__tk && window.__tk.runResult !== null && window.__tk.runResult !== undefined",
            timeout=expect.run_timeout * 1000,
            polling=1000,
        )
        run = checker.js("() => window.__tk.runResult")
        report.mark("ran", t0)
        server.remember_children()
        cells = checker.js("p => window.__tk.cells(p)", relpath)
        for c in cells:
            for o in c["outputs"]:
                if o["type"] == "error":
                    report.errors.append(f"cell {c['index']}: {o['ename']}: {o['evalue']}")
                elif o["type"] == "stream" and "Traceback (most recent call last)" in (o["text"] or ""):
                    report.errors.append(f"cell {c['index']}: Traceback on {o['name']}")
            if c["source"].strip() and c["count"] is None:
                report.errors.append(f"cell {c['index']}: not executed")
        report.printed = "\n".join(o["text"] or "" for c in cells for o in c["outputs"] if o["type"] == "stream")
        if after and not report.errors:
            report.after = checker.js("([p, c]) => window.__tk.execute(p, c)", [relpath, after])
        if not run["ok"] and not report.errors:
            report.errors.append(f"run all cells failed: {run['value']}")
        widget_sels = [f'[data-tk="{c["index"]}:{j}"]' for c in cells for j in c["widgets"]]
        wait_rendered(checker, widget_sels, timeout=expect.render_wait)
        # Every figure the notebook made must be on the page: the plotly outputs of its cells (static figures)
        # plus every figure a widget view holds in the kernel. Fewer plots fails: a figure that never appeared
        # would otherwise pass every check below, which only look at the plots that are there.
        static = sum("application/vnd.plotly.v1+json" in o.get("mimes", ()) for c in cells for o in c["outputs"])
        live = len(checker.kernel_figures())
        want = max(static + live, expect.min_figures)
        plots, undrawn = checker.wait_plots(".jp-Notebook", want, timeout=expect.figure_wait)
        report.plots = plots
        if plots < want:
            report.errors.append(
                f"only {plots} figures drawn, expected {want} ({static} static figures in the cell "
                f"outputs, {live} figures held by widget views in the kernel, at least "
                f"{expect.min_figures} for this notebook)"
            )
        if undrawn:
            report.errors.append(f"{undrawn} plotly outputs hold no plot {expect.figure_wait:.0f} s after run all")
        report.drawn_s, blank = checker.wait_drawn(".jp-Notebook", timeout=BLANK_S)
        report.errors += [
            f"figure {t!r} still blank (no trace drawn) {BLANK_S} s after the last cell finished" for t in blank
        ]
        report.errors += checker.check_figures("after run all", ".jp-Notebook", timeout=expect.figure_wait)
        checker.settle(".jp-Notebook", quiet=2.0, timeout=60)
        checker.shot("after-run-all")
        report.errors += [
            f"after run all: {c}"
            for c in checker.js("s => window.__tk.cutOff(document.querySelector(s))", ".jp-Notebook")
        ]
        report.mark("figures checked", t0)
        chips = DEFAULT_CHIPS + tuple(expect.extra_controls)
        for c in cells:
            for j in c["widgets"]:
                result = WidgetResult(f"cell {c['index']} output {j}")
                scope = (
                    ".jp-Notebook" if expect.scope == "notebook" else f'[data-tk-cell="{c["index"]}"] .jp-OutputArea'
                )
                checker.check_widget(result, f'[data-tk="{c["index"]}:{j}"]', scope, chips)
                report.widgets.append(result)
        report.mark("widgets moved", t0)
        text = page.locator(".jp-Notebook").inner_text()
        if "Error displaying widget" in text:
            report.errors.append("'Error displaying widget' in the page")
        if page.get_by_text(NEWS_QUESTION).count():
            report.errors.append("JupyterLab asks about news: binder/overrides.json was not applied")
        for dialog in page.locator(".jp-Dialog").all():
            report.errors.append(f"a dialog is open: {dialog.inner_text()[:200]!r}")
    except Exception as e:
        report.errors.append(
            f"browser check aborted: {type(e).__name__}: {str(e).splitlines()[0][:300]} at {_where(e)}"
        )
        checker.shot("aborted")
    finally:
        report.errors += [f"page error: {e[:300]}" for e in checker.page_errors]
        try:  # free the kernel's memory before the next notebook
            page.evaluate(
                "p => { const w = window.__tk && window.__tk.panel(p); "
                "return w ? w.sessionContext.shutdown() : null; }",
                relpath,
            )
        except Exception:
            pass
        page.close()
        report.seconds = time.monotonic() - t0
    return report


def check_voila_app(context, server: Server, relpath: str, shots: Path, app: dict) -> Report:
    """Open ``relpath`` as a Voila app: no code shown, no errors, the named slider's figure starts in the state
    the notebook asked for and follows the slider."""
    report, t0 = Report(f"voila:{relpath}", shots=shots), time.monotonic()
    page = context.new_page()
    checker = Checker(page, relpath, shots, lab=False, action_timeout=60)
    try:
        page.goto(f"{server.url}/voila/render/{relpath}?token={server.token}", timeout=600_000)
        slider = page.locator(".widget-slider", has=page.locator(f"label:text-is('{app['slider']}')"))
        deadline = time.monotonic() + 600
        while not slider.count():  # the slider, or Voila's widget race (below), whichever shows first
            if page.get_by_text("Error displaying widget").count():
                raise RuntimeError("'Error displaying widget' in the app before its slider was drawn")
            if time.monotonic() > deadline:
                raise TimeoutError("the app's slider was not drawn within 600 s")
            time.sleep(0.5)
        page.wait_for_load_state("load", timeout=600_000)
        shown = (
            page.locator(".jp-CodeCell .jp-InputArea, .jp-CodeMirrorEditor, .cm-editor").filter(visible=True).count()
        )
        body = page.inner_text("body")
        code = re.search(r"\bfrom toolkit(\.\w+)* import\b|^\s*import toolkit\b", body, re.M)  # an import line
        if shown or code:
            at = code.start() if code else -1
            seen = f"; the page reads {body[max(0, at - 120) : at + 80]!r}" if at >= 0 else ""
            report.errors.append(f"code is shown in app mode ({shown} visible code areas{seen})")
        for err in page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all():
            if "Traceback" in err.inner_text():
                report.errors.append("Traceback in app output")
        if "There was an error when executing cell" in page.inner_text("body"):
            report.errors.append("Voila reports an error when executing a cell")
        box = page.locator(".widget-vbox", has=slider).last
        box.locator(".js-plotly-plot").first.wait_for(timeout=120_000)
        want_figures, want_others = app.get("figures", 1), app.get("others", 0) or 0
        t_wait = time.monotonic()
        plots, undrawn = checker.wait_plots("body", want_figures, timeout=APP_WAIT)
        report.plots = plots
        if plots < want_figures:
            report.errors.append(
                f"only {plots} figures drawn in the app, expected {want_figures} ({APP_WAIT} s after the first one)"
            )
        if undrawn:
            report.errors.append(f"{undrawn} plotly outputs hold no plot {APP_WAIT} s after the page loaded")
        broken = page.get_by_text("Error displaying widget").count()
        if broken:  # Voila 0.5.13 without progressive rendering: "model not found" on 4 of 6 loads (voila.json)
            report.errors.append(
                f"'Error displaying widget' in the app, {broken} times: "
                f"{page.get_by_text('Error displaying widget').first.inner_text()[:100]!r}"
            )
        report.drawn_s, blank = checker.wait_drawn("body", timeout=BLANK_S)
        report.errors += [f"figure {t!r} still blank (no trace drawn) {BLANK_S} s after the page loaded" for t in blank]
        box.evaluate("e => e.dataset.tkApp = '1'")
        result = WidgetResult(f"app slider {app['slider']!r}")
        report.widgets.append(result)
        state = checker.js("s => window.__tk.rendered(document.querySelector(s))", "[data-tk-app]")
        result.rendered = state["ok"]
        checker.settle("[data-tk-app]", quiet=2.0, timeout=60)
        checker.shot("app-initial", box)
        checker.shot("app-page", full_page=True)
        report.errors += checker.js("() => window.__tk.cutOff(document.body)")
        title = checker.js("s => window.__tk.figures(document.querySelector(s))[0].title", "[data-tk-app]")
        want = app["title"](app["initial"])
        if title != want:
            report.errors.append(f"initial figure title {title!r}, expected {want!r}")
        result.controls = {"slider": 1}
        changed, what = checker.move("[data-tk-app]", "[data-tk-app]", "slider", ())
        result.moved.append(("slider", changed, what))
        checker.shot("app-after", box)
        title = checker.js("s => window.__tk.figures(document.querySelector(s))[0].title", "[data-tk-app]")
        want = app["title"](app["initial"] + app.get("step", 1))
        if changed and title != want and app["title"](app["initial"]) != want:
            report.errors.append(f"after ArrowRight the figure title is {title!r}, expected {want!r}")
        if want_others:  # every other output with a control must respond in the app too
            others = """([chips, tag]) => Array.from(document.querySelectorAll('.jp-OutputArea-output'))
                .filter(o => !o.querySelector('[data-tk-app]') && !o.closest('[data-tk-app]'))
                .filter(o => !o.parentElement.closest('.jp-OutputArea-output'))  // outermost outputs only
                .filter(o => Object.values(window.__tk.controls(o, chips)).some(n => n > 0))
                .map((o, k) => { if (tag) o.dataset.tkVoila = String(k); return k; })"""
            deadline = t_wait + APP_WAIT
            while (
                len(page.evaluate(others, [list(DEFAULT_CHIPS), False])) < want_others and time.monotonic() < deadline
            ):
                time.sleep(0.5)
            tagged = page.evaluate(others, [list(DEFAULT_CHIPS), True])
            if len(tagged) < want_others:
                report.errors.append(
                    f"only {len(tagged)} other outputs with a control in the app, expected "
                    f"{want_others} ({APP_WAIT} s after the first figure)"
                )
            for k in tagged:
                other = WidgetResult(f"app output {k}")
                checker.check_widget(other, f'[data-tk-voila="{k}"]', f'[data-tk-voila="{k}"]', DEFAULT_CHIPS)
                report.widgets.append(other)
    except Exception as e:
        report.errors.append(f"app check aborted: {type(e).__name__}: {str(e).splitlines()[0][:300]} at {_where(e)}")
        checker.shot("aborted", full_page=True)
    finally:
        report.errors += [f"page error: {e[:300]}" for e in checker.page_errors]
        page.close()
        report.seconds = time.monotonic() - t0
    return report


# ---------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module", autouse=True)
def load():
    """Both cores busy for the whole module (TOOLKIT_BROWSER_BURN=N burners; default one per core)."""
    n = int(os.environ.get("TOOLKIT_BROWSER_BURN", os.cpu_count() or 2))
    with burn_cpu(n, seconds=3600) as pids:
        print(f"\nbrowser test under load: {n} CPU burners (PIDs {pids})")
        yield pids


@pytest.fixture(scope="module")
def workdir():
    d = Path(tempfile.mkdtemp(prefix="toolcall-kit-browser-"))
    shutil.copytree(ROOT / "notebooks", d / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy(FIXTURE, d / "notebooks" / "_fixture_broken_widget.ipynb")
    (d / "shots").mkdir()
    failed = []
    yield d, failed
    if failed or os.environ.get("TOOLKIT_KEEP_SCREENSHOTS"):
        print(f"\nbrowser test files (screenshots, server logs) kept in {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def cgroup():
    """The Binder pod's limits (2 GB, one CPU) for the servers and every kernel they start, in "binder" mode."""
    limits = binder_limits() if MODEL_MODE == "binder" else None
    try:
        yield limits
    finally:
        if limits is not None:
            limits.close()


@pytest.fixture(scope="module")
def lab(workdir, cgroup):
    server = start_lab(workdir[0], cgroup)
    try:
        yield server
    finally:
        server.stop()
    assert server.proc.poll() is not None
    import psutil

    alive = [pid for pid in server.pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert not alive, f"processes of the lab server still alive: {alive}"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport={"width": 1024, "height": 900})  # a small laptop: figures must fit
    try:
        yield ctx
    finally:
        ctx.close()


def _record(workdir, report: Report, failures: list[str]) -> None:
    print(report.summary())
    if failures:
        workdir[1].append(report.notebook)


# ---------------------------------------------------------------------------------------------------- tests
def test_check_catches_broken_widgets(workdir, lab, context):
    """The same check on a fixture with two working and two broken widgets (an observer that never fires, a view
    whose render throws): it must flag exactly the broken ones. Its waits are the ones the broken widgets run out
    (no condition can say "never"), so they are short: the working views are checked only after ``wait_plots`` has
    waited for their three figures, which needs them rendered, and they answer a slider move within a second."""
    fixture = Expect(action_timeout=15, figure_wait=20, render_wait=20)
    report = check_lab_notebook(context, lab, "_fixture_broken_widget.ipynb", workdir[0] / "shots", fixture)
    _record(workdir, report, [])
    failures = report.failures()
    working, observer, view, late = report.widgets  # in cell order, as in the fixture
    assert working.rendered and working.responded and not working.problems, report.summary()
    assert "figure title ['working: k = 1'] -> ['working: k = 2']" in working.moved[0][2], report.summary()
    assert observer.rendered and not observer.responded, report.summary()
    assert not view.rendered, report.summary()
    # The late title was never drawn: the page shows the figure without it until the slider's observer redraws.
    assert late.rendered and late.responded and not late.problems, report.summary()
    expected = {
        f"{observer.where}: moved slider but its view did not change": 1,
        f"{view.where}: widget did not render": 1,
        "page error: deliberately broken render": 1,
        "after run all: figure '' (1 traces) in the browser differs from every figure the kernel holds": 1,
    }
    unexpected = [f for f in failures if not any(f.startswith(e) for e in expected)]
    assert not unexpected, unexpected
    for e in expected:
        assert any(f.startswith(e) for f in failures), (e, failures)


def binder_failures(path: Path, report: Report, cgroup, oom_before: int, peak: int) -> list[str]:
    """What a Binder run adds to the checks: not killed for memory, within 2 GB, and the model it should run."""
    out = []
    if cgroup is not None and cgroup.oom_kills() > oom_before:
        out.append("a process was killed for memory in the 2 GB cgroup (the kernel died)")
    if peak > PEAK_LIMIT_BYTES:
        out.append(f"the server and its kernel peaked at {peak / 2**20:.0f} MB PSS (> 2 GB Binder budget)")
    if os.environ.get("TOOLKIT_REQUIRE_REAL_MODEL") == "1" and picks_a_model(path):
        if "RANDOM-WEIGHT STAND-IN" in report.printed:
            out.append("ran the stand-in in Binder mode, not the real model")
    return out


def after_run_failures(path: Path, report: Report) -> list[str]:
    """The notebook's check after its last cell (test_notebooks.AFTER_RUN), on what its kernel printed."""
    if path.name not in AFTER_RUN or any(e.startswith("cell ") for e in report.errors):
        return []
    lines = [line for line in report.after.splitlines() if line.startswith(CHECK)]
    if not lines:
        return [f"the check after the last cell printed no {CHECK} line: {report.after[-300:]!r}"]
    values = json.loads(lines[-1][len(CHECK) :])
    print(f"{path.name}: checked after its last cell: {values}")
    try:
        AFTER_RUN[path.name][1](values)
    except AssertionError as e:
        return [f"the check after the last cell failed: {e}"]
    return []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_in_jupyterlab(path, workdir, lab, context, cgroup, record_property):
    expect = EXPECT.get(path.name, Expect())
    oom_before = cgroup.oom_kills() if cgroup is not None else 0
    sampler = _PeakMemory(lab.proc.pid, cgroup)  # the server and every kernel below it
    try:
        after = AFTER_RUN.get(path.name, (None, None))[0]
        report = check_lab_notebook(context, lab, path.name, workdir[0] / "shots", expect, after=after)
    finally:
        peak = sampler.stop()
    cgroup_peak = sampler.cgroup_peak
    failures = report.failures(expect) + after_run_failures(path, report)
    if MODEL_MODE == "binder":
        failures += binder_failures(path, report, cgroup, oom_before, peak)
    record_property("run", f"{path.name}-lab:{MODEL_MODE}")
    record_property("seconds", round(report.seconds, 1))
    record_property("peak_rss_mb", round(peak / 2**20))
    record_property("cgroup_peak_mb", round(cgroup_peak / 2**20))
    print(f"{path.name} [lab, {MODEL_MODE}]: peak PSS {peak / 2**20:.0f} MB, cgroup peak {cgroup_peak / 2**20:.0f} MB")
    _record(workdir, report, failures)
    deadline = time.monotonic() + KERNEL_GONE_S  # the next notebook's memory must not include this kernel
    while lab.kernels() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not failures, "\n".join(failures) + f"\n(screenshots and logs in {workdir[0]})"


@pytest.fixture(scope="module")
def voila(workdir, cgroup):
    server = start_voila(workdir[0], cgroup)
    try:
        yield server
    finally:
        server.stop()
    assert server.proc.poll() is not None


@pytest.mark.parametrize("app", APPS, ids=lambda a: a["notebook"])
def test_app_mode_in_voila(app, workdir, voila, context):
    if not (ROOT / "notebooks" / app["notebook"]).exists():
        pytest.fail(f"app-mode notebook {app['notebook']} is missing")
    report = check_voila_app(context, voila, app["notebook"], workdir[0] / "shots", app)
    failures = report.failures()
    _record(workdir, report, failures)
    assert not failures, "\n".join(failures) + f"\n(screenshots and logs in {workdir[0]})"


def test_app_check_catches_lost_initial_state(workdir, voila, context):
    """In Voila the page draws each figure as its view last drew it: the fixture's title, set after the draw and
    never redrawn, is missing. The app check must say so."""
    late = {"slider": "late-title", "initial": 1, "title": lambda n: "late-title: k = 1", "others": False}
    report = check_voila_app(context, voila, "_fixture_broken_widget.ipynb", workdir[0] / "shots", late)
    _record(workdir, report, [])
    assert "initial figure title '', expected 'late-title: k = 1'" in report.errors, report.summary()
