"""What to re-teach on Monday: one assignment's class, read from the gradebook, as numbers.

:func:`gather` reads a graded class through nbgrader's public gradebook API (``nbgrader.api.Gradebook``, via
:func:`autograder.nbgrader.grading.read_results`) and what the grader stored beside it: the known mistakes it
named in each autograded notebook, the grader's version that graded it, and the reason each submission that
could not be graded was not (``gradebook-hashes.json``, :class:`autograder.nbgrader.fingerprints.GradingRecord`).
The result, a :class:`ClassReport`, holds per step the distribution of the scores, the named mistakes by how
many students made them (each with its description and hint), the students not graded and why, the manual
scores given in Formgrader (never shown as the autograder's), and the legend of every mistake key the
assignment knows. :mod:`autograder.nbgrader.class_report_page` renders it as HTML with PNG plots;
:func:`write_csv` writes the same numbers as CSV.

``python -m autograder class-report ASSIGNMENT ...`` (``make class-report``) writes both for the course in the
current directory; ``make demo`` writes them for the example class.
"""

from __future__ import annotations

import csv
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from autograder import assignments
from autograder.course import COURSE_ID
from autograder.nbgrader import fingerprints, grading
from autograder.nbgrader.grader_stamp import graded_by

#: Where ``class-report`` writes, under the course directory: ``class-report/<assignment>/``.
OUTPUT_FOLDER = "class-report"
#: The score bands of a step's distribution: (label, test on score / max score).
BANDS = (("0", lambda f: f <= 0), ("below half", lambda f: 0 < f < 0.5),
         ("half or more", lambda f: 0.5 <= f < 1), ("full", lambda f: f >= 1))


@dataclass
class StepSummary:
    """One step's scores across the graded students (manual scores counted as given)."""

    grade_id: str
    title: str
    max_score: float
    scores: list[float]

    @property
    def bands(self) -> dict[str, int]:
        """:data:`BANDS` label → how many graded students scored in that band."""
        fractions = [s / self.max_score if self.max_score else 1.0 for s in self.scores]
        return {label: sum(1 for f in fractions if test(f)) for label, test in BANDS}

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.scores) if self.scores else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.scores) if self.scores else None


@dataclass
class Mistake:
    """A mistake key of the assignment: what it is, the hint the learner reads, the steps it costs, who made it."""

    key: str
    description: str
    hint: str
    steps: list[str]
    students: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.students)


@dataclass
class Override:
    """A manual score given in Formgrader, with the autograder's score it replaced."""

    student: str
    step: str
    autograder: float
    manual: float
    max_score: float


@dataclass
class ClassReport:
    """One assignment's class, as :func:`gather` read it."""

    assignment: str
    course_id: str
    grader: str  # the grader's label when the report was made (fingerprints.grader_label)
    graded_by: dict[str, int]  # grader label stored in the graded notebooks → how many students
    generated: str  # UTC, ISO 8601, to the second
    steps: list[StepSummary]
    results: list[grading.StudentResult]
    legend: list[Mistake]  # every mistake key the assignment knows, plus any the gradebook names that it does not

    @property
    def graded(self) -> list[grading.StudentResult]:
        return [r for r in self.results if r.steps is not None]

    @property
    def failures(self) -> list[grading.StudentResult]:
        """Students whose grading failed, with the reason in ``note``."""
        return [r for r in self.results if r.steps is None]

    @property
    def frequent(self) -> list[Mistake]:
        """Mistakes at least one student made, most frequent first (ties: the legend's order)."""
        return sorted((m for m in self.legend if m.count), key=lambda m: -m.count)

    @property
    def overrides(self) -> list[Override]:
        titles = {s.grade_id: s.title for s in self.steps}
        return [Override(r.student, titles.get(grade_id, grade_id), auto, r.steps[grade_id][0], r.steps[grade_id][1])
                for r in self.graded for grade_id, auto in r.manual.items()]

    @property
    def max_total(self) -> float:
        return sum(s.max_score for s in self.steps)


def class_students(course_dir: Path, assignment: str, record: fingerprints.GradingRecord) -> list[str]:
    """Every student the class has for ``assignment``: a gradebook submission, a folder in ``submitted/``, or a
    recorded failure (a quarantined id is in none of the others), sorted."""
    found = set(grading.submitted_students(course_dir, assignment)) | set(record.failures(assignment))
    if (course_dir / "gradebook.db").exists():
        with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
            try:
                found |= {s.student.id for s in gradebook.find_assignment(assignment).submissions}
            except MissingEntry:
                pass
    return sorted(found)


