"""The embedded example class for every assignment, and ``make demo``, which grades it.

Each student hands in the release notebook filled in the way a learner
would. Two students hand in every assignment: ``ada-correct`` (the complete
correct solution) and ``ben-untouched`` (the release as it is); the others
come from each assignment's ``example_students`` (``autograder.assignment<N>``):
correct answers written differently and one submission per common mistake.
``make demo`` builds them in a temporary course directory — never in a real
class's ``submitted/`` or gradebook — grades them with ``nbgrader autograde``
(through the sandbox and the out-of-kernel comparison configured in
``nbgrader_config.py``), writes feedback, prints one table per assignment and
a class overview, and saves ``grades.csv``, the feedback and each assignment's
class report (:mod:`autograder.nbgrader.class_report`) under ``demo-output/``,
printing the reports' paths.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from autograder import assignments
from autograder.nbgrader import class_report, grading
from autograder.nbgrader.notebook_cells import fill_release, read, solution_cells
from autograder.examples import hostile
from autograder.grader.spec import Assignment, Variant
from autograder.course import REPO


CORRECT_STUDENT = "ada-correct"
UNTOUCHED = "ben-untouched"  # hands in the release as it is: loses points everywhere
#: The assignment whose correct answer written differently is in the end-to-end sample: the hostile bank's
#: (:mod:`autograder.examples.hostile` builds on it).
DIFFERENT_ANSWER_END_TO_END = hostile.ASSIGNMENT


def students_of(assignment: Assignment) -> dict[str, Variant | None]:
    """Student id → the answer handed in (None: the untouched release) for one assignment."""
    return {CORRECT_STUDENT: Variant("the complete, correct solution", {}), UNTOUCHED: None,
            **assignment.example_students}


def end_to_end_sample(assignment: Assignment) -> list[str]:
    """The fixed sample of example students the test suite grades end to end with nbgrader.

    The two every assignment has (:data:`CORRECT_STUDENT`, :data:`UNTOUCHED`), then, in the order the
    spec lists its example students, the first of each kind the end-to-end run must show: a known
    mistake of the bank (named in the feedback) and a wrong answer the bank has no name for (the
    stand-in passes grade the later steps with the reference's values); for the hostile bank's
    assignment (:data:`DIFFERENT_ANSWER_END_TO_END`) also a correct answer written differently (breaks
    nothing). Such an answer takes the path the correct solution takes, full marks and nothing named,
    which every assignment's :data:`CORRECT_STUDENT` shows end to end; what differs is the answer's own
    code, which the in-process model runs through the same kernel-side calls, round trip and comparison
    (issue 11: everything else in-process, asserted equal to end to end on the sample). Every other
    example student is graded in-process only, where the test suite asserts that the model gives each
    the losses its spec promises; ``make demo`` and ``make report`` still grade them all with nbgrader.
    The rule, not a list, keeps the sample fixed when an assignment is added (issue 11: the 10-minute
    budget at nine assignments).

    Returns
    -------
    list of str
        Student ids, a subset of :func:`students_of` in its order.
    """
    mistakes = list(assignment.mistakes.values())
    kinds = {"named": lambda v: v in mistakes, "unnamed": lambda v: bool(v.breaks) and v not in mistakes}
    if assignment.name == DIFFERENT_ANSWER_END_TO_END:
        kinds["different"] = lambda v: not v.breaks
    chosen = {CORRECT_STUDENT, UNTOUCHED}
    for is_kind in kinds.values():
        chosen.update(next(([s] for s, v in assignment.example_students.items() if is_kind(v) and s not in chosen), []))
    return [student for student in students_of(assignment) if student in chosen]


def expected_losses(assignment: Assignment, student: str) -> set[str]:
    """The steps where ``student`` must lose points: all for the untouched release, else the variant's ``breaks``."""
    variant = students_of(assignment)[student]
    return {step.grade_id for step in assignment.steps} if variant is None else set(variant.breaks)


def build_submissions(course_dir: Path, assignment: Assignment, repo: Path = REPO,
                      students: list[str] | None = None) -> list[str]:
    """Create ``course_dir/submitted/<student>/<assignment>/<notebook>`` for the example students.

    The correct answers come from the source notebook's solution cells, so
    the example class follows edits to ``source/``.

    Parameters
    ----------
    students : list of str, optional
        Which of :func:`students_of` to build (default: all), e.g. :func:`end_to_end_sample`.

    Returns
    -------
    list of str
        The student ids built, in :func:`students_of` order.
    """
    release_nb = read(repo / "release" / assignment.name / assignment.notebook)
    solutions = solution_cells(read(repo / "source" / assignment.name / assignment.notebook))
    built = []
    for student, variant in students_of(assignment).items():
        if students is not None and student not in students:
            continue
        nb = release_nb if variant is None else fill_release(release_nb, {**solutions, **variant.cells})
        target = course_dir / "submitted" / student / assignment.name
        target.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(target / assignment.notebook))
        built.append(student)
    return built


