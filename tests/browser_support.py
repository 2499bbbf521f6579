"""JupyterLab + Debian Chromium driven by Playwright: shared by the browser tests and the latency benchmark.

The server is started with :func:`attention_lab.lab.lab_command` (what ``make lab``
runs) on 127.0.0.1 with throw-away config, runtime and settings folders, so no
earlier workspace, kernel or setting leaks in. See shared/notes/browser-testing.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from attention_lab.lab import lab_command
from autograder.nbgrader.grading import copy_course

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]

#: How often ``page.wait_for_function`` re-evaluates its condition, in ms. Playwright's default polls on every animation
#: frame, which keeps headless Chromium drawing 60 frames a second for as long as a wait lasts (about 5 % of a core
#: more than an interval: measured 0.31 against 0.06 CPU-s over a 5 s wait); 50 ms adds at most 50 ms to a wait.
POLL_MS = 50

IDLE_JS = """() => {
  const bar = document.querySelector('.jp-StatusBar-Widget');
  const ind = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator');
  return !!bar && /\\| Idle/.test(bar.innerText) && !!ind && ind.dataset.status === 'idle'; }"""

# FNV-1a hash of an <img>'s decoded pixels, and the RGB at fractional coordinates of its natural size.
HASH_JS = """el => { if (!el.complete || !el.naturalWidth) return -1;
  const w = el.naturalWidth, h = el.naturalHeight;
  const g = new OffscreenCanvas(w, h).getContext('2d'); g.drawImage(el, 0, 0);
  let x = 0x811c9dc5; for (const b of g.getImageData(0, 0, w, h).data) x = Math.imul(x ^ b, 16777619);
  return x >>> 0; }"""
PIXEL_JS = """([el, fx, fy]) => { const w = el.naturalWidth, h = el.naturalHeight;
  const g = new OffscreenCanvas(w, h).getContext('2d'); g.drawImage(el, 0, 0);
  const d = g.getImageData(Math.floor(fx * w), Math.floor(fy * h), 1, 1).data; return [d[0], d[1], d[2]]; }"""


#: JupyterLab's own option for browser tests: the page's ``window.jupyterapp`` is the application, whose commands
#: (``docmanager:open``, ...) and shell open and close documents without loading the page again.
EXPOSE_APP = "--LabApp.expose_app_in_browser=True"
#: The current notebook of the page in nbformat's JSON: JupyterLab's own serialisation of its model (needs EXPOSE_APP).
MODEL_JS = "() => window.jupyterapp.shell.currentWidget.content.model.toJSON()"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def lab_server(root: Path, log_path: Path, token: str = "", *, make_lab: bool = False,
               settings: dict | None = None, options: tuple[str, ...] = ()):
    """Start JupyterLab on ``root`` as ``make lab`` does; yield its base URL; stop its process group afterwards.

    ``make_lab=True`` runs exactly ``make lab``'s command, ``python -m attention_lab.lab``, in ``root`` (which
    also copies ``release/`` to ``workspace/``); otherwise :func:`lab_command` is started directly.
    ``settings`` maps a settings file (e.g. ``"@jupyterlab/docmanager-extension/plugin.jupyterlab-settings"``)
    to its JSON content, on top of the quiet defaults below. With a ``token``, every request needs it
    (``?token=…`` once, then the cookie). ``options`` are more command-line options (e.g.
    :data:`EXPOSE_APP`).
    """
    run = Path(tempfile.mkdtemp(prefix="attention-lab-browser-"))
    settings_dir = run / "settings"
    files = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings":
             {"fetchNews": "false", "checkForUpdates": False},
             "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
             **(settings or {})}
    for name, content in files.items():
        (settings_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (settings_dir / name).write_text(json.dumps(content))
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(run / "config"), JUPYTER_RUNTIME_DIR=str(run / "runtime"),
               IPYTHONDIR=str(run / "ipython"), JUPYTERLAB_SETTINGS_DIR=str(settings_dir),
               JUPYTERLAB_WORKSPACES_DIR=str(run / "workspaces"), OPENBLAS_NUM_THREADS="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    port = free_port()
    options = ["--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", "--ServerApp.password=",
               "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", *options]
    command = [sys.executable, "-m", "attention_lab.lab", *options] if make_lab else lab_command(root, *options)
    log = open(log_path, "w")
    # its own process group, so that teardown stops the server and anything it started
    process = subprocess.Popen(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{base}/api/status?token={token}", process, log_path, "JupyterLab")
        yield base
    finally:
        stop_process_group(process)
        log.close()
        shutil.rmtree(run, ignore_errors=True)


def wait_for_http(url: str, process: subprocess.Popen, log_path: Path, what: str, timeout: float = 120) -> None:
    """Poll ``url`` until it answers 200; fail early if ``process`` exits first."""
    deadline = time.time() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.time() > deadline:
            raise RuntimeError(f"{what} did not answer on {url} within {timeout:g} s; see {log_path}")
        time.sleep(0.3)  # polling interval of a readiness probe, not a wait for a result


def stop_process_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group of ``process`` (started with ``start_new_session=True``), then SIGKILL it."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def course_copy(repo: Path, target: Path) -> Path:
    """A throw-away copy of what the Lab shows (saving a notebook in the browser must not touch the repo)."""
    return copy_course(repo, target, folders=("notebooks", "release", "source"))


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def wait_idle(page, timeout=90_000):
    page.wait_for_function(IDLE_JS, timeout=timeout, polling=POLL_MS)


#: The highest execution count the current notebook's input prompts show (``[7]:``), 0 when none has run.
MAX_COUNT_JS = """() => Math.max(0, ...[...document.querySelectorAll(
  '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')].map(p => parseInt(
  (p.innerText.match(/\\[(\\d+)\\]/) || [0, '0'])[1], 10)))"""
#: Run All has finished: the kernel is idle, no cell of the current notebook waits or runs (``[*]:``), and a cell
#: has run since ``before`` (the highest execution count before the click). Idle alone is not enough: right
#: after the click the kernel can still be idle, before it has received the first cell.
RAN_ALL_JS = """(before) => { if (!(""" + IDLE_JS + """)()) return false;
  const prompts = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];
  if (prompts.some(p => p.innerText.includes('*'))) return false;
  return (""" + MAX_COUNT_JS + """)() > before; }"""


def run_all(page, timeout=120_000):
    """Run All from JupyterLab's Run menu, and wait until every cell it queued has run (or the run stopped)."""
    wait_idle(page)
    before = page.evaluate(MAX_COUNT_JS)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
    page.wait_for_function(RAN_ALL_JS, arg=before, timeout=timeout, polling=POLL_MS)


