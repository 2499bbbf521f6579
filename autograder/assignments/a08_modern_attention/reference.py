"""Reference solution for assignment 8: positions and sharing in modern models (RoPE, ALiBi, GQA / MQA).

* **RoPE** (Su et al. 2021, "RoFormer", https://arxiv.org/abs/2104.09864 , §3.4.2, eq. 34):
  the query or key at position m has each coordinate pair (2i, 2i + 1) turned by the
  angle m θ_i, θ_i = 10000^(−2i/d_head), i = 0 … d_head/2 − 1 (the paper counts i from 1):

      x'_{2i}     = x_{2i} cos mθ_i − x_{2i+1} sin mθ_i
      x'_{2i + 1} = x_{2i} sin mθ_i + x_{2i+1} cos mθ_i.

  As a matrix on a column vector this is R_m x with exactly the block-diagonal matrix
  R_m = ``offset_rotation(m, d_head)`` of assignment 3 (``autograder/assignments/a03_positional/reference.py``;
  the same θ_i = ω_i, the same 2 × 2 blocks [[cos, −sin], [sin, cos]] on (2i, 2i + 1)). Our
  vectors are rows, so ``apply_rope(x, m) = x @ R_mᵀ = x @ R_{−m}``. Then (eq. 16)

      q_m · k_n = q R_mᵀ (k R_nᵀ)ᵀ = q R_{−m} R_n kᵀ = q R_{n−m} kᵀ,

  which depends on the positions only through n − m. Assignment 3 moved a *sinusoidal
  encoding* on with the same matrix from the other side, PE(t + k) = PE(t) R_k; its pairs are
  (sin, cos), so turning them by RoPE moves back: ``apply_rope(PE(t), m) = PE(t − m)``.
  Values are not rotated. Pairing: (2i, 2i + 1) as in the paper, Meta's LLaMA code and
  assignment 3; the "rotate_half" pairing (i, i + d_head/2) of GPT-NeoX and Hugging Face's
  LLaMA is the same rotation after a fixed permutation of the coordinates, which is only
  equivalent when the weights W_q, W_k are permuted to match (huggingface/transformers#25199,
  Dao-AILab/flash-attention#288) — for given Q and K it gives different scores.
* **ALiBi** (Press et al. 2022, "Train Short, Test Long", https://arxiv.org/abs/2108.12409 , §3):
  no positional encoding; head h adds −m_h · (i − j) to the score of query position i and key
  position j ≤ i, after the 1/√d_k scaling. Slopes for n heads, n a power of two: the geometric
  sequence 2^(−8/n), 2^(−16/n), …, 2^(−8) (1/2 … 1/256 for 8 heads). Other n, as the authors'
  ``get_slopes`` (ofirpress/attention_with_linear_biases, fairseq/models/transformer.py,
  TransformerDecoder.__init__): the slopes of the closest smaller power of two 2^k, followed by
  every other slope (the 1st, 3rd, …) of 2^(k+1) heads, as many as are missing.
* **Grouped-query attention** (Ainslie et al. 2023, "GQA", https://arxiv.org/abs/2305.13245 , §2.2):
  n_kv_heads key/value heads shared by n_heads query heads in contiguous groups of
  g = n_heads / n_kv_heads: query head h uses key/value head h // g (as Hugging Face's
  ``repeat_kv``, ``np.repeat`` on the head axis; ``np.tile`` would interleave). n_kv_heads = 1 is
  multi-query attention (Shazeer 2019), n_kv_heads = n_heads multi-head attention (assignment 2).
  The KV cache holds 2 · n_layers · n_kv_heads · d_head values per token.

Causal masks are aligned bottom-right as in assignment 5: the T_q queries are the last T_q of
the T_k positions. This file is the grader's ground truth; students never receive it.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.assignments.a01_attention.reference import attention_scores, scaled_dot_product_attention, softmax
from autograder.assignments.a05_kv_cache.reference import causal_mask
from autograder.assignments.a02_multi_head.reference import merge_heads, split_heads
from autograder.assignments.validation import (as_float_array, broadcast_mask, kv_caches, require_bool,
                                               require_positive_int, require_same)

BASE = 10000.0  # θ_i = BASE^(−2i/d_head), as assignment 3's ω_i and the RoFormer paper


# ---- RoPE ------------------------------------------------------------------------------------------

def _require_even(name: str, d) -> int:
    d = require_positive_int(name, d)
    if d % 2:
        raise ValueError(f"{name} must be an even integer >= 2 (RoPE turns coordinate pairs (2i, 2i + 1)); "
                         f"received {name}={d}")
    return d


def _require_base(base) -> float:
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, (int, float, np.integer, np.floating)) \
            or not math.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number > 1 (10000 in the paper); received {base!r}")
    return float(base)


def rope_frequencies(d_head, base=BASE):
    """Angle per position θ_i = base^(−2i/d_head) of each coordinate pair (2i, 2i + 1), in radians.

    Parameters
    ----------
    d_head : int
        Even, ≥ 2.
    base : float, default 10000
        Wavelength scale, > 1 (Su et al. 2021, §3.4.2).

    Returns
    -------
    numpy.ndarray, shape (d_head // 2,), float64
        θ_0 = 1, decreasing geometrically; equal to assignment 3's ``frequencies(d_head)`` for base 10000.

    Raises
    ------
    ValueError
        If ``d_head`` is not an even integer ≥ 2 or ``base`` is not a finite number > 1.
    """
    d_head = _require_even("d_head", d_head)
    base = _require_base(base)
    return base ** (-np.arange(0, d_head, 2) / d_head)


def _positions(positions, leading: tuple[int, ...]) -> np.ndarray:
    array = np.asarray(positions)
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        array = array.astype(np.int64)  # 3.0 is a position; 2.5 is not
    if array.dtype.kind not in "iu":
        raise ValueError(f"positions must hold integers (one position per row of x); received dtype "
                         f"{array.dtype}")
    try:
        return np.broadcast_to(array, leading)
    except ValueError:
        raise ValueError(f"positions must have shape (T,) = ({leading[-1]},) (one per row of x), or broadcast to "
                         f"x.shape[:-1] = {leading}; received shape {array.shape}") from None


def apply_rope(x, positions, base=BASE):
    """Rotary position embedding: turn each coordinate pair (2i, 2i + 1) of row t by positions[t] · θ_i.

    x'_{2i} = x_{2i} cos pθ_i − x_{2i+1} sin pθ_i,
    x'_{2i+1} = x_{2i} sin pθ_i + x_{2i+1} cos pθ_i (Su et al. 2021, eq. 34),
    i.e. ``x' = x @ offset_rotation(p, d_head).T`` with assignment 3's R_p. Position 0
    leaves a row unchanged, and every row keeps its norm.

    Parameters
    ----------
    x : array_like, shape (..., T, d_head), float
        Queries or keys (never values), one row per position; d_head even.
    positions : array_like of int, shape (T,) or broadcastable to x.shape[:-1]
        The position of each row (0, 1, …; with a KV cache the new rows sit at
        T_past, T_past + 1, …). Negative positions turn the other way.
    base : float, default 10000

    Returns
    -------
    numpy.ndarray, shape of ``x``, float
        The rotated rows; dtype of ``x`` (integers become float64). ``x`` is not modified.

    Raises
    ------
    ValueError
        If ``x`` is not a real array with at least 2 dimensions and an even last axis,
        ``positions`` does not hold integers or does not broadcast to x.shape[:-1], or
        ``base`` is not a finite number > 1.
    """
    x = as_float_array("x", x, min_ndim=2, expected="(..., T, d_head)")
    _require_even("x.shape[-1] (d_head)", x.shape[-1])
    theta = rope_frequencies(x.shape[-1], base)
    angles = _positions(positions, x.shape[:-1])[..., None] * theta  # (..., T, d_head/2)
    cos, sin = np.cos(angles).astype(x.dtype, copy=False), np.sin(angles).astype(x.dtype, copy=False)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def _attention_inputs(Q, K, V, need_heads: bool = False):
    expected_q = "(..., n_heads, T_q, d_k)" if need_heads else "(..., T_q, d_k)"
    Q = as_float_array("Q", Q, min_ndim=3 if need_heads else 2, expected=expected_q)
    K = as_float_array("K", K, min_ndim=2, expected="(..., T_k, d_k)")
    V = as_float_array("V", V, min_ndim=2, expected="(..., T_k, d_v)")
    require_same("K.shape[-2]", K.shape[-2], "V.shape[-2]", V.shape[-2], "T_k")
    for name, array in (("Q", Q), ("K", K), ("V", V)):
        if array.shape[-2] == 0 or array.shape[-1] == 0:
            raise ValueError(f"{name} must have non-empty last two axes; received shape {array.shape}")
    if Q.shape[-2] > K.shape[-2]:
        raise ValueError(f"T_q must be <= T_k (the queries are the last T_q of the T_k positions); received "
                         f"Q.shape={Q.shape} and K.shape={K.shape}")
    return Q, K, V


def rope_attention(Q, K, V, causal=True, base=BASE):
    """Scaled dot-product attention with RoPE on the queries and keys; the queries are the last positions.

    Keys sit at positions 0 … T_k − 1 and the T_q queries at T_k − T_q … T_k − 1
    (as assignment 5's bottom-right alignment: with a cache, the new queries are the
    last tokens). Q and K are rotated by :func:`apply_rope`, V is not; then
    softmax(Q' K'ᵀ / √d_k) V with the bottom-right causal mask when ``causal``.
    The weights depend on the positions only through their differences.

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k), float
    K : array_like, shape (..., T_k, d_k), float
        d_k even; T_q ≤ T_k; leading dimensions broadcast.
    V : array_like, shape (..., T_k, d_v), float
    causal : bool, default True
    base : float, default 10000

    Returns
    -------
    output : numpy.ndarray, shape (..., T_q, d_v), float
    weights : numpy.ndarray, shape (..., T_q, T_k), float
        Each row sums to 1.

    Raises
    ------
    ValueError
        If shapes are inconsistent (d_k of Q and K, T_k of K and V, batch dimensions),
        d_k is odd, T_q > T_k, ``causal`` is not a boolean or ``base`` is not > 1.
    """
    Q, K, V = _attention_inputs(Q, K, V)
    causal = require_bool("causal", causal)
    require_same("Q.shape[-1]", Q.shape[-1], "K.shape[-1]", K.shape[-1], "d_k")
    _require_even("Q.shape[-1] (d_k)", Q.shape[-1])
    T_q, T_k = Q.shape[-2], K.shape[-2]
    Q_rot = apply_rope(Q, np.arange(T_k - T_q, T_k), base)
    K_rot = apply_rope(K, np.arange(T_k), base)
    return scaled_dot_product_attention(Q_rot, K_rot, V, mask=causal_mask(T_q, T_k) if causal else None)


def _matrix(name: str, value, expected: str) -> np.ndarray:
    array = as_float_array(name, value, min_ndim=2, expected=expected)
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{name} must have shape {expected} with every size >= 1; received shape {array.shape}")
    return array


def rope_attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v, base=BASE):
    """One step of decoding with RoPE and a KV cache that stores keys already rotated.

    The new tokens sit at positions T_past … T_past + T_new − 1, where T_past is the
    cache length: q = RoPE(x_new W_q, those positions), k = RoPE(x_new W_k, those
    positions), v = x_new W_v; the cached keys were rotated at their own positions when
    they were added and are not rotated again. The new queries attend over the cache
    plus themselves with the bottom-right causal mask. Decoding token by token this way
    equals ``rope_attention`` over the whole sequence.

    Parameters
    ----------
    x_new : array_like, shape (T_new, d_model), float
        T_new ≥ 1.
    K_cache : array_like, shape (T_past, d_head), float
        Rotated keys of positions 0 … T_past − 1 (T_past may be 0).
    V_cache : array_like, shape (T_past, d_head), float
    W_q, W_k, W_v : array_like, shape (d_model, d_head), float
        d_head even.
    base : float, default 10000

    Returns
    -------
    out_new : numpy.ndarray, shape (T_new, d_head), float
    K_cache_new, V_cache_new : numpy.ndarray, shape (T_past + T_new, d_head), float
        The caches with the new (rotated) keys and values appended.

    Raises
    ------
    ValueError
        If a shape is inconsistent (as assignment 5's ``attend_with_cache``), d_head is
        odd, or ``base`` is not a finite number > 1.
    """
    x_new = _matrix("x_new", x_new, "(T_new, d_model)")
    d_model = x_new.shape[1]
    W_q, W_k, W_v = (_matrix(n, W, f"(d_model, d_head) = ({d_model}, d_head)")
                     for n, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)))
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        require_same(f"{name}.shape[0]", W.shape[0], "x_new.shape[1]", d_model, "d_model")
    require_same("W_q.shape[1]", W_q.shape[1], "W_k.shape[1]", W_k.shape[1], "d_head")
    require_same("W_q.shape[1]", W_q.shape[1], "W_v.shape[1]", W_v.shape[1], "d_head")
    K_cache, V_cache = kv_caches(W_k.shape[1], K_cache, V_cache)
    T_past, T_new = K_cache.shape[0], x_new.shape[0]
    positions = np.arange(T_past, T_past + T_new)
    K = np.concatenate([K_cache, apply_rope(x_new @ W_k, positions, base)])
    V = np.concatenate([V_cache, x_new @ W_v])
    q = apply_rope(x_new @ W_q, positions, base)
    out_new, _ = scaled_dot_product_attention(q, K, V, mask=causal_mask(T_new, T_past + T_new))
    return out_new, K, V


# ---- ALiBi -----------------------------------------------------------------------------------------

def alibi_slopes(n_heads):
    """ALiBi's slope m_h of every head (Press et al. 2022, §3; the authors' ``get_slopes``).

    n a power of two: m_h = 2^(−8(h + 1)/n), h = 0 … n − 1 — a geometric sequence from
    2^(−8/n) down to 2^(−8). Otherwise, with 2^k the largest power of two below n: the
    2^k slopes of 2^k heads, then the slopes of 2^(k+1) heads at even indices 0, 2, 4, …
    (every other one, interleaving between the first ones), as many as are missing.
    For 6 heads: 1/4, 1/16, 1/64, 1/256, then 1/2, 1/8.

    Parameters
    ----------
    n_heads : int
        ≥ 1.

    Returns
    -------
    numpy.ndarray, shape (n_heads,), float64
        Positive; head 0 has the steepest slope within the first 2^k heads.

    Raises
    ------
    ValueError
        If ``n_heads`` is not an integer ≥ 1.
    """
    n_heads = require_positive_int("n_heads", n_heads)
    closest = 1 << (n_heads.bit_length() - 1)  # the largest power of two ≤ n_heads
    slopes = 2.0 ** (-8.0 * np.arange(1, closest + 1) / closest)
    if closest == n_heads:
        return slopes
    return np.concatenate([slopes, alibi_slopes(2 * closest)[0::2][:n_heads - closest]])


def alibi_bias(n_heads, T_q, T_k):
    """ALiBi's additive bias with the causal mask: −m_h · (distance to the key), −inf for future keys.

    Query i sits at position p_i = i + T_k − T_q (bottom-right, assignment 5);
    bias[h, i, j] = −m_h · (p_i − j) for j ≤ p_i and −inf for j > p_i, so each head
    penalises keys linearly with their distance, head 0 the most.

    Parameters
    ----------
    n_heads, T_q, T_k : int
        ≥ 1, with T_q ≤ T_k.

    Returns
    -------
    numpy.ndarray, shape (n_heads, T_q, T_k), float64
        0 on the diagonal p_i = j, negative to its left, −inf to its right.

    Raises
    ------
    ValueError
        If an argument is not an integer ≥ 1 or T_q > T_k.
    """
    slopes = alibi_slopes(n_heads)
    mask = causal_mask(T_q, T_k)
    T_k = mask.shape[1]
    position = np.arange(mask.shape[0]) + T_k - mask.shape[0]  # p_i of every query
    key_minus_query = np.arange(T_k)[None, :] - position[:, None]  # j − p_i ≤ 0 where allowed
    return np.where(mask, slopes[:, None, None] * key_minus_query, -np.inf)


def alibi_attention(Q, K, V):
    """Causal attention with ALiBi: softmax(Q Kᵀ / √d_k + bias_h) V per head (Press et al. 2022, §3).

    The bias of :func:`alibi_bias` is added after the 1/√d_k scaling (the authors' code
    adds it to the scaled scores), per head; there is no positional encoding.

    Parameters
    ----------
    Q : array_like, shape (..., n_heads, T_q, d_k), float
        The head axis is the third from last; n_heads = Q.shape[-3].
    K : array_like, shape (..., n_heads or 1, T_k, d_k), float
    V : array_like, shape (..., n_heads or 1, T_k, d_v), float
        T_q ≤ T_k; leading dimensions broadcast.

    Returns
    -------
    output : numpy.ndarray, shape (..., n_heads, T_q, d_v), float
    weights : numpy.ndarray, shape (..., n_heads, T_q, T_k), float
        Each row sums to 1 over keys up to its position.

    Raises
    ------
    ValueError
        If ``Q`` has fewer than 3 dimensions, shapes are inconsistent (d_k, T_k, batch
        dimensions or head axes that do not broadcast to n_heads), or T_q > T_k.
    """
    Q, K, V = _attention_inputs(Q, K, V, need_heads=True)
    n_heads, T_q, T_k = Q.shape[-3], Q.shape[-2], K.shape[-2]
    scores = attention_scores(Q, K, scale=True)
    if scores.shape[-3] != n_heads:
        raise ValueError(f"the head axis of K (K.shape[-3]) must be n_heads = {n_heads} (from Q) or 1; received "
                         f"Q.shape={Q.shape} and K.shape={K.shape}")
    weights = softmax(scores + alibi_bias(n_heads, T_q, T_k).astype(scores.dtype, copy=False))
    try:
        return weights @ V, weights
    except ValueError:
        raise ValueError(f"the leading dimensions of V {V.shape[:-2]} must broadcast with those of the scores "
                         f"{scores.shape[:-2]}; received V.shape={V.shape}") from None


# ---- grouped-query attention -----------------------------------------------------------------------

def kv_head_of(n_heads, n_kv_heads):
    """The key/value head each query head uses in grouped-query attention: h // (n_heads / n_kv_heads).

    Parameters
    ----------
    n_heads, n_kv_heads : int
        ≥ 1, with n_kv_heads dividing n_heads.

    Returns
    -------
    numpy.ndarray of int64, shape (n_heads,)
        Contiguous groups: (0, 0, 1, 1) for 4 query heads over 2 key/value heads.

    Raises
    ------
    ValueError
        If an argument is not an integer ≥ 1 or n_kv_heads does not divide n_heads.
    """
    n_heads = require_positive_int("n_heads", n_heads)
    n_kv_heads = require_positive_int("n_kv_heads", n_kv_heads)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads must divide n_heads (each key/value head serves n_heads / n_kv_heads query "
                         f"heads); received n_heads={n_heads} and n_kv_heads={n_kv_heads}")
    return np.arange(n_heads) // (n_heads // n_kv_heads)


def grouped_query_attention(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, mask=None):
    """Grouped-query self-attention (Ainslie et al. 2023): n_heads query heads share n_kv_heads key/value heads.

    d_head = d_model / n_heads. Q = x W_q is split into n_heads heads and K = x W_k,
    V = x W_v (each n_kv_heads · d_head wide) into n_kv_heads heads, as assignment 2's
    ``split_heads``; query head h attends with key/value head h // (n_heads / n_kv_heads)
    (contiguous groups); the heads are merged and projected by W_o. With
    n_kv_heads = n_heads this is assignment 2's ``multi_head_attention``; with
    n_kv_heads = 1 it is multi-query attention.

    Parameters
    ----------
    x : array_like, shape (T, d_model), float
    W_q, W_o : array_like, shape (d_model, d_model), float
    W_k, W_v : array_like, shape (d_model, n_kv_heads · d_head), float
        Columns g·d_head … (g+1)·d_head − 1 are key/value head g.
    n_heads, n_kv_heads : int
        ≥ 1; n_heads divides d_model and n_kv_heads divides n_heads.
    mask : array_like of bool, broadcastable to (n_heads, T, T), optional
        True where query i may attend to key j; every query needs one allowed key.

    Returns
    -------
    output : numpy.ndarray, shape (T, d_model), float
    weights : numpy.ndarray, shape (n_heads, T, T), float
        Each query head's attention weights; heads of one group differ only through their queries.

    Raises
    ------
    ValueError
        If ``x`` is not (T, d_model), a projection has the wrong shape, n_heads does not
        divide d_model, n_kv_heads does not divide n_heads, or the mask is invalid.
    """
    x = _matrix("x", x, "(T, d_model)")
    d_model = x.shape[1]
    group_of = kv_head_of(n_heads, n_kv_heads)
    if d_model % n_heads:
        raise ValueError(f"d_model = x.shape[1] = {d_model} must be divisible by n_heads = {n_heads}")
    d_head = d_model // n_heads
    shapes = {"W_q": (d_model, d_model), "W_k": (d_model, n_kv_heads * d_head),
              "W_v": (d_model, n_kv_heads * d_head), "W_o": (d_model, d_model)}
    weights_in = {}
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v), ("W_o", W_o)):
        W = _matrix(name, W, f"{shapes[name]}")
        if W.shape != shapes[name]:
            raise ValueError(f"{name} must have shape {shapes[name]} (d_model = {d_model}, d_head = d_model / n_heads "
                             f"= {d_head}, n_kv_heads = {n_kv_heads}); received shape {W.shape}")
        weights_in[name] = W
    Q = split_heads(x @ weights_in["W_q"], n_heads)  # (n_heads, T, d_head)
    K = split_heads(x @ weights_in["W_k"], n_kv_heads)[group_of]  # (n_heads, T, d_head): head h gets kv head h // g
    V = split_heads(x @ weights_in["W_v"], n_kv_heads)[group_of]
    if mask is not None:
        mask = broadcast_mask(mask, (n_heads, x.shape[0], x.shape[0]))
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(heads) @ weights_in["W_o"], weights


def kv_cache_bytes(T, n_layers, n_kv_heads, d_head, bytes_per_value):
    """Memory of a KV cache: 2 · T · n_layers · n_kv_heads · d_head · bytes_per_value.

    Every layer keeps, for every token, one key and one value (the 2) per key/value
    head, each d_head numbers. Grouped-query attention divides the cache by
    n_heads / n_kv_heads; multi-query attention (n_kv_heads = 1) by n_heads. For example
    Llama 2 70B (80 layers, 64 query heads, 8 key/value heads, d_head = 128, 16-bit values)
    needs 2 · 80 · 8 · 128 · 2 = 327 680 bytes per token, 8 times less than with 64.

    Parameters
    ----------
    T : int
        Tokens in the cache, ≥ 1 (T = 1: bytes per token).
    n_layers, n_kv_heads, d_head : int
        ≥ 1.
    bytes_per_value : int
        ≥ 1 (2 for float16 / bfloat16, 4 for float32).

    Returns
    -------
    int
        Bytes of the cache, keys and values of every layer.

    Raises
    ------
    ValueError
        If an argument is not an integer ≥ 1.
    """
    names = ("T", "n_layers", "n_kv_heads", "d_head", "bytes_per_value")
    values = [require_positive_int(n, v) for n, v in zip(names, (T, n_layers, n_kv_heads, d_head, bytes_per_value))]
    return 2 * math.prod(values)
