"""Grading on every core (issue 14 §2) and from any course directory (§4b), end to end with nbgrader.

Assignment 1's end-to-end sample is graded twice, in two course directories, on one worker and on two: every
score, comment, gradebook row and feedback file must be the same. A re-run grades only what changed
(``gradebook-hashes.json``) unless ``--force``; a course copied outside the checkout is graded from its own
directory; a course whose sandboxed kernel cannot import ``attention_lab`` stops before the first student.
"""

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import assignments
from autograder.examples import example_class
from autograder.nbgrader import grading
from autograder.nbgrader.gradebook_copy import sqlite_url, submission_rows
from autograder.nbgrader.notebook_cells import fill_release, read, solution_cells
from conftest import ASSIGNMENT, NOTEBOOK, RELEASE_NB, REPO, SOURCE_NB


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def outputs(course: Path) -> dict[str, list]:
    """Every autograded notebook's code-cell outputs (what the grade and the feedback were made from)."""
    found = {}
    for path in sorted((course / "autograded").glob("*/*/*.ipynb")):
        cells = read(path).cells
        found[str(path.relative_to(course))] = [c.outputs for c in cells if c.cell_type == "code"]
    return found


def log_sections(course: Path) -> list[list[str]]:
    """The students of each grading run, from grading.log (one ``==== assignment ====`` section per run)."""
    runs = []
    for line in (course / "grading.log").read_text().splitlines():
        if line.startswith("==== "):
            runs.append([])
        elif line.startswith("---- ") and line.endswith(" ----"):
            runs[-1].append(line[5:-5])
    return runs


@pytest.fixture(scope="module")
def graded_twice(tmp_path_factory):
    """Assignment 1's end-to-end sample graded on 1 worker and, in a second course directory, on 2.

    The sample (``example_class.end_to_end_sample``) holds each kind of submission the runs must agree on: the
    solution, the untouched release, a correct answer written differently, a named mistake, and an unnamed one
    whose later steps need the stand-in passes.
    """
    runs = {}
    for workers in (1, 2):
        course = tmp_path_factory.mktemp(f"workers{workers}")
        students = example_class.prepare_course(course, [ASSIGNMENT], sample=True)[ASSIGNMENT]
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            steps, rows = grading.grade_class(course, ASSIGNMENT, students, workers=workers, progress=True)
        runs[workers] = course, steps, rows, stderr.getvalue()
    return runs


def test_two_workers_give_every_score_comment_row_and_feedback_file_of_one(graded_twice):
    one, two = graded_twice[1], graded_twice[2]
    assert one[1] == two[1]
    assert len(one[2]) == len(example_class.end_to_end_sample(assignments.get(ASSIGNMENT))) == 5
    for a, b in zip(one[2], two[2]):
        assert (a.student, a.steps, a.note, a.named) == (b.student, b.steps, b.note, b.named)
    assert all(r.steps is not None for r in two[2])
    assert any(r.total < sum(m for _, m in r.steps.values()) for r in two[2])  # the class has mistakes in it
    rows_one = submission_rows(sqlite_url(one[0] / "gradebook.db"), ASSIGNMENT)
    assert rows_one == submission_rows(sqlite_url(two[0] / "gradebook.db"), ASSIGNMENT)
    assert set(rows_one) == {r.student for r in one[2]}
    comments = [c for s in rows_one.values() for nb in s["notebooks"].values() for c in nb["comments"].values()]
    assert ("No response.", None) in comments  # the untouched release: nbgrader's own comment was copied too
    feedback = files(one[0] / "feedback")
    assert feedback and feedback == files(two[0] / "feedback")
    assert outputs(one[0]) == outputs(two[0])


def test_the_progress_bar_counts_every_student_with_an_eta_on_stderr(graded_twice):
    _, _, rows, stderr = graded_twice[2]
    assert f"{ASSIGNMENT}: 100%" in stderr and f"{len(rows)}/{len(rows)}" in stderr
    assert "<00:00" in stderr  # tqdm's [elapsed<remaining]


