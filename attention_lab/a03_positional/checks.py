"""Visible self-checks for assignment 3 (sinusoidal positional encoding), run by learners on their own functions.

Each check first runs the function on the assignment's worked cases (small
inputs whose expected numbers, and the numbers known mistakes give, are stored
in ``attention_lab/<folder>/worked_cases.json``; see :mod:`attention_lab.core.worked`), then tests
properties every correct answer has — entries in [−1, 1], row 0 = (0, 1, 0, 1, …),
each column pair on the unit circle, R_0 = I, R_a R_b = R_{a+b}, rows of weights
summing to 1, a gap of 0 without positions — and says in plain words which one
fails. Nothing here computes the answers themselves: the grader's reference
lives elsewhere. They award no points.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from attention_lab.a01_attention import checks
from attention_lab.core.compare import as_number, is_number
from attention_lab.core.self_check import call, fail as _fail, float_array, normal_arrays as _random, ok as _ok, \
    self_check
from attention_lab.core.worked import check_worked_cases, show

ASSIGNMENT = "03_positional_encoding"

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)


# encodings, rotations and weights are all finite: NaN or inf is itself the mistake to report
_array = functools.partial(float_array, finite=True)


def _pair(what: str, value, shapes) -> tuple[np.ndarray, np.ndarray]:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        _fail(f"{what} should return a tuple (output, weights); it returned a {type(value).__name__}")
    return _array(f"the output of {what}", value[0], shapes[0]), _array(f"the weights of {what}", value[1], shapes[1])


def _number(what: str, value) -> float:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    value = as_number(value)
    if not is_number(value):
        _fail(f"{what} should be a number (a float); it is {show(value, 120)}")
    if not math.isfinite(float(value)):
        _fail(f"{what} is {float(value)}; it should be a finite number")
    return float(value)


def expect_number(function: Callable, *args, **kwargs) -> None:
    """Visible part of an autograder cell: the function runs and returns one finite number.

    Parameters
    ----------
    function : callable
        The learner's function.
    *args, **kwargs
        Passed to ``function`` (arrays as copies).

    Each step is graded on its own: a failure that comes from another of the
    learner's course functions does not fail this check (see
    :func:`attention_lab.a01_attention.checks.call_for_visible_part`).

    Raises
    ------
    SelfCheckFailed
        If the function raised in its own code, or the result is not a real
        number (a 0-d array counts as one).
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    name = getattr(function, "__name__", "the function")
    result = checks.call_for_visible_part(function, *args, **kwargs)
    if result is not checks.NOT_CHECKED:
        _number(f"the result of {name}", result)


