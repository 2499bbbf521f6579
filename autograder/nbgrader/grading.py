"""Grade a class with nbgrader and report the scores per student and step.

Used by ``make grade`` (a real class, course root = the repository) and
``make demo`` (the embedded example class, graded in a temporary course
directory). nbgrader does the work — ``generate_assignment`` to load the
source and hidden tests into the gradebook, then per student ``autograde``
and ``generate_feedback`` in a child process with its own budget
(:mod:`autograder.nbgrader.student_job`), several students at once
(:mod:`autograder.nbgrader.parallel`; the gradebook has one writer) — and this
module reads the gradebook back into a table and ``grades.csv``. Before the
first student it checks that the sandboxed kernel can import what the probes
need (:mod:`autograder.nbgrader.preflight`); a re-run grades only the
submissions whose grade could have changed (:mod:`autograder.nbgrader.fingerprints`).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import (Assignment, Grade, GradeCell, Gradebook, MissingEntry, Notebook, Student, SubmittedAssignment,
                          SubmittedNotebook)
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder import assignments
from autograder.course import COURSE_ID, KERNEL_ENVIRONMENT



def nbgrader_environment() -> dict[str, str]:
    """Environment for nbgrader commands and the kernels they start.

    The interpreter's ``bin/`` goes first on PATH because nbgrader shells out
    to ``alembic`` and starts ``python3`` kernels; the kernels' environment is
    :data:`autograder.course.KERNEL_ENVIRONMENT` (one BLAS thread).
    """
    env = {**os.environ, **KERNEL_ENVIRONMENT}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    return env


def run_nbgrader(course_dir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in ``course_dir``, capturing its log.

    Raises
    ------
    RuntimeError
        If ``check`` and nbgrader exits non-zero; the message ends with its log.
    """
    command = [sys.executable, "-m", "nbgrader", *args]
    result = subprocess.run(command, cwd=course_dir, env=nbgrader_environment(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if check and result.returncode != 0:
        raise RuntimeError(f"`nbgrader {' '.join(args)}` failed in {course_dir}:\n{result.stdout[-6000:]}")
    return result


def course_config(course_dir: Path) -> Config:
    """The course's ``nbgrader_config.py``, loaded as nbgrader loads it (settings of our own classes included)."""
    return PyFileConfigLoader("nbgrader_config.py", path=str(course_dir)).load_config()


def copy_course(repo: Path, target: Path, folders: tuple[str, ...] = ("source",)) -> Path:
    """Make ``target`` a course directory: the repository's ``nbgrader_config.py`` and copies of ``folders``.

    Used wherever grading or a browser session must not touch the repository
    (the example class, the tests).
    """
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "nbgrader_config.py", target / "nbgrader_config.py")
    for folder in folders:
        shutil.copytree(repo / folder, target / folder)
    return target


#: Where grading keeps the source it loaded into the gradebook: ``<course>/gradebook-source/source/<assignment>/``.
GRADED_SOURCE = "gradebook-source"


def graded_source(course_dir: Path) -> Path:
    """The folder whose ``source/<assignment>/`` is the source that ``gradebook.db`` was loaded from (see below)."""
    return Path(course_dir) / GRADED_SOURCE


def load_into_gradebook(course_dir: Path, assignment: str) -> Path:
    """Record the assignment's cells and hidden tests in the gradebook, leaving ``release/`` alone.

    ``generate_assignment`` is what stores the hidden tests that ``autograde``
    restores; its output goes to a scratch folder so that a committed
    ``release/`` is never rewritten by grading. It loads a copy of ``source/<assignment>/`` taken now,
    which is kept, with the gradebook, as ``gradebook-source/source/<assignment>/``: grading reads the
    assignment from there and from the gradebook, never from ``source/`` (an edit of ``source/`` during
    the run reaches no student; the next run loads it). All or nothing
    (:func:`autograder.nbgrader.gradebook_load.generate`).

    Returns
    -------
    Path
        ``gradebook-source/source``, the source directory the students' jobs grade with.

    Raises
    ------
    autograder.nbgrader.gradebook_load.AssignmentChanged
        If ``source/`` adds or removes cells of an assignment with submissions (nothing written).
    autograder.nbgrader.gradebook_load.GenerateFailed
        If nbgrader cannot load it (the gradebook and the kept source are as they were).
    """
    from autograder.nbgrader.gradebook_load import generate

    graded_source(course_dir).mkdir(mode=0o700, exist_ok=True)  # solutions: the instructor's only, like source/
    kept = graded_source(course_dir) / "source"
    kept.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{assignment}-", dir=kept) as scratch:
        taken = Path(scratch) / "source"
        shutil.copytree(Path(course_dir) / "source" / assignment, taken / assignment,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        generate(course_dir, assignment, Path(scratch) / "release", source_dir=taken, what="make grade")
        if (kept / assignment).exists():
            os.replace(kept / assignment, Path(scratch) / "replaced")
        os.replace(taken / assignment, kept / assignment)
    return kept


@dataclass
class StudentResult:
    """Scores of one student on one assignment: step → (score, max), or None if not graded.

    ``named`` lists the known mistakes the grader named (see
    ``autograder.grader.comparison``); ``note`` is a one-line reason when the
    submission was not graded or its kernel was stopped.
    """

    student: str
    steps: dict[str, tuple[float, float]] | None
    note: str = ""
    named: list[str] = field(default_factory=list)
    unchanged: bool = False  # not graded again: nothing its grade depends on changed since it was graded
    #: grade_id → the autograder's score, for each step whose score is a manual one given in Formgrader
    manual: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(score for score, _ in self.steps.values()) if self.steps else 0.0


def score_text(value: float) -> str:
    """A score as people read it: at most two decimals, no trailing zeros (``0.43``, ``1.5``, ``3``; never ``0.428571``)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def step_score_text(result: "StudentResult", grade_id: str) -> str:
    """``score/max`` of one step, marked ``(manual)`` when the score is a manual one given in Formgrader."""
    score, maximum = result.steps[grade_id]
    return f"{score_text(score)}/{score_text(maximum)}" + (" (manual)" if grade_id in result.manual else "")


def step_name(grade_id: str, assignment: str | None = None) -> str:
    """Column name for a test cell: the step's title in ``autograder.assignment<N>``, else the grade_id sans ``test_``."""
    if assignment is not None:
        try:
            return assignments.get(assignment).step(grade_id).title
        except KeyError:
            pass
    return grade_id.removeprefix("test_")


def read_results(course_dir: Path, assignment: str, students: list[str],
                 problems: dict[str, str] | None = None,
                 job_notes: dict[str, list[str]] | None = None) -> tuple[list[str], list[StudentResult]]:
    """Read autograded scores from the gradebook.

    Parameters
    ----------
    problems : dict, optional
        student → reason the submission was not graded; such students are reported as not graded.
    job_notes : dict, optional
        student → notes from grading them (extra files left out, ...), added to the table's notes.

    Returns
    -------
    steps : list of str
        Test-cell grade ids in notebook order.
    results : list of StudentResult
        One per student, ``steps=None`` (with a note saying why) when nbgrader did
        not autograde every cell of the submission.
    """
    problems = problems or {}
    job_notes = job_notes or {}
    from autograder.nbgrader.gradebook_copy import class_gradebook_url

    db_url = class_gradebook_url(course_dir)
    results = []
    with Gradebook(db_url, course_id=COURSE_ID) as gradebook:
        cells = code_grade_cells(gradebook, assignment)
        submitted, grades = assignment_grades(gradebook, assignment)
    steps = [name for _, name, _ in cells]
    for student in students:
        if student in problems:
            results.append(StudentResult(student, None, f"not graded: {problems[student]}"))
            continue
        try:
            if student not in submitted:
                raise MissingEntry(f"No such submission: {assignment} for {student}")  # nbgrader's words
            scores, manual = {}, {}
            for notebook, cell, max_score in cells:
                grade = grades.get((student, notebook, cell))
                if grade is None:
                    raise MissingEntry(f"No such grade: {assignment}/{notebook}/{cell} for {student}")
                if grade.auto_score is None:  # nbgrader kept the submission but could not run it
                    raise MissingEntry(f"{cell} was not autograded")
                scores[cell] = (float(grade.score), float(max_score))
                if grade.manual_score is not None:  # given in Formgrader: grade.score is it, not the autograder's
                    manual[cell] = float(grade.auto_score)
            note, named = _grading_notes(course_dir, assignment, student)
            if manual:
                note = "; ".join(filter(None, [note, "manual score in Formgrader: " + ", ".join(
                    f"{step_name(cell, assignment)} (autograder {score_text(auto)})" for cell, auto in manual.items())]))
            note = "; ".join(filter(None, [note, *job_notes.get(student, [])]))
            results.append(StudentResult(student, scores, note, named, manual=manual))
        except MissingEntry as missing:
            results.append(StudentResult(student, None, f"not graded: the gradebook has no score for it ({missing})"))
    return steps, results


def code_grade_cells(gradebook: Gradebook, assignment: str) -> list[tuple[str, str, float]]:
    """(notebook name, grade cell name, max score) of each code grade cell of ``assignment``, in notebook order.

    Raises
    ------
    nbgrader.api.MissingEntry
        If the gradebook has no such assignment.
    """
    return [(nb.name, cell.name, cell.max_score) for nb in gradebook.find_assignment(assignment).notebooks
            for cell in nb.grade_cells if cell.cell_type == "code"]


@dataclass(frozen=True)
class CellGrade:
    """One ``nbgrader.api.Grade`` row's scores (``score`` is nbgrader's: the manual score when there is one)."""

    auto_score: float | None
    manual_score: float | None
    score: float


def assignment_grades(gradebook: Gradebook, assignment: str) -> tuple[set[str], dict[tuple[str, str, str], CellGrade]]:
    """Who submitted ``assignment`` and every grade of its grade cells, read in two queries.

    What ``Gradebook.find_submission`` and ``Gradebook.find_grade`` give one student and one cell at a time (the
    same joins of nbgrader's tables, through its public models and session): at one query per cell of each
    student, reading a class's grades cost about 50 ms a student (2 s at 40, 10 s at 200, in every re-run).

    Parameters
    ----------
    gradebook : nbgrader.api.Gradebook
        An open gradebook.
    assignment : str
        The assignment's name.

    Returns
    -------
    submitted : set of str
        The ids of the students with a submission of ``assignment``.
    grades : dict
        (student id, notebook name, grade cell name) → :class:`CellGrade`, for every grade of a grade cell.
    """
    db = gradebook.db
    submitted = {student for (student,) in db.query(Student.id)
                 .join(SubmittedAssignment, SubmittedAssignment.student_id == Student.id)
                 .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
                 .filter(Assignment.name == assignment)}
    rows = (db.query(Student.id, Notebook.name, GradeCell.name, Grade.auto_score, Grade.manual_score, Grade.score)
            .select_from(Grade)
            .join(GradeCell, GradeCell.id == Grade.cell_id)
            .join(SubmittedNotebook, SubmittedNotebook.id == Grade.notebook_id)
            .join(Notebook, (Notebook.id == SubmittedNotebook.notebook_id) & (Notebook.id == GradeCell.notebook_id))
            .join(SubmittedAssignment, SubmittedAssignment.id == SubmittedNotebook.assignment_id)
            .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
            .join(Student, Student.id == SubmittedAssignment.student_id)
            .filter(Assignment.name == assignment))
    return submitted, {(student, notebook, cell): CellGrade(auto, manual, score)
                       for student, notebook, cell, auto, manual, score in rows}


def _grading_notes(course_dir: Path, assignment: str, student: str) -> tuple[str, list[str]]:
    """(note, named mistakes) that the grading preprocessors left in the autograded notebooks.

    The note says why a kernel was stopped and which steps are still the release's stub ("unanswered").
    """
    notes, named, unanswered, steps = [], [], [], 0
    for path in sorted((course_dir / "autograded" / student / assignment).glob("*.ipynb")):
        try:
            # the metadata only, without nbformat's validation of every cell: ~10 ms a student, in every re-run
            meta = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("attention_lab", {})
        except Exception:  # noqa: BLE001 — the scores are in the gradebook; notes are a bonus
            continue
        execution = meta.get("execution") or {}
        if execution.get("status") not in (None, "ok"):
            notes.append(str(execution.get("reason", execution["status"]))[:200])
        edits = [line for line in meta.get("metadata_edits", []) if not line.startswith("copied cell")]
        copies = [line for line in meta.get("metadata_edits", []) if line.startswith("copied cell")]
        if edits:
            notes.append("metadata edited: " + "; ".join(edits)[:300])
        notes += copies[:3]
        if meta.get("restored_cells"):
            notes.append("restored from the gradebook: " + ", ".join(
                line.split(":")[0] for line in meta["restored_cells"])[:200])
        if meta.get("sanitized"):
            notes.append(f"content that could run in a browser removed (cells {', '.join(meta['sanitized'])[:60]})")
        grading = meta.get("grading") or {}
        for grade_id in sorted(grading, key=lambda g: _step_order(assignment).get(g, len(grading))):
            steps += 1
            named.extend(key for key in grading[grade_id].get("named", []) if key not in named)
            if grading[grade_id].get("unanswered"):
                unanswered.append(step_name(grade_id, assignment))
    if unanswered:
        notes.append("unanswered" if len(unanswered) == steps else f"unanswered: {', '.join(unanswered)}")
    return "; ".join(notes), named


def _step_order(assignment: str) -> dict[str, int]:
    """grade_id → position of its step in ``autograder.assignment<N>`` (empty for an unknown assignment)."""
    try:
        return {step.grade_id: i for i, step in enumerate(assignments.get(assignment).steps)}
    except KeyError:
        return {}


def format_table(steps: list[str], results: list[StudentResult], assignment: str | None = None) -> str:
    """Plain-text table: one row per student, one column per step, the total, and notes.

    The notes column names the known mistakes found and why a kernel was
    stopped, or why a submission was not graded. A manual score given in Formgrader is marked
    ``(manual)`` (:func:`step_score_text`); scores have at most two decimals (:func:`score_text`).
    """
    headers = ["student", *(step_name(s, assignment) for s in steps), "total", "notes"]
    maximum = None
    rows = []
    for result in results:
        if result.steps is None:
            rows.append([result.student, *("–" for _ in steps), "–", result.note])
            continue
        maximum = sum(m for _, m in result.steps.values())
        notes = "; ".join(filter(None, [result.note, ", ".join(result.named)]))
        rows.append([result.student, *(step_score_text(result, s) for s in steps),
                     f"{score_text(result.total)}/{score_text(maximum)}", notes])
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [headers, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_csv(path: Path, assignment: str, steps: list[str], results: list[StudentResult]) -> None:
    """Write ``grades.csv``: student, assignment, one score column per step, total, max score, note."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "assignment", *(step_name(s, assignment) for s in steps), "total", "max_score",
                         "note", "mistakes"])
        for result in results:
            if result.steps is None:
                writer.writerow([result.student, assignment, *("" for _ in steps), "", "", result.note, ""])
            else:
                maximum = sum(m for _, m in result.steps.values())
                writer.writerow([result.student, assignment, *(f"{result.steps[s][0]:g}" for s in steps),
                                 f"{result.total:g}", f"{maximum:g}", result.note, " ".join(result.named)])


def write_class_csv(path: Path, results: dict[str, tuple[list[str], list[StudentResult]]]) -> None:
    """Write the class overview ``grades.csv`` (one row per student and assignment) and, beside it,
    ``grades-<assignment>.csv`` with one column per step (:func:`write_csv`)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "assignment", "total", "max_score", "note", "mistakes"])
        for assignment, (_, rows) in results.items():
            for result in rows:
                maximum = sum(m for _, m in result.steps.values()) if result.steps else None
                writer.writerow([result.student, assignment, f"{result.total:g}" if result.steps else "",
                                 f"{maximum:g}" if maximum is not None else "", result.note, " ".join(result.named)])
    for assignment, (steps, rows) in results.items():
        write_csv(path.parent / f"grades-{assignment}.csv", assignment, steps, rows)


def grade_class(course_dir: Path, assignment: str, students: list[str], workers: int | None = None,
                force: bool = False, progress: bool | None = None,
                scheduler: str | None = None, unsandboxed_ok: bool = False) -> tuple[list[str], list[StudentResult]]:
    """Autograde every submission of ``assignment`` in ``course_dir/submitted`` and write feedback.

    Each student is graded on their own (:class:`autograder.nbgrader.student_job.StudentJob`: a child
    process with a memory and a wall-clock budget), up to ``workers`` at once
    (:func:`autograder.nbgrader.parallel.grade_students`); a submission that cannot be graded is
    reported with its reason and the others are graded.

    Parameters
    ----------
    course_dir : Path
        The course root: ``nbgrader_config.py``, ``source/``, ``submitted/``; ``gradebook.db`` is made if missing.
    assignment : str
        The assignment id (a folder of ``source/``).
    students : list of str
        Student ids with a submission in ``submitted/<student>/<assignment>/``.
    workers : int, optional
        Students graded at once (default: the cores this process may use).
    force : bool
        Grade every submission again, also those whose submission, assignment source, spec and grader
        version are unchanged since they were graded (``gradebook-hashes.json``).
    progress : bool, optional
        A progress bar with the ETA on stderr (default: when stderr is a terminal).
    scheduler : str, optional
        Address of a Dask distributed scheduler (``tcp://host:8786``): the students' jobs run on its workers
        (:mod:`autograder.nbgrader.dask_executor`) instead of on ``workers`` local cores; this process stays
        the gradebook's only writer.
    unsandboxed_ok : bool
        Accept a course configuration whose kernels run outside the sandbox
        (:class:`autograder.sandbox.unsandboxed.UnsandboxedExecute`): only ``python -m autograder check``, a
        learner grading their own notebook, passes True.

    Returns
    -------
    steps : list of str
        Test-cell grade ids in notebook order.
    results : list of StudentResult
        Per student, read back from the gradebook (``unchanged`` for those not graded again).

    Raises
    ------
    autograder.nbgrader.preflight.GradingStopped
        Before the first student, when the course's sandboxed kernel cannot import what the probes need
        (then no gradebook row is written), or when the course's pipeline runs kernels outside the sandbox
        and ``unsandboxed_ok`` is False.
    autograder.nbgrader.gradebook_load.AssignmentChanged
        Before the first student, when ``source/`` adds or removes cells of an assignment with submissions
        (nbgrader refuses it; nothing is written: start a new cohort, or undo the change).
    autograder.nbgrader.gradebook_load.GenerateFailed
        Before the first student, when nbgrader cannot load the source into the gradebook.
    """
    from autograder.nbgrader import fingerprints, parallel, student_job
    from autograder.nbgrader.preflight import GradingStopped
    from autograder.nbgrader.submission_limits import quarantine, student_id_problem
    from autograder.sandbox.unsandboxed import allowed_unsandboxed

    course_dir = Path(course_dir).resolve()
    if not unsandboxed_ok and allowed_unsandboxed(course_config(course_dir).Autograde.get("autograde_preprocessors")):
        raise GradingStopped(f"grading stopped: {course_dir / 'nbgrader_config.py'} runs learners' code outside "
                             "the grading sandbox (UnsandboxedExecute), which only `python -m autograder check` "
                             "may do, on a learner's own notebook")
    record = fingerprints.GradingRecord(course_dir)
    grader = fingerprints.grader_version(course_dir)
    problems, notes, hashes, unchanged, to_grade = {}, {}, {}, set(), []
    still_graded = _autograded_students(course_dir, assignment)
    source, spec = fingerprints.tree_hash(course_dir / "source" / assignment), fingerprints.spec_hash(assignment)
    for student in students:
        unsafe = student_id_problem(student)
        if unsafe:  # never graded, and moved where Formgrader does not list it
            moved = quarantine(course_dir, student).relative_to(course_dir)
            problems[student] = f"{unsafe}; moved to {moved}/"
            record.forget(assignment, student, problems[student])
            continue
        hashes[student] = fingerprints.fingerprint(course_dir, assignment, student, grader, source, spec)
        if not force and student in still_graded and record.unchanged(assignment, student, hashes[student]):
            unchanged.add(student)
            notes[student] = record.notes(assignment, student)
        else:
            to_grade.append(student)
    if to_grade:
        from autograder.nbgrader.cohorts import cohort_seed
        from autograder.nbgrader.gradebook_load import WHAT_TO_DO, AssignmentChanged, refused_change
        from autograder.nbgrader.preflight import GradingStopped

        refusal = refused_change(course_dir, assignment)  # before the kernel check: it takes seconds
        if refusal:
            raise AssignmentChanged(f"make grade stopped: {refusal}: {WHAT_TO_DO}; nothing was graded")
        try:
            cohort_seed(course_dir)  # every job reads it: a malformed one stops the run, not each student
        except ValueError as malformed:
            raise GradingStopped(f"grading stopped before the first student: {malformed}") from None
        cluster = None
        if scheduler:  # connects and checks every worker as _require_probe_kernel checks this machine
            from autograder.nbgrader.dask_executor import DaskGrader

            cluster = DaskGrader(scheduler, course_dir, assignment, grader)
        else:
            _require_probe_kernel(course_dir)
        try:  # the known mistakes are built now, in this process, which every job is forked from
            assignments.get(assignment)
        except KeyError:
            pass
        # generate_assignment costs 5-7 s of a re-run's fixed cost: skip it when the gradebook (and the source kept
        # with it, which the jobs grade from) already hold this very source, loaded by this grader
        if not (already_loaded(course_dir, assignment, record, grader)
                and (graded_source(course_dir) / "source" / assignment).is_dir()):
            load_into_gradebook(course_dir, assignment)
            record.loaded(assignment, fingerprints.loaded_source_fingerprint(course_dir, assignment, grader))
        # The jobs are forked from this process: what each would load first is loaded once, now. A lone job
        # (a re-run adding one student, `python -m autograder check`) would load it once all the same, and in
        # this process it only runs before the job forks instead of in it: about half a second of the re-run.
        if cluster is None and len(to_grade) > 1:
            _warm_jobs(course_dir, assignment)
        budget = student_job.StudentBudget(config=course_config(course_dir))
        with open(course_dir / "grading.log", "a") as log:
            log.write(f"==== {assignment} ====\n")

            def done(job: student_job.JobResult) -> None:
                log.write(f"---- {job.student} ----\n{job.log}\n")
                log.flush()
                notes[job.student] = job.notes
                if job.graded:
                    record.graded(assignment, job.student, hashes[job.student], job.notes)
                else:
                    problems[job.student] = job.reason
                    record.forget(assignment, job.student, job.reason)

            if cluster is not None:
                try:
                    cluster.grade_students(to_grade, budget, progress, on_done=done)
                finally:
                    cluster.close()
            else:
                parallel.grade_students(course_dir, assignment, to_grade, budget, workers, progress, on_done=done)
    steps, results = read_results(course_dir, assignment, students, problems, notes)
    for result in results:
        result.unchanged = result.student in unchanged
    return steps, results


def _warm_jobs(course_dir: Path, assignment: str) -> None:
    """:func:`autograder.nbgrader.job_warmup.warm_jobs` on the source the jobs grade with; never stops grading.

    A source notebook the feedback export fails on only loses the head start: each job then reports its own
    failure for its student, as without the warm-up.
    """
    from autograder.nbgrader.job_warmup import warm_jobs, warm_reference_outputs

    try:
        warm_jobs(course_dir, graded_source(course_dir) / "source", assignment)
        warm_reference_outputs(course_dir, assignment)
    except Exception as error:  # noqa: BLE001 — an optimisation; the jobs do (and report) the real work
        with open(course_dir / "grading.log", "a") as log:
            log.write(f"warming the grading jobs up failed (each job loads what it needs): "
                      f"{type(error).__name__}: {error}\n")


def _require_probe_kernel(course_dir: Path) -> None:
    """:func:`autograder.nbgrader.preflight.require_probe_kernel_once`: once per kernel configuration and process."""
    from autograder.nbgrader import preflight

    preflight.require_probe_kernel_once(course_dir)


def already_loaded(course_dir: Path, assignment: str, record, grader: str) -> bool:
    """Whether ``generate_assignment`` can be skipped: the gradebook holds ``assignment``, loaded (as
    ``record`` says) from the very source folder now on disk by the same grader (``grader``: its version hash).

    Parameters
    ----------
    record : autograder.nbgrader.fingerprints.GradingRecord
        The course's grading record.
    """
    from autograder.nbgrader import fingerprints

    return (record.loaded_source(assignment) == fingerprints.loaded_source_fingerprint(course_dir, assignment, grader)
            and _gradebook_holds(course_dir, assignment))


def _gradebook_holds(course_dir: Path, assignment: str) -> bool:
    """Whether the course's gradebook has ``assignment`` with at least one notebook and grade cell."""
    from autograder.nbgrader.gradebook_copy import class_gradebook_url, gradebook_exists

    url = class_gradebook_url(course_dir)  # SQLite or nbgrader's db_url (PostgreSQL)
    if not gradebook_exists(url):
        return False
    with Gradebook(url, course_id=COURSE_ID) as gradebook:
        try:
            return any(nb.grade_cells for nb in gradebook.find_assignment(assignment).notebooks)
        except MissingEntry:
            return False


def _autograded_students(course_dir: Path, assignment: str) -> set[str]:
    """Students whose submission of ``assignment`` has every code grade cell autograded, and their feedback."""
    from autograder.nbgrader.gradebook_copy import class_gradebook_url, gradebook_exists

    url = class_gradebook_url(course_dir)
    if not gradebook_exists(url):
        return set()
    with Gradebook(url, course_id=COURSE_ID) as gradebook:
        try:
            cells = code_grade_cells(gradebook, assignment)
        except MissingEntry:
            return set()
        submitted, grades = assignment_grades(gradebook, assignment)
    return {student for student in submitted
            if all(getattr(grades.get((student, notebook, cell)), "auto_score", None) is not None
                   for notebook, cell, _ in cells)
            and (course_dir / "feedback" / student / assignment).is_dir()}


def submitted_students(course_dir: Path, assignment: str) -> list[str]:
    """Student ids with a folder ``submitted/<student>/<assignment>``, sorted."""
    submitted = course_dir / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder grade [ASSIGNMENT ...] [--workers N | --scheduler ADDRESS] [--force]``: grade the real
    class in the course root.

    Returns 0 when the class was graded (students that could not be graded are listed with their reason),
    1 when grading could not start (one line on stderr says why).
    """
    import argparse

    from autograder.nbgrader.gradebook_load import AssignmentChanged, GenerateFailed
    from autograder.nbgrader.parallel import default_workers
    from autograder.nbgrader.preflight import GradingStopped

    parser = argparse.ArgumentParser(description="Autograde submitted/ with nbgrader and print a table.")
    parser.add_argument("assignments", nargs="*", help="assignment names (default: every folder in source/)")
    parser.add_argument("--course-dir", type=Path, default=Path.cwd())
    parser.add_argument("--workers", type=int, default=default_workers(),
                        help="students graded at once, each in its own sandboxed process (default: the cores, "
                             "%(default)s here)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="grade on the workers of this Dask distributed scheduler (tcp://host:8786) instead of "
                             "on this machine's cores; this machine stays the gradebook's only writer")
    parser.add_argument("--force", action="store_true",
                        help="grade every submission again, also those unchanged since they were graded")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    course_dir = args.course_dir.resolve()
    if not (course_dir / "source").is_dir():
        print(f"grading stopped: {course_dir} is not a course directory (no source/ folder)", file=sys.stderr)
        return 1
    assignments = args.assignments or sorted(p.name for p in (course_dir / "source").iterdir() if p.is_dir())
    graded_any = False
    for assignment in assignments:
        students = submitted_students(course_dir, assignment)
        if not students:
            print(f"{assignment}: nothing in submitted/<student>/{assignment}/ to grade")
            continue
        graded_any = True
        try:
            steps, results = grade_class(course_dir, assignment, students, workers=args.workers, force=args.force,
                                         scheduler=args.scheduler)
        except (GradingStopped, AssignmentChanged, GenerateFailed) as stopped:
            print(stopped, file=sys.stderr)
            return 1
        out = course_dir / f"grades-{assignment}.csv"
        write_csv(out, assignment, steps, results)
        print(f"\n{assignment}: {len(students)} submission(s)\n")
        print(format_table(steps, results, assignment))
        kept = sum(r.unchanged for r in results)
        if kept:
            print(f"\n{kept} submission(s) unchanged since they were graded: not graded again (--force grades them)")
        failed = [r for r in results if r.steps is None]
        if failed:
            print(f"\nnot graded ({len(failed)}):")
            for result in failed:
                print(f"  {result.student}: {result.note.removeprefix('not graded: ')}")
        print(f"\ngrades: {out}\nfeedback: {course_dir / 'feedback'}/<student>/{assignment}/\n"
              f"nbgrader log: {course_dir / 'grading.log'}")
    if not graded_any:
        print("Put submissions in submitted/<student>/<assignment>/<notebook>.ipynb "
              "(nbgrader collect does this), then run `make grade` again.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
