"""Reference solution for assignment 4: padding masks, fully masked rows and numerical stability.

Conventions (as in assignment 1): masks are boolean with True meaning "this
query may attend to this key"; scores have shape ``(..., T_q, T_k)``.

* A batch of ``B`` sequences padded to a common length ``T`` has a **key
  padding mask** of shape ``(B, 1, T)``: True where the key is a real token.
  The middle axis of size 1 broadcasts over the query positions, so the mask
  blocks the padded keys in every row (the usual "key padding mask"; padded
  *query* rows are computed and ignored downstream).
* A row with no allowed key (a sequence of length 0, a query whose keys are
  all padding) has no softmax: ``0 / 0``. In this assignment such a row gets
  **zero weights and a zero output**, with no NaN and no warning, like
  PyTorch's ``_safe_softmax`` (pytorch/pytorch#131060). Filling blocked scores
  with −1e9 instead gives such a row uniform weights over the padding.

Attention is scaled dot-product attention (Vaswani et al. 2017, §3.2.1, eq. 1).

This file is the grader's ground truth; students never receive it.
"""

from __future__ import annotations

import numpy as np

from autograder.assignments.a01_attention.reference import attention_scores, causal_mask
from autograder.assignments.validation import (as_float_array, broadcast_mask, keys_and_values, require_axis,
                                               require_batch_broadcast, require_positive_int)


def _lengths(lengths, T: int) -> np.ndarray:
    """``lengths`` as a 1-D int64 array with every entry in [0, T]; ValueError otherwise."""
    array = np.asarray(lengths)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"lengths must have shape (B,) with B >= 1 (one length per sequence); "
                         f"received shape {array.shape}")
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        array = array.astype(np.int64)  # 3.0 is a length; 2.5 is not
    if array.dtype.kind not in "iu":
        raise ValueError(f"lengths must hold integers (one per sequence); received dtype {array.dtype}: "
                         f"{array.tolist()}")
    if np.any(array < 0) or np.any(array > T):
        raise ValueError(f"every length must be between 0 and T = {T}; received lengths {array.tolist()}")
    return array.astype(np.int64)


def padding_mask(lengths, T):
    """Key padding mask for a batch of sequences padded to length ``T``.

    Sequence ``b`` holds ``lengths[b]`` real tokens at positions
    ``0 … lengths[b] − 1``; the rest are padding.

    Parameters
    ----------
    lengths : array_like of int, shape (B,)
        Number of real tokens in each sequence, each in ``[0, T]``.
    T : int
        Padded length, ≥ 1.

    Returns
    -------
    numpy.ndarray of bool, shape (B, 1, T)
        ``mask[b, 0, j]`` is True when key position ``j`` is a real token of
        sequence ``b`` (``j < lengths[b]``). It broadcasts against scores of
        shape ``(B, T_q, T)``, blocking the padded keys in every query row.

    Raises
    ------
    ValueError
        If ``T`` is not an integer ≥ 1, or ``lengths`` is not a non-empty 1-D
        array of integers between 0 and ``T``.
    """
    T = require_positive_int("T", T)
    lengths = _lengths(lengths, T)
    return (np.arange(T) < lengths[:, None])[:, None, :]


def causal_padding_mask(lengths, T):
    """Causal mask combined with the key padding mask: ``(B, T, T)``, True where query i may attend to key j.

    ``mask[b, i, j] = (j ≤ i) and (j < lengths[b])``: no future key and no
    padded key. A padded query row ``i ≥ lengths[b]`` still sees the real
    tokens; every row of a sequence of length 0 is fully masked.

    Parameters
    ----------
    lengths, T
        As :func:`padding_mask`: real tokens in each sequence (B,), each in ``[0, T]``, and the padded length.

    Returns
    -------
    numpy.ndarray of bool, shape (B, T, T)

    Raises
    ------
    ValueError
        As :func:`padding_mask`.
    """
    return padding_mask(lengths, T) & causal_mask(T)


