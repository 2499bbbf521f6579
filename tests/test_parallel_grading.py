"""Grading on every core (issue 14 §2), from any course directory (§4b) and past one machine (§5), end to end.

Three of assignment 1's end-to-end sample (full marks, none, a named mistake) are graded twice, in two course
directories, on one worker and on two: every score, comment, gradebook row and feedback file must be the same. A
course copied outside the checkout is graded from its own directory by ``python -m autograder grade`` (``make
grade``: release/ untouched, the grades CSV and the feedback written); a re-run (the command's ``main``, in this
process) grades only what changed or was not graded (``gradebook-hashes.json``) unless ``--force``, and a
full-marks student whose new submission ends its kernel is reported with its new marks. A course whose sandboxed
kernel cannot import ``attention_lab`` stops before the first student.
Two of the sample (the untouched release and a named mistake) graded by the command line on a Dask cluster (two
worker processes) into a PostgreSQL gradebook give what the one-worker run gave them; a shipped job grades with
its course directory gone. The throughput benchmark's plain nbgrader grades the smallest class that tells its
two graders apart, the correct solution and the untouched release, as the two-worker run graded them.
"""

import contextlib
import io
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import nbformat
import pytest

from autograder.examples import hostile
from autograder.examples.hostile import FULL  # assignment 1's points, its questions included
from autograder import assignments
from autograder.examples import example_class
from autograder.nbgrader import dask_executor, fingerprints, gradebook_copy, grading
from autograder.nbgrader.gradebook_copy import sqlite_url, submission_rows
from autograder.nbgrader.student_job import StudentBudget
from autograder.nbgrader.notebook_cells import fill_release, read, solution_cells
from conftest import ASSIGNMENT, NOTEBOOK, RELEASE_NB, REPO, SOURCE_NB
from postgres_support import postgres_server


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


def workers_sample() -> list[str]:
    """The students of assignment 1 graded on one worker and on two: the solution (full marks), the untouched
    release (no marks, nbgrader's own "No response." comments) and the end-to-end sample's first named mistake
    (partial marks, the mistake's name and hint in the feedback).

    Three, because what the comparison guards against is a mix-up between jobs (one student's scores, comments,
    gradebook rows or feedback reaching another, or lost when two jobs finish together), not what a job computes:
    three students on two workers run two jobs at once and queue the third, and no two of them share a total, a
    comment or a feedback file, so that any mix-up changes what is compared. The sample's other two kinds (a
    correct answer written differently, which scores as the solution does, and an unnamed mistake, whose later
    steps need the stand-in passes) are computed by the same job code; tests/test_grading.py grades all five
    end to end (``graded_class``, on every core) against the in-process grader. They are also what the tests
    below need: the benchmark's class (the solution, the untouched release) and the cluster's (the untouched
    release, the named mistake).
    """
    assignment = assignments.get(ASSIGNMENT)
    named = next(s for s in example_class.end_to_end_sample(assignment)
                 if example_class.students_of(assignment)[s] in assignment.mistakes.values())
    return [example_class.CORRECT_STUDENT, example_class.UNTOUCHED, named]


@pytest.fixture(scope="module")
def graded_twice(tmp_path_factory):
    """:func:`workers_sample` graded on 1 worker and, in a second course directory, on 2."""
    runs = {}
    for workers in (1, 2):
        course = tmp_path_factory.mktemp(f"workers{workers}")
        grading.copy_course(REPO, course)
        students = example_class.build_submissions(course, assignments.get(ASSIGNMENT), REPO, workers_sample())
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            steps, rows = grading.grade_class(course, ASSIGNMENT, students, workers=workers, progress=True)
        runs[workers] = course, steps, rows, stderr.getvalue()
    return runs


