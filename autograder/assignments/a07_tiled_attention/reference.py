"""Reference solution for assignment 7: online softmax and tiled attention (FlashAttention in NumPy).

Softmax over a row can be computed in one pass over its blocks, keeping only a
running maximum m and a running sum l of exponentials measured from m
(Milakov & Gimelshein 2018, "Online normalizer calculation for softmax",
https://arxiv.org/abs/1805.02867 , Algorithm 3). When a new block raises the
maximum from m to m', everything accumulated so far was measured from the old
m and is multiplied by e^(m − m') before the block's own e^(x − m') are added:

    m' = max(m, max_j x_j),    l' = l · e^(m − m') + Σ_j e^(x_j − m').

Tiled attention (Dao et al. 2022, "FlashAttention", https://arxiv.org/abs/2205.14135 ,
Algorithm 1) does the same for a block of queries against one block of keys at
a time, and carries the unnormalised output along with l:

    S = Q_b K_cᵀ / √d_k,  m' = max(m, rowmax S),  P = e^(S − m'),
    l' = e^(m − m') l + rowsum P,  O' = e^(m − m') O + P V_c,

and divides by l once at the end. Only a block_q × block_k tile of scores
exists at any time; the T_q × T_k matrix is never formed.

Conventions shared with earlier assignments:

* ``−inf`` logits get probability 0 and a row whose logits are all ``−inf``
  gets all-zero probabilities, without NaN or warning — as
  ``masked_softmax`` of assignment 4 (``autograder/assignments/a04_masking/reference.py``).
* The causal mask for T_q ≠ T_k is aligned bottom-right, as assignment 5's
  ``causal_mask(T_q, T_k)``: the queries are the last T_q of the T_k
  positions, so query i may see key j when j ≤ i + T_k − T_q; T_q > T_k is
  refused under a causal mask (the first queries would see no key).

This file is the grader's ground truth; it never reaches ``source/``,
``release/`` or the student package.
"""

from __future__ import annotations

import math

import numpy as np

# The sandbox's limit and the measurement are the student package's, so that the memory plot a learner sees and
# the grader's numbers come from one implementation.
from attention_lab.a07_tiled_attention.memory import SANDBOX_MEMORY_LIMIT, traced_peak_bytes  # noqa: F401

from autograder.assignments.validation import as_float_array, require_bool, require_positive_int, require_same

#: Codes of :func:`tile_schedule`.
SKIPPED, MASKED, FULL = 0, 1, 2


#: The memory case: causal self-attention at T = 20 000 with d_head = 8 and 512 × 256 tiles (both
#: ragged: 20 000 = 39 · 512 + 32 = 78 · 256 + 32). Its score matrix would need 20 000² · 8 B = 3.2 GB
#: = 2.98 GiB, more than the sandbox's whole address space, so forming it raises MemoryError; the tiled
#: version's temporaries are a few 512 × 256 tiles (1 MiB each). Causal, so that about half the tiles
#: are skipped and the reference takes about a second in NumPy (benchmarks/tiled_attention_memory.md).
MEMORY_CASE = {"T": 20_000, "d_head": 8, "block_q": 512, "block_k": 256, "causal": True}


# ---- online softmax ------------------------------------------------------------------------------

def _blocks(blocks) -> list[np.ndarray]:
    """``blocks`` checked: a non-empty list or tuple of real arrays with equal leading shapes."""
    if isinstance(blocks, np.ndarray) or not isinstance(blocks, (list, tuple)):
        what = "a numpy.ndarray (wrap one array in a list: [x])" if isinstance(blocks, np.ndarray) \
            else type(blocks).__name__
        raise ValueError(f"blocks must be a list or tuple of arrays of shape (..., n_b); received {what}")
    if len(blocks) == 0:
        raise ValueError("blocks must hold at least one array; received an empty sequence")
    checked = []
    for index, block in enumerate(blocks):
        block = as_float_array(f"blocks[{index}]", block, min_ndim=1, expected="(..., n_b)")
        if block.shape[-1] == 0:
            raise ValueError(f"blocks[{index}] must have at least one entry along the last axis; "
                             f"received shape {block.shape}")
        if np.any(np.isnan(block) | (block == np.inf)):
            raise ValueError(f"blocks[{index}] must not contain NaN or +inf (blocked entries may be -inf)")
        if checked and block.shape[:-1] != checked[0].shape[:-1]:
            raise ValueError(f"every block must have the leading shape of blocks[0], {checked[0].shape[:-1]} "
                             f"(the same rows, split along the last axis); received blocks[{index}].shape = "
                             f"{block.shape}")
        checked.append(block)
    return checked


