"""Grading time per submission with the sandbox as a kernel provisioner, against the code before it.

The baseline is a git revision of this repository from before the sandbox became a jupyter_client
kernel provisioner (``--baseline``, default ``integrate``), exported into a temporary folder and run
from there (``PYTHONPATH``) with this environment's packages. For each tree, in alternating runs,
assignment 1's example class (13 submissions) is graded as ``make grade`` grades it: each student in a
child process (``autograder.student_job.run_student``: autograde + feedback), one after the other, in
a fresh course directory. Reported: each student's wall clock, their median and total per run, and
whether both trees gave every student the same total. Kernels run with OPENBLAS_NUM_THREADS=1.
Writes ``benchmarks/sandbox_provisioner.md``.

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

# Run in a child process whose PYTHONPATH is the tree being measured; prints one JSON line.
DRIVER = f'''
import json, sys, tempfile
from pathlib import Path
import autograder.sandbox
from autograder import example_class, grading, student_job
with tempfile.TemporaryDirectory(prefix="attention-lab-bench-") as tmp:
    course = Path(tmp)
    students = example_class.prepare_course(course, [{ASSIGNMENT!r}])[{ASSIGNMENT!r}]
    grading.load_into_gradebook(course, {ASSIGNMENT!r})
    budget = student_job.StudentBudget(config=grading.course_config(course))
    seconds = {{s: student_job.run_student(course, {ASSIGNMENT!r}, s, budget).seconds for s in students}}
    _, results = grading.read_results(course, {ASSIGNMENT!r}, students)
print(json.dumps({{"seconds": seconds, "totals": {{r.student: r.total for r in results}},
                  "sandbox": autograder.sandbox.__file__}}))
'''


def grade(tree: Path) -> dict:
    """Grade the example class with the code in ``tree``; the driver's JSON."""
    env = dict(os.environ, PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run([sys.executable, "-c", DRIVER], cwd=tree, env=env, capture_output=True, text=True,
                          check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["sandbox"]).is_relative_to(tree), f"{tree} graded with {result['sandbox']}"
    return result


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
    parser.add_argument("--runs", type=int, default=2, help="runs per tree (alternating)")
    parser.add_argument("--baseline", default="integrate", help="git revision before the provisioner")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="attention-lab-baseline-") as tmp:
        baseline = Path(tmp)
        commit = export(args.baseline, baseline)
        trees = {"baseline": baseline, "provisioner": REPO}
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for _ in range(args.runs):
            for name, tree in trees.items():
                runs[name].append(grade(tree))
    per_student = {name: [s for run in results for s in run["seconds"].values()] for name, results in runs.items()}
    medians = {name: statistics.median(values) for name, values in per_student.items()}
    totals = {name: [sum(run["seconds"].values()) for run in results] for name, results in runs.items()}
    same = all(run["totals"] == runs["baseline"][0]["totals"] for results in runs.values() for run in results)
    students = len(runs["baseline"][0]["seconds"])
    labels = {"baseline": f"before (`{args.baseline}` = {commit}: KernelManager subclass, private overrides)",
              "provisioner": "the sandbox as a kernel provisioner (this tree)"}
    lines = [
        "# Grading time per submission: the sandbox as a kernel provisioner",
        "",
        f"`benchmarks/sandbox_provisioner.py`, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, OPENBLAS_NUM_THREADS=1: assignment 1's "
        f"example class ({students} submissions), each graded as `make grade` grades it (a child process per "
        f"student: autograde + feedback in the sandbox), {args.runs} runs per tree, alternating.",
        "",
        *_table(["code", "per submission (median)", "class, per run"],
                [[labels[name], f"{medians[name]:.2f} s", ", ".join(f"{t:.1f} s" for t in totals[name])]
                 for name in trees]),
        "",
        f"Ratio: **{medians['provisioner'] / medians['baseline']:.2f}×** the baseline per submission "
        f"({medians['provisioner'] - medians['baseline']:+.2f} s). Same total for every student in every run: "
        f"**{'yes' if same else 'NO'}**.",
        "",
        "Per student (seconds, each run):",
        "",
        *_table(["student", "before", "provisioner"],
                [[student, ", ".join(f"{run['seconds'][student]:.2f}" for run in runs["baseline"]),
                  ", ".join(f"{run['seconds'][student]:.2f}" for run in runs["provisioner"])]
                 for student in runs["baseline"][0]["seconds"]]),
        "",
    ]
    out = REPO / "benchmarks" / "sandbox_provisioner.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