def masked_softmax(scores, mask, axis=-1):
    """Softmax over the allowed entries only; a slice with no allowed entry gives zeros.

    For each slice along ``axis``: weight_j = exp(s_j − m) / Σ_{allowed k} exp(s_k − m)
    for allowed j, 0 for blocked j, where m is the largest allowed score
    (subtracting it keeps ``exp`` from overflowing: e^x overflows above
    x = ln(max float) ≈ 11.1 in float16, 88.7 in float32 and 709.8 in
    float64). A slice whose entries are all blocked — or whose allowed scores
    are all −inf — is all zeros: no NaN, and no NumPy warning.

    Parameters
    ----------
    scores : array_like, shape (...), float
        Logits; −inf entries count as blocked. float16, float32 and float64
        keep their dtype (integers become float64).
    mask : array_like of bool, broadcastable to ``scores.shape``
        True where the entry may receive weight.
    axis : int, default -1
        Axis along which the weights sum to 1 (or are all 0).

    Returns
    -------
    numpy.ndarray, shape and dtype of ``scores``
        Non-negative; each slice along ``axis`` sums to 1 when it has an
        allowed entry and is all 0 otherwise. float16 inputs are exponentiated
        in float32 and rounded back, so no intermediate overflows.

    Raises
    ------
    ValueError
        If ``scores`` is 0-dimensional, not real, or contains NaN or +inf;
        ``mask`` is not boolean or does not broadcast to ``scores.shape``; or
        ``axis`` is out of range.
    """
    scores = as_float_array("scores", scores, min_ndim=1, expected="(...) with at least one axis")
    axis = require_axis("axis", axis, scores.ndim, scores.shape)
    if np.any(np.isnan(scores) | (scores == np.inf)):
        raise ValueError("scores must not contain NaN or +inf (blocked entries may be -inf)")
    mask = broadcast_mask(mask, scores.shape)
    x = np.where(mask, scores.astype(np.promote_types(scores.dtype, np.float32)), -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(top == -np.inf, 0.0, top)  # a fully blocked slice: any finite shift; all its exps are 0
    exps = np.exp(x - top)  # exp(-inf) = 0, without a warning
    total = np.sum(exps, axis=axis, keepdims=True)
    return (exps / np.where(total > 0, total, 1.0)).astype(scores.dtype)


def masked_attention(Q, K, V, mask):
    """Scaled dot-product attention with a mask, for T_q ≠ T_k and rows that may be fully masked.

    weights = masked_softmax(Q Kᵀ / √d_k, mask), output = weights V
    (Vaswani et al. 2017, §3.2.1, eq. 1). A query with no allowed key gets
    zero weights and therefore a zero output row.

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k), float
        Queries (in cross-attention: from the decoder).
    K : array_like, shape (..., T_k, d_k), float
        Keys (in cross-attention: from the encoder); T_k may differ from T_q.
    V : array_like, shape (..., T_k, d_v), float
        Values, one row per key.
    mask : array_like of bool, broadcastable to (..., T_q, T_k)
        True where query i may attend to key j, e.g. a key padding mask of
        shape (B, 1, T_k).

    Returns
    -------
    output : numpy.ndarray, shape (..., T_q, d_v), float
        Row i is the weighted average of the value rows, or 0 if query i has no allowed key.
    weights : numpy.ndarray, shape (..., T_q, T_k), float
        Rows sum to 1, or are all 0 for fully masked queries.

    Raises
    ------
    ValueError
        If d_k of Q and K or T_k of K and V differ, the batch dimensions do
        not broadcast, or ``mask`` is not boolean or does not broadcast to
        the scores' shape (..., T_q, T_k).
    """
    K, V = keys_and_values(K, V)
    scores = attention_scores(Q, K, scale=True)
    require_batch_broadcast(scores, V)
    weights = masked_softmax(scores, broadcast_mask(mask, scores.shape))
    return weights @ V, weights
