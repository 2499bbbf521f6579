"""Visible self-checks for assignment 7 (online softmax and tiled attention), run on the learner's functions.

Each check first runs the function on the assignment's worked cases (numbers stored in the
package, see :mod:`attention_lab.core.worked`), which names a known mistake when the result
matches one, and then tests properties every correct answer has, in plain words: the online
softmax equals the one-shot softmax of the joined row for random block splits; the schedule agrees
with the causal mask tile by tile; tiled attention equals full attention (the formula, not a tiled
reference) within 1e-12; and it holds less than half of one T × T matrix at once. No reference
implementation of a learner's function is involved. The checks award no points: the hidden tests do
the grading.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from attention_lab.a07_tiled_attention.memory import full_attention, traced_peak_bytes
from attention_lab.core.self_check import attempt, call, fail, float_array, ok, self_check

ASSIGNMENT = "07_tiled_attention"
MEMORY_T, MEMORY_BLOCK = 2048, 128  # the memory self-check: a 2048 × 2048 float64 matrix is 32 MiB
MEMORY_SECONDS = 30.0

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)


def _softmax(x: np.ndarray) -> np.ndarray:
    """One-shot softmax of the joined row, zeros for a row that is -inf everywhere (the definition)."""
    top = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


# ---------------------------------------------------------------- step 1
@_self_check
def check_online_softmax(online_softmax: Callable) -> None:
    """Self-check ``online_softmax(blocks)``: worked cases, then random splits of a batch of rows.

    The learner's function: ``blocks``, a list of float arrays of shape (..., n_b) with one leading shape; returns
    the probabilities of the joined rows, shape (..., Σ n_b).

    Fails when for a random split the result has another shape or differs from the softmax of the joined rows by
    more than 1e-12.
    """
    rng = np.random.default_rng(71)
    x = rng.normal(0, 300.0, (2, 3, 11)) + np.array([-600.0, 0.0, 600.0])[:, None]
    x[0, 1, :4] = -np.inf
    for cuts in ((3, 4, 9), (1, 2, 3, 4, 5, 6, 7, 8, 9, 10), (6,)):
        blocks = [x[..., a:b] for a, b in zip((0, *cuts), (*cuts, x.shape[-1]))]
        sizes = ", ".join(str(b.shape[-1]) for b in blocks)
        what = f"online_softmax of a (2, 3, 11) batch of rows in blocks of {sizes}"
        p = float_array(what, call(online_softmax, blocks), (2, 3, 11), sep=", but ", finite=True)
        error = float(np.max(np.abs(p - _softmax(x))))
        if error > 1e-12:
            fail(f"{what} differs from the softmax of the joined rows by up to {error:.3g} (allowed: 1e-12)")
    ok("random splits of a (2, 3, 11) batch of rows with logits hundreds apart give the softmax of the joined rows")


# ---------------------------------------------------------------- step 2
def _tiles_from_mask(T_q: int, T_k: int, block_q: int, block_k: int) -> np.ndarray:
    """The schedule by definition: read off the bottom-right causal mask, tile by tile (0, 1 or 2)."""
    mask = np.arange(T_k)[None, :] <= np.arange(T_q)[:, None] + (T_k - T_q)
    return np.array([[2 if tile.all() else 1 if tile.any() else 0
                      for tile in (mask[qs:qs + block_q, ks:ks + block_k] for ks in range(0, T_k, block_k))]
                     for qs in range(0, T_q, block_q)])


@_self_check
def check_tile_schedule(tile_schedule: Callable) -> None:
    """Self-check ``tile_schedule(T_q, T_k, block_q, block_k, causal)``: worked cases, then tile by tile against the mask.

    The learner's function: returns an integer array (ceil(T_q / block_q), ceil(T_k / block_k)) of 0 (skipped),
    1 (masked) and 2 (full).

    Fails when for one of a few sizes the schedule has another shape or another code than the causal mask gives
    its tile.
    """
    for T_q, T_k, block_q, block_k in ((13, 13, 4, 3), (6, 17, 4, 5), (9, 9, 2, 7), (1, 8, 1, 3)):
        expected = _tiles_from_mask(T_q, T_k, block_q, block_k)
        what = f"tile_schedule({T_q}, {T_k}, {block_q}, {block_k}, True)"
        got = call(tile_schedule, T_q, T_k, block_q, block_k, True)
        if not isinstance(got, np.ndarray) or got.shape != expected.shape:
            shape = f"shape {got.shape}" if isinstance(got, np.ndarray) else type(got).__name__
            fail(f"{what} should have shape (ceil(T_q / block_q), ceil(T_k / block_k)) = {expected.shape}; "
                 f"received {shape}")
        wrong = np.argwhere(got != expected)
        if wrong.size:
            a, b = (int(i) for i in wrong[0])
            names = {0: "skipped", 1: "masked", 2: "full"}
            fail(f"{what}: tile ({a}, {b}) — queries {a * block_q}…{min((a + 1) * block_q, T_q) - 1}, keys "
                 f"{b * block_k}…{min((b + 1) * block_k, T_k) - 1} — is {names.get(int(expected[a, b]))} under the "
                 f"causal mask (query i sees keys up to i + {T_k - T_q}), but your schedule has {got[a, b]!r}")
    ok("four sizes with ragged last blocks and T_q ≤ T_k agree with the causal mask tile by tile")


# ---------------------------------------------------------------- step 3
@_self_check
def check_tiled_attention(tiled_attention: Callable) -> None:
    """Self-check ``tiled_attention(Q, K, V, block_q, block_k, causal)``: worked cases, then against full attention.

    The learner's function: Q (..., T_q, d_k), K (..., T_k, d_k), V (..., T_k, d_v), tile sizes and the causal
    flag; returns the output (..., T_q, d_v).

    Fails when for random inputs and tile sizes (causal or not, a batch of two heads) the output has another shape
    or differs from full attention by more than 1e-12.
    """
    rng = np.random.default_rng(73)
    for T_q, T_k, block_q, block_k, causal in ((9, 9, 4, 2, True), (5, 11, 2, 4, True), (7, 6, 3, 4, False),
                                              (8, 8, 8, 8, True)):
        Q, K, V = rng.normal(0, 1.5, (T_q, 4)), rng.normal(0, 1.5, (T_k, 4)), rng.normal(size=(T_k, 3))
        what = f"tiled_attention for T_q = {T_q}, T_k = {T_k}, tiles {block_q} × {block_k}, causal={causal}"
        out = float_array(what, call(tiled_attention, Q, K, V, block_q, block_k, causal), (T_q, 3), sep=", but ",
                          finite=True)
        error = float(np.max(np.abs(out - full_attention(Q, K, V, causal))))
        if error > 1e-12:
            fail(f"{what} differs from full attention softmax(mask(Q Kᵀ / √d_k)) V by up to {error:.3g} "
                 "(allowed: 1e-12)")
    Q, K, V = rng.normal(0, 1.5, (2, 6, 4)), rng.normal(0, 1.5, (6, 4)), rng.normal(size=(6, 3))
    what = "tiled_attention for a batch of 2 heads, Q (2, 6, 4) with K (6, 4) and V (6, 3) shared, tiles 4 × 4"
    out = float_array(what, call(tiled_attention, Q, K, V, 4, 4, True), (2, 6, 3), sep=", but ", finite=True)
    expected = np.stack([full_attention(q, K, V, True) for q in Q])
    if float(np.max(np.abs(out - expected))) > 1e-12:
        fail(f"{what} differs from full attention for each head")
    ok("random inputs, causal or not, T_q ≠ T_k, ragged tiles and a batch of heads give full attention within 1e-12")


# ---------------------------------------------------------------- step 4
@_self_check(worked_cases=False)  # the memory alone: step 3's check runs tiled_attention's worked cases
def check_tiled_memory(tiled_attention: Callable) -> None:
    """Self-check the memory ``tiled_attention`` holds at once: less than half of one T × T matrix at T = 2048.

    Measures with :func:`~attention_lab.a07_tiled_attention.memory.traced_peak_bytes` (tracemalloc)
    causal self-attention with T = 2048, d_head = 8 and tiles of 128 × 128, where one 2048 × 2048
    float64 matrix is 32 MiB and a tiled version holds about 1 MiB.

    The learner's function: ``tiled_attention(Q, K, V, block_q, block_k, causal)``.

    Fails when the call fails, or the largest memory it holds at once is 16 MiB or more.
    """
    rng = np.random.default_rng(74)
    Q, K, V = (rng.normal(size=(MEMORY_T, 8)) for _ in range(3))
    what = f"tiled_attention at T = {MEMORY_T} (tiles {MEMORY_BLOCK} × {MEMORY_BLOCK}, causal)"
    # the graded case's rules first: its shape, and the inputs left unchanged (call names a modified argument)
    float_array(what, call(tiled_attention, Q, K, V, MEMORY_BLOCK, MEMORY_BLOCK, True, seconds=MEMORY_SECONDS),
                (MEMORY_T, 8), sep=", but ", finite=True)
    measured, error = attempt(traced_peak_bytes, tiled_attention, Q, K, V, MEMORY_BLOCK, MEMORY_BLOCK, True,
                              seconds=MEMORY_SECONDS)
    if error is not None:
        fail(f"tiled_attention at T = {MEMORY_T} (tiles {MEMORY_BLOCK} × {MEMORY_BLOCK}, causal) failed: "
             f"{type(error).__name__}: {error}")
    _, peak = measured
    matrix = 8 * MEMORY_T ** 2
    if peak >= matrix / 2:
        fail(f"at T = {MEMORY_T} your tiled_attention held {peak / 2**20:.1f} MiB at once, "
             f"{peak / matrix:.2f} times one {MEMORY_T} × {MEMORY_T} float64 matrix ({matrix / 2**20:.0f} MiB): it "
             "forms a T × T array somewhere. Compute each tile's scores from its own rows of Q and K; at "
             "T = 20 000 a T × T matrix does not fit in the grader's 2 GiB")
    ok(f"at T = {MEMORY_T} your tiled_attention holds {peak / 2**20:.1f} MiB at once, "
       f"{peak / matrix:.3f} of one T × T float64 matrix ({matrix / 2**20:.0f} MiB)")
