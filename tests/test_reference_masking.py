"""Assignment 4's reference: hand-worked masks and weights, fully masked rows, dtypes, and its error messages."""

import warnings

import numpy as np
import pytest

from autograder.assignments.a04_masking.reference import causal_padding_mask, masked_attention, masked_softmax, padding_mask


@pytest.fixture(autouse=True)
def numpy_warnings_are_errors():
    """The spec says "no warning": make any NumPy warning (with NumPy's default error handling) fail the test."""
    with warnings.catch_warnings(), np.errstate(over="warn", divide="warn", invalid="warn", under="ignore"):
        warnings.simplefilter("error")
        yield


def test_padding_mask_hand_worked_and_broadcasts_over_queries():
    mask = padding_mask([3, 1, 0], 4)
    assert mask.shape == (3, 1, 4) and mask.dtype == np.bool_
    np.testing.assert_array_equal(mask[:, 0], [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    scores = np.zeros((3, 5, 4))  # T_q = 5 queries against T = 4 keys
    blocked = np.broadcast_to(~mask, scores.shape)
    assert blocked[0, :, 3].all() and not blocked[0, :, :3].any()  # the padded key, in every query row


def test_padding_mask_accepts_lists_numpy_ints_and_integral_floats():
    np.testing.assert_array_equal(padding_mask(np.array([2], dtype=np.int32), np.int64(3)), [[[1, 1, 0]]])
    np.testing.assert_array_equal(padding_mask([3.0], 3), [[[1, 1, 1]]])


@pytest.mark.parametrize("lengths, T, words", [
    ([4, 1], 3, "between 0 and T = 3; received lengths [4, 1]"),
    ([-1, 2], 3, "between 0 and T = 3; received lengths [-1, 2]"),
    ([[1, 2]], 3, "lengths must have shape (B,)"),
    ([], 3, "received shape (0,)"),
    ([1.5], 3, "lengths must hold integers"),
    (["a"], 3, "lengths must hold integers"),
    ([1], 0, "T must be an integer >= 1; received 0"),
    ([1], 2.0, "T must be an integer >= 1; received 2.0"),
])
def test_padding_mask_bad_input_names_the_argument(lengths, T, words):
    with pytest.raises(ValueError) as error:
        padding_mask(lengths, T)
    assert words in str(error.value)


def test_causal_padding_mask_hand_worked():
    mask = causal_padding_mask([2, 4, 0], 4)
    assert mask.shape == (3, 4, 4) and mask.dtype == np.bool_
    np.testing.assert_array_equal(mask[0], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]])
    np.testing.assert_array_equal(mask[1], np.tril(np.ones((4, 4))))
    assert not mask[2].any()  # an empty sequence: every row fully masked
    with pytest.raises(ValueError, match="between 0 and T = 4"):
        causal_padding_mask([5], 4)


def test_masked_softmax_hand_worked_with_a_fully_masked_row():
    scores = np.array([[0.0, 0.0, 5.0], [1.0, 2.0, 3.0], [0.3, -1.2, 9.0]])
    mask = np.array([[True, True, False], [False, False, False], [True, True, False]])
    w = masked_softmax(scores, mask)
    np.testing.assert_allclose(w, [[0.5, 0.5, 0.0], [0.0, 0.0, 0.0], [0.81757448, 0.18242552, 0.0]], rtol=1e-7)
    assert w[1].tolist() == [0.0, 0.0, 0.0] and w[0, 2] == 0.0 and w[2, 2] == 0.0  # exact zeros


def test_masked_softmax_equals_plain_softmax_when_everything_is_allowed():
    x = np.random.default_rng(0).normal(0, 3, (2, 3, 5))
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(masked_softmax(x, np.ones(x.shape, dtype=bool)), e / e.sum(-1, keepdims=True),
                               rtol=1e-12)


def test_masked_softmax_axis_and_broadcast_mask():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 3))
    mask = np.array([[True, False, True], [True, False, False], [False, False, True], [True, False, True]])
    w = masked_softmax(x, mask, axis=0)
    np.testing.assert_allclose(w.sum(axis=0), [1.0, 0.0, 1.0])  # column 1 has no allowed entry
    np.testing.assert_allclose(w, masked_softmax(x.T, mask.T).T, rtol=1e-12)
    padding = padding_mask([3, 0], 3)  # (B, 1, T) against (B, T_q, T)
    w = masked_softmax(rng.normal(size=(2, 4, 3)), padding)
    np.testing.assert_allclose(w[0].sum(-1), 1.0)
    assert not w[1].any()


