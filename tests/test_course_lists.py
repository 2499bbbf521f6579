"""What the README and the notebooks say about the course's functions, points and example class agrees with the specs.

These lists are prose for people, so they cannot be generated from ``autograder/assignments/*/spec.py``; these
tests fail when one of them drifts from the specs (a step added, a function renamed, points changed).
"""

import importlib
import re

from autograder import assignments
from autograder.examples.example_class import students_of
from autograder.nbgrader import notebook_cells
from conftest import REPO

ASSIGNMENTS = list(assignments.all_assignments().values())
README = (REPO / "README.md").read_text()
NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def function_table() -> dict[int, str]:
    """Assignment number → its row of the README's table of the functions learners write."""
    table = README.split("| assignment | functions |", 1)[1].split("\n\n", 1)[0]
    return {int(number): row for number, row in re.findall(r"^\| (\d+) \| (.*) \|$", table, re.M)}


def test_readme_function_table_lists_each_assignments_functions():
    rows = function_table()
    assert sorted(rows) == list(range(1, len(ASSIGNMENTS) + 1)), "one row per assignment, in course order"
    for number, assignment in enumerate(ASSIGNMENTS, start=1):
        quoted = set(re.findall(r"`(\w+)", rows[number]))
        called = set(re.findall(r"`(\w+)\(", rows[number]))
        assert set(assignment.reference) <= quoted, f"README row {number} misses {set(assignment.reference) - quoted}"
        assert called <= set(assignment.reference), f"README row {number} names {called - set(assignment.reference)}"


def test_readme_counts_the_example_class_from_the_specs():
    submissions = sum(len(students_of(assignment)) for assignment in ASSIGNMENTS)
    assert f"{submissions} example submissions of the {NUMBER_WORDS[len(ASSIGNMENTS)]} assignments" in README


def test_each_autograder_cell_states_its_points():
    for assignment in ASSIGNMENTS:
        cells = notebook_cells.test_cells(notebook_cells.read(REPO / "source" / assignment.name / assignment.notebook))
        for grade_id, (source, points) in cells.items():
            stated = re.search(r"\((\d+(?:\.\d+)?) points?\)", source.splitlines()[0])
            assert stated and float(stated.group(1)) == points, (f"{assignment.name}/{grade_id}: the cell says "
                                                                 f"{stated and stated.group(0)}, its metadata {points:g}")


#: Course-wide constants, each written out in one place only; everything else uses the name.
CONSTANTS = {
    "the course id": (r"""["']attention-lab["']""", {"autograder/course.py"}),
    "the kernels' OPENBLAS_NUM_THREADS": (r"""["']OPENBLAS_NUM_THREADS["']\s*[:,]\s*["']1""",
                                          {"attention_lab/core/__init__.py"}),
    "the 16 MiB caps": (r"16 \* (MiB|2 ?\*\* ?20)|16_?777_?216",
                        {"autograder/sandbox/limits.py", "attention_lab/core/values.py"}),
}


def grader_sources():
    """The grader's Python files (drafts of coming assignments, which have no ``spec.py``, left out), the hub's
    configuration, nbgrader's, and the student package's shared core."""
    drafts = [p.parent for p in (REPO / "autograder" / "assignments").glob("a*/__init__.py")
              if not (p.parent / "spec.py").exists()]
    paths = [*(REPO / "autograder").rglob("*.py"), *(REPO / "hub").rglob("*.py"), REPO / "nbgrader_config.py",
             *(REPO / "attention_lab" / "core").rglob("*.py")]
    return [p for p in paths if not any(p.is_relative_to(d) for d in drafts)]


def test_course_constants_are_written_out_once():
    sources = {str(p.relative_to(REPO)): p.read_text() for p in grader_sources()}
    for name, (pattern, home) in CONSTANTS.items():
        found = {path for path, text in sources.items() if re.search(pattern, text)}
        assert found == home, f"{name} written out in {sorted(found - home)}: use the constant's name instead"


def test_self_checks_name_their_assignment_as_its_spec_does():
    # the student package cannot import the specs (it never imports the grader): its ids are compared here
    for name, assignment in assignments.all_assignments().items():
        checks = importlib.import_module(f"attention_lab.{assignments.folder_of(name)}.checks")
        assert checks.ASSIGNMENT == assignment.name
