"""One writer for the class gradebook: each grading job writes its own copy, the parent copies the student's rows back.

nbgrader's SQLite gradebook is not safe for concurrent writers, so a class graded on several cores is
graded like this (:mod:`autograder.nbgrader.parallel`):

1. after ``generate_assignment`` has loaded the assignment, :func:`snapshot` takes one consistent copy of the
   class gradebook (SQLite's online backup);
2. each student's job autogrades into its own copy of that snapshot, given to nbgrader through its public
   setting ``c.CourseDirectory.db_url``; nothing in grading one student reads another student's rows, so the
   job sees what a sequential run would have seen;
3. the parent, the only process that writes the class gradebook, copies that student's rows from the job's
   copy with :func:`copy_submission` (nbgrader's public :class:`nbgrader.api.Gradebook` API).

Only the fields that ``nbgrader autograde`` writes are copied (the student, the submission's timestamp, each
notebook's late penalty, each grade's autograder score and review flag, each comment's autograder comment):
a manual score or comment that an instructor gives in Formgrader while the class is being graded is kept.
"""

from __future__ import annotations

import contextlib
import sqlite3
import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning

from autograder.course import COURSE_ID

#: What ``autograde`` writes per grade and per comment (nbgrader.preprocessors.SaveAutoGrades, Autograde).
GRADE_FIELDS = ("auto_score", "needs_manual_grade")
COMMENT_FIELDS = ("auto_comment",)
STUDENT_FIELDS = ("first_name", "last_name", "email", "lms_user_id")


def sqlite_url(path: Path) -> str:
    """nbgrader's ``db_url`` for the SQLite file at ``path``."""
    return f"sqlite:///{Path(path).resolve()}"


def snapshot(gradebook: Path, target: Path) -> Path:
    """Copy the SQLite gradebook at ``gradebook`` to ``target`` as one consistent state (SQLite's backup API).

    Parameters
    ----------
    gradebook, target : Path
        The class gradebook (it must exist) and the file to create or replace.

    Returns
    -------
    Path
        ``target``, now a consistent snapshot of ``gradebook`` (taken with SQLite's backup API).

    Raises
    ------
    FileNotFoundError
        If ``gradebook`` does not exist (``generate_assignment`` creates it).
    """
    if not Path(gradebook).is_file():
        raise FileNotFoundError(f"no gradebook at {gradebook}: generate_assignment creates it")
    Path(target).unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(f"file:{gradebook}?mode=ro", uri=True)) as source, \
            contextlib.closing(sqlite3.connect(target)) as copy:
        source.backup(copy)
    return Path(target)


def copy_submission(job_url: str, class_url: str, assignment: str, student: str) -> None:
    """Copy what autograding ``student`` wrote in the job's gradebook into the class gradebook.

    Parameters
    ----------
    job_url, class_url : str
        nbgrader ``db_url`` of the job's copy (read) and of the class gradebook (written).
    assignment, student : str
        Which submission.

    Raises
    ------
    nbgrader.api.MissingEntry
        If the job's gradebook has no submission of ``student`` (the job did not autograde it), or the class
        gradebook does not know ``assignment`` or one of its cells.
    """
    with Gradebook(job_url, course_id=COURSE_ID) as job, Gradebook(class_url, course_id=COURSE_ID) as gradebook:
        graded = job.find_submission(assignment, student)
        try:
            gradebook.find_student(student)
        except MissingEntry:
            source = graded.student
            gradebook.add_student(student, **{name: getattr(source, name) for name in STUDENT_FIELDS})
        with warnings.catch_warnings():  # nbgrader's add_submission always trips SQLAlchemy's autoflush warning
            warnings.simplefilter("ignore", SAWarning)
            gradebook.update_or_create_submission(assignment, student, timestamp=graded.timestamp)
        for notebook in graded.notebooks:
            target = gradebook.find_submission_notebook(notebook.name, assignment, student)
            target.late_submission_penalty = notebook.late_submission_penalty
            for grade in notebook.grades:
                row = gradebook.find_grade(grade.name, notebook.name, assignment, student)
                for name in GRADE_FIELDS:
                    setattr(row, name, getattr(grade, name))
            for comment in notebook.comments:
                row = gradebook.find_comment(comment.name, notebook.name, assignment, student)
                for name in COMMENT_FIELDS:
                    setattr(row, name, getattr(comment, name))
        gradebook.db.commit()


def submission_rows(db_url: str, assignment: str) -> dict[str, dict]:
    """Every student's submission of ``assignment`` as plain values (for comparing two gradebooks).

    Returns
    -------
    dict
        student → {"timestamp", "notebooks": {notebook: {"flagged", "late_submission_penalty",
        "grades": {cell: (auto_score, manual_score, extra_credit, needs_manual_grade)},
        "comments": {cell: (auto_comment, manual_comment)}}}}; row ids (random UUIDs) are left out.
    """
    rows = {}
    with Gradebook(db_url, course_id=COURSE_ID) as gradebook:
        for submission in gradebook.find_assignment(assignment).submissions:
            rows[submission.student.id] = {
                "timestamp": submission.timestamp,
                "notebooks": {notebook.name: {
                    "flagged": notebook.flagged,
                    "late_submission_penalty": notebook.late_submission_penalty,
                    "grades": {g.name: (g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade)
                               for g in notebook.grades},
                    "comments": {c.name: (c.auto_comment, c.manual_comment) for c in notebook.comments},
                } for notebook in submission.notebooks}}
    return rows
