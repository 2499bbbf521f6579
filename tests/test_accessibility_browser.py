"""axe-core in JupyterLab: no serious or critical accessibility violation on any notebook page of the course.

One JupyterLab server (``make lab``'s command, on a throw-away copy of the course) and one Chromium page serve
every notebook: JupyterLab is loaded once, and each test opens its notebook with JupyterLab's own command as the
page's only document (the one before it is closed and its kernel shut down), so that the page is what loading
``/lab/tree/<notebook>`` shows, without loading JupyterLab again for each. One test per page, parametrised from
the folders, so that a new notebook in notebooks/ or a new assignment in release/ is checked without editing this
file. Each page is run (Run All: the explorers draw, the figures appear), and axe-core (the copy bundled by
``axe-playwright-python``) checks the whole page. Then every explorer control is checked for an accessible name
and for keyboard focus.

Run All in this page is also the one execution per run (issue 11) of each explorer and each untouched release:
what running them must give (no error and a visual; every autograder cell failing with a plain message) is
asserted here on the notebook as JupyterLab holds it after Run All, not on a second run by nbclient in
tests/test_notebooks.py.

Violations on JupyterLab's own chrome, which the course cannot change, are dropped only when they are listed in
:data:`JUPYTERLAB_CHROME` (rule and CSS selector of JupyterLab's element, with the reason); nothing else is
excluded. Needs Debian's Chromium, as tests/test_browser.py.
"""

import os
from pathlib import Path

import nbformat
import pytest

from attention_lab.core.redraw import SUMMARY_CLASS
from browser_support import (CHROMIUM, EXPOSE_APP, POLL_MS, course_copy, current_notebook, lab_server, open_alone, open_lab,
                             run_all)
from conftest import REPO

ARTIFACTS = REPO / "test-artifacts" / "accessibility"

if not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: .ci/run must `apt-get install -y chromium`", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)", allow_module_level=True)

from axe_playwright_python.base import AXE_SCRIPT  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

START_PAGE = "notebooks/00_start_here.ipynb"
#: Every page a learner opens: the start page, each explorer, each released assignment (found in the folders).
PAGES = sorted(str(path.relative_to(REPO)) for path in
               [*(REPO / "notebooks").glob("*.ipynb"), *(REPO / "release").glob("*/*.ipynb")])
SERIOUS = ("serious", "critical")
EXPLORER_BOX = ".jp-OutputArea-output .widget-vbox:has(> img.widget-image)"

#: (axe rule, CSS selector of JupyterLab's element, why it is excluded). Only these nodes are dropped, and only
#: for their rule: the same rule anywhere else (in a notebook's content or our widgets) still fails the test.
JUPYTERLAB_CHROME = (
    ("aria-allowed-attr", "jp-button.jp-ToolbarButtonComponent",
     "JupyterLab's toolbar buttons (file browser, notebook toolbar, nbgrader's Validate) are jp-button web "
     "components that carry aria-pressed without a toggle role"),
    ("aria-required-children", ".jp-WindowedPanel-viewport[role='feed']",
     "the notebook's cell list is role=feed, whose cells are not role=article"),
    ("button-name", "button.jp-collapseHeadingButton",
     "the heading collapser JupyterLab puts next to every markdown heading has no text"),
    ("aria-input-field-name", ".jp-Notebook .cm-content[role='textbox']",
     "CodeMirror's editor of each code cell is a role=textbox without a name"),
)


def jupyterlab_chrome(page, nodes: list[tuple[str, list]]) -> list[bool]:
    """For each (rule, axe target) axe reported, whether its node is one of :data:`JUPYTERLAB_CHROME`'s elements
    (one call into the page for all of them: a release notebook has one CodeMirror editor per code cell)."""
    queries = []
    for rule, target in nodes:
        selectors = [selector for listed, selector, _ in JUPYTERLAB_CHROME if listed == rule]
        # a node inside an iframe or shadow root (a target of more than one selector) is never excused
        queries.append([target[0], selectors] if selectors and len(target) == 1 else None)
    return page.evaluate("queries => queries.map(q => { if (!q) return false; const el = document.querySelector(q[0]);"
                         " return !!el && q[1].some(s => el.matches(s)); })", queries)


def axe_violations(page) -> list[dict]:
    """axe-core's violations on the whole page (``axe.run`` on the document, as ``axe_playwright_python``'s
    ``Axe().run(page)`` does). Its 570 kB script is put into the page once, not before every run as ``Axe().run``
    does (0.1 CPU-s of Chromium each time): JupyterLab is loaded once, and opening a notebook keeps the window."""
    if not page.evaluate("() => typeof window.axe === 'object' && typeof window.axe.run === 'function'"):
        page.evaluate(AXE_SCRIPT)
    return page.evaluate("options => axe.run(document, options)", {"resultTypes": ["violations"]})["violations"]


def serious_violations(page, violations) -> list[str]:
    serious = [(violation, node) for violation in violations if violation["impact"] in SERIOUS
               for node in violation["nodes"]]
    excused = jupyterlab_chrome(page, [(violation["id"], node["target"]) for violation, node in serious])
    return [f"{violation['id']} ({violation['impact']}): {violation['help']} — {node['html'][:200]}"
            for (violation, node), chrome in zip(serious, excused) if not chrome]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    root = course_copy(REPO, tmp_path_factory.mktemp("a11y") / "course")
    with lab_server(root, ARTIFACTS / "jupyterlab.log", options=(EXPOSE_APP,)) as base:
        yield base


