"""Grade one student — autograde and feedback — in a child process with a memory and a wall-clock budget.

The unit of work is :func:`grade_student`: input a course directory, an
assignment and a student; output a small :class:`JobResult`. It runs nbgrader
through its public Python API (``NbGraderAPI.autograde`` and
``.generate_feedback``) and reads the outcome from their return values.
:func:`run_student` runs it in a forked child process with an address-space
limit (``RLIMIT_AS``) and kills it when its wall clock runs out; either way
the next student is graded, and a student whose grading did not finish
leaves no partial gradebook rows (removed with ``Gradebook.remove_submission``)
and no half-written ``autograded/`` or ``feedback/`` folder.

The child never writes the class gradebook: it autogrades into its own copy
(``c.CourseDirectory.db_url``) and sends back the rows it wrote, which the
calling process writes into the class gradebook it holds open
(:class:`autograder.nbgrader.gradebook_copy.ClassGradebook`), so
that several jobs can run at once with one writer
(:mod:`autograder.nbgrader.parallel`). :class:`StudentJob` is one such job,
started and finished by its caller; :func:`run_student` grades one student
with it.

Budgets are set in ``nbgrader_config.py``, e.g.
``c.StudentBudget.wall_clock_seconds = 600``.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from traitlets import Integer
from traitlets.config import Configurable

from autograder.course import COURSE_ID
from autograder.nbgrader import gradebook_copy
from autograder.nbgrader.grading import course_config, graded_source
from autograder.sandbox import SandboxedKernelManager
from autograder.nbgrader.sanitize import inert_text
from autograder.nbgrader.submission_limits import (SubmissionLimits, byte_size, extra_files, student_id_problem,
                                         submission_problem)

LOG_LIMIT = 200_000  # characters of a job's nbgrader log kept for grading.log


class StudentBudget(Configurable):
    """What grading one student (autograde + feedback) may cost (``c.StudentBudget.<name>``)."""

    wall_clock_seconds = Integer(
        300, help="Seconds for one student's autograde and feedback together; then the job is killed.").tag(config=True)
    memory_bytes = Integer(
        6 * 2**30, help="Address-space limit of the process grading one student, bytes (RLIMIT_AS).").tag(config=True)


@dataclass
class JobResult:
    """What grading one student did: graded or not (with a one-line reason), notes for the table, the log."""

    student: str
    graded: bool
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    log: str = ""
    peak_memory: int = 0  # bytes of address space the job's process reached (0: unknown)
    seconds: float = 0.0  # wall clock of the whole job
    rows: dict | None = None  # what autograde wrote in the job's gradebook (gradebook_copy.submission_data), if graded


def _failure(result: dict) -> str:
    """The specific error of a failed nbgrader API call: the last exception line it logged or raised."""
    lines = [line.strip() for text in (result.get("log", ""), result.get("error", ""))
             for line in text.splitlines()]
    errors = [line for line in lines if line and (line.split(":")[0].endswith(("Error", "Exception", "Exit"))
                                                   or line.startswith(("KeyError", "MemoryError")))]
    errors = [line for line in errors if "Please see the error log" not in line and "NbGraderException" not in line]
    return errors[-1][:200] if errors else "nbgrader stopped without saying why"


def grade_student(course_dir: Path, assignment: str, student: str, db_url: str | None = None) -> JobResult:
    """Autograde one student's submission and write their feedback, with nbgrader's Python API.

    Parameters
    ----------
    course_dir : Path
        The course root (``nbgrader_config.py``, ``gradebook.db``, ``submitted/``).
    assignment, student : str
        Which submission: ``submitted/<student>/<assignment>/``.
    db_url : str, optional
        The gradebook nbgrader writes (``c.CourseDirectory.db_url``; default: the course's ``gradebook.db``).

    Returns
    -------
    JobResult
        ``graded=False`` with a one-line reason when the student id, the
        submission (size, cells, outputs, file names) or nbgrader refused it.
        Extra files in the submission folder are not copied anywhere (a note
        names them): nbgrader would copy them into ``autograded/`` and
        ``feedback/``, which Formgrader serves in the instructor's origin.
    """
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    problem = student_id_problem(student)
    if problem:
        return JobResult(student, False, problem)
    config = course_config(course_dir)
    limits = SubmissionLimits(config=config)
    folder = course_dir / "submitted" / student / assignment
    notebooks = gradebook_notebooks(db_url or class_gradebook(course_dir), assignment)
    problem = submission_problem(folder, notebooks, limits)
    if problem:
        return JobResult(student, False, problem)
    extra = extra_files(folder, notebooks)
    notes = [f"extra files not copied: {', '.join(inert_text(f, 40) for f in extra[:5])}"
             + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")] if extra else []
    config = source_config(course_dir, assignment, config)
    if db_url is not None:
        config.CourseDirectory.db_url = db_url
    ignore = list(CourseDirectory.class_traits()["ignore"].default())
    config.CourseDirectory.ignore = ignore + ["*", ".*"]  # grading copies no file but the notebooks
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    budget = StudentBudget(config=config).memory_bytes
    over_memory = f"grading it went over the memory budget of {byte_size(budget)} (StudentBudget.memory_bytes)"
    kernel_limit = config.SandboxedKernelManager.get(
        "memory_limit", SandboxedKernelManager.class_traits()["memory_limit"].default())
    log = ""
    for step, call in (("grade it", lambda: api.autograde(assignment, student, force=True, create=True)),
                       ("write the feedback", lambda: api.generate_feedback(assignment, student, force=True))):
        result = call()
        log += result.get("log", "")
        if not result.get("success"):
            failure = _failure(result)
            reason = f"nbgrader could not {step}: {failure}"
            if failure.startswith("MemoryError") or _vm_peak() > budget - 64 * 2**20:
                reason = over_memory
            elif kernel_limit > budget and "sandbox did not start" in failure:
                reason = f"{over_memory}: the kernel, limited to it, could not start"
            return JobResult(student, False, reason, notes, log)
    return JobResult(student, True, "", notes, log)


def source_config(course_dir: Path, assignment: str, config=None):
    """``config`` (default: the course's) with the course root and the source the gradebook was loaded from.

    The source is ``gradebook-source/source/`` when it holds the assignment (see
    :func:`autograder.nbgrader.grading.load_into_gradebook`), never ``source/`` as it is now. Every job
    grades with this configuration, and the grading process builds its graders from it before it forks them
    (:func:`autograder.nbgrader.job_warmup.warm_reference_outputs`).
    """
    config = course_config(course_dir) if config is None else config
    config.CourseDirectory.root = str(course_dir)
    kept = graded_source(course_dir) / "source"
    if (kept / assignment).is_dir():
        config.CourseDirectory.source_directory = str(kept)
    return config


def gradebook_notebooks(db_url: str, assignment: str) -> list[str]:
    """File names of the assignment's notebooks as the gradebook holds them (``[]`` if it does not know it)."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url, course_id=COURSE_ID) as gradebook:
        try:
            return sorted(f"{notebook.name}.ipynb" for notebook in gradebook.find_assignment(assignment).notebooks)
        except MissingEntry:
            return []


def _vm_peak() -> int:
    """This process's peak address space, bytes (what RLIMIT_AS limits), or 0 if /proc does not say."""
    try:
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmPeak:"))
        return int(line.split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        return 0


def _child(connection, course_dir: Path, assignment: str, student: str, memory_bytes: int, log_path: str,
           db_url: str) -> None:
    """In the child: own process group, the memory limit, output to a log file, then the job."""
    os.setpgrp()
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    with open(log_path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    os.chdir(course_dir)
    try:
        result = grade_student(course_dir, assignment, student, db_url)
        if result.graded:  # read here, in parallel with the other jobs: the parent only writes them
            try:
                result.rows = gradebook_copy.submission_data(db_url, assignment, student)
            except Exception as error:  # noqa: BLE001 — this student is then not graded, with the reason
                result = JobResult(student, False, "its grades could not be read from the job's gradebook: "
                                                   f"{type(error).__name__}: {error}"[:300], result.notes, result.log)
    except MemoryError:
        result = JobResult(student, False, f"grading it went over the memory budget of {byte_size(memory_bytes)} "
                                           "(StudentBudget.memory_bytes)")
    except BaseException:  # noqa: BLE001 — whatever happened, the parent gets one line
        result = JobResult(student, False, f"grading it failed: {traceback.format_exc().strip().splitlines()[-1][:200]}")
    result.peak_memory = _vm_peak()
    try:
        connection.send(result)
    except MemoryError:
        connection.send(JobResult(student, False, f"grading it went over the memory budget of {byte_size(memory_bytes)}"))
    finally:
        connection.close()


def remove_partial_grades(course_dir: Path, assignment: str, student: str, student_existed: bool,
                          gradebook: gradebook_copy.ClassGradebook) -> None:
    """Remove what a grading that did not finish left: its rows in ``gradebook`` (the class gradebook its writer
    holds open) and its output folders."""
    gradebook.remove_submission(assignment, student, remove_student=not student_existed)
    for folder in ("autograded", "feedback"):
        shutil.rmtree(course_dir / folder / student / assignment, ignore_errors=True)
        with contextlib.suppress(OSError):  # the student's folder too, unless another assignment is in it
            (course_dir / folder / student).rmdir()


def class_gradebook(course_dir: Path) -> str:
    """nbgrader ``db_url`` of the course's gradebook (:func:`autograder.nbgrader.gradebook_copy.class_gradebook_url`)."""
    return gradebook_copy.class_gradebook_url(course_dir)


class StudentJob:
    """One student's :func:`grade_student` in a forked child, within ``budget``, autograding into ``job_gradebook``.

    The caller starts it (:meth:`start`), waits until :attr:`connection` is readable
    (``multiprocessing.connection.wait``) or :attr:`deadline` has passed, then
    calls :meth:`finish`; :meth:`settle` then writes the outcome into the class
    gradebook. Jobs start from the caller's thread: the parent runs no threads,
    so forking it is safe.

    Parameters
    ----------
    course_dir : Path
        The course root (resolved).
    assignment, student : str
        Which submission.
    budget : StudentBudget
        Wall clock and memory for the whole job.
    job_gradebook : Path
        The job's own SQLite gradebook, made from the class gradebook
        (:class:`autograder.nbgrader.gradebook_copy.JobGradebooks`).
    gradebook : autograder.nbgrader.gradebook_copy.ClassGradebook
        The class gradebook, held open by the caller (its only writer) for all its jobs.
    """

    def __init__(self, course_dir: Path, assignment: str, student: str, budget: StudentBudget,
                 job_gradebook: Path, gradebook: gradebook_copy.ClassGradebook):
        self.course_dir, self.assignment, self.student = Path(course_dir), assignment, student
        self.budget, self.job_gradebook, self.gradebook = budget, Path(job_gradebook), gradebook
        self.existed = gradebook.has_student(student)
        self.process = self.connection = self.log = None
        self.started = self.deadline = 0.0

    def start(self) -> None:
        """Fork the child (its own process group, the memory limit, output to a log file) and start its clock."""
        context = multiprocessing.get_context("fork")  # the parent's imports and caches come along
        self.connection, send = context.Pipe(duplex=False)
        self.log = tempfile.NamedTemporaryFile("w+", prefix="attention-lab-job-", suffix=".log")
        self.process = context.Process(target=_child, daemon=True, args=(
            send, self.course_dir, self.assignment, self.student, self.budget.memory_bytes, self.log.name,
            gradebook_copy.sqlite_url(self.job_gradebook)))
        self.started = time.monotonic()
        self.deadline = self.started + self.budget.wall_clock_seconds
        # The child's garbage collector leaves alone what it inherits (gc.freeze, as Python's documentation
        # advises before a fork): its full collections would otherwise walk the whole parent's heap (in a test
        # process, every module's objects; measured up to 0.15-0.19 CPU-s a job) and copy every page they touch. Only the
        # child keeps them frozen; this process collects as before.
        gc.freeze()
        try:
            self.process.start()
        finally:
            gc.unfreeze()
        send.close()

    def finish(self) -> JobResult:
        """The child's result; a child that died or is past its deadline is killed with its process group.

        Returns
        -------
        JobResult
            Also for a job that was killed ("took longer than the wall-clock budget of N s") or died
            ("the grading process stopped (SIGSEGV) ..."); ``log`` holds everything the child wrote.
        """
        result = None
        in_time = self.connection.poll(max(0.0, self.deadline - time.monotonic()))
        if in_time:  # a result, or the child's end of the pipe closing
            with contextlib.suppress(EOFError, OSError):
                result = self.connection.recv()
        if result is None:
            if in_time:
                self.process.join(30)  # it closed the pipe by dying: wait for its exit status
            code = self.process.exitcode
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)  # the job and what it started in its process group
            self.process.join()
            if code is None:
                reason = (f"grading it took longer than the wall-clock budget of {self.budget.wall_clock_seconds} s "
                          "(StudentBudget.wall_clock_seconds), so it was stopped")
            else:
                name = signal.Signals(-code).name if code < 0 else f"exit code {code}"
                reason = (f"the grading process stopped ({name}); it may have gone over the memory budget of "
                          f"{byte_size(self.budget.memory_bytes)} (StudentBudget.memory_bytes)")
            result = JobResult(self.student, False, reason)
        self.process.join(30)
        if self.process.exitcode is None:  # it sent its result but does not exit
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.join()
        self.connection.close()
        result.seconds = time.monotonic() - self.started
        self.log.seek(0)
        child_output = self.log.read()[-LOG_LIMIT:]
        self.log.close()
        result.log = child_output or result.log[-LOG_LIMIT:]  # the child's stderr holds nbgrader's whole log
        return result

    def kill(self) -> None:
        """Stop the child and what it started now (the run was interrupted); leaves no partial grades."""
        if self.process is not None and self.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.join()
        if self.log is not None:
            self.log.close()
        remove_partial_grades(self.course_dir, self.assignment, self.student, self.existed, self.gradebook)

    def settle(self, result: JobResult) -> JobResult:
        """Write the outcome into the class gradebook (the caller is its only writer).

        A graded student's rows, which the job read from its gradebook (:attr:`JobResult.rows`), are written
        into the class gradebook; a student who was not graded has no rows and no ``autograded/`` or
        ``feedback/`` folder left for this assignment. A write that fails turns the result into not graded,
        with the reason.
        """
        if result.graded:
            try:
                self.gradebook.write_submission(self.assignment, self.student, result.rows)
            except Exception as error:  # noqa: BLE001 — one student's problem never stops the class
                result.graded = False
                result.reason = f"its grades could not be copied into the gradebook: {type(error).__name__}: {error}"[:300]
        result.rows = None  # written: the caller keeps every result, not every student's rows
        if not result.graded:
            remove_partial_grades(self.course_dir, self.assignment, self.student, self.existed, self.gradebook)
        self.job_gradebook.unlink(missing_ok=True)
        return result


def run_student(course_dir: Path, assignment: str, student: str, budget: StudentBudget | None = None) -> JobResult:
    """:func:`grade_student` in a child process, within ``budget``; a job that fails leaves no partial grades.

    The child autogrades into a copy of the class gradebook; this process then copies the student's rows
    into ``gradebook.db`` (:class:`StudentJob`).

    Parameters
    ----------
    course_dir : Path
        The course root; its ``gradebook.db`` must hold the assignment (``generate_assignment``).
    assignment, student : str
        Which submission.
    budget : StudentBudget, optional
        Wall clock and memory for the whole job (default: from the course's ``nbgrader_config.py``).

    Returns
    -------
    JobResult
        Also for a job that was killed ("went over the wall-clock budget of N s")
        or died ("the grading process was killed by SIGSEGV ..."); ``log`` holds
        everything the child wrote.
    """
    course_dir = Path(course_dir).resolve()
    if budget is None:
        budget = StudentBudget(config=course_config(course_dir))
    url = class_gradebook(course_dir)
    with tempfile.TemporaryDirectory(prefix="attention-lab-gradebook-") as scratch, \
            gradebook_copy.ClassGradebook(url) as gradebook:
        copy = gradebook_copy.JobGradebooks(url, assignment, Path(scratch)).make(student, Path(scratch) / "job.db")
        job = StudentJob(course_dir, assignment, student, budget, copy, gradebook)
        job.start()
        return job.settle(job.finish())


if __name__ == "__main__":  # python -m autograder.nbgrader.student_job COURSE ASSIGNMENT STUDENT
    done = run_student(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
    print(done.reason or "graded", *done.notes, sep="\n")
