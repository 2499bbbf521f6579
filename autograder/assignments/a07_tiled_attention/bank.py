"""Answer bank of assignment 7 (online softmax and tiled attention): solution, variants, hidden cases.

See DESIGN.md next to this file for what each case, variant and mistake is for.

* ``SOLUTION`` — the source notebook's solution cells (grade_id → source; the grade_ids of the
  solution cells are the function names, the test cells are ``STEPS``), written as a learner
  would: plain functions, NumPy only, no argument checks beyond the ValueError the spec asks for.
* ``CORRECT`` — differently written correct answers (cell replacements, :class:`Variant`).
* ``KNOWN_MISTAKES`` — known mistakes as exact edits of ``SOLUTION`` (:class:`Mistake`);
  ``MISTAKES`` holds the edited cells the grader uses.
* :func:`hidden_cases` — the hidden cases per step (seeded), which the spec hands the grader, and
  ``REFERENCE``, the functions that give their expected results.

tests/test_tiled_attention_bank.py runs every correct variant against the reference on the hidden
cases and on random inputs, and every mistake on the hidden cases of its step, in this process;
tests/test_mistake_edits.py and tests/test_grader.py grade them as the grader does.
"""

from __future__ import annotations

import numpy as np

from attention_lab.core import values as wire
from autograder.grader.bank import Edit, Mistake, source_solution, variants
from autograder.grader.spec import Case, Variant

from . import reference as ref

#: Test cells in notebook order: grade_id → (what it grades, points).
STEPS = {
    "test_online_softmax": ("online_softmax: softmax of a row given in blocks", 3),
    "test_tile_schedule": ("tile_schedule: which tiles are skipped, masked or full", 2),
    "test_tiled_attention": ("tiled_attention: equal to full attention", 4),
    "test_tiled_attention_memory": ("tiled_attention at T = 20 000 within the sandbox's 2 GiB", 1),
}

#: Function name → reference implementation, for the expected results of the hidden cases.
REFERENCE = {
    "online_softmax": ref.online_softmax,
    "tile_schedule": ref.tile_schedule,
    "tiled_attention": ref.tiled_attention,
}

# ------------------------------------------------------------------ solution
#: The source notebook's solution cells (grade_id → source), read from source/07_tiled_attention/, never a copy.
SOLUTION = source_solution(__name__)

