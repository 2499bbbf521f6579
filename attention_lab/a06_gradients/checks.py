"""Visible self-checks for assignment 6 (gradients through the softmax and attention), run on the learner's functions.

Each check first runs the function on the assignment's worked cases (numbers stored in the
package, see :mod:`attention_lab.core.worked`), which names a known mistake when the result
matches one, and then tests properties every correct answer has — shapes with leading batch
axes, a symmetric Jacobian whose rows sum to 0, gradients that agree with central differences
of the given forward pass, zero gradients at blocked positions — in plain words. No reference
implementation of a learner's function is involved. The checks award no points: the hidden tests
do the grading.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from attention_lab.a06_gradients.given import attention_forward
from attention_lab.core.losses import CubicLoss
from attention_lab.core.self_check import call, fail, float_array, ok, self_check

ASSIGNMENT = "06_gradients"

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)


def _probabilities(rng, shape) -> np.ndarray:
    x = rng.normal(size=shape) * 1.5
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _central_differences(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The self-check's own central differences (float64), to test an analytic gradient against."""
    grad = np.zeros_like(x, dtype=np.float64)
    for index in np.ndindex(*x.shape):
        up, down = x.astype(np.float64), x.astype(np.float64)
        up[index] += eps
        down[index] -= eps
        grad[index] = (f(up) - f(down)) / (2 * eps)
    return grad


def _tolerance(*arrays: np.ndarray) -> float:
    """Absolute tolerance of the properties: float32 answers are accepted, as by the grader (rtol 1e-4)."""
    return 1e-5 if any(a.dtype.itemsize < 8 for a in arrays) else 1e-9


def _mismatch(a: np.ndarray, b: np.ndarray) -> float:
    scale = max(np.linalg.norm(a), np.linalg.norm(b))
    return 0.0 if scale == 0 else float(np.linalg.norm(a - b) / scale)


# ---------------------------------------------------------------- step 1
@_self_check
def check_softmax_jacobian(softmax_jacobian: Callable) -> None:
    """Self-check ``softmax_jacobian(p)``: worked cases, then a batch's shape, symmetry, row sums and differences.

    The learner's function: ``p`` (..., n), float, rows of probabilities; returns the Jacobians diag(p) − p pᵀ,
    shape (..., n, n).

    Fails when a Jacobian is not symmetric or its rows do not sum to 0, or a row's Jacobian differs from central
    differences of the softmax.
    """
    rng = np.random.default_rng(66)
    p = _probabilities(rng, (2, 3, 5))
    J = float_array("softmax_jacobian(p) for p of shape (2, 3, 5)", call(softmax_jacobian, p), (2, 3, 5, 5),
                    sep=", but ", finite=True)
    tolerance = _tolerance(J)
    if not np.allclose(J, np.swapaxes(J, -1, -2), atol=tolerance):
        fail("the Jacobian should be symmetric: ∂p_i/∂s_j = ∂p_j/∂s_i (diag(p) − p pᵀ is symmetric)")
    if not np.allclose(J.sum(axis=-1), 0.0, atol=tolerance):
        fail("each row of the Jacobian should sum to 0: adding the same amount to every score changes no weight")
    row = p[1, 2]
    s = np.log(row)  # scores whose softmax is this row
    numeric = np.zeros((s.size, s.size))  # column j: central difference of the weights along score j
    for j in range(s.size):
        up, down = s.copy(), s.copy()
        up[j] += 1e-6
        down[j] -= 1e-6
        numeric[:, j] = (np.exp(up) / np.exp(up).sum() - np.exp(down) / np.exp(down).sum()) / 2e-6
    if _mismatch(J[1, 2], numeric) > max(tolerance, 1e-6):
        fail("the Jacobian of one row differs from central differences of the softmax: "
             f"relative error {_mismatch(J[1, 2], numeric):.2g}")
    ok("a batch of rows (2, 3, 5) gives Jacobians (2, 3, 5, 5); each is symmetric, its rows sum to 0 and it matches central differences of the softmax")