def _legend(assignment: str, named: dict[str, list[str]]) -> list[Mistake]:
    """The assignment's mistakes in its spec's order, with who made each; keys unknown to the spec at the end."""
    try:
        spec = assignments.get(assignment)
        known = dict(spec.mistakes)
        titles = {step.grade_id: step.title for step in spec.steps}
    except KeyError:
        known, titles = {}, {}
    legend = [Mistake(key, variant.description, variant.hint,
                      [title for g, title in titles.items() if g in variant.breaks]
                      + sorted(g for g in variant.breaks if g not in titles),
                      named.get(key, [])) for key, variant in known.items()]
    legend += [Mistake(key, "(not in this grader's answer bank)", "", [], students)
               for key, students in named.items() if key not in known]
    return legend


def _graders(course_dir: Path, assignment: str, students: list[str]) -> dict[str, int]:
    """Grader label → how many of ``students`` were graded by it (from their autograded notebooks)."""
    labels = Counter()
    for student in students:
        for path in sorted((course_dir / "autograded" / student / assignment).glob("*.ipynb"))[:1]:
            try:
                labels[graded_by(nbformat.read(str(path), as_version=4)) or "unknown (graded before labels)"] += 1
            except Exception:  # noqa: BLE001 — an unreadable notebook: its scores are still in the gradebook
                labels["unknown (notebook unreadable)"] += 1
    return dict(labels.most_common())


def gather(course_dir: Path, assignment: str) -> ClassReport:
    """Read the class report of ``assignment`` from ``course_dir``'s gradebook and grading record.

    Parameters
    ----------
    course_dir : Path
        A course directory that was graded (``gradebook.db``; ``autograded/``, ``gradebook-hashes.json``).
    assignment : str
        The assignment id.

    Returns
    -------
    ClassReport

    Raises
    ------
    ValueError
        If the gradebook does not hold ``assignment`` (nothing was graded: run ``make grade`` first).
    """
    course_dir = Path(course_dir).resolve()
    if not (course_dir / "gradebook.db").exists():
        raise ValueError(f"{course_dir} has no gradebook.db: grade {assignment} first (make grade)")
    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        try:
            gradebook.find_assignment(assignment)
        except MissingEntry:
            raise ValueError(f"the gradebook of {course_dir} has no assignment {assignment!r}: "
                             "grade it first (make grade)") from None
    record = fingerprints.GradingRecord(course_dir)
    students = class_students(course_dir, assignment, record)
    notes = {s: record.notes(assignment, s) for s in students}
    steps, results = grading.read_results(course_dir, assignment, students, record.failures(assignment), notes)
    graded = [r for r in results if r.steps is not None]
    maxima = {g: m for r in graded for g, (_, m) in r.steps.items()}
    if not maxima:  # nobody graded: the maxima from the gradebook's cells
        with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
            maxima = {c.name: float(c.max_score) for nb in gradebook.find_assignment(assignment).notebooks
                      for c in nb.grade_cells if c.cell_type == "code"}
    summaries = [StepSummary(g, grading.step_name(g, assignment), maxima.get(g, 0.0),
                             [r.steps[g][0] for r in graded]) for g in steps]
    named: dict[str, list[str]] = {}
    for result in graded:
        for key in result.named:
            named.setdefault(key, []).append(result.student)
    return ClassReport(assignment, COURSE_ID, fingerprints.grader_label(course_dir),
                       _graders(course_dir, assignment, [r.student for r in graded]),
                       datetime.now(timezone.utc).replace(microsecond=0).isoformat(), summaries, results,
                       _legend(assignment, named))


