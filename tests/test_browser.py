"""In a real browser: `make lab`'s JupyterLab opens the start page, the explorer redraws when its sliders move
under the keyboard, and nbgrader's Create Assignment sidebar and Validate button work (Validate on a release with
a known mistake, after Run All on it).

Needs Debian's Chromium (/usr/bin/chromium; `.ci/run` installs it). In CI a missing browser fails the test.
Screenshots go to test-artifacts/browser/.
"""

import os
import re

import nbformat
import numpy as np
import pytest

from attention_lab.a01_attention import visual as ex
from browser_support import (CHROMIUM, EXPOSE_APP, HASH_JS, PIXEL_JS, POLL_MS, course_copy, current_notebook,
                             lab_server, open_alone, open_lab, run_all, slider_handle, wait_new_pixels)
from conftest import ASSIGNMENT, REPO

ARTIFACTS = REPO / "test-artifacts" / "browser"
ZERO_COLOUR = (np.array(ex.colormaps[ex.COLORMAP](0.0)[:3]) * 255).round()

if not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: .ci/run must `apt-get install -y chromium`", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)", allow_module_level=True)

from playwright.sync_api import expect  # noqa: E402


@pytest.fixture(scope="module")
def lab_course(tmp_path_factory):
    """(base URL, course folder the Lab serves)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    root = course_copy(REPO, tmp_path_factory.mktemp("lab") / "course")
    with lab_server(root, ARTIFACTS / "jupyterlab.log", options=(EXPOSE_APP,)) as base:
        yield base, root


@pytest.fixture(scope="module")
def lab(lab_course):
    return lab_course[0]


@pytest.fixture(scope="module")
def page(browser, lab):
    """JupyterLab loaded once, at the address `make lab` opens; each later test opens its notebook in it as the
    page's only document (:func:`browser_support.open_alone`) instead of loading JupyterLab again."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = context.new_page()
    open_lab(page, f"{lab}/")
    yield page
    context.close()


def heatmap_fraction(T, row, col):
    """Fractional (x, y) in the explorer image of the centre of heatmap cell (query row, key col)."""
    left, bottom, width, height = ex.HEATMAP_RECT
    return left + width * (col + 0.5) / T, 1 - bottom - height + height * (row + 0.5) / T


def pixel(image, T, row, col):
    fx, fy = heatmap_fraction(T, row, col)
    return np.array(image.evaluate(f"(el) => ({PIXEL_JS})([el, {fx}, {fy}])"))


def test_lab_opens_on_the_start_page(page):
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel").first).to_have_text(
        "00_start_here.ipynb", timeout=60_000)
    expect(page.locator(".jp-RenderedMarkdown h1").first).to_contain_text("Attention Lab — start here")
    page.screenshot(path=str(ARTIFACTS / "start_page.png"))


def test_explorer_redraws_under_the_keyboard_and_the_mask_darkens_the_upper_triangle(page):
    open_alone(page, "notebooks/01_attention_explorer.ipynb")
    run_all(page)
    image = page.locator("img.widget-image").first
    expect(image).to_be_visible(timeout=60_000)
    page.wait_for_function(f"el => ({HASH_JS})(el) !== -1", arg=image.element_handle(), polling=POLL_MS)
    summary = page.locator(".widget-html-content", has_text="largest weight").first
    expect(summary).to_contain_text("T = 32, d_head = 64")
    page.screenshot(path=str(ARTIFACTS / "explorer_initial.png"))

    before = image.evaluate(HASH_JS)
    T_handle = slider_handle(page, "T")
    T_handle.focus()
    T_handle.press("ArrowRight")
    expect(T_handle).to_have_attribute("aria-valuenow", "33.0")
    before = wait_new_pixels(page, image, before)
    expect(summary).to_contain_text("T = 33, d_head = 64")

    d_handle = slider_handle(page, "d_head")
    d_handle.focus()
    d_handle.press("ArrowRight")
    expect(summary).to_contain_text("T = 33, d_head = 91")
    before = wait_new_pixels(page, image, before)
    expect(summary).to_contain_text("every weight above the diagonal is zero")
    page.screenshot(path=str(ARTIFACTS / "explorer_after_keys.png"))

    above = [(row, col) for row in range(0, 30, 3) for col in range(row + 1, 33, 4)]  # cells above the diagonal
    assert all(np.abs(pixel(image, 33, r, c) - ZERO_COLOUR).max() <= 3 for r, c in above)  # weight 0 everywhere

    page.locator(".widget-checkbox", has_text="causal mask").locator("input").click()
    wait_new_pixels(page, image, before)
    expect(summary).to_contain_text("weights above the diagonal are not zero")
    lit = [np.abs(pixel(image, 33, r, c) - ZERO_COLOUR).max() > 3 for r, c in above]
    assert sum(lit) > 0.5 * len(above), f"only {sum(lit)} of {len(above)} cells above the diagonal lit up"
    page.screenshot(path=str(ARTIFACTS / "explorer_no_mask.png"))


