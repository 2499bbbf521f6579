"""Reference solution for assignment 5: incremental decoding with a key/value cache.

A decoder generates one token at a time. Causal self-attention (Vaswani et
al. 2017, §3.2.1 eq. 1 with the decoder's mask of §3.2.3) lets position i see
keys 0..i, and the keys and values of earlier positions never change when a
token is appended. So a generator can keep them in a *cache* and, for each new
token, project only that token and attend over the cache plus itself:

    q = x_new W_q,  K' = [K_cache; x_new W_k],  V' = [V_cache; x_new W_v],
    out_new = softmax(mask(q K'ᵀ / √d_head)) V'

with the causal mask aligned to the bottom-right corner (the new queries are
the last T_new of the T_k positions). Decoding a sequence token by token this
way gives the same outputs as full causal self-attention, to rounding.

Shapes: ``x (T, d_model)``, ``W_q, W_k, W_v (d_model, d_head)``,
caches ``(T_past, d_head)`` with ``T_past ≥ 0``. Masks are boolean, True = may attend.

This file is the grader's ground truth; the student package does not import it.
"""

from __future__ import annotations

import numpy as np

from autograder.assignments.a01_attention.reference import scaled_dot_product_attention
from autograder.assignments.validation import kv_caches, projections, require_bool, require_positive_int, tokens


def causal_mask(T_q, T_k=None):
    """Causal mask for ``T_q`` new queries over ``T_k`` keys, aligned bottom-right.

    The queries are the last ``T_q`` of ``T_k`` positions, so query i sits at
    position ``i + T_k − T_q`` and may attend to key j when
    ``j ≤ i + T_k − T_q``. With ``T_k`` omitted the mask is the square
    ``(T_q, T_q)`` lower triangle of assignment 1.

    Parameters
    ----------
    T_q : int
        Number of queries, ≥ 1.
    T_k : int, optional
        Number of keys, ``T_k ≥ T_q``; defaults to ``T_q``.

    Returns
    -------
    numpy.ndarray of bool, shape (T_q, T_k)
        True where query i may attend to key j.

    Raises
    ------
    ValueError
        If ``T_q`` or ``T_k`` is not an integer ≥ 1, or ``T_q > T_k`` (the
        first queries would have no key to attend to).
    """
    T_q = require_positive_int("T_q", T_q)
    T_k = T_q if T_k is None else require_positive_int("T_k", T_k)
    if T_q > T_k:
        raise ValueError(f"T_q must be <= T_k (the queries are the last T_q of the T_k positions); "
                         f"received T_q={T_q} and T_k={T_k}")
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)