def spreadsheet_safe(value: object) -> str:
    """A CSV cell that a spreadsheet shows as text: learner-controlled text starting with ``= + - @`` (or a tab or
    carriage return) would be read as a formula, so it gets a leading ``'`` (OWASP, "CSV Injection")."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") and not _is_number(text) else text


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def write_csv(report: ClassReport, folder: Path) -> list[Path]:
    """The report's numbers as CSV in ``folder``: ``steps.csv``, ``mistakes.csv``, ``students.csv``.

    ``steps.csv``: per step its maximum, how many were graded, mean, median, and the count in each score band;
    ``mistakes.csv``: every mistake key with how many students made it, who, the steps it costs, its description
    and hint; ``students.csv``: per student each step's score (and, where a manual score replaced the
    autograder's, the autograder's in ``<step> (autograder)``), the total, whether graded, the reason, the named
    mistakes. Scores have at most two decimals.

    Returns
    -------
    list of Path
        The files written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    text = grading.score_text
    paths = [folder / "steps.csv", folder / "mistakes.csv", folder / "students.csv"]
    with open(paths[0], "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", "grade_id", "max_score", "graded", "mean", "median", *(f"students: {b}" for b, _ in BANDS)])
        for step in report.steps:
            writer.writerow([step.title, step.grade_id, text(step.max_score), len(step.scores),
                             "" if step.mean is None else text(step.mean), "" if step.median is None else text(step.median),
                             *step.bands.values()])
    with open(paths[1], "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["mistake", "students", "who", "steps", "description", "hint"])
        for mistake in sorted(report.legend, key=lambda m: -m.count):
            writer.writerow([spreadsheet_safe(mistake.key), mistake.count,
                             spreadsheet_safe(" ".join(mistake.students)), "; ".join(mistake.steps),
                             mistake.description, mistake.hint])
    with open(paths[2], "w", newline="") as handle:
        writer = csv.writer(handle)
        manual_steps = [s for s in report.steps if any(s.grade_id in r.manual for r in report.graded)]
        writer.writerow(["student", *(s.title for s in report.steps), *(f"{s.title} (autograder)" for s in manual_steps),
                         "total", "max_score", "graded", "note", "mistakes"])
        for result in report.results:
            if result.steps is None:
                writer.writerow([spreadsheet_safe(result.student), *("" for _ in report.steps),
                                 *("" for _ in manual_steps), "", text(report.max_total), "no",
                                 spreadsheet_safe(result.note), ""])
                continue
            writer.writerow([spreadsheet_safe(result.student), *(text(result.steps[s.grade_id][0]) for s in report.steps),
                             *(text(result.manual[s.grade_id]) if s.grade_id in result.manual else ""
                               for s in manual_steps),
                             text(result.total), text(report.max_total), "yes", spreadsheet_safe(result.note),
                             " ".join(result.named)])
    return paths


def write(course_dir: Path, assignment: str, output: Path | None = None) -> Path:
    """Gather the report of ``assignment`` and write ``report.html`` and its CSVs; return the HTML's path.

    Parameters
    ----------
    output : Path, optional
        The folder to write into (default: ``<course_dir>/class-report/<assignment>/``).

    Raises
    ------
    ValueError
        As :func:`gather`.
    """
    from autograder.nbgrader.class_report_page import render

    report = gather(course_dir, assignment)
    folder = Path(output) if output is not None else Path(course_dir).resolve() / OUTPUT_FOLDER / assignment
    write_csv(report, folder)
    page = folder / "report.html"
    page.write_text(render(report), encoding="utf-8")
    return page


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder class-report [ASSIGNMENT ...] [--course-dir DIR] [--output DIR]``.

    Returns 0 when every report was written, 1 when an assignment has nothing graded (one line on stderr each).
    """
    import argparse

    parser = argparse.ArgumentParser(description="Write the class report (HTML with PNG plots, and CSV) of graded "
                                                 "assignments: scores per step, frequent mistakes with their hints, "
                                                 "students not graded, manual scores, the legend of mistake keys.")
    parser.add_argument("assignments", nargs="*", help="assignment names (default: every assignment in the gradebook)")
    parser.add_argument("--course-dir", type=Path, default=Path.cwd())
    parser.add_argument("--output", type=Path, default=None,
                        help=f"folder for the reports (default: <course-dir>/{OUTPUT_FOLDER}/); one subfolder per assignment")
    args = parser.parse_args(argv)
    course_dir = args.course_dir.resolve()
    names = args.assignments
    if not names:
        if not (course_dir / "gradebook.db").exists():
            print(f"no class report: {course_dir} has no gradebook.db (grade a class first: make grade)", file=sys.stderr)
            return 1
        with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
            names = sorted(a.name for a in gradebook.assignments)
    status = 0
    for name in names:
        try:
            page = write(course_dir, name, None if args.output is None else args.output.resolve() / name)
        except ValueError as problem:
            print(f"no class report for {name}: {problem}", file=sys.stderr)
            status = 1
            continue
        print(f"{name}: class report {page}")
    return status


if __name__ == "__main__":
    sys.exit(main())
