"""In a real browser: nothing a submission holds runs in Formgrader or in the feedback page.

A temporary course grades (``make grade``'s code path) one submission carrying every payload kind —
raw HTML in Markdown, ``display(HTML)``, ``Javascript``, an SVG with a script, a ``javascript:`` link,
an ``iframe`` and a ``form``, a mermaid block, an image whose size is a script, a ``text/html`` output,
an SVG attachment and a raw HTML cell forged in the notebook JSON — and one in a folder whose name (the
student id) is a payload. Each payload would set ``document.title`` to ``PWNED-<kind>`` and ``fetch`` a
URL on a local server this test watches. JupyterLab with Formgrader serves the course (127.0.0.1, a free
port, a token); Chromium opens the manual-grading view, the submission list, the student pages and the
feedback HTML, and no payload may run, while the learner's honest Markdown (with LaTeX) and PNG figure
still show. The same pages rendered from the unsanitised notebook do run the payloads (the test of the test).

Needs Debian's Chromium (/usr/bin/chromium). Screenshots go to test-artifacts/browser/.
"""

import http.server
import os
import secrets
import threading

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbgrader.api import Gradebook
from traitlets.config import Config

from autograder.examples.hostile import FULL  # assignment 1's points, its questions included
from autograder.course import COURSE_ID
from autograder.nbgrader import grading
from autograder.examples import hostile_payloads as payloads
from autograder.nbgrader.notebook_cells import read, solution_cells
from browser_support import CHROMIUM, POLL_MS, free_port, lab_server
from conftest import ASSIGNMENT, NOTEBOOK, RELEASE_NB, REPO, SOURCE_NB

ARTIFACTS = REPO / "test-artifacts" / "browser"
STUDENT = "eve"

if not os.path.exists(CHROMIUM):
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: .ci/run must `apt-get install -y chromium`", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)", allow_module_level=True)



class Beacon:
    """A local HTTP server that records every request a payload would make (and answers 204)."""

    def __init__(self):
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def _record(self):
                hits.append(self.path)
                self.send_response(204)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()

            do_GET = do_POST = do_OPTIONS = _record

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def beacon():
    with Beacon() as server:
        yield server


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory, beacon):
    """A course with the hostile submissions graded and their feedback written, as `make grade` does."""
    course = grading.copy_course(REPO, tmp_path_factory.mktemp("formgrader") / "course")
    submission = payloads.browser_submission(read(RELEASE_NB), beacon.url, solution_cells(read(SOURCE_NB)))
    for student in (STUDENT, payloads_student_id(beacon.url)):
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(submission, str(folder / NOTEBOOK))
    steps, rows = grading.grade_class(course, ASSIGNMENT, [STUDENT, payloads_student_id(beacon.url)])
    by_student = {row.student: row for row in rows}
    assert by_student[STUDENT].total == FULL, by_student[STUDENT].note
    refused = by_student[payloads_student_id(beacon.url)]
    assert refused.steps is None and "is not a safe identifier" in refused.note and "moved to refused/" in refused.note
    assert not (course / "submitted" / payloads_student_id(beacon.url)).exists()  # out of Formgrader's lists
    return course, submission


def payloads_student_id(beacon_url: str) -> str:
    return f"x<img src=x onerror=\"{payloads.script('student-id', beacon_url, slashless=True)}\">"


@pytest.fixture(scope="module")
def formgrader(graded_course):
    course, _ = graded_course
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    with lab_server(course, ARTIFACTS / "formgrader.log", token=token) as base:
        yield base, token