def prepare_course(course_dir: Path, names: list[str] | None = None, repo: Path = REPO,
                   sample: bool = False) -> dict[str, list[str]]:
    """A fresh course directory with the repository's config and source, and the example submissions.

    Parameters
    ----------
    sample : bool
        Only each assignment's :func:`end_to_end_sample` (the test suite's run), not every student.

    Returns
    -------
    dict
        assignment name → its example students.
    """
    grading.copy_course(repo, course_dir)
    chosen = names or list(assignments.all_assignments())
    return {name: build_submissions(course_dir, assignments.get(name), repo,
                                    end_to_end_sample(assignments.get(name)) if sample else None)
            for name in chosen}


ClassResults = dict[str, tuple[list[str], list[grading.StudentResult]]]


def run_demo(output_dir: Path, names: list[str] | None = None, repo: Path = REPO) -> ClassResults:
    """Grade the example class in a temporary course directory; save grades.csv, feedback and the class report
    of each assignment (``class-report/<assignment>/report.html`` and its CSVs) in ``output_dir``.

    Returns
    -------
    dict
        assignment name → (steps, per-student results).
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    results: ClassResults = {}
    with tempfile.TemporaryDirectory(prefix="attention-lab-demo-") as tmp:
        course_dir = Path(tmp)
        for name, students in prepare_course(course_dir, names, repo).items():
            results[name] = grading.grade_class(course_dir, name, students)
            class_report.write(course_dir, name, output_dir / class_report.OUTPUT_FOLDER / name)
        for folder in ("feedback", "autograded"):
            shutil.rmtree(output_dir / folder, ignore_errors=True)
            if (course_dir / folder).exists():
                shutil.copytree(course_dir / folder, output_dir / folder)
        shutil.copy(course_dir / "grading.log", output_dir / "grading.log")
    grading.write_class_csv(output_dir / "grades.csv", results)
    return results


def overview(results: ClassResults) -> str:
    """Class overview: one row per student, their total per assignment."""
    names = list(results)
    students = list(dict.fromkeys(r.student for _, rows in results.values() for r in rows))
    headers = ["student", *(name.split("_", 1)[0] for name in names)]
    rows = []
    for student in students:
        row = [student]
        for name in names:
            found = next((r for r in results[name][1] if r.student == student), None)
            if found is None:
                row.append("")
            elif found.steps is None:
                row.append("not graded")
            else:
                # as make grade's table writes scores: at most two decimals (7.75/10, 6.43/9, never 6.4286/9)
                row.append(f"{grading.score_text(found.total)}/"
                           f"{grading.score_text(sum(m for _, m in found.steps.values()))}")
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [headers, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Grade the embedded example class of every assignment.")
    parser.add_argument("assignments", nargs="*", help="assignment folders (default: all)")
    parser.add_argument("--output", type=Path, default=REPO / "demo-output",
                        help="where grades.csv and the feedback go (default: demo-output/)")
    args = parser.parse_args(argv)
    names = args.assignments or list(assignments.all_assignments())
    count = sum(len(students_of(assignments.get(n))) for n in names)
    print(f"Grading {count} example submissions of {len(names)} assignment(s) with nbgrader "
          "in a temporary course directory ...")
    results = run_demo(args.output.resolve(), names)
    for name, (steps, rows) in results.items():
        assignment = assignments.get(name)
        print(f"\n{name}\n")
        print(grading.format_table(steps, rows, name))
        print("\nwho is who:")
        for student, variant in students_of(assignment).items():
            print(f"  {student:28s} {'the release, handed in without changes' if variant is None else variant.description}")
    print("\nclass overview\n")
    print(overview(results))
    out = args.output.resolve()
    print(f"\ngrades:   {out / 'grades.csv'}\nfeedback: {out / 'feedback'}/<student>/<assignment>/<notebook>.html"
          f"\nlog:      {out / 'grading.log'}\nclass reports (what to re-teach; open in a browser):")
    for name in results:
        print(f"  {out / class_report.OUTPUT_FOLDER / name / 'report.html'}")
    ungraded = [r.student for _, rows in results.values() for r in rows if r.steps is None]
    return 1 if ungraded else 0


if __name__ == "__main__":
    sys.exit(main())
