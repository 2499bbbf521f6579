"""One writer for the class gradebook: each grading job writes its own copy, the parent copies the student's rows back.

nbgrader's SQLite gradebook is not safe for concurrent writers, so a class graded on several cores is
graded like this (:mod:`autograder.nbgrader.parallel`):

1. after ``generate_assignment`` has loaded the assignment, :func:`snapshot` takes one consistent copy of the
   class gradebook (SQLite's online backup);
2. each student's job autogrades into its own copy of that snapshot, given to nbgrader through its public
   setting ``c.CourseDirectory.db_url``; nothing in grading one student reads another student's rows, so the
   job sees what a sequential run would have seen;
3. the job reads the rows it wrote (:func:`submission_data`) and sends them back with its result; the parent,
   the only process that writes the class gradebook, writes them with :meth:`ClassGradebook.write_submission`
   (nbgrader's public :class:`nbgrader.api.Gradebook` API), through one gradebook held open for the run.

Only the fields that ``nbgrader autograde`` writes are copied (the student, the submission's timestamp, each
notebook's late penalty, each grade's autograder score and review flag, each comment's autograder comment):
a manual score or comment that an instructor gives in Formgrader while the class is being graded is kept.

The class gradebook need not be SQLite: nbgrader's ``c.CourseDirectory.db_url`` may name a server
(``postgresql+psycopg2://...``; :func:`class_gradebook_url`). A job's gradebook is then never a copy of the
server: :func:`seed` makes a private SQLite gradebook from the assignment's rows (:func:`assignment_data`) and
the student's own (:func:`student_data`), read and written through the public Gradebook API, and
:class:`JobGradebooks` picks the one way or the other. The rows a job wrote travel as plain data
(:func:`submission_data`, :func:`write_submission`), so that a job may also run on another machine
(:mod:`autograder.nbgrader.dask_executor`).

A new gradebook costs nbgrader a run of ``alembic heads`` (a subprocess, 2-3 s of CPU): :func:`new_gradebook`
pays it once per process and schema, and writes later new gradebooks from that first empty one; with
:data:`EMPTY_GRADEBOOKS` set in the environment, once per directory and schema, for every process that inherits it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
import tempfile
import warnings
from pathlib import Path

import nbgrader
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.dbutil import ALEMBIC_DIR
from sqlalchemy.exc import SAWarning

from autograder.course import COURSE_ID
from autograder.nbgrader import EMPTY_GRADEBOOKS  # defined where reading it imports no nbgrader (tests/conftest.py)

#: What ``autograde`` writes per grade and per comment (nbgrader.preprocessors.SaveAutoGrades, Autograde).
GRADE_FIELDS = ("auto_score", "needs_manual_grade")
COMMENT_FIELDS = ("auto_comment",)
STUDENT_FIELDS = ("first_name", "last_name", "email", "lms_user_id")


def sqlite_url(path: Path) -> str:
    """nbgrader's ``db_url`` for the SQLite file at ``path``."""
    return f"sqlite:///{Path(path).resolve()}"


#: (course id, :func:`schema_key`) → the bytes of an empty SQLite gradebook nbgrader made for them.
_empty_gradebooks: dict[tuple, bytes] = {}


def schema_key() -> tuple:
    """What an empty gradebook's content depends on besides its course id.

    nbgrader's tables come from its models (imported once per process: its version) and the row of
    ``alembic_version`` from ``alembic heads`` over the migration scripts in ``nbgrader/alembic/versions``
    (read from disk by each run: their names, sizes and modification times).

    Returns
    -------
    tuple
        nbgrader's version and the migration scripts' (name, size, mtime_ns), sorted.
    """
    versions = Path(ALEMBIC_DIR) / "versions"
    scripts = tuple(sorted((entry.name, entry.stat().st_size, entry.stat().st_mtime_ns)
                           for entry in os.scandir(versions) if entry.name.endswith(".py")))
    return nbgrader.__version__, scripts


@contextlib.contextmanager
def nbgrader_path():
    """While nbgrader runs in this process: PATH as nbgrader's commands get it, and as it was afterwards.

    That is :func:`autograder.nbgrader.grading.nbgrader_environment`'s PATH, this interpreter's ``bin/`` first:
    nbgrader runs ``alembic heads`` by name for every new gradebook, and ``.venv/bin/python -m autograder grade``
    without the venv activated (cron, a service, a shell that did not activate it) stopped with "No such file or
    directory: 'alembic'" on a course's first grading.
    """
    from autograder.nbgrader.grading import nbgrader_environment

    path = os.environ.get("PATH")
    os.environ["PATH"] = nbgrader_environment()["PATH"]
    try:
        yield
    finally:
        if path is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = path


