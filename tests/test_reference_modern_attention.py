"""The assignment-8 reference: RoPE's relative positions, ALiBi's slopes and bias, grouped-query attention."""

import numpy as np
import pytest

from autograder.assignments.a01_attention.reference import softmax
from autograder.assignments.a05_kv_cache.reference import causal_mask
from autograder.assignments.a02_multi_head.reference import multi_head_attention
from autograder.assignments.a03_positional.reference import frequencies, offset_rotation, sinusoidal_positional_encoding

from autograder.assignments.a08_modern_attention import reference as ref

SAME = dict(rtol=0.0, atol=1e-12)

# The slopes the authors' get_slopes (ofirpress/attention_with_linear_biases, fairseq/models/transformer.py,
# TransformerDecoder.__init__) returns, printed with repr() from their algorithm: start = 2**(-2**-(log2(n) - 3)),
# [start * start**i for i in range(n)] for powers of two, else the closest power of two plus get_slopes(2 * that)[0::2].
AUTHORS_SLOPES = {
    6: [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125],
    12: [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
         0.7071067811865476, 0.35355339059327384, 0.17677669529663692, 0.08838834764831849],
    5: [0.25, 0.0625, 0.015625, 0.00390625, 0.5],
    3: [0.0625, 0.00390625, 0.25],
}


# ---- RoPE --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("d", [2, 4, 8, 64])
def test_frequencies_are_assignment_3s(d):
    np.testing.assert_array_equal(ref.rope_frequencies(d), frequencies(d))
    np.testing.assert_allclose(ref.rope_frequencies(d, base=500.0), 500.0 ** (-np.arange(0, d, 2) / d), rtol=1e-15)


def test_hand_worked_pairs_are_2i_and_2i_plus_1():
    # e_0 at position 1 with d = 4 turns inside the pair (0, 1): (cos 1, sin 1, 0, 0), not (cos 1, 0, sin 1, 0)
    np.testing.assert_allclose(ref.apply_rope(np.array([[1.0, 0, 0, 0]]), [1]), [[np.cos(1), np.sin(1), 0, 0]],
                               **SAME)
    # e_3 at position 2: pair (2, 3) turns by 2 θ_1 = 2 / 100: (0, 0, −sin 0.02, cos 0.02)
    np.testing.assert_allclose(ref.apply_rope(np.array([[0.0, 0, 0, 1]]), [2]), [[0, 0, -np.sin(0.02), np.cos(0.02)]],
                               **SAME)


def test_position_zero_is_the_identity_and_norms_are_kept():
    x = np.random.default_rng(0).normal(size=(2, 7, 8))
    np.testing.assert_array_equal(ref.apply_rope(x, np.zeros(7, dtype=int)), x)
    rotated = ref.apply_rope(x, np.arange(7) * 13 - 20)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-14)


@pytest.mark.parametrize("m", [0, 1, 5, 37, -4, 1000])
def test_rope_is_assignment_3s_rotation_from_the_other_side(m):
    """apply_rope(x, m) = x @ R_mᵀ = x @ R_{−m}; on sinusoidal encodings it moves back: PE(t) ↦ PE(t − m)."""
    d = 8
    x = np.random.default_rng(1).normal(size=(3, d))
    np.testing.assert_allclose(ref.apply_rope(x, [m] * 3), x @ offset_rotation(m, d).T, **SAME)
    np.testing.assert_allclose(offset_rotation(m, d).T, offset_rotation(-m, d), **SAME)
    pe = sinusoidal_positional_encoding(1200, d)
    t = np.array([10, 50, 1100])
    if np.all(t - m >= 0):
        np.testing.assert_allclose(ref.apply_rope(pe[t], [m] * 3), pe[t - m], atol=1e-11)


def test_score_depends_only_on_the_relative_position():
    """q_m · k_n = q R_{n−m} kᵀ: shifting both positions by s changes nothing (exact to 1e-12)."""
    rng = np.random.default_rng(2)
    d = 16
    q, k = rng.normal(size=d), rng.normal(size=d)
    for m, n in [(0, 0), (3, 7), (7, 3), (100, 1), (5, 5)]:
        expected = q @ offset_rotation(n - m, d) @ k
        for shift in (0, 1, 17, 999, -3):
            score = ref.apply_rope(q[None], [m + shift])[0] @ ref.apply_rope(k[None], [n + shift])[0]
            assert abs(score - expected) <= 1e-12, (m, n, shift)


