"""Testing the tests: for every assignment, every correct variant earns full marks and every known
mistake loses points exactly on the steps it breaks, where it is named.

Runs the real comparison (:mod:`autograder.comparison`) on the real kernel-side calls
(:mod:`attention_lab.probe`), in this process; ``test_grading`` checks nbgrader gives the same scores.
"""

import numpy as np
import pytest

from autograder import assignments, comparison
from autograder.in_process import grade_answers, grade_variant, points_of

ASSIGNMENTS = assignments.all_assignments()


def flat(text: str) -> str:
    """Text with every run of whitespace as one space (feedback lines are wrapped)."""
    return " ".join(text.split())
A1 = ASSIGNMENTS["01_scaled_dot_product_attention"]

CORRECT = [(a.name, key) for a in ASSIGNMENTS.values() for key in a.correct]
MISTAKES = [(a.name, key) for a in ASSIGNMENTS.values() for key in a.mistakes]


def test_the_bank_is_as_large_as_promised():
    assert len(A1.mistakes) >= 10
    assert sum(len(a.mistakes) for a in ASSIGNMENTS.values()) >= 15
    for assignment in ASSIGNMENTS.values():
        assert len(assignment.correct) >= 8, assignment.name
        for key, mistake in assignment.mistakes.items():
            assert mistake.breaks and mistake.hint, f"{assignment.name}/{key} needs breaks and a hint"
            steps = {step.grade_id for step in assignment.steps}
            assert set(mistake.breaks) <= steps, f"{assignment.name}/{key}: unknown steps {set(mistake.breaks) - steps}"


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_every_autograder_cell_has_a_step_and_every_step_a_cell(name):
    assignment = ASSIGNMENTS[name]
    assert set(points_of(assignment)) == {step.grade_id for step in assignment.steps}


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_the_source_solution_earns_full_marks(name):
    for grade_id, result in grade_answers(ASSIGNMENTS[name], {}).items():
        assert result.score == result.points and not result.named, result.text()
        assert "✗" not in result.text()


@pytest.mark.parametrize("name,key", CORRECT)
def test_correct_variant_earns_full_marks_and_no_mistake_is_named(name, key):
    for grade_id, result in grade_variant(ASSIGNMENTS[name], ASSIGNMENTS[name].correct[key]).items():
        assert result.score == result.points and not result.named, f"{name}/{key}:\n{result.text()}"


@pytest.mark.parametrize("name,key", MISTAKES)
def test_mistake_loses_points_exactly_where_it_breaks_and_is_named_there(name, key):
    mistake = ASSIGNMENTS[name].mistakes[key]
    for grade_id, result in grade_variant(ASSIGNMENTS[name], mistake).items():
        if grade_id in mistake.breaks:
            assert result.score < result.points, f"{name}/{key} should lose points in {grade_id}:\n{result.text()}"
            assert key in result.named, f"{name}/{key} should be named in {grade_id}:\n{result.text()}"
            assert flat(result.text()).count(flat(mistake.hint)) == 1, f"{name}/{key}: the hint once per step"
        else:
            assert result.score == result.points, f"{name}/{key} must not be charged in {grade_id}:\n{result.text()}"


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_the_untouched_release_scores_zero(name):
    assignment = ASSIGNMENTS[name]
    from autograder.answers import source_solutions
    stubs = {cell: _stubbed(source) for cell, source in source_solutions(assignment.name, assignment.notebook).items()}
    for grade_id, result in grade_answers(assignment, stubs).items():
        assert result.score == 0, result.text()


def _stubbed(source):
    """A solution cell as the release has it: every function body is `raise NotImplementedError()`."""
    import ast
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            node.body = [ast.parse("raise NotImplementedError()").body[0]]
    return ast.unparse(tree)


def grades(cells, assignment=A1):
    return grade_answers(assignment, cells)


def lost(cells, assignment=A1):
    return {g for g, r in grades(cells, assignment).items() if r.score < r.points}


# ---- assignment 1: specific behaviours ------------------------------------------------------------------

def test_partial_credit_is_the_share_of_cases_passed():
    result = grades(A1.mistakes["softmax_no_max_subtraction"].cells)["test_softmax"]
    assert (result.score, result.points) == (1.25, 2.0)  # 3 of 8 cases overflow
    assert "subtract" in result.text() and "softmax_no_max_subtraction" in result.named


def test_a_wrong_scale_that_matches_no_known_mistake_names_the_factor():
    cells = {"attention_scores": "def attention_scores(Q, K, scale=True):\n"
                                 "    s = Q @ np.swapaxes(K, -1, -2)\n    return s / 3.0 if scale else s"}
    result = grades(cells)["test_scaling"]
    assert result.score == 0 and not result.named
    assert "0.9428 times the correct one (d_k = 8)" in result.text()  # ÷3 instead of ÷√8


