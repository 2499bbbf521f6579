"""How long each course notebook takes to run top to bottom (goal: under 30 s each), against a baseline.

The baseline, measured in the same run, is a one-cell notebook (``import numpy``): the cost of
starting a kernel, which every notebook pays. For each assignment three notebooks are timed —
the instructor's source (solutions plus the instructor-side grading of every step), the release
filled with the solutions (what a finished learner runs) and the untouched release — plus every
self-study notebook. Kernels run with OPENBLAS_NUM_THREADS=1, as ``make lab`` and the grader start
them. Writes ``benchmarks/notebook_execution.md``.

    .venv/bin/python benchmarks/notebook_execution.py
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder import assignments  # noqa: E402
from autograder.nbgrader.notebook_cells import fill_release, read, solution_cells  # noqa: E402

GOAL_SECONDS = 30.0


def run(nb, folder: Path) -> float:
    """Seconds to execute ``nb`` in a fresh kernel (kernel start included)."""
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}},
                   allow_errors=True).execute()
    return time.perf_counter() - start


def main() -> int:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    baseline_nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import numpy")])
    baseline = statistics.median(run(nbformat.from_dict(baseline_nb), REPO) for _ in range(3))
    rows = []
    for name, assignment in assignments.all_assignments().items():
        source = read(REPO / "source" / name / assignment.notebook)
        release = read(REPO / "release" / name / assignment.notebook)
        filled = fill_release(release, solution_cells(source))
        for label, nb, folder in (("source (solutions + instructor grading)", source, REPO / "source" / name),
                                  ("release filled with the solutions", filled, REPO / "release" / name),
                                  ("untouched release", release, REPO / "release" / name)):
            rows.append((f"`{name}/{assignment.notebook}`", label, run(nb, folder)))
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        rows.append((f"`notebooks/{path.name}`", "self-study", run(read(path), path.parent)))
    worst = max(seconds for *_, seconds in rows)
    lines = [
        "# Notebook execution time",
        "",
        f"`benchmarks/notebook_execution.py`, {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, OPENBLAS_NUM_THREADS=1, nbclient, "
        "fresh kernel per notebook (start included).",
        "",
        f"Baseline (same run): a one-cell notebook `import numpy` takes **{baseline:.1f} s** (median of 3) — "
        "the kernel start every notebook pays.",
        "",
        f"Goal: every notebook under {GOAL_SECONDS:.0f} s. Slowest: **{worst:.1f} s** "
        f"({worst / baseline:.1f}× the baseline) — {'met' if worst < GOAL_SECONDS else 'NOT met'}.",
        "",
        "| notebook | run | seconds | × baseline |",
        "|---|---|---|---|",
        *(f"| {nb} | {label} | {seconds:.1f} | {seconds / baseline:.1f} |" for nb, label, seconds in rows),
        "",
    ]
    out = REPO / "benchmarks" / "notebook_execution.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if worst < GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
