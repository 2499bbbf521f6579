"""The embedded example class for assignment 1, and ``make demo``, which grades it.

Each student is the release notebook filled in the way a learner would: the
complete correct solution, a correct solution written differently, the
untouched release, and one submission per common mistake (from
:mod:`autograder.variants.assignment1`). ``make demo`` builds them in a
temporary course directory — never in a real class's ``submitted/`` or
gradebook — grades them with ``nbgrader autograde``, writes feedback, prints
the table of students × steps and saves ``grades.csv`` and the feedback under
``demo-output/``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from autograder import grading
from autograder.notebook_cells import fill_release, read, solution_cells
from autograder.variants.assignment1 import CORRECT, MISTAKES, Variant

ASSIGNMENT = "01_scaled_dot_product_attention"
NOTEBOOK = "scaled_dot_product_attention.ipynb"
REPO = Path(__file__).resolve().parent.parent

UNTOUCHED = "ben-untouched"  # hands in the release as it is: loses points everywhere

# student id → the answer they hand in; a Variant's ``breaks`` are the test cells it must lose points on.
STUDENTS = {
    "ada-correct": Variant("the complete, correct solution", {}),
    UNTOUCHED: Variant("the release, handed in without changes", {}),
    "cai-einsum-and-1e9": Variant("correct, written differently: einsum, −1e9, ~triu",
                                  {**CORRECT["einsum"].cells, **CORRECT["large_negative_fill"].cells}),
    "dan-mask-flipped": MISTAKES["mask_flipped"],
    "eva-diagonal-blocked": MISTAKES["diagonal_blocked"],
    "fei-softmax-wrong-axis": MISTAKES["softmax_wrong_axis"],
    "gil-divides-by-d": MISTAKES["scale_by_d"],
    "hal-no-scaling": MISTAKES["no_scaling"],
    "ida-mask-with-zero": MISTAKES["mask_with_zero"],
    "jon-no-max-subtraction": MISTAKES["softmax_no_max_subtraction"],
    "kay-mask-after-softmax": MISTAKES["mask_after_softmax"],
}


def build_submissions(course_dir: Path, repo: Path = REPO) -> list[str]:
    """Create ``course_dir/submitted/<student>/<assignment>/<notebook>`` for every example student.

    The correct answers come from the source notebook's solution cells, so
    the example class follows edits to ``source/``.
    """
    release_nb = read(repo / "release" / ASSIGNMENT / NOTEBOOK)
    solutions = solution_cells(read(repo / "source" / ASSIGNMENT / NOTEBOOK))
    for student, variant in STUDENTS.items():
        nb = release_nb if student == UNTOUCHED else fill_release(release_nb, {**solutions, **variant.cells})
        target = course_dir / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(target / NOTEBOOK))
    return list(STUDENTS)


def prepare_course(course_dir: Path, repo: Path = REPO) -> list[str]:
    """A fresh course directory with the repository's config and source, and the example submissions."""
    grading.copy_course(repo, course_dir)
    return build_submissions(course_dir, repo)


def run_demo(output_dir: Path, repo: Path = REPO) -> tuple[list[str], list[grading.StudentResult]]:
    """Grade the example class in a temporary course directory; save grades.csv and feedback in ``output_dir``."""
    output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="attention-lab-demo-") as tmp:
        course_dir = Path(tmp)
        students = prepare_course(course_dir, repo)
        steps, results = grading.grade_class(course_dir, ASSIGNMENT, students)
        for name in ("feedback", "autograded"):
            shutil.rmtree(output_dir / name, ignore_errors=True)
            if (course_dir / name).exists():
                shutil.copytree(course_dir / name, output_dir / name)
        shutil.copy(course_dir / "grading.log", output_dir / "grading.log")
    grading.write_csv(output_dir / "grades.csv", ASSIGNMENT, steps, results)
    return steps, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade the embedded example class of assignment 1.")
    parser.add_argument("--output", type=Path, default=REPO / "demo-output",
                        help="where grades.csv and the feedback go (default: demo-output/)")
    args = parser.parse_args(argv)
    print(f"Grading {len(STUDENTS)} example submissions of {ASSIGNMENT} with nbgrader "
          "in a temporary course directory ...")
    steps, results = run_demo(args.output.resolve())
    print()
    print(grading.format_table(steps, results))
    print("\nwho is who:")
    for student, variant in STUDENTS.items():
        print(f"  {student:24s} {variant.description}")
    out = args.output.resolve()
    print(f"\ngrades:   {out / 'grades.csv'}\nfeedback: {out / 'feedback'}/<student>/{ASSIGNMENT}/"
          f"{NOTEBOOK.replace('.ipynb', '.html')}\nlog:      {out / 'grading.log'}")
    ungraded = [r.student for r in results if r.steps is None]
    return 1 if ungraded else 0


if __name__ == "__main__":
    sys.exit(main())
