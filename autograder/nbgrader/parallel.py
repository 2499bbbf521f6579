"""Grade a class on every core: several students' jobs at once, one writer of the gradebook, a progress bar.

:func:`grade_students` keeps up to ``workers`` :class:`~autograder.nbgrader.student_job.StudentJob`\\ s
running, each a forked child that autogrades one student (sandboxed kernel, memory and wall-clock budget)
into its own copy of the class gradebook. This process waits for whichever finishes first
(``multiprocessing.connection.wait``, no threads, so that forking it stays safe), copies that student's
rows into the class gradebook — it is the gradebook's only writer
(:mod:`autograder.nbgrader.gradebook_copy`) — and starts the next job. One student's failure never stops
the others. Because each job starts from the same snapshot and grading a student reads no other student's
rows, scores, comments and feedback are those of grading the students one after the other.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import deque
from multiprocessing.connection import wait
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from autograder.nbgrader import gradebook_copy
from autograder.nbgrader.student_job import JobResult, StudentBudget, StudentJob


class Progress(tqdm):
    """tqdm without its monitor thread: the grader forks its jobs, and a process that forks runs no threads."""

    monitor_interval = 0


def default_workers() -> int:
    """The cores this process may run on (``os.sched_getaffinity``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def progress_bar(total: int, assignment: str, progress: bool | None = None) -> Progress:
    """The bar ``make grade`` shows on stderr: students graded of ``total``, with the ETA.

    ``progress`` None shows it when stderr is a terminal.
    """
    # shutil's size, not tqdm's own: a terminal that reports 0 columns and lines (a pseudo-terminal without a
    # size, as under `script` or some CI runners) would get no bar at all
    size = shutil.get_terminal_size()
    return Progress(total=total, desc=assignment, unit="student", file=sys.stderr, ncols=size.columns,
                    nrows=size.lines, disable=(not sys.stderr.isatty()) if progress is None else not progress)


def grade_students(course_dir: Path, assignment: str, students: list[str], budget: StudentBudget,
                   workers: int | None = None, progress: bool | None = None,
                   on_done: Callable[[JobResult], None] | None = None) -> dict[str, JobResult]:
    """Grade ``students`` of ``assignment`` with up to ``workers`` jobs at once; the class gradebook has one writer.

    Parameters
    ----------
    course_dir : Path
        The course root; its gradebook (``gradebook.db`` or ``c.CourseDirectory.db_url``) must already hold the
        assignment (``generate_assignment``).
    assignment : str
        The assignment id.
    students : list of str
        Student ids to grade (checked as safe ids by the caller).
    budget : StudentBudget
        Each job's wall clock and memory.
    workers : int, optional
        How many jobs run at once (default: :func:`default_workers`).
    progress : bool, optional
        Show a progress bar with the ETA on stderr (default: when stderr is a terminal).
    on_done : callable, optional
        Called in this process with each student's :class:`JobResult` once its rows are in the gradebook
        (or removed, for a student who was not graded), in the order the jobs finish.

    Returns
    -------
    dict
        student → :class:`JobResult`, in the order of ``students``.

    Raises
    ------
    ValueError
        If ``workers`` is less than 1.
    """
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    course_dir = Path(course_dir).resolve()
    results: dict[str, JobResult] = {}
    bar = progress_bar(len(students), assignment, progress)
    class_url = gradebook_copy.class_gradebook_url(course_dir)
    # one open class gradebook for the whole run (gradebook_copy.ClassGradebook: the grading process stays flat)
    with tempfile.TemporaryDirectory(prefix="attention-lab-gradebooks-") as scratch, \
            gradebook_copy.ClassGradebook(class_url) as class_gradebook:
        gradebooks = gradebook_copy.JobGradebooks(class_url, assignment, scratch)

        def finished(job: StudentJob, result: JobResult) -> None:
            results[job.student] = result = job.settle(result)
            if on_done is not None:
                on_done(result)
            bar.set_postfix_str(f"{job.student}: {'graded' if result.graded else 'not graded'}", refresh=False)
            bar.update(1)

        pending = deque(enumerate(students))
        running: dict[object, StudentJob] = {}
        try:
            while pending or running:
                while pending and len(running) < workers:
                    index, student = pending.popleft()
                    copy = gradebooks.make(student, Path(scratch) / f"job-{index}.db")
                    job = StudentJob(course_dir, assignment, student, budget, copy, class_gradebook)
                    try:
                        job.start()
                    except OSError as error:  # no process could be made (fork's EAGAIN, ENOMEM): this student only
                        finished(job, JobResult(student, False, f"its grading process could not start: {error}"))
                        continue
                    running[job.connection] = job
                if not running:
                    continue
                now = time.monotonic()
                soonest = min(job.deadline for job in running.values())
                ready = set(wait(list(running), timeout=max(0.0, soonest - now)))
                now = time.monotonic()
                for connection, job in list(running.items()):
                    if connection in ready or job.deadline <= now:
                        del running[connection]
                        finished(job, job.finish())
        except BaseException:  # interrupted (Ctrl-C) or this process failed: no job outlives it, no partial grades
            for job in running.values():
                job.kill()
            raise
        finally:
            bar.close()
    return {student: results[student] for student in students}
