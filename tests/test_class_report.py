"""The class report (issue 14 §3): numbers from nbgrader's gradebook API, an inert page, CSV, manual scores.

The class here is written straight into a gradebook with nbgrader's public ``Gradebook`` API (and autograded
notebooks carrying what the grader stores beside the scores), so these tests run in-process in a second; the
end-to-end run of ``make demo`` that writes the report of really graded classes is in tests/test_grading.py.
One browser test opens the page with JavaScript disabled.
"""

from __future__ import annotations

import csv
import functools
import re
import shutil
import warnings
from pathlib import Path

import nbformat
import pytest
from markupsafe import escape
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning

from autograder.assignments.a01_attention.spec import ASSIGNMENT as SPEC
from autograder.course import COURSE_ID, REPO
from autograder.examples import hostile_payloads
from autograder.nbgrader import class_report, class_report_page, fingerprints, gradebook_copy, grading
from autograder.nbgrader.grader_stamp import CELL_TAG, ShowGraderVersion, StampGraderVersion

ASSIGNMENT = SPEC.name
NOTEBOOK = SPEC.notebook.removesuffix(".ipynb")
STEPS = [step.grade_id for step in SPEC.steps]
POINTS = 2.0
#: bob loses 2 - 3/7 on softmax and 2 on the mask: every other step (questions included) full
BOB_TOTAL = grading.score_text(len(STEPS) * POINTS - (POINTS - 3 / 7) - POINTS)
#: hostile payloads from the bank, as a student id, a note (an error message) and a failure reason
SCRIPT_ID = "<script>" + hostile_payloads.script("report-id") + "</script>"
IMG_NOTE = f"<img src=x onerror=\"{hostile_payloads.script('report-note')}\">"
IFRAME_REASON = hostile_payloads.payloads()["iframe"]["markdown"]
FORMULA_ID = "=HYPERLINK(\"http://127.0.0.1:9\")"


