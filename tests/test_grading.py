"""End to end with nbgrader: the example class, the source notebook and `make grade` get the right grades."""

import csv
import shutil

import nbformat
import pytest

from autograder import example_class, grading
from autograder.notebook_cells import fill_release, read, solution_cells
from autograder.variants.assignment1 import CORRECT
from conftest import ASSIGNMENT, NOTEBOOK, RELEASE_NB, REPO, SOURCE_NB
from notebook_harness import grade_in_process

# Graded with the example class, in the same nbgrader run (one run for the whole bank keeps the suite fast).
EXTRA_STUDENTS = {
    "zz-source-notebook": None,  # the instructor's source notebook, submitted as is
    "zz-warnings-and-prints": CORRECT["warnings_and_prints"].cells,
    "zz-loops-float32": {**CORRECT["loops"].cells, **CORRECT["float32"].cells},
}


def _duplicate_cell(target):
    nb = fill_release(read(RELEASE_NB), solution_cells(read(SOURCE_NB)))
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "causal_mask")
    nb.cells.insert(index, nbformat.from_dict(nb.cells[index]))
    nbformat.write(nb, str(target / NOTEBOOK))


# Submissions that cannot be graded as they stand: each gets a one-line reason and no scores.
BROKEN_STUDENTS = {
    "zz-invalid-json": lambda t: (t / NOTEBOOK).write_text('{"cells": [ this is not json'),
    "zz-empty-file": lambda t: (t / NOTEBOOK).write_text(""),
    "zz-misnamed": lambda t: shutil.copy(SOURCE_NB, t / "scaled_dot_product_attention-Copy1.ipynb"),
    "zz-copied-cell": _duplicate_cell,
}
BROKEN_REASONS = {
    "zz-invalid-json": "is not a valid notebook",
    "zz-empty-file": "is an empty file",
    "zz-misnamed": "found scaled_dot_product_attention-Copy1.ipynb — rename it to scaled_dot_product_attention.ipynb",
    "zz-copied-cell": "copied cells with the same grade_id ['causal_mask']",
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    students = example_class.prepare_course(course)
    for student, answers in EXTRA_STUDENTS.items():
        target = course / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        if answers is None:
            shutil.copy(SOURCE_NB, target / NOTEBOOK)
        else:
            nb = fill_release(read(RELEASE_NB), {**solution_cells(read(SOURCE_NB)), **answers})
            if student == "zz-loops-float32":  # a learner's saved widget state must not reach the autograded copy
                nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {
                    "x": {"model_name": "ImageModel", "state": {"value": "A" * 200_000}}}}}
            nbformat.write(nb, str(target / NOTEBOOK))
    students += list(EXTRA_STUDENTS)
    for student, make in BROKEN_STUDENTS.items():
        target = course / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        make(target)
    students += list(BROKEN_STUDENTS)
    steps, results = grading.grade_class(course, ASSIGNMENT, students)
    return course, steps, {r.student: r for r in results}


def test_every_submission_was_graded_or_says_why_not(graded):
    _, steps, results = graded
    assert len(steps) == 7
    not_graded = {r.student: r.note for r in results.values() if r.steps is None}
    assert set(not_graded) == set(BROKEN_STUDENTS)
    for student, words in BROKEN_REASONS.items():
        assert not_graded[student].startswith("not graded: ") and words in not_graded[student], not_graded[student]
    table = grading.format_table(steps, list(results.values()))
    assert "is an empty file" in table


def test_mistakes_lose_points_exactly_on_the_steps_they_break(graded):
    _, steps, results = graded
    for student, variant in example_class.STUDENTS.items():
        scores = results[student].steps
        expected_losses = set(steps) if student == example_class.UNTOUCHED else variant.breaks
        for step, (score, maximum) in scores.items():
            if step in expected_losses:
                assert score < maximum, f"{student} should lose points in {step}"
            else:
                assert score == maximum, f"{student} must keep full marks in {step}, got {score}/{maximum}"


def test_untouched_release_earns_zero_and_correct_answers_earn_full_marks(graded):
    _, _, results = graded
    assert results[example_class.UNTOUCHED].total == 0
    for student in ["ada-correct", "cai-einsum-and-1e9", *EXTRA_STUDENTS]:
        assert results[student].total == 10, (student, results[student].steps)


def test_nbgrader_scores_match_the_in_process_model(graded):
    _, _, results = graded
    for student, variant in example_class.STUDENTS.items():
        if student == example_class.UNTOUCHED:
            continue
        expected = {grade_id: score for grade_id, (score, *_rest) in grade_in_process(SOURCE_NB, variant.cells).items()}
        got = {step: score for step, (score, _) in results[student].steps.items()}
        assert got == expected, student