# ---------------------------------------------------------------- step 2
@_self_check
def check_softmax_backward(softmax_backward: Callable) -> None:
    """Self-check ``softmax_backward(p, grad_p)``: worked cases, then a batch, row sums, blocked entries, shifts.

    The learner's function: ``p`` (..., n) rows of probabilities and ``grad_p`` (..., n), float; returns the
    gradient reaching the logits, p ⊙ (g − ⟨g, p⟩), shape (..., n).

    Fails when a batch gives another shape, a row's gradient does not sum to 0, a blocked entry (p = 0) gets
    gradient, or a shift of ``grad_p`` changes the result.
    """
    rng = np.random.default_rng(67)
    p = _probabilities(rng, (2, 3, 4))
    p[0, 1] = [0.0, 0.6, 0.0, 0.4]  # a row with blocked keys
    g = rng.normal(size=(2, 3, 4)) + 0.5
    what = "softmax_backward(p, grad_p) for a batch (2, 3, 4)"
    dS = float_array(what, call(softmax_backward, p, g), (2, 3, 4), sep=", but ", finite=True)
    if not np.allclose(dS.sum(axis=-1), 0.0, atol=_tolerance(dS)):
        fail(f"{what}: each row should sum to 0 (Σ_i p_i (g_i − ⟨g, p⟩) = 0); the sums range from "
             f"{dS.sum(axis=-1).min():.4g} to {dS.sum(axis=-1).max():.4g}")
    if np.any(dS[0, 1, [0, 2]] != 0):
        fail(f"{what}: a key with weight 0 (blocked) should get gradient exactly 0; got {dS[0, 1]}")
    shifted = float_array(what, call(softmax_backward, p, g + 3.0), (2, 3, 4), sep=", but ")
    if not np.allclose(shifted, dS, atol=_tolerance(dS)):
        fail("adding the same number to every entry of grad_p should change nothing (the weights sum to 1)")
    ok("a batch (2, 3, 4) keeps its shape; rows sum to 0, blocked keys get 0, and shifting grad_p changes nothing")


# ---------------------------------------------------------------- step 3
def _loss_gradients(Q, K, V, G, mask, scale):
    """Central differences of L = Σ G ⊙ attention_forward(Q, K, V) with respect to Q, K and V."""
    def loss_of(position):
        def loss(x):
            args = [Q, K, V]
            args[position] = x
            return float(np.sum(G * attention_forward(*args, mask=mask, scale=scale)))
        return loss
    return tuple(_central_differences(loss_of(i), a) for i, a in enumerate((Q, K, V)))


@_self_check
def check_attention_backward(attention_backward: Callable) -> None:
    """Self-check ``attention_backward``: worked cases, then central differences on broadcast batches with masks.

    The learner's function: ``Q`` (..., T_q, d_k), ``K`` (..., T_k, d_k), ``V`` (..., T_k, d_v), ``grad_out`` (...,
    T_q, d_v), float, ``mask`` and ``scale`` as in the forward pass; returns ``(dQ, dK, dV)`` with the shapes of Q,
    K, V.

    Fails when the result is not a tuple (dQ, dK, dV), a query row with no allowed key gets a non-zero dQ row, or a
    gradient differs from central differences of the given attention_forward.
    """
    rng = np.random.default_rng(68)
    Q, K, V, G = rng.normal(size=(2, 3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)), rng.normal(size=(2, 3, 2))
    mask = rng.random((2, 3, 5)) < 0.7
    mask[..., 0] = True
    mask[1, 2] = False  # a query with no allowed key
    for scale in (True, 2.5):
        result = call(attention_backward, Q, K, V, G, mask=mask, scale=scale)
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            fail(f"attention_backward should return a tuple (dQ, dK, dV); it returned {type(result).__name__}")
        names = ("dQ", "dK", "dV")
        grads = [float_array(f"{name} (Q (2, 3, 4), K (5, 4) and V (5, 2) shared by the batch)", value, wanted.shape,
                             sep=", but ", finite=True)
                 for name, value, wanted in zip(names, result, (Q, K, V))]
        if np.any(grads[0][1, 2] != 0):
            fail("a query row with no allowed key has a constant (zero) output, so its dQ row must be exactly 0")
        for name, mine, numeric in zip(names, grads, _loss_gradients(Q, K, V, G, mask, scale)):
            error = _mismatch(mine, numeric)
            if error > (1e-4 if mine.dtype.itemsize < 8 else 1e-6):
                fail(f"{name} differs from central differences of the given attention_forward (mask, scale={scale!r}): "
                     f"relative error {error:.2g} > 1e-6")
    ok("dQ, dK, dV keep the shapes of broadcast inputs (K and V summed over the batch), a fully masked query gets "
       "dQ = 0, and all three match central differences, for scale=True and for a divisor")