# ------------------------------------------------------------------ correct variants
CORRECT = {
    "logsumexp": Variant("online_softmax keeps a running log-sum-exp with np.logaddexp", {"online_softmax": '''
def online_softmax(blocks):
    lse = np.full(blocks[0].shape[:-1] + (1,), -np.inf)
    for x in blocks:
        top = np.max(x, axis=-1, keepdims=True)
        safe = np.where(top == -np.inf, 0.0, top)
        block_lse = safe + np.log(np.sum(np.exp(x - safe), axis=-1, keepdims=True) + (top == -np.inf))
        block_lse = np.where(top == -np.inf, -np.inf, block_lse)
        lse = np.logaddexp(lse, block_lse)
    finite = np.where(lse == -np.inf, 0.0, lse)
    return np.concatenate([np.where(lse == -np.inf, 0.0, np.exp(x - finite)) for x in blocks], axis=-1)
'''}),
    "merge_statistics": Variant("per-block (max, sum) pairs merged pairwise with functools.reduce", {
        "online_softmax": '''
import functools


def _stats(x):
    m = np.max(x, axis=-1, keepdims=True)
    safe = np.where(m == -np.inf, 0.0, m)
    return m, np.sum(np.exp(x - safe), axis=-1, keepdims=True)


def _merge(a, b):
    (m1, l1), (m2, l2) = a, b
    m = np.maximum(m1, m2)
    safe = np.where(m == -np.inf, 0.0, m)
    return m, l1 * np.exp(np.where(m1 == -np.inf, -np.inf, m1 - safe)) + \\
        l2 * np.exp(np.where(m2 == -np.inf, -np.inf, m2 - safe))


def online_softmax(blocks):
    m, l = functools.reduce(_merge, [_stats(x) for x in blocks])
    safe = np.where(m == -np.inf, 0.0, m)
    out = [np.exp(x - safe) / np.where(l == 0, 1.0, l) for x in blocks]
    return np.concatenate(out, axis=-1)
'''}),
    "concatenate_then_softmax": Variant(
        "online_softmax concatenates the blocks and takes a masked-style softmax (right values, no online pass)", {
            "online_softmax": '''
def online_softmax(blocks):
    x = np.concatenate(blocks, axis=-1)
    top = x.max(axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(top), top, 0.0))
    s = e.sum(axis=-1, keepdims=True)
    return e / np.where(s > 0, s, 1.0)
'''}),
    "loops_over_rows": Variant("online_softmax row by row with Python floats and math.exp", {"online_softmax": '''
import math


def online_softmax(blocks):
    lead = blocks[0].shape[:-1]
    rows = [b.reshape(-1, b.shape[-1]) for b in blocks]
    result = np.zeros((rows[0].shape[0], sum(r.shape[1] for r in rows)))
    for i in range(rows[0].shape[0]):
        m, l = -math.inf, 0.0
        for r in rows:
            for value in r[i]:
                if value == -math.inf:
                    continue
                if value > m:
                    l = l * math.exp(m - value) if m > -math.inf else 0.0
                    m = value
                l += math.exp(value - m)
        j = 0
        for r in rows:
            for value in r[i]:
                result[i, j] = 0.0 if value == -math.inf else math.exp(value - m) / l
                j += 1
    return result.reshape(lead + (result.shape[1],))
'''}),
    "schedule_vectorised": Variant("tile_schedule from index comparisons on the blocks' first and last rows", {
        "tile_schedule": '''
SKIPPED, MASKED, FULL = 0, 1, 2


def tile_schedule(T_q, T_k, block_q, block_k, causal):
    if causal and T_q > T_k:
        raise ValueError("more queries than keys under the causal mask")
    q0 = np.arange(0, T_q, block_q)
    k0 = np.arange(0, T_k, block_k)
    if not causal:
        return np.full((q0.size, k0.size), FULL)
    q1 = np.minimum(q0 + block_q, T_q) - 1 + (T_k - T_q)
    k1 = np.minimum(k0 + block_k, T_k) - 1
    return np.where(k0[None, :] > q1[:, None], SKIPPED,
                    np.where(k1[None, :] <= (q0 + T_k - T_q)[:, None], FULL, MASKED))
'''}),
    "schedule_from_mask": Variant("tile_schedule read off the (T_q, T_k) bool mask with any / all per tile", {
        "tile_schedule": '''
SKIPPED, MASKED, FULL = 0, 1, 2


def tile_schedule(T_q, T_k, block_q, block_k, causal):
    if causal and T_q > T_k:
        raise ValueError("T_q > T_k")
    if causal:
        mask = np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)
    else:
        mask = np.ones((T_q, T_k), dtype=bool)
    rows = []
    for qs in range(0, T_q, block_q):
        row = []
        for ks in range(0, T_k, block_k):
            tile = mask[qs:qs + block_q, ks:ks + block_k]
            row.append(FULL if tile.all() else MASKED if tile.any() else SKIPPED)
        rows.append(row)
    return np.array(rows)
'''}),
    "keys_outer_loop": Variant("Dao et al. 2022 Algorithm 1's loop order: key blocks outside, state for all queries", {
        "tiled_attention": '''
def tiled_attention(Q, K, V, block_q, block_k, causal):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    m = np.full(batch + (T_q, 1), -np.inf)
    l = np.zeros(batch + (T_q, 1))
    O = np.zeros(batch + (T_q, V.shape[-1]))
    for b, ks in enumerate(range(0, T_k, block_k)):
        k, v = K[..., ks:ks + block_k, :], V[..., ks:ks + block_k, :]
        for a, qs in enumerate(range(0, T_q, block_q)):
            if schedule[a, b] == SKIPPED:
                continue
            qe = min(qs + block_q, T_q)
            s = Q[..., qs:qe, :] @ np.swapaxes(k, -1, -2) / np.sqrt(Q.shape[-1])
            if schedule[a, b] == MASKED:
                visible = np.arange(ks, ks + k.shape[-2]) <= np.arange(qs, qe)[:, None] + T_k - T_q
                s = np.where(visible, s, -np.inf)
            m_old = m[..., qs:qe, :]
            m_new = np.maximum(m_old, s.max(axis=-1, keepdims=True))
            p = np.exp(s - m_new)
            l[..., qs:qe, :] = np.exp(m_old - m_new) * l[..., qs:qe, :] + p.sum(axis=-1, keepdims=True)
            O[..., qs:qe, :] = np.exp(m_old - m_new) * O[..., qs:qe, :] + p @ v
            m[..., qs:qe, :] = m_new
    return O / l
'''}),
    "normalised_accumulator": Variant("the output kept normalised at every step (Dao et al. 2022, Alg. 1 line 12)", {
        "tiled_attention": '''
def tiled_attention(Q, K, V, block_q, block_k, causal):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    pieces = []
    for a, qs in enumerate(range(0, T_q, block_q)):
        q = Q[..., qs:qs + block_q, :]
        n = q.shape[-2]
        m, l = np.full(batch + (n, 1), -np.inf), np.zeros(batch + (n, 1))
        O = np.zeros(batch + (n, V.shape[-1]))
        for b, ks in enumerate(range(0, T_k, block_k)):
            if schedule[a, b] == SKIPPED:
                continue
            s = q @ np.swapaxes(K[..., ks:ks + block_k, :], -1, -2) / np.sqrt(Q.shape[-1])
            if schedule[a, b] == MASKED:
                i = np.arange(qs, qs + n)[:, None] + (T_k - T_q)
                j = np.arange(ks, ks + s.shape[-1])[None, :]
                s = np.where(j <= i, s, -np.inf)
            m_tile = s.max(axis=-1, keepdims=True)  # -inf for a row the mask hides in this tile
            p = np.exp(s - np.where(m_tile == -np.inf, 0.0, m_tile))
            l_tile = p.sum(axis=-1, keepdims=True)
            m_new = np.maximum(m, m_tile)
            l_new = np.exp(m - m_new) * l + np.exp(m_tile - m_new) * l_tile
            O = (l * np.exp(m - m_new) * O + np.exp(m_tile - m_new) * (p @ V[..., ks:ks + block_k, :])) / l_new
            m, l = m_new, l_new
        pieces.append(O)
    return np.concatenate(pieces, axis=-2)
'''}),
    "mask_every_tile": Variant("no tile skipped: every tile computed with the full index mask (right, twice the work)", {
        "tiled_attention": '''
def tiled_attention(Q, K, V, block_q, block_k, causal):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if causal and T_q > T_k:
        raise ValueError("T_q > T_k")
    out = []
    for qs in range(0, T_q, block_q):
        q = Q[..., qs:qs + block_q, :]
        m = l = acc = None
        for ks in range(0, T_k, block_k):
            s = np.einsum("...qd,...kd->...qk", q, K[..., ks:ks + block_k, :]) / np.sqrt(Q.shape[-1])
            if causal:
                i = np.arange(qs, qs + q.shape[-2])[:, None] + T_k - T_q
                s = np.where(np.arange(ks, ks + s.shape[-1]) <= i, s, -np.inf)
            m_new = s.max(axis=-1, keepdims=True) if m is None else np.maximum(m, s.max(axis=-1, keepdims=True))
            p = np.exp(s - m_new)
            pv = np.einsum("...qk,...kd->...qd", p, V[..., ks:ks + block_k, :])
            if m is None:
                l, acc = p.sum(axis=-1, keepdims=True), pv
            else:
                c = np.exp(m - m_new)
                l, acc = c * l + p.sum(axis=-1, keepdims=True), c * acc + pv
            m = m_new
        out.append(acc / l)
    return np.concatenate(out, axis=-2)
'''}),
    "query_chunks_exact_softmax": Variant(
        "query blocks with an exact softmax over all keys (O(block_q · T_k) memory; block_k unused)", {
            "tiled_attention": '''
def tiled_attention(Q, K, V, block_q, block_k, causal):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    if causal and T_q > T_k:
        raise ValueError("T_q > T_k")
    chunks = []
    for qs in range(0, T_q, block_q):
        s = Q[..., qs:qs + block_q, :] @ np.swapaxes(K, -1, -2) / np.sqrt(K.shape[-1])
        if causal:
            i = np.arange(qs, qs + s.shape[-2])[:, None] + (T_k - T_q)
            s = np.where(np.arange(T_k) <= i, s, -np.inf)
        w = np.exp(s - s.max(axis=-1, keepdims=True))
        chunks.append((w / w.sum(axis=-1, keepdims=True)) @ V)
    return np.concatenate(chunks, axis=-2)
'''}),
    "exp2_and_padding": Variant("base-2 exponentials (scores × log2 e, as FlashAttention-2) over zero-padded blocks", {
        "tiled_attention": '''
def tiled_attention(Q, K, V, block_q, block_k, causal):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)
    n_k = schedule.shape[1]
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    pad = n_k * block_k - T_k
    Kp = np.concatenate([np.broadcast_to(K, batch + K.shape[-2:]), np.zeros(batch + (pad, K.shape[-1]))], axis=-2)
    Vp = np.concatenate([np.broadcast_to(V, batch + V.shape[-2:]), np.zeros(batch + (pad, V.shape[-1]))], axis=-2)
    scale = np.log2(np.e) / np.sqrt(Q.shape[-1])
    result = np.zeros(batch + (T_q, V.shape[-1]))
    for a in range(schedule.shape[0]):
        qs, qe = a * block_q, min((a + 1) * block_q, T_q)
        m = np.full(batch + (qe - qs, 1), -np.inf)
        l = np.zeros_like(m)
        acc = np.zeros(batch + (qe - qs, V.shape[-1]))
        for b in range(n_k):
            if schedule[a, b] == SKIPPED:
                continue
            ks = b * block_k
            s = Q[..., qs:qe, :] @ np.swapaxes(Kp[..., ks:ks + block_k, :], -1, -2) * scale
            j = np.arange(ks, ks + block_k)
            keep = j < T_k
            if causal:
                keep = keep & (j <= np.arange(qs, qe)[:, None] + T_k - T_q)
            s = np.where(keep, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            p = np.exp2(s - m_new)
            l = np.exp2(m - m_new) * l + p.sum(axis=-1, keepdims=True)
            acc = np.exp2(m - m_new) * acc + p @ Vp[..., ks:ks + block_k, :]
            m = m_new
        result[..., qs:qe, :] = acc / l
    return result
'''}),
}