def test_the_score_pattern_is_toeplitz_for_one_query_and_one_key_vector():
    """The same q at every position against the same k at every position: S[i, j] depends on i − j only."""
    rng = np.random.default_rng(3)
    T, d = 9, 8
    q, k = rng.normal(size=d), rng.normal(size=d)
    S = ref.apply_rope(np.tile(q, (T, 1)), np.arange(T)) @ ref.apply_rope(np.tile(k, (T, 1)), np.arange(T)).T
    for offset in range(-T + 1, T):
        diagonal = np.diagonal(S, offset)
        np.testing.assert_allclose(diagonal, diagonal[0], **SAME)
    assert not np.allclose(S, S.T)  # but not symmetric: ahead and behind differ (unlike PE(t)·PE(t ± k))


def test_positions_broadcast_and_dtypes():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 5, 4))
    per_sequence = np.array([np.arange(5), np.arange(5) + 3])  # (B, T): the second sequence starts at 3
    got = ref.apply_rope(x, per_sequence)
    np.testing.assert_allclose(got[1], ref.apply_rope(x[1], np.arange(3, 8)), **SAME)
    np.testing.assert_allclose(ref.apply_rope(x, np.arange(5.0)), ref.apply_rope(x, np.arange(5)), **SAME)
    assert ref.apply_rope(x.astype(np.float32), np.arange(5)).dtype == np.float32
    copy = x.copy()
    ref.apply_rope(x, np.arange(5))
    np.testing.assert_array_equal(x, copy)


@pytest.mark.parametrize("x, positions, kwargs, message", [
    (np.zeros((3, 5)), np.arange(3), {}, r"x.shape\[-1\] \(d_head\) must be an even integer"),
    (np.zeros(4), np.arange(1), {}, r"x must have shape \(\.\.\., T, d_head\)"),
    (np.zeros((3, 4)), np.array([0.0, 0.5, 1.0]), {}, "positions must hold integers"),
    (np.zeros((3, 4)), np.arange(4), {}, r"positions must have shape \(T,\) = \(3,\)"),
    (np.zeros((3, 4)), np.arange(3), {"base": 1.0}, "base must be a finite number > 1"),
    (np.zeros((3, 4)), np.arange(3), {"base": np.inf}, "base must be a finite number > 1"),
])
def test_apply_rope_errors(x, positions, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ref.apply_rope(x, positions, **kwargs)


def test_rope_attention_hand_checked_and_queries_are_the_last_positions():
    rng = np.random.default_rng(5)
    T, d = 7, 8
    Q, K, V = rng.normal(size=(T, d)), rng.normal(size=(T, d)), rng.normal(size=(T, 3))
    out, weights = ref.rope_attention(Q, K, V)
    Qr, Kr = ref.apply_rope(Q, np.arange(T)), ref.apply_rope(K, np.arange(T))
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), Qr @ Kr.T / np.sqrt(d), -np.inf)
    np.testing.assert_allclose(weights, softmax(scores), **SAME)
    np.testing.assert_allclose(out, softmax(scores) @ V, **SAME)
    # the last 3 queries alone, over all keys: the same rows (positions T − 3 … T − 1, bottom-right mask)
    out3, weights3 = ref.rope_attention(Q[-3:], K, V)
    np.testing.assert_allclose(out3, out[-3:], **SAME)
    np.testing.assert_allclose(weights3, weights[-3:], **SAME)
    out_open, _ = ref.rope_attention(Q, K, V, causal=False)
    np.testing.assert_allclose(out_open, softmax(Qr @ Kr.T / np.sqrt(d)) @ V, **SAME)