# ---------------------------------------------------------------- step 4
@_self_check
def check_numerical_gradient(numerical_gradient: Callable) -> None:
    """Self-check ``numerical_gradient(f, x, eps)``: worked cases, then a loss whose gradient is known exactly.

    The learner's function: ``f`` (a scalar function of an array), ``x`` (any shape, float) and ``eps``; returns the
    central-difference gradient, float64, shape of ``x``.

    Fails when ``x`` is modified, or with the default eps the result is off the exact gradient of a cubic loss by a
    relative error over 1e-6.
    """
    rng = np.random.default_rng(69)
    loss = CubicLoss(*(rng.normal(size=(3, 2)) for _ in range(4)))
    x = rng.normal(size=(3, 2))
    grad = float_array("numerical_gradient(f, x) for x of shape (3, 2)", call(numerical_gradient, loss, x), (3, 2),
                       sep=", but ", finite=True)
    error = _mismatch(grad, loss.gradient(x))
    if error > 1e-6:
        fail(f"with the default eps the central differences should match the exact gradient of a cubic within a "
             f"relative error of 1e-6; yours is off by {error:.2g}")
    ok("with the default eps it matches the exact gradient of a cubic loss (relative error ≤ 1e-6) and leaves x as it was")


# ---------------------------------------------------------------- step 5
@_self_check
def check_relative_error(relative_error: Callable) -> None:
    """Self-check ``relative_error(analytic, numerical)``: worked cases, then 0, 1, symmetry on 3-D arrays.

    The learner's function: two arrays ``analytic`` and ``numerical`` of one shape; returns ‖a − n‖₂ / max(‖a‖₂,
    ‖n‖₂) as a float (0 when both are 0).

    Fails when the result is not one number for whole arrays, equal arrays do not give 0, an array against zeros
    does not give 1, or swapping the arguments changes the result.
    """
    rng = np.random.default_rng(70)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    values = [call(relative_error, *pair) for pair in ((a, a), (a, np.zeros_like(a)), (a, b), (b, a))]
    if not all(isinstance(v, (float, np.floating)) or (isinstance(v, np.ndarray) and v.shape == ()) for v in values):
        fail(f"relative_error should return one number for whole arrays; it returned {type(values[2]).__name__}")
    same, against_zero, ab, ba = (float(v) for v in values)
    if same != 0.0:
        fail(f"relative_error(a, a) should be 0; it is {same:.4g}")
    if not np.isclose(against_zero, 1.0):
        fail(f"relative_error(a, 0) should be 1 (‖a − 0‖ / ‖a‖); it is {against_zero:.4g}")
    if not np.isclose(ab, ba):
        fail(f"relative_error should be symmetric: relative_error(a, b) = {ab:.4g} but relative_error(b, a) = {ba:.4g}")
    ok("one number for (2, 3, 4) arrays: 0 for equal arrays, 1 against zeros, and the same both ways round")