# ------------------------------------------------------------------ known mistakes
_OS, _TS, _TA = "online_softmax", "tile_schedule", "tiled_attention"
_ONE_ROW = frozenset({"one row of 13 logits in blocks of 2, 3, 4, 4 (a leading all -inf block, levels -2000, "
                      "-800, -1600)", "one row of 9 logits in blocks of 1 (a leading -inf, levels -2000, -800, -1600)"})
_SQUARE = frozenset({"causal, T = 11 in tiles of 4 × 3", "causal, batch (2, 2) with K and V shared over the heads, "
                     "T = 9 in tiles of 4 × 2"})
_SCHEDULE_NOT_CAUSAL = frozenset({"no mask, 7 × 9 in tiles of 3 × 3", "causal, 6 queries over 4 keys: ValueError"})
_NOT_CAUSAL = frozenset({"no mask, T = 10 in tiles of 3 × 4", "no mask, 7 queries over 4 keys in tiles of 3 × 3"})

KNOWN_MISTAKES = {
    # ---- online_softmax
    "sum_not_rescaled": Mistake(
        "the running sum is not rescaled when the maximum rises", "test_online_softmax",
        "When a block raises the row's maximum from m to m', the sum so far was measured from m: multiply it by "
        "e^(m − m') before adding the new block's exponentials.",
        (Edit(_OS, "l = l * np.exp(m - shift) + ", "l = l + "),)),
    "rescale_factor_inverted": Mistake(
        "the running sum is multiplied by e^(m' − m) instead of e^(m − m')", "test_online_softmax",
        "The old sum was measured from the old maximum m; measured from the new, larger m' every term is smaller, "
        "so the factor is e^(m − m') ≤ 1, not its inverse.",
        (Edit(_OS, "l * np.exp(m - shift)", "l * np.exp(shift - m)"),), evidence="deepseek-ai/FlashMLA#177"),
    "block_max_not_running_max": Mistake(
        "the maximum of the current block is used instead of the running maximum", "test_online_softmax",
        "m must be the largest entry seen so far in the row, max(m, block max). With the block's own maximum the "
        "rescaling factor e^(m − m') can exceed e^709 and overflow when an earlier block held much larger logits.",
        (Edit(_OS, "m_new = np.maximum(m, np.max(x, axis=-1, keepdims=True))",
              "m_new = np.max(x, axis=-1, keepdims=True)"),)),
    "final_pass_block_max": Mistake(
        "the second pass measures each block from its own maximum instead of the row's", "test_online_softmax",
        "Every probability is e^(x − m) / l with the same m and l for the whole row (the ones the first pass found), "
        "not a maximum per block.",
        (Edit(_OS, "np.exp(x - shift) / total for x in blocks", "np.exp(x - np.max(x, axis=-1, keepdims=True)) / "
              "total for x in blocks"),)),
    "each_block_normalised": Mistake(
        "each block is normalised by its own sum (a softmax per block)", "test_online_softmax",
        "The blocks are parts of one row: they share one normaliser, the running sum l over the whole row; a "
        "softmax per block makes every block sum to 1 on its own.",
        (Edit(_OS, "np.exp(x - shift) / total for x in blocks",
              "np.exp(x - shift) / np.sum(np.exp(x - shift), axis=-1, keepdims=True) for x in blocks"),)),
    "no_max_subtraction": Mistake(
        "exponentials taken without subtracting the running maximum", "test_online_softmax",
        "e^x overflows above x ≈ 709 and underflows to 0 below about −745 in float64. Measure every exponential "
        "from the running maximum, as the one-shot softmax subtracts the row's maximum.",
        (Edit(_OS, "l = l * np.exp(m - shift) + np.sum(np.exp(x - shift)", "l = l + np.sum(np.exp(x)"),
         Edit(_OS, "np.exp(x - shift) / total", "np.exp(x) / total"))),
    "initial_max_zero": Mistake(
        "the running maximum starts at 0 instead of −inf", "test_online_softmax",
        "The running maximum must start below every possible logit (−inf). Starting at 0, a row whose logits are "
        "all far below 0 is measured from 0, every e^(x − 0) underflows to 0 and the row comes out all zeros.",
        (Edit(_OS, "m = np.full(blocks[0].shape[:-1] + (1,), -np.inf)", "m = np.zeros(blocks[0].shape[:-1] + (1,))"),),
        evidence="Dao-AILab/flash-attention#2082, flashinfer-ai/flashinfer#4267"),
    "minus_inf_shift_nan": Mistake(
        "no guard while the running maximum is still −inf: −inf − (−inf) = NaN", "test_online_softmax",
        "While a row has seen only −inf entries its maximum is −inf, and e^(m − m') with m = m' = −inf is "
        "e^(NaN). Shift by a finite number (0) for such rows.",
        (Edit(_OS, "shift = np.where(m_new == -np.inf, 0.0, m_new)  # rows with nothing finite yet: any finite shift",
              "shift = m_new"),), evidence="flashinfer-ai/flashinfer#4401"),
    "masked_row_nan": Mistake(
        "a row whose entries are all −inf gives 0 / 0 = NaN instead of zeros", "test_online_softmax",
        "A fully masked row has no softmax: its sum is 0. As in assignment 4 it gets all-zero probabilities, "
        "without NaN — divide by 1 where the sum is 0.",
        (Edit(_OS, "total = np.where(l > 0, l, 1.0)", "total = l"),), evidence="pytorch/pytorch#131060",
        passes=_ONE_ROW),
    "concatenated_on_axis_0": Mistake(
        "the probability blocks are joined along axis 0 instead of the last axis", "test_online_softmax",
        "The blocks split each row along its last axis; join them back along the same axis (axis=-1). For one "
        "row both agree, for a batch of rows they do not.",
        (Edit(_OS, "for x in blocks], axis=-1)", "for x in blocks], axis=0)"),), passes=_ONE_ROW),

    # ---- tile_schedule
    "skip_by_first_query": Mistake(
        "a tile is skipped when the block's first query cannot see its first key", "test_tile_schedule",
        "A tile can be skipped only if no query of the block sees any of its keys: compare the first key with the "
        "position of the block's last query.",
        (Edit(_TS, "if first_k > last_q + offset:", "if first_k > first_q + offset:"),), passes=_SCHEDULE_NOT_CAUSAL),
    "full_by_last_query": Mistake(
        "a tile counts as full when the block's last query sees its last key", "test_tile_schedule",
        "A tile needs no mask only if every query sees every key, in particular the first query the last key; "
        "otherwise the earlier queries of the block would see future keys.",
        (Edit(_TS, "elif last_k > first_q + offset:", "elif last_k > last_q + offset:"),), passes=_SCHEDULE_NOT_CAUSAL),
    "skip_off_by_one": Mistake(
        "a tile is skipped when the last query's position equals the first key (≥ instead of >)",
        "test_tile_schedule",
        "Every position sees itself: a tile whose first key sits exactly at the last query's position is needed "
        "(one entry, the diagonal).",
        (Edit(_TS, "if first_k > last_q + offset:", "if first_k >= last_q + offset:"),), passes=_SCHEDULE_NOT_CAUSAL),
    "top_left_alignment": Mistake(
        "queries aligned top-left (query i at position i) when T_q < T_k", "test_tile_schedule",
        "The T_q queries are the last T_q of the T_k positions (bottom-right, as assignment 5's causal_mask): "
        "query i sits at position i + T_k − T_q.",
        (Edit(_TS, "offset = T_k - T_q  # query i sits at position i + offset (bottom-right)", "offset = 0"),),
        evidence="pytorch/pytorch#108108, Dao-AILab/flash-attention#517",
        passes=_SCHEDULE_NOT_CAUSAL | {"causal, T = 10 in tiles of 3 × 4", "causal, T = 11 in tiles of 4 × 2"}),
    "floor_block_count": Mistake(
        "T // block blocks: the shorter last block is missing", "test_tile_schedule",
        "When the block size does not divide T the last block is shorter but still there: ceil(T / block) "
        "blocks, -(-T // block).",
        (Edit(_TS, "n_q, n_k = -(-T_q // block_q), -(-T_k // block_k)", "n_q, n_k = T_q // block_q, T_k // block_k"),),
        evidence="FluxML/NNkernels.jl#16", passes=frozenset({"causal, 6 queries over 4 keys: ValueError"})),
    "no_error_more_queries": Mistake(
        "no ValueError for more queries than keys under the causal mask", "test_tile_schedule",
        "With T_q > T_k the first queries see no key at all (their softmax would be 0 / 0); refuse such sizes "
        "with a ValueError, as assignment 5's causal_mask does.",
        (Edit(_TS, '    if causal and T_q > T_k:\n        raise ValueError(f"T_q={T_q} > T_k={T_k}: the first queries '
                   'would see no key")\n', ""),),
        passes=frozenset({"causal, T = 10 in tiles of 3 × 4", "causal, 5 queries over 13 keys in tiles of 2 × 3",
                          "causal, T = 11 in tiles of 4 × 2", "no mask, 7 × 9 in tiles of 3 × 3"})),

    # ---- tiled_attention
    "output_not_rescaled": Mistake(
        "the sum is rescaled when the maximum rises, the accumulated output is not", "test_tiled_attention",
        "The accumulated output O = Σ e^(s − m) v was measured from the old maximum, like the sum: multiply both "
        "by e^(m − m') when the maximum rises.",
        (Edit(_TA, "acc = rescale * acc + p @ v", "acc = acc + p @ v"),)),
    "nothing_rescaled": Mistake(
        "neither the sum nor the output is rescaled when the maximum rises", "test_tiled_attention",
        "Each tile is measured from the new running maximum m', so everything accumulated from the old m must be "
        "multiplied by e^(m − m') first — the sum and the output.",
        (Edit(_TA, "l = rescale * l + ", "l = l + "), Edit(_TA, "acc = rescale * acc + p @ v", "acc = acc + p @ v"))),
    "sum_not_rescaled_output_is": Mistake(
        "the output is rescaled when the maximum rises, the sum is not", "test_tiled_attention",
        "The sum l is the normaliser of the same exponentials the output accumulates: it needs the same factor "
        "e^(m − m') when the maximum rises.",
        (Edit(_TA, "l = rescale * l + ", "l = l + "),)),
    "tile_max_not_running_max": Mistake(
        "each tile is measured from its own maximum instead of the running maximum", "test_tiled_attention",
        "m must be the running maximum over all tiles so far, max(m, tile max). A tile's own maximum can be −inf "
        "(a row the mask hides in this tile) or far below an earlier tile's, and e^(m − m') then overflows.",
        (Edit(_TA, "m_new = np.maximum(m, scores.max(axis=-1, keepdims=True))  # finite: key 0 comes first",
              "m_new = scores.max(axis=-1, keepdims=True)"),)),
    "no_mask_in_diagonal_tiles": Mistake(
        "the tiles that cross the diagonal are computed without the mask", "test_tiled_attention",
        "Skipping the tiles above the diagonal is not enough: a tile the diagonal crosses holds allowed and future "
        "keys, so the mask must be applied inside it.",
        (Edit(_TA, "            if schedule[a, b] == MASKED:\n                rows = np.arange(qs, qs + n)[:, None] + "
                   "offset\n                cols = np.arange(ks, ks + k.shape[-2])[None, :]\n                scores = "
                   "np.where(cols <= rows, scores, -np.inf)\n", ""),), passes=_NOT_CAUSAL),
    "causal_ignored": Mistake(
        "the causal flag is not passed on: every tile computed, none masked", "test_tiled_attention",
        "With causal=True query i may only see keys up to its own position i + T_k − T_q.",
        (Edit(_TA, "schedule = tile_schedule(T_q, T_k, block_q, block_k, causal)",
              "schedule = tile_schedule(T_q, T_k, block_q, block_k, False)"),), passes=_NOT_CAUSAL),
    "skip_by_first_query_inline": Mistake(
        "tiles skipped when the block's first query cannot see the tile's first key", "test_tiled_attention",
        "The later queries of a block sit further right and see more keys: a tile may be skipped only when even "
        "the block's last query cannot see its first key.",
        (Edit(_TA, "            if schedule[a, b] == SKIPPED:\n                continue",
              "            if causal and ks > qs + offset:\n                continue"),), passes=_NOT_CAUSAL),
    "mask_top_left": Mistake(
        "the mask inside a tile aligned top-left (query i at position i)", "test_tiled_attention",
        "The queries are the last T_q of the T_k positions: query i sits at position i + T_k − T_q (bottom-right), "
        "as assignment 5's causal_mask.",
        (Edit(_TA, "rows = np.arange(qs, qs + n)[:, None] + offset", "rows = np.arange(qs, qs + n)[:, None]"),),
        evidence="pytorch/pytorch#108108", passes=_NOT_CAUSAL | _SQUARE),
    "diagonal_masked": Mistake(
        "the diagonal is masked too (cols < rows): a query cannot see itself", "test_tiled_attention",
        "Under the causal mask every position may attend to itself: key j is allowed when j ≤ i + T_k − T_q.",
        (Edit(_TA, "np.where(cols <= rows, scores, -np.inf)", "np.where(cols < rows, scores, -np.inf)"),),
        evidence="pbloem/former#10", passes=_NOT_CAUSAL),
    "last_key_block_dropped": Mistake(
        "the shorter last key block is never visited", "test_tiled_attention",
        "When block_k does not divide T_k the last key block is shorter, but its keys count too: visit "
        "range(0, T_k, block_k), not only the full blocks.",
        (Edit(_TA, "for b, ks in enumerate(range(0, T_k, block_k)):",
              "for b, ks in enumerate(range(0, T_k - block_k + 1, block_k)):"),), evidence="FluxML/NNkernels.jl#16"),
    "last_query_block_dropped": Mistake(
        "the shorter last query block is never computed (its rows stay 0)", "test_tiled_attention",
        "When block_q does not divide T_q the last query block is shorter but its queries need outputs too: "
        "ceil(T_q / block_q) blocks.",
        (Edit(_TA, "for a, qs in enumerate(range(0, T_q, block_q)):",
              "for a, qs in enumerate(range(0, T_q // block_q * block_q, block_q)):"),)),
    "not_divided_by_sum": Mistake(
        "the accumulated output is returned without dividing by the running sum", "test_tiled_attention",
        "The accumulator holds Σ e^(s − m) v; the softmax weights are e^(s − m) / l, so divide by l once at the end.",
        (Edit(_TA, "output[..., qs:qs + n, :] = acc / l", "output[..., qs:qs + n, :] = acc"),)),
    "normalised_without_old_sum": Mistake(
        "output kept normalised, but the old output is not weighted by the old sum", "test_tiled_attention",
        "A normalised output O = (Σ e^(s − m) v) / l must be turned back into the unnormalised sum (× l · e^(m − m')) "
        "before the tile is added and the total divided by the new l.",
        (Edit(_TA, "acc = rescale * acc + p @ v", "acc = (rescale * acc + p @ v) / l"),
         Edit(_TA, "output[..., qs:qs + n, :] = acc / l", "output[..., qs:qs + n, :] = acc")),
        evidence="PaddleJitLab/CUDATutorial#69"),
    "unscaled_scores": Mistake(
        "scores not divided by √d_k", "test_tiled_attention",
        "Tiled attention must compute the same attention as assignment 1: divide every tile's scores by √d_k "
        "(Vaswani et al. 2017, eq. 1).",
        (Edit(_TA, "scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(Q.shape[-1])", "scores = q @ np.swapaxes(k, -1, -2)"),)),

    # ---- tiled_attention at T = 20 000
    "full_score_matrix": Mistake(
        "the tiles are cut out of the full (T_q, T_k) score matrix computed first", "test_tiled_attention_memory",
        "Computing Q Kᵀ once and slicing it gives the right numbers but needs T_q · T_k · 8 bytes: 3.2 GB at "
        "T = 20 000, more than the grader allows. Compute each tile's scores from its own rows of Q and K.",
        (Edit(_TA, "    offset = T_k - T_q\n", "    offset = T_k - T_q\n    all_scores = Q @ np.swapaxes(K, -1, -2) / "
                   "np.sqrt(Q.shape[-1])\n"),
         Edit(_TA, "scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(Q.shape[-1])",
              "scores = all_scores[..., qs:qs + n, ks:ks + k.shape[-2]]"))),
}