def _work_dtype(blocks: list[np.ndarray]) -> tuple[np.dtype, np.dtype]:
    """(dtype of the result, dtype to compute in): float16 is exponentiated in float32, as in assignment 4."""
    result = np.result_type(*blocks)
    return result, np.promote_types(result, np.float32)


def running_max_and_sum(blocks):
    """The online-softmax statistics of the concatenated rows: their maximum m and Σ_j e^(x_j − m).

    One pass over the blocks (Milakov & Gimelshein 2018, Algorithm 3): for each
    block, m' = max(m, max_j x_j) and l' = l · e^(m − m') + Σ_j e^(x_j − m'),
    starting from m = −inf, l = 0. While m is still −inf (no finite entry
    yet) the shift used inside ``exp`` is 0 instead, so no −inf − (−inf) = NaN
    appears (the fully masked tiles of flashinfer-ai/flashinfer#4401).

    Parameters
    ----------
    blocks : list or tuple of array_like, each of shape (..., n_b), float
        The blocks of one row (1-D arrays) or of a batch of rows, split along
        the last axis; every block has the same leading shape ``...`` and at
        least one entry. ``−inf`` entries are allowed (blocked).

    Returns
    -------
    m : numpy.ndarray, shape (...), float
        Largest entry of each row; −inf for a row whose entries are all −inf.
    l : numpy.ndarray, shape (...), float
        Σ_j e^(x_j − m) over the whole row: ≥ 1 for a row with a finite entry,
        0 for an all −inf row. ``m + log(l)`` is the row's log-sum-exp.

    Raises
    ------
    ValueError
        If ``blocks`` is not a non-empty list or tuple, a block is not a real
        array with at least one entry along its last axis, contains NaN or
        +inf, or its leading shape differs from that of ``blocks[0]``.
    """
    blocks = _blocks(blocks)
    _, work = _work_dtype(blocks)
    rows = blocks[0].shape[:-1]
    m = np.full(rows + (1,), -np.inf, dtype=work)
    l = np.zeros(rows + (1,), dtype=work)
    for block in blocks:
        x = block.astype(work, copy=False)
        m_new = np.maximum(m, np.max(x, axis=-1, keepdims=True))
        shift = np.where(m_new == -np.inf, 0.0, m_new)  # any finite shift for rows with nothing finite yet
        l = l * np.exp(m - shift) + np.sum(np.exp(x - shift), axis=-1, keepdims=True)
        m = m_new
    return m[..., 0], l[..., 0]


def online_softmax(blocks):
    """Softmax of the concatenation of ``blocks`` along the last axis, computed with running statistics.

    A first pass computes the running maximum m and sum l of every row
    (:func:`running_max_and_sum`); a second pass turns each block into
    probabilities e^(x − m) / l. The result equals
    ``softmax(np.concatenate(blocks, axis=-1))`` for every way of splitting
    the rows into blocks, up to rounding (≈ 1e-16 in float64).

    Parameters
    ----------
    blocks : list or tuple of array_like, each of shape (..., n_b), float
        The blocks of one row (1-D arrays) or of a batch of rows; the same
        leading shape ``...`` for every block, at least one entry per block,
        sizes n_b may differ. ``−inf`` entries get probability 0.

    Returns
    -------
    numpy.ndarray, shape (..., Σ n_b), float
        Non-negative; each row sums to 1, or is all 0 when its entries are all
        −inf (as ``masked_softmax`` of assignment 4: no NaN, no warning). The
        dtype is that of the blocks (float16 is computed in float32 and
        rounded back; integers become float64).

    Raises
    ------
    ValueError
        As :func:`running_max_and_sum`.
    """
    blocks = _blocks(blocks)
    result, work = _work_dtype(blocks)
    m, l = running_max_and_sum(blocks)
    shift = np.where(m == -np.inf, 0.0, m)[..., None]
    total = np.where(l > 0, l, 1.0)[..., None]  # an all −inf row: 0 / 1 = 0 instead of 0 / 0
    parts = [np.exp(block.astype(work, copy=False) - shift) / total for block in blocks]
    return np.concatenate(parts, axis=-1).astype(result, copy=False)


# ---- tiled attention -----------------------------------------------------------------------------

def _block_starts(T: int, block: int) -> range:
    """First index of every block: 0, block, 2·block, … < T (the last block may be shorter)."""
    return range(0, T, block)