def test_feedback_is_written_for_every_student_and_explains_lost_points(graded):
    course, _, results = graded
    for student in set(results) - set(BROKEN_STUDENTS):
        html = course / "feedback" / student / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")
        assert html.exists(), student
    text = (course / "feedback" / "jon-no-max-subtraction" / ASSIGNMENT / "scaled_dot_product_attention.html").read_text()
    assert "large logits stay finite" in text and "subtract each row" in text


def test_explorer_is_skipped_under_autograde_without_widget_output(graded):
    course, _, _ = graded
    nb = read(course / "autograded" / "ada-correct" / ASSIGNMENT / NOTEBOOK)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert any("not shown while grading" in o.get("text", "") for o in outputs)
    assert not any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    assert "widgets" not in nb.metadata


def test_saved_widget_state_of_a_submission_is_dropped(graded):
    course, _, results = graded
    assert results["zz-loops-float32"].total == 10
    autograded = course / "autograded" / "zz-loops-float32" / ASSIGNMENT / NOTEBOOK
    assert "widget-state" not in autograded.read_text() and autograded.stat().st_size < 400_000


def test_table_and_csv(graded, tmp_path):
    _, steps, results = graded
    table = grading.format_table(steps, list(results.values()))
    assert "ada-correct" in table and "10/10" in table and "0/10" in table and "8.5/10" in table
    assert table.splitlines()[0].split()[:4] == ["student", "softmax", "scores", "scaling"]
    grading.write_csv(tmp_path / "grades.csv", ASSIGNMENT, steps, list(results.values()))
    rows = {row["student"]: row for row in csv.DictReader(open(tmp_path / "grades.csv"))}
    assert rows["ada-correct"]["total"] == "10" and rows["ada-correct"]["max_score"] == "10"
    assert rows["jon-no-max-subtraction"]["softmax"] == "1.5"
    assert rows["zz-empty-file"]["total"] == "" and "empty file" in rows["zz-empty-file"]["note"]


def test_make_grade_grades_a_real_class_without_touching_release(tmp_path, capsys):
    course = grading.copy_course(REPO, tmp_path / "class", folders=("source", "release"))
    before = (course / "release" / ASSIGNMENT / NOTEBOOK).read_bytes()
    target = course / "submitted" / "alice" / ASSIGNMENT
    target.mkdir(parents=True)
    nbformat.write(fill_release(read(RELEASE_NB), solution_cells(read(SOURCE_NB))), str(target / NOTEBOOK))
    assert grading.main(["--course-dir", str(course)]) == 0
    out = capsys.readouterr().out
    assert "alice" in out and "10/10" in out
    assert (course / f"grades-{ASSIGNMENT}.csv").exists()
    assert (course / "feedback" / "alice" / ASSIGNMENT).is_dir()
    assert (course / "release" / ASSIGNMENT / NOTEBOOK).read_bytes() == before
    # Re-grading a submission that now kills its kernel must not report the earlier 10/10.
    answers = {**solution_cells(read(SOURCE_NB)), "causal_mask": "import os\nos._exit(1)"}
    nbformat.write(fill_release(read(RELEASE_NB), answers), str(target / NOTEBOOK))
    assert grading.main(["--course-dir", str(course)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("alice"))
    assert "not graded: nbgrader could not run this submission" in row and "10/10" not in row


def test_autograde_failures_are_read_from_the_log():
    log = ("[AutogradeApp | INFO] Autograding /c/autograded/bob/A1/nb.ipynb\n"
           "[AutogradeApp | ERROR] There was an error processing assignment: /c/submitted/bob/A1\n"
           "Traceback (most recent call last):\n  ...\nnbclient.exceptions.DeadKernelError: Kernel died\n"
           "[AutogradeApp | INFO] Autograding /c/autograded/eve/A1/nb.ipynb\n"
           "[AutogradeApp | ERROR] There was an error processing assignment 'A1' for student 'bob'\n")
    reasons = grading.autograde_failures(log, "A1")
    assert set(reasons) == {"bob"} and "DeadKernelError: Kernel died" in reasons["bob"]


def test_make_grade_with_nothing_submitted_says_what_to_do(tmp_path, capsys):
    shutil.copytree(REPO / "source", tmp_path / "source")
    assert grading.main(["--course-dir", str(tmp_path)]) == 0
    assert "submitted/<student>/<assignment>/" in capsys.readouterr().out


def test_demo_prints_the_table_and_says_where_the_results_are(monkeypatch, tmp_path, capsys, graded):
    _, steps, results = graded
    example = [r for r in results.values() if r.student in example_class.STUDENTS]
    monkeypatch.setattr(example_class, "run_demo", lambda output: (steps, example))
    assert example_class.main(["--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for student in example_class.STUDENTS:
        assert student in out
    assert "grades.csv" in out and "feedback" in out
