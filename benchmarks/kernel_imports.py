"""The CPU one notebook kernel spends on a graded submission, this tree against a baseline commit.

For each assignment, the release filled with the source's solutions and with the source's autograder cells
(hidden lines included, as ``nbgrader autograde`` puts them back) is executed top to bottom in a fresh
kernel by nbclient, as nbgrader runs it: ``NBGRADER_EXECUTION=autograde``, ``MPLBACKEND=Agg`` and one BLAS
thread, as the grading sandbox sets them (``autograder/sandbox/command.py``), without the sandbox itself.
The same notebook is also run without ``NBGRADER_EXECUTION`` ("Run All", what a learner's kernel does in
JupyterLab). The CPU counted is the kernel process's user + system time (``getrusage(RUSAGE_CHILDREN)``
around the run: the kernel is this process's child and is reaped at shutdown), best of ``--repeat``
runs, the two trees alternating. The baseline tree is ``git archive BASE`` in a temporary directory, put
first on the kernel's ``PYTHONPATH`` (so its ``attention_lab`` and ``autograder`` are imported); this tree is
put there the same way. A one-cell notebook (``import numpy``) gives the cost of the kernel itself.
Writes ``benchmarks/kernel_imports.md``.

    .venv/bin/python benchmarks/kernel_imports.py --base ce6e4cf [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder import assignments  # noqa: E402
from autograder.nbgrader.notebook_cells import fill_release, nbgrader_meta, read, solution_cells, test_cells  # noqa: E402


def graded_notebook(tree: Path, name: str, notebook: str):
    """The release of ``tree`` filled with its source's solutions and autograder cells, as nbgrader grades it."""
    source = read(tree / "source" / name / notebook)
    filled = fill_release(read(tree / "release" / name / notebook), solution_cells(source))
    tests = test_cells(source)
    for cell in filled.cells:
        grade_id = nbgrader_meta(cell).get("grade_id")
        if grade_id in tests:
            cell.source = tests[grade_id][0]
    return filled


def run_cpu(nb, folder: Path, tree: Path, grading: bool) -> float:
    """CPU seconds (user + system) of one fresh kernel executing ``nb`` ."""
    env = {key: value for key, value in os.environ.items() if key not in ("NBGRADER_EXECUTION", "MPLBACKEND")}
    env.update(OPENBLAS_NUM_THREADS="1", PYTHONPATH=str(tree))
    if grading:
        env.update(NBGRADER_EXECUTION="autograde", MPLBACKEND="Agg")
    saved = dict(os.environ)
    # the kernel inherits this process's environment (jupyter_client starts it with os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        NotebookClient(nbformat.from_dict(nb), timeout=600, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(folder)}}).execute()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def export(base: str, into: Path) -> Path:
    """``git archive base`` unpacked into ``into``; returns ``into``."""
    archive = into / "base.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), base], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the baseline commit")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="assignment folder names (default: all)")
    args = parser.parse_args()
    base_rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base], check=True,
                              capture_output=True, text=True).stdout.strip()
    head_rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "attention_lab", "source",
                                 "release", "autograder"], capture_output=True, text=True).stdout.strip())
    chosen = {name: a for name, a in assignments.all_assignments().items() if not args.only or name in args.only}
    one_cell = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import numpy")])
    with tempfile.TemporaryDirectory() as tmp:
        base = export(args.base, Path(tmp))
        trees = {"before": base, "after": REPO}
        rows = [("kernel alone (`import numpy`)", True, {t: one_cell for t in trees}, {t: trees[t] for t in trees})]
        for name, assignment in chosen.items():
            nbs = {t: graded_notebook(tree, name, assignment.notebook) for t, tree in trees.items()}
            folders = {t: tree / "release" / name for t, tree in trees.items()}
            rows.append((f"`{name}`", True, nbs, folders))
            rows.append((f"`{name}`", False, nbs, folders))
        results = []
        for label, grading, nbs, folders in rows:
            best = {t: float("inf") for t in trees}
            for _ in range(args.repeat):
                for t, tree in trees.items():  # alternating, so that load drifts hit both alike
                    best[t] = min(best[t], run_cpu(nbs[t], folders[t], tree, grading))
            results.append((label, grading, best["before"], best["after"]))
            print(label, "autograde" if grading else "Run All", f"{best['before']:.2f} -> {best['after']:.2f}",
                  flush=True)
    load = os.getloadavg()[0]
    lines = [
        "# CPU of one notebook kernel: graded and Run All",
        "",
        f"Generated by `benchmarks/kernel_imports.py` (its docstring says how) on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {datetime.date.today().isoformat()}, "
        f"load average {load:.1f} at the end. Kernel CPU (user + system, `getrusage(RUSAGE_CHILDREN)`), best of "
        f"{args.repeat}, the two trees alternating; **before** = commit `{base_rev}`, **after** = "
        f"`{head_rev}`{' with uncommitted changes' if dirty else ''} (this tree). Each assignment's notebook is its "
        "release filled with the source's solutions and autograder cells, as `nbgrader autograde` runs it "
        "(`NBGRADER_EXECUTION=autograde`, `MPLBACKEND=Agg`, one BLAS thread, as in the sandbox, but outside it), "
        "and the same notebook without `NBGRADER_EXECUTION` (Run All, as a learner's kernel in JupyterLab).",
        "",
        "| notebook | run | before (CPU-s) | after (CPU-s) | after ÷ before | saved |",
        "|---|---|---|---|---|---|",
    ]
    for label, grading, before, after in results:
        lines.append(f"| {label} | {'autograde' if grading else 'Run All'} | {before:.2f} | {after:.2f} | "
                     f"{after / before:.2f} | {before - after:.2f} |")
    graded = [(b, a) for label, g, b, a in results[1:] if g]
    if graded:
        total_b, total_a = sum(b for b, _ in graded), sum(a for _, a in graded)
        lines += ["", f"Graded, all {len(graded)} assignments: **{total_b:.2f} → {total_a:.2f} CPU-s** "
                      f"({total_a / total_b:.2f}×, {total_b - total_a:.2f} CPU-s less per student graded once in each)."]
    lines += ["", "Where a graded kernel's CPU went before (measured by hand in the same session): rendering each static "
              "figure's PNG in `plots.show_figure` (about 0.5 CPU-s for a three-panel figure, against 0.06 for the "
              "drawing calls), importing matplotlib (about 0.4 CPU-s; in assignments 6 and 7 only for the explorer, "
              "which grading does not show) and `%matplotlib inline` loading pyplot and its inline backend, which no "
              "cell uses. After: no figure is drawn while grading (the cell says so), the set-up cells import no "
              "pyplot; matplotlib is still imported when the set-up cell loads the course's plotting modules (a lazy import "
              "was tried and undone: a submission that fills the kernel's memory before a figure cell then crashed "
              "the kernel importing it, tests/test_grading.py's growing-list case). Run All draws everything as before: "
              "its rows differ by noise (the kernel alone differs by as much between the two trees)."]
    (REPO / "benchmarks" / "kernel_imports.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
