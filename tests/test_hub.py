"""A class in a box (`make hub`): JupyterHub with nbgrader's exchange, real Unix users, headless Chromium.

One run of a class: the instructor releases assignment 1 in Formgrader; student A logs in, fetches it
in the Assignment List, fills in the answers (the source's solution cells), saves and submits; the
instructor sets a due date, student B submits after it (nbgrader's own commands, as that Unix user);
A plants a newer "submission" in B's name and links the solutions in as its own; the instructor
collects in Formgrader (each student's own genuine submission, the forgeries set aside), autogrades with this course's nbgrader_config.py (the sandboxed
pipeline; A in Formgrader, B with `nbgrader autograde`), generates and releases feedback in
Formgrader; A fetches it and reads it. Then: B's late submission lost nbgrader's
late penalty, the Canvas and Moodle CSVs hold the right numbers, A can read neither the course
directory nor B's work (as the Unix user, and through A's own Jupyter server), and A's server shows no
Formgrader or Create Assignment while the instructor's does.

Needs root (Unix users), bubblewrap, Debian's Chromium and configurable-http-proxy (`.ci/run`
installs them); in CI a missing one fails the test, elsewhere it is skipped. The users' two environments
are those `make hub-envs` built ahead (`.ci/run` does, as an install step) in `hub.envs.prebuilt_dir()`, reused
when current and else built there by set-up; the students' is configured for this class's exchange. The users,
the hub (process group) and its folder are removed in teardown. Screenshots, the hub's log and the phases'
durations go to test-artifacts/hub/.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from autograder.examples.hostile import FULL  # assignment 1's points, its questions included
from autograder import hub
from autograder.hub.envs import prebuilt_dir
from autograder.hub.users import run_as
from browser_support import CHROMIUM, launch
from conftest import ASSIGNMENT, NOTEBOOK, REPO, SOURCE_NB

ARTIFACTS = REPO / "test-artifacts" / "hub"
NB_NAME = NOTEBOOK.removesuffix(".ipynb")
WAIT = 120_000  # ms: generous, the machine may be busy; every wait is for a condition, never a fixed time


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the hub test creates Unix users: run it as root"
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if shutil.which("configurable-http-proxy") is None:
        return "configurable-http-proxy is missing (npm install -g configurable-http-proxy)"
    if shutil.which("bwrap") is None:
        return "bubblewrap is missing (apt-get install -y bubblewrap)"
    return None


if (_reason := _missing()) is not None:
    if os.environ.get("CI"):
        pytest.fail(f"{_reason}: .ci/run must install it", pytrace=False)
    pytest.skip(_reason, allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402


class Phases:
    """Wall-clock time of each phase of the run, written to test-artifacts/hub/timings.json (a record, never asserted)."""

    def __init__(self):
        self.started = self.last = time.monotonic()
        self.seconds: dict[str, float] = {}

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self.last, 1)
        self.last = now

    def note(self, name: str, value) -> None:
        """Record ``value`` under ``name`` alongside the durations."""
        self.seconds[name] = value

    def write(self) -> None:
        self.seconds["total"] = round(time.monotonic() - self.started, 1)
        (ARTIFACTS / "timings.json").write_text(json.dumps(self.seconds, indent=2) + "\n")


@pytest.fixture(scope="module")
def phases():
    recorder = Phases()
    yield recorder
    recorder.write()


@pytest.fixture(scope="module")
def class_hub(phases):
    """Set up a class (an instructor, students A and B) in a fresh folder, start its hub on a free port.

    The two environments are the ones built ahead (`make hub-envs`), or built by set-up where those would be.
    Yields a dict with the layout, the user names, the passwords and the hub's URL; afterwards stops
    the hub (its process group; the hub stops the servers it spawned) and removes the users and folder.
    """
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(3)  # fresh names: two runs on one machine never share users
    instructor, a, b = f"al{tag}-teach", f"al{tag}-a", f"al{tag}-b"
    root = Path(tempfile.mkdtemp(prefix="attention-lab-hub-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    envs = prebuilt_dir()
    process = log = None
    try:
        built = []  # set-up's "building <env> ..." lines: none when `make hub-envs` built them ahead
        settings = hub.setup(root, instructor, [a, b], envs=envs, log=built.append)
        phases.done("setup (users, two environments, course, exchange)")
        phases.note("environments built by set-up", sum(line.startswith("building ") for line in built))
        layout = hub.Layout(root, envs)
        command, env = hub.hub_command(layout)
        base = command[3].split("=", 1)[1]
        log = open(ARTIFACTS / "jupyterhub.log", "w")
        process = subprocess.Popen(command, cwd=layout.state, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        wait_for_hub(base, process)
        phases.done("hub start")
        yield {"layout": layout, "instructor": instructor, "a": a, "b": b, "base": base,
               "passwords": settings["passwords"]}
    finally:
        if process is not None:
            stop_process_group(process)
        if log is not None:
            log.close()
        hub.teardown(root, purge=True, log=lambda line: None)
        phases.done("teardown (hub stopped, users and folder removed)")


def wait_for_hub(base: str, process: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"jupyterhub exited with code {process.returncode}; see {ARTIFACTS / 'jupyterhub.log'}")
        try:
            with urllib.request.urlopen(f"{base}/hub/api", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the hub did not answer on {base} within {timeout} s")
        time.sleep(0.5)  # polling interval for a condition (the hub answering), not a wait for time to pass


def stop_process_group(process: subprocess.Popen) -> None:
    """SIGTERM the hub's process group (the hub then stops the users' servers), SIGKILL it if it lingers."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = launch(playwright)
        yield chromium
        chromium.close()