def tile_schedule(T_q, T_k, block_q, block_k, causal):
    """Which tiles of the (T_q, T_k) score matrix tiled attention computes, and which need the mask.

    Query block a covers queries a·block_q … min((a+1)·block_q, T_q) − 1 and
    key block b covers keys b·block_k … min((b+1)·block_k, T_k) − 1; the last
    block of each may be shorter (ceil(T / block) blocks). Under the causal
    mask, aligned bottom-right, query i may see key j when
    j ≤ i + T_k − T_q. With qs, qe the first and last query of a tile and
    ks, ke its first and last key:

    * ``SKIPPED`` (0) when ks > qe + T_k − T_q: no query of the tile sees any
      of its keys (even the last query cannot see the first key);
    * ``FULL`` (2) when ke ≤ qs + T_k − T_q: every query sees every key (even
      the first query sees the last key), so no mask is needed;
    * ``MASKED`` (1) otherwise: computed, with the mask applied inside.

    Without the causal mask every tile is ``FULL``.

    Parameters
    ----------
    T_q, T_k : int
        Number of queries and of keys, ≥ 1.
    block_q, block_k : int
        Tile sizes, ≥ 1 (larger than T means one block).
    causal : bool
        Whether the causal mask applies.

    Returns
    -------
    numpy.ndarray of int64, shape (ceil(T_q / block_q), ceil(T_k / block_k))
        ``SKIPPED``, ``MASKED`` or ``FULL`` for every tile.

    Raises
    ------
    ValueError
        If a size is not an integer ≥ 1, ``causal`` is not a boolean, or
        ``causal`` and T_q > T_k (as ``causal_mask(T_q, T_k)`` of assignment 5).
    """
    T_q, T_k = require_positive_int("T_q", T_q), require_positive_int("T_k", T_k)
    block_q, block_k = require_positive_int("block_q", block_q), require_positive_int("block_k", block_k)
    causal = require_bool("causal", causal)
    q_first = np.arange(0, T_q, block_q)
    k_first = np.arange(0, T_k, block_k)
    if not causal:
        return np.full((q_first.size, k_first.size), FULL, dtype=np.int64)
    if T_q > T_k:
        raise ValueError(f"under the causal mask T_q must be <= T_k (the queries are the last T_q of the T_k "
                         f"positions); received T_q={T_q} and T_k={T_k}")
    offset = T_k - T_q
    q_last = np.minimum(q_first + block_q, T_q) - 1
    k_last = np.minimum(k_first + block_k, T_k) - 1
    schedule = np.full((q_first.size, k_first.size), MASKED, dtype=np.int64)
    schedule[k_first[None, :] > q_last[:, None] + offset] = SKIPPED
    schedule[k_last[None, :] <= q_first[:, None] + offset] = FULL
    return schedule


def _attention_inputs(Q, K, V) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    Q = as_float_array("Q", Q, min_ndim=2, expected="(..., T_q, d_k)")
    K = as_float_array("K", K, min_ndim=2, expected="(..., T_k, d_k)")
    V = as_float_array("V", V, min_ndim=2, expected="(..., T_k, d_v)")
    for name, array, axes in (("Q", Q, "T_q >= 1 and d_k"), ("K", K, "T_k >= 1 and d_k"),
                              ("V", V, "T_k >= 1 and d_v")):
        if array.shape[-2] == 0 or array.shape[-1] == 0:
            raise ValueError(f"{name} must have {axes} >= 1; received shape {array.shape}")
    require_same("Q.shape[-1]", Q.shape[-1], "K.shape[-1]", K.shape[-1], "d_k")
    require_same("K.shape[-2]", K.shape[-2], "V.shape[-2]", V.shape[-2], "T_k")
    try:
        batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"the leading (batch) dimensions of Q {Q.shape[:-2]}, K {K.shape[:-2]} and V "
                         f"{V.shape[:-2]} must broadcast; received Q.shape={Q.shape}, K.shape={K.shape} and "
                         f"V.shape={V.shape}") from None
    for name, array in (("Q", Q), ("K", K), ("V", V)):
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} must be finite; received NaN or infinite entries")
    return Q, K, V, batch