def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    """Attend from new tokens over a key/value cache plus themselves, and return the grown cache.

    Single-head causal self-attention (Vaswani et al. 2017, eq. 1, scaled by
    √d_head) for the last ``T_new`` positions of a sequence whose first
    ``T_past`` keys and values are cached.

    Parameters
    ----------
    x_new : array_like, shape (T_new, d_model), float
        The new tokens, T_new ≥ 1.
    K_cache, V_cache : array_like, shape (T_past, d_head), float
        Keys and values of the earlier positions (``x_past @ W_k``,
        ``x_past @ W_v``); ``T_past`` may be 0 (``np.zeros((0, d_head))``).
    W_q, W_k, W_v : array_like, shape (d_model, d_head), float
        Projections, applied on the right (``x @ W``).

    Returns
    -------
    out_new : numpy.ndarray, shape (T_new, d_head), float
        Attention outputs of the new positions: row i attends to keys
        0 .. T_past + i.
    K_cache_new, V_cache_new : numpy.ndarray, shape (T_past + T_new, d_head), float
        The caches with the new keys and values appended (old rows first).

    Raises
    ------
    ValueError
        If ``x_new`` is not (T_new, d_model) with T_new ≥ 1, a projection is
        not (d_model, d_head), the projections disagree on d_head, or a cache
        is not (T_past, d_head) or the two caches differ in T_past.
    """
    x_new = tokens("x_new", x_new)
    W_q, W_k, W_v = projections(x_new.shape[1], W_q, W_k, W_v)
    K_cache, V_cache = kv_caches(W_k.shape[1], K_cache, V_cache)

    K = np.concatenate([K_cache, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    out_new, _ = scaled_dot_product_attention(x_new @ W_q, K, V, mask=causal_mask(x_new.shape[0], K.shape[0]))
    return out_new, K, V


def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    """Causal self-attention computed ``chunk`` tokens at a time with a growing key/value cache.

    Starts from empty caches of shape (0, d_head) and calls
    :func:`attend_with_cache` on ``x[0:chunk]``, ``x[chunk:2 chunk]``, … (the
    last chunk may be shorter). The result equals full causal self-attention
    ``causal_self_attention(x, W_q, W_k, W_v)[0]`` up to rounding (≈ 1e-15).

    Parameters
    ----------
    x : array_like, shape (T, d_model), float
    W_q, W_k, W_v : array_like, shape (d_model, d_head), float
    chunk : int, default 1
        Tokens per call, ≥ 1 (it may exceed T: then one call does everything).

    Returns
    -------
    numpy.ndarray, shape (T, d_head), float
        The attention output of every position, in order.

    Raises
    ------
    ValueError
        If ``x`` or a projection has the wrong shape, or ``chunk`` is not an
        integer ≥ 1.
    """
    x = tokens("x", x)
    W_q, W_k, W_v = projections(x.shape[1], W_q, W_k, W_v)
    chunk = require_positive_int("chunk", chunk)
    K = V = np.zeros((0, W_k.shape[1]), dtype=np.result_type(x, W_k, W_v))
    outputs = []
    for start in range(0, x.shape[0], chunk):
        out, K, V = attend_with_cache(x[start:start + chunk], K, V, W_q, W_k, W_v)
        outputs.append(out)
    return np.concatenate(outputs)


def attention_cost_per_token(t, d_model, d_head, cached):
    """Multiply-adds one attention head spends to produce the output of the t-th generated token.

    Counting convention (one multiply-add = one multiplication followed by one
    addition; the softmax's exponentials and divisions, and the mask, are
    not counted). The new token is the t-th, so it attends to t keys
    (positions 1 … t, itself included). A product of an (m, n) and an (n, p)
    matrix costs m·n·p.

    * ``cached=True`` (a key/value cache): project the one new token to q, k,
      v (3 · d_model · d_head), scores of q against the t cached keys
      (t · d_head), weighted sum of the t value rows (t · d_head):
      ``3·d_model·d_head + 2·t·d_head`` — linear in t.
    * ``cached=False`` (recompute everything): project all t tokens
      (3 · t · d_model · d_head), the full t × t score matrix Q Kᵀ
      (t² · d_head, masked entries included, as a matrix product computes
      them) and weights @ V (t² · d_head):
      ``3·t·d_model·d_head + 2·t²·d_head`` — quadratic in t.

    Parameters
    ----------
    t : int
        Position of the generated token, 1-based (the sequence length after it), ≥ 1.
    d_model, d_head : int
        Token size and head size, ≥ 1.
    cached : bool
        Whether earlier keys and values come from a cache.

    Returns
    -------
    int
        Number of multiply-adds.

    Raises
    ------
    ValueError
        If ``t``, ``d_model`` or ``d_head`` is not an integer ≥ 1, or
        ``cached`` is not a boolean.
    """
    t = require_positive_int("t", t)
    d_model = require_positive_int("d_model", d_model)
    d_head = require_positive_int("d_head", d_head)
    cached = require_bool("cached", cached)
    if cached:
        return 3 * d_model * d_head + 2 * t * d_head
    return 3 * t * d_model * d_head + 2 * t * t * d_head
