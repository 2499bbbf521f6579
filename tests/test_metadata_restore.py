"""Edited nbgrader metadata costs the edit, not the grade: metadata comes from the gradebook.

End to end, each submission is graded with nbgrader (``run_student``) in a course whose gradebook holds
assignment 1: the listed edits, a copy-pasted answer cell, and random (seeded) edits of every kind of
cell must all be graded as their honest part, with the edits named in the table.
"""

import copy

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.examples.hostile import FULL  # assignment 1's points, its questions included
from autograder.course import COURSE_ID
from autograder.nbgrader import grading
from autograder.examples import hostile_payloads as payloads
from autograder.grader.in_process import grade_answers
from autograder.nbgrader.metadata_restore import known_cells, restore_deleted_cells, restore_metadata
from autograder.nbgrader.notebook_cells import fill_release, nbgrader_meta, read, solution_cells
from autograder.nbgrader.student_job import run_student
from autograder import assignments
from conftest import ASSIGNMENT, NOTEBOOK, RELEASE_NB, REPO, SOURCE_NB

SOLUTIONS = solution_cells(read(SOURCE_NB))
WRONG_MASK = "def causal_mask(T):\n    return np.triu(np.ones((T, T), dtype=bool))"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = grading.copy_course(REPO, tmp_path_factory.mktemp("metadata") / "course")
    grading.load_into_gradebook(root, ASSIGNMENT)
    return root


@pytest.fixture(scope="module")
def known(course):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id=COURSE_ID) as gradebook:
        return known_cells(gradebook, NOTEBOOK.removesuffix(".ipynb"), ASSIGNMENT)


def graded(course, student, text: str):
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NOTEBOOK).write_text(text)
    job = run_student(course, ASSIGNMENT, student)
    assert job.graded, job.reason
    _, rows = grading.read_results(course, ASSIGNMENT, [student], job_notes={student: job.notes})
    return rows[0]


def honest_total(cells: dict[str, str]) -> float:
    return sum(v.score for v in grade_answers(assignments.get(ASSIGNMENT), cells).values())


def test_the_gradebook_knows_every_nbgrader_cell_of_the_source_in_order(known):
    source = [nbgrader_meta(c)["grade_id"] for c in read(SOURCE_NB).cells if nbgrader_meta(c).get("grade_id")]
    assert [cell["grade_id"] for cell in known] == source
    test = next(cell for cell in known if cell["grade_id"] == "test_softmax")
    assert test["metadata"]["nbgrader"] | {"checksum": None} == {
        "grade": True, "grade_id": "test_softmax", "locked": True, "schema_version": 3, "solution": False,
        "cell_type": "code", "checksum": None, "points": 2.0}


def test_restore_keeps_the_first_copy_strips_unknown_metadata_and_names_each_edit(known):
    nb = fill_release(read(RELEASE_NB), SOLUTIONS)
    payloads.listed_metadata_edits(nb)
    index = next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "causal_mask")
    nb.cells.insert(index + 1, nbformat.from_dict(copy.deepcopy(nb.cells[index])))
    edits = restore_metadata(nb, known)
    restored = restore_deleted_cells(nb, known)
    ids = [nbgrader_meta(c).get("grade_id") for c in nb.cells if nbgrader_meta(c)]
    assert ids == [cell["grade_id"] for cell in known]  # every known cell once, in the source's order
    assert "copied cell causal_mask: the copy ran as a plain cell" in edits
    original = next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "causal_mask")
    copy_cell = nb.cells[original + 1]
    assert copy_cell.source == SOLUTIONS["causal_mask"].strip("\n") and "nbgrader" not in copy_cell.metadata
    assert "unknown cell 'bonus' graded as a plain markdown cell" in edits
    assert any(line.startswith("test_attention_scores: points") for line in edits)  # removed points restored
    assert restored == ["test_softmax: deleted, restored"]  # the renamed cell's original is back
    assert "test_scaling: grade restored" in edits


def test_listed_edits_and_a_copied_answer_cell_are_graded_as_their_honest_part(course):
    cells = {**SOLUTIONS, "causal_mask": WRONG_MASK}
    nb = fill_release(read(RELEASE_NB), cells)
    payloads.listed_metadata_edits(nb)
    index = next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == "softmax")
    pasted = nbformat.from_dict(copy.deepcopy(nb.cells[index]))
    pasted.id = f"{pasted.id}-pasted"
    nb.cells.insert(index + 1, pasted)
    row = graded(course, "listed-edits", payloads.metadata_json(nb))
    assert row.total == honest_total(cells) < FULL
    assert "metadata edited: " in row.note and "copied cell softmax: the copy ran as a plain cell" in row.note
    assert "see grading.log" not in row.note
    assert sum(m for _, m in row.steps.values()) == FULL  # the fake 100-point cell added nothing


@pytest.mark.parametrize("seed", range(5))
def test_random_metadata_edits_of_every_kind_of_cell_still_grade_the_honest_part(course, seed):
    cells = {**SOLUTIONS, "causal_mask": WRONG_MASK} if seed % 2 else dict(SOLUTIONS)
    nb = fill_release(read(RELEASE_NB), cells)
    done = payloads.random_metadata_edits(nb, seed, per_cell=0.7)
    kinds = {("solution" if nbgrader_meta(c).get("solution") else "test" if nbgrader_meta(c).get("grade")
              else "locked" if nbgrader_meta(c).get("locked") else "plain") for c in read(RELEASE_NB).cells}
    assert kinds == {"solution", "test", "locked", "plain"} and len(done) > 10
    row = graded(course, f"random-{seed}", payloads.metadata_json(nb))
    assert row.total == honest_total(cells), (done, row.note)
    assert sum(m for _, m in row.steps.values()) == FULL
    assert "metadata edited: " in row.note or "restored from the gradebook" in row.note