#: The grader's form of the mistakes: the edited cells (what the spec hands the grader).
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)


# ------------------------------------------------------------------ hidden cases
def _levels(rng, sizes, levels, sd=3.0):
    """Blocks of one row: block i has ``sizes[i]`` entries around ``levels[i]`` (−inf for a masked block)."""
    return [np.full(n, -np.inf) if level == -np.inf else level + rng.normal(0, sd, n) for n, level in zip(sizes, levels)]


def _softmax_cases():
    rng = np.random.default_rng(7001)
    one_row = _levels(rng, (2, 3, 4, 4), (-np.inf, -2000.0, -800.0, -1600.0))
    singles = np.concatenate([[-np.inf], -2000 + rng.normal(0, 3, 2), -800 + rng.normal(0, 3, 3),
                              -1600 + rng.normal(0, 3, 3)])
    batch = np.stack([np.concatenate(_levels(rng, (3, 3, 3, 1), (-np.inf, -1500.0, -800.0, -1200.0))),
                      np.full(10, -np.inf),
                      np.where(rng.random(10) < 0.3, -np.inf, rng.normal(0, 4.0, 10)),
                      np.concatenate(_levels(rng, (3, 3, 3, 1), (-2500.0, 900.0, -100.0, 20.0)))])
    batch[2, :3] = -np.inf
    level = np.repeat([-700.0, -1900.0, 900.0], 3)  # entries 0-2, 3-5, 6-8 (blocks of 4, 2, 3 straddle them)
    heads = level + rng.normal(0, 2.0, (2, 2, 9))
    heads[0, 0] = -np.inf
    heads[0, 1] -= 2000.0  # a row whose logits are all far below 0
    heads[1, 1, :4] = -np.inf
    return [
        Case("one row of 13 logits in blocks of 2, 3, 4, 4 (a leading all -inf block, levels -2000, -800, -1600)",
             "online_softmax", (one_row,), outputs=("the probabilities",), rtol=1e-9, atol=1e-12),
        Case("one row of 9 logits in blocks of 1 (a leading -inf, levels -2000, -800, -1600)", "online_softmax",
             ([singles[i:i + 1] for i in range(singles.size)],), outputs=("the probabilities",), rtol=1e-9,
             atol=1e-12),
        Case("4 rows in blocks of 3, 3, 3, 1 (a fully -inf row, leading -inf blocks, levels ±2500)", "online_softmax",
             ([batch[:, 0:3], batch[:, 3:6], batch[:, 6:9], batch[:, 9:]],), outputs=("the probabilities",),
             rtol=1e-9, atol=1e-12, no_warnings=True),
        Case("a (2, 2) batch of rows in blocks of 4, 2, 3 (a fully -inf row, levels -700, -1900, 900)",
             "online_softmax", ([heads[..., :4], heads[..., 4:6], heads[..., 6:]],),
             outputs=("the probabilities",), rtol=1e-9, atol=1e-12, no_warnings=True),
    ]