def new_page(browser):
    """A page in a new browser context that records (and dismisses) every dialog in ``page.dialogs``."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    return page


@pytest.fixture(scope="module")
def shared_page(browser):
    """One page for the tests where no payload may run: each goes to its own address (so nothing of the page before
    stays), and a payload that did run in one would fail that test. A context per test cost Chromium 0.3-0.4 CPU-s."""
    page = new_page(browser)
    yield page
    page.context.close()


@pytest.fixture
def page(shared_page):
    shared_page.dialogs.clear()
    shared_page.context.set_extra_http_headers({})  # a test that needs the server's token sets it again
    return shared_page


@pytest.fixture
def fresh_page(browser):
    """A page of its own, for the test whose payloads run."""
    page = new_page(browser)
    yield page
    page.context.close()


def settle(page) -> None:
    """Wait until the page and everything it loads (images that fail, scripts) have finished."""
    page.wait_for_load_state("load")
    page.wait_for_load_state("networkidle")
    page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", polling=POLL_MS)


def assert_nothing_ran(page, beacon, where: str) -> None:
    settle(page)
    screenshot = ARTIFACTS / f"xss-{where}.png"
    # the first screen only: a full-page capture of the long pages (the manual-grading view, the feedback: 10 000+ px)
    # costs Chromium 3-5 CPU-s each; the whole page is captured when a check below fails, where it is worth it
    page.screenshot(path=str(screenshot))
    try:
        assert not page.title().startswith(payloads.MARKER), f"{where}: a payload set the title to {page.title()!r}"
        assert page.evaluate("() => document.title").find(payloads.MARKER) < 0
        assert beacon.hits == [], f"{where}: payloads called {beacon.hits}"
        assert page.dialogs == [], f"{where}: dialogs {page.dialogs}"
        assert page.locator("iframe").count() == 0, f"{where}: an iframe is on the page"
    except AssertionError:
        page.screenshot(path=str(screenshot), full_page=True)
        raise


def submission_id(course) -> str:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        return gradebook.find_submission_notebook(NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT, STUDENT).id


def honest_content_shows(page, math: str = "latex") -> None:
    """The learner's honest Markdown shows; its math as written for MathJax (Formgrader) or as MathML (feedback,
    written by autograder/nbgrader/feedback_html.py)."""
    body = page.locator("body").inner_text()
    assert "My notes" in body
    if math == "latex":
        assert "A_{ij} = 1" in body  # LaTeX left for MathJax, as written
    else:
        assert "A_{ij}" not in body and page.locator("math msub").count() >= 1  # ∑_j A_ij = 1 as MathML
    assert page.locator("sub", has_text="2").count() >= 1  # inline HTML from the learner still renders
    figure = page.locator(f"img[src='data:image/png;base64,{payloads.PNG}']").first
    assert figure.evaluate("img => img.naturalWidth") == 8  # the PNG figure decoded and shows


def test_the_manual_grading_view_runs_no_payload_and_shows_the_honest_work(formgrader, graded_course, page, beacon):
    base, token = formgrader
    course, _ = graded_course
    page.context.set_extra_http_headers({"Authorization": f"token {token}"})  # the pages' own API calls too
    page.goto(f"{base}/formgrader/submissions/{submission_id(course)}/")
    page.locator("#notebook-container").first.wait_for()
    assert_nothing_ran(page, beacon, "manual-grading")
    honest_content_shows(page)
    assert "The grader showed this cell" in page.locator("body").inner_text()  # the Markdown payload, as text


@pytest.mark.parametrize("path", [f"manage_submissions/{ASSIGNMENT}", "manage_students",
                                  f"manage_students/{STUDENT}/{ASSIGNMENT}", f"gradebook/{ASSIGNMENT}",
                                  f"gradebook/{ASSIGNMENT}/{NOTEBOOK.removesuffix('.ipynb')}", "manage_assignments"])
def test_formgrader_lists_run_no_payload(formgrader, graded_course, page, beacon, path):
    base, token = formgrader
    page.context.set_extra_http_headers({"Authorization": f"token {token}"})
    page.goto(f"{base}/formgrader/{path}")
    page.locator("table, .panel").first.wait_for()
    if path in (f"manage_submissions/{ASSIGNMENT}", "manage_students"):  # the lists have loaded (by script)
        page.get_by_text(STUDENT, exact=True).first.wait_for()
    assert_nothing_ran(page, beacon, path.replace("/", "-"))
    # the student refused for the id is not listed at all (Formgrader would link it to a page that writes
    # the id into a script unescaped)
    assert "onerror" not in page.locator("body").inner_text()


def test_every_student_page_formgrader_links_to_runs_no_payload(formgrader, page, beacon):
    base, token = formgrader
    page.context.set_extra_http_headers({"Authorization": f"token {token}"})
    page.goto(f"{base}/formgrader/manage_students")
    page.get_by_text(STUDENT, exact=True).first.wait_for()
    links = page.locator("a[href*='/formgrader/manage_students/']").evaluate_all("links => links.map(a => a.href)")
    assert links
    for link in links:
        page.goto(link)
        assert_nothing_ran(page, beacon, "student-" + link.rstrip("/").rsplit("/", 1)[-1][:20])


def test_the_feedback_page_runs_no_payload_and_shows_the_honest_work(graded_course, page, beacon):
    course, _ = graded_course
    feedback = course / "feedback" / STUDENT / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")
    page.goto(feedback.as_uri())
    assert_nothing_ran(page, beacon, "feedback")
    honest_content_shows(page, math="mathml")


def test_unsanitised_the_same_payloads_run_in_this_browser(graded_course, fresh_page, beacon, tmp_path):
    # the test of the test: nbgrader's feedback template on the submission as handed in, without SanitizeNotebook
    _, submission = graded_course
    config = Config()
    config.HTMLExporter.template_name = "classic"
    html, _ = HTMLExporter(config=config).from_notebook_node(submission)
    raw = tmp_path / "unsanitised.html"
    raw.write_text(html)
    page = fresh_page
    page.goto(raw.as_uri())
    settle(page)
    page.wait_for_function(f"() => document.title.startsWith('{payloads.MARKER}')", polling=POLL_MS)
    assert any(hit.startswith(("/markdown-html", "/forged-output", "/raw-cell", "/mermaid")) for hit in beacon.hits)
    beacon.hits.clear()
