"""Grade a class on the workers of a Dask distributed cluster; this machine stays the gradebook's only writer.

``python -m autograder grade ASSIGNMENT --scheduler tcp://host:8786`` sends one job per student to an
existing cluster (:class:`DaskGrader`). The workers share no filesystem with this machine: a job carries what
grading the student needs, as data (:class:`ShippedJob`):

* the course's ``nbgrader_config.py`` (the sandbox, the budgets, the preprocessors),
* the assignment's notebooks in ``source/`` (their names say which notebooks a submission must hold),
* the student's submission folder (notebooks and nbgrader's ``timestamp.txt``; any other file only by name,
  empty: grading never copies such files, it names them in a note),
* the assignment's gradebook rows (``generate_assignment``'s cells and hidden tests) and the student's own
  (:func:`autograder.nbgrader.gradebook_copy.assignment_data`, :func:`~autograder.nbgrader.gradebook_copy.student_data`),
* the fingerprint of the grader (:mod:`autograder.nbgrader.fingerprints`): the spec's hash and the grader's
  version, so that a worker with another version of this package refuses to grade instead of grading
  differently.

The worker (:func:`run_job`) lays these out as a private course directory in its own temporary folder, seeds a
private SQLite gradebook there (:func:`~autograder.nbgrader.gradebook_copy.seed`, from the assignment's gradebook
made once per worker process) and grades the student exactly as
a local run does (:func:`autograder.nbgrader.student_job.run_student`: the sandboxed kernel, the memory and
wall-clock budget), in a fresh interpreter: a Dask worker is a daemonic, threaded process, which must not fork.
It sends back a :class:`ShippedResult`: the outcome, the rows autograding wrote and the ``autograded/`` and
``feedback/`` files. This process writes the rows into the class gradebook (SQLite or a server such as
PostgreSQL, through nbgrader's public Gradebook API) and the files into the course directory
(:meth:`DaskGrader.settle`), as :class:`~autograder.nbgrader.student_job.StudentJob` does for a local job.

Every worker needs this package (the same version) and bubblewrap. Before the first student every worker is
checked (:func:`check_worker`: the fingerprint, and a sandboxed kernel that imports what the probes need); a
worker that fails stops the run with one line, as :mod:`autograder.nbgrader.preflight` does for local grading.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

from autograder.nbgrader import fingerprints, gradebook_copy
from autograder.nbgrader.student_job import JobResult, StudentBudget, remove_partial_grades

#: Seconds a worker's grading interpreter may take beyond the student's wall-clock budget (its start, the
#: seeded gradebook, the files) before the worker kills it.
STARTUP_SECONDS = 300
#: Seconds to wait for the scheduler to answer and to have at least one worker.
CONNECT_SECONDS = 60
#: The file nbgrader reads a submission's time from (``CourseDirectory.get_existing_timestamp``), and the
#: largest one shipped (nbgrader's collect writes one line).
TIMESTAMP_FILE = "timestamp.txt"
TIMESTAMP_BYTES = 4096

Files = dict[str, tuple[bytes, int]]  # path relative to a folder → (bytes, file mode)


@dataclass
class ShippedJob:
    """Everything a worker needs to grade one student, as data (see the module docstring)."""

    assignment: str
    student: str
    config: bytes  # the course's nbgrader_config.py
    source: Files  # source/<assignment>/*.ipynb
    submission: Files  # submitted/<student>/<assignment>/
    gradebook: dict  # gradebook_copy.assignment_data
    known: dict | None  # gradebook_copy.student_data (None: a student the gradebook does not know yet)
    expected: dict[str, str]  # {"spec", "grader"}: fingerprints.spec_hash, fingerprints.grader_version
    wall_clock_seconds: int
    memory_bytes: int


@dataclass
class ShippedResult:
    """What a worker sends back: the outcome, autograde's rows (when graded) and the output files."""

    job: JobResult
    rows: dict | None = None  # gradebook_copy.submission_data
    autograded: Files = field(default_factory=dict)  # autograded/<student>/<assignment>/
    feedback: Files = field(default_factory=dict)  # feedback/<student>/<assignment>/
    worker: str = ""