def _schedule_cases():
    out = ("the schedule",)
    return [
        Case("causal, T = 10 in tiles of 3 × 4", "tile_schedule", (10, 10, 3, 4, True), outputs=out),
        Case("causal, 5 queries over 13 keys in tiles of 2 × 3", "tile_schedule", (5, 13, 2, 3, True), outputs=out),
        Case("causal, T = 11 in tiles of 4 × 2", "tile_schedule", (11, 11, 4, 2, True), outputs=out),
        Case("no mask, 7 × 9 in tiles of 3 × 3", "tile_schedule", (7, 9, 3, 3, False), outputs=out),
        Case("causal, 6 queries over 4 keys: ValueError", "tile_schedule", (6, 4, 2, 2, True), raises="ValueError"),
    ]


def _qkv(rng, batch_q, batch_kv, T_q, T_k, spiky=(), d_k=4, d_v=3):
    # Scores of a few units: no row is one-hot, so a dropped or leaked key always shows. The ``spiky`` rows
    # of Q score 2000 against key 0 and 0 against every other key: measured from a later tile's maximum
    # instead of the running one, their e^(m − m') = e^2000 overflows; the other rows then score highest
    # against the last key, so that their running maximum rises in the last tile and must be rescaled.
    # Under the mask, tiles that hide a whole row show the running-maximum mistake anyway, so the causal
    # cases need no spiky rows (they would hide the keys they do not pick).
    Q = rng.normal(size=batch_q + (T_q, d_k)) * 1.5
    K = rng.normal(size=batch_kv + (T_k, d_k)) * 1.5
    if spiky:
        Q[..., list(spiky), :] = [1000.0] + [0.0] * (d_k - 1)  # along e_0: scores 2000 with key 0, 0 with the others
        K[..., 1:, 0] = 0.0
        K[..., 0, 0] = 4.0
        K[..., -1, 1] = 4.0  # …while the other rows find their largest score in the last tile: the maximum rises
        others = [i for i in range(T_q) if i not in spiky]
        Q[..., others, 1] = np.abs(Q[..., others, 1]) + 1.0
    return Q, K, rng.normal(size=batch_kv + (T_k, d_v))