@pytest.fixture(scope="module")
def page(browser, lab):
    """JupyterLab loaded once; each test opens its notebook in it (:func:`browser_support.open_alone`)."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = context.new_page()
    open_lab(page, f"{lab}/lab?reset")  # a fresh workspace
    yield page
    context.close()


def test_the_pages_are_found_in_the_folders():
    assert START_PAGE in PAGES
    assert len([p for p in PAGES if p.startswith("notebooks/")]) >= 8
    assert len([p for p in PAGES if p.startswith("release/")]) >= 8
    assert {"notebooks/07_tiled_attention_explorer.ipynb", "release/07_tiled_attention/tiled_attention.ipynb",
            "release/08_modern_attention/modern_attention.ipynb", "notebooks/09_tiny_gpt_explorer.ipynb"} <= set(PAGES)


def test_the_excused_jupyterlab_rules_do_not_match_course_content():
    """The exclusions name JupyterLab's classes (jp-…) or CodeMirror's, never a widget or an output of ours."""
    for rule, selector, reason in JUPYTERLAB_CHROME:
        assert ".jp-" in selector or "jp-button" in selector, (rule, selector)
        assert "widget" not in selector and "Output" not in selector and reason


#: Each notebook as JupyterLab's model holds it after Run All in this module's page (its outputs included).
RAN: dict[str, nbformat.NotebookNode] = {}


def open_and_run(page, notebook: str) -> None:
    """Open ``notebook`` alone in the page, Run All (not on the start page), keep what it gave in :data:`RAN`."""
    open_alone(page, notebook)
    if notebook != START_PAGE:
        run_all(page)
        RAN[notebook] = current_notebook(page)


def ran(page, notebook: str) -> nbformat.NotebookNode:
    """``notebook`` after Run All: from its accessibility test, or run now when that test was not selected."""
    if notebook not in RAN:
        open_and_run(page, notebook)
    return RAN[notebook]


@pytest.mark.parametrize("notebook", PAGES)
def test_no_serious_accessibility_violation(page, notebook):
    open_and_run(page, notebook)
    explorers = page.locator(EXPLORER_BOX)
    if Path(notebook).parent.name == "notebooks" and notebook != START_PAGE:
        expect(explorers.first).to_be_visible(timeout=60_000)
        # each explorer's picture says what it shows: its alt text is the summary line under it, after a redraw too
        page.wait_for_function(f"""() => {{ const boxes = [...document.querySelectorAll('{EXPLORER_BOX}')];
            return boxes.length > 0 && boxes.every(box => {{
              const alt = box.querySelector('img.widget-image').getAttribute('alt') || '';
              const summary = box.querySelector('.{SUMMARY_CLASS}');
              return alt.length > 20 && !!summary && alt === summary.innerText.replace(/\\s+/g, ' ').trim(); }}); }}""",
                               timeout=30_000, polling=POLL_MS)
    violations = axe_violations(page)
    page.screenshot(path=str(ARTIFACTS / f"{Path(notebook).stem}.png"))
    assert serious_violations(page, violations) == []
    # every control of every explorer has a name and is reachable with the Tab key
    controls = page.locator(".jp-OutputArea-output .widget-vbox").locator(
        ".noUi-handle, select, input, button, .widget-toggle-button")
    unreachable = controls.evaluate_all(
        "els => els.filter(el => el.tabIndex < 0 || el.disabled).map(el => el.outerHTML.slice(0, 120))")
    assert unreachable == []


# ---- what Run All gives: each notebook's one execution per run (issue 11), asserted on the page's notebook ---------

def code_outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def widget_views(outputs) -> list:
    return [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]


@pytest.mark.parametrize("notebook", [p for p in PAGES if p.startswith("notebooks/") and p != START_PAGE])
def test_run_all_on_a_self_study_notebook_raises_nothing_and_shows_its_visual(page, notebook):
    """(The start page has no visual and is not run here: tests/test_clean_clone.py runs it, under `make lab`.)"""
    outputs = code_outputs(ran(page, notebook))
    assert not [o for o in outputs if o.output_type == "error"], [o for o in outputs if o.output_type == "error"]
    assert len(widget_views(outputs)) >= 1, "a self-study notebook shows its visual"


@pytest.mark.parametrize("notebook", [p for p in PAGES if p.startswith("release/")])
def test_run_all_on_the_untouched_release_runs_to_the_end_and_says_not_answered_yet(page, notebook):
    from autograder.nbgrader.notebook_cells import nbgrader_meta
    from self_check_harness import error_lines, our_frames

    nb = ran(page, notebook)
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    assert last.execution_count is not None, "Run All reached the last cell"
    # every autograder cell fails on the untouched release (what `nbgrader validate --invert` checks)
    tests = [c for c in nb.cells if nbgrader_meta(c).get("grade") and c.cell_type == "code"]
    assert tests and all(any(o.output_type == "error" for o in c.outputs) for c in tests), [
        nbgrader_meta(c)["grade_id"] for c in tests if not any(o.output_type == "error" for o in c.outputs)]
    errors = [o for o in code_outputs(nb) if o.output_type == "error"]
    plain = [error_lines(o) for o in errors if o.ename == "SelfCheckFailed"]
    assert plain and all(lines[0].startswith("✗ ") for lines in plain)
    assert any("is not answered yet" in lines[0] for lines in plain)
    assert not any(our_frames(error_lines(o)) for o in errors)