def new_gradebook(target: Path, course_id: str = COURSE_ID) -> Path:
    """Make ``target`` an empty SQLite gradebook of ``course_id``, the file nbgrader's ``Gradebook`` makes.

    The first call per course id and :func:`schema_key` lets nbgrader make it (``Gradebook(url)``: tables,
    ``alembic_version`` from a run of ``alembic heads``, the course's row) and keeps its bytes; later calls
    write those bytes. ``Gradebook`` then finds a database with tables and runs no ``alembic``. When the
    environment names a directory in :data:`EMPTY_GRADEBOOKS`, the bytes are also kept there (one file per
    course id and schema, written whole by a rename) and a process's first call reads them from there if an
    earlier process made them; a directory that cannot be read or written is as if none were named.

    Parameters
    ----------
    target : Path
        The file to create or replace.
    course_id : str
        nbgrader's course id (``c.CourseDirectory.course_id``), the one row of the ``course`` table.

    Returns
    -------
    Path
        ``target``, now an empty gradebook of ``course_id``.

    Raises
    ------
    subprocess.CalledProcessError
        When nbgrader's ``alembic heads`` fails (on the first call for a key).
    """
    key = (course_id, schema_key())
    kept = os.environ.get(EMPTY_GRADEBOOKS)
    # the key in the file's name: another nbgrader, other migration scripts or another course id miss it
    kept = Path(kept) / f"{hashlib.sha256(repr(key).encode()).hexdigest()[:32]}.db" if kept else None
    if key not in _empty_gradebooks and kept is not None:
        with contextlib.suppress(OSError):  # none kept yet, or a directory this process cannot read: nbgrader makes it
            _empty_gradebooks[key] = kept.read_bytes()
    if key not in _empty_gradebooks:
        with tempfile.TemporaryDirectory(prefix="attention-lab-empty-gradebook-") as scratch, nbgrader_path():
            made = Path(scratch) / "gradebook.db"
            with Gradebook(sqlite_url(made), course_id=course_id):
                pass
            _empty_gradebooks[key] = made.read_bytes()
        if kept is not None:  # renamed into place: a process reading it at the same time sees all or nothing
            partial = kept.with_name(f".{kept.name}.{os.getpid()}")
            try:
                kept.parent.mkdir(parents=True, exist_ok=True)
                partial.write_bytes(_empty_gradebooks[key])
                os.replace(partial, kept)
            except OSError:  # a directory this process cannot write: the later processes make their own
                with contextlib.suppress(OSError):
                    partial.unlink(missing_ok=True)
    Path(target).unlink(missing_ok=True)
    Path(target).write_bytes(_empty_gradebooks[key])
    return Path(target)


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


def class_gradebook_url(course_dir: Path) -> str:
    """nbgrader ``db_url`` of the course's gradebook, as nbgrader resolves it.

    ``c.CourseDirectory.db_url`` of the course's ``nbgrader_config.py`` when it sets one (e.g.
    ``postgresql+psycopg2://grader@db.example.org/attention_lab``), else ``gradebook.db`` at the course root.
    """
    from nbgrader.coursedir import CourseDirectory

    from autograder.nbgrader.grading import course_config

    return CourseDirectory(config=course_config(Path(course_dir)), root=str(Path(course_dir).resolve())).db_url


def sqlite_file(db_url: str) -> Path | None:
    """The file of an SQLite ``db_url`` (``sqlite:///path``), or None for a database server's URL."""
    return Path(db_url.split(":///", 1)[1]) if db_url.startswith("sqlite:///") else None


def gradebook_exists(db_url: str) -> bool:
    """Whether the gradebook at ``db_url`` may hold rows: its SQLite file exists, or it is a server (always)."""
    path = sqlite_file(db_url)
    return path is None or path.is_file()


def submission_data(job_url: str, assignment: str, student: str) -> dict:
    """What autograding ``student`` wrote in the job's gradebook, as plain values (:func:`write_submission`).

    Returns
    -------
    dict
        ``{"student": {first_name, last_name, email, lms_user_id}, "timestamp": datetime or None,
        "notebooks": {notebook: {"late_submission_penalty", "grades": {cell: {auto_score,
        needs_manual_grade}}, "comments": {cell: {auto_comment}}}}}``.

    Raises
    ------
    nbgrader.api.MissingEntry
        If the job's gradebook has no submission of ``student`` (the job did not autograde it).
    """
    with Gradebook(job_url, course_id=COURSE_ID) as job:
        graded = job.find_submission(assignment, student)
        return {"student": {name: getattr(graded.student, name) for name in STUDENT_FIELDS},
                "timestamp": graded.timestamp,
                "notebooks": {notebook.name: {
                    "late_submission_penalty": notebook.late_submission_penalty,
                    "grades": {g.name: {name: getattr(g, name) for name in GRADE_FIELDS} for g in notebook.grades},
                    "comments": {c.name: {name: getattr(c, name) for name in COMMENT_FIELDS}
                                 for c in notebook.comments},
                } for notebook in graded.notebooks}}


