"""What grading one student costs: each student's job (a forked child) in wall clock and CPU, against the code before.

``grading.grade_class(course, A, students, workers=1, force=True)`` on an assignment's end-to-end sample (the
students the test suite grades; ``example_class.prepare_course(..., sample=True)``), run by one driver process
per tree: this worktree, and a baseline git revision (``--baseline``, default ``git merge-base HEAD main``,
i.e. ``main`` without this branch) exported into a temporary folder and run from there (``PYTHONPATH``) with
this environment's packages. The trees run one after the other, alternating, ``--runs`` times each, so that
both see the same load on a shared machine. Per student: the job's wall clock (``StudentJob.start`` to
``finish``) and its CPU, user + system seconds of the child and of what it reaped (``RUSAGE_CHILDREN`` of the
grading process across the job; the sandboxed kernel is not reaped by it, so this is the grader's own work
outside the learner's kernel). The kernel's own work shows as the job's wall clock and as its cells' execution
time (``execute_input`` to ``execute_reply`` in each autograded cell's metadata, summed). Also the grading
process's own CPU over the class (``RUSAGE_SELF``: the warm-up before the first fork is there) and the wall clock
of ``grade_class``.

Both trees must write the same autograded notebooks and feedback pages, apart from timestamps and the grader
version (a hash of the grader's source, which differs between two trees by construction): each file is
compared after masking those (a feedback page as BeautifulSoup re-serialises it). Kernels run with OPENBLAS_NUM_THREADS=1. Writes ``benchmarks/student_job_cost.md``.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/student_job_cost.py [--assignment A] [--runs N]
        [--baseline REV] [--no-write]

Assignment 1 (the default) writes ``benchmarks/student_job_cost.md``; another assignment
``benchmarks/student_job_cost_<assignment>.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "01_scaled_dot_product_attention"


def output_file(assignment: str) -> Path:
    """Where the benchmark of ``assignment`` is written."""
    suffix = "" if assignment == ASSIGNMENT else f"_{assignment}"
    return REPO / "benchmarks" / f"student_job_cost{suffix}.md"

# Runs in a process whose PYTHONPATH is the tree measured; prints one JSON line: per-student rows, the class's
# wall clock and the grading process's CPU, and each autograded/feedback file with timestamps and the grader
# version masked.
DRIVER = '''
import datetime, json, re, resource, sys, tempfile, time
from pathlib import Path
from bs4 import BeautifulSoup
from autograder.examples import example_class
from autograder.nbgrader import grading, student_job

A = sys.argv[1]
STAMP = re.compile(r"\\d{4}-\\d\\d-\\d\\d[T ]\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?Z?(\\+00:00)?|grader [0-9a-f]{12}")

def serialised(path):
    # a page as BeautifulSoup writes it: nbconvert's HTMLExporter re-serialised every page, the course's
    # exporter now only one with an image (feedback_html.accessible_html): whitespace may differ between trees
    text = path.read_text()
    return str(BeautifulSoup(text, "html.parser")) if path.suffix == ".html" else text

def children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime

rows, started = [], {}
start, finish = student_job.StudentJob.start, student_job.StudentJob.finish
def timed_start(self):
    started[self.student] = children()
    start(self)
def timed_finish(self):
    result = finish(self)
    rows.append({"student": self.student, "wall": result.seconds, "cpu": children() - started[self.student],
                 "graded": result.graded})
    return result
student_job.StudentJob.start, student_job.StudentJob.finish = timed_start, timed_finish

with tempfile.TemporaryDirectory(prefix="attention-lab-job-cost-") as tmp:
    course = Path(tmp)
    students = example_class.prepare_course(course, [A], sample=True)[A]
    self_cpu = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    _, results = grading.grade_class(course, A, students, workers=1, force=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    files = {str(p.relative_to(course)): STAMP.sub("<masked>", serialised(p))
             for folder in ("autograded", "feedback") for p in sorted((course / folder).rglob("*")) if p.is_file()}
    def moment(stamp):
        return datetime.datetime.fromisoformat((stamp[0] if isinstance(stamp, list) else stamp).replace("Z", "+00:00"))
    for row in rows:
        cells = 0.0
        for notebook in (course / "autograded" / row["student"] / A).glob("*.ipynb"):
            for cell in json.loads(notebook.read_text())["cells"]:
                run = cell.get("metadata", {}).get("execution", {})
                if "iopub.execute_input" in run and "shell.execute_reply" in run:
                    cells += (moment(run["shell.execute_reply"]) - moment(run["iopub.execute_input"])).total_seconds()
        row["cells"] = cells
    print(json.dumps({"rows": rows, "wall": wall,
                      "parent_cpu": after.ru_utime + after.ru_stime - self_cpu.ru_utime - self_cpu.ru_stime,
                      "totals": {r.student: r.total for r in results}, "files": files}))
'''


def run_tree(tree: Path, assignment: str = ASSIGNMENT) -> dict:
    """One driver run with ``tree`` first on PYTHONPATH; its JSON result.

    Raises
    ------
    RuntimeError
        If the driver fails; the message ends with its output.
    """
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-c", DRIVER, assignment], cwd=tree, env=env, text=True, capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"the driver failed in {tree}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def export(revision: str, folder: Path) -> Path:
    """``git archive`` of ``revision`` unpacked into ``folder``."""
    archive = subprocess.run(["git", "archive", revision], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def summary(runs: list[dict]) -> dict:
    """Means over every student of every run, and the class's wall clock and the parent's CPU (mean of runs)."""
    rows = [row for run in runs for row in run["rows"]]
    return {"wall": statistics.fmean(r["wall"] for r in rows), "cpu": statistics.fmean(r["cpu"] for r in rows),
            "median_wall": statistics.median(r["wall"] for r in rows),
            "median_cpu": statistics.median(r["cpu"] for r in rows),
            "cells": statistics.fmean(r.get("cells", 0.0) for r in rows),
            "class_wall": statistics.fmean(run["wall"] for run in runs),
            "parent_cpu": statistics.fmean(run["parent_cpu"] for run in runs), "jobs": len(rows)}


#: What the committed comparison (benchmarks/student_job_cost.md) changed, the default ``--note``.
FEEDBACK_PARSE_NOTE = (
    "What changed (this tree against the baseline): the feedback page is no longer parsed again after it is "
    "rendered. nbconvert's `HTMLExporter.from_notebook_node` re-parses every page with BeautifulSoup (Python's "
    "`html.parser`; assignment 1's page has about 3200 tags, most of them Pygments' spans) to give images without "
    "`alt` a text alternative and to make cells of its JupyterLab template focusable; nbgrader's feedback template "
    "is the classic one and the sample's pages hold no image, so that pass changed nothing but whitespace. The "
    "course's exporter (`feedback_html.FeedbackExporter.from_notebook_node`) renders as nbconvert does and makes "
    "the same two changes (`feedback_html.accessible_html`) only on a page with an image or a JupyterLab-template "
    "cell. The grading process's own CPU falls too: its warm-up renders the assignment's feedback once.")


def render(baseline: str, old: dict, new: dict, same: bool, students: list[str], load: tuple,
           assignment: str = ASSIGNMENT, note: str = FEEDBACK_PARSE_NOTE) -> str:
    per_student = sorted({r["student"] for run in new["runs"] for r in run["rows"]})
    lines = [
        "# What grading one student costs: the job of each student, before and after",
        "",
        "Generated by `benchmarks/student_job_cost.py` (its docstring says what each figure measures). "
        f"`grade_class(..., workers=1, force=True)` on `{assignment}`'s end-to-end sample ({len(students)} students: "
        f"{', '.join(students)}); **before**: `{baseline}` (git archive, run from a temporary folder), "
        "**after**: this tree; alternating, each "
        f"{len(old['runs'])} times. Job = one student's forked child (autograde + feedback). CPU = user + system "
        "seconds of the child and what it reaped (the sandboxed kernel is not among them). "
        f"`OPENBLAS_NUM_THREADS=1`, {os.cpu_count()} cores, load average {load[0]:.1f} at the start and "
        f"{load[1]:.1f} at the end (a shared machine: the CPU columns do not depend on waiting for a core, "
        "the wall clock does).",
        "",
        "| per job | before | after | after ÷ before |",
        "|---|---|---|---|",
    ]
    for key, label in (("cpu", "CPU, mean"), ("median_cpu", "CPU, median"), ("wall", "wall clock, mean"),
                       ("median_wall", "wall clock, median"),
                       ("cells", "the kernel's cell execution time, summed (autograded notebook's metadata)")):
        lines.append(f"| {label} | {old['summary'][key]:.2f} s | {new['summary'][key]:.2f} s | "
                     f"{new['summary'][key] / old['summary'][key]:.2f} |")
    lines += [
        f"| the grading process's own CPU over the class (the warm-up is here) | {old['summary']['parent_cpu']:.2f} s "
        f"| {new['summary']['parent_cpu']:.2f} s | {new['summary']['parent_cpu'] / old['summary']['parent_cpu']:.2f} |",
        f"| `grade_class` wall clock (preflight kernel, generate_assignment, the jobs) | "
        f"{old['summary']['class_wall']:.1f} s | {new['summary']['class_wall']:.1f} s | "
        f"{new['summary']['class_wall'] / old['summary']['class_wall']:.2f} |",
        "",
        "Per student, CPU of the job (mean over the runs), before → after:",
        "",
        "| student | before | after |",
        "|---|---|---|",
    ]
    for student in per_student:
        cpu = [statistics.fmean(r["cpu"] for run in side["runs"] for r in run["rows"] if r["student"] == student)
               for side in (old, new)]
        lines.append(f"| {student} | {cpu[0]:.2f} s | {cpu[1]:.2f} s |")
    lines += [
        "",
        f"**Same grades and the same bytes**: {'yes' if same else 'NO'} — every autograded notebook and feedback "
        "page of every run is identical between the trees after masking timestamps and the grader version (each "
        "feedback page as BeautifulSoup re-serialises it); the totals are equal.",
        "",
        note,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each tree (default 2)")
    parser.add_argument("--baseline", default=None, help="git revision before (default: git merge-base HEAD main)")
    parser.add_argument("--assignment", default=ASSIGNMENT, help=f"the assignment (default {ASSIGNMENT})")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write the .md file")
    parser.add_argument("--note", default=FEEDBACK_PARSE_NOTE, help="what changed between the trees, in words")
    args = parser.parse_args(argv)
    baseline = args.baseline or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=REPO, check=True,
                                               capture_output=True, text=True).stdout.strip()
    short = subprocess.run(["git", "rev-parse", "--short", baseline], cwd=REPO, check=True, capture_output=True,
                           text=True).stdout.strip()
    start_load = os.getloadavg()[0]
    old, new = {"runs": []}, {"runs": []}
    with tempfile.TemporaryDirectory(prefix="attention-lab-baseline-") as tmp:
        before = export(baseline, Path(tmp))
        for i in range(args.runs):
            for side, tree in ((old, before), (new, REPO)) if i % 2 == 0 else ((new, REPO), (old, before)):
                side["runs"].append(run_tree(tree, args.assignment))
                print(f"run {i + 1}: {'after' if side is new else 'before'}: per job CPU "
                      f"{statistics.fmean(r['cpu'] for r in side['runs'][-1]['rows']):.2f} s, wall "
                      f"{statistics.fmean(r['wall'] for r in side['runs'][-1]['rows']):.2f} s", flush=True)
    for side in (old, new):
        side["summary"] = summary(side["runs"])
    reference = old["runs"][0]
    same = all(run["files"] == reference["files"] and run["totals"] == reference["totals"]
               and all(r["graded"] for r in run["rows"]) for run in old["runs"] + new["runs"])
    text = render(short, old, new, same, list(reference["totals"]), (start_load, os.getloadavg()[0]), args.assignment,
                  args.note)
    if not args.no_write:
        output_file(args.assignment).write_text(text)
    print(text)
    return 0 if same else 1


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
