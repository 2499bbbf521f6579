"""`make lite`: the static JupyterLite site builds, and served from a local static HTTP server it opens the
start page in Chromium, starts the Pyodide kernel from the site's own copy of Pyodide's core — no request
leaves the site while it starts — and the student package imports and runs its pure-Python parts in that
browser kernel (the worked cases' data, the time limit's signal-free fallback).

Pyodide's NumPy and matplotlib (built for WebAssembly, on Pyodide's CDN only) cannot be downloaded on
these machines: requests for them are answered with a network error and recorded, so the test also pins
down exactly what the site needs the network for. Needs npm and PyPI on the first build (then
build/lite-cache/), and Debian's Chromium (/usr/bin/chromium; `.ci/run` installs it).
"""

import ast
import functools
import hashlib
import json
import os
import shutil
import sys
import threading
import urllib.parse
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import nbformat
import pytest
from jupyterlite_pyodide_kernel.constants import PYODIDE_CDN_URL, PYODIDE_VERSION
from packaging.utils import canonicalize_name

from autograder import assignments, lite_build
from browser_support import CHROMIUM, launch, wait_idle
from conftest import REPO

ARTIFACTS = REPO / "test-artifacts" / "browser"
# the student package's assignment folders (each holds its worked cases)
STUDENT_ASSIGNMENTS = sorted(p.parent.name for p in (REPO / "attention_lab").glob("a*/worked_cases.json"))

# runs in the browser kernel: everything the student package does without NumPy
KERNEL_CHECK = """\
import importlib.resources, json, sys, time
import attention_lab, attention_lab.core.calls as calls
cases = json.loads(importlib.resources.files("attention_lab.a01_attention").joinpath("worked_cases.json").read_text())
def spin():  # a learner's function that never returns
    while True: pass
def interrupted_loop():  # as call_learner calls a learner's function (see TracedTimeLimit's note)
    try:
        with calls.time_limit(0.5):
            spin()
    except calls.FunctionTimedOut as error:
        return str(error)
    return ""
start = time.monotonic()
interrupted = interrupted_loop()
print("LITE-CHECK " + json.dumps({"platform": sys.platform, "package": attention_lab.__file__,
      "cases": len(cases), "interrupted": interrupted, "numpy_loaded": "numpy" in sys.modules,
      "seconds": time.monotonic() - start}))
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is missing: .ci/run must `apt-get install -y npm`", pytrace=False)
        pytest.skip("npm is not installed (make lite fetches Pyodide's core with it)")
    return lite_build.build(tmp_path_factory.mktemp("lite") / "lite")


def lock(site):
    return json.loads((site / "static" / "pyodide" / "pyodide-lock.json").read_text())["packages"]


def test_the_site_serves_pyodide_itself_at_the_kernels_version(site):
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["pyodideUrl"] == "./static/pyodide/pyodide.mjs"
    core = json.loads((site / "static" / "pyodide" / "package.json").read_text())
    assert core["name"] == "pyodide" and core["version"] == PYODIDE_VERSION
    for name in ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"):
        assert (site / "static" / "pyodide" / name).stat().st_size > 0
    assert "@jupyter/nbgrader" in config["disabledExtensions"]  # nbgrader needs a Jupyter server


def test_everything_the_kernel_starts_with_is_a_local_pure_python_wheel_with_its_hash(site):
    packages = lock(site)
    needed = lite_build.closure(packages, [*lite_build.KERNEL_STARTUP, "ipywidgets", "attention-lab-student",
                                           "attention-lab-reference"])
    assert {"micropip", "packaging", "ipython", "jedi", "comm", "ipywidgets", "attention-lab-student"} <= needed
    for name, entry in packages.items():
        path = site / "static" / "pyodide" / entry["file_name"]
        if entry["file_name"].startswith("https://"):
            assert entry["file_name"].startswith(PYODIDE_CDN_URL + "/"), entry
            assert not (name in needed and entry["file_name"].endswith("-none-any.whl")), name
        else:
            assert path.name.endswith("-none-any.whl") and hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    remote = sorted(n for n in needed if packages[n]["file_name"].startswith("https://"))
    assert "numpy" in remote and "matplotlib" in remote and "pillow" in remote  # built for WebAssembly: CDN
    assert not set(lite_build.closure(packages, lite_build.KERNEL_STARTUP)) & set(remote)


def test_the_student_wheel_holds_the_student_package_only(site):
    entry = lock(site)["attention-lab-student"]
    assert entry["imports"] == ["attention_lab"] and set(entry["depends"]) == {"numpy", "matplotlib", "ipywidgets"}
    files = zipfile.ZipFile(site / "static" / "pyodide" / entry["file_name"]).namelist()
    assert "attention_lab/core/calls.py" in files
    assert all(f"attention_lab/{folder}/worked_cases.json" in files for folder in STUDENT_ASSIGNMENTS), files
    assert all(f.startswith(("attention_lab/", "attention_lab_student-")) for f in files), files


def test_the_contents_are_the_start_page_the_explorers_and_the_release(site):
    files = site / "files"
    assert sorted(p.name for p in (files / "notebooks").glob("*.ipynb")) == sorted(
        p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    for notebook in (REPO / "release").rglob("*.ipynb"):
        relative = notebook.relative_to(REPO / "release")
        committed = nbformat.read(notebook, 4)
        for copy in (files / "release" / relative, files / "workspace" / relative):  # the start page links to workspace/
            in_site = nbformat.read(copy, 4)
            assert in_site.cells == committed.cells
            assert in_site.metadata.kernelspec == lite_build.PYODIDE_KERNELSPEC  # JupyterLite starts it without asking


class QuietHandler(SimpleHTTPRequestHandler):
    extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".wasm": "application/wasm", ".whl": "application/octet-stream"}

    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def served(site):
    """The site on a free 127.0.0.1 port, as any static host would serve it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=30)