def tiled_attention(Q, K, V, block_q, block_k, causal):
    """Scaled dot-product attention computed tile by tile, never forming the (T_q, T_k) score matrix.

    For each block of ``block_q`` queries, the key/value blocks of
    ``block_k`` rows are visited in order; each tile's scores
    S = Q_b K_cᵀ / √d_k update a running row maximum m, a running sum l and
    an unnormalised output O (Dao et al. 2022, Algorithm 1, lines 9–13):
    m' = max(m, rowmax S), P = e^(S − m'), l' = e^(m − m') l + rowsum P,
    O' = e^(m − m') O + P V_c; the block's output is O / l. Tiles the causal
    mask hides completely are skipped and tiles it hides partly are masked
    (:func:`tile_schedule`). The result equals
    ``softmax(mask(Q Kᵀ / √d_k)) V`` (Vaswani et al. 2017, eq. 1) to rounding,
    about 1e-15 in float64, for every block size.

    Memory: besides the inputs and the (…, T_q, d_v) output, the largest
    temporaries are a few (…, block_q, block_k) tiles — O(block_q · block_k)
    per batch element instead of O(T_q · T_k).

    Parameters
    ----------
    Q : array_like, shape (..., T_q, d_k), float
    K : array_like, shape (..., T_k, d_k), float
    V : array_like, shape (..., T_k, d_v), float
        Leading (batch, head) dimensions broadcast. Entries must be finite.
    block_q, block_k : int
        Tile sizes, ≥ 1; they need not divide T_q or T_k (the last block is
        shorter) and may exceed them (one block).
    causal : bool
        Apply the causal mask aligned bottom-right: query i sits at position
        i + T_k − T_q and sees keys 0 … i + T_k − T_q (assignment 5).

    Returns
    -------
    numpy.ndarray, shape (broadcast(...), T_q, d_v), float
        The attention output; dtype of ``Q``, ``K`` and ``V`` combined.

    Raises
    ------
    ValueError
        If an input is not a real array with at least 2 dimensions and
        non-empty last two axes, d_k of Q and K or T_k of K and V differ, the
        leading dimensions do not broadcast, an input has NaN or infinite
        entries, a block size is not an integer ≥ 1, ``causal`` is not a
        boolean, or ``causal`` and T_q > T_k.
    """
    Q, K, V, batch = _attention_inputs(Q, K, V)
    T_q, T_k, d_v = Q.shape[-2], K.shape[-2], V.shape[-1]
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    offset = T_k - T_q
    dtype = np.result_type(Q, K, V)
    scale = 1.0 / math.sqrt(Q.shape[-1])
    output = np.empty(batch + (T_q, d_v), dtype=dtype)
    for a, qs in enumerate(_block_starts(T_q, block_q)):
        q = Q[..., qs:qs + block_q, :]
        n = q.shape[-2]
        m = np.full(batch + (n, 1), -np.inf, dtype=dtype)
        l = np.zeros(batch + (n, 1), dtype=dtype)
        acc = np.zeros(batch + (n, d_v), dtype=dtype)
        for b, ks in enumerate(_block_starts(T_k, block_k)):
            if schedule[a, b] == SKIPPED:
                continue
            k, v = K[..., ks:ks + block_k, :], V[..., ks:ks + block_k, :]
            scores = (q @ np.swapaxes(k, -1, -2)) * scale
            if schedule[a, b] == MASKED:
                allowed = np.arange(ks, ks + k.shape[-2])[None, :] <= np.arange(qs, qs + n)[:, None] + offset
                scores = np.where(allowed, scores, -np.inf)
            m_new = np.maximum(m, np.max(scores, axis=-1, keepdims=True))
            # Every query sees key 0 (T_q <= T_k under the mask) and key blocks come in order, so m_new is
            # finite from the first tile on; the guard keeps −inf − (−inf) out if that ever changes.
            shift = np.where(m_new == -np.inf, 0.0, m_new)
            rescale = np.exp(m - shift)  # e^(m − m'): what was measured from the old maximum
            p = np.exp(scores - shift)
            l = rescale * l + np.sum(p, axis=-1, keepdims=True)
            acc = rescale * acc + p @ v
            m = m_new
        output[..., qs:qs + n, :] = acc / l
    return output


# ---- memory ----------------------------------------------------------------------------------------

def score_matrix_bytes(T_q, T_k, itemsize=8):
    """Bytes of a (T_q, T_k) score matrix: T_q · T_k · itemsize (8 for float64, 4 for float32).

    Parameters
    ----------
    T_q, T_k : int
        Number of queries and keys, ≥ 1.
    itemsize : int, default 8
        Bytes per entry, ≥ 1.

    Returns
    -------
    int
        Bytes of the matrix.

    Raises
    ------
    ValueError
        If an argument is not an integer ≥ 1.
    """
    return require_positive_int("T_q", T_q) * require_positive_int("T_k", T_k) * \
        require_positive_int("itemsize", itemsize)


def smallest_T_exceeding(limit_bytes, itemsize=8):
    """The smallest T whose (T, T) matrix of ``itemsize``-byte entries needs more than ``limit_bytes``.

    T² · itemsize > limit ⇔ T > √(limit / itemsize); for the sandbox's
    2 GiB = 2³¹ bytes and float64 that is T = 2¹⁴ + 1 = 16 385.

    Parameters
    ----------
    limit_bytes : int
        The memory limit, bytes, ≥ 1.
    itemsize : int, default 8
        Bytes per entry, ≥ 1.

    Returns
    -------
    int
        The smallest T with T² · itemsize > limit_bytes.

    Raises
    ------
    ValueError
        If an argument is not an integer ≥ 1.
    """
    limit_bytes = require_positive_int("limit_bytes", limit_bytes)
    itemsize = require_positive_int("itemsize", itemsize)
    return math.isqrt(limit_bytes // itemsize) + 1