def _tiled_cases():
    rng = np.random.default_rng(7003)
    same = dict(outputs=("the output",), rtol=0.0, atol=1e-12)
    return [
        Case("no mask, T = 10 in tiles of 3 × 4", "tiled_attention", (*_qkv(rng, (), (), 10, 10, (1, 8)), 3, 4, False),
             **same),
        Case("causal, T = 11 in tiles of 4 × 3", "tiled_attention", (*_qkv(rng, (), (), 11, 11), 4, 3, True), **same),
        Case("causal, 5 queries over 12 keys in tiles of 2 × 5", "tiled_attention",
             (*_qkv(rng, (), (), 5, 12), 2, 5, True), **same),
        Case("causal, batch (2, 2) with K and V shared over the heads, T = 9 in tiles of 4 × 2", "tiled_attention",
             (*_qkv(rng, (2, 2), (2, 1), 9, 9), 4, 2, True), **same),
        Case("no mask, 7 queries over 4 keys in tiles of 3 × 3", "tiled_attention",
             (*_qkv(rng, (), (), 7, 4, (0, 5)), 3, 3, False), **same),
    ]


#: The memory case's time budget in the learner's kernel, in seconds of the kernel's CPU time (``Case.cpu_time``):
#: the time a busy grading machine makes the call wait is not counted, so load cannot fail a correct answer. The
#: reference needs 0.8–2.4 s, the slowest correct variants (every tile computed, or an exact softmax over all keys
#: per query block) 6–11 s, at idle, where CPU time equals wall time: 60 s is 5× the slowest correct variant and
#: 25× the reference, while a per-row Python loop (minutes) still runs out. The cell has no per-cell wall-clock
#: limit of its own (c.Execute.timeout); the notebook's (c.SandboxedExecute.wall_clock_limit = 120 s) applies.
MEMORY_CASE_SECONDS = 60.0


