"""Reference solution for assignment 3: sinusoidal positional encoding in NumPy.

Vaswani et al. (2017), "Attention Is All You Need", https://arxiv.org/abs/1706.03762 ,
section 3.5:

    PE(t, 2i)     = sin(t / 10000^(2i / d_model))
    PE(t, 2i + 1) = cos(t / 10000^(2i / d_model))

so column pair (2i, 2i + 1) turns at the angular frequency ω_i = 10000^(−2i / d_model)
(radians per position): ω_0 = 1, and the last pair is slowest. Positions count
from t = 0. Because sin and cos of the same angle share a pair, moving k
positions on rotates every pair by the angle k ω_i, whatever t is:
PE(t + k) = PE(t) R_k with a block-diagonal rotation R_k (section 3.5: "for any
fixed offset k, PE_{pos+k} can be represented as a linear function of PE_pos").

This file is the grader's ground truth. It is never copied into ``source/``
or ``release/`` and the student-facing package does not import it.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.assignments.a01_attention.reference import scaled_dot_product_attention
from autograder.assignments.validation import as_float_array, projections, require_bool, require_positive_int, tokens

BASE = 10000.0  # the wavelength scale of section 3.5: wavelengths run from 2π to 10000·2π positions


def _require_even_d_model(d_model) -> int:
    d_model = require_positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be an even integer >= 2 (the columns come in sin/cos pairs); "
                         f"received d_model={d_model}")
    return d_model


def frequencies(d_model) -> np.ndarray:
    """Angular frequency ω_i = 10000^(−2i/d_model) of each column pair, in radians per position.

    Parameters
    ----------
    d_model : int
        Even, ≥ 2.

    Returns
    -------
    numpy.ndarray, shape (d_model // 2,), float64
        ω_0 = 1, decreasing geometrically towards 10000^(−(d_model − 2)/d_model).

    Raises
    ------
    ValueError
        If ``d_model`` is not an even integer ≥ 2.
    """
    d_model = _require_even_d_model(d_model)
    two_i = np.arange(0, d_model, 2)
    return BASE ** (-two_i / d_model)


def sinusoidal_positional_encoding(T, d_model):
    """Sinusoidal positional encodings of positions 0 … T−1 (Vaswani et al. 2017, §3.5).

    Parameters
    ----------
    T : int
        Number of positions, ≥ 1.
    d_model : int
        Size of each encoding, even, ≥ 2.

    Returns
    -------
    numpy.ndarray, shape (T, d_model), float64
        ``pe[t, 2i] = sin(t ω_i)`` and ``pe[t, 2i + 1] = cos(t ω_i)`` with
        ω_i = 10000^(−2i/d_model): even columns sine, odd columns cosine,
        interleaved. Row 0 is (0, 1, 0, 1, …); every entry lies in [−1, 1].

    Raises
    ------
    ValueError
        If ``d_model`` is odd (the columns come in sin/cos pairs) or not an
        integer ≥ 2, or ``T`` is not an integer ≥ 1.
    """
    T = require_positive_int("T", T)
    omega = frequencies(d_model)
    angles = np.arange(T)[:, None] * omega[None, :]  # (T, d_model/2): position t times ω_i
    pe = np.empty((T, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def dot_product_by_offset(pe, t):
    """Dot products of the encoding at position ``t`` with those at t + k, for k = 0 … T−1−t.

    For sinusoidal encodings PE(t)·PE(t + k) = Σ_i cos(k ω_i): it depends on
    the offset k only, not on t, and equals d_model / 2 at k = 0.

    Parameters
    ----------
    pe : array_like, shape (T, d), float
        One encoding per row (sinusoidal, learned, anything).
    t : int
        Position, 0 ≤ t < T.

    Returns
    -------
    numpy.ndarray, shape (T − t,), float
        ``result[k] = pe[t] · pe[t + k]``.

    Raises
    ------
    ValueError
        If ``pe`` is not a 2-D real array with T ≥ 1 and d ≥ 1, or ``t`` is
        not an integer in [0, T − 1].
    """
    pe = as_float_array("pe", pe, min_ndim=2, expected="(T, d)")
    if pe.ndim != 2 or 0 in pe.shape:
        raise ValueError(f"pe must have shape (T, d) with T >= 1 and d >= 1; received shape {pe.shape}")
    T = pe.shape[0]
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or not 0 <= t < T:
        raise ValueError(f"t must be an integer position in [0, {T - 1}] for pe of shape {pe.shape}; received {t!r}")
    return pe[t:] @ pe[t]


def offset_rotation(k, d_model):
    """The matrix R_k that moves every sinusoidal encoding k positions on: PE(t + k) = PE(t) @ R_k.

    Each column pair (sin, cos) = (sin tω, cos tω) of a row vector turns by the
    angle kω (angle addition: sin(a + b) = sin a cos b + cos a sin b,
    cos(a + b) = cos a cos b − sin a sin b), so R_k is block diagonal with the
    2×2 block [[cos kω_i, −sin kω_i], [sin kω_i, cos kω_i]] on rows and
    columns (2i, 2i + 1). It does not depend on t (Vaswani et al. 2017, §3.5).

    Parameters
    ----------
    k : int or float
        Offset in positions; negative moves back, R_{−k} = R_kᵀ = R_k⁻¹.
    d_model : int
        Even, ≥ 2.

    Returns
    -------
    numpy.ndarray, shape (d_model, d_model), float64
        Orthogonal, block diagonal with 2×2 rotation blocks.

    Raises
    ------
    ValueError
        If ``k`` is not a finite real number, or ``d_model`` is not an even
        integer ≥ 2.
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, float, np.integer, np.floating)) \
            or not math.isfinite(k):
        raise ValueError(f"k must be a finite real number (an offset in positions); received {k!r}")
    angles = k * frequencies(d_model)
    cos, sin = np.cos(angles), np.sin(angles)
    even = np.arange(0, d_model, 2)
    R = np.zeros((d_model, d_model))
    R[even, even], R[even, even + 1] = cos, -sin
    R[even + 1, even], R[even + 1, even + 1] = sin, cos
    return R


