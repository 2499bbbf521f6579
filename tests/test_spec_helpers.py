"""The helpers a spec builds its assignment with (``autograder.grader.spec``), and the order of the steps they give."""

import dataclasses
import importlib
import tomllib
import types

import pytest

from autograder import assignments
from autograder.grader.bank import hidden_inputs_only
from autograder.grader.questions import Choice, Questions
from autograder.grader.spec import (Assignment, ExampleStudentsFileError, Steps, Variant, combined,
                                   example_students, functions)
from autograder.nbgrader import notebook_cells
from conftest import REPO


@pytest.mark.parametrize("name", sorted(assignments.all_assignments()))
def test_steps_are_in_the_order_of_the_notebooks_autograder_cells(name):
    assignment = assignments.get(name)
    cells = notebook_cells.test_cells(notebook_cells.read(REPO / "source" / name / assignment.notebook))
    assert [step.grade_id for step in assignment.steps] == list(cells)


def test_steps_are_declared_on_their_case_builders_in_order():
    steps = Steps()

    @steps.add("test_b", "b")
    def b_cases(seed=1):
        return [seed]

    @steps.add("test_a", "a", diagnose=len)
    def a_cases(seed=2):
        return [seed]

    assert [(s.grade_id, s.title, s.cases, s.diagnose) for s in steps] == [
        ("test_b", "b", b_cases, None), ("test_a", "a", a_cases, len)]
    assert b_cases() == [1]  # the builder itself is kept


def test_functions_takes_the_named_functions_of_a_module():
    module = types.SimpleNamespace(f=abs, g=max)
    assert functions(module, "g f") == {"g": max, "f": abs}
    with pytest.raises(AttributeError):
        functions(module, "f h")


def test_combined_joins_cells_breaks_and_the_mistakes_hints():
    first = Variant("one", {"a": "1", "b": "1"}, frozenset({"test_a"}), "hint one")
    correct = Variant("ok", {"b": "2"})
    second = Variant("two", {"c": "3"}, frozenset({"test_c"}), "hint two")
    both = combined("all three", first, correct, second)
    assert both == Variant("all three", {"a": "1", "b": "2", "c": "3"}, frozenset({"test_a", "test_c"}),
                           "hint one / hint two")
    assert combined("correct twice", correct, Variant("also ok", {"d": "4"})).hint == ""


def _outline(assignment):
    return ([(s.grade_id, s.title, s.question) for s in assignment.steps], assignment.questions,
            assignment.correct, assignment.mistakes)


def test_an_assignment_given_its_questions_equals_one_a_spec_spreads_them_into_by_hand():
    """``questions=QUESTIONS`` adds the questions' steps, spellings and wrong answers, as the older way of writing a
    spec (still allowed: a branch written so merges unchanged) spreads them in itself; both list the same
    mistakes as exposed by hidden inputs only."""
    spec = importlib.import_module("autograder.assignments.a01_attention.spec")
    given = spec.ASSIGNMENT
    by_hand = dataclasses.replace(given, steps=(*spec.STEPS, *spec.QUESTIONS.steps), questions=(),
                                  correct={**spec.CORRECT, **spec.QUESTIONS.correct},
                                  mistakes={**spec.MISTAKES, **spec.QUESTIONS.mistakes})
    assert given.questions == tuple(spec.QUESTIONS) and len(given.questions) == 2
    assert [s.grade_id for s in given.steps][-2:] == ["question_nan_rows", "question_entropy_ceiling"]
    assert set(spec.QUESTIONS.correct) < set(given.correct) and set(spec.QUESTIONS.mistakes) < set(given.mistakes)
    assert _outline(by_hand) == _outline(given)
    assert hidden_inputs_only([given]) == hidden_inputs_only([by_hand]) == spec.QUESTIONS.hidden_inputs_only(given.name)
    assert set(hidden_inputs_only([given])) == {(given.name, key, grade_id) for key, variant
                                                in spec.QUESTIONS.mistakes.items() for grade_id in variant.breaks}
    both = dataclasses.replace(by_hand, questions=spec.QUESTIONS)  # spread in and handed over: counted once
    assert _outline(both) == _outline(given) and _outline(dataclasses.replace(given, name="x")) == _outline(given)


def test_a_question_may_not_take_the_grade_id_of_another_step():
    asked = Questions()
    asked.add("x", "x", Choice("ab"), "a", wrong={"b": "b is the other one."})
    steps = Steps()
    steps.add("question_x", "a function step")(lambda seed=0: [])
    with pytest.raises(ValueError, match="question 'x' has the grade_id of another step, 'question_x'"):
        Assignment("x", "x.ipynb", {}, steps, {}, {}, questions=asked)


