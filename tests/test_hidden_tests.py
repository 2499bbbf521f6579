"""Testing the tests: the autograder cells accept every correct answer and reject every known mistake.

Each autograder-test cell of the source notebook (hidden part included) runs
in-process against the solution with one variant's cells swapped in.
"""

import warnings

import numpy as np
import pytest

from autograder.variants.assignment1 import CORRECT, MISTAKES
from conftest import SOURCE_NB
from notebook_harness import grade_in_process, namespace_with, run_cell


def test_source_solution_earns_full_marks_with_no_stderr():
    results = grade_in_process(SOURCE_NB, {})
    assert len(results) == 7
    for grade_id, (score, points, out, err) in results.items():
        assert err == "", f"{grade_id} wrote to stderr: {err}"
        assert score == points, f"{grade_id}: {score}/{points}\n{out}"
        assert "✗" not in out


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_variant_earns_full_marks(name):
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # warnings must be shown, then silenced by the grader, not hidden here
        results = grade_in_process(SOURCE_NB, CORRECT[name].cells)
    for grade_id, (score, points, out, err) in results.items():
        assert err == "", f"{name}: {grade_id} wrote to stderr (nbgrader would give 0): {err}"
        assert score == points, f"{name}: {grade_id} scored {score}/{points}\n{out}"


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_mistake_loses_points_exactly_where_it_breaks(name):
    variant = MISTAKES[name]
    results = grade_in_process(SOURCE_NB, variant.cells)
    for grade_id, (score, points, out, err) in results.items():
        if grade_id in variant.breaks:
            assert score < points, f"{name} should lose points in {grade_id} but scored {score}/{points}\n{out}"
            assert "✗" in out or err, "a lost point must come with a reason"
        else:
            assert err == "", f"{name}: {grade_id} wrote to stderr: {err}"
            assert score == points, f"{name} must not be charged in {grade_id}: {score}/{points}\n{out}"


def test_partial_credit_is_a_plain_float():
    results = grade_in_process(SOURCE_NB, MISTAKES["softmax_no_max_subtraction"].cells)
    score, points, out, _ = results["test_softmax"]
    assert (score, points) == (1.5, 2.0)
    assert "large logits stay finite" in out and "subtract each row's maximum" in out


def test_scaling_failure_names_the_factor():
    _, _, out, _ = grade_in_process(SOURCE_NB, MISTAKES["scale_by_d"].cells)["test_scaling"]
    assert "0.3536 times the correct ones" in out  # ÷8 instead of ÷√8 on d_k = 8: factor 1/√8


def test_untouched_release_scores_zero_everywhere():
    stub = "raise NotImplementedError()"
    answers = {
        "softmax": f"def softmax(x, axis=-1):\n    {stub}",
        "attention_scores": f"def attention_scores(Q, K, scale=True):\n    {stub}",
        "causal_mask": f"def causal_mask(T):\n    {stub}",
        "scaled_dot_product_attention": f"def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n    {stub}",
        "causal_self_attention": f"def causal_self_attention(x, W_q, W_k, W_v, scale=True):\n    {stub}",
        "attention_entropy": f"def attention_entropy(weights):\n    {stub}",
    }
    for grade_id, (score, *_rest) in grade_in_process(SOURCE_NB, answers).items():
        assert score == 0.0, grade_id


def test_a_later_step_is_graded_with_correct_earlier_steps():
    # softmax unfinished, everything else right: only the softmax cell loses points.
    results = grade_in_process(SOURCE_NB, {"softmax": "def softmax(x, axis=-1):\n    raise NotImplementedError()"})
    lost = {grade_id for grade_id, (score, points, *_r) in results.items() if score < points}
    assert lost == {"test_softmax"}