def _autograded(course: Path, student: str, named: dict[str, list[str]], reason: str = "") -> None:
    """The autograded notebook the grader leaves: named mistakes per step, the grader's label, why a kernel stopped."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["attention_lab"] = {
        "grading": {g: {"named": named.get(g, []), "unanswered": False} for g in STEPS},
        "grader": "attention-lab 0.1.0, nbgrader 0.9.6, grader 0123456789ab",
        **({"execution": {"status": "error", "reason": reason}} if reason else {})}
    folder = course / "autograded" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(folder / SPEC.notebook))


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """A graded class of assignment 1, written with the gradebook API.

    amy: full marks. bob: 0.428571 of 2 on softmax, named softmax_wrong_axis, and mask_flipped on the mask.
    cyd: the mask scored 0 by the autograder (mask_flipped), 1.5 given by hand in Formgrader.
    SCRIPT_ID (a hostile id): full marks except entropy, a note with an <img onerror>.
    FORMULA_ID: not graded, the reason an iframe payload. dan: not graded (sandbox limit).
    Built once (making a gradebook takes seconds); each test gets a copy (:func:`course`).
    """
    tmp_path = tmp_path_factory.mktemp("graded-class")
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)  # a course directory: where the gradebook is comes from it
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    graded = {"amy": {}, "bob": {"test_softmax": 3 / 7, "test_causal_mask": 0.0}, "cyd": {"test_causal_mask": 0.0},
              SCRIPT_ID: {"test_attention_entropy": 1.0}}
    gradebook_copy.new_gradebook(tmp_path / "gradebook.db")  # the run's empty gradebook: no `alembic heads` (2 CPU-s)
    with Gradebook(db, course_id=COURSE_ID) as gradebook, warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's add_submission, as in nbgrader's own tests
        gradebook.add_assignment(ASSIGNMENT)
        gradebook.add_notebook(NOTEBOOK, ASSIGNMENT)
        for grade_id in STEPS:
            gradebook.add_grade_cell(grade_id, NOTEBOOK, ASSIGNMENT, max_score=POINTS, cell_type="code")
        for student, lost in graded.items():
            gradebook.add_student(student)
            gradebook.add_submission(ASSIGNMENT, student)
            for grade_id in STEPS:
                gradebook.find_grade(grade_id, NOTEBOOK, ASSIGNMENT, student).auto_score = lost.get(grade_id, POINTS)
        gradebook.find_grade("test_causal_mask", NOTEBOOK, ASSIGNMENT, "cyd").manual_score = 1.5
        gradebook.db.commit()
    _autograded(tmp_path, "amy", {})
    _autograded(tmp_path, "bob", {"test_softmax": ["softmax_wrong_axis"], "test_causal_mask": ["mask_flipped"]})
    _autograded(tmp_path, "cyd", {"test_causal_mask": ["mask_flipped"]})
    _autograded(tmp_path, SCRIPT_ID, {}, reason=IMG_NOTE)
    record = fingerprints.GradingRecord(tmp_path)
    record.forget(ASSIGNMENT, FORMULA_ID, IFRAME_REASON)
    record.forget(ASSIGNMENT, "dan", "the sandbox stopped it: memory limit (2 GiB) reached")
    return tmp_path


@pytest.fixture
def course(graded, tmp_path) -> Path:
    return Path(shutil.copytree(graded, tmp_path / "course"))


def test_numbers_come_from_the_gradebook(course):
    report = class_report.gather(course, ASSIGNMENT)
    assert [s.grade_id for s in report.steps] == STEPS and report.max_total == POINTS * len(STEPS)
    softmax = report.steps[0]
    assert sorted(softmax.scores) == [3 / 7, 2, 2, 2] and softmax.bands == {"0": 0, "below half": 1,
                                                                             "half or more": 0, "full": 3}
    mask = next(s for s in report.steps if s.grade_id == "test_causal_mask")
    assert sorted(mask.scores) == [0, 1.5, 2, 2]  # cyd's manual 1.5 counts as given
    assert [(m.key, m.students) for m in report.frequent] == [("mask_flipped", ["bob", "cyd"]),
                                                              ("softmax_wrong_axis", ["bob"])]
    assert report.frequent[0].hint == SPEC.mistakes["mask_flipped"].hint and report.frequent[0].steps == ["mask"]
    assert [m.key for m in report.legend] == list(SPEC.mistakes)  # every key the assignment knows
    assert {(f.student, f.note) for f in report.failures} == {
        (FORMULA_ID, f"not graded: {IFRAME_REASON}"), ("dan", "not graded: the sandbox stopped it: memory limit (2 GiB) reached")}
    [override] = report.overrides
    assert (override.student, override.step, override.autograder, override.manual) == ("cyd", "mask", 0.0, 1.5)
    assert report.graded_by == {"attention-lab 0.1.0, nbgrader 0.9.6, grader 0123456789ab": 4}
    assert report.grader == fingerprints.grader_label(course)


def test_a_failure_is_forgotten_once_the_student_is_graded(course):
    record = fingerprints.GradingRecord(course)
    record.graded(ASSIGNMENT, "dan", {"submission": "x"}, [])
    assert "dan" not in fingerprints.GradingRecord(course).failures(ASSIGNMENT)


def test_page_is_inert_and_escapes_every_hostile_text(course):
    page = class_report_page.render(class_report.gather(course, ASSIGNMENT))
    assert hostile_payloads.active_content(page) == []
    assert "<script" not in page.lower()
    assert "<iframe" not in page and "<form" not in page and "<img src=x" not in page
    for text in (SCRIPT_ID, IMG_NOTE, IFRAME_REASON.removeprefix("not graded: ")):
        assert escape(text) in page  # shown, as text
    images = re.findall(r'<img [^>]*src="([^"]*)"', page)
    assert len(images) == 2 and all(src.startswith("data:image/png;base64,") for src in images)


def test_page_says_what_to_re_teach_with_hints_legend_overrides_and_the_graders_version(course):
    page = class_report_page.render(class_report.gather(course, ASSIGNMENT))
    legend = page[page.index('id="mistake-legend"'):]
    for key, mistake in SPEC.mistakes.items():
        assert f"<code>{key}</code>" in legend and escape(mistake.description) in legend
        assert escape(mistake.hint) in legend
    frequent = page[page.index('id="frequent-mistakes"'):page.index('id="steps"')]
    assert frequent.index("mask_flipped") < frequent.index("softmax_wrong_axis")
    assert escape(SPEC.mistakes["softmax_wrong_axis"].hint) in frequent
    overrides = page[page.index('id="overrides"'):page.index('id="students"')]
    assert "cyd" in overrides and "1.5/2 (manual)" in overrides and "<td class=\"num\">0/2</td>" in overrides
    assert f'<code id="grader-version">{escape(fingerprints.grader_label(course))}</code>' in page
    assert "0.43/2" in page and "0.428" not in page  # two decimals, never 0.4286/2


def test_csv_holds_the_same_numbers(course, tmp_path):
    report = class_report.gather(course, ASSIGNMENT)
    steps_csv, mistakes_csv, students_csv = class_report.write_csv(report, tmp_path / "out")
    steps = list(csv.DictReader(open(steps_csv)))
    assert [r["grade_id"] for r in steps] == STEPS
    assert steps[0]["mean"] == grading.score_text(report.steps[0].mean) == "1.61"
    assert {k: int(v) for k, v in steps[0].items() if k.startswith("students: ")} == {
        f"students: {b}": n for b, n in report.steps[0].bands.items()}
    mistakes = {r["mistake"]: r for r in csv.DictReader(open(mistakes_csv))}
    assert set(mistakes) == set(SPEC.mistakes)
    assert (mistakes["mask_flipped"]["students"], mistakes["mask_flipped"]["who"]) == ("2", "bob cyd")
    assert mistakes["mask_flipped"]["hint"] == SPEC.mistakes["mask_flipped"].hint
    students = {r["student"]: r for r in csv.DictReader(open(students_csv))}
    assert students["cyd"]["mask"] == "1.5" and students["cyd"]["mask (autograder)"] == "0"
    assert students["bob"]["softmax"] == "0.43" and students["bob"]["total"] == BOB_TOTAL
    assert students["'" + FORMULA_ID]["graded"] == "no"  # a formula-looking id is text in a spreadsheet
    assert "0.428" not in students_csv.read_text()


def test_make_grade_table_marks_a_manual_score_and_shows_two_decimals(course):
    steps, results = grading.read_results(course, ASSIGNMENT, ["bob", "cyd"])
    table = grading.format_table(steps, results, ASSIGNMENT)
    cyd = next(line for line in table.splitlines() if line.startswith("cyd"))
    assert "1.5/2 (manual)" in cyd and "manual score in Formgrader: mask (autograder 0)" in cyd
    bob = next(line for line in table.splitlines() if line.startswith("bob"))
    assert "0.43/2" in bob and f"{BOB_TOTAL}/{len(STEPS) * POINTS:g}" in bob and "(manual)" not in bob and "0.428" not in table


def per_cell_results(course: Path, students: list[str]) -> list[tuple]:
    """What nbgrader's Gradebook.find_submission and find_grade give, one student and one cell at a time."""
    from nbgrader.api import MissingEntry

    rows = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        for student in students:
            try:
                gradebook.find_submission(ASSIGNMENT, student)
                grades = [gradebook.find_grade(step, NOTEBOOK, ASSIGNMENT, student) for step in STEPS]
                rows.append((student, None if any(g.auto_score is None for g in grades) else
                             {step: (g.score, POINTS) for step, g in zip(STEPS, grades)},
                             {step: g.auto_score for step, g in zip(STEPS, grades) if g.manual_score is not None}))
            except MissingEntry:
                rows.append((student, None, {}))
    return rows


