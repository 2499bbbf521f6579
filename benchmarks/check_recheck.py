"""``make check``: the first check of an assignment against checking it again, in the same run.

A learner's course folder (this repository's config, ``source/``, ``release/``) with assignment 1 in
``workspace/``, handed in with the bank's "causal mask flipped" mistake, is checked as the learner checks it,
``python -m autograder check 01`` in a new process each time (imports included), sandboxed:

* **first check** — no scratch course yet: ``generate_assignment`` loads the assignment into the scratch
  gradebook, the preflight kernel, then autograde + feedback of the notebook (the baseline);
* **re-check, unchanged** — nothing changed: no nbgrader run at all;
* **re-check after a fix** — the mask fixed in the notebook: only that notebook is graded again, the
  generated assignment is reused.

Each re-check is repeated (median). Writes ``benchmarks/check_recheck.md``.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/check_recheck.py
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402

from autograder import assignments  # noqa: E402
from autograder.nbgrader import grading  # noqa: E402
from autograder.nbgrader.notebook_cells import fill_release, read, solution_cells  # noqa: E402

ASSIGNMENT = "01_scaled_dot_product_attention"
OUT = REPO / "benchmarks" / "check_recheck.md"


def learner_notebook(mistake: str | None, comment: str = ""):
    spec = assignments.get(ASSIGNMENT)
    cells = solution_cells(read(REPO / "source" / ASSIGNMENT / spec.notebook))
    if mistake:
        cells = {**cells, **spec.mistakes[mistake].cells}
    nb = fill_release(read(REPO / "release" / ASSIGNMENT / spec.notebook), cells)
    if comment:
        nb.cells.append(nbformat.v4.new_code_cell(f"# {comment}"))
    return nb


def timed_check(course: Path) -> tuple[float, str]:
    """Wall clock of ``python -m autograder check 01`` in ``course``, and its output."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder", "check", "01", "--course-dir", str(course)],
                          env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="re-checks of each kind (median)")
    parser.add_argument("--no-write", action="store_true", help=f"print only, do not write {OUT.name}")
    args = parser.parse_args(argv)
    spec = assignments.get(ASSIGNMENT)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="attention-lab-check-bench-") as scratch:
        course = grading.copy_course(REPO, Path(scratch) / "course", folders=("source", "release"))
        mine = course / "workspace" / ASSIGNMENT / spec.notebook
        mine.parent.mkdir(parents=True)
        nbformat.write(learner_notebook("mask_flipped"), str(mine))
        first, out = timed_check(course)
        assert "(checked now)" in out and "causal mask flipped" in out, out
        unchanged, fixed = [], []
        for repeat in range(args.repeats):
            seconds, out = timed_check(course)
            assert "(unchanged since its last check)" in out, out
            unchanged.append(seconds)
            nbformat.write(learner_notebook(None, comment=f"fix {repeat}"), str(mine))
            seconds, out = timed_check(course)
            assert "(checked now)" in out and re.search(r"total\s+10/10", out), out
            fixed.append(seconds)
    rows = [("first check (baseline)", first, 1.0),
            ("re-check, unchanged", statistics.median(unchanged), first / statistics.median(unchanged)),
            ("re-check after a fix", statistics.median(fixed), first / statistics.median(fixed))]
    lines = ["# `make check`: first check against re-check", "",
             f"`python benchmarks/check_recheck.py` on {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, sandboxed (bubblewrap), OPENBLAS_NUM_THREADS=1; one process per check "
             f"(imports included); assignment 1; re-checks: median of {args.repeats}. The machine was shared with "
             f"other work: load average {load_before:.1f} at the start and {os.getloadavg()[0]:.1f} at the end.", "",
             "| run | wall clock | first check ÷ this |", "|---|---|---|"]
    lines += [f"| {name} | {seconds:.1f} s | {ratio:.1f}× |" for name, seconds, ratio in rows]
    lines += ["", f"Re-checks, unchanged: {', '.join(f'{s:.1f}' for s in unchanged)} s; after a fix: "
              f"{', '.join(f'{s:.1f}' for s in fixed)} s.", "",
              "The first check loads the assignment into the scratch gradebook (`generate_assignment`, alembic), checks "
              "the sandboxed kernel and grades the notebook; a re-check of an unchanged notebook runs no nbgrader "
              "step (its fingerprint is unchanged), and a re-check after a fix reuses the generated assignment "
              "and grades that notebook only.", ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
