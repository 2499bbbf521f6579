"""Grading throughput: plain sequential nbgrader against ``python -m autograder grade --workers 2``, and the floor.

Classes of 10, 20 and 40 submissions of assignment 1, taken in turn from its example class (the correct
solution, the untouched release, correct variants and one submission per common mistake; student ids get a
copy number). Each class is graded, in the same run and each in a fresh course directory, by

* **nbgrader**: plain ``nbgrader generate_assignment``, ``nbgrader autograde`` and ``nbgrader generate_feedback``
  with this course's ``nbgrader_config.py`` (the sandbox, the probes, the out-of-kernel comparison and the
  stand-in passes all run: only our per-student jobs, parallelism and re-run hashes are left out), one
  student after the other;
* **grade**: ``python -m autograder grade ASSIGNMENT --workers 2 --force`` (``make grade``), the same work
  per student in sandboxed child processes, two at once, one gradebook writer;

and every student's scores must be equal. The wall clock covers each command from its start to its exit
(interpreter start, imports, the preflight kernel, ``generate_assignment``, feedback); CPU is the user + system
seconds of the command and every process it started and reaped (kernels, sandboxes, grading jobs), which on a
shared machine does not grow with the time a process waited for a core; memory is the peak resident set of the
command's own (parent) process, children not counted. The **floor** is executing each of
the example class's distinct submissions once with nbclient in a plain kernel, nothing else; executing them
in the grading sandbox instead (nbclient with :class:`autograder.sandbox.SandboxedKernelManager`) gives the
sandbox's share. Total time is fitted as ``fixed + per submission × n`` (least squares over the sizes). Then,
in each graded course, two re-runs without ``--force``: nothing changed, and one student added (the fixed
cost a teacher waits for when one late submission comes in). Writes ``benchmarks/grading_throughput.md``.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/grading_throughput.py          # make bench-grading
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/grading_throughput.py --sizes 4 --no-write   # smoke run
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from autograder import assignments  # noqa: E402
from autograder.examples import example_class  # noqa: E402
from autograder.nbgrader import grading  # noqa: E402

ASSIGNMENT = "01_scaled_dot_product_attention"
OUT = REPO / "benchmarks" / "grading_throughput.md"
WORKERS = 2

# Runs a module as ``python -m`` does and, when this (parent) process exits, writes its own peak resident set
# (ru_maxrss, KiB on Linux) to argv[1]. Forked children inherit the exit hook, so it writes only in the parent.
_PEAK_RSS = """
import atexit, os, resource, runpy, sys
out, parent = sys.argv[1], os.getpid()
def peak():
    if os.getpid() == parent:
        with open(out, "w") as handle:
            handle.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
atexit.register(peak)
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@dataclass
class Run:
    """One command (or a sequence of them) on one class: wall clock, the parent's peak memory, the scores."""

    seconds: float
    peak_bytes: int
    cpu: float = 0.0  # CPU seconds (user + system) of the command and every process it started and reaped
    parts: dict[str, float] = field(default_factory=dict)  # command → seconds, when several
    scores: dict[str, dict | None] = field(default_factory=dict)  # student → step → (score, max)


@dataclass
class Row:
    size: int
    nbgrader: Run
    grade: Run
    rerun_unchanged: Run | None = None
    rerun_one_added: Run | None = None

    @property
    def same_scores(self) -> bool:
        return self.nbgrader.scores == self.grade.scores and all(s is not None for s in self.grade.scores.values())

    @property
    def ratio(self) -> float:
        return self.nbgrader.seconds / self.grade.seconds