def test_a_rerun_grades_only_the_changed_submission(graded_twice):
    course, _, before, _ = graded_twice[2]
    changed = example_class.end_to_end_sample(assignments.get(ASSIGNMENT))[-1]  # a wrong answer, handed in again
    path = course / "submitted" / changed / ASSIGNMENT / NOTEBOOK
    nb = read(path)
    nb.cells.append(nbformat.v4.new_markdown_cell("handed in again"))
    nbformat.write(nb, str(path))
    _, after = grading.grade_class(course, ASSIGNMENT, [r.student for r in before], workers=2)
    assert log_sections(course)[-1] == [changed]
    assert [r.student for r in after if not r.unchanged] == [changed]
    for a, b in zip(before, after):
        assert (a.student, a.steps, a.note, a.named) == (b.student, b.steps, b.note, b.named)


@pytest.fixture(scope="module")
def copied_course(tmp_path_factory):
    """The course copied outside the checkout (config, source, release) with two honest submissions and an empty one."""
    course = grading.copy_course(REPO, tmp_path_factory.mktemp("elsewhere") / "course", folders=("source", "release"))
    assert REPO not in course.parents
    honest = fill_release(read(RELEASE_NB), solution_cells(read(SOURCE_NB)))
    for student in ("amy", "bo", "eve-empty"):
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        if student == "eve-empty":
            (folder / NOTEBOOK).write_text("")
        else:
            nbformat.write(honest, str(folder / NOTEBOOK))
    return course


def grade_here(course: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m autograder grade`` run from inside ``course`` (no --course-dir), as an instructor would."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, *args], cwd=course,
                          env=env, capture_output=True, text=True, timeout=1800)


def test_a_course_outside_the_checkout_is_graded_from_its_own_directory_and_failures_are_listed(copied_course):
    done = grade_here(copied_course, "--workers", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith(("amy ", "bo ", "eve-"))}
    assert "10/10" in rows["amy"] and "10/10" in rows["bo"]
    listed = done.stdout.split("not graded (1):\n", 1)[1].splitlines()[0]
    assert listed.startswith("  eve-empty: ") and "empty file" in listed
    assert (copied_course / "feedback" / "amy" / ASSIGNMENT).is_dir()


def test_an_unchanged_class_is_not_graded_again_unless_forced(copied_course):
    if not (copied_course / "gradebook.db").exists():
        pytest.skip("needs the graded copy of the test before")
    again = grade_here(copied_course)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 submission(s) unchanged since they were graded" in again.stdout
    assert log_sections(copied_course)[-1] == ["eve-empty"]  # a submission that was not graded is tried again
    forced = grade_here(copied_course, "--force", "--workers", "2")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "unchanged" not in forced.stdout
    assert sorted(log_sections(copied_course)[-1]) == ["amy", "bo", "eve-empty"]
    assert [line for line in forced.stdout.splitlines() if line.startswith("amy ")][0].count("10/10") == 1


def test_a_kernel_that_cannot_import_attention_lab_stops_the_run_before_the_first_student(tmp_path):
    course = grading.copy_course(REPO, tmp_path / "broken", folders=("source", "release"))
    with open(course / "nbgrader_config.py", "a") as config:  # the kernel gets no copy of the student package
        config.write("\nc.SandboxedKernelManager.student_packages = []\n")
    folder = course / "submitted" / "amy" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(fill_release(read(RELEASE_NB), solution_cells(read(SOURCE_NB))), str(folder / NOTEBOOK))
    done = grade_here(course)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("grading stopped before the first student: ") and \
        "No module named 'attention_lab'" in lines[0]
    assert "amy" not in done.stdout
    assert not (course / "gradebook.db").exists() and not (course / "autograded").exists()


def test_the_throughput_benchmark_smoke_run_gives_equal_scores_on_one_and_two_workers():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import grading_throughput

    row = grading_throughput.measure(2)  # two submissions: the one-against-two comparison is graded_twice's
    assert row.same_scores and len(row.scores[1]) == 2
    assert all(steps is not None for steps in row.scores[2].values())
