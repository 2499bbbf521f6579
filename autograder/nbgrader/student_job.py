"""Grade one student — autograde and feedback — in a child process with a memory and a wall-clock budget.

The unit of work is :func:`grade_student`: input a course directory, an
assignment and a student; output a small :class:`JobResult`. It runs nbgrader
through its public Python API (``NbGraderAPI.autograde`` and
``.generate_feedback``) and reads the outcome from their return values.
:func:`run_student` runs it in a forked child process with an address-space
limit (``RLIMIT_AS``) and kills it when its wall clock runs out; either way
the next student is graded, and a student whose grading did not finish
leaves no partial gradebook rows (removed with ``Gradebook.remove_submission``)
and no half-written ``autograded/`` or ``feedback/`` folder. Only one child
runs at a time, so the gradebook has one writer; a parallel grader can run
several jobs on separate gradebooks and merge them.

Budgets are set in ``nbgrader_config.py``, e.g.
``c.StudentBudget.wall_clock_seconds = 600``.
"""

from __future__ import annotations

import contextlib
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
from autograder.nbgrader.grading import course_config
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


def _failure(result: dict) -> str:
    """The specific error of a failed nbgrader API call: the last exception line it logged or raised."""
    lines = [line.strip() for text in (result.get("log", ""), result.get("error", ""))
             for line in text.splitlines()]
    errors = [line for line in lines if line and (line.split(":")[0].endswith(("Error", "Exception", "Exit"))
                                                   or line.startswith(("KeyError", "MemoryError")))]
    errors = [line for line in errors if "Please see the error log" not in line and "NbGraderException" not in line]
    return errors[-1][:200] if errors else "nbgrader stopped without saying why"


def grade_student(course_dir: Path, assignment: str, student: str) -> JobResult:
    """Autograde one student's submission and write their feedback, with nbgrader's Python API.

    Parameters
    ----------
    course_dir : Path
        The course root (``nbgrader_config.py``, ``gradebook.db``, ``submitted/``).
    assignment, student : str
        Which submission: ``submitted/<student>/<assignment>/``.

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
    notebooks = sorted(p.name for p in (course_dir / "source" / assignment).glob("*.ipynb"))
    problem = submission_problem(folder, notebooks, limits)
    if problem:
        return JobResult(student, False, problem)
    extra = extra_files(folder, notebooks)
    notes = [f"extra files not copied: {', '.join(inert_text(f, 40) for f in extra[:5])}"
             + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")] if extra else []
    config.CourseDirectory.root = str(course_dir)
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


def _vm_peak() -> int:
    """This process's peak address space, bytes (what RLIMIT_AS limits), or 0 if /proc does not say."""
    try:
        with open("/proc/self/status") as status:
            line = next(line for line in status if line.startswith("VmPeak:"))
        return int(line.split()[1]) * 1024
    except (OSError, StopIteration, ValueError):
        return 0


def _child(connection, course_dir: Path, assignment: str, student: str, memory_bytes: int, log_path: str) -> None:
    """In the child: own process group, the memory limit, output to a log file, then the job."""
    os.setpgrp()
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    with open(log_path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    os.chdir(course_dir)
    try:
        result = grade_student(course_dir, assignment, student)
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


def remove_partial_grades(course_dir: Path, assignment: str, student: str, student_existed: bool) -> None:
    """Remove what a grading that did not finish left: gradebook rows (public Gradebook API) and output folders."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        with contextlib.suppress(MissingEntry):
            gradebook.remove_submission(assignment, student)
        if not student_existed:
            with contextlib.suppress(MissingEntry):
                if not gradebook.find_student(student).submissions:
                    gradebook.remove_student(student)
    for folder in ("autograded", "feedback"):
        shutil.rmtree(course_dir / folder / student / assignment, ignore_errors=True)
        with contextlib.suppress(OSError):  # the student's folder too, unless another assignment is in it
            (course_dir / folder / student).rmdir()


def _student_exists(course_dir: Path, student: str) -> bool:
    from nbgrader.api import Gradebook, MissingEntry

    if not (course_dir / "gradebook.db").exists():
        return False
    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        try:
            gradebook.find_student(student)
            return True
        except MissingEntry:
            return False


def run_student(course_dir: Path, assignment: str, student: str, budget: StudentBudget | None = None) -> JobResult:
    """:func:`grade_student` in a child process, within ``budget``; a job that fails leaves no partial grades.

    Parameters
    ----------
    course_dir : Path
        The course root.
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
    existed = _student_exists(course_dir, student)
    context = multiprocessing.get_context("fork")  # the parent's imports and caches come along, nothing to re-import
    receive, send = context.Pipe(duplex=False)
    with tempfile.NamedTemporaryFile("w+", prefix="attention-lab-job-", suffix=".log") as log:
        process = context.Process(target=_child, args=(send, course_dir, assignment, student,
                                                       budget.memory_bytes, log.name), daemon=True)
        started = time.monotonic()
        process.start()
        send.close()
        result = None
        in_time = receive.poll(budget.wall_clock_seconds)  # a result, or the child's end of the pipe closing
        if in_time:
            with contextlib.suppress(EOFError, OSError):
                result = receive.recv()
        if result is None:
            if in_time:
                process.join(30)  # it closed the pipe by dying: wait for its exit status
            code = process.exitcode
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the job and what it started in its process group
            process.join()
            if code is None:
                reason = (f"grading it took longer than the wall-clock budget of {budget.wall_clock_seconds} s "
                          "(StudentBudget.wall_clock_seconds), so it was stopped")
            else:
                name = signal.Signals(-code).name if code < 0 else f"exit code {code}"
                reason = (f"the grading process stopped ({name}); it may have gone over the memory budget of "
                          f"{byte_size(budget.memory_bytes)} (StudentBudget.memory_bytes)")
            result = JobResult(student, False, reason)
        process.join()
        receive.close()
        result.seconds = time.monotonic() - started
        log.seek(0)
        child_output = log.read()[-LOG_LIMIT:]
    result.log = child_output or result.log[-LOG_LIMIT:]  # the child's stderr holds nbgrader's whole log
    if not result.graded:
        remove_partial_grades(course_dir, assignment, student, existed)
    return result


if __name__ == "__main__":  # python -m autograder.nbgrader.student_job COURSE ASSIGNMENT STUDENT
    done = run_student(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
    print(done.reason or "graded", *done.notes, sep="\n")