def test_the_grades_read_for_the_table_are_nbgraders_for_every_student_in_queries_as_many_for_any_class(course):
    """A student without a submission and one with a cell nbgrader could not run are not graded; a manual
    score is the score and the autograder's is kept beside it; the class is read in the same number of queries
    whatever its size (one query per cell of each student was 50 ms a student in every re-run)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as gradebook, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        gradebook.add_student("eve")  # in the class, no submission
        gradebook.add_student("fay")
        gradebook.add_submission(ASSIGNMENT, "fay")
        for step in STEPS[1:]:  # the first cell was never run: no auto_score
            gradebook.find_grade(step, NOTEBOOK, ASSIGNMENT, "fay").auto_score = POINTS
        gradebook.db.commit()
    queries = []

    def count(*args):
        queries.append(args[2])

    everyone = ["amy", "bob", "cyd", SCRIPT_ID, "eve", "fay"]
    event.listen(Engine, "before_cursor_execute", count)
    try:
        counts = [(len(queries), grading.read_results(course, ASSIGNMENT, students), len(queries))[::2]
                  for students in (everyone[:1], everyone)]
        _, results = grading.read_results(course, ASSIGNMENT, everyone, problems={"cyd": "the sandbox stopped it"})
    finally:
        event.remove(Engine, "before_cursor_execute", count)
    assert [after - before for before, after in counts] == [counts[0][1] - counts[0][0]] * 2
    expected = per_cell_results(course, everyone)
    assert [(r.student, r.steps, r.manual) for r in results] == [
        (student, None, {}) if student == "cyd" else (student, steps, manual) for student, steps, manual in expected]
    notes = {r.student: r.note for r in results}
    assert notes["eve"] == (f"not graded: the gradebook has no score for it (No such submission: {ASSIGNMENT} "
                            "for eve)")
    assert notes["fay"] == f"not graded: the gradebook has no score for it ({STEPS[0]} was not autograded)"
    assert notes["cyd"] == "not graded: the sandbox stopped it"
    assert expected[2][2] == {"test_causal_mask": 0.0} and expected[2][1]["test_causal_mask"] == (1.5, POINTS)
    # kept by a re-run: every code cell autograded, and the feedback written (eve has none; fay's first cell)
    for student in everyone:
        (course / "feedback" / student / ASSIGNMENT).mkdir(parents=True)
    (course / "feedback" / "amy" / ASSIGNMENT).rmdir()
    assert grading._autograded_students(course, ASSIGNMENT) == {"bob", "cyd", SCRIPT_ID}


def test_score_text_rounds_to_two_decimals():
    assert [grading.score_text(x) for x in (3 / 7, 1.5, 3.0, 0.0, 2 / 3, 12.125, -1e-9)] == [
        "0.43", "1.5", "3", "0", "0.67", "12.12", "0"]


def test_command_line_writes_page_and_csvs_and_says_where(course, capsys):
    from autograder.__main__ import main

    assert main(["class-report", "--course-dir", str(course)]) == 0
    page = course / class_report.OUTPUT_FOLDER / ASSIGNMENT / "report.html"
    assert f"{ASSIGNMENT}: class report {page}" in capsys.readouterr().out
    assert {p.name for p in page.parent.iterdir()} == {"report.html", "steps.csv", "mistakes.csv", "students.csv"}


def test_command_line_without_a_graded_class_says_so(tmp_path, capsys):
    assert class_report.main(["--course-dir", str(tmp_path), ASSIGNMENT]) == 1
    assert "grade" in capsys.readouterr().err


def test_feedback_names_the_grader_that_graded_it(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    config = grading.course_config(Path(__file__).resolve().parent.parent)
    config.CourseDirectory.root = str(tmp_path)
    (tmp_path / "nbgrader_config.py").write_text("")
    nb, _ = StampGraderVersion(config=config).preprocess(nb, {})
    label = nb.metadata["attention_lab"]["grader"]
    assert label == fingerprints.grader_label(tmp_path) and re.search(r"grader [0-9a-f]{12}$", label)
    for _ in range(2):  # added once
        nb, _ = ShowGraderVersion(config=config).preprocess(nb, {})
    assert [CELL_TAG in c.metadata.get("tags", []) for c in nb.cells] == [True, False]
    assert label in nb.cells[0].source


def test_the_course_configuration_stamps_grading_and_feedback():
    config = grading.course_config(Path(__file__).resolve().parent.parent)
    assert config.Autograde.autograde_preprocessors[-1] is StampGraderVersion
    assert ShowGraderVersion in config.GenerateFeedback.preprocessors


@pytest.mark.slow
def test_browser_shows_plots_and_legend_without_javascript(course, browser):
    page_path = class_report.write(course, ASSIGNMENT)
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1300, "height": 900})
    try:
        page = context.new_page()
        requests = []
        page.on("request", lambda request: requests.append(request.url))
        page.goto(page_path.as_uri())
        assert not page.title().startswith(hostile_payloads.MARKER)
        for selector in ("#mistakes-chart", "#steps-chart"):
            image = page.locator(selector)
            image.scroll_into_view_if_needed()
            assert image.evaluate("el => el.complete") and image.evaluate("el => el.naturalWidth") > 0
        legend = page.locator("#mistake-legend")
        assert legend.is_visible() and legend.locator("tr").count() == 1 + len(SPEC.mistakes)
        assert SPEC.mistakes["mask_flipped"].hint in legend.inner_text()
        assert page.locator("#failures").inner_text().count(SCRIPT_ID) == 0  # the id is graded, not failed
        assert SCRIPT_ID in page.locator("#student-scores").inner_text()  # shown as text
        assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    finally:
        context.close()


def test_the_grader_label_names_the_distribution_that_provides_the_autograder_package(monkeypatch):
    """Looked up by this project's name (a re-run's fixed cost), it is the distribution Python's metadata says
    provides ``autograder``; installed under another name, that one is found."""
    from importlib import metadata

    provides = metadata.packages_distributions()["autograder"][0]
    monkeypatch.setattr(fingerprints, "_distributions", functools.lru_cache(fingerprints._distributions.__wrapped__))
    names = [name for name, _ in fingerprints._distributions()]
    assert names == [fingerprints.PROJECT_DISTRIBUTION, "nbgrader"] and provides == fingerprints.PROJECT_DISTRIBUTION
    assert dict(fingerprints._distributions())[provides] == metadata.version(provides)
    monkeypatch.setattr(fingerprints, "PROJECT_DISTRIBUTION", "attention-lab-renamed-fork")  # not installed
    fingerprints._distributions.cache_clear()
    assert [name for name, _ in fingerprints._distributions()] == [provides, "nbgrader"]
