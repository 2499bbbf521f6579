"""Grades as a CSV file that an LMS gradebook imports: nbgrader ``export`` plugins for Canvas and Moodle.

Run in the course directory::

    nbgrader export --exporter=autograder.nbgrader.lms_export.CanvasExportPlugin --to=canvas.csv
    nbgrader export --exporter=autograder.nbgrader.lms_export.MoodleExportPlugin --to=moodle.csv

One row per student in the gradebook, one column per assignment holding the
score after nbgrader's late-submission penalty (``score - late_submission_penalty``,
never below 0), rounded to ``decimals``; a student who submitted nothing gets 0,
as in nbgrader's own CSV export. Unlike that export, fields are quoted, so a
name with a comma stays in its column.

* **Canvas** (Grades → Import): ``Student, ID, SIS User ID, SIS Login ID, Section``
  and the assignment columns, then a ``Points Possible`` row. Canvas matches
  students by ``ID`` (the gradebook's ``lms_user_id``, when set) or by
  ``SIS Login ID`` (the nbgrader student id, which is the hub's user name). A
  column header that names no Canvas assignment makes a new one; to fill an
  existing one, map the name to Canvas's header, e.g.
  ``c.CanvasExportPlugin.assignment_columns = {"01_scaled_dot_product_attention": "Attention 1 (4711)"}``.
* **Moodle** (Grades → Import → CSV file): ``First name, Last name, Username,
  ID number, Email address`` and the assignment columns; in the import, map
  ``Username`` to *username* (or ``Email address`` to *useremail*) and each
  assignment column to its grade item.
"""

from __future__ import annotations

import csv

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Dict, Integer, Unicode


class LmsExportPlugin(ExportPlugin):
    """Common part of the LMS exports: final scores per student and assignment, written with ``csv``."""

    assignment_columns = Dict(
        value_trait=Unicode(), default_value={},
        help="nbgrader assignment name -> column header in the LMS (default: the assignment name).",
    ).tag(config=True)
    decimals = Integer(2, help="Decimals the scores are rounded to.").tag(config=True)
    default_file = "grades.csv"

    def student_fields(self) -> list[str]:
        """Headers of the columns that identify a student (before the assignment columns)."""
        raise NotImplementedError

    def student_values(self, student) -> list[str]:
        """Values of :meth:`student_fields` for one ``nbgrader.api.Student``."""
        raise NotImplementedError

    def extra_rows(self, assignments) -> list[list[str]]:
        """Rows written between the header and the students (none by default)."""
        return []

    def number(self, value: float) -> str:
        """``value`` rounded to ``decimals``, without trailing zeros (``9``, ``8.25``)."""
        return format(round(float(value), self.decimals), "g")

    def final_score(self, gradebook: Gradebook, assignment: str, student: str) -> float:
        """Score after the late penalty, never below 0; 0 when the student submitted nothing."""
        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            return 0.0
        return max(0.0, submission.score - (submission.late_submission_penalty or 0.0))

    def export(self, gradebook: Gradebook) -> None:
        """Write the CSV to ``self.to`` (default ``grades.csv``), limited to ``self.assignment`` / ``self.student``."""
        assignments = [a for a in gradebook.assignments if not self.assignment or a.name in self.assignment]
        students = sorted((s for s in gradebook.students if not self.student or s.id in self.student),
                          key=lambda s: s.id)
        dest = self.to or self.default_file
        self.log.info("Exporting %d student(s) x %d assignment(s) for %s to %s",
                      len(students), len(assignments), type(self).__name__, dest)
        with open(dest, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(self.student_fields() + [self.assignment_columns.get(a.name, a.name) for a in assignments])
            writer.writerows(self.extra_rows(assignments))
            for student in students:
                writer.writerow(self.student_values(student)
                                + [self.number(self.final_score(gradebook, a.name, student.id)) for a in assignments])


class CanvasExportPlugin(LmsExportPlugin):
    """Canvas gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, assignments; a Points Possible row."""

    default_file = "canvas_grades.csv"
    section = Unicode("", help="Value of the Section column (Canvas ignores it when empty).").tag(config=True)

    def student_fields(self) -> list[str]:
        return ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]

    def student_values(self, student) -> list[str]:
        name = ", ".join(part for part in (student.last_name, student.first_name) if part) or student.id
        return [name, student.lms_user_id or "", "", student.id, self.section]

    def extra_rows(self, assignments) -> list[list[str]]:
        # Canvas's own export has this row; its import reads the assignments' points from it
        return [["    Points Possible", "", "", "", ""] + [self.number(a.max_score) for a in assignments]]


class MoodleExportPlugin(LmsExportPlugin):
    """Moodle CSV grade import: First name, Last name, Username, ID number, Email address, assignments."""

    default_file = "moodle_grades.csv"

    def student_fields(self) -> list[str]:
        return ["First name", "Last name", "Username", "ID number", "Email address"]

    def student_values(self, student) -> list[str]:
        return [student.first_name or "", student.last_name or "", student.id, student.lms_user_id or "",
                student.email or ""]
