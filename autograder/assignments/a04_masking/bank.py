"""Differently written answers to assignment 4 (masks and numerical stability): correct ones and known mistakes.

Each variant replaces solution cells (keyed by the cell's nbgrader
``grade_id``); cells it does not name keep the source notebook's solution.
Every correct variant must earn full marks; every mistake must lose points
exactly on the autograder cells in its ``breaks`` and be named there (see
:mod:`autograder.grader.spec`).
Known mistakes are small edits of the source notebook's solution cells
(``KNOWN_MISTAKES``, :class:`~autograder.grader.bank.Mistake`, applied to ``SOLUTION``);
``MISTAKES`` holds them as the edited cells the grader uses.

Mistakes follow ``shared/notes/mistakes.md``: M7 (masking with 0), M8 (masking
after the softmax), M9 (fully masked rows: −inf → NaN, −1e9 → uniform), M11
(float16 and large negative constants), M15 (padding on the query axis), M16
(inverted mask), M18 (query and key axes swapped in cross-attention) and M6
(no max subtraction).
"""

from __future__ import annotations

from autograder.grader.bank import Edit, Mistake, source_solution, variants
from autograder.grader.spec import Variant

CORRECT = {
    "loops": Variant("explicit Python loops: over sequences and positions for the masks, over rows for the softmax", {
        "padding_mask": '''
def padding_mask(lengths, T):
    B = len(lengths)
    for length in lengths:
        if length < 0 or length > T:
            raise ValueError(f"lengths must be between 0 and T={T}; got {length}")
    mask = np.zeros((B, 1, T), dtype=bool)
    for b in range(B):
        for j in range(lengths[b]):
            mask[b, 0, j] = True
    return mask
''',
        "causal_padding_mask": '''
def causal_padding_mask(lengths, T):
    pad = padding_mask(lengths, T)
    mask = np.zeros((len(lengths), T, T), dtype=bool)
    for b in range(len(lengths)):
        for i in range(T):
            for j in range(i + 1):
                mask[b, i, j] = pad[b, 0, j]
    return mask
''',
        "masked_softmax": '''
def masked_softmax(scores, mask, axis=-1):
    scores = np.asarray(scores)
    mask = np.broadcast_to(mask, scores.shape)
    x = np.moveaxis(scores, axis, -1)
    m = np.moveaxis(mask, axis, -1)
    out = np.zeros_like(x)
    for index in np.ndindex(*x.shape[:-1]):
        allowed = m[index]
        if not allowed.any():
            continue                      # nothing to attend to: the row stays 0
        row = x[index][allowed]
        e = np.exp(row - row.max())
        out[index][allowed] = e / e.sum()
    return np.moveaxis(out, -1, axis)
''',
        "masked_attention": '''
def masked_attention(Q, K, V, mask):
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    batch = scores.shape[:-2]
    mask = np.broadcast_to(mask, scores.shape)
    V = np.broadcast_to(V, batch + V.shape[-2:])
    weights = np.zeros(scores.shape)
    output = np.zeros(batch + (scores.shape[-2], V.shape[-1]))
    for index in np.ndindex(*batch):
        for i in range(scores.shape[-2]):
            w = masked_softmax(scores[index][i], mask[index][i])
            weights[index][i] = w
            output[index][i] = w @ V[index]
    return output, weights
''',
    }),
    "outer_comparisons": Variant("np.greater.outer for the padding, index comparisons for the causal part", {
        "padding_mask": '''
def padding_mask(lengths, T):
    lengths = np.array(lengths)
    if lengths.min() < 0:
        raise ValueError(f"lengths must not be negative: {lengths}")
    if lengths.max() > T:
        raise ValueError(f"lengths must not exceed T={T}: {lengths}")
    return np.greater.outer(lengths, np.arange(T))[:, np.newaxis, :]    # lengths[b] > j
''',
        "causal_padding_mask": '''
def causal_padding_mask(lengths, T):
    lengths = np.asarray(lengths)
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    padding_mask(lengths, T)              # for its ValueError on bad lengths
    return (j <= i)[None, :, :] & (j[None, :, :] < lengths[:, None, None])
''',
    }),
    "finfo_fill_and_zeroing": Variant("blocked scores filled with np.finfo(dtype).min after the shift, "
                                      "fully masked rows zeroed explicitly", {
        "masked_softmax": '''
def masked_softmax(scores, mask, axis=-1):
    scores = np.asarray(scores)
    lowest = np.finfo(scores.dtype).min
    mask = np.broadcast_to(mask, scores.shape)
    any_allowed = mask.any(axis=axis, keepdims=True)
    top = np.max(np.where(mask, scores, lowest), axis=axis, keepdims=True)
    top = np.where(any_allowed, top, 0)
    shifted = np.where(mask, scores - top, lowest)   # finite everywhere; exp(lowest) is 0
    exps = np.exp(shifted)
    total = exps.sum(axis=axis, keepdims=True)
    weights = exps / np.where(any_allowed, total, 1)
    return np.where(any_allowed, weights, 0)
''',
    }),
    "renormalise_after_softmax": Variant("softmax over all scores, then blocked weights zeroed and rows renormalised "
                                         "(with a guard for empty rows)", {
        "masked_softmax": '''
def masked_softmax(scores, mask, axis=-1):
    e = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    p = e / e.sum(axis=axis, keepdims=True)
    p = p * mask
    total = p.sum(axis=axis, keepdims=True)
    return p / np.where(total == 0, 1, total)
''',
    }),
    "log_sum_exp": Variant("log-sum-exp: log-weights s − (m + log Σ exp(s − m)), exponentiated where allowed", {
        "masked_softmax": '''
def masked_softmax(scores, mask, axis=-1):
    x = np.where(mask, scores, -np.inf)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(m == -np.inf, 0, m)
    total = np.sum(np.exp(x - m), axis=axis, keepdims=True)
    has_keys = total > 0
    log_weights = (x - m) - np.log(np.where(has_keys, total, 1))   # log softmax = s - m - log sum exp(s - m)
    return np.where(mask & has_keys, np.exp(log_weights), 0)
''',
    }),
    "float32_arithmetic": Variant("every computation in float32, the softmax cast back to the input's dtype", {
        "masked_softmax": '''
def masked_softmax(scores, mask, axis=-1):
    x = np.asarray(scores, dtype=np.float32)
    x = np.where(mask, x, np.float32(-np.inf))
    top = np.max(x, axis=axis, keepdims=True)
    top[~np.isfinite(top)] = 0
    e = np.exp(x - top)
    s = e.sum(axis=axis, keepdims=True)
    s[s == 0] = 1
    return (e / s).astype(np.asarray(scores).dtype)
''',
        "masked_attention": '''
def masked_attention(Q, K, V, mask):
    Q, K, V = (np.asarray(a, dtype=np.float32) for a in (Q, K, V))
    scores = Q @ np.swapaxes(K, -1, -2) / np.float32(np.sqrt(Q.shape[-1]))
    weights = masked_softmax(scores, mask)
    return weights @ V, weights
''',
    }),
    "einsum_and_logical_and": Variant("np.einsum for the products, np.logical_and to combine the masks", {
        "causal_padding_mask": '''
def causal_padding_mask(lengths, T):
    causal = np.tril(np.ones((T, T), dtype=bool))
    return np.logical_and(padding_mask(lengths, T), causal)
''',
        "masked_attention": '''
def masked_attention(Q, K, V, mask):
    d_k = Q.shape[-1]
    scores = np.einsum("...qd,...kd->...qk", Q, K) / d_k ** 0.5
    weights = masked_softmax(scores, mask, axis=-1)
    return np.einsum("...qk,...kv->...qv", weights, V), weights
''',
    }),
    "errstate_nan_to_zero": Variant("−inf fill, NaN rows computed under np.errstate and replaced by 0 afterwards", {
        "masked_softmax": '''
def masked_softmax(scores, mask, axis=-1):
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(mask, scores, -np.inf)
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))   # NaN in fully masked rows
        p = e / np.sum(e, axis=axis, keepdims=True)
    return np.where(np.isnan(p), 0, p)
''',
    }),
    "prints_and_warns": Variant("prints to stdout and stderr; masked_attention builds an additive log-mask that "
                                "makes NumPy warn", {
        "padding_mask": '''
import sys

def padding_mask(lengths, T):
    print(f"padding_mask: lengths={list(lengths)}, T={T}", file=sys.stderr)
    lengths = np.asarray(lengths)
    if ((lengths < 0) | (lengths > T)).any():
        raise ValueError(f"bad lengths {lengths} for T={T}")
    return np.arange(T)[None, None, :] < lengths[:, None, None]
''',
        "masked_softmax": '''
import sys

def masked_softmax(scores, mask, axis=-1):
    print("masked_softmax on", np.shape(scores), file=sys.stderr)
    x = np.where(mask, scores, -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    exps = np.exp(x - np.where(np.isneginf(top), 0, top))
    total = np.sum(exps, axis=axis, keepdims=True)
    return exps / np.maximum(total, np.finfo(exps.dtype).tiny)
''',
        "masked_attention": '''
def masked_attention(Q, K, V, mask):
    print("attending", Q.shape, "to", K.shape)
    additive = np.log(np.asarray(mask, dtype=float))     # 0 where allowed, -inf (with a warning) where blocked
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(K.shape[-1]) + additive
    weights = masked_softmax(scores, np.isfinite(scores))
    return np.matmul(weights, V), weights
''',
    }),
}


