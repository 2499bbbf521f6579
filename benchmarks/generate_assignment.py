"""Loading every assignment into the gradebook: ``nbgrader generate_assignment`` as a command against in-process.

``make grade`` and ``make release`` run ``generate_assignment`` once per assignment
(:func:`autograder.nbgrader.gradebook_load.generate`). It used to be ``python -m nbgrader generate_assignment
A --force`` with ``--CourseDirectory.*`` overrides, a new interpreter per assignment that spent most of its time
importing nbgrader; now it is nbgrader's ``NbGraderAPI.generate_assignment`` in the calling process
(:func:`autograder.nbgrader.gradebook_load.run_generate_assignment`). Both ways are measured here in the same
run, as ``make grade`` loads a class: one fresh interpreter (``--child``) per way and run, which times
:func:`autograder.nbgrader.grading.load_into_gradebook` for all seven assignments into a fresh copy of the
course (new gradebook: the first load also runs nbgrader's ``alembic heads``). The command way is the code
before this change, put back in that child in place of ``run_generate_assignment``. The two ways take turns
(the order alternates run by run), so that both see the same load of a shared machine. Also checked: both
leave the same gradebook rows (every notebook's cells, points, checksums). Writes
``benchmarks/generate_assignment.md``.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/generate_assignment.py [--runs N]
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
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "generate_assignment.md"
WAYS = {"command": "`python -m nbgrader generate_assignment A --force` per assignment (before)",
        "api": "`NbGraderAPI.generate_assignment` in the calling process (this tree)"}


def command_generate_assignment(course_dir: Path, assignment: str, *, release_dir: Path, source_dir: Path | None = None,
                                db_url: str | None = None) -> dict:
    """What :func:`autograder.nbgrader.gradebook_load.generate` ran before this change, with its result's shape."""
    from autograder.nbgrader.grading import run_nbgrader

    args = [f"--CourseDirectory.release_directory={release_dir}"]
    if source_dir is not None:
        args.append(f"--CourseDirectory.source_directory={Path(source_dir).resolve()}")
    if db_url is not None:
        args.append(f"--CourseDirectory.db_url={db_url}")
    done = run_nbgrader(course_dir, "generate_assignment", assignment, "--force", *args, check=False)
    return {"success": done.returncode == 0, "log": done.stdout}


def gradebook_rows(course: Path) -> dict:
    """Every assignment's notebooks and cells as the course's gradebook holds them (nbgrader's public API)."""
    from nbgrader.api import Gradebook

    from autograder.course import COURSE_ID
    from autograder.nbgrader.gradebook_copy import sqlite_url

    rows = {}
    with Gradebook(sqlite_url(course / "gradebook.db"), course_id=COURSE_ID) as gradebook:
        for assignment in gradebook.assignments:
            for nb in assignment.notebooks:
                rows[f"{assignment.name}/{nb.name}"] = {
                    "grade": sorted((c.name, c.max_score, c.cell_type) for c in nb.grade_cells),
                    "solution": sorted(c.name for c in nb.solution_cells),
                    "task": sorted((c.name, c.max_score) for c in nb.task_cells),
                    "source": sorted((c.name, c.cell_type, c.locked, c.checksum, c.source) for c in nb.source_cells)}
    return rows


def child(way: str, course: Path) -> None:
    """In a fresh interpreter: load every assignment of ``course`` the way named; print seconds and rows as JSON."""
    from autograder.nbgrader import gradebook_load, grading

    if way == "command":
        gradebook_load.run_generate_assignment = command_generate_assignment
    seconds = {}
    for assignment in sorted(p.name for p in (course / "source").iterdir() if p.is_dir()):
        start = time.perf_counter()
        grading.load_into_gradebook(course, assignment)
        seconds[assignment] = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rows": gradebook_rows(course)}))


def run_child(way: str, scratch: Path, run: int) -> dict:
    """One fresh interpreter loading a fresh course copy; its wall clock from start to exit is ``wall``."""
    from autograder.nbgrader.grading import copy_course, nbgrader_environment

    course = copy_course(REPO, scratch / f"{way}-{run}")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--child", way, str(course)], env=nbgrader_environment(),
                          capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - start
    return result


def import_seconds() -> float:
    """Wall clock of a fresh interpreter that only imports ``nbgrader.apps`` (what every command paid first)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import nbgrader.apps"], check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each way (they alternate)")
    parser.add_argument("--no-write", action="store_true", help=f"print only, do not write {OUT.name}")
    parser.add_argument("--child", nargs=2, metavar=("WAY", "COURSE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return 0
    load_before = os.getloadavg()[0]
    results = {way: [] for way in WAYS}
    imports = []
    with tempfile.TemporaryDirectory(prefix="attention-lab-generate-bench-") as scratch:
        for run in range(args.runs):
            for way in (WAYS if run % 2 == 0 else reversed(list(WAYS))):
                results[way].append(run_child(way, Path(scratch), run))
            imports.append(import_seconds())
    same_rows = all(r["rows"] == results["command"][0]["rows"] for way in WAYS for r in results[way])
    wall = {way: statistics.median(r["wall"] for r in results[way]) for way in WAYS}
    assignments = list(results["command"][0]["seconds"])
    per = {way: {a: statistics.median(r["seconds"][a] for r in results[way]) for a in assignments} for way in WAYS}
    ratios = sorted(c["wall"] / a["wall"] for c, a in zip(results["command"], results["api"]))
    lines = ["# Loading every assignment into the gradebook: `generate_assignment` as a command against in-process", "",
             f"`benchmarks/generate_assignment.py`, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
             f"{os.cpu_count()} cores (shared with other work: load average {load_before:.1f} at the start, "
             f"{os.getloadavg()[0]:.1f} at the end), Python {platform.python_version()}: "
             f"`grading.load_into_gradebook` for all {len(assignments)} assignments into a fresh copy of the course "
             f"(new gradebook), in one fresh interpreter per way and run (start-up and imports included), "
             f"{args.runs} runs of each way, taking turns.", "",
             "| way | whole load, median | per-run wall clocks |", "|---|---|---|"]
    for way in WAYS:
        walls = ", ".join(f"{r['wall']:.1f}" for r in results[way])
        lines.append(f"| {WAYS[way]} | {wall[way]:.1f} s | {walls} s |")
    lines += ["", f"Ratio, the command way ÷ in-process, run by run: **{statistics.median(ratios):.2f}×** (median; "
              f"{', '.join(f'{r:.2f}' for r in ratios)}). Both ways left the same gradebook rows in every run: "
              f"**{'yes' if same_rows else 'NO'}**.", "",
              "| assignment | command, median | in-process, median |", "|---|---|---|"]
    lines += [f"| {a} | {per['command'][a]:.2f} s | {per['api'][a]:.2f} s |" for a in assignments]
    lines += ["", f"A fresh interpreter that only imports `nbgrader.apps` takes {statistics.median(imports):.1f} s "
              f"(median of {len(imports)}): each command paid it before doing anything; in-process the first "
              "load pays it once (the first assignment's row, with nbgrader's `alembic heads` for the new gradebook).",
              ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write and same_rows:
        OUT.write_text(text)
    return 0 if same_rows else 1


if __name__ == "__main__":
    sys.exit(main())
