"""A job's gradebook when the class gradebook is a server, and a job's data when it runs on another machine (§5).

In process, with nbgrader's Gradebook API on SQLite files: :func:`gradebook_copy.seed` must give a job what the
class gradebook holds for its assignment and its student (cells and hidden tests in the gradebook's order, the
due date, the extension, manual scores), and :func:`gradebook_copy.write_submission` must write back only
autograde's fields. The shipped job's files and a worker's fingerprint check are tested here too; the end-to-end
run on a Dask cluster with PostgreSQL is in tests/test_parallel_grading.py.
"""

import datetime
import gc
import shutil
import warnings
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning

from autograder.course import COURSE_ID
from autograder.nbgrader import dask_executor, fingerprints, gradebook_copy
from autograder.nbgrader.student_job import JobResult, StudentBudget, StudentJob
from conftest import ASSIGNMENT, NOTEBOOK, REPO

NB = NOTEBOOK.removesuffix(".ipynb")


def make_class(path: Path) -> str:
    """A class gradebook with the assignment (cells out of name order) and two students, one graded by hand."""
    url = gradebook_copy.sqlite_url(gradebook_copy.new_gradebook(path))  # the run's empty gradebook: no alembic
    with Gradebook(url, course_id=COURSE_ID) as gradebook:
        gradebook.add_assignment(ASSIGNMENT, duedate=datetime.datetime(2026, 3, 1, 12, 0))
        gradebook.add_notebook(NB, ASSIGNMENT, kernelspec='{"name": "python3"}')
        for name, points in (("test_softmax", 2.0), ("test_scores", 1.0)):
            gradebook.add_grade_cell(name, NB, ASSIGNMENT, max_score=points, cell_type="code")
        gradebook.add_solution_cell("softmax", NB, ASSIGNMENT)
        gradebook.add_task_cell("explain", NB, ASSIGNMENT, max_score=1.0, cell_type="markdown")
        for name in ("zeta_intro", "softmax", "test_softmax", "alpha_outro", "test_scores", "explain"):
            gradebook.add_source_cell(name, NB, ASSIGNMENT, cell_type="markdown" if "_" in name[1:5] else "code",
                                      locked=name.startswith("test"), source=f"# {name}\nassert True",
                                      checksum=f"sum-{name}")
        gradebook.add_student("amy", first_name="Amy", last_name="Ng", email="amy@example.org", lms_user_id="7")
        gradebook.add_student("bo")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)
            gradebook.add_submission(ASSIGNMENT, "amy", timestamp=datetime.datetime(2026, 3, 2, 9, 30),
                                     extension=datetime.timedelta(days=2))
            gradebook.add_submission(ASSIGNMENT, "bo", timestamp=datetime.datetime(2026, 3, 1, 8, 0))
        grade = gradebook.find_grade("test_softmax", NB, ASSIGNMENT, "amy")
        grade.auto_score, grade.manual_score, grade.extra_credit, grade.needs_manual_grade = 1.0, 1.5, 0.5, False
        comment = gradebook.find_comment("softmax", NB, ASSIGNMENT, "amy")
        comment.auto_comment, comment.manual_comment = "the rows do not sum to 1", "see the lecture notes"
        gradebook.find_submission_notebook(NB, ASSIGNMENT, "amy").flagged = True
        gradebook.db.commit()
    return url


