"""Visible self-checks for assignment 8 (RoPE, ALiBi, grouped-query attention), run on the learner's functions.

Each check first runs the function on the assignment's worked cases (numbers stored in the
package, see :mod:`attention_lab.core.worked`), which names a known mistake when the result
matches one, and then tests properties every correct answer has, in plain words: RoPE keeps
every pair's length, leaves position 0 alone, composes (turning by a then b is turning by a + b)
and gives scores that depend only on n − m; attention with RoPE, ALiBi or shared key/value heads
equals its formula written out here (the papers' equations, not the reference); decoding with the
cache equals attention over the whole sequence; the slopes follow the authors' rule; the cache's
bytes grow linearly. No reference implementation of a learner's function is involved. The checks
award no points: the hidden tests do the grading.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from attention_lab.core.compare import as_number
from attention_lab.core.self_check import attempt, call, fail, float_array, ok, self_check
from attention_lab.core.worked import check_worked_cases

ASSIGNMENT = "08_modern_attention"
SAME = 1e-12  # "the same numbers": reordered float64 arithmetic differs by about 1e-15 here

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)
_array = functools.partial(float_array, sep=", but ", finite=True)


# ---------------------------------------------------------------- the formulas the checks compare with
def _turned(x: np.ndarray, positions, base: float = 10000.0) -> np.ndarray:
    """Su et al. 2021, eq. 34, as a product with R_p per row: pair (2i, 2i + 1) turned by p · base^(−2i/d)."""
    d = x.shape[-1]
    angle = np.asarray(positions, dtype=float)[..., None] * base ** (-np.arange(0, d, 2) / d)
    c, s = np.cos(angle), np.sin(angle)
    pairs = x.reshape(x.shape[:-1] + (d // 2, 2))
    return np.stack([pairs[..., 0] * c - pairs[..., 1] * s, pairs[..., 0] * s + pairs[..., 1] * c],
                    axis=-1).reshape(x.shape)


def _attention(Q, K, V, bias=0.0, causal=True):
    """softmax(Q Kᵀ / √d_k + bias) V under the bottom-right causal mask (Vaswani et al. 2017, eq. 1)."""
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]) + bias
    if causal:
        scores = np.where(np.arange(T_k)[None, :] <= np.arange(T_q)[:, None] + (T_k - T_q), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V, weights


def _pair(what: str, value) -> tuple:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        got = f"{len(value)} values" if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
        fail(f"{what} should return two values (output, weights), but it returned {got}")
    return tuple(value)


def _close(what: str, got: np.ndarray, expected: np.ndarray, formula: str) -> None:
    __tracebackhide__ = True
    error = float(np.max(np.abs(got - expected)))
    if error > SAME:
        fail(f"{what} differs from {formula} by up to {error:.3g} (allowed: 1e-12)")


def _attention_as_formula(what: str, returned, output_shape: tuple, expected: tuple, formula: str,
                          values: str) -> None:
    """Fail unless ``returned`` is (output, weights) of the shapes and values of ``expected`` = (output, weights).

    The weights are compared with ``formula`` first (where attention goes wrong), then the output with ``formula``
    followed by ``values`` (what turns the weights into the output).
    """
    __tracebackhide__ = True
    output, weights = _pair(what, returned)
    output = _array(f"the output of {what}", output, output_shape)
    weights = _array(f"the weights of {what}", weights, expected[1].shape)
    _close(f"the weights of {what}", weights, expected[1], formula)
    _close(f"the output of {what}", output, expected[0], formula + values)


# ---------------------------------------------------------------- step 0
def check_from_earlier_assignments(softmax: Callable, scaled_dot_product_attention: Callable, causal_mask: Callable,
                                   split_heads: Callable, merge_heads: Callable) -> None:
    """Self-check the functions pasted from assignments 1, 2 and 5: their worked cases, then a batch and a round trip.

    Parameters
    ----------
    softmax, scaled_dot_product_attention : callable
        From assignment 1; here Q (2, 2, 4), K (2, 5, 4), V (2, 5, 3), float, and a bool (2, 5) mask give
        (output (2, 2, 3), weights (2, 2, 5)).
    causal_mask : callable
        From assignment 5: ``causal_mask(T_q, T_k)``, a bool (T_q, T_k) array aligned bottom-right.
    split_heads, merge_heads : callable
        From assignment 2: (T, d_model) → (n_heads, T, d_head) and back.

    Raises
    ------
    SelfCheckFailed
        At the first worked case that fails, or when the batched attention's weights do not sum to 1, a blocked
        weight is not 0, or merge_heads(split_heads(X, n)) is not X.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    for name, function in (("softmax", softmax), ("scaled_dot_product_attention", scaled_dot_product_attention),
                           ("causal_mask", causal_mask), ("split_heads", split_heads), ("merge_heads", merge_heads)):
        check_worked_cases(ASSIGNMENT, name, function)
    rng = np.random.default_rng(80)
    check_batched_causal_attention(scaled_dot_product_attention, causal_mask, rng, "a batch of 2")
    X = rng.normal(size=(3, 6))
    for n_heads in (2, 3):
        heads = _array(f"split_heads(X (3, 6), {n_heads})", call(split_heads, X, n_heads), (n_heads, 3, 6 // n_heads))
        if not np.array_equal(heads[1, 2], X[2, 6 // n_heads:2 * 6 // n_heads]):
            fail(f"split_heads(X, {n_heads})[1, 2] should be token 2's columns of head 1")
        if not np.array_equal(call(merge_heads, heads), X):
            fail(f"merge_heads(split_heads(X, {n_heads})) should give X back")
    ok("a batch with a (T_q, T_k) mask, the bottom-right causal mask and the head split round trip")


def check_batched_causal_attention(scaled_dot_product_attention: Callable, causal_mask: Callable,
                                   rng: np.random.Generator, batch: str) -> None:
    """The earlier assignments' attention on two stacked problems with the bottom-right causal mask of 2 queries.

    Draws Q (2, 2, 4), K (2, 5, 4), V (2, 5, 3) float64 from ``rng`` and checks ``causal_mask(2, 5)`` (queries
    at positions 3 and 4 of 5: only key 4 of query 0 is blocked), then ``scaled_dot_product_attention(Q, K, V,
    mask=mask)`` → (output (2, 2, 3), weights (2, 2, 5)): finite, rows of weights summing to 1, the blocked weight
    exactly 0 (Vaswani et al. 2017, eq. 1, with assignment 5's mask). Assignments 8 and 9 run it on the functions
    they paste.

    Parameters
    ----------
    scaled_dot_product_attention, causal_mask : callable
        The learner's (or the course's) functions from assignments 1 and 5.
    rng : numpy.random.Generator
        Where the inputs come from (the caller's seed keeps its worked numbers).
    batch : str
        What the leading axis is, in the messages ("a batch of 2", "2 heads").

    Raises
    ------
    SelfCheckFailed
        At the first property that does not hold, naming it.
    """
    __tracebackhide__ = True
    Q, K, V = rng.normal(size=(2, 2, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    mask = call(causal_mask, 2, 5)
    if not isinstance(mask, np.ndarray) or mask.shape != (2, 5) or not np.array_equal(
            mask, np.arange(5)[None, :] <= np.arange(2)[:, None] + 3):
        fail("causal_mask(2, 5) should be [[T, T, T, T, F], [T, T, T, T, T]]: 2 queries at positions 3 and 4")
    output, weights = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, Q, K, V, mask=mask))
    _array(f"the output for {batch}, 2 queries over 5 keys", output, (2, 2, 3))
    weights = _array(f"the weights for {batch}, 2 queries over 5 keys", weights, (2, 2, 5))
    if weights[:, 0, 4].any() or not np.allclose(weights.sum(axis=-1), 1.0):
        fail(f"with a (2, 5) mask and {batch}, every row of weights should sum to 1 and the blocked key 4 of "
             "query 0 should get weight exactly 0")


# ---------------------------------------------------------------- step 1
@_self_check
def check_apply_rope(apply_rope: Callable) -> None:
    """Self-check ``apply_rope(x, positions, base)``: worked cases, then the properties of a rotation by position.

    The learner's function: ``x`` (..., T, d_head) float, ``positions`` one integer per row ((T,) or x.shape[:-1]),
    ``base``; returns the rotated rows, the shape of x.

    Fails when the result has another shape, changes the length of a pair (2i, 2i + 1), turns rows at position 0,
    differs from eq. 34 by more than 1e-12, or the score q'_m · k'_n changes when m and n are shifted together.
    """
    rng = np.random.default_rng(81)
    x = rng.normal(size=(2, 3, 8))
    positions = np.array([[0, 5, 2], [7, 0, 1000]])
    what = "apply_rope on a (2, 3, 8) batch with one row of positions per sequence"
    y = _array(what, call(apply_rope, x, positions), x.shape)
    if not np.allclose(np.hypot(y[..., 0::2], y[..., 1::2]), np.hypot(x[..., 0::2], x[..., 1::2]), atol=1e-12):
        fail(f"{what}: the length of a pair (x_2i, x_2i+1) changed; a turn keeps it")
    if not np.allclose(y[positions == 0], x[positions == 0], atol=SAME):
        fail(f"{what}: a row at position 0 changed; position 0 is a turn by 0")
    _close(what, y, _turned(x, positions), "eq. 34 (pair (2i, 2i + 1) turned by p · 10000^(−2i/d))")
    _close("apply_rope with base = 500", _array("apply_rope with base = 500", call(apply_rope, x[0], np.arange(3),
                                                                                  base=500.0), (3, 8)),
           _turned(x[0], np.arange(3), 500.0), "eq. 34 with base 500")
    q, k = rng.normal(size=(1, 16)), rng.normal(size=(1, 16))
    scores = [float(call(apply_rope, q, [m])[0] @ call(apply_rope, k, [n])[0]) for m, n in ((2, 9), (502, 509),
                                                                                            (0, 7))]
    if max(scores) - min(scores) > 1e-9:
        fail(f"the scores of q at m and k at n = m + 7 for m = 2, 502, 0 are {scores}: they should be equal, "
             "since after RoPE q_m · k_n depends only on n − m")
    ok("pairs keep their length, position 0 is left alone, eq. 34 for any base, and q_m · k_n depends only on n − m")


# ---------------------------------------------------------------- step 2
@_self_check
def check_rope_attention(rope_attention: Callable) -> None:
    """Self-check ``rope_attention(Q, K, V, causal)``: worked cases, then against attention with rotated q and k.

    The learner's function: Q (..., T_q, d_k), K (..., T_k, d_k), V (..., T_k, d_v); returns (output (..., T_q,
    d_v), weights (..., T_q, T_k)).

    Fails when for random inputs (causal or not, T_q < T_k, a batch of 2) the output or the weights differ by more
    than 1e-12 from softmax(mask(q'k'ᵀ/√d_k)) V with q, k turned at their positions and V as it is.
    """
    rng = np.random.default_rng(82)
    for T_q, T_k, causal in ((5, 5, True), (2, 6, True), (3, 7, False)):
        Q, K, V = rng.normal(size=(2, T_q, 6)), rng.normal(size=(2, T_k, 6)), rng.normal(size=(2, T_k, 4))
        what = f"rope_attention for {T_q} queries over {T_k} keys, causal={causal}"
        expected = _attention(_turned(Q, np.arange(T_k - T_q, T_k)), _turned(K, np.arange(T_k)), V, causal=causal)
        _attention_as_formula(what, call(rope_attention, Q, K, V, causal=causal), (2, T_q, 4), expected,
                              "attention with the queries turned at positions T_k − T_q … T_k − 1, the keys at "
                              "0 … T_k − 1", " and the values as they are")
    ok("causal or not, T_q < T_k and a batch: queries and keys turned at their positions, values as they are")


# ---------------------------------------------------------------- step 3
@_self_check
def check_rope_attend_with_cache(rope_attend_with_cache: Callable) -> None:
    """Self-check ``rope_attend_with_cache``: worked cases, then decoding a sequence against attention over all of it.

    The learner's function: x_new (T_new, d_model), K_cache and V_cache (T_past, d_head), W_q, W_k, W_v (d_model,
    d_head); returns (out (T_new, d_head), K, V (T_past + T_new, d_head)).

    Fails when decoding 7 tokens in chunks of 3, 1, 2 and 1 from an empty cache gives other caches than the rotated
    keys and plain values of the whole sequence, or other outputs than causal RoPE attention over the whole
    sequence, by more than 1e-12.
    """
    rng = np.random.default_rng(83)
    x = rng.normal(size=(7, 6))
    W_q, W_k, W_v = (rng.normal(0, 0.6, (6, 4)) for _ in range(3))
    K, V = np.zeros((0, 4)), np.zeros((0, 4))
    outputs, start = [], 0
    for size in (3, 1, 2, 1):
        what = f"rope_attend_with_cache for tokens {start}…{start + size - 1} over a cache of {start}"
        result = call(rope_attend_with_cache, x[start:start + size], K, V, W_q, W_k, W_v)
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            fail(f"{what} should return three values (out, K, V)")
        out = _array(f"the output of {what}", result[0], (size, 4))
        K = _array(f"the key cache of {what}", result[1], (start + size, 4))
        V = _array(f"the value cache of {what}", result[2], (start + size, 4))
        outputs.append(out)
        start += size
    _close("the key cache after 7 tokens", K, _turned(x @ W_k, np.arange(7)),
           "the keys x W_k turned at their own positions 0 … 6")
    _close("the value cache after 7 tokens", V, x @ W_v, "the values x W_v, not turned")
    full, _ = _attention(_turned(x @ W_q, np.arange(7)), _turned(x @ W_k, np.arange(7)), x @ W_v)
    _close("the outputs of decoding in chunks of 3, 1, 2, 1", np.concatenate(outputs), full,
           "causal RoPE attention over the whole sequence")
    ok("decoding 7 tokens in chunks from an empty cache gives causal RoPE attention over the whole sequence")


# ---------------------------------------------------------------- step 4
@_self_check
def check_alibi_slopes(alibi_slopes: Callable) -> None:
    """Self-check ``alibi_slopes(n_heads)``: worked cases, then the paper's sequence and the authors' rule.

    The learner's function: ``n_heads`` ≥ 1; returns the float array (n_heads,) of slopes.

    Fails when for 1, 2, 4, 16 or 32 heads the slopes are not 2^(−8k/n), k = 1 … n, or for 5, 10 or 12 heads not
    those of the largest power of two c below n followed by the first slopes of every other one of 2c heads.
    """
    for n in (1, 2, 4, 16, 32):
        got = _array(f"alibi_slopes({n})", call(alibi_slopes, n), (n,))
        want = 2.0 ** (-8.0 * np.arange(1, n + 1) / n)
        if not np.allclose(got, want, rtol=1e-12, atol=0.0):
            fail(f"alibi_slopes({n}) should be 2^(−8k/{n}) for k = 1 … {n}, from 2^(−{8 / n:g}) down to 2^(−8)")
    for n in (5, 10, 12):
        c = 2 ** int(np.log2(n))
        got = _array(f"alibi_slopes({n})", call(alibi_slopes, n), (n,))
        want = np.concatenate([2.0 ** (-8.0 * np.arange(1, c + 1) / c),
                               (2.0 ** (-8.0 * np.arange(1, 2 * c + 1) / (2 * c)))[0::2][:n - c]])
        if not np.allclose(got, want, rtol=1e-12, atol=0.0):
            fail(f"alibi_slopes({n}) should be the {c} slopes of {c} heads, then the slopes 1, 3, 5, … of {2 * c} "
                 f"heads, {n - c} of them (the authors' rule for a head count that is not a power of two)")
    ok("2^(−8k/n) for powers of two, the authors' rule for 5, 10 and 12 heads")


# ---------------------------------------------------------------- step 5
@_self_check
def check_alibi_attention(alibi_attention: Callable) -> None:
    """Self-check ``alibi_attention(Q, K, V)``: worked cases, then against the formula with the linear bias.

    The learner's function: Q (..., n_heads, T_q, d_k), K and V (..., n_heads or 1, T_k, d_k or d_v); returns
    (output (..., n_heads, T_q, d_v), weights (..., n_heads, T_q, T_k)).

    Fails when for 4 heads (per-head and shared K, V, T_q < T_k, a batch of 2) the output or the weights differ by
    more than 1e-12 from softmax(Q Kᵀ/√d_k − m_h (p_i − j)) V under the causal mask, m_h = 2^(−2(h + 1)).
    """
    rng = np.random.default_rng(85)
    slopes = 2.0 ** (-8.0 * np.arange(1, 5) / 4)  # 4 heads: a power of two, the paper's sequence
    for batch, kv_heads, T_q, T_k in (((), 4, 5, 5), ((2,), 1, 3, 6)):
        Q = rng.normal(size=batch + (4, T_q, 4))
        K, V = rng.normal(size=batch + (kv_heads, T_k, 4)), rng.normal(size=batch + (kv_heads, T_k, 3))
        shared = "shared by the heads" if kv_heads == 1 else "per head"
        what = f"alibi_attention for 4 heads, {T_q} queries over {T_k} keys, K and V {shared}"
        distance = np.arange(T_k - T_q, T_k)[:, None] - np.arange(T_k)[None, :]
        expected = _attention(Q, K, V, bias=-slopes[:, None, None] * distance)
        _attention_as_formula(what, call(alibi_attention, Q, K, V), batch + (4, T_q, 3), expected,
                              "softmax(Q Kᵀ/√d_k − m_h (p_i − j)) under the causal mask", ", times V")
    ok("4 heads, K and V per head or shared, T_q < T_k: the linear bias on the scaled scores, causal")


# ---------------------------------------------------------------- step 6
@_self_check
def check_grouped_query_attention(grouped_query_attention: Callable) -> None:
    """Self-check ``grouped_query_attention``: worked cases, then against attention head by head.

    The learner's function: x (T, d_model), W_q and W_o (d_model, d_model), W_k and W_v (d_model, n_kv_heads ·
    d_head), n_heads, n_kv_heads, mask; returns (output (T, d_model), weights (n_heads, T, T)).

    Fails when for 6 query heads over 1, 2, 3 or 6 kv heads (with and without the causal mask) the result differs
    by more than 1e-12 from attention where query head h uses kv head h // (n_heads / n_kv_heads), or no ValueError
    is raised for 4 query heads over 3 kv heads.
    """
    rng = np.random.default_rng(86)
    T, d_model, n_heads = 4, 12, 6
    d_head = d_model // n_heads
    x = rng.normal(size=(T, d_model))
    W_q, W_o = rng.normal(0, 0.4, (d_model, d_model)), rng.normal(0, 0.4, (d_model, d_model))
    for n_kv, causal in ((2, True), (3, False), (1, False), (6, True)):
        W_k, W_v = (rng.normal(0, 0.4, (d_model, n_kv * d_head)) for _ in range(2))
        kwargs = {"mask": np.tril(np.ones((T, T), dtype=bool))} if causal else {}
        what = f"grouped_query_attention with {n_heads} query heads over {n_kv} kv heads, causal={causal}"
        output, weights = _pair(what, call(grouped_query_attention, x, W_q, W_k, W_v, W_o, n_heads, n_kv, **kwargs))
        output = _array(f"the output of {what}", output, (T, d_model))
        weights = _array(f"the weights of {what}", weights, (n_heads, T, T))
        heads, all_weights = [], []
        for h in range(n_heads):
            g = h // (n_heads // n_kv)
            columns, kv = slice(h * d_head, (h + 1) * d_head), slice(g * d_head, (g + 1) * d_head)
            out, w = _attention(x @ W_q[:, columns], x @ W_k[:, kv], x @ W_v[:, kv], causal=causal)
            heads.append(out)
            all_weights.append(w)
        formula = "attention head by head, query head h using kv head h // (n_heads / n_kv_heads)"
        _close(f"the weights of {what}", weights, np.stack(all_weights), formula)
        _close(f"the output of {what}", output, np.concatenate(heads, axis=1) @ W_o, formula + ", merged, times W_o")
    _, error = attempt(grouped_query_attention, x[:, :8], W_q[:8, :8], W_q[:8, :6], W_q[:8, :6], W_o[:8, :8], 4, 3)
    if not isinstance(error, ValueError):
        fail("grouped_query_attention with 4 query heads over 3 kv heads should raise a ValueError (3 does not "
             f"divide 4); it {'raised ' + type(error).__name__ if error else 'returned a result'}")
    ok("groups of 3 and 2, multi-query, multi-head, with and without the mask, and the ValueError for 4 over 3")


# ---------------------------------------------------------------- step 7
@_self_check
def check_kv_cache_bytes(kv_cache_bytes: Callable) -> None:
    """Self-check ``kv_cache_bytes``: worked cases, then the formula and linear growth.

    The learner's function: ``kv_cache_bytes(T, n_layers, n_kv_heads, d_head, bytes_per_value)``; returns an int.

    Fails when the result is not an int, is not 2 · T · n_layers · n_kv_heads · d_head · bytes_per_value for a few
    sizes, or does not double when T, the layers or the kv heads double.
    """
    for sizes in ((5, 3, 2, 16, 2), (1, 6, 4, 32, 4), (100, 1, 1, 8, 1)):
        got = as_number(call(kv_cache_bytes, *sizes))
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            fail(f"kv_cache_bytes{sizes} should return an int (a number of bytes); it returned {got!r}")
        want = 2 * int(np.prod(sizes))
        if got != want:
            fail(f"kv_cache_bytes{sizes} should be 2 · T · n_layers · n_kv_heads · d_head · bytes_per_value = {want}; "
                 f"it is {got}")
        for axis, name in ((0, "T"), (1, "n_layers"), (2, "n_kv_heads")):
            doubled = list(sizes)
            doubled[axis] *= 2
            if call(kv_cache_bytes, *doubled) != 2 * got:
                fail(f"doubling {name} should double the cache's bytes")
    ok("2 · T · n_layers · n_kv_heads · d_head · bytes_per_value, linear in T, the layers and the kv heads")
