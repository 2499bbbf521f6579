"""Differently written answers to assignment 1: correct ones and known mistakes.

Each correct variant replaces one or more solution cells (keyed by the cell's
nbgrader ``grade_id``); cells it does not name keep the source notebook's
solution. Each known mistake is written as small edits of that solution
(``KNOWN_MISTAKES``, :class:`~autograder.grader.bank.Mistake`), read from the
source notebook (``SOLUTION``); ``MISTAKES`` holds them as the edited cells the
grader uses. They serve two purposes:

* the tests run every hidden-test cell against every variant, so a fair grader
  must give each correct variant full marks and each mistake less than full
  marks exactly on the steps in ``breaks`` (testing the tests);
* the example class (:mod:`autograder.examples.example_class`) is built from them.

Mistakes follow ``shared/notes/mistakes.md`` (M1–M10). Each mistake's ``hint``
is what a learner reads when their output matches it (in the visible
self-checks and in the feedback): it names the idea, never the code.
"""

from __future__ import annotations

from autograder.grader.bank import Edit, Mistake, source_solution, variants
from autograder.grader.spec import Variant

__all__ = ["CORRECT", "KNOWN_MISTAKES", "MISTAKES", "SOLUTION", "Variant"]


CORRECT = {
    "einsum": Variant("einsum for the scores and the weighted sum", {
        "attention_scores": '''
def attention_scores(Q, K, scale=True):
    scores = np.einsum("...qd,...kd->...qk", Q, K)
    return scores / np.sqrt(Q.shape[-1]) if scale else scores
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q, K, scale)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return np.einsum("...qk,...kv->...qv", weights, V), weights
''',
    }),
    "large_negative_fill": Variant("−1e9 instead of −inf, triu-based mask", {
        "causal_mask": '''
def causal_mask(T):
    return ~np.triu(np.ones((T, T), dtype=bool), k=1)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q, K, scale=scale)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights
''',
    }),
    "finfo_min_fill": Variant("np.finfo(dtype).min fill, mask built by comparing indices", {
        "causal_mask": '''
def causal_mask(T):
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    return j <= i
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q, K, scale=scale)
    if mask is not None:
        scores = np.where(mask, scores, np.finfo(scores.dtype).min)
    weights = softmax(scores)
    return weights @ V, weights
''',
    }),
    "loops": Variant("explicit Python loops (2-D inputs handled element by element)", {
        "softmax": '''
def softmax(x, axis=-1):
    x = np.moveaxis(np.array(x, dtype=float), axis, -1)
    out = np.empty_like(x)
    for index in np.ndindex(*x.shape[:-1]):
        row = x[index]
        m = max(row)
        e = [np.exp(v - m) for v in row]
        total = sum(e)
        out[index] = [v / total for v in e]
    return np.moveaxis(out, -1, axis)
''',
        "causal_mask": '''
def causal_mask(T):
    mask = np.zeros((T, T), dtype=bool)
    for i in range(T):
        for j in range(i + 1):
            mask[i, j] = True
    return mask
''',
        "attention_entropy": '''
def attention_entropy(weights):
    flat = weights.reshape(-1, weights.shape[-1])
    out = np.zeros(flat.shape[0])
    for r, row in enumerate(flat):
        out[r] = -sum(p * np.log(p) for p in row if p > 0)
    return out.reshape(weights.shape[:-1])
''',
    }),
    "scale_queries_first": Variant("divide Q by √d_k before the product", {
        "attention_scores": '''
def attention_scores(Q, K, scale=True):
    if scale:
        Q = Q / np.sqrt(Q.shape[-1])
    return Q @ np.swapaxes(K, -1, -2)
''',
    }),
    "mask_after_softmax_renormalised": Variant("zero blocked weights after the softmax, then renormalise", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    weights = softmax(attention_scores(Q, K, scale=scale))
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ V, weights
''',
    }),
    "float32": Variant("all arithmetic in float32", {
        "softmax": '''
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
''',
        "attention_scores": '''
def attention_scores(Q, K, scale=True):
    Q = np.asarray(Q, dtype=np.float32)
    K = np.asarray(K, dtype=np.float32)
    s = Q @ np.swapaxes(K, -1, -2)
    return s / np.float32(np.sqrt(Q.shape[-1])) if scale else s
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    s = attention_scores(Q, K, scale).astype(np.float32)
    if mask is not None:
        s = np.where(mask, s, np.float32(-np.inf))
    w = softmax(s).astype(np.float32)
    return w @ np.asarray(V, dtype=np.float32), w
''',
        "attention_entropy": '''
def attention_entropy(weights):
    w = np.asarray(weights, dtype=np.float32)
    return -np.sum(w * np.log(np.where(w > 0, w, np.float32(1))), axis=-1)
''',
    }),
    "warnings_and_prints": Variant("correct code that makes NumPy warn and prints to stdout and stderr", {
        "softmax": '''
import sys

def softmax(x, axis=-1):
    print("softmax called", file=sys.stderr)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    s = attention_scores(Q, K, scale)
    if mask is not None:
        s = s + np.log(mask.astype(float))   # log(0) = -inf, with a divide-by-zero warning
    print("shapes", s.shape)
    w = softmax(s)
    return w @ V, w
''',
        "attention_entropy": '''
def attention_entropy(weights):
    terms = weights * np.log(weights)      # warns for zeros and makes 0 * -inf = nan there
    return -np.nansum(terms, axis=-1)
''',
    }),
    "additive_mask_with_shift": Variant("additive 1/−inf mask (softmax is shift-invariant), keyword call", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q=Q, K=K, scale=scale)
    if mask is not None:
        scores = scores + np.where(mask, 1.0, -np.inf)
    weights = softmax(x=scores, axis=-1)
    return weights @ V, weights
''',
        "causal_self_attention": '''
def causal_self_attention(x, W_q, W_k, W_v, scale=True):
    T = len(x)
    return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, causal_mask(T), scale)
''',
    }),
}