def _safe_relative(path: str) -> PurePosixPath:
    """``path`` as a relative path that stays inside its folder; ValueError for an absolute one or ``..``."""
    relative = PurePosixPath(path)
    if relative.is_absolute() or not relative.parts or ".." in relative.parts:
        raise ValueError(f"a shipped file must stay inside its folder, got {path!r}")
    return relative


def read_files(folder: Path, contents: Callable[[str], bool] = lambda name: True) -> Files:
    """Every file under ``folder`` as ``{relative path: (bytes, mode)}``; a file ``contents`` rejects is shipped empty."""
    found = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            name = path.relative_to(folder).as_posix()
            found[name] = (path.read_bytes() if contents(name) else b"", path.stat().st_mode & 0o7777)
    return found


def write_files(folder: Path, files: Files) -> None:
    """Write ``files`` (:func:`read_files`) under ``folder``, with their modes.

    Raises
    ------
    ValueError
        If a path is absolute or leaves ``folder`` (``..``).
    """
    for name, (data, mode) in files.items():
        target = Path(folder) / _safe_relative(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode or 0o644)


def ship(course_dir: Path, assignment: str, student: str, gradebook: dict, known: dict | None,
         expected: dict[str, str], budget: StudentBudget) -> ShippedJob | JobResult:
    """The job that grades ``student`` on a worker, or a not-graded :class:`JobResult` if it cannot be sent.

    The submission is checked here first (:func:`autograder.nbgrader.submission_limits.submission_problem`:
    names, sizes, cells, outputs), so that nothing over the course's limits is read or sent; files other than
    the notebooks and ``timestamp.txt`` are sent by name only.

    Parameters
    ----------
    course_dir : Path
        The course root.
    assignment, student : str
        Which submission (the student id already checked as safe).
    gradebook, known : dict
        The assignment's rows and the student's, read from the class gradebook.
    expected : dict
        ``{"spec", "grader"}``: the fingerprint the worker's grader must have.
    budget : StudentBudget
        The job's wall clock and memory.
    """
    from autograder.nbgrader.grading import course_config, graded_source
    from autograder.nbgrader.submission_limits import SubmissionLimits, submission_problem

    config = course_config(course_dir)
    folder = course_dir / "submitted" / student / assignment
    # the source loaded with the gradebook (kept by load_into_gradebook), not source/ on disk, which the instructor
    # may be editing during the run
    source = graded_source(course_dir) / "source" / assignment
    if not source.is_dir():  # a course graded before grading kept its source: source/ (as student_job does)
        source = course_dir / "source" / assignment
    notebooks = sorted(p.name for p in source.glob("*.ipynb"))
    problem = submission_problem(folder, notebooks, SubmissionLimits(config=config))
    if problem:
        return JobResult(student, False, problem)
    stamp = TIMESTAMP_FILE
    if (folder / stamp).is_file() and (folder / stamp).stat().st_size > TIMESTAMP_BYTES:
        return JobResult(student, False, f"its {stamp} is over {TIMESTAMP_BYTES} bytes: nbgrader collect writes one line")
    return ShippedJob(assignment, student, (course_dir / "nbgrader_config.py").read_bytes(),
                      {name: (source.joinpath(name).read_bytes(), 0o644) for name in notebooks},
                      read_files(folder, lambda name: name in notebooks or name == stamp),
                      gradebook, known, dict(expected), budget.wall_clock_seconds, budget.memory_bytes)


def _worker_name() -> str:
    """The Dask worker's address, or this host's name outside a worker."""
    if "distributed" in sys.modules:
        from distributed import get_worker

        try:
            return get_worker().address
        except ValueError:  # not inside a worker's task
            pass
    import socket

    return socket.gethostname()


def _lay_out(course: Path, config: bytes, assignment: str, source: Files) -> None:
    """A course directory at ``course`` with ``config`` as its ``nbgrader_config.py`` and ``source/<assignment>/``."""
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_bytes(config)
    write_files(course / "source" / assignment, source)


def _grader_problem(course: Path, assignment: str, expected: dict[str, str]) -> str | None:
    """Why this machine's grader is not the one ``expected`` names, or None (``course`` holds the shipped config)."""
    if fingerprints.spec_hash(assignment) != expected.get("spec"):
        return (f"its grader's spec of {assignment} differs from the grading machine's: install the same version "
                "of this package on every worker")
    if fingerprints.grader_version(course) != expected.get("grader"):
        return ("its grader (this package, nbgrader or the grading code) differs from the grading machine's: "
                "install the same version on every worker")
    return None


