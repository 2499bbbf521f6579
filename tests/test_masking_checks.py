"""Assignment 4's visible self-checks and hidden cases: what they accept, what they name, what they avoid."""

import contextlib
import io

import numpy as np
import pytest

from attention_lab.a04_masking import checks as mc
from attention_lab.core.worked import SelfCheckFailed
from autograder.grader.answers import answer_namespace
from autograder.assignments.a04_masking.spec import ASSIGNMENT as A

CHECKS = {"padding_mask": mc.check_padding_mask, "causal_padding_mask": mc.check_causal_padding_mask,
          "masked_softmax": mc.check_masked_softmax, "masked_attention": mc.check_masked_attention}


def functions(cells=None):
    return answer_namespace(A.name, A.notebook, dict(cells or {}))


def run_check(name, function):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        CHECKS[name](function)
    return out.getvalue()


@pytest.mark.parametrize("variant", [None, *A.correct])
def test_every_check_passes_the_solution_and_every_correct_variant(variant):
    namespace = functions(A.correct[variant].cells if variant else None)
    for name in CHECKS:
        printed = run_check(name, namespace[name])
        assert printed.count("✓") >= 2 and "✗" not in printed


@pytest.mark.parametrize("key", list(A.function_mistakes))
def test_each_mistake_fails_its_own_check_and_is_named(key):
    mistake = A.mistakes[key]
    (function,) = [name for name in CHECKS if any(f"def {name}(" in source for source in mistake.cells.values())]
    with pytest.raises(SelfCheckFailed) as failure:
        run_check(function, functions(mistake.cells)[function])
    assert mistake.description in str(failure.value) and mistake.hint in str(failure.value)


def with_source(name, source):
    namespace = functions()
    exec(source, namespace)
    return namespace[name]


def test_a_correct_softmax_that_warns_is_told_so():
    warns = with_source("masked_softmax", '''
def masked_softmax(scores, mask, axis=-1):
    x = np.where(mask, scores, -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=axis, keepdims=True)
    return np.where(total > 0, e / total, 0.0)     # divides 0 by 0 before choosing
''')
    with pytest.raises(SelfCheckFailed) as failure:
        run_check("masked_softmax", warns)
    assert "invalid value encountered in divide" in str(failure.value)
    assert "without any warning" in str(failure.value)


def test_a_softmax_that_returns_float64_for_float16_scores_is_told_to_keep_the_dtype():
    upcasts = with_source("masked_softmax", '''
def masked_softmax(scores, mask, axis=-1):
    x = np.where(mask, np.asarray(scores, dtype=np.float64), -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)
''')
    with pytest.raises(SelfCheckFailed, match="wrong dtype for the weights: expected float16, the dtype of the input, "
                                              "got float64"):
        run_check("masked_softmax", upcasts)


def test_a_softmax_that_modifies_its_scores_is_told_so():
    scribbles = with_source("masked_softmax", '''
def masked_softmax(scores, mask, axis=-1):
    scores[~np.broadcast_to(mask, scores.shape)] = -np.inf
    top = np.max(scores, axis=axis, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, 1)
''')
    with pytest.raises(SelfCheckFailed, match="masked_softmax modified its argument scores in place"):
        run_check("masked_softmax", scribbles)


def test_an_unwritten_function_says_so():
    with pytest.raises(SelfCheckFailed, match="^padding_mask is not answered yet: write its code in place of"):
        run_check("padding_mask", with_source("padding_mask", "def padding_mask(lengths, T):\n"
                                                              "    raise NotImplementedError()"))


def test_blocking_padded_query_rows_as_well_is_named_as_the_query_axis_mistake():
    rows_and_keys = with_source("causal_padding_mask", '''
def causal_padding_mask(lengths, T):
    real = np.arange(T) < np.asarray(lengths)[:, None]
    return real[:, :, None] & real[:, None, :] & np.tril(np.ones((T, T), dtype=bool))
''')
    with pytest.raises(SelfCheckFailed) as failure:
        run_check("causal_padding_mask", rows_and_keys)
    assert A.mistakes["padding_blocks_query_rows"].hint in str(failure.value)


# ---- the hidden cases avoid inputs that hide mistakes ------------------------------------------------

def cases(grade_id):
    return list(A.step(grade_id).cases())


def test_mask_cases_have_batches_whose_size_differs_from_T_and_lengths_0_and_T():
    for grade_id in ("test_padding_mask", "test_causal_padding_mask"):
        shapes = [(len(case.args[0]), case.args[1]) for case in cases(grade_id) if case.raises is None]
        assert any(B != T and B > 1 for B, T in shapes)
        lengths = [(case.args[0], case.args[1]) for case in cases(grade_id) if case.raises is None]
        assert any(0 in ls for ls, _ in lengths) and any(T in ls for ls, T in lengths)
        assert any(np.any((ls > 0) & (ls < T)) for ls, T in lengths)


def test_every_masked_softmax_case_forbids_warnings_and_has_a_fully_masked_slice_but_one():
    softmax_cases = cases("test_masked_softmax")
    assert all(case.no_warnings for case in softmax_cases)
    empty = [bool(np.any(~np.broadcast_to(case.args[1], case.args[0].shape).any(axis=case.kwargs.get("axis", -1))))
             for case in softmax_cases]
    assert empty.count(False) == 1 and empty[0] is False  # the first case: partial masks only


