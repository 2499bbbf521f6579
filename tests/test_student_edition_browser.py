"""The student edition shows students only student things: started as its README says, JupyterLab has
nbgrader's Validate button and Assignment List, but no Formgrader, no Create Assignment and no course list.

Needs Debian's Chromium (/usr/bin/chromium; `.ci/run` installs it). Screenshots go to test-artifacts/browser/.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

from autograder import student_build
from browser_support import CHROMIUM, launch, lab_server, wait_idle
from conftest import REPO

ARTIFACTS = REPO / "test-artifacts" / "browser"
NOTEBOOK = "workspace/01_scaled_dot_product_attention/scaled_dot_product_attention.ipynb"

if not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: .ci/run must `apt-get install -y chromium`", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)", allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def edition(tmp_path_factory):
    return student_build.build(tmp_path_factory.mktemp("student") / "attention-lab-student")


def readme_lab_command(edition) -> list[str]:
    """The command the edition's README gives for opening the course, with this venv's Python."""
    line = next(l for l in (edition / "README.md").read_text().splitlines() if "-m attention_lab.lab" in l)
    words = [w for w in shlex.split(line) if "=" not in w]  # environment assignments are set by lab_server
    assert words[0].endswith("python") and words[1:] == ["-m", "attention_lab.lab"], line
    return [sys.executable, *words[1:]]


def test_the_edition_config_disables_exactly_the_instructor_extensions(edition):
    env = dict(os.environ, JUPYTER_CONFIG_PATH=str(edition / "jupyter-config"))
    jupyter = os.path.join(os.path.dirname(sys.executable), "jupyter")
    listing = subprocess.run([jupyter, "labextension", "list"], env=env, capture_output=True, text=True)
    disabled = (listing.stdout + listing.stderr).split("Disabled extensions:")[1]
    assert set(re.findall(r"@jupyter/nbgrader:[\w-]+", disabled)) == set(student_build.INSTRUCTOR_LAB_PLUGINS)


def test_students_see_validate_and_the_assignment_list_but_no_instructor_tools(edition):
    assert readme_lab_command(edition)[1:] == ["-m", "attention_lab.lab"]  # what lab_server(make_lab=True) runs
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with lab_server(edition, ARTIFACTS / "student_edition_jupyterlab.log", make_lab=True) as base, \
            sync_playwright() as playwright:
        browser = launch(playwright)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{base}/lab/tree/{NOTEBOOK}?reset")
        wait_idle(page)
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        expect(panel.locator("jp-button.validate-button")).to_be_visible()

        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
        menu = page.locator(".lm-Menu-content").first
        expect(menu).to_contain_text("Assignment List")
        items = menu.locator(".lm-Menu-itemLabel").all_inner_texts()
        page.screenshot(path=str(ARTIFACTS / "student_edition_menu.png"))
        assert not any(re.search(r"formgrader|course|create assignment", item, re.I) for item in items), items
        page.keyboard.press("Escape")

        assert page.locator('li.lm-TabBar-tab[data-id="nbgrader-create_assignemnt"]').count() == 0  # nbgrader's id
        assert page.locator(".lm-TabBar-tab", has_text=re.compile("Formgrader|Create Assignment")).count() == 0
        assert page.request.get(f"{base}/formgrader").status == 404  # the server side is off as well
        assert page.request.get(f"{base}/assignments").status != 404  # the Assignment List's handler is there (400: no course given)

        page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
        page.locator(".lm-Menu-item", has_text="Assignment List").click()
        expect(page.locator('li.lm-TabBar-tab.lm-mod-current[data-id="nbgrader-assignment-list"]')).to_have_count(
            1, timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "student_edition_assignment_list.png"))
        browser.close()
