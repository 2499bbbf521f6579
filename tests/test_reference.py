"""The reference solution: values worked out by hand, properties, and its error messages."""

import math

import numpy as np
import pytest

from autograder.assignments.a01_attention.reference import (
    attention_entropy,
    attention_scores,
    causal_mask,
    causal_self_attention,
    scaled_dot_product_attention,
    softmax,
)


def test_softmax_values_and_stability():
    np.testing.assert_allclose(softmax(np.array([1000.0, 1001.0, 1002.0])), [0.09003057, 0.24472847, 0.66524096],
                               rtol=1e-7)
    p = softmax(np.array([[-1e4, 0.0, 1e4]]))
    assert np.all(np.isfinite(p)) and p[0, 2] == 1.0
    p32 = softmax(np.array([100.0, 0.0], dtype=np.float32))
    assert p32.dtype == np.float32 and np.allclose(p32, [1.0, 0.0])
    assert softmax(np.array([0.3, -1.2, -np.inf]))[2] == 0.0


def test_softmax_axis_and_shift_invariance():
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    for axis in (0, 1, -1):
        np.testing.assert_allclose(softmax(x, axis=axis).sum(axis=axis), 1.0)
    np.testing.assert_allclose(softmax(x + 7.5), softmax(x))


def test_scores_hand_worked_and_scaled():
    Q = np.array([[2.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    K = np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
    np.testing.assert_array_equal(attention_scores(Q, K, scale=False), [[4, 0, 0], [2, 0, 2]])
    np.testing.assert_array_equal(attention_scores(Q, K), [[2, 0, 0], [1, 0, 1]])


def test_scores_broadcast_batch_dimensions():
    rng = np.random.default_rng(1)
    Q, K = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(3, 6, 5))
    S = attention_scores(Q, K)
    assert S.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(S[1, 2], Q[1, 2] @ K[2].T / math.sqrt(5))


def test_causal_mask_convention():
    np.testing.assert_array_equal(causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert causal_mask(1).dtype == np.bool_ and causal_mask(1).tolist() == [[True]]


def test_attention_hand_worked_cases():
    V = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    out, w = scaled_dot_product_attention(np.zeros((3, 2)), np.zeros((3, 2)), V, mask=causal_mask(3))
    np.testing.assert_allclose(w, [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(out, [[1, 0], [0.5, 0.5], [2 / 3, 2 / 3]])
    # scores (4, 0) at d_k = 4 → softmax(2, 0) (shared/notes/mistakes.md, M5)
    _, w = scaled_dot_product_attention(np.array([[2.0, 0, 0, 0]]), np.array([[2.0, 0, 0, 0], [0, 0, 0, 0]]),
                                        np.eye(2))
    np.testing.assert_allclose(w, [[0.88079708, 0.11920292]])
    # blocked key gets exactly 0 even with a large score (M7)
    _, w = scaled_dot_product_attention(np.array([[1.0]]), np.array([[-2.0], [7.0]]), np.eye(2),
                                        mask=np.array([[True, False]]))
    np.testing.assert_array_equal(w, [[1.0, 0.0]])


def test_attention_cross_shapes_and_rows():
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 7, 6)), rng.normal(size=(2, 7, 3))
    out, w = scaled_dot_product_attention(Q, K, V)
    assert out.shape == (2, 4, 3) and w.shape == (2, 4, 7)
    np.testing.assert_allclose(w.sum(-1), 1.0)
    np.testing.assert_allclose(out, w @ V)


def test_causal_self_attention_is_causal():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 8))
    W = [rng.normal(size=(8, 4)) for _ in range(3)]
    out, w = causal_self_attention(x, *W)
    assert out.shape == (6, 4) and np.all(np.triu(w, 1) == 0)
    x2 = x.copy()
    x2[-1] += 5
    out2, _ = causal_self_attention(x2, *W)
    np.testing.assert_array_equal(out[:-1], out2[:-1])
    assert not np.allclose(out[-1], out2[-1])


def test_entropy_in_nats_with_zero_rows():
    w = np.array([[0.25] * 4, [1.0, 0, 0, 0], [0.5, 0.5, 0, 0]])
    np.testing.assert_allclose(attention_entropy(w), [math.log(4), 0.0, math.log(2)])
    assert attention_entropy(np.full((2, 3, 5), 0.2)).shape == (2, 3)


@pytest.mark.parametrize("call, words", [
    (lambda: softmax(np.float64(3.0)), ["x", "received shape ()"]),
    (lambda: softmax(np.ones(3), axis=2), ["axis", "received 2"]),
    (lambda: attention_scores(np.ones(4), np.ones((3, 4))), ["Q", "(..., T_q, d_k)", "received shape (4,)"]),
    (lambda: attention_scores(np.ones((2, 4)), np.ones((3, 5))), ["d_k", "Q.shape[-1]=4", "K.shape[-1]=5"]),
    (lambda: attention_scores(np.ones((2, 2, 4)), np.ones((3, 3, 4))), ["leading (batch) dimensions", "(2,)", "(3,)"]),
    (lambda: causal_mask(0), ["T", ">= 1", "received 0"]),
    (lambda: causal_mask(2.5), ["T", "integer", "2.5"]),
    (lambda: scaled_dot_product_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((5, 2))),
     ["T_k", "K.shape[-2]=3", "V.shape[-2]=5"]),
    (lambda: scaled_dot_product_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)), mask=np.ones((3, 3), bool)),
     ["mask", "broadcastable", "(2, 3)", "received shape (3, 3)"]),
    (lambda: scaled_dot_product_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)), mask=np.ones((2, 3))),
     ["mask", "boolean", "float64"]),
    (lambda: scaled_dot_product_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)),
                                          mask=np.array([[True, False, False], [False, False, False]])),
     ["mask", "every key", "row"]),
    (lambda: causal_self_attention(np.ones((3, 4, 1)), *[np.ones((4, 2))] * 3), ["x", "(T, d_model)", "(3, 4, 1)"]),
    (lambda: causal_self_attention(np.ones((3, 4)), np.ones((5, 2)), np.ones((4, 2)), np.ones((4, 2))),
     ["W_q", "d_model=4", "received shape (5, 2)"]),
    (lambda: causal_self_attention(np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 2))),
     ["d_head", "W_k.shape[1]=3"]),
    (lambda: attention_entropy(np.ones(3)), ["weights", "(..., T_q, T_k)", "received shape (3,)"]),
    (lambda: attention_entropy(np.array([[0.5, -0.5]])), ["weights", "non-negative"]),
    (lambda: attention_entropy(np.array([[5.0, 5.0]])), ["weights", "sum to 1", "10"]),
    (lambda: attention_entropy(np.array([[np.nan, 1.0]])), ["weights", "finite"]),
    (lambda: softmax(np.ones(3), axis=None), ["axis", "integer", "None"]),
    (lambda: softmax(np.ones((2, 3)), axis=True), ["axis", "integer", "True"]),
    (lambda: softmax(np.zeros((3, 0))), ["x", "at least one entry", "(3, 0)"]),
    (lambda: softmax(np.array([[-np.inf, -np.inf], [0.0, 1.0]])), ["x", "all -inf"]),
    (lambda: softmax(np.ma.masked_array([1.0, 2.0], mask=[0, 1])), ["x", "MaskedArray", "mask"]),
    (lambda: attention_scores(np.ones((2, 0)), np.ones((3, 0))), ["Q", "d_k >= 1", "(2, 0)"]),
    (lambda: attention_scores(np.ones((2, 4)), np.ones((3, 4)), scale=None), ["scale", "True or False", "None"]),
    (lambda: scaled_dot_product_attention(np.ones((2, 3, 4)), np.ones((2, 5, 4)), np.ones((3, 5, 2))),
     ["V", "batch", "(3,)", "(2,)"]),
    (lambda: causal_self_attention(np.ones((0, 6)), *[np.ones((6, 2))] * 3), ["x", "T >= 1", "(0, 6)"]),
])
def test_bad_input_raises_value_error_naming_argument_and_shapes(call, words):
    with pytest.raises(ValueError) as error:
        call()
    for word in words:
        assert word in str(error.value), f"{word!r} not in {error.value}"


def test_float32_stays_float32_with_and_without_scaling():
    Q = np.ones((2, 4), dtype=np.float32)
    assert attention_scores(Q, Q).dtype == np.float32 and attention_scores(Q, Q, scale=False).dtype == np.float32
    out, w = scaled_dot_product_attention(Q, Q, Q)
    assert out.dtype == w.dtype == np.float32


def test_inputs_are_not_modified():
    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    copies = [a.copy() for a in (Q, K, V)]
    scaled_dot_product_attention(Q, K, V)
    for original, copy in zip((Q, K, V), copies):
        np.testing.assert_array_equal(original, copy)