def _interpreter(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """``python -m autograder.nbgrader.dask_executor ARGS`` in a fresh interpreter in its own session."""
    from autograder.nbgrader.grading import nbgrader_environment

    return subprocess.run([sys.executable, "-m", "autograder.nbgrader.dask_executor", *args],
                          env=nbgrader_environment(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, start_new_session=True)


#: (config hash, assignment, expected fingerprint) → the worker's problem or None, once per worker process
_checked: dict[tuple, str | None] = {}


def check_worker(config: bytes, assignment: str, expected: dict[str, str]) -> str | None:
    """Why this worker cannot grade ``assignment`` as the grading machine would, in one line, or None.

    Checks the grader's fingerprint (:func:`_grader_problem`) and that a sandboxed kernel, started as the
    course's ``config`` starts it, imports what the probes need (:func:`autograder.nbgrader.preflight.kernel_problem`,
    in a fresh interpreter). The answer is kept for the life of the worker process.
    """
    key = (hashlib.sha256(config).hexdigest(), assignment, tuple(sorted(expected.items())))
    if key not in _checked:
        with tempfile.TemporaryDirectory(prefix="attention-lab-worker-check-") as scratch:
            course = Path(scratch) / "course"
            _lay_out(course, config, assignment, {})
            problem = _grader_problem(course, assignment, expected)
            if problem is None:
                try:
                    done = _interpreter("check", str(course), timeout=STARTUP_SECONDS + 300)
                    lines = done.stdout.strip().splitlines()
                    problem = (lines[-1] if lines else f"checking its grading kernel failed: {done.stderr[-300:]}") \
                        if done.returncode else None
                except subprocess.TimeoutExpired:
                    problem = "checking its grading kernel took longer than it may"
        _checked[key] = problem
    return _checked[key]


_templates: dict[str, Path] = {}  # hash of an assignment's rows → its seeded gradebook, once per worker process
_templates_lock = threading.Lock()


def _assignment_template(rows: dict) -> Path:
    """The gradebook :func:`~autograder.nbgrader.gradebook_copy.seed_assignment` makes of ``rows``, made once per process."""
    key = hashlib.sha256(pickle.dumps(rows)).hexdigest()
    with _templates_lock:
        if key not in _templates or not _templates[key].is_file():
            folder = Path(tempfile.mkdtemp(prefix="attention-lab-worker-"))
            atexit.register(shutil.rmtree, folder, True)
            _templates[key] = gradebook_copy.seed_assignment(folder / "assignment.db", rows)
        return _templates[key]


def run_job(job: ShippedJob) -> ShippedResult:
    """Grade one student on this machine from ``job`` alone (a Dask task; see the module docstring).

    Reads nothing but ``job`` and this machine's installation of the grader: the course directory it grades in
    is a new temporary folder, removed afterwards.

    Returns
    -------
    ShippedResult
        ``job.graded`` False with a one-line reason (prefixed by the worker's name when the worker is at fault)
        when the worker's grader differs, its kernel cannot start, or grading the student failed.
    """
    worker = _worker_name()
    with tempfile.TemporaryDirectory(prefix="attention-lab-shipped-") as scratch:
        course = Path(scratch) / "course"
        _lay_out(course, job.config, job.assignment, job.source)
        problem = check_worker(job.config, job.assignment, job.expected)
        if problem:
            return ShippedResult(JobResult(job.student, False, f"worker {worker}: {problem}"), worker=worker)
        write_files(course / "submitted" / job.student / job.assignment, job.submission)
        database = gradebook_copy.seed(course / "gradebook.db", job.gradebook, job.student, job.known,
                                       template=_assignment_template(job.gradebook))
        with open(course / "nbgrader_config.py", "a") as config:  # the job's gradebook, never the class's server
            config.write(f"\n# added by the worker: this job's private gradebook\n"
                         f"c.CourseDirectory.db_url = {gradebook_copy.sqlite_url(database)!r}\n")
        outcome = Path(scratch) / "result.pickle"
        try:
            done = _interpreter("grade", str(course), job.assignment, job.student, str(job.wall_clock_seconds),
                                str(job.memory_bytes), str(outcome),
                                timeout=job.wall_clock_seconds + STARTUP_SECONDS)
        except subprocess.TimeoutExpired:
            return ShippedResult(JobResult(job.student, False, f"worker {worker}: its grading process did not end "
                                           f"within {job.wall_clock_seconds + STARTUP_SECONDS} s"), worker=worker)
        if not outcome.is_file():
            return ShippedResult(JobResult(job.student, False, f"worker {worker}: its grading process stopped "
                                           f"(exit code {done.returncode}): {done.stderr.strip()[-200:]}",
                                           log=done.stderr[-20000:]), worker=worker)
        result: JobResult = pickle.loads(outcome.read_bytes())
        shipped = ShippedResult(result, worker=worker)
        if result.graded:
            shipped.rows = gradebook_copy.submission_data(gradebook_copy.sqlite_url(database), job.assignment,
                                                          job.student)
            shipped.autograded = read_files(course / "autograded" / job.student / job.assignment)
            shipped.feedback = read_files(course / "feedback" / job.student / job.assignment)
        return shipped


class DaskGrader:
    """The students' jobs of one assignment on a Dask cluster; this process writes the gradebook and the files.

    Creating it connects to the scheduler and checks every worker (:func:`check_worker`), before anything is
    written; :meth:`grade_students` then grades.

    Parameters
    ----------
    scheduler : str
        The scheduler's address, e.g. ``tcp://host:8786`` (``tls://`` with a ``distributed.comm.tls`` config).
    course_dir : Path
        The course root.
    assignment : str
        The assignment to grade.
    grader : str, optional
        :func:`autograder.nbgrader.fingerprints.grader_version` of the course, when the caller has it.

    Raises
    ------
    autograder.nbgrader.preflight.GradingStopped
        If no scheduler answers at ``scheduler``, it has no worker within :data:`CONNECT_SECONDS`, or a worker
        cannot grade as this machine would (one line naming the worker and why).
    """

    def __init__(self, scheduler: str, course_dir: Path, assignment: str, grader: str | None = None):
        from distributed import Client, wait

        from autograder.nbgrader.preflight import GradingStopped

        self.course_dir, self.assignment = Path(course_dir).resolve(), assignment
        self.expected = {"spec": fingerprints.spec_hash(assignment),
                         "grader": grader or fingerprints.grader_version(self.course_dir)}
        self.config = (self.course_dir / "nbgrader_config.py").read_bytes()
        stop = "grading stopped before the first student: "
        try:
            self.client = Client(scheduler, timeout=CONNECT_SECONDS)
        except (OSError, TimeoutError, ValueError) as error:
            raise GradingStopped(f"{stop}no Dask scheduler answers at {scheduler} ({error})") from None
        try:
            try:
                self.client.wait_for_workers(1, timeout=CONNECT_SECONDS)
            except TimeoutError:
                raise GradingStopped(f"{stop}the Dask scheduler at {scheduler} has no workers") from None
            workers = sorted(self.client.scheduler_info(n_workers=-1)["workers"])
            checks = {self.client.submit(check_worker, self.config, assignment, self.expected, pure=False,
                                         workers=[address], allow_other_workers=False): address for address in workers}
            wait(list(checks))
            for future, address in checks.items():
                problem = future.result() if future.status == "finished" else f"its check failed: {future.exception()}"
                if problem:
                    raise GradingStopped(f"{stop}worker {address}: {problem}")
        except BaseException:
            self.client.close()
            raise

    def close(self) -> None:
        """Disconnect from the scheduler."""
        self.client.close()

    def settle(self, student: str, existed: bool, shipped: ShippedResult,
               gradebook: gradebook_copy.ClassGradebook) -> JobResult:
        """Write a worker's result into the class gradebook and the course directory (this process: the only writer).

        A graded student's rows go into ``gradebook``, the class gradebook held open for the run
        (:meth:`autograder.nbgrader.gradebook_copy.ClassGradebook.write_submission`), and their files into
        ``autograded/`` and ``feedback/``; a student who was not graded, or whose result cannot be written, has
        no rows and no such folder left for this assignment.
        """
        result = shipped.job
        if result.graded:
            try:
                gradebook.write_submission(self.assignment, student, shipped.rows)
                for folder, files in (("autograded", shipped.autograded), ("feedback", shipped.feedback)):
                    target = self.course_dir / folder / student / self.assignment
                    shutil.rmtree(target, ignore_errors=True)
                    target.mkdir(parents=True)
                    write_files(target, files)
            except Exception as error:  # noqa: BLE001 — one student's problem never stops the class
                result.graded = False
                result.reason = f"its results could not be written: {type(error).__name__}: {error}"[:300]
        if not result.graded:
            remove_partial_grades(self.course_dir, self.assignment, student, existed, gradebook)
        return result

    def grade_students(self, students: list[str], budget: StudentBudget, progress: bool | None = None,
                       on_done: Callable[[JobResult], None] | None = None) -> dict[str, JobResult]:
        """Grade ``students`` on the cluster's workers, one job per student; results are written as they come.

        Parameters
        ----------
        students : list of str
            Student ids (checked as safe by the caller); the class gradebook must already hold the assignment.
        budget : StudentBudget
            Each job's wall clock and memory (enforced on the worker).
        progress : bool, optional
            A progress bar with the ETA on stderr (default: when stderr is a terminal).
        on_done : callable, optional
            Called here with each student's :class:`JobResult` once it is written, in the order jobs finish.

        Returns
        -------
        dict
            student → :class:`JobResult`, in the order of ``students``.
        """
        from distributed import as_completed

        from autograder.nbgrader.parallel import progress_bar

        class_url = gradebook_copy.class_gradebook_url(self.course_dir)
        rows = gradebook_copy.assignment_data(class_url, self.assignment)
        results: dict[str, JobResult] = {}
        bar = progress_bar(len(students), self.assignment, progress)

        def finished(student: str, result: JobResult) -> None:
            results[student] = result
            if on_done is not None:
                on_done(result)
            bar.set_postfix_str(f"{student}: {'graded' if result.graded else 'not graded'}", refresh=False)
            bar.update(1)

        futures, existed = {}, {}
        gradebook = gradebook_copy.ClassGradebook(class_url)  # one for the run: the grading process stays flat
        try:
            for student in students:
                existed[student] = gradebook.has_student(student)
                job = ship(self.course_dir, self.assignment, student, rows,
                           gradebook_copy.student_data(class_url, self.assignment, student), self.expected, budget)
                if isinstance(job, JobResult):
                    finished(student, self.settle(student, existed[student], ShippedResult(job), gradebook))
                    continue
                future = self.client.submit(run_job, job, pure=False,
                                            key=f"grade-{self.assignment}-{student}-{uuid.uuid4().hex[:8]}")
                futures[future] = student
            for future in as_completed(list(futures)):
                student = futures[future]
                try:
                    shipped = future.result()
                except Exception as error:  # noqa: BLE001 — a worker died or the task failed: this student only
                    shipped = ShippedResult(JobResult(student, False, f"its job on the cluster failed: "
                                                      f"{type(error).__name__}: {str(error)[:200]}"))
                shipped.job.log = f"[worker {shipped.worker or '?'}]\n{shipped.job.log}"
                finished(student, self.settle(student, existed[student], shipped, gradebook))
        except BaseException:  # interrupted: no job goes on, no partial grades of unfinished students
            self.client.cancel(list(futures))
            for student in set(futures.values()) - set(results):
                remove_partial_grades(self.course_dir, self.assignment, student, existed[student], gradebook)
            raise
        finally:
            gradebook.close()
            bar.close()
        return {student: results[student] for student in students}


def _main(argv: list[str]) -> int:
    """The worker's fresh interpreter: ``check COURSE`` or ``grade COURSE ASSIGNMENT STUDENT WALL MEMORY OUT``."""
    if argv[0] == "check":
        from autograder.nbgrader.preflight import kernel_problem

        problem = kernel_problem(Path(argv[1]))
        if problem:
            print(problem)
            return 1
        return 0
    from autograder.nbgrader.student_job import run_student

    course, assignment, student, wall, memory, out = argv[1:]
    os.chdir(course)
    budget = StudentBudget(wall_clock_seconds=int(wall), memory_bytes=int(memory))
    result = run_student(Path(course), assignment, student, budget)
    partial = Path(out + ".partial")
    partial.write_bytes(pickle.dumps(result))
    os.replace(partial, out)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