@pytest.mark.skipif(not os.path.exists(CHROMIUM) and not os.environ.get("CI"), reason=f"{CHROMIUM} is not installed")
def test_in_chromium_the_start_page_opens_and_the_student_package_runs_in_the_browser_kernel(site, served):
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    outside = []  # requests that would leave the site: refused (no network here) and recorded

    def refuse(route):
        outside.append(route.request.url)
        route.abort("internetdisconnected")

    with sync_playwright() as playwright:
        browser = launch(playwright)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.route(lambda url: not url.startswith(served), refuse)
        page = context.new_page()
        page.goto(f"{served}/lab/index.html?path=notebooks/00_start_here.ipynb")
        expect(page.locator(".jp-RenderedMarkdown h1").first).to_contain_text("Attention Lab — start here",
                                                                              timeout=120_000)
        wait_idle(page, timeout=180_000)  # the Pyodide kernel has started
        expect(page.locator(".jp-StatusBar-Widget")).to_contain_text("Pyodide")
        assert page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").count() == 0
        page.screenshot(path=str(ARTIFACTS / "lite_start_page.png"))
        assert outside == [], f"starting the kernel needed the network: {outside}"

        # the student package in the start page's own Pyodide kernel (one kernel start for the test): a new cell
        # at the end of the page holds the check (the site's copy in the browser's storage; the site is unchanged)
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        cells = panel.locator(".jp-Cell")
        count = cells.count()
        cells.last.click()
        panel.locator(".jp-NotebookPanel-toolbar jp-button[data-command='notebook:insert-cell-below']").click()
        expect(cells).to_have_count(count + 1)
        cell = cells.nth(count)
        cell.locator(".cm-content").fill(KERNEL_CHECK)
        expect(cell.locator(".cm-content")).to_contain_text("LITE-CHECK")
        panel.locator(".jp-NotebookPanel-toolbar jp-button[data-command='notebook:run-cell-and-select-next']").click()
        output = cell.locator(".jp-OutputArea-output", has_text="LITE-CHECK").first
        expect(output).to_be_visible(timeout=180_000)
        page.screenshot(path=str(ARTIFACTS / "lite_kernel_check.png"))
        result = json.loads(output.inner_text().split("LITE-CHECK", 1)[1])
        browser.close()

    assert result["platform"] == "emscripten"  # it ran in the browser kernel
    assert "/site-packages/attention_lab/" in result["package"]  # from the site's wheel
    cases = json.loads((REPO / "attention_lab" / "a01_attention" / "worked_cases.json").read_text())
    assert result["cases"] == len(cases)
    assert result["interrupted"] == "did not finish within 0.5 s (an infinite loop?)"
    assert result["seconds"] >= 0.5
    # the only requests that left the site: Pyodide's WebAssembly builds that `import attention_lab` pulls in
    assert all(url.startswith(PYODIDE_CDN_URL + "/") for url in outside), outside
    fetched = {canonicalize_name(urllib.parse.urlparse(url).path.rsplit("/", 1)[1].split("-")[0]) for url in outside}
    assert "numpy" in fetched and not result["numpy_loaded"]


def _guarded_imports(tree) -> set[int]:
    """ids of the import statements inside ``try: … except ImportError`` (the notebook says what is missing there:
    the start page's "Check my work" button, which needs the grader, in the in-browser edition)."""
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers):
            guarded |= {id(n) for statement in node.body for n in ast.walk(statement)
                        if isinstance(n, (ast.Import, ast.ImportFrom))}
    return guarded


def imported_modules(notebook) -> set[str]:
    """Dotted names of the modules a notebook's code cells import (IPython magics and imports guarded by
    ``except ImportError`` skipped)."""
    names = set()
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(l for l in cell.source.splitlines() if not l.lstrip().startswith(("%", "!")))
        tree = ast.parse(code)
        guarded = _guarded_imports(tree)
        for node in ast.walk(tree):
            if id(node) in guarded:
                continue
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
    return names


def test_every_module_the_sites_notebooks_import_is_in_the_browser(site):
    packages = lock(site)
    importable = {name for entry in packages.values() for name in entry["imports"]} | set(sys.stdlib_module_names)
    reference = zipfile.ZipFile(site / "static" / "pyodide" / packages["attention-lab-reference"]["file_name"])
    modules = {n[:-3].replace("/", ".") for n in reference.namelist() if n.endswith(".py")}
    assert modules == {"autograder.__init__", "autograder.assignments.__init__", "autograder.assignments.validation"} | {
        f"autograder.assignments.{folder}.{name}" for folder in assignments.folders()
        if (REPO / "autograder" / "assignments" / folder / "spec.py").is_file()
        for name in ("__init__", "reference", *(n[:-3] for n in lite_build.REFERENCE_EXTRA.get(folder, ())))
    }  # no grader: no spec, no bank
    student_modules = {n[:-3].replace("/", ".") for n in zipfile.ZipFile(
        site / "static" / "pyodide" / packages["attention-lab-student"]["file_name"]).namelist() if n.endswith(".py")}
    for path in (site / "files").rglob("*.ipynb"):
        for module in imported_modules(nbformat.read(path, 4)):
            assert module.split(".")[0] in importable, f"{path.name} imports {module}"
            if module.startswith("autograder"):
                assert module in modules and "notebooks" in path.parts, f"{path.name} imports {module}"
            if module.startswith("attention_lab"):
                assert module in student_modules or f"{module}.__init__" in student_modules, module