def test_two_workers_give_every_score_comment_row_and_feedback_file_of_one(graded_twice):
    one, two = graded_twice[1], graded_twice[2]
    assert one[1] == two[1]
    assert [r.student for r in one[2]] == [r.student for r in two[2]] == workers_sample()
    # no two alike: a row or a feedback file that reached another student would change what is compared below
    assert len({r.total for r in one[2]}) == len(one[2])
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


@pytest.fixture(scope="module")
def copied_course(tmp_path_factory):
    """The course copied outside the checkout (config, source, release) with two honest submissions and an empty one."""
    course = grading.copy_course(REPO, tmp_path_factory.mktemp("elsewhere") / "course", folders=("source", "release"))
    assert REPO not in course.parents
    for student in ("amy", "bo", "eve-empty"):
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        if student == "eve-empty":
            (folder / NOTEBOOK).write_text("")
        else:
            nbformat.write(honest_notebook(), str(folder / NOTEBOOK))
    return course


@pytest.fixture(scope="module")
def copied_runs() -> dict[str, subprocess.CompletedProcess]:
    """The copied course's CLI runs so far, by name: a later test reads an earlier one's table."""
    return {}


def honest_notebook(**answers: str) -> nbformat.NotebookNode:
    """The release filled in with the source's solutions, and ``answers`` (cell id → source) instead of some."""
    return fill_release(read(RELEASE_NB), {**solution_cells(read(SOURCE_NB)), **answers})


def student_line(stdout: str, student: str) -> str:
    """The grade table's row of ``student``."""
    return next(line for line in stdout.splitlines() if line.split()[:1] == [student])


def grade_here(course: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m autograder grade`` run from inside ``course`` (no --course-dir), as an instructor would."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, *args], cwd=course,
                          env=env, capture_output=True, text=True, timeout=1800)


