"""The helpers a spec builds its assignment with (``autograder.grader.spec``), and the order of the steps they give."""

import types

import pytest

from autograder import assignments
from autograder.grader.spec import Steps, Variant, combined, functions
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