def write_submission(class_url: str, assignment: str, student: str, data: dict) -> None:
    """Write what autograding ``student`` produced (:func:`submission_data`) into the class gradebook.

    Only autograde's own fields are written; a manual score or comment already in the class gradebook stays.
    A writer of many students holds one :class:`ClassGradebook` instead.

    Raises
    ------
    nbgrader.api.MissingEntry
        If the class gradebook does not know ``assignment`` or one of the cells in ``data``.
    """
    with ClassGradebook(class_url) as gradebook:
        gradebook.write_submission(assignment, student, data)


class ClassGradebook:
    """The class gradebook, held open by its one writer for a whole grading run: one nbgrader ``Gradebook``.

    Why one: every nbgrader ``Gradebook`` makes its own SQLAlchemy engine, and SQLAlchemy's ORM keeps the
    insert and update statements it compiled in a cache on each mapped class, keyed by the engine's dialect
    (``Mapper(_compiled_cache_size=100)``, up to 150 entries each before it prunes). A gradebook opened per
    student therefore left each student's dialect and statements alive: the grading process grew with the
    class, by about 0.1 MiB per student up to ~150 students (tests/test_gradebook_seed.py counts the dialects).
    Held open, the statements are compiled once. Each method ends its transaction (a commit, or a rollback
    after reading), so the gradebook is never left locked between students and a manual grade an instructor
    gives in Formgrader meanwhile is seen and kept.

    Parameters
    ----------
    url : str
        nbgrader ``db_url`` of the class gradebook (:func:`class_gradebook_url`); an SQLite file is created
        by nbgrader if it does not exist.
    """

    def __init__(self, url: str):
        self.url = url
        self.gradebook = Gradebook(url, course_id=COURSE_ID)

    def __enter__(self) -> ClassGradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close nbgrader's session and engine (nbgrader's ``Gradebook.close``)."""
        self.gradebook.close()

    def has_student(self, student: str) -> bool:
        """Whether the gradebook knows ``student``."""
        try:
            self.gradebook.find_student(student)
            return True
        except MissingEntry:
            return False
        finally:
            self.gradebook.db.rollback()  # only read: end the transaction (a server would hold it open)

    def write_submission(self, assignment: str, student: str, data: dict) -> None:
        """Write what autograding ``student`` produced (:func:`submission_data`), as :func:`write_submission`.

        Raises
        ------
        nbgrader.api.MissingEntry
            If the gradebook does not know ``assignment`` or one of the cells in ``data``; the student and
            submission rows nbgrader has already committed stay (the caller removes them,
            :meth:`remove_submission`).
        """
        gradebook = self.gradebook
        try:
            try:
                gradebook.find_student(student)
            except MissingEntry:
                gradebook.add_student(student, **{name: data["student"].get(name) for name in STUDENT_FIELDS})
            with warnings.catch_warnings():  # nbgrader's add_submission always trips SQLAlchemy's autoflush warning
                warnings.simplefilter("ignore", SAWarning)
                gradebook.update_or_create_submission(assignment, student, timestamp=data["timestamp"])
            for notebook, rows in data["notebooks"].items():
                target = gradebook.find_submission_notebook(notebook, assignment, student)
                target.late_submission_penalty = rows["late_submission_penalty"]
                for cell, fields in rows["grades"].items():
                    row = gradebook.find_grade(cell, notebook, assignment, student)
                    for name in GRADE_FIELDS:
                        setattr(row, name, fields[name])
                for cell, fields in rows["comments"].items():
                    row = gradebook.find_comment(cell, notebook, assignment, student)
                    for name in COMMENT_FIELDS:
                        setattr(row, name, fields[name])
            gradebook.db.commit()
        except BaseException:  # the next student's write must not commit half of this one
            gradebook.db.rollback()
            raise

    def remove_submission(self, assignment: str, student: str, remove_student: bool) -> None:
        """Remove ``student``'s submission of ``assignment`` if any, and the student too when ``remove_student``
        and they have no other submission (nbgrader's ``remove_submission`` and ``remove_student``)."""
        try:
            with contextlib.suppress(MissingEntry):
                self.gradebook.remove_submission(assignment, student)
            if remove_student:
                with contextlib.suppress(MissingEntry):
                    if not self.gradebook.find_student(student).submissions:
                        self.gradebook.remove_student(student)
        finally:
            self.gradebook.db.rollback()  # nbgrader's removals commit themselves: this only ends a read


def assignment_data(db_url: str, assignment: str) -> dict:
    """The assignment's rows that autograding reads, as plain values (what ``generate_assignment`` wrote).

    Returns
    -------
    dict
        ``{"name", "duedate", "notebooks": [{"name", "kernelspec", "grade_cells": [{name, max_score,
        cell_type}], "solution_cells": [name], "task_cells": [{name, max_score, cell_type}],
        "source_cells": [{name, cell_type, locked, source, checksum}]}]}``, each list in the order the
        gradebook returns it (the order nbgrader's ``add_missing_cells`` and
        :func:`autograder.nbgrader.metadata_restore.known_cells` rely on).

    Raises
    ------
    nbgrader.api.MissingEntry
        If the gradebook does not know ``assignment``.
    """
    graded = ("name", "max_score", "cell_type")
    with Gradebook(db_url, course_id=COURSE_ID) as gradebook:
        record = gradebook.find_assignment(assignment)
        return {"name": record.name, "duedate": record.duedate, "notebooks": [{
            "name": nb.name, "kernelspec": nb.kernelspec,
            "grade_cells": [{f: getattr(c, f) for f in graded} for c in nb.grade_cells],
            "solution_cells": [c.name for c in nb.solution_cells],
            "task_cells": [{f: getattr(c, f) for f in graded} for c in nb.task_cells],
            "source_cells": [{f: getattr(c, f) for f in ("name", "cell_type", "locked", "source", "checksum")}
                             for c in nb.source_cells],
        } for nb in record.notebooks]}


def student_data(db_url: str, assignment: str, student: str) -> dict | None:
    """The student and their earlier submission of ``assignment`` as plain values, or None for a new student.

    Grading reads them: the extension (late penalty) and the manual scores and comments an instructor gave
    (the feedback shows them).

    Returns
    -------
    dict or None
        ``{"student": {first_name, ...}, "submission": None or {"timestamp", "extension", "notebooks":
        {notebook: {"flagged", "late_submission_penalty", "grades": {cell: {auto_score, manual_score,
        extra_credit, needs_manual_grade}}, "comments": {cell: {auto_comment, manual_comment}}}}}}``.
    """
    with Gradebook(db_url, course_id=COURSE_ID) as gradebook:
        try:
            record = gradebook.find_student(student)
        except MissingEntry:
            return None
        data = {"student": {name: getattr(record, name) for name in STUDENT_FIELDS}, "submission": None}
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return data
        data["submission"] = {"timestamp": submission.timestamp, "extension": submission.extension, "notebooks": {
            nb.name: {"flagged": nb.flagged, "late_submission_penalty": nb.late_submission_penalty,
                      "grades": {g.name: {f: getattr(g, f) for f in (*GRADE_FIELDS, "manual_score", "extra_credit")}
                                 for g in nb.grades},
                      "comments": {c.name: {f: getattr(c, f) for f in (*COMMENT_FIELDS, "manual_comment")}
                                   for c in nb.comments}}
            for nb in submission.notebooks}}
        return data


def seed_assignment(target: Path, assignment: dict) -> Path:
    """Make ``target`` a new SQLite gradebook holding one assignment's rows (:func:`assignment_data`), no student.

    Made once per class (:func:`new_gradebook`, then the rows); the class's jobs copy it and add their student
    to the copy (:func:`add_student_rows`).

    Returns
    -------
    Path
        ``target``.
    """
    new_gradebook(target)
    with Gradebook(sqlite_url(target), course_id=COURSE_ID) as gradebook:
        gradebook.update_or_create_assignment(assignment["name"], duedate=assignment["duedate"])
        name = assignment["name"]
        for nb in assignment["notebooks"]:
            gradebook.update_or_create_notebook(nb["name"], name, kernelspec=nb["kernelspec"])
            for cell in nb["grade_cells"]:
                gradebook.update_or_create_grade_cell(cell["name"], nb["name"], name, max_score=cell["max_score"],
                                                      cell_type=cell["cell_type"])
            for cell in nb["solution_cells"]:
                gradebook.update_or_create_solution_cell(cell, nb["name"], name)
            for cell in nb["task_cells"]:
                gradebook.update_or_create_task_cell(cell["name"], nb["name"], name, max_score=cell["max_score"],
                                                     cell_type=cell["cell_type"])
            for cell in nb["source_cells"]:  # in the class gradebook's order, which grading relies on
                gradebook.update_or_create_source_cell(cell["name"], nb["name"], name, cell_type=cell["cell_type"],
                                                       locked=cell["locked"], source=cell["source"],
                                                       checksum=cell["checksum"])
    return Path(target)


def add_student_rows(target: Path, assignment: str, student: str, known: dict | None) -> Path:
    """Add ``student`` and their earlier submission (:func:`student_data`; None: a new student) to ``target``.

    Returns
    -------
    Path
        ``target``: autograding ``student`` there reads what it would read in the class gradebook.
    """
    if known is None:
        return Path(target)
    with Gradebook(sqlite_url(target), course_id=COURSE_ID) as gradebook:
        gradebook.add_student(student, **known["student"])
        submission = known["submission"]
        if submission is None:
            return Path(target)
        with warnings.catch_warnings():  # nbgrader's add_submission always trips SQLAlchemy's autoflush warning
            warnings.simplefilter("ignore", SAWarning)
            gradebook.add_submission(assignment, student, timestamp=submission["timestamp"],
                                     extension=submission["extension"])
        for notebook, rows in submission["notebooks"].items():
            record = gradebook.find_submission_notebook(notebook, assignment, student)
            record.flagged, record.late_submission_penalty = rows["flagged"], rows["late_submission_penalty"]
            for cell, fields in rows["grades"].items():
                row = gradebook.find_grade(cell, notebook, assignment, student)
                for name, value in fields.items():
                    setattr(row, name, value)
            for cell, fields in rows["comments"].items():
                row = gradebook.find_comment(cell, notebook, assignment, student)
                for name, value in fields.items():
                    setattr(row, name, value)
        gradebook.db.commit()
    return Path(target)


def seed(target: Path, assignment: dict, student: str, known: dict | None, template: Path | None = None) -> Path:
    """Make ``target`` a new SQLite gradebook holding one assignment and at most one student's rows.

    Parameters
    ----------
    target : Path
        The SQLite file to create (replaced if it exists).
    assignment : dict
        :func:`assignment_data` of the class gradebook.
    student : str
        The student the job grades.
    known : dict or None
        :func:`student_data` of that student (None: the class gradebook does not know them yet).
    template : Path, optional
        :func:`seed_assignment` of ``assignment``, made once for the class: copied instead of made again.

    Returns
    -------
    Path
        ``target``: autograding ``student`` there reads what it would read in the class gradebook.
    """
    if template is None:
        seed_assignment(target, assignment)
    else:
        shutil.copyfile(template, target)
    return add_student_rows(target, assignment["name"], student, known)


class JobGradebooks:
    """Each grading job's own gradebook, made from the class gradebook at ``class_url`` (one writer: the caller).

    An SQLite class gradebook is snapshotted once (:func:`snapshot`) and each job gets a copy of the
    snapshot; a gradebook on a server (PostgreSQL) is never copied: each job gets a copy of a private SQLite
    gradebook seeded once with the assignment's rows (:func:`seed_assignment`), with the student's own added
    (:func:`add_student_rows`).

    Parameters
    ----------
    class_url : str
        nbgrader ``db_url`` of the class gradebook; it must already hold ``assignment``.
    assignment : str
        The assignment being graded.
    scratch : Path
        A private folder for the snapshot and the jobs' gradebooks.

    Raises
    ------
    FileNotFoundError
        If ``class_url`` is an SQLite file that does not exist.
    nbgrader.api.MissingEntry
        If a server's gradebook does not know ``assignment``.
    """

    def __init__(self, class_url: str, assignment: str, scratch: Path):
        self.class_url, self.assignment, self.scratch = class_url, assignment, Path(scratch)
        path = sqlite_file(class_url)
        self.snapshot = snapshot(path, self.scratch / "class.db") if path is not None else None
        self.template = None if path is not None else \
            seed_assignment(self.scratch / "assignment.db", assignment_data(class_url, assignment))

    def make(self, student: str, target: Path) -> Path:
        """Write the gradebook of ``student``'s job at ``target`` and return ``target``."""
        if self.snapshot is not None:
            shutil.copyfile(self.snapshot, target)
            return Path(target)
        shutil.copyfile(self.template, target)
        return add_student_rows(target, self.assignment, student,
                                student_data(self.class_url, self.assignment, student))


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