def log_in(browser, base: str, user: str, password: str):
    """A new browser context logged in to the hub as ``user``, on the user's JupyterLab (server started)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{base}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=WAIT)
    expect(page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")).to_be_visible(timeout=WAIT)
    return page


def nbgrader_menu(page) -> list[str]:
    """Labels of the visible items of JupyterLab's Nbgrader menu."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    menu = page.locator(".lm-Menu").last
    expect(menu).to_be_visible()
    labels = [label.strip() for label in menu.locator(".lm-Menu-item:visible .lm-Menu-itemLabel").all_inner_texts()]
    # Escape on the menu itself (focused first), not wherever the keyboard's focus happens to be: on a busy machine
    # the menu may not have taken the focus yet, and an Escape sent to the page then closes nothing. Even so, one
    # CI run's first Escape reached the menu before Lumino handled keys on it and the menu stayed open for the
    # whole wait, so while it is still open after a tenth of the wait, Escape is pressed again (at most ten times).
    # Lumino detaches a closed menu on its next animation frame: a click on the menu bar before that lands on the
    # menu still open and closes it, so the next "open the Nbgrader menu" would open nothing
    open_menus = page.locator(".lm-Menu:visible")
    for _ in range(10):
        menu.press("Escape")
        try:
            expect(open_menus).to_have_count(0, timeout=WAIT // 10)
            break
        except AssertionError:
            continue
    expect(open_menus).to_have_count(0)
    return [label for label in labels if label]


def sidebar_tabs(page) -> list[str]:
    return page.locator(".jp-SideBar .lm-TabBar-tab").evaluate_all("tabs => tabs.map(t => t.dataset.id)")


def answers() -> dict[int, str]:
    """Cell index → the source's solution for each code solution cell (its BEGIN/END SOLUTION lines dropped); the
    optional written answer (a 0-point Markdown cell, graded by hand) is left unanswered."""
    source = nbformat.read(SOURCE_NB, as_version=4)
    return {i: "\n".join(line for line in cell.source.splitlines() if "### BEGIN SOLUTION" not in line
                         and "### END SOLUTION" not in line)
            for i, cell in enumerate(source.cells)
            if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code"}


def where_points_went(graded_path: Path) -> str:
    """The graded code cells of an autograded notebook whose outputs hold an error or stderr, with their grade_id.

    Used as the message of a score assertion, so that a lost point in CI names its cell and what it printed.
    """
    graded = nbformat.read(graded_path, as_version=4)
    lines = []
    for index, cell in enumerate(graded.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or not grade_id:
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                lines.append(f"cell {index} {grade_id}: {output.get('ename')}: {output.get('evalue', '')[:300]}")
            elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                lines.append(f"cell {index} {grade_id}: stderr {output.get('text', '')[:300]!r}")
    return "\n".join(lines) or "no graded cell shows an error or stderr"


def unsaved_answers(notebook_path: Path) -> list[int]:
    """Indices of the answer cells whose source in the notebook on disk is not :func:`answers`' text."""
    saved = nbformat.read(notebook_path, as_version=4)
    return [index for index, answer in answers().items() if saved.cells[index].source.rstrip() != answer.rstrip()]


def formgrader_action(page, assignment: str, column: str) -> None:
    """Click a Manage Assignments button of ``assignment`` (column ``assign``, ``release``, ...), close its dialog."""
    row = page.locator("#main-table tr", has=page.locator(f"td.name[data-order='{assignment}']"))
    row.locator(f"td.{column} a").click(timeout=WAIT)
    close_dialog(page)


def close_dialog(page) -> None:
    """Wait for Formgrader's result dialog, fail with its text when nbgrader reports an error, close it."""
    dialog = page.locator("#success-modal, #error-modal").last
    expect(dialog).to_be_visible(timeout=WAIT)
    assert dialog.get_attribute("id") == "success-modal", dialog.inner_text()
    dialog.locator(".modal-footer button.close").click()
    expect(page.locator("#success-modal")).to_have_count(0, timeout=WAIT)


def as_user(user: str, *command: str) -> subprocess.CompletedProcess:
    """Run ``command`` as Unix user ``user`` with runuser (stdout and stderr captured)."""
    return subprocess.run(["runuser", "-u", user, "--", *command], capture_output=True, text=True)


def export_csv(ctx, plugin: str, name: str) -> list[list[str]]:
    layout = ctx["layout"]
    target = layout.course / name
    hub.nbgrader_as(layout, ctx["instructor"], "export", f"--exporter=autograder.nbgrader.lms_export.{plugin}",
                    f"--to={target}")
    with open(target, newline="") as handle:
        return list(csv.reader(handle))


def test_a_class_on_the_hub_from_release_to_feedback(class_hub, browser, phases):
    ctx = class_hub
    layout, base, teacher, a, b = ctx["layout"], ctx["base"], ctx["instructor"], ctx["a"], ctx["b"]
    course, exchange = layout.course, layout.course_exchange

    # ---- the instructor: Formgrader and Create Assignment are there; release assignment 1 in Formgrader ----
    teacher_page = log_in(browser, base, teacher, ctx["passwords"]["instructor"])
    teacher_menu = nbgrader_menu(teacher_page)
    assert "Formgrader" in teacher_menu and "Create assignment" in teacher_menu, teacher_menu
    assert "nbgrader-create_assignemnt" in sidebar_tabs(teacher_page)  # nbgrader's own spelling
    # JupyterHub forbids framing a server's pages (CSP frame-ancestors 'none'), so Formgrader opens in its own tab
    teacher_page.goto(f"{base}/user/{teacher}/formgrader")
    expect(teacher_page.locator("#main-table")).to_contain_text(ASSIGNMENT, timeout=WAIT)
    formgrader_action(teacher_page, ASSIGNMENT, "assign")
    formgrader_action(teacher_page, ASSIGNMENT, "release")
    expect(teacher_page.locator("#main-table td.status").first).to_contain_text("released", timeout=WAIT)
    teacher_page.screenshot(path=str(ARTIFACTS / "formgrader_released.png"))
    assert (exchange / "outbound" / ASSIGNMENT / NOTEBOOK).is_file()
    phases.done("instructor logs in, releases in Formgrader")

    # ---- student A: no Formgrader, no Create Assignment; fetch, fill in, save, submit ----
    page = log_in(browser, base, a, ctx["passwords"]["students"])
    assert nbgrader_menu(page) == ["Assignment List"]
    assert not any(tab.startswith("nbgrader-create") for tab in sidebar_tabs(page)), sidebar_tabs(page)
    assert page.context.request.get(f"{base}/user/{a}/formgrader").status == 404
    assert page.context.request.get(f"{base}/user/{teacher}/lab", max_redirects=0).status in (302, 403)
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-item[data-command='nbgrader:open-assignment-list']").click()
    released = page.locator("#released_assignments_list .list_item", has_text=ASSIGNMENT)
    released.locator("button", has_text="Fetch").click(timeout=WAIT)
    fetched = page.locator("#fetched_assignments_list")
    expect(fetched).to_contain_text(ASSIGNMENT, timeout=WAIT)
    fetched.locator("a.assignment-notebooks-link", has_text=ASSIGNMENT).click()
    expect(fetched.locator(".nested_list_item button", has_text="Validate")).to_be_visible(timeout=WAIT)
    fetched.locator(".nested_list_item a", has_text=NB_NAME).click()
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    cells = notebook.locator(".jp-Cell")
    expect(cells.first).to_be_visible(timeout=WAIT)
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    a_notebook = Path(f"/home/{a}") / ASSIGNMENT / NOTEBOOK
    to_fill = list(answers())
    # Filling is the test's input, not the product under test: a cell editor that JupyterLab re-renders while
    # Playwright types into it can drop the text on a busy machine, so the saved file is read back and the cells
    # it lacks are filled again (a bounded number of rounds; every answer must be on disk before A submits).
    for _ in range(3):
        for index in to_fill:
            cell = cells.nth(index)
            cell.scroll_into_view_if_needed(timeout=WAIT)
            cell.locator(".cm-content").fill(answers()[index])
        expect(tab).to_have_class(re.compile("jp-mod-dirty"), timeout=WAIT)
        page.keyboard.press("Control+s")
        expect(tab).not_to_have_class(re.compile("jp-mod-dirty"), timeout=WAIT)
        to_fill = unsaved_answers(a_notebook)
        if not to_fill:
            break
    assert not to_fill, f"answer cells {to_fill} never reached A's saved notebook"
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Assignments").click()
    fetched.locator(".list_item", has_text=ASSIGNMENT).locator("button", has_text="Submit").first.click()
    expect(page.locator("#submitted_assignments_list")).to_contain_text(ASSIGNMENT, timeout=WAIT)
    page.screenshot(path=str(ARTIFACTS / "student_submitted.png"))
    phases.done("student A logs in, fetches, fills in, submits (browser)")

    # ---- a due date between the two submissions; B submits late with nbgrader's commands as that user ----
    due = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    hub.nbgrader_as(layout, teacher, "db", "assignment", "add", ASSIGNMENT, f"--duedate={due}")
    student_env = layout.student_env
    run_as(b, [str(student_env / "bin" / "nbgrader"), "fetch_assignment", ASSIGNMENT], prefix=student_env)
    b_notebook = Path(f"/home/{b}") / ASSIGNMENT / NOTEBOOK
    filled = nbformat.read(b_notebook, as_version=4)
    for index, answer in answers().items():
        filled.cells[index].source = answer
    nbformat.write(filled, b_notebook)
    shutil.chown(b_notebook, b, b)
    run_as(b, [str(student_env / "bin" / "nbgrader"), "submit", ASSIGNMENT], prefix=student_env)
    phases.done("due date set; student B fetches and submits late (commands)")

    # ---- A tries what nbgrader's own collect would take: a newer "submission" in B's name (the untouched
    # release), and a link to the course's source folder (the solutions) as A's own newest submission ----
    later = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    inbound = exchange / "inbound"
    forged = inbound / f"{b}+{ASSIGNMENT}+{later}+forged"
    for command in (["mkdir", forged], ["cp", exchange / "outbound" / ASSIGNMENT / NOTEBOOK, forged / NOTEBOOK],
                    ["sh", "-c", 'printf %s "$1" > "$2"', "sh", later, forged / "timestamp.txt"],
                    ["ln", "-s", course / "source" / ASSIGNMENT, inbound / f"{a}+{ASSIGNMENT}+{later}+solutions"]):
        assert as_user(a, *map(str, command)).returncode == 0, command

    # ---- the instructor collects, autogrades (the sandboxed pipeline), generates and releases feedback:
    # A's submission through Formgrader (grading inside the instructor's server), B's with nbgrader's command ----
    teacher_page.goto(f"{base}/user/{teacher}/formgrader")
    formgrader_action(teacher_page, ASSIGNMENT, "collect")
    teacher_page.goto(f"{base}/user/{teacher}/formgrader/manage_submissions/{ASSIGNMENT}")
    row = teacher_page.locator("tr", has_text=a)
    row.locator("td.autograde a").click(timeout=WAIT)
    close_dialog(teacher_page)
    hub.nbgrader_as(layout, teacher, "autograde", ASSIGNMENT, f"--student={b}")
    teacher_page.goto(f"{base}/user/{teacher}/formgrader")
    formgrader_action(teacher_page, ASSIGNMENT, "generate-feedback")
    formgrader_action(teacher_page, ASSIGNMENT, "release-feedback")
    # what was collected is each student's own latest genuine submission; A's two folders were set aside
    for student in (a, b):
        collected = course / "submitted" / student / ASSIGNMENT / NOTEBOOK
        assert unsaved_answers(collected) == [], student  # every answer cell as the student filled it in
        assert "### BEGIN SOLUTION" not in collected.read_text(), student
    assert len([p for p in inbound.iterdir() if p.name.startswith("quarantined-")]) == 2
    for student in (a, b):
        graded = nbformat.read(course / "autograded" / student / ASSIGNMENT / NOTEBOOK, as_version=4)
        # written by autograder.sandbox.SandboxedExecute: the notebook ran in the bubblewrap sandbox
        assert graded.metadata["attention_lab"]["execution"]["status"] == "ok", graded.metadata["attention_lab"]
    phases.done("instructor collects, autogrades, releases feedback (Formgrader; B's autograde a command)")

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="attention-lab") as gradebook:
        on_time, late = gradebook.find_submission(ASSIGNMENT, a), gradebook.find_submission(ASSIGNMENT, b)
        assert (on_time.score, on_time.max_score, on_time.total_seconds_late) == (FULL, FULL, 0), \
            where_points_went(course / "autograded" / a / ASSIGNMENT / NOTEBOOK)
        assert not on_time.late_submission_penalty
        assert late.score == FULL and late.total_seconds_late > 0, \
            (late.score, where_points_went(course / "autograded" / b / ASSIGNMENT / NOTEBOOK))
        assert late.late_submission_penalty == pytest.approx(FULL / 10)  # 10 % of the score for a started day

    # ---- student A fetches the feedback and reads it ----
    page.locator("#refresh_assignments_list").click()
    submitted = page.locator("#submitted_assignments_list")
    submitted.locator("button", has_text="Fetch Feedback").click(timeout=WAIT)
    submitted.locator("a", has_text="view feedback").click(timeout=WAIT)
    page.locator(".jp-DirListing-item", has_text=f"{NB_NAME}.html").dblclick(timeout=WAIT)
    feedback = page.frame_locator(".jp-HTMLViewer:not(.lm-mod-hidden) iframe").locator("body")
    expect(feedback).to_contain_text(f"Score: {FULL:.1f} / {FULL:.1f}", timeout=WAIT)
    expect(feedback).to_contain_text("softmax")
    page.screenshot(path=str(ARTIFACTS / "student_feedback.png"))
    phases.done("student A fetches and reads feedback (browser)")

    # ---- isolation: as the Unix user A, nothing of the course or of B is readable ----
    b_home = Path(f"/home/{b}")
    forbidden = {
        "list the course directory": ["ls", course],
        "read the gradebook": ["cat", course / "gradebook.db"],
        "read the course's nbgrader_config.py": ["cat", course / "nbgrader_config.py"],
        "read a source notebook (the solutions)": ["cat", course / "source" / ASSIGNMENT / NOTEBOOK],
        "list the collected submissions": ["ls", course / "submitted"],
        "read B's collected submission": ["cat", course / "submitted" / b / ASSIGNMENT / NOTEBOOK],
        "read B's autograded notebook": ["cat", course / "autograded" / b / ASSIGNMENT / NOTEBOOK],
        "read B's feedback": ["cat", course / "feedback" / b / ASSIGNMENT / f"{NB_NAME}.html"],
        "list the exchange's inbound (to find B's submission)": ["ls", exchange / "inbound"],
        "list the released feedback": ["ls", exchange / "feedback"],
        "list B's home": ["ls", b_home],
        "read B's own copy": ["cat", b_home / ASSIGNMENT / NOTEBOOK],
        "read the hub's passwords": ["cat", layout.state / "passwords.json"],
        # the environments every user's server runs (shared by classes' tests, built ahead) are root's, read-only
        "plant a program in the students' environment": ["touch", layout.student_env / "bin" / "planted"],
        "change the students' nbgrader settings": ["sh", "-c", 'echo "c.Exchange.root = \'/tmp\'" >> "$1"', "sh",
                                                   layout.student_env / "etc" / "jupyter" / "nbgrader_config.py"],
        "plant a module in the instructor's environment": ["touch", layout.instructor_env / "bin" / "planted"],
        "replace an environment in their folder": ["mv", layout.student_env, layout.envs_folder / "moved"],
    }
    for what, command in forbidden.items():
        done = as_user(a, *map(str, command))
        assert done.returncode != 0 and "Permission denied" in done.stderr, f"{a} could {what}: {done.stdout[:200]}"
    released_copy = as_user(a, "cat", str(exchange / "outbound" / ASSIGNMENT / NOTEBOOK))
    assert released_copy.returncode == 0 and '"nbgrader"' in released_copy.stdout  # the same user reads what is released
    # students' Python has no grader in it; folders the servers made are private (the spawner's umask 077)
    no_grader = as_user(a, str(layout.student_env / "bin" / "python"), "-I", "-c", "import autograder")  # -I: not cwd
    assert no_grader.returncode != 0 and "No module named 'autograder'" in no_grader.stderr
    assert (course / "release" / ASSIGNMENT).stat().st_mode & 0o077 == 0  # made by the instructor's Formgrader
    assert Path(f"/home/{a}").stat().st_mode & 0o077 == 0  # A's fetched copy keeps the exchange's 0755: the home guards it

    # ... and through A's own Jupyter server: links in A's home lead nowhere but to what is released
    links = {"peek-course": course, "peek-submitted-b": course / "submitted" / b, "peek-home-b": b_home,
             "peek-inbound": exchange / "inbound", "peek-outbound": exchange / "outbound" / ASSIGNMENT}
    for name, target in links.items():
        assert as_user(a, "ln", "-s", str(target), f"/home/{a}/{name}").returncode == 0
    api = f"{base}/user/{a}/api/contents"
    # Jupyter Server answers 403, or 500 "Unhandled error" when a folder above the link's target is
    # closed; either way it sends nothing of the target
    refused = (403, 404, 500)
    for name in links:
        response = page.context.request.get(f"{api}/{name}")
        if name == "peek-outbound":
            assert response.status == 200 and '"content"' in response.text() and NOTEBOOK in response.text()
        else:
            assert response.status in refused and '"content"' not in response.text(), \
                f"A's server listed {name}: {response.status} {response.text()[:200]}"
    for path in ("peek-course/gradebook.db", f"peek-submitted-b/{ASSIGNMENT}/{NOTEBOOK}",
                 f"peek-home-b/{ASSIGNMENT}/{NOTEBOOK}", f"peek-course/source/{ASSIGNMENT}/{NOTEBOOK}"):
        response = page.context.request.get(f"{api}/{path}")
        assert response.status in refused and '"content"' not in response.text(), \
            f"A's server returned {path}: {response.status}"
    phases.done("isolation checks")

    # ---- grades for the LMS: Canvas and Moodle CSVs with the late penalty applied ----
    canvas = export_csv(ctx, "CanvasExportPlugin", "canvas.csv")
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]
    full, late_score = format(FULL, "g"), format(round(FULL * 0.9, 2), "g")  # B: 10 % off for a started day
    assert canvas[1] == ["    Points Possible", "", "", "", "", full]
    assert {row[3]: row[5] for row in canvas[2:]} == {a: full, b: late_score}
    moodle = export_csv(ctx, "MoodleExportPlugin", "moodle.csv")
    assert moodle[0] == ["First name", "Last name", "Username", "ID number", "Email address", ASSIGNMENT]
    assert {row[2]: row[5] for row in moodle[1:]} == {a: full, b: late_score}
    assert (course / "canvas.csv").stat().st_mode & 0o077 == 0  # grades are the instructor's only
    phases.done("CSV exports")