def test_learner_definitions_are_restored_after_grading():
    namespace = namespace_with({"softmax": "def softmax(x, axis=-1):\n    return 'mine'",
                                "scaled_dot_product_attention": (
                                    "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                    "    raise ValueError('no')")})
    mine = namespace["softmax"]
    run_cell("from autograder.checking import using_reference_pieces\n"
             "with using_reference_pieces(scaled_dot_product_attention, {'softmax': None}):\n"
             "    assert softmax is None\n", namespace)
    assert namespace["softmax"] is mine


def test_modifying_the_input_in_place_is_reported():
    in_place = "def softmax(x, axis=-1):\n    x -= x.max(axis=axis, keepdims=True)\n    np.exp(x, out=x)\n" \
               "    x /= x.sum(axis=axis, keepdims=True)\n    return x"
    score, points, out, _ = grade_in_process(SOURCE_NB, {"softmax": in_place})["test_softmax"]
    assert score < points
    assert "modified its input" in out


def test_an_object_that_claims_equality_is_rejected():
    cheat = ("class Anything(np.ndarray):\n    def __eq__(self, other):\n        return True\n"
             "def causal_mask(T):\n    return np.zeros((T, T), dtype=bool).view(Anything)")
    score, _, out, _ = grade_in_process(SOURCE_NB, {"causal_mask": cheat})["test_causal_mask"]
    assert score == 0.0 and "numpy.ndarray" in out


def lost_steps(overrides):
    return {grade_id for grade_id, (score, points, *_r) in grade_in_process(SOURCE_NB, overrides).items()
            if score < points}


def test_a_missing_function_is_charged_only_in_its_own_step():
    # a syntax error leaves causal_mask undefined; causal_self_attention calls it
    assert lost_steps({"causal_mask": "def causal_mask(T)\n    return np.tril(np.ones((T, T), bool))"}) == {
        "test_causal_mask"}
    renamed = "def make_causal_mask(T):\n    return np.tril(np.ones((T, T), bool))"
    assert lost_steps({"causal_mask": renamed}) == {"test_causal_mask"}


def test_a_correct_earlier_piece_with_an_extra_argument_is_kept():
    answers = {
        "softmax": "def softmax(x, axis=-1, mask=None):\n"
                   "    if mask is not None:\n        x = np.where(mask, x, -np.inf)\n"
                   "    e = np.exp(x - x.max(axis=axis, keepdims=True))\n    return e / e.sum(axis=axis, keepdims=True)",
        "scaled_dot_product_attention": "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                                        "    w = softmax(attention_scores(Q, K, scale), mask=mask)\n    return w @ V, w",
    }
    assert lost_steps(answers) == set()


def test_np_seterr_raise_in_the_notebook_costs_nothing():
    answers = {"softmax": "np.seterr(all='raise')\n\ndef softmax(x, axis=-1):\n"
                          "    e = np.exp(x - x.max(axis=axis, keepdims=True))\n    return e / e.sum(axis=axis, keepdims=True)"}
    try:
        assert lost_steps(answers) == set()
    finally:
        np.seterr(all="warn", under="ignore")


def test_returning_a_list_is_accepted_and_a_swapped_pair_is_named():
    as_list = {"scaled_dot_product_attention": "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
               "    s = attention_scores(Q, K, scale)\n    s = s if mask is None else np.where(mask, s, -np.inf)\n"
               "    w = softmax(s)\n    return [w @ V, w]"}
    assert lost_steps(as_list) == set()
    swapped = {"scaled_dot_product_attention": as_list["scaled_dot_product_attention"].replace("[w @ V, w]", "w, w @ V")}
    score, _, out, err = grade_in_process(SOURCE_NB, swapped)["test_scaled_dot_product_attention"]
    assert score == 0 and "returned (weights, output)" in out + err


def test_importing_the_reference_earns_nothing():
    cheat = {"softmax": "from autograder.reference import softmax"}
    score, _, out, _ = grade_in_process(SOURCE_NB, cheat)["test_softmax"]
    assert score == 0 and "the course's reference imported from autograder.reference" in out


def test_a_hanging_function_costs_only_its_own_step(monkeypatch):
    from autograder import checking

    from attention_lab import checks

    monkeypatch.setattr(checking, "CALL_SECONDS", 0.3)
    monkeypatch.setattr(checks, "CALL_SECONDS", 0.3)
    results = grade_in_process(SOURCE_NB, {"softmax": "def softmax(x, axis=-1):\n    while True:\n        pass"})
    lost = {grade_id for grade_id, (score, points, *_r) in results.items() if score < points}
    assert lost == {"test_softmax"}
    _, _, out, err = results["test_softmax"]
    assert "did not finish within 0.3 s" in out + err


def test_a_hanging_function_that_catches_the_interrupt_is_interrupted_again(monkeypatch):
    from autograder import checking

    from attention_lab import checks

    monkeypatch.setattr(checking, "CALL_SECONDS", 0.2)
    monkeypatch.setattr(checks, "CALL_SECONDS", 0.2)
    stubborn = ("def causal_mask(T):\n    while True:\n        try:\n            while True:\n                pass\n"
                "        except Exception:\n            break\n    while True:\n        pass")
    score, _, out, err = grade_in_process(SOURCE_NB, {"causal_mask": stubborn})["test_causal_mask"]
    assert score == 0 and "did not finish" in out + err
