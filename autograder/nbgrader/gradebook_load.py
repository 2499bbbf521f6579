"""Load an assignment into the gradebook (and write its release) all or nothing.

``nbgrader generate_assignment`` writes the gradebook and the release folder as it goes: with ``--force``
it deletes ``release/<assignment>/`` first, and when the source adds or removes a cell (or a notebook)
of an assignment that has submissions, it stops with "Cannot add or remove cells … because there are
submissions" — leaving the committed release deleted and, for a multi-notebook assignment, the
gradebook updated for the notebooks before the one it stopped at. :func:`generate` instead

1. checks first, with nbgrader's public ``Gradebook`` API and cell tests (``nbgrader.utils.is_grade``,
   ...), whether the source changes the set of cells or notebooks of an assignment that has
   submissions, and if so stops with one line saying which cell and what to do
   (:class:`AssignmentChanged`), before anything is written;
2. runs ``generate_assignment`` on a copy of the gradebook (SQLite's backup API) into a scratch release
   folder beside the real one, and only when it succeeded copies the gradebook back (one SQLite
   transaction) and renames the new release folder into place. Any other failure leaves both as they
   were (:class:`GenerateFailed`, one line).

``generate_assignment`` runs in this process, through nbgrader's public ``NbGraderAPI``
(:func:`run_generate_assignment`), not as ``python -m nbgrader generate_assignment``: a new interpreter
spent 3.6 of its 5.2 seconds importing nbgrader, once per assignment of every ``make release`` and
``make grade`` (``benchmarks/generate_assignment.md``).

``make release`` (:mod:`autograder.nbgrader.release`) and ``make grade``
(:func:`autograder.nbgrader.grading.load_into_gradebook`) both load this way. A course whose
``nbgrader_config.py`` sets its own ``c.CourseDirectory.db_url`` (a PostgreSQL gradebook) gets step 1
and the release swap; its gradebook is then written by nbgrader directly.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sqlite3
import tempfile
import traceback
from pathlib import Path

import nbformat
from nbgrader import utils
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from traitlets import log as traitlets_log

from autograder.course import COURSE_ID
from autograder.nbgrader import gradebook_copy
from autograder.nbgrader.grading import course_config

#: what the refusal tells the instructor to do (README: "Editing an assignment after release")
WHAT_TO_DO = ("start a new cohort with `make new-cohort` (archives the gradebook and the submissions; "
              "README \"Starting a new cohort\") or undo that change")


class AssignmentChanged(RuntimeError):
    """The source adds or removes cells or notebooks of an assignment that already has submissions."""


class GenerateFailed(RuntimeError):
    """``nbgrader generate_assignment`` failed; the gradebook and the release folder were left as they were."""


def class_gradebook_file(course_dir: Path) -> Path | None:
    """The course's SQLite gradebook file (``gradebook.db``), or None when ``nbgrader_config.py`` sets another ``db_url``."""
    config = course_config(course_dir)
    return None if "db_url" in config.get("CourseDirectory", {}) else Path(course_dir) / "gradebook.db"


def _course_id(course_dir: Path) -> str:
    """nbgrader's course id in ``course_dir`` (``c.CourseDirectory.course_id``), the row a new gradebook holds."""
    return CourseDirectory(config=course_config(course_dir)).course_id


def _db_url(course_dir: Path) -> str:
    config = course_config(course_dir)
    config.CourseDirectory.root = str(course_dir)
    return CourseDirectory(config=config).db_url


def planned_cells(notebook) -> dict[str, set[str]]:
    """The cells ``generate_assignment`` records for one source notebook, by kind (nbgrader's ``SaveCells`` rule).

    Returns
    -------
    dict
        ``{"grade", "solution", "task", "source"}`` → set of ``grade_id``.
    """
    kinds = {"grade": set(), "solution": set(), "task": set(), "source": set()}
    for cell in notebook.cells:
        if "nbgrader" not in cell.metadata:
            continue
        grade_id = cell.metadata.nbgrader.get("grade_id")
        for kind, test in (("grade", utils.is_grade), ("solution", utils.is_solution), ("task", utils.is_task)):
            if test(cell):
                kinds[kind].add(grade_id)
        if utils.is_grade(cell) or utils.is_solution(cell) or utils.is_locked(cell) or utils.is_task(cell):
            kinds["source"].add(grade_id)
    return kinds