def dump(url: str, student: str) -> dict:
    """Everything of the assignment and of ``student`` that grading reads, through nbgrader's public API."""
    with Gradebook(url, course_id=COURSE_ID) as gradebook:
        assignment = gradebook.find_assignment(ASSIGNMENT)
        notebook = gradebook.find_notebook(NB, ASSIGNMENT)
        drop = {"id", "notebook_id", "assignment_id", "notebook", "assignment"}

        def plain(rows):
            return [{k: v for k, v in row.to_dict().items() if k not in drop} for row in rows]

        submission = gradebook.find_submission(ASSIGNMENT, student)
        return {"duedate": assignment.duedate, "kernelspec": notebook.kernelspec,
                "grade_cells": plain(notebook.grade_cells), "task_cells": plain(notebook.task_cells),
                "solution_cells": [c.name for c in notebook.solution_cells],
                "source_cells": plain(notebook.source_cells),
                "student": {k: v for k, v in submission.student.to_dict().items() if k not in {"score", "max_score"}},
                "extension": submission.extension, "timestamp": submission.timestamp,
                "rows": gradebook_copy.submission_rows(url, ASSIGNMENT)[student]}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The class gradebook and its assignment's seeded gradebook, made once (a new gradebook runs alembic: seconds)."""
    folder = tmp_path_factory.mktemp("gradebooks")
    url = make_class(folder / "class.db")
    return folder / "class.db", gradebook_copy.seed_assignment(folder / "assignment.db",
                                                               gradebook_copy.assignment_data(url, ASSIGNMENT))


@pytest.fixture
def class_url(made, tmp_path):
    """A fresh copy of the class gradebook, for one test."""
    shutil.copyfile(made[0], tmp_path / "class.db")
    return gradebook_copy.sqlite_url(tmp_path / "class.db")


def test_a_seeded_gradebook_holds_what_the_class_gradebook_holds_for_the_assignment_and_the_student(
        class_url, made, tmp_path):
    url = class_url
    seeded = gradebook_copy.seed(tmp_path / "job.db", gradebook_copy.assignment_data(url, ASSIGNMENT), "amy",
                                 gradebook_copy.student_data(url, ASSIGNMENT, "amy"), template=made[1])
    job = gradebook_copy.sqlite_url(seeded)
    assert dump(job, "amy") == dump(url, "amy")
    names = [c["name"] for c in dump(job, "amy")["source_cells"]]
    assert names == ["zeta_intro", "softmax", "test_softmax", "alpha_outro", "test_scores", "explain"]  # not sorted
    assert dump(job, "amy")["extension"] == datetime.timedelta(days=2)
    with Gradebook(job, course_id=COURSE_ID) as gradebook:
        assert [s.id for s in gradebook.students] == ["amy"]  # no other student's rows


def test_a_new_student_gets_the_assignment_only_and_jobgradebooks_seeds_for_a_server_url(
        class_url, made, tmp_path, monkeypatch):
    url = class_url
    assert gradebook_copy.student_data(url, ASSIGNMENT, "cy") is None
    seeded = gradebook_copy.sqlite_url(gradebook_copy.seed(
        tmp_path / "new.db", gradebook_copy.assignment_data(url, ASSIGNMENT), "cy", None, template=made[1]))
    with Gradebook(seeded, course_id=COURSE_ID) as gradebook:
        assert gradebook.students == [] and gradebook.find_assignment(ASSIGNMENT).num_submissions == 0
    # a URL that is not sqlite:/// is a server: never snapshotted, each job seeded from its rows
    monkeypatch.setattr(gradebook_copy, "sqlite_file", lambda db_url: None)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    jobs = gradebook_copy.JobGradebooks(url, ASSIGNMENT, scratch)
    assert jobs.snapshot is None and [p.name for p in scratch.iterdir()] == ["assignment.db"]  # no copy of it
    made = jobs.make("bo", scratch / "bo.db")
    monkeypatch.undo()
    assert dump(gradebook_copy.sqlite_url(made), "bo") == dump(url, "bo")


