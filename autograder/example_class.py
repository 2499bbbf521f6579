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
from autograder.variants.assignment1 import CORRECT, MISTAKES

ASSIGNMENT = "01_scaled_dot_product_attention"
NOTEBOOK = "scaled_dot_product_attention.ipynb"
REPO = Path(__file__).resolve().parent.parent

# student id → (what the submission is, solution cells it replaces; None = untouched release)
STUDENTS = {
    "ada-correct": ("the complete, correct solution", {}),
    "ben-untouched": ("the release, handed in without changes", None),
    "cai-einsum-and-1e9": ("correct, written differently: einsum, −1e9, ~triu",
                           {**CORRECT["einsum"].cells, **CORRECT["large_negative_fill"].cells}),
    "dan-mask-flipped": (MISTAKES["mask_flipped"].description, MISTAKES["mask_flipped"].cells),
    "eva-diagonal-blocked": (MISTAKES["diagonal_blocked"].description, MISTAKES["diagonal_blocked"].cells),
    "fei-softmax-wrong-axis": (MISTAKES["softmax_wrong_axis"].description, MISTAKES["softmax_wrong_axis"].cells),
    "gil-divides-by-d": (MISTAKES["scale_by_d"].description, MISTAKES["scale_by_d"].cells),
    "hal-no-scaling": (MISTAKES["no_scaling"].description, MISTAKES["no_scaling"].cells),
    "ida-mask-with-zero": (MISTAKES["mask_with_zero"].description, MISTAKES["mask_with_zero"].cells),
    "jon-no-max-subtraction": (MISTAKES["softmax_no_max_subtraction"].description,
                               MISTAKES["softmax_no_max_subtraction"].cells),
    "kay-mask-after-softmax": (MISTAKES["mask_after_softmax"].description, MISTAKES["mask_after_softmax"].cells),
}

# Test cells each student must lose points on; every other test cell must get full marks.
EXPECTED_LOSSES = {
    "ada-correct": set(),
    "ben-untouched": "all",
    "cai-einsum-and-1e9": set(),
    "dan-mask-flipped": set(MISTAKES["mask_flipped"].breaks),
    "eva-diagonal-blocked": set(MISTAKES["diagonal_blocked"].breaks),
    "fei-softmax-wrong-axis": set(MISTAKES["softmax_wrong_axis"].breaks),
    "gil-divides-by-d": set(MISTAKES["scale_by_d"].breaks),
    "hal-no-scaling": set(MISTAKES["no_scaling"].breaks),
    "ida-mask-with-zero": set(MISTAKES["mask_with_zero"].breaks),
    "jon-no-max-subtraction": set(MISTAKES["softmax_no_max_subtraction"].breaks),
    "kay-mask-after-softmax": set(MISTAKES["mask_after_softmax"].breaks),
}


def build_submissions(course_dir: Path, repo: Path = REPO) -> list[str]:
    """Create ``course_dir/submitted/<student>/<assignment>/<notebook>`` for every example student.

    The correct answers come from the source notebook's solution cells, so
    the example class follows edits to ``source/``.
    """
    release_nb = read(repo / "release" / ASSIGNMENT / NOTEBOOK)
    solutions = solution_cells(read(repo / "source" / ASSIGNMENT / NOTEBOOK))
    for student, (_, answers) in STUDENTS.items():
        nb = release_nb if answers is None else fill_release(release_nb, {**solutions, **answers})
        target = course_dir / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(target / NOTEBOOK))
    return list(STUDENTS)


def prepare_course(course_dir: Path, repo: Path = REPO) -> list[str]:
    """A fresh course directory with the repository's config and source, and the example submissions."""
    shutil.copy(repo / "nbgrader_config.py", course_dir / "nbgrader_config.py")
    shutil.copytree(repo / "source" / ASSIGNMENT, course_dir / "source" / ASSIGNMENT)
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
    for student, (description, _) in STUDENTS.items():
        print(f"  {student:24s} {description}")
    out = args.output.resolve()
    print(f"\ngrades:   {out / 'grades.csv'}\nfeedback: {out / 'feedback'}/<student>/{ASSIGNMENT}/"
          f"{NOTEBOOK.replace('.ipynb', '.html')}\nlog:      {out / 'grading.log'}")
    ungraded = [r.student for r in results if r.steps is None]
    return 1 if ungraded else 0


if __name__ == "__main__":
    sys.exit(main())
