"""Reference solution for assignment 1: scaled dot-product attention in NumPy.

Notation follows Vaswani et al. (2017), "Attention Is All You Need",
https://arxiv.org/abs/1706.03762 , section 3.2.1, equation (1):

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

Shapes: ``Q (..., T_q, d_k)``, ``K (..., T_k, d_k)``, ``V (..., T_k, d_v)``;
``...`` is any number of leading batch (or head) dimensions that broadcast.
Masks are boolean with True meaning "this query may attend to this key".

This file is the grader's ground truth. It is never copied into ``source/``
or ``release/`` and the student-facing package does not import it.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.assignments.validation import (
    as_float_array,
    broadcast_mask,
    keys_and_values,
    require_axis,
    require_batch_broadcast,
    require_bool,
    require_positive_int,
    require_same,
)


def softmax(x, axis=-1):
    """Numerically stable softmax.

    softmax(x)_i = exp(x_i − max_j x_j) / Σ_j exp(x_j − max_j x_j); subtracting
    the maximum leaves the result unchanged (softmax is shift-invariant) and
    keeps ``exp`` from overflowing, so logits of size 1e4 are fine.

    Parameters
    ----------
    x : array_like, shape (...), float
        Logits. ``-inf`` entries get probability 0.
    axis : int, default -1
        Axis along which the probabilities sum to 1.

    Returns
    -------
    numpy.ndarray, same shape and floating dtype as ``x``
        Non-negative, sums to 1 along ``axis``.

    Raises
    ------
    ValueError
        If ``x`` is 0-dimensional, not numeric or masked, has no entries along
        ``axis``, or has a slice that is all −inf; or ``axis`` is not an
        integer in range.
    """
    x = as_float_array("x", x, min_ndim=1, expected="(...) with at least one axis")
    axis = require_axis("axis", axis, x.ndim, x.shape)
    if x.shape[axis] == 0:
        raise ValueError(f"x must have at least one entry along axis {axis}; received shape {x.shape}")
    top = np.max(x, axis=axis, keepdims=True)
    if np.any(top == -np.inf):
        raise ValueError("x has a slice along `axis` whose entries are all -inf: its probabilities would be 0/0")
    shifted = x - top
    exps = np.exp(shifted)
    return exps / np.sum(exps, axis=axis, keepdims=True)


def attention_scores(Q, K, scale=True):
    """Attention logits Q Kᵀ, divided by √d_k when ``scale`` (Vaswani et al. 2017, eq. 1).

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k), float
        Queries.
    K : array_like, shape (..., T_k, d_k), float
        Keys; leading dimensions broadcast against those of ``Q``.
    scale : bool, default True
        Divide by √d_k so that the scores keep unit variance when the
        entries of q and k do (the dot product of two d_k-vectors of
        unit-variance entries has variance d_k).

    Returns
    -------
    numpy.ndarray, shape (..., T_q, T_k), float
        ``scores[..., i, j] = q_i · k_j (/ √d_k)``.

    Raises
    ------
    ValueError
        If ``Q`` or ``K`` has fewer than 2 dimensions or an empty axis, their
        last axes (d_k) differ, their leading dimensions do not broadcast, or
        ``scale`` is not a boolean.
    """
    Q = as_float_array("Q", Q, min_ndim=2, expected="(..., T_q, d_k)")
    K = as_float_array("K", K, min_ndim=2, expected="(..., T_k, d_k)")
    require_same("Q.shape[-1]", Q.shape[-1], "K.shape[-1]", K.shape[-1], "d_k")
    scale = require_bool("scale", scale)
    for name, array, axis_name in (("Q", Q, "T_q"), ("K", K, "T_k")):
        if array.shape[-2] == 0 or array.shape[-1] == 0:
            raise ValueError(f"{name} must have {axis_name} >= 1 and d_k >= 1; received shape {array.shape}")
    try:
        np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch) dimensions of Q {Q.shape[:-2]} and K {K.shape[:-2]} must broadcast; "
            f"received Q.shape={Q.shape} and K.shape={K.shape}"
        ) from None
    scores = Q @ np.swapaxes(K, -1, -2)
    if scale:
        scores = scores / math.sqrt(Q.shape[-1])  # a Python float keeps float32 inputs float32
    return scores


def causal_mask(T):
    """Causal (look-ahead) mask for self-attention over ``T`` positions.

    Parameters
    ----------
    T : int
        Sequence length, ≥ 1.

    Returns
    -------
    numpy.ndarray of bool, shape (T, T)
        ``mask[i, j]`` is True when query position i may attend to key
        position j, i.e. when j ≤ i (the diagonal is allowed).

    Raises
    ------
    ValueError
        If ``T`` is not an integer ≥ 1.
    """
    T = require_positive_int("T", T)
    return np.tril(np.ones((T, T), dtype=bool))


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    """Scaled dot-product attention, softmax(Q Kᵀ / √d_k) V (Vaswani et al. 2017, eq. 1).

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k), float
    K : array_like, shape (..., T_k, d_k), float
    V : array_like, shape (..., T_k, d_v), float
    mask : array_like of bool, broadcastable to (..., T_q, T_k), optional
        True where query i may attend to key j. Blocked scores are set to
        −inf before the softmax, so they get weight exactly 0. Every query
        must be allowed at least one key.
    scale : bool, default True
        Divide the scores by √d_k.

    Returns
    -------
    output : numpy.ndarray, shape (..., T_q, d_v), float
        Each row is a weighted average of the rows of ``V``.
    weights : numpy.ndarray, shape (..., T_q, T_k), float
        Attention weights; non-negative, each row sums to 1.

    Raises
    ------
    ValueError
        If shapes are inconsistent (d_k of Q and K, T_k of K and V, batch
        dimensions), the mask is not boolean or does not broadcast, or a
        query row is fully masked (its weights would be 0/0).
    """
    K, V = keys_and_values(K, V)
    scores = attention_scores(Q, K, scale=scale)
    require_batch_broadcast(scores, V)
    if mask is not None:
        mask = broadcast_mask(mask, scores.shape)
        if not mask.any(axis=-1).all():
            raise ValueError("mask blocks every key for at least one query row; each row needs one True entry")
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def causal_self_attention(x, W_q, W_k, W_v, scale=True):
    """Single-head causal self-attention: project x to Q, K, V, then attend causally.

    Q = x W_q, K = x W_k, V = x W_v, output = softmax(mask(Q Kᵀ / √d_head)) V.

    Parameters
    ----------
    x : array_like, shape (T, d_model), float
        One sequence of T token vectors.
    W_q, W_k, W_v : array_like, shape (d_model, d_head), float
        Projection matrices (applied on the right, ``x @ W``).
    scale : bool, default True
        Divide the scores by √d_head.

    Returns
    -------
    output : numpy.ndarray, shape (T, d_head), float
    weights : numpy.ndarray, shape (T, T), float
        Lower-triangular; row i sums to 1 over keys 0..i.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D, or a projection is not 2-D with d_model rows,
        or the three projections disagree on d_head.
    """
    x = as_float_array("x", x, min_ndim=2, expected="(T, d_model)")
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x must have shape (T, d_model) with T >= 1 and d_model >= 1; received shape {x.shape}")
    d_model = x.shape[1]
    weights_in = {}
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        W = as_float_array(name, W, min_ndim=2, expected=f"(d_model, d_head) = ({d_model}, d_head)")
        if W.ndim != 2 or W.shape[0] != d_model:
            raise ValueError(
                f"{name} must have shape (d_model, d_head) with d_model={d_model} (from x); received shape {W.shape}"
            )
        weights_in[name] = W
    require_same("W_q.shape[1]", weights_in["W_q"].shape[1], "W_k.shape[1]", weights_in["W_k"].shape[1], "d_head")
    require_same("W_q.shape[1]", weights_in["W_q"].shape[1], "W_v.shape[1]", weights_in["W_v"].shape[1], "d_head")
    Q, K, V = (x @ weights_in[name] for name in ("W_q", "W_k", "W_v"))
    return scaled_dot_product_attention(Q, K, V, mask=causal_mask(x.shape[0]), scale=scale)


def attention_entropy(weights):
    """Shannon entropy of each attention row, in nats, with 0 · log 0 = 0.

    H_i = −Σ_j w_ij ln w_ij. A row spread evenly over n keys has entropy
    ln n; a one-hot row has entropy 0.

    Parameters
    ----------
    weights : array_like, shape (..., T_q, T_k), float
        Attention weights; each row non-negative and summing to 1.

    Returns
    -------
    numpy.ndarray, shape (..., T_q), float
        Entropy per query row, in nats.

    Raises
    ------
    ValueError
        If ``weights`` has fewer than 2 dimensions, or rows that are not
        probabilities (negative or non-finite entries, sums other than 1).
    """
    weights = as_float_array("weights", weights, min_ndim=2, expected="(..., T_q, T_k)")
    if not np.all(np.isfinite(weights)):
        raise ValueError("weights must be finite probabilities; received NaN or infinite entries")
    if np.any(weights < 0):
        raise ValueError(f"weights must be non-negative probabilities; received minimum {weights.min()!r}")
    sums = weights.sum(axis=-1)
    if not np.allclose(sums, 1.0, rtol=0, atol=1e-4):
        worst = float(sums.flat[np.argmax(np.abs(sums - 1.0))])
        raise ValueError(f"each row of weights must sum to 1 (probabilities over the keys); a row sums to {worst:.6g}")
    safe = np.where(weights > 0, weights, 1.0)  # ln 1 = 0 makes 0·ln 0 contribute 0
    return -np.sum(weights * np.log(safe), axis=-1)