@pytest.mark.parametrize("dtype, top", [(np.float16, 1000.0), (np.float32, 100.0), (np.float64, 1e4)])
def test_masked_softmax_keeps_the_dtype_and_survives_large_logits(dtype, top):
    scores = np.array([[top, top - 1.0, -top], [-20.0, -30.0, 5.0]], dtype=dtype)
    mask = np.array([[True, True, True], [False, False, False]])
    w = masked_softmax(scores, mask)
    assert w.dtype == dtype
    np.testing.assert_allclose(w.astype(float), [[0.73105858, 0.26894142, 0.0], [0.0, 0.0, 0.0]], atol=1e-3)


def test_masked_softmax_treats_minus_inf_scores_as_blocked_and_leaves_inputs_alone():
    scores = np.array([[-np.inf, 1.0, 1.0], [-np.inf, -np.inf, -np.inf]])
    before = scores.copy()
    w = masked_softmax(scores, np.ones((2, 3), dtype=bool))
    np.testing.assert_array_equal(w, [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(scores, before)


@pytest.mark.parametrize("scores, mask, kwargs, words", [
    (np.zeros((2, 3)), np.ones((3, 2), dtype=bool), {}, "mask must be broadcastable to the scores' shape"),
    (np.zeros((2, 3)), np.ones((2, 3)), {}, "mask must be a boolean array"),
    (np.array([[np.nan, 0.0]]), np.ones((1, 2), dtype=bool), {}, "must not contain NaN or +inf"),
    (np.array([[np.inf, 0.0]]), np.ones((1, 2), dtype=bool), {}, "must not contain NaN or +inf"),
    (np.zeros((2, 3)), np.ones((2, 3), dtype=bool), {"axis": 2}, "axis must be in [-2, 1]"),
    (np.float64(1.0), np.True_, {}, "scores must have shape"),
])
def test_masked_softmax_bad_input(scores, mask, kwargs, words):
    with pytest.raises(ValueError) as error:
        masked_softmax(scores, mask, **kwargs)
    assert words in str(error.value)


def test_masked_attention_cross_attention_hand_worked():
    Q = np.array([[2.0, 0, 0, 0], [1.0, 1, 1, 1]])
    K = np.array([[2.0, 0, 0, 0], [0.0, 0, 0, 0], [0.0, 2, 0, 0]])  # scores / √4: (2, 0, 0) and (1, 0, 1)
    V = np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]])
    mask = np.array([[True, True, False], [False, False, False]])
    output, weights = masked_attention(Q, K, V, mask)
    np.testing.assert_allclose(weights, [[0.88079708, 0.11920292, 0.0], [0.0, 0.0, 0.0]], rtol=1e-7)
    np.testing.assert_allclose(output, [[0.88079708, 0.11920292], [0.0, 0.0]], rtol=1e-7)
    assert weights.shape == (2, 3)  # (T_q, T_k), not (T_k, T_q)


def test_masked_attention_padding_batches_and_heads():
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(2, 3, 6, 8)), rng.normal(size=(2, 3, 6, 5))
    mask = padding_mask([4, 0], 6)[:, None]  # (B, 1, 1, T_k)
    output, weights = masked_attention(Q, K, V, mask)
    assert output.shape == (2, 3, 4, 5) and weights.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(weights[0].sum(-1), 1.0)
    assert not weights[0, ..., 4:].any() and not weights[1].any() and not output[1].any()
    np.testing.assert_allclose(output, weights @ V, rtol=1e-12)


def test_masked_attention_padded_key_never_changes_the_output():
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(1, 3, 4)), rng.normal(size=(1, 5, 4)), rng.normal(size=(1, 5, 2))
    mask = padding_mask([3], 5)
    out, _ = masked_attention(Q, K, V, mask)
    K2, V2 = K.copy(), V.copy()
    K2[0, 3:], V2[0, 3:] = 100.0, -100.0  # change only the padding
    np.testing.assert_allclose(masked_attention(Q, K2, V2, mask)[0], out, rtol=1e-12)


@pytest.mark.parametrize("args, words", [
    ((np.ones((2, 4)), np.ones((3, 5)), np.ones((3, 2)), np.ones((2, 3), dtype=bool)), "must both equal d_k"),
    ((np.ones((2, 4)), np.ones((3, 4)), np.ones((5, 2)), np.ones((2, 3), dtype=bool)), "must both equal T_k"),
    ((np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)), np.ones((3, 2), dtype=bool)), "received shape (3, 2)"),
    ((np.ones((2, 2, 4)), np.ones((2, 3, 4)), np.ones((3, 3, 2)), np.ones((2, 3), dtype=bool)),
     "leading (batch) dimensions of V"),
])
def test_masked_attention_bad_input(args, words):
    with pytest.raises(ValueError) as error:
        masked_attention(*args)
    assert words in str(error.value)
