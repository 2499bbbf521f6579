"""Reference solution for assignment 6: gradients through the softmax and scaled dot-product attention.

Forward pass (Vaswani et al. 2017, "Attention Is All You Need", §3.2.1, eq. 1,
with assignment 4's masking convention)::

    S = Q Kᵀ / c,    P = masked_softmax(S, mask),    O = P V

where the divisor ``c`` is √d_k (``scale=True``), 1 (``scale=False``) or a
given positive number (e.g. d_k, to compare the scalings of §3.2.1). Masks are
boolean, True meaning "this query may attend to this key". A query row with
no allowed key gets **zero weights and a zero output row** (assignment 4,
:func:`autograder.assignments.a04_masking.reference.masked_softmax`, like PyTorch's
``_safe_softmax``): its output is the constant 0, whatever Q, K and V are.

Backward pass, for a scalar loss L and the upstream gradient G = ∂L/∂O
(the chain rule applied to each line of the forward pass, right to left)::

    dV = Pᵀ G                                  ∂L/∂V
    dP = G Vᵀ                                  ∂L/∂P
    dS = P ⊙ (dP − rowsum(dP ⊙ P))             ∂L/∂S, softmax backward row by row
    dQ = dS K / c                              ∂L/∂Q
    dK = dSᵀ Q / c                             ∂L/∂K

The softmax backward is the Jacobian-vector product with
J = ∂p/∂s = diag(p) − p pᵀ (symmetric, so Jᵀ g = J g); it never forms J.
A blocked entry has P = 0, so dS = 0 there: no gradient flows through a
blocked position, and a fully masked row contributes nothing to dQ, dK or dV.

Leading (batch or head) axes broadcast as in :mod:`autograder.assignments.a01_attention.reference`; each
gradient is summed back to the shape of its input (a K shared by every head
receives the sum of the heads' gradients).

This file is the grader's ground truth; students never receive it.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from autograder.assignments.a01_attention.reference import attention_scores
from autograder.assignments.a04_masking.reference import masked_softmax
from autograder.assignments.validation import as_float_array, broadcast_mask, require_same

#: How far a row of ``p`` may sum from 1 and still count as probabilities (as in
#: :func:`autograder.assignments.a01_attention.reference.attention_entropy`); float32 softmax rows over
#: thousands of keys round by about 1e-5.
ROW_SUM_TOLERANCE = 1e-4


def as_probability_rows(name: str, p) -> np.ndarray:
    """``p`` as a float array whose rows (last axis) are probabilities or all zero.

    Parameters
    ----------
    name : str
        Argument name used in the error message.
    p : array_like, shape (..., n), float

    Returns
    -------
    numpy.ndarray, shape (..., n), floating dtype of ``p`` (integers become float64)

    Raises
    ------
    ValueError
        If ``p`` is 0-dimensional, not real, has an empty last axis, holds a
        negative or non-finite entry, or a row whose sum is neither 1 (within
        :data:`ROW_SUM_TOLERANCE`) nor exactly 0.
    """
    p = as_float_array(name, p, min_ndim=1, expected="(..., n)")
    if p.shape[-1] == 0:
        raise ValueError(f"{name} must have shape (..., n) with n >= 1; received shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{name} must hold finite probabilities; received NaN or infinite entries "
                         f"(shape {p.shape})")
    if np.any(p < 0):
        raise ValueError(f"{name} must hold probabilities (the softmax output, not the scores); received a "
                         f"negative entry {float(p.min())!r} (shape {p.shape})")
    sums = p.sum(axis=-1)
    good = (np.abs(sums - 1.0) <= ROW_SUM_TOLERANCE) | (sums == 0)
    if not np.all(good):
        worst = float(sums[~good].flat[0])
        raise ValueError(f"each row of {name} (last axis) must sum to 1 (the softmax of one row) or be all 0 "
                         f"(a fully masked row); received a row summing to {worst:.6g} (shape {p.shape})")
    return p


def softmax_jacobian(p):
    """Jacobian of the softmax at each row: J = diag(p) − p pᵀ.

    For p = softmax(s), ``J[..., i, j] = ∂p_i / ∂s_j = p_i (δ_ij − p_j)``. J is
    symmetric, each of its rows and columns sums to 0 (adding a constant to
    every score changes nothing: J 1 = 0), and it is positive semi-definite
    with eigenvalues in [0, max_i p_i]. An all-zero row (a fully masked row
    under assignment 4's convention, whose output is constant) has J = 0.

    Parameters
    ----------
    p : array_like, shape (..., n), float
        Softmax probabilities; each row (last axis) sums to 1, or is all 0.

    Returns
    -------
    numpy.ndarray, shape (..., n, n), floating dtype of ``p``
        One n × n Jacobian per row of ``p``.

    Raises
    ------
    ValueError
        If ``p`` is 0-dimensional, not real, has an empty last axis, or holds
        entries that are negative or not finite, or a row whose sum is
        neither 1 (within 1e-4) nor 0.

    References
    ----------
    The softmax's derivative, e.g. Goodfellow, Bengio & Courville (2016),
    *Deep Learning*, §6.2.2.3; Vaswani et al. (2017) §3.2.1 for its role in attention.
    """
    p = as_probability_rows("p", p)
    n = p.shape[-1]
    return p[..., :, None] * np.eye(n, dtype=p.dtype) - p[..., :, None] * p[..., None, :]


def softmax_backward(p, grad_p):
    """Gradient reaching the scores through a softmax: p ⊙ (g − ⟨g, p⟩), without forming the Jacobian.

    If p = softmax(s) along the last axis and g = ∂L/∂p, then
    ``∂L/∂s_j = Σ_i g_i J_ij = p_j (g_j − Σ_i g_i p_i)`` (J = diag(p) − p pᵀ is
    symmetric, so this is also J g). It costs O(n) per row instead of the
    O(n²) of ``softmax_jacobian(p) @ g``. Where p_j = 0 (a blocked key) the
    gradient is exactly 0.

    Parameters
    ----------
    p : array_like, shape (..., n), float
        Softmax probabilities; each row sums to 1, or is all 0 (fully masked).
    grad_p : array_like, shape of ``p``, float
        Upstream gradient ∂L/∂p.

    Returns
    -------
    numpy.ndarray, shape of ``p``, float (NumPy's promotion of both dtypes)
        ∂L/∂s. Each row sums to 0 (for rows of p that sum to 1).

    Raises
    ------
    ValueError
        If ``p`` is not a valid array of probability rows (see
        :func:`softmax_jacobian`) or ``grad_p`` is not real or does not have
        exactly the shape of ``p``.
    """
    p = as_probability_rows("p", p)
    grad_p = as_float_array("grad_p", grad_p, min_ndim=1, expected=f"the shape of p, {p.shape}")
    if grad_p.shape != p.shape:
        raise ValueError(f"grad_p must have the shape of p, {p.shape} (one gradient per probability); "
                         f"received shape {grad_p.shape}")
    inner = np.sum(grad_p * p, axis=-1, keepdims=True)  # ⟨g, p⟩ per row: sum over the keys
    return p * (grad_p - inner)


def _divisor(scale, d_k: int) -> float:
    """The number the scores are divided by: √d_k, 1 or a positive finite divisor; ValueError otherwise."""
    if isinstance(scale, (bool, np.bool_)):
        return math.sqrt(d_k) if scale else 1.0
    if isinstance(scale, (int, float, np.integer, np.floating)) and math.isfinite(scale) and scale > 0:
        return float(scale)
    raise ValueError("scale must be True (divide the scores by √d_k), False (no scaling) or a positive finite "
                     f"divisor such as d_k; received {scale!r}")


class _Forward(NamedTuple):
    """What the backward pass needs from the forward pass."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    weights: np.ndarray   # (..., T_q, T_k), broadcast batch shape
    output: np.ndarray    # (..., T_q, d_v)
    divisor: float


def _forward(Q, K, V, mask, scale) -> _Forward:
    K = as_float_array("K", K, min_ndim=2, expected="(..., T_k, d_k)")
    V = as_float_array("V", V, min_ndim=2, expected="(..., T_k, d_v)")
    require_same("K.shape[-2]", K.shape[-2], "V.shape[-2]", V.shape[-2], "T_k")
    if V.shape[-1] == 0:
        raise ValueError(f"V must have shape (..., T_k, d_v) with d_v >= 1; received shape {V.shape}")
    raw = attention_scores(Q, K, scale=False)  # checks Q and K: shapes, d_k, batch axes
    Q = as_float_array("Q", Q, min_ndim=2, expected="(..., T_q, d_k)")
    divisor = _divisor(scale, Q.shape[-1])
    scores = raw / divisor  # a Python float keeps float32 inputs float32
    try:
        np.broadcast_shapes(scores.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"the leading (batch) dimensions of V {V.shape[:-2]} must broadcast with those of the "
                         f"scores {scores.shape[:-2]}; received V.shape={V.shape}") from None
    batch = np.broadcast_shapes(scores.shape[:-2], V.shape[:-2])
    scores = np.broadcast_to(scores, batch + scores.shape[-2:])
    allowed = np.ones(scores.shape, dtype=bool) if mask is None else broadcast_mask(mask, scores.shape)
    weights = masked_softmax(scores, allowed)
    return _Forward(Q, K, V, weights, weights @ V, divisor)


def attention_forward(Q, K, V, mask=None, scale=True):
    """Scaled dot-product attention with a choice of divisor, the forward pass :func:`attention_backward` differentiates.

    ``output = masked_softmax(Q Kᵀ / c, mask) V`` with c = √d_k, 1 or ``scale``
    (Vaswani et al. 2017, eq. 1). A query row with no allowed key gets zero
    weights and a zero output (assignment 4's convention), not an error.

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k), float
    K : array_like, shape (..., T_k, d_k), float
    V : array_like, shape (..., T_k, d_v), float
        Leading dimensions of the three broadcast.
    mask : array_like of bool, broadcastable to (..., T_q, T_k), optional
        True where query i may attend to key j.
    scale : bool or float, default True
        True divides the scores by √d_k, False by 1, a positive finite number
        by that number (``scale=d_k`` is the "÷d_k" scaling).

    Returns
    -------
    output : numpy.ndarray, shape (..., T_q, d_v), float
    weights : numpy.ndarray, shape (..., T_q, T_k), float
        Rows sum to 1, or are all 0 for fully masked query rows.

    Raises
    ------
    ValueError
        If d_k of Q and K or T_k of K and V differ, a size is 0, the batch
        dimensions do not broadcast, ``mask`` is not boolean or does not
        broadcast to (..., T_q, T_k), ``scale`` is neither a boolean nor a
        positive finite number, or the scores contain NaN or +inf.
    """
    forward = _forward(Q, K, V, mask, scale)
    return forward.output, forward.weights


def _sum_to_shape(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum a gradient over the axes that broadcasting added or stretched, back to the input's ``shape``."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad


def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    """Gradients of a loss with respect to Q, K and V through scaled dot-product attention.

    With S = Q Kᵀ / c, P = masked_softmax(S, mask), O = P V and G = ∂L/∂O::

        dV = Pᵀ G,   dP = G Vᵀ,   dS = P ⊙ (dP − rowsum(dP ⊙ P)),
        dQ = dS K / c,   dK = dSᵀ Q / c.

    Blocked positions (mask False) get no gradient: their weight is 0, so
    their dS entry is 0, and a key blocked for a query receives nothing from
    that query in dK or dV. A fully masked query row has a constant zero
    output, so its row of dQ is 0 and it contributes nothing to dK and dV.

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k), float
    K : array_like, shape (..., T_k, d_k), float
    V : array_like, shape (..., T_k, d_v), float
        Leading dimensions broadcast, as in the forward pass.
    grad_out : array_like, shape (..., T_q, d_v), float
        ∂L/∂output; its leading dimensions are the broadcast leading
        dimensions of Q, K and V (the forward output's shape).
    mask : array_like of bool, broadcastable to (..., T_q, T_k), optional
        True where query i may attend to key j.
    scale : bool or float, default True
        True divides the scores by √d_k, False by 1, a positive finite number
        by that number.

    Returns
    -------
    dQ : numpy.ndarray, shape of ``Q``, float
    dK : numpy.ndarray, shape of ``K``, float
    dV : numpy.ndarray, shape of ``V``, float
        Each summed over the axes along which its input was broadcast.

    Raises
    ------
    ValueError
        As :func:`attention_forward`, and if ``grad_out`` is not real or does
        not have the output's shape.

    References
    ----------
    Vaswani et al. (2017), §3.2.1, eq. 1 (the forward pass); the backward pass
    is the chain rule through it, as in the backward pass of FlashAttention
    (Dao et al. 2022, Algorithm 4 / Appendix B.2, there without the mask).
    """
    forward = _forward(Q, K, V, mask, scale)
    G = as_float_array("grad_out", grad_out, min_ndim=2, expected=f"the output's shape (..., T_q, d_v) = "
                                                                  f"{forward.output.shape}")
    if G.shape != forward.output.shape:
        raise ValueError(f"grad_out must have the output's shape (..., T_q, d_v) = {forward.output.shape}; "
                         f"received shape {G.shape}")
    P = forward.weights
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(forward.V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    dQ = dS @ forward.K / forward.divisor
    dK = np.swapaxes(dS, -1, -2) @ forward.Q / forward.divisor
    return (_sum_to_shape(dQ, forward.Q.shape), _sum_to_shape(dK, forward.K.shape),
            _sum_to_shape(dV, forward.V.shape))


def numerical_gradient(f: Callable, x, eps=1e-6):
    """Gradient of a scalar function by central differences: (f(x + ε eᵢ) − f(x − ε eᵢ)) / 2ε per entry.

    The error of a central difference is O(ε²) from truncation plus about
    ε_machine · |f| / ε from rounding; with ε = 1e-6 in float64 both are far
    below 1e-6 relative to gradients of order 1. ``x`` is copied to float64
    first (in float32 the rounding term would be ~0.1). ``f`` receives a fresh
    copy at every call, so it may modify its argument.

    Parameters
    ----------
    f : callable
        ``f(array) -> float``: the loss, a real scalar (Python number or 0-d
        array) for an array of ``x``'s shape.
    x : array_like, shape (...), float
        Point at which to differentiate.
    eps : float, default 1e-6
        Step ε, positive and finite.

    Returns
    -------
    numpy.ndarray, shape of ``x``, float64
        ∂f/∂x, one central difference per entry (2 · x.size calls of ``f``).

    Raises
    ------
    ValueError
        If ``f`` is not callable, ``x`` is not real, ``eps`` is not a positive
        finite number, or ``f`` returns something that is not a real scalar.
    """
    if not callable(f):
        raise ValueError(f"f must be a function of one array returning a scalar loss; received {f!r}")
    if isinstance(eps, (bool, np.bool_)) or not isinstance(eps, (int, float, np.integer, np.floating)) \
            or not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be a positive finite step such as 1e-6; received {eps!r}")
    x = as_float_array("x", x, min_ndim=0, expected="(...)").astype(np.float64)
    grad = np.empty_like(x)
    for index in np.ndindex(*x.shape):
        values = []
        for step in (eps, -eps):
            shifted = x.copy()
            shifted[index] += step
            values.append(_scalar(f(shifted)))
        grad[index] = (values[0] - values[1]) / (2 * eps)
    return grad


def _scalar(value) -> float:
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in "biuf":
        raise ValueError(f"f must return a real scalar (the loss); it returned {type(value).__name__} with "
                         f"shape {array.shape} and dtype {array.dtype}")
    return float(array)


def relative_error(analytic, numerical):
    """Relative error between two gradients: ‖a − n‖₂ / max(‖a‖₂, ‖n‖₂), and 0 when both are 0.

    One number for the whole array (Frobenius norms), so that entries that
    are exactly 0 in both (blocked positions) do not divide 0 by 0, as the
    entry-wise |aᵢ − nᵢ| / max(|aᵢ|, |nᵢ|) would. It is at most 1 unless
    the two point in opposite directions (then up to 2).

    Parameters
    ----------
    analytic, numerical : array_like, same shape, float

    Returns
    -------
    float
        In [0, 2].

    Raises
    ------
    ValueError
        If either is not real or their shapes differ.
    """
    a = as_float_array("analytic", analytic, min_ndim=0, expected="(...)").astype(np.float64)
    n = as_float_array("numerical", numerical, min_ndim=0, expected=f"the shape of analytic, {a.shape}")
    if a.shape != n.shape:
        raise ValueError(f"numerical must have the shape of analytic, {a.shape}; received shape {n.shape}")
    scale = max(float(np.linalg.norm(a)), float(np.linalg.norm(n)))
    return 0.0 if scale == 0 else float(np.linalg.norm(a - n)) / scale


class GradientCheck(NamedTuple):
    """Result of :func:`check_gradient`."""

    relative_error: float        #: :func:`relative_error` of the analytic against the numerical gradient
    max_abs_difference: float    #: largest |analytic − numerical| over the entries
    passed: bool                 #: relative_error <= tol
    numerical: np.ndarray        #: the central-difference gradient


def check_gradient(f: Callable, x, analytic, eps=1e-6, tol=1e-6) -> GradientCheck:
    """Compare an analytic gradient with central differences of ``f`` at ``x``.

    Parameters
    ----------
    f : callable
        ``f(array) -> float``, the loss (see :func:`numerical_gradient`).
    x : array_like, shape (...), float
        Point of the check.
    analytic : array_like, shape of ``x``, float
        The gradient to check (e.g. a ``dQ`` from :func:`attention_backward`).
    eps : float, default 1e-6
        Central-difference step.
    tol : float, default 1e-6
        Largest accepted :func:`relative_error`; 1e-6 suits float64 at ε = 1e-6.

    Returns
    -------
    GradientCheck

    Raises
    ------
    ValueError
        As :func:`numerical_gradient` and :func:`relative_error`, and if ``tol``
        is not a positive finite number.
    """
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, (int, float, np.integer, np.floating)) \
            or not math.isfinite(tol) or tol <= 0:
        raise ValueError(f"tol must be a positive finite number such as 1e-6; received {tol!r}")
    numerical = numerical_gradient(f, x, eps=eps)
    error = relative_error(analytic, numerical)
    difference = float(np.max(np.abs(np.asarray(analytic, dtype=np.float64) - numerical), initial=0.0))
    return GradientCheck(error, difference, error <= tol, numerical)