#: The solution the mistakes edit: the source notebook's solution cells (grade_id → source), not a copy.
SOLUTION = source_solution(__name__)

#: Known mistakes as edits of SOLUTION (name → Mistake).
KNOWN_MISTAKES = {
    # ---- step 1: padding_mask
    "padding_on_query_axis": Mistake(
        "padding mask of shape (B, T, 1): it blocks padded query rows, not padded keys", "test_padding_mask",
        ("Padding must be hidden from every query: block the padded *keys*, i.e. whole columns of each "
         "(T_q, T_k) score matrix. The axis of size 1 is the query axis, in the middle: (B, 1, T)."),
        (Edit("padding_mask", "[:, None, :]", "[:, :, None]"),)),
    "mask_without_query_axis": Mistake(
        "padding mask of shape (B, T), which does not broadcast against (B, T_q, T)", "test_padding_mask",
        ("Broadcasting aligns shapes from the right, so a (B, T) mask against (B, T_q, T) scores pairs the "
         "sequence axis with the query axis. Give the mask a query axis of size 1 between them: (B, 1, T)."),
        (Edit("padding_mask",
              "return (np.arange(T) < lengths[:, None])[:, None, :]",
              "return np.arange(T) < lengths[:, None]"),)),
    "padding_inverted": Mistake(
        "padding mask inverted: True on the padding", "test_padding_mask",
        ("In this course True means 'may attend': the mask is True on the real tokens and False on the "
         "padding (some libraries use the opposite convention)."),
        (Edit("padding_mask", "np.arange(T) < lengths", "np.arange(T) >= lengths"),)),
    "length_off_by_one": Mistake(
        "position j counted as real when j ≤ length (one padded key too many)", "test_padding_mask",
        ("A sequence of length L occupies positions 0 … L − 1: position L is already padding, and a sequence "
         "of length 0 has no real token at all."),
        (Edit("padding_mask", "np.arange(T) < lengths", "np.arange(T) <= lengths"),)),
    "lengths_not_checked": Mistake(
        "no ValueError for a length below 0 or above T", "test_padding_mask",
        ("A length below 0 or above T cannot describe a sequence padded to T; the spec asks you to raise a "
         "ValueError that names lengths and T instead of returning a mask."),
        (Edit("padding_mask",
              "    if np.any(lengths < 0) or np.any(lengths > T):\n"
              '        raise ValueError(f"every length must be between 0 and T = {T}; received lengths {lengths.tolist()}")\n',
              ""),)),
    # ---- step 2: causal_padding_mask
    "masks_combined_with_or": Mistake(
        "causal and padding masks combined with | instead of &", "test_causal_padding_mask",
        ("A key may be attended to only if it is not in the future AND it is a real token: both masks must "
         "allow it. With 'or', each mask lets through what the other one blocks."),
        (Edit("causal_padding_mask", "padding_mask(lengths, T) & np.tril(", "padding_mask(lengths, T) | np.tril("),)),
    "padding_blocks_query_rows": Mistake(
        "the padding blocks padded query rows instead of padded keys", "test_causal_padding_mask",
        ("The padding belongs on the key axis (columns): a padded query row still attends to the real tokens "
         "before it; only keys that are padding are blocked, in every row."),
        (Edit("causal_padding_mask",
              "padding_mask(lengths, T) & ",
              "np.swapaxes(padding_mask(lengths, T), -1, -2) & "),)),
    "causal_part_flipped": Mistake(
        "causal part flipped: the upper triangle (queries see the future)", "test_causal_padding_mask",
        ("Query i may attend to keys j ≤ i (itself and the past): the causal part is the lower triangle, "
         "diagonal included."),
        (Edit("causal_padding_mask", "np.tril(", "np.triu("),)),
    "padding_ignored": Mistake(
        "only the causal mask, repeated for every sequence: padded keys are allowed", "test_causal_padding_mask",
        ("The causal mask is the same for every sequence, but each sequence has its own padding: combine it "
         "with the padding mask so that padded keys are blocked too."),
        (Edit("causal_padding_mask",
              "return padding_mask(lengths, T) & np.tril(np.ones((T, T), dtype=bool))",
              "return np.broadcast_to(np.tril(np.ones((T, T), dtype=bool)), (len(lengths), T, T)).copy()"),)),
    # ---- step 3: masked_softmax
    "fill_minus_inf_unguarded": Mistake(
        "blocked scores set to −inf without a guard: fully masked rows are NaN", "test_masked_softmax",
        ("In a row where every key is blocked the maximum is −inf, and −inf − (−inf) is NaN (then 0/0): "
         "replace a −inf maximum by 0 before subtracting, and divide only where the row's sum is positive."),
        (Edit("masked_softmax", "    top = np.where(np.isfinite(top), top, 0)\n", ""),
         Edit("masked_softmax", "return exps / np.where(total > 0, total, 1)", "return exps / total"))),
    # −1e9 in place of −inf and of the guards −inf needs (the usual way of writing it; in float16 −1e9 is −inf)
    "fill_minus_1e9": Mistake(
        "blocked scores set to −1e9: fully masked rows become uniform over the padding", "test_masked_softmax",
        ("A large negative fill works while a row has an allowed key, but in a row where every key is blocked "
         "all scores are equal, so the softmax spreads the weight evenly over the padding (and in float16 "
         "−1e9 is −inf). This spec wants such a row to be all zeros: detect it and set it to 0."),
        (Edit("masked_softmax", "np.where(mask, scores, -np.inf)", "np.where(mask, scores, -1e9)"),
         Edit("masked_softmax", "    top = np.where(np.isfinite(top), top, 0)\n", ""),
         Edit("masked_softmax", "return exps / np.where(total > 0, total, 1)", "return exps / total"))),
    "fill_zero": Mistake(
        "blocked scores set to 0 instead of being excluded", "test_masked_softmax",
        ("A score of 0 is an ordinary score: e⁰ = 1 gives the blocked key weight. A blocked entry must "
         "contribute exactly 0 to the sum, for example by using −inf before the exponential."),
        (Edit("masked_softmax", "np.where(mask, scores, -np.inf)", "np.where(mask, scores, 0.0)"),)),
    "no_max_subtraction": Mistake(
        "exponentials of the raw scores, without subtracting the row's maximum", "test_masked_softmax",
        ("e^x overflows to inf above x ≈ 11.1 in float16, 88.7 in float32 and 709.8 in float64, and "
         "inf / inf is NaN. Subtract the largest allowed score of each row before exponentiating: the "
         "softmax does not change, and every exponent is ≤ 0."),
        (Edit("masked_softmax",
              "    top = np.max(x, axis=axis, keepdims=True)\n"
              "    top = np.where(np.isfinite(top), top, 0)\n"
              "    exps = np.exp(x - top)\n",
              "    exps = np.exp(x)\n"),)),
    "finfo_min_added_float16": Mistake(
        ("additive mask of np.finfo(dtype).min added to the scores: in float16 a "
         "score below −16 plus −65504 overflows to −inf, and a fully masked row is NaN"), "test_masked_softmax",
        ("np.finfo(float16).min is −65504, the edge of float16: adding any score below about −16 overflows to "
         "−inf, so a fully masked row becomes NaN (and NaN × 0 is still NaN). Replace blocked scores instead "
         "of adding to them, and handle rows with no allowed key explicitly."),
        (Edit("masked_softmax",
              "x = np.where(mask, scores, -np.inf)",
              "x = scores + np.where(mask, 0, np.finfo(scores.dtype).min)"),
         Edit("masked_softmax", "    top = np.where(np.isfinite(top), top, 0)\n", ""),
         Edit("masked_softmax",
              "return exps / np.where(total > 0, total, 1)",
              "return exps / total * np.any(mask, axis=axis, keepdims=True)"))),
    "zeroed_after_softmax": Mistake(
        "blocked weights zeroed after the softmax, rows not renormalised", "test_masked_softmax",
        ("Zeroing blocked weights after the softmax leaves rows that sum to less than 1: the blocked keys "
         "were counted in the sum. Exclude them before normalising (or renormalise the row afterwards)."),
        (Edit("masked_softmax", "x = np.where(mask, scores, -np.inf)", "x = scores"),
         Edit("masked_softmax",
              "return exps / np.where(total > 0, total, 1)",
              "return np.where(mask, exps / np.where(total > 0, total, 1), 0)"))),
    "axis_ignored": Mistake(
        "always normalises along the last axis, whatever `axis` is", "test_masked_softmax",
        ("Use the `axis` argument for the maximum, the sum and the check for empty slices: with axis=-2 the "
         "weights are normalised down each column."),
        (Edit("masked_softmax", "np.max(x, axis=axis,", "np.max(x, axis=-1,"),
         Edit("masked_softmax", "np.sum(exps, axis=axis,", "np.sum(exps, axis=-1,"))),
    # ---- step 4: masked_attention
    "cross_weights_transposed": Mistake(
        "cross-attention computed as K Qᵀ: weights of shape (T_k, T_q)", "test_masked_attention",
        ("Rows of the weights are queries and columns are keys: with T_q ≠ T_k the weights have shape "
         "(..., T_q, T_k), the shape of Q Kᵀ (not K Qᵀ)."),
        (Edit("masked_attention", "return weights @ V, weights", "return weights @ V, np.swapaxes(weights, -1, -2)"),)),
    "output_not_zeroed": Mistake(
        "−1e9 fill, weights of fully masked rows zeroed only after the output was computed", "test_masked_attention",
        ("A query with no allowed key must get a zero output row as well as zero weights: compute the output "
         "from the final weights (your masked_softmax already gives zero rows)."),
        (Edit("masked_attention",
              "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])\n"
              "    weights = masked_softmax(scores, mask)\n"
              "    return weights @ V, weights\n",
              "    scores = np.where(mask, Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), -1e9)\n"
              "    e = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
              "    weights = e / e.sum(axis=-1, keepdims=True)\n"
              "    output = weights @ V\n"
              "    weights = weights * np.any(mask, axis=-1, keepdims=True)\n"
              "    return output, weights\n"),)),
    "attention_not_scaled": Mistake(
        "scores not divided by √d_k", "test_masked_attention",
        "Scaled dot-product attention divides the scores Q Kᵀ by √d_k (d_k is the last axis of Q and K).",
        (Edit("masked_attention", " / np.sqrt(Q.shape[-1])", ""),)),
    "softmax_over_queries": Mistake(
        "weights normalised over the queries (axis=-2) instead of the keys", "test_masked_attention",
        ("Each query distributes its attention over the keys: normalise each row (the last axis, keys), "
         "not each column."),
        (Edit("masked_attention", "masked_softmax(scores, mask)", "masked_softmax(scores, mask, axis=-2)"),)),
    "mask_transposed_to_fit": Mistake(
        "a mask of shape (T_k, T_q) transposed to make it fit instead of raising", "test_masked_attention",
        ("A mask the wrong way round is the caller's bug, and a square mask (T_q = T_k) cannot even be told from a "
         "right one by its shape: let NumPy's broadcasting raise the ValueError, never transpose or reshape a "
         "mask to make it fit."),
        (Edit("masked_attention",
              "    weights = masked_softmax(scores, mask)\n",
              "    mask = np.asarray(mask)\n"
              "    if mask.shape[-2:] != scores.shape[-2:] and mask.shape[-2:] == scores.shape[-2:][::-1]:\n"
              "        mask = np.swapaxes(mask, -1, -2)\n"
              "    weights = masked_softmax(scores, mask)\n"),)),
}

#: The grader's form of the mistakes (edited solution cells): what the spec, the report and the tests read.
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)