def memory_case() -> Case:
    """Causal self-attention at T = 20 000 (``reference.MEMORY_CASE``): its score matrix needs 3.2 GB."""
    spec = ref.MEMORY_CASE
    # drawn as rng = default_rng(7004); [rng.normal(size=(T, d_head)) for _ in range(3)], and sent into the
    # kernel as that recipe (attention_lab.core.values.SeededNormal), not as 3.8 MB of data
    Q, K, V = wire.seeded_normals(7004, (spec["T"], spec["d_head"]), 3)
    return Case(f"causal, T = {spec['T']} (its T × T scores would need 3.2 GB) in tiles of {spec['block_q']} × "
                f"{spec['block_k']}", "tiled_attention", (Q, K, V, spec["block_q"], spec["block_k"], spec["causal"]),
                outputs=("the output",), rtol=0.0, atol=1e-12, seconds=MEMORY_CASE_SECONDS, cpu_time=True,
                memory_limit=ref.SANDBOX_MEMORY_LIMIT)


#: A small model of :func:`memory_case` for tests that grade whole answers in-process many times over (every
#: variant with every mistake): the same causal self-attention under the same rule — one T × T float64 matrix
#: (8 T² = 128 MB) cannot fit in the limit (24 MiB, plus the forked child's 64 MiB headroom) while the tiles
#: (256 × 128) and the inputs do — at a fiftieth of the work. tests/test_tiled_attention_bank.py asserts that the
#: bank's answers get the same outcome on it as on the real case; the grader only ever uses :func:`memory_case`.
MEMORY_STAND_IN = {"T": 4_000, "d_head": 8, "block_q": 256, "block_k": 128, "causal": True,
                   "memory_limit": 24 * 2**20}