# ---------------------------------------------------------------- the example class as data

_ANSWERS = {"right": Variant("written differently", {"f": "def f():\n    return 1\n"}),
            "off_by_one": Variant("off by one", {"f": "def f():\n    return 2\n"}, frozenset({"test_f"}), "count again"),
            "wrong_g": Variant("g wrong", {"g": "def g():\n    return 0\n"}, frozenset({"test_g"}), "look at g")}


def test_example_students_name_bank_answers_one_as_it_is_several_combined_in_the_file_s_order(tmp_path):
    path = tmp_path / "example_students.toml"
    path.write_text('[zed-two]\ndescription = "both"\nanswers = ["off_by_one", "wrong_g"]\n\n'
                    '[amy-off]\nanswers = ["off_by_one"]\n\n[bo-right]\nanswers = ["right"]\n', encoding="utf-8")
    students = example_students(path, _ANSWERS)
    assert list(students) == ["zed-two", "amy-off", "bo-right"]
    assert students["amy-off"] is _ANSWERS["off_by_one"] and students["bo-right"] is _ANSWERS["right"]
    assert students["zed-two"] == combined("both", _ANSWERS["off_by_one"], _ANSWERS["wrong_g"])
    assert students["zed-two"].breaks == {"test_f", "test_g"}


@pytest.mark.parametrize("text, complaint", [
    ('[amy]\nanswers = ["typo"]\n', "'typo' is not a correct variant or known mistake"),
    ('[amy]\nanswers = ["right", "wrong_g"]\n', "needs a description"),
    ('[amy]\nanswers = []\n', "a student is a table with answers"),
    ('[amy]\nanswer = ["right"]\n', "a student is a table with answers"),
    ('amy = "right"\n', "a student is a table with answers"),
    ("[amy\n", "not valid TOML"),
])
def test_an_example_students_file_that_is_not_well_formed_is_refused_naming_the_file_and_student(tmp_path, text,
                                                                                                  complaint):
    path = tmp_path / "example_students.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ExampleStudentsFileError) as refused:
        example_students(path, _ANSWERS)
    assert complaint in str(refused.value) and "example_students.toml" in str(refused.value)
    assert "student amy" in str(refused.value) or complaint == "not valid TOML"


def test_every_graded_assignment_s_example_class_file_ships_with_the_package():
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["autograder"]
    package = REPO / "autograder"
    shipped = {p for pattern in patterns for p in package.glob(pattern)}
    for name in assignments.all_assignments():
        path = package / "assignments" / assignments.folder_of(name) / "example_students.toml"
        assert path in shipped, f"{path} is not in pyproject.toml's package data"


def test_an_assignment_in_its_folder_reads_its_questions_and_example_class_from_the_files_beside_its_spec(tmp_path):
    """``Assignment.in_folder`` = the questions of ``questions.toml`` and the students of ``example_students.toml``
    (naming bank answers and the questions' answers), then ``more_students``; a malformed file is refused."""
    import shutil
    from pathlib import Path

    from autograder.grader.questions import Questions
    from autograder.grader.spec import Assignment, ExampleStudentsFileError, Variant, example_students

    spec = importlib.import_module("autograder.assignments.a02_multi_head.spec")
    folder = Path(spec.__file__).parent
    fields = dict(name=spec.NAME, notebook="multi_head_attention.ipynb", steps=spec.STEPS, correct=spec.CORRECT,
                  mistakes=spec.MISTAKES, reference=spec.ASSIGNMENT.reference)
    questions = Questions.load(folder / "questions.toml")
    by_hand = Assignment(questions=questions, **fields)
    by_hand = dataclasses.replace(by_hand, example_students=example_students(
        folder / "example_students.toml", {**spec.CORRECT, **spec.MISTAKES, **questions.correct, **questions.mistakes}))
    extra = Variant("written for this test", dict(spec.CORRECT[next(iter(spec.CORRECT))].cells))
    read = Assignment.in_folder(folder, more_students={"zed-extra": extra}, **fields)
    assert _outline(read) == _outline(by_hand) and len(read.questions) >= 2
    assert list(read.example_students) == [*by_hand.example_students, "zed-extra"]
    assert read.example_students["zed-extra"] is extra
    assert all(read.example_students[k].cells == v.cells for k, v in by_hand.example_students.items())
    assert _outline(read) == _outline(spec.ASSIGNMENT)  # what the spec itself builds with it
    copy = tmp_path / "a02"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "example_students.toml").write_text('[ann]\nanswers = ["no_such_answer"]\n', encoding="utf-8")
    with pytest.raises(ExampleStudentsFileError, match="no_such_answer"):
        Assignment.in_folder(copy, **fields)
