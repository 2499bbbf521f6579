"""The KV-cache reference (assignment 5): hand-worked values, properties and its error messages."""

import numpy as np
import pytest

from autograder.assignments.a01_attention.reference import causal_mask as square_causal_mask
from autograder.assignments.a01_attention.reference import causal_self_attention
from autograder.assignments.a05_kv_cache.reference import (
    attend_with_cache,
    attention_cost_per_token,
    causal_mask,
    decode_incrementally,
)


def test_causal_mask_is_aligned_bottom_right():
    np.testing.assert_array_equal(causal_mask(2, 4), [[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(causal_mask(1, 5), [[1, 1, 1, 1, 1]])  # one new token sees the whole cache
    np.testing.assert_array_equal(causal_mask(3, 5), [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    assert causal_mask(3, 5).dtype == np.bool_


@pytest.mark.parametrize("T", [1, 2, 5, 9])
def test_square_case_equals_assignment_1(T):
    np.testing.assert_array_equal(causal_mask(T), square_causal_mask(T))
    np.testing.assert_array_equal(causal_mask(T, T), square_causal_mask(T))


def test_last_rows_of_the_square_mask():
    """The (T_q, T_k) mask is the bottom T_q rows of the square (T_k, T_k) mask."""
    for T_q, T_k in [(1, 7), (3, 7), (7, 7)]:
        np.testing.assert_array_equal(causal_mask(T_q, T_k), square_causal_mask(T_k)[T_k - T_q:])


def test_one_token_over_a_cache_hand_worked():
    # d_head = 4, W = I: q = (2, 0, 0, 0) meets cached key 0 and its own key (2, 0, 0, 0):
    # scores (0, 4) / √4 = (0, 2) → weights (0.1192, 0.8808) (notes M5)
    eye = np.eye(4)
    K_cache, V_cache = np.zeros((1, 4)), np.array([[1.0, 0, 0, 0]])
    out, K, V = attend_with_cache(np.array([[2.0, 0, 0, 0]]), K_cache, V_cache, eye, eye, eye)
    w = np.exp([0.0, 2.0]) / np.exp([0.0, 2.0]).sum()
    np.testing.assert_allclose(out, [[w[0] * 1 + w[1] * 2, 0, 0, 0]], rtol=1e-14)
    np.testing.assert_array_equal(K, [[0, 0, 0, 0], [2, 0, 0, 0]])
    np.testing.assert_array_equal(V, [[1, 0, 0, 0], [2, 0, 0, 0]])


def test_a_chunk_is_masked_bottom_right_hand_worked():
    # W_q = 0 makes every allowed score 0, so each row averages the values it may see.
    x_new, zero, eye = np.eye(2), np.zeros((2, 2)), np.eye(2)
    out, K, V = attend_with_cache(x_new, np.zeros((0, 2)), np.zeros((0, 2)), zero, eye, eye)
    np.testing.assert_allclose(out, [[1, 0], [0.5, 0.5]], rtol=1e-15)
    assert K.shape == V.shape == (2, 2)
    out, K, V = attend_with_cache(x_new, np.zeros((1, 2)), np.ones((1, 2)), zero, eye, eye)
    np.testing.assert_allclose(out, [[1, 0.5], [2 / 3, 2 / 3]], rtol=1e-15)
    np.testing.assert_array_equal(V, [[1, 1], [1, 0], [0, 1]])


def test_cache_grows_by_appending_and_inputs_stay_intact():
    rng = np.random.default_rng(0)
    x_new, K_cache, V_cache = rng.normal(size=(3, 6)), rng.normal(size=(4, 2)), rng.normal(size=(4, 2))
    W_q, W_k, W_v = (rng.normal(size=(6, 2)) for _ in range(3))
    copies = [a.copy() for a in (x_new, K_cache, V_cache)]
    out, K, V = attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v)
    assert out.shape == (3, 2) and K.shape == V.shape == (7, 2)
    np.testing.assert_array_equal(K[:4], K_cache)
    np.testing.assert_array_equal(V[:4], V_cache)
    np.testing.assert_allclose(K[4:], x_new @ W_k, rtol=1e-15)
    np.testing.assert_allclose(V[4:], x_new @ W_v, rtol=1e-15)
    for original, copy in zip((x_new, K_cache, V_cache), copies):
        np.testing.assert_array_equal(original, copy)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 11, 40])
def test_decoding_with_a_cache_equals_full_causal_self_attention(chunk):
    rng = np.random.default_rng(chunk)
    T, d_model, d_head = 11, 8, 4
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v = (rng.normal(size=(d_model, d_head)) for _ in range(3))
    full, _ = causal_self_attention(x, W_q, W_k, W_v)
    decoded = decode_incrementally(x, W_q, W_k, W_v, chunk=chunk)
    assert decoded.shape == (T, d_head)
    np.testing.assert_allclose(decoded, full, rtol=0, atol=1e-12)


def test_each_decoded_row_depends_only_on_the_past():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 4))
    W_q, W_k, W_v = (rng.normal(size=(4, 3)) for _ in range(3))
    changed = x.copy()
    changed[4] += 1.0
    a, b = decode_incrementally(x, W_q, W_k, W_v), decode_incrementally(changed, W_q, W_k, W_v, chunk=2)
    np.testing.assert_allclose(a[:4], b[:4], rtol=0, atol=1e-12)
    assert not np.allclose(a[4:], b[4:])