def test_writing_a_jobs_rows_back_sets_autogrades_fields_and_keeps_the_instructors(class_url, made, tmp_path):
    url = class_url
    job = gradebook_copy.sqlite_url(gradebook_copy.seed(
        tmp_path / "job.db", gradebook_copy.assignment_data(url, ASSIGNMENT), "amy",
        gradebook_copy.student_data(url, ASSIGNMENT, "amy"), template=made[1]))
    with Gradebook(job, course_id=COURSE_ID) as gradebook:  # what autograding amy again wrote
        grade = gradebook.find_grade("test_softmax", NB, ASSIGNMENT, "amy")
        grade.auto_score, grade.manual_score = 2.0, None
        gradebook.find_comment("softmax", NB, ASSIGNMENT, "amy").auto_comment = None
        gradebook.find_submission_notebook(NB, ASSIGNMENT, "amy").late_submission_penalty = 0.5
        gradebook.db.commit()
    data = gradebook_copy.submission_data(job, ASSIGNMENT, "amy")
    gradebook_copy.write_submission(url, ASSIGNMENT, "amy", data)
    rows = gradebook_copy.submission_rows(url, ASSIGNMENT)["amy"]["notebooks"][NB]
    assert rows["grades"]["test_softmax"] == (2.0, 1.5, 0.5, False)  # manual score and extra credit kept
    assert rows["comments"]["softmax"] == (None, "see the lecture notes")
    assert rows["late_submission_penalty"] == 0.5 and rows["flagged"] is True


def live_dialects() -> int:
    """SQLAlchemy dialects still alive after a full collection: one per engine something still holds."""
    from sqlalchemy.engine.default import DefaultDialect

    gc.collect()
    return sum(isinstance(thing, DefaultDialect) for thing in gc.get_objects())


def test_settling_a_class_through_one_held_gradebook_leaves_no_engine_per_student_and_keeps_manual_grades(
        class_url, made, tmp_path):
    # what a job sends back for amy, given to 30 new students as the grading process settles them one by one
    job = gradebook_copy.sqlite_url(gradebook_copy.seed(
        tmp_path / "job.db", gradebook_copy.assignment_data(class_url, ASSIGNMENT), "amy",
        gradebook_copy.student_data(class_url, ASSIGNMENT, "amy"), template=made[1]))
    data = gradebook_copy.submission_data(job, ASSIGNMENT, "amy")
    students = [f"s{number:02d}" for number in range(30)]
    before = live_dialects()
    with gradebook_copy.ClassGradebook(class_url) as held:
        for number, student in enumerate(students):
            settled = StudentJob(tmp_path, ASSIGNMENT, student, StudentBudget(), tmp_path / f"{student}.db", held)
            assert settled.existed is False
            if number == 10:  # an instructor grades s00 by hand in Formgrader meanwhile: the held session sees it
                with Gradebook(class_url, course_id=COURSE_ID) as formgrader:
                    formgrader.find_grade("test_softmax", NB, ASSIGNMENT, "s00").manual_score = 0.25
                    formgrader.db.commit()
            result = settled.settle(JobResult(student, True, rows=data))
            assert result.graded and result.rows is None, result.reason
        # two engines' statements are cached: the held gradebook's and the instructor's; a nbgrader Gradebook
        # opened per student left every student's dialect alive in the ORM's caches (32 here)
        assert live_dialects() - before <= 2
        # a write that fails (a cell the gradebook does not know) leaves nothing half-written for the next student
        broken = {**data, "notebooks": {NB: {**data["notebooks"][NB], "grades": {"no_such_cell": {
            "auto_score": 1.0, "needs_manual_grade": False}}}}}
        failed = StudentJob(tmp_path, ASSIGNMENT, "zed", StudentBudget(), tmp_path / "zed.db", held)
        outcome = failed.settle(JobResult("zed", True, rows=broken))
        assert not outcome.graded and "could not be copied" in outcome.reason
        assert not held.has_student("zed")
        held.write_submission(ASSIGNMENT, "s00", data)  # s00 graded again: the manual grade stays
    rows = gradebook_copy.submission_rows(class_url, ASSIGNMENT)
    assert set(rows) == {"amy", "bo", *students}
    autograded = {cell: {name: fields[name] for name in gradebook_copy.GRADE_FIELDS}
                  for cell, fields in data["notebooks"][NB]["grades"].items()}
    assert autograded == {"test_softmax": {"auto_score": 1.0, "needs_manual_grade": False},
                          "test_scores": {"auto_score": None, "needs_manual_grade": True},
                          "explain": {"auto_score": None, "needs_manual_grade": True}}
    for student in students[1:]:  # (auto_score, manual_score, extra_credit, needs_manual_grade)
        assert {cell: (score[0], score[3]) for cell, score in rows[student]["notebooks"][NB]["grades"].items()} == \
            {cell: (fields["auto_score"], fields["needs_manual_grade"]) for cell, fields in autograded.items()}
    assert rows["s00"]["notebooks"][NB]["grades"]["test_softmax"][1] == 0.25