def test_rope_attention_values_are_not_rotated():
    # W = all keys equal and all queries zero → uniform weights: the output is the plain mean of V's rows
    T, d = 4, 4
    V = np.random.default_rng(6).normal(size=(T, d))
    out, _ = ref.rope_attention(np.zeros((T, d)), np.ones((T, d)), V, causal=False)
    np.testing.assert_allclose(out, np.tile(V.mean(axis=0), (T, 1)), **SAME)


def test_decoding_with_a_rotated_key_cache_equals_rope_attention():
    rng = np.random.default_rng(7)
    T, d_model, d_head = 9, 6, 4
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v = (rng.normal(0, 0.6, (d_model, d_head)) for _ in range(3))
    expected, _ = ref.rope_attention(x @ W_q, x @ W_k, x @ W_v)
    for chunk in (1, 2, 4, 9):
        K_cache = V_cache = np.zeros((0, d_head))
        rows = []
        for start in range(0, T, chunk):
            out, K_cache, V_cache = ref.rope_attend_with_cache(x[start:start + chunk], K_cache, V_cache, W_q, W_k, W_v)
            rows.append(out)
        np.testing.assert_allclose(np.concatenate(rows), expected, **SAME)
        np.testing.assert_allclose(K_cache, ref.apply_rope(x @ W_k, np.arange(T)), **SAME)  # the cache holds rotated keys
        np.testing.assert_allclose(V_cache, x @ W_v, **SAME)


@pytest.mark.parametrize("args, message", [
    ((np.zeros((5, 4)), np.zeros((3, 4)), np.zeros((3, 2))), "T_q must be <= T_k"),
    ((np.zeros((2, 3)), np.zeros((3, 3)), np.zeros((3, 2))), r"Q.shape\[-1\] \(d_k\) must be an even"),
    ((np.zeros((2, 4)), np.zeros((3, 6)), np.zeros((3, 2))), r"Q.shape\[-1\] and K.shape\[-1\]"),
    ((np.zeros((2, 4)), np.zeros((3, 4)), np.zeros((4, 2))), r"K.shape\[-2\] and V.shape\[-2\]"),
])
def test_rope_attention_errors(args, message):
    with pytest.raises(ValueError, match=message):
        ref.rope_attention(*args)


def test_rope_attend_with_cache_errors():
    W = np.zeros((6, 4))
    with pytest.raises(ValueError, match=r"K_cache must have shape \(T_past, d_head\) with d_head=4"):
        ref.rope_attend_with_cache(np.zeros((2, 6)), np.zeros((3, 5)), np.zeros((3, 4)), W, W, W)
    with pytest.raises(ValueError, match=r"K_cache.shape\[0\] and V_cache.shape\[0\]"):
        ref.rope_attend_with_cache(np.zeros((2, 6)), np.zeros((3, 4)), np.zeros((2, 4)), W, W, W)
    with pytest.raises(ValueError, match="must be an even integer"):
        odd = np.zeros((6, 3))
        ref.rope_attend_with_cache(np.zeros((2, 6)), np.zeros((0, 3)), np.zeros((0, 3)), odd, odd, odd)


# ---- ALiBi -------------------------------------------------------------------------------------------

