"""What the stand-in passes cost: ``nbgrader autograde`` of assignment 1's example class with and without them.

The stand-in passes (``autograder/grader/stand_ins.py``) run, after a notebook's last cell and in the same
sandboxed kernel, the failed cases of the steps that call functions of earlier steps, with the
reference's values answering those calls. The baseline, measured in the same run, is the same
class autograded with ``c.InsertProbes.stand_ins = False`` (first pass only, as before). The two
settings alternate, each in a fresh course directory, and the median of the runs is reported. Kernels
run with OPENBLAS_NUM_THREADS=1. Writes ``benchmarks/stand_in_passes.md``.

    .venv/bin/python benchmarks/stand_in_passes.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.examples import example_class
from autograder.nbgrader import grading  # noqa: E402

ASSIGNMENT = "01_scaled_dot_product_attention"


def autograde(with_stand_ins: bool) -> tuple[float, dict[str, float]]:
    """Seconds of ``nbgrader autograde`` for the example class, and each student's total."""
    with tempfile.TemporaryDirectory(prefix="attention-lab-bench-") as tmp:
        course = Path(tmp)
        students = example_class.prepare_course(course, [ASSIGNMENT])[ASSIGNMENT]
        if not with_stand_ins:
            with open(course / "nbgrader_config.py", "a") as config:
                config.write("\nc.InsertProbes.stand_ins = False  # benchmark baseline: first pass only\n")
        grading.load_into_gradebook(course, ASSIGNMENT)
        start = time.perf_counter()
        grading.run_nbgrader(course, "autograde", ASSIGNMENT, "--force")
        seconds = time.perf_counter() - start
        _, results = grading.read_results(course, ASSIGNMENT, students)
        return seconds, {r.student: r.total for r in results}


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Markdown table lines."""
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers), *("| " + " | ".join(r) + " |" for r in rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs per setting (alternating)")
    args = parser.parse_args(argv)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    times = {True: [], False: []}
    totals = {}
    for _ in range(args.runs):
        for setting in (True, False):
            seconds, totals[setting] = autograde(setting)
            times[setting].append(seconds)
    with_, without = statistics.median(times[True]), statistics.median(times[False])
    students = len(totals[True])
    changed = [(s, totals[False][s], totals[True][s]) for s in totals[True] if totals[True][s] != totals[False][s]]
    settings = [("first pass only (`c.InsertProbes.stand_ins = False`, the baseline)", times[False]),
                ("with the stand-in passes (the default)", times[True])]
    lines = [
        "# Cost of the stand-in passes (one mistake, one charge)",
        "",
        f"`benchmarks/stand_in_passes.py`, {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, OPENBLAS_NUM_THREADS=1: `nbgrader autograde` of assignment 1's example "
        f"class ({students} submissions, sandboxed kernels), {args.runs} runs per setting, alternating, median.",
        "",
        *_table(["setting", "seconds (median)", "per submission", "runs"],
                [[label, f"{statistics.median(runs):.1f}", f"{statistics.median(runs) / students:.2f}",
                  ", ".join(f"{t:.1f}" for t in runs)] for label, runs in settings]),
        "",
        f"Ratio: **{with_ / without:.2f}×** the baseline ({with_ - without:+.1f} s for the class).",
        "",
        "Totals that the stand-in passes change (a later step no longer charged for an earlier function's mistake):",
        "",
        *_table(["student", "first pass only", "with stand-in passes"],
                [[student, f"{before:g}", f"{after:g}"] for student, before, after in changed]),
        "",
    ]
    out = REPO / "benchmarks" / "stand_in_passes.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