def test_nbgrader_create_assignment_sidebar(page):
    """On the notebook the page holds (the start page, or the one an earlier test opened): the sidebar shows its
    cells' nbgrader widgets. Nothing is opened for it (a notebook more costs a kernel). nbgrader's Validate button
    is clicked in the next test, on a release with a known mistake."""
    expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first).to_be_visible(timeout=60_000)
    tab = page.locator('li.lm-TabBar-tab[data-id="nbgrader-create_assignemnt"]')  # nbgrader's own spelling
    expect(tab).to_have_count(1)
    tab.click()
    expect(page.locator(".nbgrader-CellWidget").first).to_be_visible(timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "create_assignment.png"))
    tab.click()  # closed again: the next test's notebook in this page is as wide as on a fresh load
    expect(page.locator(".nbgrader-CellWidget").first).to_be_hidden()


def test_run_all_on_a_notebook_with_a_mistake_shows_every_verdict_and_draws_the_explorer(lab_course, page):
    """Issue 9 §5: the raises-exception tags keep Run All going past failing self-checks; each failure shows its
    plain message first, with no frame of attention_lab, in the notebook and in the Validate dialog."""
    from autograder.assignments import get
    from self_check_harness import (assert_ran_to_the_end_with_every_verdict_and_the_visual, cells_of, first_mistake,
                                    is_self_check, namespace_for, release_with, verdict)

    base, root = lab_course
    assignment = get(ASSIGNMENT)
    cells = dict(assignment.mistakes[first_mistake(assignment)].cells)
    nb = release_with(assignment, cells)
    nbformat.write(nb, str(root / "release" / ASSIGNMENT / "with_a_mistake.ipynb"))
    namespace = namespace_for(assignment, cells)
    failing = {grade_id for grade_id, source in cells_of(assignment).self_checks.items() if verdict(namespace, source)}
    code = [c for c in nb.cells if c.cell_type == "code"]

    open_alone(page, f"release/{ASSIGNMENT}/with_a_mistake.ipynb")
    run_all(page)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    dom_cells = panel.locator(".jp-Cell.jp-CodeCell")
    expect(dom_cells).to_have_count(len(code))
    # the explorer's cell (the questions come after it): drawn once Run All reaches it
    (explorer,) = [i for i, c in enumerate(code) if ".visual import" in c.source]
    explorer_image = dom_cells.nth(explorer).locator("img.widget-image")
    expect(explorer_image).to_be_visible(timeout=120_000)
    page.wait_for_function(f"el => ({HASH_JS})(el) !== -1", arg=explorer_image.element_handle(), polling=POLL_MS)
    for index, cell in enumerate(code):
        prompt = dom_cells.nth(index).locator(".jp-InputPrompt").first
        expect(prompt).to_have_text(re.compile(r"\[\d+\]"), timeout=30_000)  # every cell ran
        if not is_self_check(cell):
            continue
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        shown = dom_cells.nth(index).locator(".jp-OutputArea").inner_text()
        if grade_id in failing:
            error = dom_cells.nth(index).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            text = error.inner_text().strip()
            assert text.startswith("✗ "), f"{grade_id}: {text[:300]}"
            assert "Traceback" not in text and "attention_lab/" not in text and str(root) not in text, text
        else:
            assert "✓" in shown and "✗" not in shown, f"{grade_id}: {shown[:300]}"
    # the notebook as JupyterLab's model holds it after Run All (nbformat's JSON, its outputs included): what
    # tests/test_notebooks.py asserts after nbclient's Run All of every other assignment's release with its first
    # mistake (this is that notebook's one execution per run, issue 11)
    assert_ran_to_the_end_with_every_verdict_and_the_visual(current_notebook(page))
    first = next(i for i, c in enumerate(code) if c.metadata.get("nbgrader", {}).get("grade_id") in failing)
    dom_cells.nth(first).scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "run_all_with_a_mistake.png"))

    panel.locator("jp-button.validate-button").click()
    dialog = page.locator(".jp-Dialog-body")
    expect(dialog).to_contain_text("failed", timeout=120_000)
    text = dialog.inner_text()
    assert text.count("✗ ") == len(failing), text[:3000]
    assert "This looks like a known mistake: causal mask flipped" in text
    assert "Traceback" not in text and "attention_lab/" not in text and str(root) not in text, text[:3000]
    page.screenshot(path=str(ARTIFACTS / "validate_with_a_mistake.png"))
    page.locator(".jp-Dialog .jp-mod-accept").first.click()