def test_shipped_files_stay_inside_their_folder(tmp_path):
    dask_executor.write_files(tmp_path, {"a/b.ipynb": (b"{}", 0o444)})
    assert (tmp_path / "a" / "b.ipynb").read_bytes() == b"{}" and (tmp_path / "a" / "b.ipynb").stat().st_mode & 0o777 == 0o444
    for name in ("../outside.txt", "/etc/cron.d/x", "a/../../x", ""):
        with pytest.raises(ValueError, match="inside its folder"):
            dask_executor.write_files(tmp_path / "in", {name: (b"x", 0o644)})
    assert not (tmp_path / "outside.txt").exists()


def course_with(tmp_path: Path, files: dict[str, bytes]) -> Path:
    course = tmp_path / "course"
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    (course / "nbgrader_config.py").write_bytes((REPO / "nbgrader_config.py").read_bytes())
    nbformat.write(nbformat.v4.new_notebook(), str(course / "source" / ASSIGNMENT / NOTEBOOK))
    folder = course / "submitted" / "amy" / ASSIGNMENT
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return course


def test_a_job_carries_the_notebooks_and_the_timestamp_and_other_files_by_name_only(tmp_path):
    notebook = nbformat.writes(nbformat.v4.new_notebook()).encode()
    course = course_with(tmp_path, {NOTEBOOK: notebook, "timestamp.txt": b"2026-03-01 10:00:00.000000 UTC",
                                    "data/big.npy": b"\0" * 100_000})
    job = dask_executor.ship(course, ASSIGNMENT, "amy", {}, None, {"spec": "s", "grader": "g"}, StudentBudget())
    assert {name: data for name, (data, _) in job.submission.items()} == {
        NOTEBOOK: notebook, "timestamp.txt": b"2026-03-01 10:00:00.000000 UTC", "data/big.npy": b""}
    assert set(job.source) == {NOTEBOOK} and job.config == (course / "nbgrader_config.py").read_bytes()


def test_a_submission_over_the_limits_is_refused_before_anything_is_sent(tmp_path):
    course = course_with(tmp_path, {"other.ipynb": b"{}"})
    refused = dask_executor.ship(course, ASSIGNMENT, "amy", {}, None, {}, StudentBudget())
    assert isinstance(refused, JobResult) and not refused.graded
    assert refused.reason.startswith(f"missing {NOTEBOOK}; found 'other.ipynb'")


def test_a_worker_with_another_grader_refuses_to_grade_and_says_why(tmp_path):
    course = tmp_path / "course"
    dask_executor._lay_out(course, (REPO / "nbgrader_config.py").read_bytes(), ASSIGNMENT, {})
    right = {"spec": fingerprints.spec_hash(ASSIGNMENT), "grader": fingerprints.grader_version(course)}
    assert dask_executor._grader_problem(course, ASSIGNMENT, right) is None
    assert "spec of " + ASSIGNMENT in dask_executor._grader_problem(course, ASSIGNMENT, {**right, "spec": "other"})
    assert "install the same version on every worker" in dask_executor._grader_problem(
        course, ASSIGNMENT, {**right, "grader": "other"})
    problem = dask_executor.check_worker(b"# another config\n", ASSIGNMENT, right)  # its hash is not the expected one
    assert problem and "differs from the grading machine's" in problem
