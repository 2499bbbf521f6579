"""What the README and the notebooks say about the course's functions, points and example class agrees with the specs.

These lists are prose for people, so they cannot be generated from ``autograder/assignments/*/spec.py``; these
tests fail when one of them drifts from the specs (a step added, a function renamed, points changed).
"""

import importlib
import re

from autograder import assignments
from autograder.nbgrader import notebook_cells
from conftest import REPO

ASSIGNMENTS = list(assignments.all_assignments().values())
README = (REPO / "README.md").read_text()


def function_table() -> dict[int, str]:
    """Assignment number → its row of the README's table of the functions learners write."""
    table = README.split("| assignment | functions |", 1)[1].split("\n\n", 1)[0]
    return {int(number): row for number, row in re.findall(r"^\| (\d+) \| (.*) \|$", table, re.M)}


def test_readme_function_table_names_only_functions_of_its_assignment():
    """What the README's table says is right: each row's functions are its assignment's (from the spec).

    Not the other way round: a new step or assignment is graded without a README edit (README, "Adding a step",
    at most four hand-edited files), so a row may name an assignment's main functions only.
    """
    rows = function_table()
    assert rows and sorted(rows) == list(range(1, len(rows) + 1)), "rows numbered in course order"
    for number, assignment in zip(sorted(rows), ASSIGNMENTS):
        called = set(re.findall(r"`(\w+)\(", rows[number]))
        assert called, f"README row {number} names no function"
        assert called <= set(assignment.reference), f"README row {number} names {called - set(assignment.reference)}"


def test_readme_states_no_count_of_the_example_class_that_an_assignment_changes():
    # the demo prints the count; the README must not hand-keep it (it went stale with every new assignment)
    assert not re.search(r"\b\d+ example submissions\b", README)


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
