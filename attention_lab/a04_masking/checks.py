"""Visible self-checks for assignment 4 (masks and numerical stability), run by learners on their own functions.

Each check first runs the function on the assignment's worked cases (numbers
stored in the package, see :mod:`attention_lab.core.worked`), which names a known
mistake when the result matches one, and then tests properties that every
correct answer has — shapes that broadcast, no padded or future key allowed,
rows that sum to 1 or are all 0, no NaN and no NumPy warning, the dtype kept
— in plain words. No reference implementation is involved. The checks award
no points: the hidden tests do the grading.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from attention_lab.core.self_check import call_recording_warnings, fail as _fail, ok as _ok, self_check
from attention_lab.core.worked import SelfCheckFailed, show

ASSIGNMENT = "04_masks_and_stability"

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)


def _array(what: str, value, shape: tuple[int, ...], kind: str) -> np.ndarray:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(value, np.ndarray):
        _fail(f"{what} should be a NumPy array, but it is a {type(value).__name__}")
    if value.shape != shape:
        _fail(f"{what} should have shape {shape}, but it has shape {value.shape}")
    if kind == "b" and value.dtype != np.bool_:
        _fail(f"{what} should be boolean (True = may attend), but its dtype is {value.dtype}")
    if kind == "f" and value.dtype.kind != "f":
        _fail(f"{what} should be floating point, but its dtype is {value.dtype}")
    return value


# ---------------------------------------------------------------- step 1
@_self_check
def check_padding_mask(padding_mask: Callable) -> None:
    """Self-check ``padding_mask(lengths, T)``: worked cases, then shape, broadcasting, row counts and errors.

    The learner's function: int ``lengths`` (B,) and an int ``T``; returns a bool mask (B, 1, T), True on the first
    ``lengths[b]`` keys of sequence b.

    Fails when for lengths [0, 5, 2, 7, 3] and T = 7 the mask has the wrong shape or dtype, does not broadcast
    against (B, T_q, T) or marks the wrong keys; or when a length above T or below 0 does not raise ValueError.
    """
    lengths, T = np.array([0, 5, 2, 7, 3]), 7
    mask, _ = call_recording_warnings(padding_mask, lengths, T)
    mask = _array(f"padding_mask({show(lengths)}, {T})", mask, (5, 1, T), "b")
    try:
        np.broadcast_shapes(mask.shape, (5, 4, T))
    except ValueError:
        _fail(f"a mask of shape {mask.shape} does not broadcast against scores of shape (B, T_q, T) = (5, 4, {T})")
    for b, length in enumerate(lengths):
        row = mask[b, 0]
        if not np.array_equal(row, np.arange(T) < length):
            _fail(f"sequence {b} has length {length}, so keys 0 … {length - 1} are real and the rest padding; "
                  f"its mask row is {show(row)}")
    _ok("shape (B, 1, T), broadcasts against (B, T_q, T), True exactly on the first `length` keys of each sequence")
    for bad in (np.array([2, 8]), np.array([-1, 3])):
        try:
            call_recording_warnings(padding_mask, bad, T)
        except SelfCheckFailed as failure:
            if "ValueError" in str(failure):
                continue
            raise
        _fail(f"padding_mask({show(bad)}, T={T}) should raise ValueError: a length must be between 0 and T")
    _ok("a length above T or below 0 raises ValueError")


# ---------------------------------------------------------------- step 2
@_self_check
def check_causal_padding_mask(causal_padding_mask: Callable) -> None:
    """Self-check ``causal_padding_mask(lengths, T)``: worked cases, then no future key, no padded key, row counts.

    The learner's function: int ``lengths`` (B,) and an int ``T``; returns a bool mask (B, T, T).

    Fails when for lengths [4, 0, 2] and T = 5 a future or padded key is allowed, a query does not see every real
    key up to itself, or the empty sequence has an allowed key.
    """
    lengths, T = np.array([4, 0, 2]), 5
    mask, _ = call_recording_warnings(causal_padding_mask, lengths, T)
    mask = _array(f"causal_padding_mask({show(lengths)}, {T})", mask, (3, T, T), "b")
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    if np.any(mask & future):
        b, i, j = np.argwhere(mask & future)[0]
        _fail(f"a future key is allowed: in sequence {b}, query {i} may attend to key {j} > {i}")
    padded = np.arange(T)[None, None, :] >= lengths[:, None, None]
    if np.any(mask & padded):
        b, i, j = np.argwhere(mask & padded)[0]
        _fail(f"a padded key is allowed: sequence {b} has length {lengths[b]}, but query {i} may attend to key {j}")
    counts = mask.sum(axis=-1)
    wanted = np.minimum(np.arange(T)[None, :] + 1, lengths[:, None])
    if not np.array_equal(counts, wanted):
        b, i = np.argwhere(counts != wanted)[0]
        _fail(f"query {i} of sequence {b} (length {lengths[b]}) should see {wanted[b, i]} key(s): the real ones up to "
              f"itself; it sees {counts[b, i]}. Padded query rows still see the real tokens before them.")
    _ok("no future key and no padded key is allowed; each query sees every real key up to itself")
    if mask[1].any():
        _fail("a sequence of length 0 has no real token: every row of its mask should be False")
    _ok("every row of an empty sequence is fully masked")


# ---------------------------------------------------------------- step 3
def _weights_properties(what: str, weights: np.ndarray, mask: np.ndarray, axis: int) -> None:
    """Fail unless blocked entries are 0, fully masked slices all 0, and the other slices sum to 1."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not np.all(np.isfinite(weights)):
        _fail(f"{what} contains NaN or inf at {np.argwhere(~np.isfinite(weights))[0].tolist()}: a row with no "
              "allowed key gives 0/0 unless you guard it, and exp overflows without max subtraction")
    mask = np.broadcast_to(mask, weights.shape)
    if np.any(weights[~mask] != 0):
        _fail(f"{what}: a blocked entry has weight {weights[~mask & (weights != 0)][0]:.4g}; it must be exactly 0")
    empty = ~mask.any(axis=axis)
    sums = weights.astype(np.float64).sum(axis=axis)
    if np.any(empty) and np.any(sums[empty] != 0):
        _fail(f"{what}: a row with no allowed key should be all zeros; its weights sum to "
              f"{sums[empty][sums[empty] != 0][0]:.4g} (uniform rows come from a finite fill such as -1e9)")
    tolerance = 5e-3 if weights.dtype == np.float16 else 1e-6
    if np.any(~empty) and not np.allclose(sums[~empty], 1.0, atol=tolerance):
        _fail(f"{what}: rows with an allowed key should sum to 1 along axis {axis}; sums range from "
              f"{sums[~empty].min():.4g} to {sums[~empty].max():.4g}")


