"""Grading time per submission with the sandbox as a kernel provisioner, against the code before it.

The baseline is a git revision of this repository from before the sandbox became a jupyter_client
kernel provisioner (``--baseline``, default: ``git merge-base HEAD integrate``, i.e. ``integrate``
without this branch's sandbox), exported into a temporary folder and run from there (``PYTHONPATH``)
with this environment's packages. One driver process per tree prepares its own course directory with assignment 1's example class (13
submissions); then each submission is graded by both, one after the other (the order alternates), as
``make grade`` grades it: in a child process (``autograder.nbgrader.student_job.run_student``: autograde +
feedback in the sandbox). Pairs taken moments apart see the same load on a shared machine, so the
paired ratio is the figure to quote. Also checked: both trees give every student the same total.
Kernels run with OPENBLAS_NUM_THREADS=1. Writes ``benchmarks/sandbox_provisioner.md``.

    .venv/bin/python benchmarks/sandbox_provisioner.py [--runs N] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "01_scaled_dot_product_attention"

# Runs in a process whose PYTHONPATH is the tree measured: prepares a course, prints its students as one
# JSON line, then grades each student named on stdin and prints {"seconds", "total"} as one JSON line.
DRIVER = f'''
import json, sys, tempfile
from pathlib import Path
import autograder.sandbox
try:
    from autograder.examples import example_class
    from autograder.nbgrader import grading, student_job
except ImportError:  # a tree from before one folder per assignment (issue 11)
    from autograder import example_class, grading, student_job
with tempfile.TemporaryDirectory(prefix="attention-lab-bench-") as tmp:
    course = Path(tmp)
    students = example_class.prepare_course(course, [{ASSIGNMENT!r}])[{ASSIGNMENT!r}]
    grading.load_into_gradebook(course, {ASSIGNMENT!r})
    budget = student_job.StudentBudget(config=grading.course_config(course))
    print(json.dumps({{"students": students, "sandbox": autograder.sandbox.__file__}}), flush=True)
    for line in sys.stdin:
        student = line.strip()
        job = student_job.run_student(course, {ASSIGNMENT!r}, student, budget)
        _, results = grading.read_results(course, {ASSIGNMENT!r}, [student])
        print(json.dumps({{"seconds": job.seconds, "graded": job.graded, "total": results[0].total}}), flush=True)
'''


class Driver:
    """A long-lived grading process running the code of one tree."""

    def __init__(self, tree: Path):
        env = dict(os.environ, PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1",
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        self.process = subprocess.Popen([sys.executable, "-c", DRIVER], cwd=tree, env=env, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        ready = self.read()
        assert Path(ready["sandbox"]).is_relative_to(tree), f"{tree} grades with {ready['sandbox']}"
        self.students = ready["students"]

    def read(self) -> dict:
        """The driver's next JSON line (anything else it prints, such as a library's notice, is skipped)."""
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the grading driver stopped (exit code {self.process.wait()})")
            if line.startswith("{"):
                return json.loads(line)

    def grade(self, student: str) -> dict:
        self.process.stdin.write(student + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def export(revision: str, target: Path) -> str:
    """Write ``revision``'s files into ``target``; its commit id."""
    commit = subprocess.run(["git", "rev-parse", "--short", revision], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return commit


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Markdown table lines."""
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers), *("| " + " | ".join(r) + " |" for r in rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="gradings of each submission per tree")
    parser.add_argument("--baseline", help="git revision before the provisioner (default: merge base with integrate)")
    args = parser.parse_args(argv)
    if args.baseline is None:
        args.baseline = subprocess.run(["git", "merge-base", "HEAD", "integrate"], cwd=REPO, capture_output=True,
                                       text=True, check=True).stdout.strip()
    names = ("baseline", "provisioner")
    with tempfile.TemporaryDirectory(prefix="attention-lab-baseline-") as tmp:
        commit = export(args.baseline, Path(tmp))
        drivers = {"baseline": Driver(Path(tmp)), "provisioner": Driver(REPO)}
        students = drivers["baseline"].students
        assert drivers["provisioner"].students == students
        done: dict[str, dict[str, list[dict]]] = {name: {s: [] for s in students} for name in names}
        for run in range(args.runs):
            for number, student in enumerate(students):
                order = names if (run + number) % 2 == 0 else names[::-1]
                for name in order:
                    done[name][student].append(drivers[name].grade(student))
        for driver in drivers.values():
            driver.close()
    seconds = {name: [g["seconds"] for s in students for g in done[name][s]] for name in names}
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    ratios = [p["seconds"] / b["seconds"] for s in students
              for b, p in zip(done["baseline"][s], done["provisioner"][s])]
    same = all(g["graded"] and g["total"] == done["baseline"][s][0]["total"]
               for name in names for s in students for g in done[name][s])
    labels = {"baseline": f"before (`{commit}`: KernelManager subclass overriding private methods)",
              "provisioner": "the sandbox as a kernel provisioner (this tree)"}
    lines = [
        "# Grading time per submission: the sandbox as a kernel provisioner",
        "",
        f"`benchmarks/sandbox_provisioner.py`, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} cores (shared), Python {platform.python_version()}, OPENBLAS_NUM_THREADS=1: each of "
        f"assignment 1's {len(students)} example submissions graded {args.runs}× by each tree as `make grade` "
        "grades it (a child process per student: autograde + feedback in the sandbox), the two trees taking "
        "turns submission by submission.",
        "",
        *_table(["code", "per submission, median", "min", "max"],
                [[labels[name], f"{medians[name]:.2f} s", f"{min(seconds[name]):.2f} s",
                  f"{max(seconds[name]):.2f} s"] for name in names]),
        "",
        f"Paired ratio (the same submission graded by both, moments apart), median of {len(ratios)}: "
        f"**{statistics.median(ratios):.2f}×** the baseline (quartiles "
        f"{statistics.quantiles(ratios, n=4)[0]:.2f}× – {statistics.quantiles(ratios, n=4)[2]:.2f}×). "
        f"Every submission graded with the same total by both trees in every run: **{'yes' if same else 'NO'}**.",
        "",
        *_table(["student", "total", "before, s", "provisioner, s"],
                [[s, f"{done['baseline'][s][0]['total']:g}",
                  ", ".join(f"{g['seconds']:.2f}" for g in done["baseline"][s]),
                  ", ".join(f"{g['seconds']:.2f}" for g in done["provisioner"][s])] for s in students]),
        "",
    ]
    out = REPO / "benchmarks" / "sandbox_provisioner.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