def _listed(names) -> str:
    names = sorted(names)
    shown = ", ".join(f"'{name}'" for name in names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def refused_change(course_dir: Path, assignment: str, source_dir: Path | None = None,
                   db_url: str | None = None) -> str | None:
    """Why loading ``assignment`` from its source would change an assignment that has submissions, or None.

    nbgrader lets an assignment with submissions change the text and points of its cells, not which
    cells or notebooks it has (their grades would no longer line up); this finds such a change before
    nbgrader does.

    Parameters
    ----------
    course_dir : Path
        The course root.
    assignment : str
        The assignment (a folder of the source directory).
    source_dir : Path, optional
        The folder holding ``<assignment>/`` (default: ``course_dir/source``).
    db_url : str, optional
        The gradebook (default: the course's).

    Returns
    -------
    str or None
        One line, e.g. ``"source/A/A.ipynb adds cell 'extra' but the gradebook holds 3 submissions of A"``,
        or None when nothing that nbgrader refuses would change (or nothing has been submitted).
    """
    course_dir = Path(course_dir)
    folder = Path(source_dir or course_dir / "source") / assignment
    shown = f"source/{assignment}"
    gradebook_file = class_gradebook_file(course_dir)
    if db_url is None and gradebook_file is not None and not gradebook_file.exists():
        return None
    with Gradebook(db_url or _db_url(course_dir), course_id=COURSE_ID) as gradebook:
        try:
            record = gradebook.find_assignment(assignment)
        except MissingEntry:
            return None
        submissions = len(record.submissions)
        if not submissions:
            return None
        holds = f"but the gradebook holds {submissions} submission(s) of {assignment}"
        old = {notebook.name: notebook for notebook in record.notebooks}
        new = {path.stem: path for path in sorted(folder.glob("*.ipynb"))}
        if set(new) != set(old):
            added, removed = set(new) - set(old), set(old) - set(new)
            change = " and ".join(filter(None, [added and f"adds notebook {_listed(n + '.ipynb' for n in added)}",
                                                removed and f"removes notebook {_listed(n + '.ipynb' for n in removed)}"]))
            return f"{shown}/ {change} {holds}"
        for name, path in new.items():
            kept = {"grade": {c.name for c in old[name].grade_cells},
                    "solution": {c.name for c in old[name].solution_cells},
                    "task": {c.name for c in old[name].task_cells},
                    "source": {c.name for c in old[name].source_cells}}
            planned = planned_cells(nbformat.read(str(path), as_version=4))
            before, now = set().union(*kept.values()), set().union(*planned.values())
            retyped = {name for name in before & now if any((name in planned[k]) != (name in kept[k]) for k in kept)}
            parts = [now - before and f"adds cell {_listed(now - before)}",
                     before - now and f"removes cell {_listed(before - now)}",
                     retyped and f"changes whether cell {_listed(retyped)} is graded, an answer, a task or read-only"]
            change = " and ".join(part for part in parts if part)
            if change:
                return f"{shown}/{path.name} {change} {holds}"
    return None


_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w]+\.)*(\w+(?:Error|Exception): .+)$")
_ERROR_LINE = re.compile(r"^\[(?:\w+ \| )?ERROR\]")  # "[ERROR] ..." (nbgrader's API), "[App | ERROR] ..." (its CLI)


def first_error(log: str) -> str:
    """The first exception nbgrader's log names (``ValidationError: Duplicate grade id: setup``): the cause,
    not the "please see the traceback" lines that follow it."""
    causes = [match.group(1) for match in map(_EXCEPTION_LINE.match, log.splitlines()) if match]
    if causes:
        return causes[0][:300]
    errors = [line.strip() for line in log.splitlines() if _ERROR_LINE.match(line.strip())]
    return (errors or ["it logged no error"])[0][:300]


#: nbgrader's log during :func:`run_generate_assignment`: kept in the call's result only (``capture_log`` adds its
#: handler here), never printed; the subprocess this replaces wrote it to a pipe that only :func:`first_error` read.
_NBGRADER_LOG = logging.getLogger(f"{__name__}.nbgrader")
_NBGRADER_LOG.propagate = False
_NBGRADER_LOG.addHandler(logging.NullHandler())  # no "last resort" printing of its warnings to stderr
_NBGRADER_LOG.setLevel(logging.INFO)  # what the nbgrader command logs by default


@contextlib.contextmanager
def _as_the_command_runs():
    """While nbgrader runs here: PATH with this interpreter's ``bin/`` first (a new gradebook costs nbgrader a run
    of ``alembic``); afterwards PATH and the level of traitlets' logger (``NbGraderAPI`` sets it to INFO before
    it takes the logger it is given) are as they were."""
    shared_log = traitlets_log.get_logger()
    shared_log = getattr(shared_log, "logger", shared_log)  # an Application's log may be a LoggerAdapter
    level = shared_log.level
    with gradebook_copy.nbgrader_path():
        try:
            yield
        finally:
            shared_log.setLevel(level)