@_self_check
def check_masked_softmax(masked_softmax: Callable) -> None:
    """Self-check ``masked_softmax(scores, mask, axis=-1)``: worked cases, then rows, zeros, warnings and dtypes.

    The learner's function: float ``scores`` (..., T_q, T_k), a bool ``mask`` broadcasting to them and the ``axis``
    to normalise along; returns weights of the scores' shape and dtype.

    Fails when a blocked entry is not 0, a fully masked row not all 0 or another row does not sum to 1 (for a (2, 4,
    6) mask, a (B, 1, T_k) padding mask and axis=-2); when the call emits a NumPy warning; or when float32 or
    float16 scores come back in another dtype or overflow.
    """
    rng = np.random.default_rng(44)
    scores = rng.normal(0.0, 3.0, (2, 4, 6))
    mask = rng.random((2, 4, 6)) < 0.5
    mask[..., 0] = True
    mask[1, 2] = False  # a query with no allowed key
    weights, warned = call_recording_warnings(masked_softmax, scores, mask)
    weights = _array("masked_softmax(scores (2, 4, 6), mask)", weights, scores.shape, "f")
    if warned:
        _fail(f"masked_softmax emitted a warning ({warned[0]}); this step must run without any. Remember that "
              "np.where computes both branches: guard the values *before* the operation that warns")
    _weights_properties("the weights", weights, mask, -1)
    _ok("blocked entries are 0, rows with an allowed key sum to 1, a fully masked row is all 0 — with no warning")

    padding = np.arange(6)[None, None, :] < np.array([6, 0])[:, None, None]  # (B, 1, T_k): one empty source
    weights, warned = call_recording_warnings(masked_softmax, scores, padding)
    weights = _array("masked_softmax(scores (2, 4, 6), padding mask (2, 1, 6))", weights, scores.shape, "f")
    if warned:
        _fail(f"masked_softmax with a (B, 1, T_k) padding mask emitted a warning ({warned[0]})")
    _weights_properties("the weights for a (B, 1, T_k) padding mask", weights, padding, -1)
    _ok("a (B, 1, T_k) padding mask broadcasts over the query rows")

    columns, warned = call_recording_warnings(masked_softmax, scores[0], mask[0], axis=-2)
    columns = _array("masked_softmax(scores, mask, axis=-2)", columns, scores[0].shape, "f")
    _weights_properties("the weights with axis=-2", columns, mask[0], -2)
    _ok("axis=-2 normalises down each column")

    for dtype, top in ((np.float32, 100.0), (np.float16, 1000.0)):
        big = (top + rng.normal(0.0, 2.0, (3, 5))).astype(dtype)
        big_mask = rng.random((3, 5)) < 0.6
        big_mask[:, 1] = True
        big_mask[2] = False
        weights, warned = call_recording_warnings(masked_softmax, big, big_mask)
        what = f"masked_softmax of {np.dtype(dtype).name} scores near {top:g}"
        weights = _array(what, weights, big.shape, "f")
        if weights.dtype != dtype:
            _fail(f"{what} returned dtype {weights.dtype}; keep the input's dtype ({np.dtype(dtype).name} in, "
                  f"{np.dtype(dtype).name} out)")
        if warned:
            _fail(f"{what} emitted a warning ({warned[0]}): e^x overflows above x = {np.log(np.finfo(dtype).max):.1f} "
                  f"in {np.dtype(dtype).name}; subtract the largest allowed score of each row first")
        _weights_properties(f"the weights of {what}", weights, big_mask, -1)
    _ok("float32 logits near 100 and float16 logits near 1000 stay finite, and the dtype is kept")


