"""Reference solution for assignment 2: multi-head attention in NumPy.

Vaswani et al. (2017), "Attention Is All You Need", https://arxiv.org/abs/1706.03762 ,
section 3.2.2:

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V).

Here the h per-head projections (d_model, d_head) are the column blocks of one
(d_model, d_model) matrix per role, so projecting once and then splitting the
columns into heads is the same as projecting per head. d_head = d_model / h,
and each head is scaled by √d_head.

This file is the grader's ground truth; it never reaches ``source/``,
``release/`` or the student package.
"""

from __future__ import annotations

import numpy as np

from autograder.assignments.a01_attention.reference import scaled_dot_product_attention
from autograder.assignments.validation import as_float_array, require_positive_int


def split_heads(X, n_heads):
    """Split the feature axis of ``X`` into ``n_heads`` heads: (T, d_model) → (n_heads, T, d_head).

    Head h holds columns ``h·d_head … (h+1)·d_head − 1`` of every token row, so
    each head sees all T tokens, a slice of each token's features.

    Parameters
    ----------
    X : array_like, shape (T, d_model), float
        One sequence of T token vectors (or their projections).
    n_heads : int
        Number of heads, ≥ 1, dividing d_model.

    Returns
    -------
    numpy.ndarray, shape (n_heads, T, d_head), same floating dtype as ``X``
        ``H[h, t] = X[t, h*d_head:(h+1)*d_head]`` with d_head = d_model / n_heads.

    Raises
    ------
    ValueError
        If ``X`` is not a 2-D real array, ``n_heads`` is not an integer ≥ 1,
        or d_model is not divisible by ``n_heads``.
    """
    X = _matrix("X", X, "(T, d_model)")
    n_heads = require_positive_int("n_heads", n_heads)
    T, d_model = X.shape
    if d_model % n_heads:
        raise ValueError(f"d_model = X.shape[1] = {d_model} must be divisible by n_heads = {n_heads} "
                         f"(each head gets d_model / n_heads features); received X.shape={X.shape}")
    return X.reshape(T, n_heads, d_model // n_heads).transpose(1, 0, 2)


def merge_heads(H):
    """Concatenate the heads back along the feature axis: (n_heads, T, d_head) → (T, d_model).

    The inverse of :func:`split_heads`: token t's row is head 0's features of
    token t, then head 1's, … (the Concat of §3.2.2).

    Parameters
    ----------
    H : array_like, shape (n_heads, T, d_head), float

    Returns
    -------
    numpy.ndarray, shape (T, n_heads·d_head), same floating dtype as ``H``

    Raises
    ------
    ValueError
        If ``H`` is not a 3-D real array with non-empty axes.
    """
    H = as_float_array("H", H, min_ndim=3, expected="(n_heads, T, d_head)")
    if H.ndim != 3 or 0 in H.shape:
        raise ValueError(f"H must have shape (n_heads, T, d_head) with every size >= 1; received shape {H.shape}")
    n_heads, T, d_head = H.shape
    return H.transpose(1, 0, 2).reshape(T, n_heads * d_head)


def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    """Multi-head self-attention (Vaswani et al. 2017, §3.2.2).

    Q, K, V = x W_q, x W_k, x W_v, each split into ``n_heads`` heads; every
    head runs scaled dot-product attention scaled by √d_head; the heads are
    merged and projected by W_o.

    Parameters
    ----------
    x : array_like, shape (T, d_model), float
        One sequence of T token vectors.
    W_q, W_k, W_v, W_o : array_like, shape (d_model, d_model), float
        Projections applied on the right (``x @ W``). Columns
        ``h·d_head … (h+1)·d_head − 1`` of W_q, W_k, W_v are head h's
        projections; rows of W_o in that range read head h's output.
    n_heads : int
        Number of heads, ≥ 1, dividing d_model.
    mask : array_like of bool, broadcastable to (n_heads, T, T), optional
        True where query i may attend to key j (usually one (T, T) mask
        shared by all heads). Every query must be allowed at least one key.

    Returns
    -------
    output : numpy.ndarray, shape (T, d_model), float
    weights : numpy.ndarray, shape (n_heads, T, T), float
        Each head's attention weights; every row sums to 1.

    Raises
    ------
    ValueError
        If ``x`` is not (T, d_model), a projection is not (d_model, d_model),
        ``n_heads`` does not divide d_model, or the mask is not boolean, does
        not broadcast or blocks every key of a query.
    """
    x = _matrix("x", x, "(T, d_model)")
    d_model = x.shape[1]
    projections = []
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o)):
        W = _matrix(name, W, f"(d_model, d_model) = ({d_model}, {d_model})")
        if W.shape != (d_model, d_model):
            raise ValueError(f"{name} must have shape (d_model, d_model) = ({d_model}, {d_model}) with d_model "
                             f"from x; received shape {W.shape}")
        projections.append(W)
    W_q, W_k, W_v, W_o = projections
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(heads) @ W_o, weights


def _matrix(name: str, value, expected: str) -> np.ndarray:
    array = as_float_array(name, value, min_ndim=2, expected=expected)
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{name} must have shape {expected} with every size >= 1; received shape {array.shape}")
    return array
