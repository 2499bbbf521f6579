"""The example class in-process: every example student is graded by the model as its spec promises, and the
fixed end-to-end sample (tests/test_grading.py grades it with nbgrader) holds one student of each kind."""

from __future__ import annotations

import pytest

from autograder import assignments
from autograder.examples import example_class, hostile, report
from autograder.grader.in_process import grade_variant
from a07_memory_stand_in import a07_memory_stand_in  # noqa: F401 — a fixture: a07's memory step on its stand-in case

pytestmark = pytest.mark.usefixtures("a07_memory_stand_in")

STUDENTS = [(name, student) for name, assignment in assignments.all_assignments().items()
            for student, variant in example_class.students_of(assignment).items() if variant is not None]


@pytest.mark.parametrize("name,student", STUDENTS)
def test_every_example_student_loses_points_exactly_where_its_spec_says(name, student):
    assignment = assignments.get(name)
    verdicts = grade_variant(assignment, example_class.students_of(assignment)[student])
    lost = {grade_id for grade_id, verdict in verdicts.items() if verdict.score < verdict.points}
    assert lost == example_class.expected_losses(assignment, student)


def _kinds(assignment):
    """The kinds of example student the sample must show, as predicates on a variant: a correct answer written
    differently only for the hostile bank's assignment (elsewhere it is graded in-process only)."""
    mistakes = list(assignment.mistakes.values())
    different = {"correct, written differently": lambda v: not v.breaks}
    return {**(different if assignment.name == hostile.ASSIGNMENT else {}),
            "a known mistake of the bank": lambda v: v in mistakes,
            "wrong, the bank has no name for it": lambda v: bool(v.breaks) and v not in mistakes}


@pytest.mark.parametrize("name", sorted(assignments.all_assignments()))
def test_the_end_to_end_sample_has_the_first_student_of_each_kind_in_spec_order(name):
    assignment = assignments.get(name)
    students = example_class.students_of(assignment)
    sample = example_class.end_to_end_sample(assignment)
    assert sample[:2] == [example_class.CORRECT_STUDENT, example_class.UNTOUCHED]
    assert sample == [s for s in students if s in sample], "in the order of students_of"
    for kind, is_kind in _kinds(assignment).items():
        of_kind = [s for s, v in assignment.example_students.items() if is_kind(v)]
        assert [s for s in sample[2:] if s in of_kind] == of_kind[:1], (name, kind)
    assert len(sample) == 2 + sum(any(map(k, assignment.example_students.values())) for k in _kinds(assignment).values())
    if name != hostile.ASSIGNMENT:
        assert all(example_class.students_of(assignment)[s].breaks for s in sample[2:]), "no correct-but-different"


def test_the_hostile_bank_s_assignment_samples_a_correct_answer_written_differently():
    """The sample's only correct-but-different student is the hostile bank's assignment's (its questions too:
    tests/test_grading.py reads that student's answers to them)."""
    assignment = assignments.get(hostile.ASSIGNMENT)
    sample = example_class.end_to_end_sample(assignment)
    assert [s for s in sample[2:] if not example_class.students_of(assignment)[s].breaks] == ["cai-einsum-and-1e9"]


def test_the_sample_is_smaller_than_the_class_but_covers_every_assignment():
    total = sum(len(example_class.students_of(a)) for a in assignments.all_assignments().values())
    sampled = sum(len(example_class.end_to_end_sample(a)) for a in assignments.all_assignments().values())
    assert 2 * len(assignments.all_assignments()) < sampled < total
    assert all(len(example_class.end_to_end_sample(a)) <= 4 + (a.name == hostile.ASSIGNMENT)
               for a in assignments.all_assignments().values())


def test_the_report_s_modelled_rows_are_those_of_every_unsampled_student_and_say_what_the_model_gives():
    name = next(iter(assignments.all_assignments()))
    assignment = assignments.get(name)
    rows = report.check_end_to_end({name: ([], [])}, modelled=True)
    assert [r.name for r in rows] == list(example_class.students_of(assignment))
    assert all(r.ok for r in rows)
    untouched = next(r for r in rows if r.name == example_class.UNTOUCHED)
    assert untouched.detail == "0 points, as the in-process model"
    student = next(s for s, v in assignment.example_students.items() if v.breaks)
    total = sum(v.score for v in grade_variant(assignment, assignment.example_students[student]).values())
    assert next(r for r in rows if r.name == student).detail == f"{total:g} points, as the in-process model"
    assert report.check_end_to_end({name: ([], [])}) == [], "without modelled, only graded students have rows"


def test_the_committed_report_graded_every_example_student_end_to_end():
    text = report.REPORT.read_text().split("## Example class, end to end", 1)[1]
    count = sum(len(example_class.students_of(a)) for a in assignments.all_assignments().values())
    assert text.count("as the in-process model") == count


def test_the_demo_overview_writes_scores_with_at_most_two_decimals():
    """make demo's class table writes a total as make grade's table does (issue 14: never ``6.4286/9``)."""
    from autograder.nbgrader.grading import StudentResult

    uma = StudentResult("uma", {"test_a": (3 / 7, 3.0), "test_b": (6.0, 6.0)})
    results = {"04_masks_and_stability": (["test_a", "test_b"], [uma, StudentResult("ben", None)])}
    rows = {line.split()[0]: line.split()[1:] for line in example_class.overview(results).splitlines()[2:]}
    assert rows == {"uma": ["6.43/9"], "ben": ["not", "graded"]}