# ---------------------------------------------------------------- step 4
@_self_check
def check_masked_attention(masked_attention: Callable) -> None:
    """Self-check ``masked_attention(Q, K, V, mask)``: worked cases, then cross-attention shapes and zero rows.

    The learner's function: ``Q`` (..., T_q, d_k), ``K`` (..., T_k, d_k), ``V`` (..., T_k, d_v), float, and a bool
    ``mask`` broadcasting to (..., T_q, T_k); returns (output (..., T_q, d_v), weights (..., T_q, T_k)).

    Fails when with T_q = 3 ≠ T_k = 5 the shapes are wrong (or the weights transposed), padded keys get weight, the
    output is not weights @ V or a query with no allowed key gets a non-zero output; or when a mask that does not
    broadcast raises no ValueError.
    """
    rng = np.random.default_rng(45)
    B, T_q, T_k, d_k, d_v = 2, 3, 5, 4, 2
    Q, K, V = rng.normal(size=(B, T_q, d_k)), rng.normal(size=(B, T_k, d_k)), rng.normal(size=(B, T_k, d_v))
    padding = np.arange(T_k)[None, None, :] < np.array([3, 0])[:, None, None]  # source lengths 3 and 0
    result, _ = call_recording_warnings(masked_attention, Q, K, V, padding)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        _fail(f"masked_attention should return a tuple (output, weights), but it returned {type(result).__name__}")
    output, weights = result
    if isinstance(weights, np.ndarray) and weights.shape == (B, T_k, T_q):
        _fail(f"the weights have shape (B, T_k, T_q) = {weights.shape}: rows should be queries and columns keys, "
              f"(B, T_q, T_k) = {(B, T_q, T_k)} — the shape of Q Kᵀ")
    weights = _array("the weights", weights, (B, T_q, T_k), "f")
    output = _array("the output", output, (B, T_q, d_v), "f")
    _ok(f"cross-attention with T_q = {T_q} ≠ T_k = {T_k}: output (B, T_q, d_v), weights (B, T_q, T_k)")
    _weights_properties("the weights", weights, padding, -1)
    if not np.allclose(output, weights @ V, atol=1e-6):
        _fail("each output row should be the weighted average of the value rows: output = weights @ V")
    if np.any(output[1] != 0):
        _fail("the second source has length 0, so its queries have no allowed key: their output rows should be 0")
    _ok("padded keys get weight 0, output = weights @ V, and queries with no allowed key get a zero output row")
    wrong_way_round = np.ones((T_k, T_q), dtype=bool)
    try:
        call_recording_warnings(masked_attention, Q[0], K[0], V[0], wrong_way_round)
    except SelfCheckFailed as failure:
        if "ValueError" not in str(failure):
            raise
    else:
        _fail(f"a mask of shape (T_k, T_q) = {wrong_way_round.shape} does not broadcast against the scores "
              f"(T_q, T_k) = {(T_q, T_k)}: masked_attention should raise ValueError, not transpose or reshape it")
    _ok("a mask that does not broadcast against (T_q, T_k) raises ValueError")