def test_slopes_for_8_heads_are_the_papers():
    np.testing.assert_array_equal(ref.alibi_slopes(8), [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    np.testing.assert_array_equal(ref.alibi_slopes(16)[1::2], ref.alibi_slopes(8))  # 2^(−0.5), 2^(−1), …


@pytest.mark.parametrize("n", sorted(AUTHORS_SLOPES))
def test_slopes_for_other_head_counts_are_the_authors(n):
    np.testing.assert_allclose(ref.alibi_slopes(n), AUTHORS_SLOPES[n], rtol=1e-15, atol=0)


@pytest.mark.parametrize("n", [1, 2, 4, 16, 32])
def test_slopes_for_powers_of_two_are_geometric_from_2_to_the_minus_8_over_n(n):
    slopes = ref.alibi_slopes(n)
    assert slopes[0] == 2.0 ** (-8 / n) and slopes[-1] == 2.0 ** -8
    np.testing.assert_allclose(slopes[1:] / slopes[:-1], 2.0 ** (-8 / n), rtol=1e-14)


def test_alibi_bias_hand_worked_bottom_right():
    bias = ref.alibi_bias(2, 2, 4)  # slopes 1/16, 1/256; queries at positions 2 and 3
    np.testing.assert_array_equal(bias[0], [[-2 / 16, -1 / 16, 0, -np.inf], [-3 / 16, -2 / 16, -1 / 16, 0]])
    np.testing.assert_array_equal(bias[1], [[-2 / 256, -1 / 256, 0, -np.inf], [-3 / 256, -2 / 256, -1 / 256, 0]])
    np.testing.assert_array_equal(np.isfinite(ref.alibi_bias(3, 5, 5)), np.broadcast_to(causal_mask(5), (3, 5, 5)))


def test_alibi_attention_adds_the_bias_after_scaling_and_is_shift_invariant_per_row():
    rng = np.random.default_rng(8)
    H, T, d = 6, 7, 4
    Q, K, V = rng.normal(size=(2, H, T, d)), rng.normal(size=(2, H, T, d)), rng.normal(size=(2, H, T, 3))
    out, weights = ref.alibi_attention(Q, K, V)
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d) + ref.alibi_bias(H, T, T)
    np.testing.assert_allclose(weights, softmax(scores), **SAME)
    np.testing.assert_allclose(out, softmax(scores) @ V, **SAME)
    # the authors' form, slope · j for every row (fairseq: "all rows are identical"), gives the same weights
    authors = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d) + ref.alibi_slopes(H)[:, None, None] * np.arange(T)
    np.testing.assert_allclose(softmax(np.where(causal_mask(T), authors, -np.inf)), weights, **SAME)
    # one shared K, V for all heads broadcast; the last 3 queries are the last 3 rows
    out_shared, _ = ref.alibi_attention(Q, K[:, :1], V[:, :1])
    np.testing.assert_allclose(out_shared, ref.alibi_attention(Q, np.repeat(K[:, :1], H, 1),
                                                               np.repeat(V[:, :1], H, 1))[0], **SAME)
    np.testing.assert_allclose(ref.alibi_attention(Q[..., -3:, :], K, V)[0], out[..., -3:, :], **SAME)


def test_alibi_errors():
    with pytest.raises(ValueError, match="n_heads must be an integer >= 1"):
        ref.alibi_slopes(0)
    with pytest.raises(ValueError, match="T_q must be <= T_k"):
        ref.alibi_bias(2, 5, 3)
    with pytest.raises(ValueError, match=r"Q must have shape \(\.\.\., n_heads, T_q, d_k\)"):
        ref.alibi_attention(np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="head axis of K"):
        ref.alibi_attention(np.zeros((1, 3, 4)), np.zeros((4, 3, 4)), np.zeros((4, 3, 4)))


# ---- grouped-query attention -------------------------------------------------------------------------

def _weights(rng, d_model, n_kv_heads, d_head):
    s = 1.0 / np.sqrt(d_model)
    return (rng.normal(0, s, (d_model, d_model)), rng.normal(0, s, (d_model, n_kv_heads * d_head)),
            rng.normal(0, s, (d_model, n_kv_heads * d_head)), rng.normal(0, s, (d_model, d_model)))


def _expanded(W, n_heads, n_kv_heads, d_head):
    """W_k or W_v of n_kv_heads heads written as n_heads heads: query head h gets kv head h // g's columns."""
    blocks = [W[:, g * d_head:(g + 1) * d_head] for g in ref.kv_head_of(n_heads, n_kv_heads)]
    return np.concatenate(blocks, axis=1)


def test_gqa_equals_multi_head_attention_when_every_head_has_its_own_keys():
    rng = np.random.default_rng(9)
    T, d_model, H = 6, 12, 4
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v, W_o = _weights(rng, d_model, H, d_model // H)
    for mask in (None, causal_mask(T)):
        got = ref.grouped_query_attention(x, W_q, W_k, W_v, W_o, H, H, mask=mask)
        expected = multi_head_attention(x, W_q, W_k, W_v, W_o, H, mask=mask)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, **SAME)