def test_a_later_step_is_graded_given_an_earlier_identified_mistake():
    results = grades(A1.mistakes["softmax_wrong_axis"].cells)
    assert results["test_scaled_dot_product_attention"].score == 2
    assert "correct given your earlier function" in results["test_scaled_dot_product_attention"].text()


def test_an_unfinished_earlier_function_is_named_in_the_later_step():
    results = grades({"softmax": "def softmax(x, axis=-1):\n    raise NotImplementedError()"})
    text = results["test_scaled_dot_product_attention"].text()
    assert "raised NotImplementedError in softmax" in text and "finish it first" in text


def test_modifying_the_input_in_place_is_reported():
    in_place = ("def softmax(x, axis=-1):\n    x -= x.max(axis=axis, keepdims=True)\n    np.exp(x, out=x)\n"
                "    x /= x.sum(axis=axis, keepdims=True)\n    return x")
    result = grades({"softmax": in_place})["test_softmax"]
    assert result.score == 0 and "modified its argument 1 in place" in result.text()


def test_an_object_that_claims_equality_is_only_a_type_name():
    cheat = ("class Anything:\n    def __eq__(self, other):\n        return True\n"
             "    __array_priority__ = 1000\n"
             "def causal_mask(T):\n    return Anything()")
    result = grades({"causal_mask": cheat})["test_causal_mask"]
    assert result.score == 0 and "it is a __main__.Anything" in result.text()
    subclass = ("class Anything(np.ndarray):\n    def __eq__(self, other):\n        return True\n"
                "def causal_mask(T):\n    return np.zeros((T, T), dtype=bool).view(Anything)")
    result = grades({"causal_mask": subclass})["test_causal_mask"]
    assert result.score == 0 and "subclass of numpy.ndarray" in result.text()


def test_returning_a_list_is_accepted_and_a_swapped_pair_is_named():
    body = ("def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
            "    s = attention_scores(Q, K, scale)\n    s = s if mask is None else np.where(mask, s, -np.inf)\n"
            "    w = softmax(s)\n    return [w @ V, w]")
    assert lost({"scaled_dot_product_attention": body}) == set()
    result = grades({"scaled_dot_product_attention": body.replace("[w @ V, w]", "w, w @ V")})[
        "test_scaled_dot_product_attention"]
    assert result.score == 0 and "returned (the weights, the output)" in result.text()


def test_np_seterr_raise_in_the_notebook_costs_nothing():
    cells = {"softmax": "np.seterr(all='raise')\n\ndef softmax(x, axis=-1):\n"
                        "    e = np.exp(x - x.max(axis=axis, keepdims=True))\n    return e / e.sum(axis=axis, keepdims=True)"}
    try:
        assert lost(cells) == set()
    finally:
        np.seterr(all="warn", under="ignore")


def test_a_hanging_function_costs_its_own_step_only(monkeypatch):
    monkeypatch.setattr(comparison, "CALL_SECONDS", 0.2)
    # catches the first interruption and loops again: the limit repeats until the call ends
    stubborn = ("def causal_mask(T):\n    while True:\n        try:\n            while True:\n                pass\n"
                "        except Exception:\n            break\n    while True:\n        pass")
    results = grades({"causal_mask": stubborn})
    assert results["test_causal_mask"].score == 0
    assert "did not finish within 0.2 s" in results["test_causal_mask"].text()
    # causal_self_attention, which calls it, is graded with the reference's mask standing in
    assert lost({"causal_mask": stubborn}) == {"test_causal_mask"}


def test_messages_show_no_hidden_inputs_or_expected_values():
    grader = comparison.Grader(A1)
    for key, mistake in A1.mistakes.items():
        text = "\n".join(line for r in grades(mistake.cells).values() for line in r.lines)  # as written, unwrapped
        for step in A1.steps:
            for index, case in enumerate(grader.cases[step.grade_id]):
                expected = grader.expected(step.grade_id, index)
                for array in [*case.args, *case.kwargs.values(), *(expected if isinstance(expected, tuple) else [expected])]:
                    if isinstance(array, np.ndarray) and array.dtype.kind == "f" and array.size > 1:
                        for value in array.ravel()[:6]:
                            if len(f"{value:.6g}".replace("-", "").replace(".", "").strip("0")) >= 4:  # random values
                                assert f"{value:.6g}" not in text or _learner_value_line(text, f"{value:.6g}"), (
                                    key, step.grade_id, value)


def _learner_value_line(text, number):
    """A number may appear only as the learner's own value ("got ...")."""
    return all(f"got {number}" in line for line in text.splitlines() if number in line)


def test_grading_the_same_answers_twice_gives_identical_results():
    cells = A1.mistakes["mask_with_zero"].cells
    first = {g: r.text() for g, r in grades(cells).items()}
    comparison_cache_free = grade_answers(A1, cells)
    assert first == {g: r.text() for g, r in comparison_cache_free.items()}