# ---------------------------------------------------------------- step 1
@_self_check
def check_sinusoidal_positional_encoding(sinusoidal_positional_encoding: Callable) -> None:
    """Self-check ``sinusoidal_positional_encoding(T, d_model)``: worked cases, then properties at T = 50, d_model = 16.

    The learner's function: ``(T, d_model) -> (T, d_model)``.

    Fails when an entry lies outside [−1, 1], row 0 is not (0, 1, 0, 1, …) or a column pair leaves the unit circle;
    or when the frequencies are not 1, 10000^(−2/d_model), … radians per position.
    """
    T, d_model = 50, 16
    pe = _array("sinusoidal_positional_encoding(50, 16)", call(sinusoidal_positional_encoding, T, d_model),
                (T, d_model))
    if np.any(np.abs(pe) > 1 + 1e-6):
        _fail(f"some entries lie outside [−1, 1] (largest {np.abs(pe).max():.4g}): every entry is a sine or a cosine")
    if not np.allclose(pe[0], np.tile([0.0, 1.0], d_model // 2), atol=1e-6):
        _fail(f"row 0 (position 0) should be (0, 1, 0, 1, …), got {show(pe[0], 160)}: sin 0 = 0 in the even columns, "
              "cos 0 = 1 in the odd ones")
    radius = pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2
    if not np.allclose(radius, 1.0, atol=1e-4):
        _fail("columns 2i and 2i + 1 should be the sine and cosine of the same angle, so that "
              "pe[t, 2i]² + pe[t, 2i + 1]² = 1; that fails here, e.g. for pair "
              f"{int(np.argmax(np.abs(radius - 1.0).max(axis=0)))}")
    _ok("entries in [−1, 1], row 0 = (0, 1, 0, 1, …), and every column pair (2i, 2i + 1) lies on the unit circle")

    # At t = 1 the angle of pair i is its frequency ω_i itself (all ω_i ≤ 1 < π, so atan2 recovers it).
    omega = np.arctan2(pe[1, 0::2], pe[1, 1::2])
    ratios = omega[1:] / omega[:-1]
    if not np.isclose(omega[0], 1.0, atol=1e-5):
        _fail(f"pair 0 should turn by 1 radian per position (column 0 = sin t), but it turns by {omega[0]:.4g}")
    if np.any(np.diff(omega) >= 0):
        _fail("the frequencies should decrease from pair to pair (pair 0 fastest, the last pair slowest)")
    if not np.allclose(ratios, ratios[0], rtol=1e-3):
        _fail("consecutive pairs' frequencies should shrink by the same factor each time (a geometric sequence); "
              f"here the factors are {show(ratios, 200)}")
    if not np.isclose(ratios[0], 10000.0 ** (-2.0 / d_model), rtol=1e-3):
        _fail(f"with d_model = 16 each pair should turn 10000^(2/16) ≈ {10000 ** (2 / 16):.4g} times slower than the "
              f"one before; yours are {1 / ratios[0]:.4g} times slower")
    _ok("pair 0 turns by 1 radian per position, and each later pair 10000^(2/d_model) times slower")


# ---------------------------------------------------------------- step 2
@_self_check
def check_dot_product_by_offset(dot_product_by_offset: Callable) -> None:
    """Self-check ``dot_product_by_offset(pe, t)`` on worked cases and on a random (learned-like) encoding.

    The learner's function: ``(pe (T, d), t) -> (T − t,)``.

    Fails when on a random (9, 5) encoding and t = 0, 4, 8 the first entry is not pe[t]·pe[t] or the last not
    pe[t]·pe[T − 1].
    """
    (pe,) = _random(31, (9, 5))
    for t in (0, 4, 8):
        got = _array(f"dot_product_by_offset(pe, {t}) for pe of shape (9, 5)", call(dot_product_by_offset, pe, t),
                     (9 - t,))
        if not np.isclose(got[0], pe[t] @ pe[t], rtol=1e-6):
            _fail(f"entry k = 0 should be pe[{t}]·pe[{t}] (the squared length of row {t}); got {got[0]:.6g}")
        if not np.isclose(got[-1], pe[t] @ pe[-1], rtol=1e-6):
            _fail(f"the last entry should be pe[{t}]·pe[8], row {t} against the last row; got {got[-1]:.6g}")
    _ok("on a random (9, 5) encoding: T − t entries, from pe[t]·pe[t] to pe[t]·pe[T − 1], for t = 0, 4 and 8")


# ---------------------------------------------------------------- step 3
@_self_check
def check_offset_rotation(offset_rotation: Callable) -> None:
    """Self-check ``offset_rotation(k, d_model)``: worked cases, then the properties of rotations.

    The learner's function: ``(k, d_model) -> (d_model, d_model)``.

    Fails when one of R_0 = I, block diagonal, R_k R_kᵀ = I, R_3 R_4 = R_7 and R_{−3} = R_3ᵀ fails (d_model = 8).
    """
    d_model = 8
    R = {k: _array(f"offset_rotation({k}, 8)", call(offset_rotation, k, d_model), (d_model, d_model))
         for k in (0, 3, 4, 7, -3)}
    if not np.allclose(R[0], np.eye(d_model), atol=1e-6):
        _fail("offset_rotation(0, d_model) should be the identity: moving 0 positions changes nothing")
    blocks = np.kron(np.eye(d_model // 2), np.ones((2, 2))).astype(bool)
    if np.any(np.abs(R[3][~blocks]) > 1e-9):
        _fail("R_k should be block diagonal: entries outside the 2×2 blocks on rows and columns (2i, 2i + 1) must "
              "be 0, because each sin/cos pair turns on its own")
    if not np.allclose(R[3] @ R[3].T, np.eye(d_model), atol=1e-6):
        _fail("R_k should be a rotation, R_k R_kᵀ = I (each block [[cos a, −sin a], [sin a, cos a]])")
    if not np.allclose(R[3] @ R[4], R[7], atol=1e-6):
        _fail("moving 3 positions and then 4 should be the same as moving 7: R_3 @ R_4 should equal R_7")
    if not np.allclose(R[-3], R[3].T, atol=1e-6):
        _fail("moving back 3 positions should undo moving forward 3: R_{−3} should equal R_3ᵀ")
    _ok("R_0 = I, R_k is block diagonal and a rotation, R_3 R_4 = R_7, and R_{−3} = R_3ᵀ")


# ---------------------------------------------------------------- step 4
def check_from_assignment_1(softmax: Callable, scaled_dot_product_attention: Callable) -> None:
    """Self-check the pasted assignment-1 functions: this assignment's worked cases, then assignment 1's checks.

    Parameters
    ----------
    softmax, scaled_dot_product_attention : callable
        The learner's functions pasted from assignment 1.

    Raises
    ------
    SelfCheckFailed
        At the first worked case of this assignment that fails, or with the message of assignment 1's
        own :func:`~attention_lab.a01_attention.checks.check_softmax` or
        :func:`~attention_lab.a01_attention.checks.check_scaled_dot_product_attention`.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    check_worked_cases(ASSIGNMENT, "softmax", softmax)
    check_worked_cases(ASSIGNMENT, "scaled_dot_product_attention", scaled_dot_product_attention)
    checks.check_softmax(softmax)
    checks.check_scaled_dot_product_attention(scaled_dot_product_attention)


# ---------------------------------------------------------------- step 5
@_self_check
def check_self_attention(self_attention: Callable) -> None:
    """Self-check ``self_attention(x, W_q, W_k, W_v)``: worked cases, then shapes and unmasked weights.

    The learner's function: ``(x, W_q, W_k, W_v) -> (output, weights)``.

    Fails when for T = 5, d_model = 6, d_head = 3 a row of weights is negative or does not sum to 1, or weights are
    0 as if a mask were applied.
    """
    T, d_model, d_head = 5, 6, 3
    x, W_q, W_k, W_v = _random(51, (T, d_model), *[(d_model, d_head)] * 3)
    output, weights = _pair("self_attention", call(self_attention, x, W_q, W_k, W_v), [(T, d_head), (T, T)])
    if np.any(weights < 0) or not np.allclose(weights.sum(axis=-1), 1.0, atol=1e-6):
        _fail(f"each row of weights should be non-negative and sum to 1; row sums {show(weights.sum(axis=-1), 160)}")
    if np.allclose(np.triu(weights, 1), 0.0):
        _fail("every weight above the diagonal is 0, as with a causal mask: this self-attention has no mask")
    if not np.all(weights > 0):
        _fail("some weights are exactly 0: without a mask every position attends to every position")
    _ok("for T = 5, d_model = 6, d_head = 3: output (5, 3), weights (5, 5), every row a probability over all keys")


# ---------------------------------------------------------------- step 6
@_self_check
def check_add_positions(add_positions: Callable) -> None:
    """Self-check ``add_positions(x)``: worked cases, then x + PE with x unchanged.

    The learner's function: ``x (T, d_model) -> x + PE``.

    Fails when add_positions(x) − x depends on x or its row 0 is not PE(0) = (0, 1, 0, 1, …).
    """
    (x,) = _random(61, (6, 8))
    result = _array("add_positions(x) for x of shape (6, 8)", call(add_positions, x), (6, 8))
    added = result - x
    other = _array("add_positions(2 * x)", call(add_positions, 2 * x), (6, 8)) - 2 * x
    if not np.allclose(added, other, atol=1e-6):
        _fail("add_positions(x) − x should not depend on x: the same encodings are added whatever the tokens are")
    if not np.allclose(added[0], np.tile([0.0, 1.0], 4), atol=1e-6):
        _fail(f"row 0 gets PE(0) = (0, 1, 0, 1, …), but add_positions(x)[0] − x[0] = {show(added[0], 160)}")
    _ok("x is left unchanged, and add_positions(x) − x is the same encoding table for any x")


# ---------------------------------------------------------------- step 7
@_self_check
def check_permutation_gap(permutation_gap: Callable) -> None:
    """Self-check ``permutation_gap(x, W_q, W_k, W_v, perm, positions=False)``.

    The learner's function: ``(x, W_q, W_k, W_v, perm, positions=False) -> float``.

    Fails when a gap is negative, not 0 for the identity permutation or without positions, or not clearly above 0
    for a shuffle with positions.
    """
    T, d_model, d_head = 6, 8, 4
    x, W_q, W_k, W_v = _random(71, (T, d_model), *[(d_model, d_head)] * 3)
    shuffle, identity = np.array([2, 0, 5, 1, 3, 4]), np.arange(T)
    gap = {(name, positions): _number(f"permutation_gap(…, perm={name}, positions={positions})",
                                      call(permutation_gap, x, W_q, W_k, W_v, perm, positions=positions))
           for name, perm in (("shuffle", shuffle), ("identity", identity)) for positions in (False, True)}
    if any(value < 0 for value in gap.values()):
        _fail("the gap is a largest absolute difference, so it is never negative")
    if gap["identity", True] > 1e-6 or gap["identity", False] > 1e-6:
        _fail("with the identity permutation nothing moves, so the gap should be 0 (with and without positions)")
    if gap["shuffle", False] > 1e-6:
        _fail(f"without positions the gap should be 0 (up to rounding), got {gap['shuffle', False]:.3g}: attention "
              "without positions is permutation-equivariant, output(x[perm]) = output(x)[perm]")
    if gap["shuffle", True] < 1e-3:
        _fail(f"with positions the gap should be clearly above 0, got {gap['shuffle', True]:.3g}: add the encodings "
              "after shuffling, so that position t keeps PE(t)")
    _ok(f"a shuffle of 6 tokens: gap {gap['shuffle', False]:.1e} without positions, {gap['shuffle', True]:.3f} with "
        "them; the identity permutation gives 0")