@pytest.mark.parametrize("n_kv_heads", [1, 2, 3])  # MQA, and two group sizes of 6 query heads
def test_gqa_is_multi_head_attention_with_contiguous_copies_of_the_kv_heads(n_kv_heads):
    rng = np.random.default_rng(10 + n_kv_heads)
    T, d_model, H = 5, 12, 6
    d_head = d_model // H
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v, W_o = _weights(rng, d_model, n_kv_heads, d_head)
    got_out, got_weights = ref.grouped_query_attention(x, W_q, W_k, W_v, W_o, H, n_kv_heads, mask=causal_mask(T))
    W_k_full, W_v_full = (_expanded(W, H, n_kv_heads, d_head) for W in (W_k, W_v))
    out, weights = multi_head_attention(x, W_q, W_k_full, W_v_full, W_o, H, mask=causal_mask(T))
    np.testing.assert_allclose(got_out, out, **SAME)
    np.testing.assert_allclose(got_weights, weights, **SAME)
    if 1 < n_kv_heads < H:  # interleaved groups (np.tile, torch's .repeat) would be a different model
        interleaved = [W_k[:, (h % n_kv_heads) * d_head:(h % n_kv_heads + 1) * d_head] for h in range(H)]
        wrong, _ = multi_head_attention(x, W_q, np.concatenate(interleaved, 1), W_v_full, W_o, H, mask=causal_mask(T))
        assert np.abs(wrong - out).max() > 1e-3


def test_kv_head_of():
    np.testing.assert_array_equal(ref.kv_head_of(4, 2), [0, 0, 1, 1])
    np.testing.assert_array_equal(ref.kv_head_of(6, 3), [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(ref.kv_head_of(8, 1), np.zeros(8))
    np.testing.assert_array_equal(ref.kv_head_of(5, 5), np.arange(5))
    with pytest.raises(ValueError, match="n_kv_heads must divide n_heads"):
        ref.kv_head_of(6, 4)


def test_gqa_errors():
    rng = np.random.default_rng(12)
    x = rng.normal(size=(4, 8))
    W_q, W_k, W_v, W_o = _weights(rng, 8, 2, 2)
    with pytest.raises(ValueError, match="n_kv_heads must divide n_heads"):
        ref.grouped_query_attention(x, W_q, W_k, W_v, W_o, 4, 3)
    with pytest.raises(ValueError, match=r"W_k must have shape \(8, 4\)"):
        ref.grouped_query_attention(x, W_q, W_q, W_v, W_o, 4, 2)
    with pytest.raises(ValueError, match="divisible by n_heads"):
        ref.grouped_query_attention(x, W_q, W_k, W_v, W_o, 3, 1)
    with pytest.raises(ValueError, match="mask must be broadcastable"):
        ref.grouped_query_attention(x, W_q, W_k, W_v, W_o, 4, 2, mask=np.ones((3, 3), dtype=bool))


def test_kv_cache_bytes():
    assert ref.kv_cache_bytes(1, 1, 1, 1, 1) == 2
    assert ref.kv_cache_bytes(1, 80, 64, 128, 2) == 2_621_440  # Llama 2 70B shape with one kv head per query head
    assert ref.kv_cache_bytes(1, 80, 8, 128, 2) == 327_680  # … with its 8 kv heads (GQA): 8 times less
    assert ref.kv_cache_bytes(1, 80, 1, 128, 2) == 40_960  # … multi-query: 64 times less
    assert ref.kv_cache_bytes(4096, 80, 8, 128, 2) == 4096 * 327_680  # linear in T: 1.25 GiB for 4096 tokens
    assert isinstance(ref.kv_cache_bytes(3, 2, 2, 4, 4), int)
    for bad in ({"T": 0}, {"n_layers": 1.5}, {"bytes_per_value": True}):
        arguments = {"T": 1, "n_layers": 1, "n_kv_heads": 1, "d_head": 1, "bytes_per_value": 1, **bad}
        with pytest.raises(ValueError, match=f"{next(iter(bad))} must be an integer >= 1"):
            ref.kv_cache_bytes(**arguments)