#: The solution the mistakes edit: the source notebook's solution cells (grade_id → source), not a copy.
SOLUTION = source_solution(__name__)

#: Known mistakes as edits of SOLUTION (name → Mistake).
KNOWN_MISTAKES = {
    "mask_flipped": Mistake(
        "causal mask flipped: upper triangle (queries see the future)", "test_causal_mask",
        ("True in the mask means 'may attend', and query i may attend to keys j ≤ i — itself and the past."
         ' The allowed entries form the lower triangle (diagonal included); the upper triangle is the '
         'future.'),
        (Edit("causal_mask", "np.tril(np.ones((T, T), dtype=bool))", "np.triu(np.ones((T, T), dtype=bool))"),)),
    "diagonal_blocked": Mistake(
        "causal mask off by one: the diagonal is blocked", "test_causal_mask",
        ('Each position may attend to itself: the diagonal (key j = query i) belongs to the allowed part '
         'of the mask, otherwise query 0 has no key at all.'),
        (Edit("causal_mask", "np.tril(np.ones((T, T), dtype=bool))", "np.tril(np.ones((T, T), dtype=bool), k=-1)"),)),
    "one_step_future": Mistake(
        "causal mask off by one: each query sees one future key", "test_causal_mask",
        ('Only keys j ≤ i are allowed; the key right after each query (j = i + 1) is already the future. '
         'Check the offset of your triangle.'),
        (Edit("causal_mask", "np.tril(np.ones((T, T), dtype=bool))", "np.tril(np.ones((T, T), dtype=bool), k=1)"),)),
    "softmax_wrong_axis": Mistake(
        "softmax normalises over the first axis instead of `axis`", "test_softmax",
        ('Normalise along the `axis` argument (by default the last axis): the maximum, the sum of the '
         'exponentials and the division must all use that axis, not the first one.'),
        (Edit("softmax", "np.max(x, axis=axis,", "np.max(x, axis=0,"),
         Edit("softmax", "np.sum(exps, axis=axis,", "np.sum(exps, axis=0,"))),
    "softmax_ignores_axis": Mistake(
        "softmax always normalises over the last axis, whatever `axis` says", "test_softmax",
        ('The `axis` argument says along which axis the probabilities sum to 1: softmax(x, axis=0) '
         'normalises down the columns. Pass `axis` to the maximum, to the sum of the exponentials and to '
         'the division instead of always using the last axis.'),
        (Edit("softmax", "np.max(x, axis=axis,", "np.max(x, axis=-1,"),
         Edit("softmax", "np.sum(exps, axis=axis,", "np.sum(exps, axis=-1,"))),
    "softmax_no_max_subtraction": Mistake(
        "softmax without subtracting the maximum (overflows)", "test_softmax",
        ('exp overflows for large logits (above about 709 in float64 and 88.7 in float32), and inf / inf '
         'is NaN. Softmax does not change when you subtract the same number from every logit along the '
         'axis — which number keeps every exponent ≤ 0?'),
        (Edit("softmax",
              "    shifted = x - np.max(x, axis=axis, keepdims=True)\n"
              "    exps = np.exp(shifted)\n",
              "    exps = np.exp(x)\n"),)),
    "scale_by_d": Mistake(
        "scores divided by d_k instead of √d_k", "test_scaling",
        ('Divide by the square root of d_k, not by d_k itself: the dot product of two random '
         'd_k-dimensional vectors has standard deviation √d_k.'),
        (Edit("attention_scores", "scores / np.sqrt(Q.shape[-1])", "scores / Q.shape[-1]"),)),
    "no_scaling": Mistake(
        "scores never scaled (the `scale` argument is ignored)", "test_scaling",
        ('When scale is True, divide the scores by √d_k (d_k is the last dimension of Q and K); when it is'
         ' False, return the raw products. Make sure the `scale` argument is used.'),
        (Edit("attention_scores",
              "    if scale:\n"
              "        scores = scores / np.sqrt(Q.shape[-1])\n",
              ""),)),
    "mask_with_zero": Mistake(
        "blocked scores set to 0 instead of −inf", "test_scaled_dot_product_attention",
        ('A blocked score set to 0 is still an ordinary score and gets weight e⁰ / Σ. Blocked scores must '
         'become −inf (or a very large negative number) before the softmax, so that their weight is '
         'exactly 0.'),
        (Edit("scaled_dot_product_attention", "np.where(mask, scores, -np.inf)", "np.where(mask, scores, 0.0)"),)),
    "attention_softmax_over_queries": Mistake(
        "attention's softmax taken over the queries (axis −2), not the keys", "test_scaled_dot_product_attention",
        ('Each query distributes its attention over the keys: row i of the weights (query i) must sum to '
         '1, so the softmax goes along the last axis (the T_k keys), not along the queries.'),
        (Edit("scaled_dot_product_attention", "softmax(scores, axis=-1)", "softmax(scores, axis=-2)"),)),
    "attention_unstable_softmax": Mistake(
        "attention's softmax written inline without subtracting the maximum (overflows)",
        "test_scaled_dot_product_attention",
        ('Scores can be large (hundreds, for long vectors or sharp attention), and exp of a score above about 709 '
         'is inf in float64, so a row becomes inf / inf = NaN. Use your stable softmax from step 1, or subtract '
         "each row's maximum before exp."),
        (Edit("scaled_dot_product_attention",
              "    weights = softmax(scores, axis=-1)\n",
              "    exps = np.exp(scores)\n"
              "    weights = exps / exps.sum(axis=-1, keepdims=True)\n"),)),
    "mask_after_softmax": Mistake(
        "blocked weights zeroed after the softmax, rows not renormalised", "test_scaled_dot_product_attention",
        ('Zeroing the blocked weights after the softmax leaves each row summing to less than 1. Block the '
         'scores before the softmax (or renormalise each row afterwards).'),
        (Edit("scaled_dot_product_attention",
              "    if mask is not None:\n"
              "        scores = np.where(mask, scores, -np.inf)\n"
              "    weights = softmax(scores, axis=-1)\n",
              "    weights = softmax(scores, axis=-1)\n"
              "    if mask is not None:\n"
              "        weights = np.where(mask, weights, 0.0)\n"),)),
    "keys_times_queries": Mistake(
        "K Qᵀ instead of Q Kᵀ (rows are keys)", "test_attention_scores",
        ('Rows of the scores are queries and columns are keys: entry (i, j) is the dot product of query i '
         'with key j, so the scores have shape (T_q, T_k).'),
        (Edit("attention_scores", "scores = Q @ np.swapaxes(K, -1, -2)", "scores = K @ np.swapaxes(Q, -1, -2)"),)),
    "entropy_in_bits": Mistake(
        "entropy with log base 2 (bits, not nats)", "test_attention_entropy",
        'This course measures entropy in nats: use the natural logarithm, not log base 2.',
        (Edit("attention_entropy", "np.log(safe)", "np.log2(safe)"),)),
    "self_attention_shares_projection": Mistake(
        "one projection W_q used for queries, keys and values", "test_causal_self_attention",
        ('Queries, keys and values each have their own projection: Q comes from W_q, K from W_k and V from'
         ' W_v.'),
        (Edit("causal_self_attention", "Q, K, V = x @ W_q, x @ W_k, x @ W_v", "Q = K = V = x @ W_q"),)),
}

#: The grader's form of the mistakes (edited solution cells): what the spec, the report and the tests read.
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)
