"""Assignment 6's diagnoses (issue 12 §1): each known mistake is diagnosed by name, on any input; correct answers never.

The grader shows a step's diagnosis when a wrong result matches no known mistake (a combination, or a slip written
another way), so the diagnoses are tested on the bank's mistakes with the bank switched off: on the hidden cases
of the course's seed and of two other seeds (other inputs of the same kinds), on combinations of two mistakes, and
on every correct variant (never a note).
"""

import pytest

from autograder import assignments
from autograder.grader.comparison import Raised, same
from autograder.grader.in_process import grade_answers, grader_for

A = assignments.get("06_gradients")
SEEDS = [None, 5, 11]

#: each known mistake → words its diagnosis must contain (the mistake's name, as a learner reads it)
NAMED = {
    "jacobian_no_outer_term": "Missing −p pᵀ term: your Jacobian is diag(p)",
    "jacobian_outer_plus": "The −p pᵀ term has the wrong sign",
    "backward_inner_unweighted": "⟨g, p⟩ is not weighted by p",
    "backward_inner_wrong_axis": "summed over the wrong axis",
    "backward_inner_no_keepdims": "keepdims dropped",
    "attention_diagonal_only": "Missing −p pᵀ term in dS",
    "attention_no_scale_in_dQ_dK": "Missing 1/√d_k in dQ and dK",
    "attention_scale_by_d_k": "Divided by d_k instead of √d_k",
    "attention_truthy_scale": "treated as True",
    "attention_dK_no_transpose": "dK is missing its transpose",
    "attention_dV_no_transpose": "dV is missing its transpose",
    "attention_ignores_mask": "The mask is ignored in the backward",
    "attention_masked_row_nan": "NaN or inf: a fully masked row",
    "attention_masked_row_uniform": "A fully masked row gets gradient",
    "numerical_forward_difference": "One-sided differences",
    "numerical_not_restored": "is not put back",
    "numerical_eps_not_doubled": "Divided by ε instead of 2ε",
    "relative_error_no_zero_guard": "0 / 0 is NaN",
    "relative_error_elementwise_max": "largest entry-wise relative error",
}
#: mistakes that raise on every hidden case where they are wrong (a diagnosis reads returned values only;
#: the grader names them by their exception)
RAISE_ONLY = {"jacobian_diag_outer_flatten"}


def diagnoses(cells, grade_id, seed):
    """(case description, the diagnosis) of each case of ``grade_id`` on which ``cells`` return a wrong result."""
    grader, step = grader_for(A, seed=seed), A.step(grade_id)
    found = []
    for index, case in enumerate(grader.cases[grade_id]):
        output, expected = grader.output_of(cells, grade_id, index), grader.expected(grade_id, index)
        if not isinstance(output, Raised) and not same(output, expected, case):
            found.append((case.description, step.diagnose(case, output, expected)))
    return found


def test_every_known_mistake_has_its_name_or_only_raises():
    assert set(NAMED) | RAISE_ONLY == set(A.function_mistakes)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", sorted(NAMED))
def test_a_known_mistake_is_diagnosed_by_name_wherever_it_is_wrong(key, seed):
    mistake = A.mistakes[key]
    (grade_id,) = mistake.breaks
    found = diagnoses(dict(mistake.cells), grade_id, seed)
    assert found, f"{key} is never wrong with a returned value (seed {seed})"
    for description, notes in found:
        assert any(NAMED[key] in note for note in notes), (key, seed, description, notes)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", sorted(RAISE_ONLY))
def test_a_mistake_that_only_raises_is_never_diagnosed_as_something_else(key, seed):
    (grade_id,) = A.mistakes[key].breaks
    assert diagnoses(dict(A.mistakes[key].cells), grade_id, seed) == []


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", ["source solution", *sorted(A.correct)])
def test_a_correct_answer_is_never_diagnosed(key, seed):
    cells = {} if key == "source solution" else dict(A.correct[key].cells)
    grader = grader_for(A, seed=seed)
    for step in A.steps:
        if step.diagnose is None:
            continue
        for index, case in enumerate(grader.cases[step.grade_id]):
            output = grader.output_of(cells, step.grade_id, index)
            assert not isinstance(output, Raised), (key, case.description)
            assert step.diagnose(case, output, grader.expected(step.grade_id, index)) == [], (key, case.description)


def test_two_mistakes_at_once_are_each_diagnosed_and_the_feedback_says_so():
    source = A.mistakes["attention_dK_no_transpose"].cells["attention_backward"]
    both = {"attention_backward": source.replace("dV = np.swapaxes(P, -1, -2) @ G", "dV = P @ G")}
    assert both["attention_backward"] != source
    ((_, notes),) = diagnoses(both, "test_attention_backward", None)  # the one square case: the others raise
    assert any("dK is missing its transpose" in n for n in notes) and any("dV is missing" in n for n in notes)
    feedback = " ".join(grade_answers(A, both)["test_attention_backward"].text().split())
    assert "dK is missing its transpose" in feedback and "dV is missing its transpose" in feedback


def test_a_slip_written_another_way_is_diagnosed_in_the_outputs_it_changes():
    source = A.mistakes["attention_no_scale_in_dQ_dK"].cells["attention_backward"]
    only_dQ = source.replace("dK = np.swapaxes(dS, -1, -2) @ Q\n", "dK = np.swapaxes(dS, -1, -2) @ Q / c\n")
    assert only_dQ != source
    found = diagnoses({"attention_backward": only_dQ}, "test_attention_backward", None)
    assert found and all(any("dQ is wrong; dK and dV are right." in n for n in notes) for _, notes in found)
    jacobian = "def softmax_jacobian(p):\n    p = np.asarray(p, dtype=float)\n    return -p[..., :, None] * np.eye(p.shape[-1]) + p[..., :, None] * p[..., None, :]\n"
    found = diagnoses({"softmax_jacobian": jacobian}, "test_softmax_jacobian", None)
    assert found and all(any("The sign is flipped" in n for n in notes) for _, notes in found)


def test_no_diagnosis_shows_a_number_a_hidden_input_could_be_read_from():
    import re

    for key in NAMED:
        (grade_id,) = A.mistakes[key].breaks
        for _, notes in diagnoses(dict(A.mistakes[key].cells), grade_id, None):
            for note in notes:
                assert not re.search(r"\d\.\d{2}", note), (key, note)