def memory_stand_in_case() -> Case:
    """:data:`MEMORY_STAND_IN` as a :class:`Case` shaped like :func:`memory_case` (tests only)."""
    spec = MEMORY_STAND_IN
    assert 8 * spec["T"] ** 2 > spec["memory_limit"] + 64 * 2**20  # no T × T matrix fits, nor the child's headroom
    # rng = default_rng(7005); [rng.normal(size=(T, d_head)) for _ in range(3)], sent as that recipe as memory_case's
    # are (not as 0.8 MB of base64 that every request of every grading would encode, hash and decode again)
    Q, K, V = wire.seeded_normals(7005, (spec["T"], spec["d_head"]), 3)
    return Case(f"causal, T = {spec['T']} (its T × T scores would need 128 MB) in tiles of "
                f"{spec['block_q']} × {spec['block_k']}", "tiled_attention",
                (Q, K, V, spec["block_q"], spec["block_k"], spec["causal"]), outputs=("the output",), rtol=0.0,
                atol=1e-12, seconds=MEMORY_CASE_SECONDS, cpu_time=True, memory_limit=spec["memory_limit"])


def hidden_cases(include_memory_case: bool = True) -> dict[str, list[Case]]:
    """Proposed hidden cases, test-cell grade_id → cases (seeded; the memory case holds 3 arrays of 1.3 MB)."""
    return {
        "test_online_softmax": _softmax_cases(),
        "test_tile_schedule": _schedule_cases(),
        "test_tiled_attention": _tiled_cases(),
        "test_tiled_attention_memory": [memory_case()] if include_memory_case else [],
    }