def grade_here_in_process(course: Path, *args: str) -> subprocess.CompletedProcess:
    """:func:`grade_here`'s command (``grading.main``, what ``python -m autograder grade`` runs) in this process,
    from inside ``course``; its stdout and stderr as a finished process's.

    For the runs after the copied course's first: that first run checks the command from a fresh interpreter, and
    a re-run's claims are about what it grades and prints, which is the same code here without an interpreter's
    start, its imports and the sandbox check that this process already passed for this configuration (about 1.5-2
    CPU-s a run). The jobs are forked from this process, as graded_twice's are.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(course), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = grading.main([ASSIGNMENT, *args])
    return subprocess.CompletedProcess(["grading.main", ASSIGNMENT, *args], code, out.getvalue(), err.getvalue())


def test_a_course_outside_the_checkout_is_graded_from_its_own_directory_and_failures_are_listed(copied_course,
                                                                                                 copied_runs):
    release = files(copied_course / "release")
    done = copied_runs["first"] = grade_here(copied_course, "--workers", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    full = f"{FULL:g}/{FULL:g}"
    assert full in student_line(done.stdout, "amy") and full in student_line(done.stdout, "bo")
    listed = done.stdout.split("not graded (1):\n", 1)[1].splitlines()[0]
    assert listed.startswith("  eve-empty: ") and "empty file" in listed
    assert (copied_course / "feedback" / "amy" / ASSIGNMENT).is_dir()
    assert (copied_course / f"grades-{ASSIGNMENT}.csv").is_file()
    assert files(copied_course / "release") == release  # grading generates into the gradebook, never into release/


def test_a_re_run_grades_only_what_changed_or_failed_and_no_earlier_full_marks_survive_a_crash(copied_course,
                                                                                             copied_runs, monkeypatch):
    """Without ``--force`` a re-run grades a changed submission and one not graded before, nothing else, and
    reports the unchanged one as it was graded; a submission graded full marks that now ends its kernel is reported
    with what it earns now (what ran before the crash), never with its earlier row; ``--force`` grades every
    submission again."""
    if "first" not in copied_runs or not (copied_course / "gradebook.db").exists():
        pytest.skip("needs the graded copy of the test before")
    crashing = honest_notebook(causal_mask="import os\nos._exit(1)")  # amy hands in again: it ends the kernel
    nbformat.write(crashing, str(copied_course / "submitted" / "amy" / ASSIGNMENT / NOTEBOOK))
    again = grade_here_in_process(copied_course)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 submission(s) unchanged since they were graded" in again.stdout  # bo
    # read back as it was graded (compared cell by cell: the table's column widths follow the other rows)
    assert student_line(again.stdout, "bo").split() == student_line(copied_runs["first"].stdout, "bo").split()
    assert sorted(log_sections(copied_course)[-1]) == ["amy", "eve-empty"]  # the changed one and the one not graded
    full = f"{FULL:g}/{FULL:g}"
    amy = student_line(again.stdout, "amy")
    assert full not in amy and f"{hostile.BEFORE_MASK:g}/{FULL:g}" in amy
    warmed, warm = [], grading._warm_jobs
    monkeypatch.setattr(grading, "_warm_jobs", lambda course_dir, assignment: [warmed.append(assignment),
                                                                               warm(course_dir, assignment)])
    forced = grade_here_in_process(copied_course, "--force", "--workers", "2")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "unchanged" not in forced.stdout
    assert sorted(log_sections(copied_course)[-1]) == ["amy", "bo", "eve-empty"]
    assert warmed == [ASSIGNMENT]  # three jobs to fork: warmed up for once
    assert student_line(forced.stdout, "bo").count(full) == 1


def test_a_re_run_that_adds_one_student_forks_its_job_without_the_warm_up(copied_course, copied_runs, monkeypatch):
    """The warm-up loads once, before the jobs fork, what each job would load first; a lone job would load it once
    all the same, so a re-run that grades one student skips it (issue 14 §6: a re-run adding one student) and
    grades that student as the others were graded (the test before shows three warmed up for, once)."""
    if "first" not in copied_runs or not (copied_course / "gradebook.db").exists():
        pytest.skip("needs the graded copy of the tests before")
    warmed = []
    monkeypatch.setattr(grading, "_warm_jobs", lambda course_dir, assignment: warmed.append(assignment))
    shutil.rmtree(copied_course / "submitted" / "eve-empty")  # never graded, so graded again in every run
    folder = copied_course / "submitted" / "cy" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(honest_notebook(), str(folder / NOTEBOOK))
    added = grade_here_in_process(copied_course)
    assert added.returncode == 0, added.stderr[-3000:]
    assert log_sections(copied_course)[-1] == ["cy"] and warmed == []
    assert f"{FULL:g}/{FULL:g}" in student_line(added.stdout, "cy")


def test_a_kernel_that_cannot_import_attention_lab_stops_the_run_before_the_first_student(tmp_path):
    course = grading.copy_course(REPO, tmp_path / "broken", folders=("source", "release"))
    with open(course / "nbgrader_config.py", "a") as config:  # the kernel gets no copy of the student package
        config.write("\nc.SandboxedKernelManager.student_packages = []\n")
    folder = course / "submitted" / "amy" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(honest_notebook(), str(folder / NOTEBOOK))
    done = grade_here(course)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("grading stopped before the first student: ") and \
        "No module named 'attention_lab'" in lines[0]
    assert "amy" not in done.stdout
    assert not (course / "gradebook.db").exists() and not (course / "autograded").exists()


def test_the_throughput_benchmark_s_plain_nbgrader_gives_the_scores_of_two_workers(graded_twice, tmp_path):
    """The benchmark's smoke run, its own half: plain nbgrader (``grading_throughput.plain_nbgrader``) on the
    benchmark's class of two against the two-worker run above, which graded the same two notebooks. The other half,
    the command's ``grade --workers 2 --force``, is the copied course's forced run above (``grading.main``); running
    it here too cost a third ``grade_class`` of these students (its fixed cost: an interpreter, generate_assignment,
    the preflight kernel)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import grading_throughput

    # the smallest class that checks the claim: the correct solution and the untouched release (full marks and
    # none: a class of equal full marks would prove nothing)
    course = tmp_path / "nbgrader"
    students = grading_throughput.build_class(course, 2)
    assert students == [f"{example_class.CORRECT_STUDENT}-1", f"{example_class.UNTOUCHED}-1"]
    plain = grading_throughput.plain_nbgrader(course, students)  # scores only: the suite never asserts timings
    two_workers = {r.student: r.steps for r in graded_twice[2][2]}
    ours = grading_throughput.Run(0.0, 0, scores={s: two_workers[s.removesuffix("-1")] for s in students})
    row = grading_throughput.Row(len(students), plain, ours)
    assert all(steps is not None for steps in plain.scores.values()) and row.same_scores
    totals = {student: sum(score for score, _ in steps.values()) for student, steps in plain.scores.items()}
    assert totals[students[0]] == sum(m for _, m in plain.scores[students[0]].values()) > 0
    assert totals[students[1]] == 0