def _projections(x, W_q, W_k, W_v) -> tuple[np.ndarray, ...]:
    x = tokens("x", x)
    return (x, *projections(x.shape[1], W_q, W_k, W_v))


def self_attention(x, W_q, W_k, W_v):
    """Single-head self-attention without a mask: every position attends to every position.

    Q = x W_q, K = x W_k, V = x W_v, output = softmax(Q Kᵀ / √d_head) V
    (Vaswani et al. 2017, eq. 1), as in an encoder layer.

    Parameters
    ----------
    x : array_like, shape (T, d_model), float
    W_q, W_k, W_v : array_like, shape (d_model, d_head), float

    Returns
    -------
    output : numpy.ndarray, shape (T, d_head), float
    weights : numpy.ndarray, shape (T, T), float
        Each row sums to 1 over all T keys.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D, a projection is not 2-D with d_model rows, or the
        projections disagree on d_head.
    """
    x, W_q, W_k, W_v = _projections(x, W_q, W_k, W_v)
    return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v)


def add_positions(x):
    """Token vectors plus the sinusoidal encoding of their positions, x + PE(T, d_model) (§3.5).

    Parameters
    ----------
    x : array_like, shape (T, d_model), float
        Row t is the token at position t. Not modified.

    Returns
    -------
    numpy.ndarray, shape (T, d_model), float
        ``x[t] + PE(t)``; float32 input stays float32.

    Raises
    ------
    ValueError
        If ``x`` is not a 2-D real array with T ≥ 1, or its d_model is odd.
    """
    x = as_float_array("x", x, min_ndim=2, expected="(T, d_model)")
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"x must have shape (T, d_model) with T >= 1; received shape {x.shape}")
    return x + sinusoidal_positional_encoding(*x.shape).astype(x.dtype, copy=False)


def _require_permutation(perm, T: int) -> np.ndarray:
    array = np.asarray(perm)
    if array.shape != (T,) or array.dtype.kind not in "iu" or not np.array_equal(np.sort(array), np.arange(T)):
        raise ValueError(f"perm must be a permutation of 0 … {T - 1} (an integer array of shape ({T},) holding "
                         f"each position once); received {array.dtype} array of shape {array.shape}")
    return array


def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    """How far self-attention is from permutation equivariance: the largest |f(x[perm]) − f(x)[perm]|.

    Shuffling the tokens (rows of x) by ``perm`` and then attending gives the
    shuffled outputs when f ignores order: unmasked self-attention is
    permutation-equivariant, so the gap is 0 up to rounding. With
    ``positions=True`` the positional encodings are added after the shuffle
    (position t keeps PE(t), whatever token now sits there): f(z) =
    self_attention(add_positions(z)), and the gap is generally > 0.

    Parameters
    ----------
    x : array_like, shape (T, d_model), float
    W_q, W_k, W_v : array_like, shape (d_model, d_head), float
    perm : array_like of int, shape (T,)
        A permutation of 0 … T−1; ``x[perm]`` is the shuffled sequence.
    positions : bool, default False
        Add sinusoidal positional encodings before attending.

    Returns
    -------
    float
        max over positions and columns of |output(x[perm]) − output(x)[perm]|.

    Raises
    ------
    ValueError
        If the shapes are inconsistent (see :func:`self_attention`), ``perm``
        is not a permutation of 0 … T−1, or ``positions`` is not a boolean.
    """
    x, W_q, W_k, W_v = _projections(x, W_q, W_k, W_v)
    perm = _require_permutation(perm, x.shape[0])
    encode = add_positions if require_bool("positions", positions) else (lambda z: z)
    output, _ = self_attention(encode(x), W_q, W_k, W_v)
    shuffled_output, _ = self_attention(encode(x[perm]), W_q, W_k, W_v)
    return float(np.max(np.abs(shuffled_output - output[perm])))