def cpu_seconds(who: int = resource.RUSAGE_CHILDREN) -> float:
    """User + system CPU seconds so far of this process (``RUSAGE_SELF``) or of its reaped children and theirs."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed(course: Path, module: str, *args: str, code: Path | None = None) -> tuple[float, int, float]:
    """Run ``python -m module args`` in ``course``; return (wall clock seconds, the process's peak RSS in bytes,
    CPU seconds of the command with every process it started: kernels, sandboxes, grading jobs).

    ``code``: a tree whose packages the command imports instead of this checkout's (``PYTHONPATH``), e.g. a base
    commit's files (``benchmarks/rerun_one_student.py``).

    Raises
    ------
    RuntimeError
        If the command fails; the message ends with its output.
    """
    with tempfile.NamedTemporaryFile(prefix="attention-lab-rss-") as rss:
        cpu, started = cpu_seconds(), time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PEAK_RSS, rss.name, module, *args], cwd=course,
                              env={**grading.nbgrader_environment(), **({"PYTHONPATH": str(code)} if code else {})},
                              text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
        if done.returncode != 0:
            raise RuntimeError(f"`python -m {module} {' '.join(args)}` failed:\n{done.stdout[-4000:]}")
        return seconds, int(Path(rss.name).read_text() or 0) * 1024, cpu


def build_class(course: Path, size: int) -> list[str]:
    """``size`` submissions in ``course``: the example class of assignment 1, copied in turn with numbered ids."""
    example = Path(tempfile.mkdtemp(prefix="attention-lab-example-"))
    try:
        originals = example_class.prepare_course(example, [ASSIGNMENT])[ASSIGNMENT]
        grading.copy_course(REPO, course)
        students = []
        for i in range(size):
            original = originals[i % len(originals)]
            student = f"{original}-{i // len(originals) + 1}"
            shutil.copytree(example / "submitted" / original, course / "submitted" / student)
            students.append(student)
        return students
    finally:
        shutil.rmtree(example)


def scores(course: Path, students: list[str]) -> dict[str, dict | None]:
    """student → step → (score, max) as the course's gradebook holds them (None: not graded)."""
    _, results = grading.read_results(course, ASSIGNMENT, students)
    return {r.student: r.steps for r in results}


def plain_nbgrader(course: Path, students: list[str]) -> Run:
    """Sequential plain nbgrader with the course's configuration: generate_assignment, autograde, generate_feedback."""
    with tempfile.TemporaryDirectory(prefix="attention-lab-release-") as scratch:
        parts, peaks, cpu = {}, [], 0.0
        for command in (["generate_assignment", ASSIGNMENT, "--force", f"--CourseDirectory.release_directory={scratch}"],
                        ["autograde", ASSIGNMENT, "--force"], ["generate_feedback", ASSIGNMENT, "--force"]):
            parts[command[0]], peak, used = timed(course, "nbgrader", *command)
            peaks.append(peak)
            cpu += used
    return Run(sum(parts.values()), max(peaks), cpu, parts, scores(course, students))


def ours(course: Path, students: list[str], *extra: str) -> Run:
    """``python -m autograder grade ASSIGNMENT --workers 2 extra...`` in ``course``."""
    seconds, peak, cpu = timed(course, "autograder", "grade", ASSIGNMENT, "--workers", str(WORKERS),
                               "--course-dir", str(course), *extra)
    return Run(seconds, peak, cpu, scores=scores(course, students))


def measure(size: int, reruns: bool = False) -> Row:
    """Grade a class of ``size`` submissions with plain nbgrader and with ``grade --workers 2``, each in a fresh
    course directory; with ``reruns``, then re-run ``grade`` unchanged and with one student added."""
    with tempfile.TemporaryDirectory(prefix="attention-lab-bench-") as tmp:
        plain_course, our_course = Path(tmp) / "nbgrader", Path(tmp) / "grade"
        students = build_class(plain_course, size)
        shutil.copytree(plain_course, our_course)
        row = Row(size, plain_nbgrader(plain_course, students), ours(our_course, students, "--force"))
        if reruns:
            row.rerun_unchanged = ours(our_course, students)
            late = "late-student"
            shutil.copytree(our_course / "submitted" / students[0], our_course / "submitted" / late)
            again = ours(our_course, [*students, late])
            assert again.scores[late] == again.scores[students[0]], "the added student was not graded as its original"
            row.rerun_one_added = again
        return row