#: A Dask LocalCluster of two worker processes (one thread each, as the README sizes them), in its own process so
#: that the test's process, which forks grading jobs, runs no Dask threads; it prints its address and runs
#: until its standard input closes.
CLUSTER = """
import sys
from distributed import LocalCluster
cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", scheduler_port=0,
                       dashboard_address=None)
print(cluster.scheduler_address, flush=True)
sys.stdin.read()
cluster.close()
"""


#: Dask's own housekeeping, slowed down for the test cluster (Dask's configuration by environment variable): by
#: default each of its processes checks its event loop every 20 ms, samples the machine every 500 ms and its
#: workers' memory every 100 ms, and each worker samples its threads' stacks every 10 ms for the dashboard's
#: profile. Idle, that cost the cluster 1.8 CPU-s every 30 s; so slowed, 0.3 (measured 2026-12-06), while the
#: grading runs, which waits on kernels most of its wall time. None of it takes part in grading: a job's memory
#: and wall clock are limited in its own grading process (StudentBudget), never by the Dask worker.
QUIET_DASK = {"DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
              "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
              "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
              "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False"}


@contextlib.contextmanager
def local_cluster():
    """The address of a running two-worker Dask LocalCluster; stopped on exit. Its workers cannot read PGPASSFILE."""
    env = {**{k: v for k, v in os.environ.items() if k != "PGPASSFILE"}, **QUIET_DASK}
    cluster = subprocess.Popen([sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://127.0.0.1:"), f"the cluster did not start (exit code {cluster.poll()})"
        yield address
    finally:
        cluster.stdin.close()
        try:
            cluster.wait(timeout=120)
        except subprocess.TimeoutExpired:
            cluster.kill()
            cluster.wait()


def cluster_sample() -> list[str]:
    """The students of the end-to-end sample the cluster run grades: the untouched release (nbgrader's own "No
    response." comments, scores of 0) and the first named mistake (partial scores, the mistake's name in the
    grades CSV and its hint in the feedback): every kind of row and file a job sends back, one job for each of
    the two workers. The sample's other kinds (correct, written differently, unnamed) differ only in what the job
    computes, which is the same code on a worker as in a local job (:func:`workers_sample`)."""
    return workers_sample()[1:]


@pytest.fixture(scope="module")
def graded_on_a_cluster(tmp_path_factory):
    """:func:`cluster_sample` graded by ``python -m autograder grade --scheduler`` on a two-worker Dask cluster,
    into a PostgreSQL gradebook (``c.CourseDirectory.db_url``; the password only in this process's PGPASSFILE).

    The cluster and the server are stopped before the test reads what they left (the rows are read while the server
    runs): left running to the end of the module, the five Dask processes (a scheduler, two nannies, two workers)
    would keep spending CPU on their heartbeats and memory monitors while the tests after it grade."""
    course = tmp_path_factory.mktemp("cluster")
    grading.copy_course(REPO, course)
    students = example_class.build_submissions(course, assignments.get(ASSIGNMENT), REPO, cluster_sample())
    with postgres_server(("gradebook",)) as server, local_cluster() as address:
        url = server.url("gradebook")
        with open(course / "nbgrader_config.py", "a") as config:
            config.write(f"\nc.CourseDirectory.db_url = {url!r}\n")
        with mock.patch.dict(os.environ, {"PGPASSFILE": str(server.passfile)}):
            done = grade_here(course, "--scheduler", address)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            rows = submission_rows(url, ASSIGNMENT)
    return course, students, rows, done


def test_a_dask_cluster_and_a_postgresql_gradebook_give_every_score_comment_and_feedback_file_of_a_local_run(
        graded_twice, graded_on_a_cluster, tmp_path):
    local, steps, rows, _ = graded_twice[1]
    course, students, cluster_rows, done = graded_on_a_cluster
    assert students == cluster_sample() and set(students) < {r.student for r in rows}
    rows = [r for r in rows if r.student in students]  # the local run's rows of these students
    named = next(r for r in rows if r.named)
    assert 0 < named.total < sum(m for _, m in named.steps.values()) and any(r.total == 0 for r in rows)
    grading.write_csv(tmp_path / "local.csv", ASSIGNMENT, steps, rows)  # scores, notes and named mistakes
    assert (course / f"grades-{ASSIGNMENT}.csv").read_text() == (tmp_path / "local.csv").read_text()
    local_rows = submission_rows(sqlite_url(local / "gradebook.db"), ASSIGNMENT)
    assert cluster_rows == {student: local_rows[student] for student in students}
    comments = [c for s in cluster_rows.values() for nb in s["notebooks"].values() for c in nb["comments"].values()]
    assert ("No response.", None) in comments  # the untouched release: nbgrader's own comment reached PostgreSQL
    assert not (course / "gradebook.db").exists()  # every row went to PostgreSQL
    local_feedback, local_outputs = files(local / "feedback"), outputs(local)
    assert files(course / "feedback") == {path: data for path, data in local_feedback.items()
                                          if path.split("/")[0] in students}
    assert outputs(course) == {path: cells for path, cells in local_outputs.items()
                               if path.split("/")[1] in students}
    log = (course / "grading.log").read_text()
    assert log.count("[worker tcp://127.0.0.1:") == len(students)  # each student was graded on a worker


def test_a_shipped_job_grades_from_what_it_carries_with_the_course_directory_gone(graded_twice, tmp_path):
    local, _, rows, _ = graded_twice[1]
    student = next(r.student for r in rows if r.named)  # a named mistake: scores, a comment and a hint to agree on
    url = sqlite_url(local / "gradebook.db")
    expected = {"spec": fingerprints.spec_hash(ASSIGNMENT), "grader": fingerprints.grader_version(local)}
    job = dask_executor.ship(local, ASSIGNMENT, student, gradebook_copy.assignment_data(url, ASSIGNMENT),
                             gradebook_copy.student_data(url, ASSIGNMENT, student), expected,
                             StudentBudget(config=grading.course_config(local)))
    assert str(local).encode() not in pickle.dumps(job)  # no path of the course travels with it
    away = tmp_path / "away"
    local.rename(away)
    try:
        shipped = dask_executor.run_job(job)
    finally:
        away.rename(local)
    assert shipped.job.graded, shipped.job.reason
    assert shipped.rows == gradebook_copy.submission_data(url, ASSIGNMENT, student)
    assert {name: data for name, (data, _) in shipped.feedback.items()} == \
        files(local / "feedback" / student / ASSIGNMENT)
    graded = {name: [c.outputs for c in nbformat.reads(data.decode(), as_version=4).cells if c.cell_type == "code"]
              for name, (data, _) in shipped.autograded.items()}
    assert graded == {path.removeprefix(f"autograded/{student}/{ASSIGNMENT}/"): cells
                      for path, cells in outputs(local).items() if path.startswith(f"autograded/{student}/")}
