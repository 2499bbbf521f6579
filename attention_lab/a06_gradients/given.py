"""Code assignment 6 gives the learner: summing a broadcast gradient back to its input's shape.

The assignment is about the calculus of attention's backward pass, not about NumPy's reduction
rules, so this helper is given (imported at the top of the ``attention_backward`` answer cell).
"""

from __future__ import annotations

import numpy as np


def sum_to_shape(grad, shape):
    """Sum a gradient over the axes that broadcasting added or stretched, back to ``shape``.

    When an input of shape ``shape`` was broadcast in the forward pass (a K shared by every head,
    shape (T_k, d_k), against queries (B, H, T_q, d_k)), its gradient is the sum of the gradients of
    all its broadcast copies.

    Parameters
    ----------
    grad : numpy.ndarray, shape broadcast from ``shape`` (..., *shape-like)
        The gradient with respect to the broadcast input.
    shape : tuple of int
        The input's own shape.

    Returns
    -------
    numpy.ndarray of ``shape``, the dtype of ``grad``

    Raises
    ------
    ValueError
        If ``grad`` cannot have been broadcast from ``shape``.
    """
    grad = np.asarray(grad)
    shape = tuple(int(n) for n in shape)
    try:
        np.broadcast_shapes(shape, grad.shape)
    except ValueError:
        raise ValueError(f"grad of shape {grad.shape} was not broadcast from shape {shape}") from None
    if len(shape) > grad.ndim or np.broadcast_shapes(shape, grad.shape) != grad.shape:
        raise ValueError(f"grad of shape {grad.shape} was not broadcast from shape {shape}")
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def attention_forward(Q, K, V, mask=None, scale=True):
    """Scaled dot-product attention O = softmax(mask(Q Kᵀ / c)) V, the forward pass ``attention_backward`` differentiates.

    Given code (Vaswani et al. 2017, eq. 1), with this assignment's conventions: c = √d_k for
    ``scale=True``, 1 for ``False``, the number itself for a positive number; a query row with no
    allowed key gets zero weights and a zero output row (assignment 4's rule).

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k)
    K : array_like, shape (..., T_k, d_k)
    V : array_like, shape (..., T_k, d_v)
    mask : array_like of bool, broadcastable to (..., T_q, T_k), optional
        True = may attend.
    scale : bool or positive float

    Returns
    -------
    numpy.ndarray, shape (..., T_q, d_v), float64

    Raises
    ------
    ValueError
        If ``scale`` is neither a bool nor a positive finite number.
    """
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    if isinstance(scale, (bool, np.bool_)):
        c = np.sqrt(Q.shape[-1]) if scale else 1.0
    elif isinstance(scale, (int, float, np.integer, np.floating)) and np.isfinite(scale) and scale > 0:
        c = float(scale)
    else:
        raise ValueError(f"scale must be True, False or a positive finite number; received {scale!r}")
    scores = Q @ np.swapaxes(K, -1, -2) / c
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return (e / np.where(total > 0, total, 1.0)) @ V