def run_generate_assignment(course_dir: Path, assignment: str, *, release_dir: Path, source_dir: Path | None = None,
                            db_url: str | None = None) -> dict:
    """``nbgrader generate_assignment ASSIGNMENT --force`` in this process, with nbgrader's ``NbGraderAPI``.

    The configuration is what the command gets when run in ``course_dir``: the course's ``nbgrader_config.py``
    (loaded afresh, so that no call sees another's settings) with ``CourseDirectory.root`` = ``course_dir``,
    plus the given folders. Not all or nothing by itself: :func:`generate` is.

    Parameters
    ----------
    course_dir : Path
        The course root (``nbgrader_config.py``).
    assignment : str
        The assignment (a folder of the source directory).
    release_dir : Path
        ``c.CourseDirectory.release_directory``: receives ``<assignment>/``.
    source_dir : Path, optional
        ``c.CourseDirectory.source_directory`` (default: the course's).
    db_url : str, optional
        ``c.CourseDirectory.db_url``: the gradebook written (default: the course's).

    Returns
    -------
    dict
        nbgrader's result: ``success`` (bool), ``log`` (its log, str) and, on failure, ``error`` (the traceback, str).
    """
    from nbgrader.apps import NbGraderAPI  # 3.6 s to import, paid by the first call only

    config = course_config(course_dir)
    config.CourseDirectory.root = str(Path(course_dir).resolve())
    config.CourseDirectory.release_directory = str(release_dir)
    if source_dir is not None:
        config.CourseDirectory.source_directory = str(Path(source_dir).resolve())
    if db_url is not None:
        config.CourseDirectory.db_url = db_url
    with _as_the_command_runs():
        try:
            api = NbGraderAPI(coursedir=CourseDirectory(config=config, log=_NBGRADER_LOG), config=config,
                              log=_NBGRADER_LOG)
            return api.generate_assignment(assignment, force=True)
        except Exception:  # noqa: BLE001 — before nbgrader's own capture (a bad setting): failed, as the command would
            return {"success": False, "error": traceback.format_exc()}


def _replace_folder(new: Path, target: Path, trash: Path) -> None:
    """Put ``new`` at ``target`` by renames (``target``'s old contents end in ``trash``): never half-written."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        os.replace(target, trash)
    os.replace(new, target)


def generate(course_dir: Path, assignment: str, release_dir: Path | None = None, *, source_dir: Path | None = None,
             what: str = "make release") -> None:
    """``nbgrader generate_assignment ASSIGNMENT --force``, all or nothing (see the module docstring).

    Parameters
    ----------
    course_dir : Path
        The course root (``nbgrader_config.py``; ``gradebook.db``, made if missing).
    assignment : str
        The assignment to load.
    release_dir : Path, optional
        The release folder that receives ``<assignment>/`` (default: ``course_dir/release``).
    source_dir : Path, optional
        The folder holding ``<assignment>/`` that is loaded (default: ``course_dir/source``).
    what : str
        The command, for the one-line messages (``"make release"``, ``"make grade"``).

    Raises
    ------
    AssignmentChanged
        If the source adds or removes cells or notebooks of an assignment that has submissions (nothing written).
    GenerateFailed
        If nbgrader fails for another reason (the gradebook and the release folder are as they were).
    """
    course_dir = Path(course_dir).resolve()
    release_dir = Path(release_dir or course_dir / "release").resolve()
    refusal = refused_change(course_dir, assignment, source_dir)
    unchanged = f"{release_dir.name}/ and the gradebook are unchanged"
    if refusal:
        raise AssignmentChanged(f"{what} stopped: {refusal}: {WHAT_TO_DO}; {unchanged}")
    gradebook = class_gradebook_file(course_dir)
    release_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{release_dir.name}-{assignment}-", dir=release_dir.parent))
    try:
        scratch_db = work / "gradebook.db"
        if gradebook is not None and gradebook.exists():
            gradebook_copy.snapshot(gradebook, scratch_db)
        elif gradebook is not None:  # the file nbgrader would make, without its run of `alembic heads` each time
            gradebook_copy.new_gradebook(scratch_db, _course_id(course_dir))
        done = run_generate_assignment(
            course_dir, assignment, release_dir=work / "release", source_dir=source_dir,
            db_url=None if gradebook is None else gradebook_copy.sqlite_url(scratch_db))
        if not done["success"]:
            log = "\n".join((done.get("log", ""), done.get("error", "")))
            raise GenerateFailed(f"{what} stopped: nbgrader generate_assignment {assignment} failed "
                                 f"({first_error(log)}); {unchanged}")
        if gradebook is not None:  # one SQLite transaction: a reader sees the old gradebook or the new one
            with contextlib.closing(sqlite3.connect(scratch_db)) as new, \
                    contextlib.closing(sqlite3.connect(gradebook)) as old:
                new.backup(old)
        _replace_folder(work / "release" / assignment, release_dir / assignment, work / "replaced")
    finally:
        shutil.rmtree(work, ignore_errors=True)