def test_cost_model_hand_worked():
    # cached: 3·64·16 (project one token) + 10·16 (scores) + 10·16 (weighted sum)
    assert attention_cost_per_token(10, 64, 16, cached=True) == 3072 + 160 + 160
    # recompute: 3·10·64·16 (project ten tokens) + 10²·16 (Q Kᵀ) + 10²·16 (weights @ V)
    assert attention_cost_per_token(10, 64, 16, cached=False) == 30720 + 1600 + 1600
    assert type(attention_cost_per_token(3, 4, 2, True)) is int


def test_cost_model_shape_of_the_curves():
    d_model, d_head = 32, 8
    assert attention_cost_per_token(1, d_model, d_head, True) == attention_cost_per_token(1, d_model, d_head, False)
    cached = np.array([attention_cost_per_token(t, d_model, d_head, True) for t in range(1, 50)])
    full = np.array([attention_cost_per_token(t, d_model, d_head, False) for t in range(1, 50)])
    assert np.all(np.diff(cached) == 2 * d_head)  # linear: each extra key costs one score and one value row
    assert np.all(np.diff(full, 2) == 4 * d_head)  # quadratic: second difference of 2·t²·d_head
    assert np.all(full[1:] > cached[1:])


@pytest.mark.parametrize("call, words", [
    (lambda: causal_mask(5, 3), ["T_q must be <= T_k", "T_q=5", "T_k=3"]),
    (lambda: causal_mask(0), ["T_q must be an integer >= 1", "0"]),
    (lambda: causal_mask(2, 2.0), ["T_k must be an integer >= 1", "2.0"]),
    (lambda: attend_with_cache(np.ones(4), np.zeros((0, 2)), np.zeros((0, 2)), *[np.ones((4, 2))] * 3),
     ["x_new must have shape (T, d_model)", "(4,)"]),
    (lambda: attend_with_cache(np.ones((1, 4)), np.zeros((0, 3)), np.zeros((0, 2)), *[np.ones((4, 2))] * 3),
     ["K_cache must have shape (T_past, d_head)", "d_head=2", "(0, 3)"]),
    (lambda: attend_with_cache(np.ones((1, 4)), np.zeros((2, 2)), np.zeros((3, 2)), *[np.ones((4, 2))] * 3),
     ["T_past", "K_cache.shape[0]=2", "V_cache.shape[0]=3"]),
    (lambda: attend_with_cache(np.ones((1, 4)), np.zeros((0, 2)), np.zeros((0, 2)), np.ones((5, 2)),
                               np.ones((4, 2)), np.ones((4, 2))),
     ["W_q must have shape (d_model, d_head)", "d_model=4", "(5, 2)"]),
    (lambda: attend_with_cache(np.ones((1, 4)), np.zeros((0, 2)), np.zeros((0, 2)), np.ones((4, 2)),
                               np.ones((4, 3)), np.ones((4, 2))),
     ["d_head", "W_k.shape[1]=3"]),
    (lambda: decode_incrementally(np.ones((3, 4)), *[np.ones((4, 2))] * 3, chunk=0),
     ["chunk must be an integer >= 1", "0"]),
    (lambda: decode_incrementally(np.ones((0, 4)), *[np.ones((4, 2))] * 3), ["x must have shape", "(0, 4)"]),
    (lambda: attention_cost_per_token(0, 4, 2, True), ["t must be an integer >= 1", "0"]),
    (lambda: attention_cost_per_token(3, 4, 2, None), ["cached must be True or False", "None"]),
    (lambda: attention_cost_per_token(3, 4.5, 2, True), ["d_model must be an integer >= 1", "4.5"]),
])
def test_bad_input_is_named_in_the_error(call, words):
    with pytest.raises(ValueError) as error:
        call()
    for word in words:
        assert word in str(error.value)