def floor(sandboxed: bool) -> tuple[list[float], list[float]]:
    """Seconds and CPU seconds (this process and the kernel's) to execute each distinct example submission once
    with nbclient, in a plain kernel or in the grading sandbox."""
    from autograder.sandbox import SandboxedKernelManager

    seconds, cpus = [], []
    with tempfile.TemporaryDirectory(prefix="attention-lab-floor-") as tmp:
        course = Path(tmp)
        students = example_class.prepare_course(course, [ASSIGNMENT])[ASSIGNMENT]
        notebook = assignments.get(ASSIGNMENT).notebook
        for student in students:
            folder = course / "submitted" / student / ASSIGNMENT
            nb = nbformat.read(str(folder / notebook), as_version=4)
            options = {"kernel_manager_class": SandboxedKernelManager} if sandboxed else {"kernel_name": "python3"}
            cpu, started = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(), time.perf_counter()
            NotebookClient(nb, timeout=120, allow_errors=True, resources={"metadata": {"path": str(folder)}},
                           **options).execute()
            seconds.append(time.perf_counter() - started)
            cpus.append(cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds() - cpu)
    return seconds, cpus


def fit(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """Least squares ``seconds = fixed + slope × n``: (fixed, slope, R²)."""
    if len({n for n, _ in points}) < 2:  # a smoke run of one size: nothing to fit
        return float("nan"), float("nan"), float("nan")
    ns, ts = [n for n, _ in points], [t for _, t in points]
    slope, fixed = statistics.linear_regression(ns, ts)
    mean = statistics.fmean(ts)
    total = sum((t - mean) ** 2 for t in ts)
    residual = sum((t - fixed - slope * n) ** 2 for n, t in points)
    return fixed, slope, 1 - residual / total if total else 1.0



def machine_note(load: tuple[tuple[float, ...], tuple[float, ...]]) -> str:
    """What the machine was doing while the benchmark ran, from its load averages at the start and at the end.

    A 1-minute load above the number of cores at either end means other work shared the machine: then the wall
    clock says more about that work than about the grader (and the CPU columns are what to read).
    """
    loads = (f"load average {' / '.join(f'{x:.1f}' for x in load[0])} at the start, "
             f"{' / '.join(f'{x:.1f}' for x in load[1])} at the end, over 1 / 5 / 15 min, on {os.cpu_count()} cores")
    if max(load[0][0], load[1][0]) <= (os.cpu_count() or 1):
        return f"The machine ran nothing else ({loads}): the wall-clock figures are the ones the goal is about."
    return (f"**Other work shared the machine while this ran** ({loads}): the numbers are as measured. Wall clock "
            "then says more about the others' load at that moment than about the grader — a run given 2 cores' worth "
            "of a machine whose load is 15 gets about a seventh of it, and the load changed between the runs, from "
            "one size to the next and between the two graders of one size. The CPU columns do not depend on how long "
            "a process waited for a core. Re-run it on an idle machine for the wall-clock figures to quote as the "
            "goal's.")

def render(rows: list[Row], plain_floor: tuple[list[float], list[float]],
           sandbox_floor: tuple[list[float], list[float]], load: tuple[tuple[float, ...], tuple[float, ...]]) -> str:
    floor_s, floor_cpu = statistics.fmean(plain_floor[0]), statistics.fmean(plain_floor[1])
    sandbox_s, sandbox_cpu = statistics.fmean(sandbox_floor[0]), statistics.fmean(sandbox_floor[1])
    nb_fixed, nb_slope, nb_r2 = fit([(r.size, r.nbgrader.seconds) for r in rows])
    our_fixed, our_slope, our_r2 = fit([(r.size, r.grade.seconds) for r in rows])
    nb_cfixed, nb_cslope, nb_cr2 = fit([(r.size, r.nbgrader.cpu) for r in rows])
    our_cfixed, our_cslope, our_cr2 = fit([(r.size, r.grade.cpu) for r in rows])
    largest = rows[-1]
    mib = 2 ** 20
    students = len(example_class.students_of(assignments.get(ASSIGNMENT)))
    lines = [
        "# Grading throughput: plain nbgrader against `grade --workers 2`, and the floor",
        "",
        "Generated by `benchmarks/grading_throughput.py` (`make bench-grading`; its docstring says what each "
        "column measures). Assignment 1, classes made of its example class "
        f"({students} submissions: correct variants, the untouched release, one per common mistake) taken in turn. "
        "**nbgrader**: plain `nbgrader generate_assignment` + `autograde` + `generate_feedback` with this course's "
        "configuration (sandbox, probes, comparison, stand-in passes), one student after the other. **grade**: "
        f"`python -m autograder grade --workers {WORKERS} --force` (`make grade`). Same run, a fresh course "
        "directory each, wall clock of the whole command. CPU is the user + system seconds of the command and of "
        "the processes it started and waited for: the grading processes (nbgrader's, our jobs), and for the "
        "floor's plain kernels the kernel; a sandboxed kernel's CPU is not counted (bubblewrap's processes are not "
        "reaped as the command's children), so for nbgrader and `grade` the CPU columns are the grader's own work "
        f"outside the learner's kernel. `OPENBLAS_NUM_THREADS=1`, {os.cpu_count()} cores.",
        "",
        machine_note(load),
        "",
        "| submissions | nbgrader wall (generate / autograde / feedback) | grade, 2 workers, wall | throughput × | "
        "CPU, nbgrader / grade | peak RSS of the parent, nbgrader / grade | same scores |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        parts = " / ".join(f"{s:.0f}" for s in row.nbgrader.parts.values())
        lines.append(f"| {row.size} | {row.nbgrader.seconds:.0f} s ({parts}) | {row.grade.seconds:.0f} s | "
                     f"{row.ratio:.2f}× | {row.nbgrader.cpu:.0f} s / {row.grade.cpu:.0f} s | "
                     f"{row.nbgrader.peak_bytes / mib:.0f} / {row.grade.peak_bytes / mib:.0f} MiB | "
                     f"{'yes' if row.same_scores else 'NO'} |")
    lines += [
        "",
        f"## Fit: total = fixed + per submission × n (least squares over the {len(rows)} sizes)",
        "",
        "| | fixed | per submission | R² | per submission ÷ floor |",
        "|---|---|---|---|---|",
        f"| nbgrader, wall clock | {nb_fixed:.1f} s | {nb_slope:.2f} s | {nb_r2:.3f} | {nb_slope / floor_s:.2f}× |",
        f"| grade, {WORKERS} workers, wall clock | {our_fixed:.1f} s | {our_slope:.2f} s | {our_r2:.3f} | "
        f"{our_slope / floor_s:.2f}× |",
        f"| nbgrader, CPU outside the kernel | {nb_cfixed:.1f} s | {nb_cslope:.2f} s | {nb_cr2:.3f} | – |",
        f"| grade, CPU outside the kernel | {our_cfixed:.1f} s | {our_cslope:.2f} s | {our_cr2:.3f} | – |",
        "",
        "When the machine's load changes from one size to the next, the wall-clock fit describes the load rather "
        "than the grader (a negative slope: the load fell while the larger class ran); the CPU fit does not. "
        + ("With two sizes a line fits exactly (R² = 1): linearity is tested only with three or more."
           if len(rows) == 2 else ""),
        "",
        f"**Floor** (each of the {len(plain_floor[0])} distinct submissions executed once with nbclient in a plain "
        f"kernel, nothing else): {floor_s:.2f} s wall, {floor_cpu:.2f} s CPU (kernel included) per submission. "
        f"The same in the grading sandbox: {sandbox_s:.2f} s wall, so the **sandbox's share** is "
        + (f"{sandbox_s - floor_s:.2f} s per submission ({(sandbox_s - floor_s) / sandbox_s:.0%} of a sandboxed "
           "execution)." if sandbox_s >= floor_s else
           f"not resolved by this run: the sandboxed executions ran {floor_s - sandbox_s:.2f} s faster than the plain "
           "ones, because the machine's load changed between the two (benchmarks/sandbox_provisioner.md measures "
           "the sandbox against its predecessor pairwise).")
        + f" ({len(sandbox_floor[0])} sandboxed executions; their CPU, {sandbox_cpu:.2f} s, is nbclient's alone.)",
        "",
        f"**Throughput at {largest.size} submissions**: {largest.ratio:.2f}× plain nbgrader's wall clock (goal ≥ 1.8× "
        "on an idle 2-core machine). "
        f"**Memory**: the parent's peak RSS is {', '.join(f'{r.grade.peak_bytes / mib:.0f}' for r in rows)} MiB at "
        f"{', '.join(str(r.size) for r in rows)} submissions (nbgrader's: "
        f"{', '.join(f'{r.nbgrader.peak_bytes / mib:.0f}' for r in rows)} MiB).",
        "",
        "## Re-runs (without `--force`), in the graded course",
        "",
        "| class size | nothing changed: wall / CPU | one student added: wall / CPU |",
        "|---|---|---|",
        *(f"| {r.size} | {r.rerun_unchanged.seconds:.1f} s / {r.rerun_unchanged.cpu:.1f} s | "
          f"{r.rerun_one_added.seconds:.1f} s / {r.rerun_one_added.cpu:.1f} s |" for r in rows if r.rerun_unchanged),
        "",
        "A re-run grades only what changed (issue 14 §2), no longer runs `generate_assignment` when the gradebook "
        "already holds the assignment from the same source and grader (`gradebook-hashes.json`; it was 5–7 s of "
        "every run), hashes the assignment's source and spec once per class instead of once per student, and its "
        "command line no longer imports jsonschema's IRI checker (`rfc3987_syntax` compiles ~38 grammars when "
        "imported: 1–2 s idle, 3–7 s measured here). What is left of a re-run adding one student: the interpreter "
        "and imports, hashing the class's submissions, and the one student's autograde + "
        "feedback (the floor, the sandbox, the probes, the feedback's HTML export). Goal: ≤ 5 s on an idle machine.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 20, 40], help="class sizes (default: 10 20 40)")
    parser.add_argument("--no-write", action="store_true", help=f"print only; do not write {OUT.name}")
    args = parser.parse_args(argv)
    start_load = os.getloadavg()
    # the floor first, then each size; the report is rewritten after each size, so that a run stopped early (a
    # shared machine) leaves what it measured, and says which sizes it has
    plain, sandboxed = floor(False), floor(True)
    print(f"floor {statistics.fmean(plain[0]):.2f} s (CPU {statistics.fmean(plain[1]):.2f}), sandboxed "
          f"{statistics.fmean(sandboxed[0]):.2f} s (CPU {statistics.fmean(sandboxed[1]):.2f}) per submission", flush=True)
    rows = []
    for size in args.sizes:
        row = measure(size, reruns=True)
        rows.append(row)
        print(f"{size} submissions: nbgrader {row.nbgrader.seconds:.1f} s (CPU {row.nbgrader.cpu:.1f} s) "
              f"{row.nbgrader.parts}, grade {row.grade.seconds:.1f} s (CPU {row.grade.cpu:.1f} s), {row.ratio:.2f}x, "
              f"same scores: {row.same_scores}; re-runs: unchanged {row.rerun_unchanged.seconds:.1f} s, one added "
              f"{row.rerun_one_added.seconds:.1f} s; load {os.getloadavg()[0]:.1f}", flush=True)
        text = render(rows, plain, sandboxed, (start_load, os.getloadavg()))
        if len(rows) < len(args.sizes):
            text += (f"\n**Partial**: sizes {', '.join(str(r.size) for r in rows)} of {', '.join(map(str, args.sizes))} "
                     "measured so far.\n")
        if not args.no_write:
            OUT.write_text(text)
            print(f"wrote {OUT}", flush=True)
    print(text)
    return 0 if all(row.same_scores for row in rows) else 1


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