def slider(page, label: str):
    """The ipywidgets slider whose label is exactly ``label``."""
    exact = re.compile(rf"^\s*{re.escape(label)}\s*$")
    return page.locator(".widget-slider", has=page.locator(".widget-label", has_text=exact)).first


def slider_handle(page, label: str):
    return slider(page, label).locator(".noUi-handle")


def wait_new_pixels(page, image, before: int, timeout=20_000) -> int:
    page.wait_for_function(f"([el, before]) => {{ const h = ({HASH_JS})(el); return h !== -1 && h !== before; }}",
                           arg=[image.element_handle(), before], timeout=timeout, polling=POLL_MS)
    return image.evaluate(HASH_JS)


def open_lab(page, url: str) -> None:
    """Load JupyterLab (started with :data:`EXPOSE_APP`) at ``url`` once in ``page``, until it is restored."""
    page.goto(url)
    page.wait_for_function("() => !!window.jupyterapp", timeout=90_000, polling=POLL_MS)
    page.evaluate("async () => { await window.jupyterapp.restored; }")


#: Opens a notebook with JupyterLab's own command (what its URL routing and file browser run), then closes every
#: other main-area document (after shutting down its kernel, discarding what running it changed), so that the page
#: holds that notebook alone, as after loading ``/lab/tree/<path>`` — without loading JupyterLab again.
OPEN_ALONE_JS = """async (path) => {
  const app = window.jupyterapp;
  const others = [...app.shell.widgets('main')];
  const opened = await app.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  await opened.context.ready;
  for (const widget of others) {
    if (widget === opened) continue;
    if (widget.sessionContext) await widget.sessionContext.shutdown();
    if (widget.context) widget.context.model.dirty = false;
    widget.dispose();
  }
  app.shell.activateById(opened.id);
  await opened.sessionContext.ready;
  return opened.id; }"""


def open_alone(page, path: str) -> None:
    """Open ``path`` (relative to the server's root) in a page of :func:`open_lab` as its only document; kernel idle."""
    from playwright.sync_api import expect

    dialogs = page.locator(".jp-Dialog")  # one left open by a test that failed would cover the page
    for _ in range(dialogs.count()):
        page.keyboard.press("Escape")
    expect(dialogs).to_have_count(0)
    page.evaluate(OPEN_ALONE_JS, path)
    label = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel")
    expect(label).to_have_text(Path(path).name, timeout=60_000)
    wait_idle(page)


def current_notebook(page):
    """The notebook the page shows, as JupyterLab's model holds it (its outputs included), as an nbformat node."""
    import nbformat

    return nbformat.from_dict(page.evaluate(MODEL_JS))