@pytest.mark.parametrize("dtype, threshold", [(np.float32, 88.72), (np.float16, 11.09)])
def test_large_logit_cases_overflow_a_naive_exp_but_no_allowed_weight_underflows(dtype, threshold):
    (case,) = [c for c in cases("test_masked_softmax") if c.args[0].dtype == dtype]
    scores, mask = case.args[0].astype(np.float64), case.args[1]
    has_key = mask.any(axis=-1)
    allowed_top = np.max(np.where(mask, scores, -np.inf), axis=-1, keepdims=True)
    assert np.max(np.abs(scores[has_key])) > threshold
    spread = np.where(mask, allowed_top - scores, 0.0)[has_key]
    assert spread.max() < 13  # e^-13 is far above the smallest float16 and float32
    blocked_above = ~mask & (scores > allowed_top)
    assert not blocked_above[has_key].any()


def test_the_float16_case_has_fully_masked_rows_above_and_below_minus_16():
    (case,) = [c for c in cases("test_masked_softmax") if c.args[0].dtype == np.float16]
    scores, mask = case.args
    empty_rows = scores[~mask.any(axis=-1)].astype(float)
    assert any(row.min() < -16 for row in empty_rows) and any(row.min() > -16 for row in empty_rows)
    assert case.rtol <= 5e-3 and case.atol <= 1e-3


def test_attention_cases_are_cross_attention_with_fully_masked_queries():
    attention_cases = cases("test_masked_attention")
    fully_masked = 0
    for case in (c for c in attention_cases if c.raises is None):
        Q, K, V, mask = case.args
        assert V.shape[-1] != K.shape[-1]  # d_v ≠ d_k
        scores_shape = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2]) + (Q.shape[-2], K.shape[-2])
        fully_masked += not np.broadcast_to(mask, scores_shape).any(axis=-1).all()
    assert sum(case.args[0].shape[-2] != case.args[1].shape[-2] for case in attention_cases) >= 3  # T_q ≠ T_k
    assert fully_masked >= 2
    assert [case.raises for case in attention_cases].count("ValueError") == 1


def test_example_students_have_the_course_names_and_one_is_correct():
    names = {student.split("-")[0] for student in A.example_students}
    assert names == {"uma", "vic", "wes", "xia"}
    assert sum(not variant.breaks for variant in A.example_students.values()) == 1


# ---- plain-words diagnoses for wrong answers that match no known mistake ------------------------------

UNKNOWN_MISTAKES = {
    "padding_mask": '''
def padding_mask(lengths, T):
    lengths = np.asarray(lengths)
    if np.any(lengths < 0) or np.any(lengths > T):
        raise ValueError("bad lengths")
    return (np.arange(T) < lengths[:, None] + 2)[:, None, :]
''',
    "masked_softmax": '''
def masked_softmax(scores, mask, axis=-1):
    x = np.where(mask, scores, -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(top), top, 0))
    total = np.sum(e, axis=axis, keepdims=True)
    return np.where(np.any(mask, axis=axis, keepdims=True), e / np.where(total > 0, total, 1), 0.5)
''',
}


def test_wrong_answers_that_match_no_known_mistake_get_plain_words_properties():
    from autograder.grader.in_process import grade_answers

    results = grade_answers(A, UNKNOWN_MISTAKES)
    padding = "\n".join(results["test_padding_mask"].lines)
    assert "A padded key is allowed: sequence 0 has length 5, yet key 5 is True." in padding
    assert not results["test_padding_mask"].named
    softmax = "\n".join(results["test_masked_softmax"].lines)
    assert "Rows with no allowed key should be all 0." in softmax
    assert "Slices along axis -2 with no allowed key should be all 0." in softmax
    assert "A blocked entry has weight 0.5" in softmax


def test_diagnoses_name_uniform_rows_a_flat_mask_and_transposed_weights():
    softmax_step, attention_step = A.step("test_masked_softmax"), A.step("test_masked_attention")
    case = cases("test_masked_softmax")[1]  # causal padding mask with an empty sequence
    expected = A.reference["masked_softmax"](*case.args)
    uniform = np.where(np.asarray(case.args[1]).any(-1, keepdims=True), expected, 1 / expected.shape[-1])
    assert any("uniform (each weight 1/5)" in line for line in softmax_step.diagnose(case, uniform, expected))
    mask_case = cases("test_padding_mask")[0]
    mask = A.reference["padding_mask"](*mask_case.args)
    notes = A.step("test_padding_mask").diagnose(mask_case, mask[:, 0], mask)
    assert notes and "(B, T)" in notes[0] and "(B, 1, T)" in notes[0]
    notes = A.step("test_padding_mask").diagnose(mask_case, np.swapaxes(mask, -1, -2), mask)
    assert notes and "query rows" in notes[0]
    cross = cases("test_masked_attention")[0]
    output, weights = A.reference["masked_attention"](*cross.args)
    notes = attention_step.diagnose(cross, (output, weights.T.copy()), (output, weights))
    assert len(notes) == 1 and "(..., T_k, T_q): rows should be queries and columns keys" in notes[0]
