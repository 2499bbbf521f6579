"""Differently written answers to assignment 1: correct ones and known mistakes.

Each variant replaces one or more solution cells (keyed by the cell's
nbgrader ``grade_id``); cells it does not name keep the source notebook's
solution. They serve two purposes:

* the tests run every hidden-test cell against every variant, so a fair grader
  must give each correct variant full marks and each mistake less than full
  marks exactly on the steps in ``breaks`` (testing the tests);
* the example class (:mod:`autograder.examples.example_class`) is built from them.

Mistakes follow ``shared/notes/mistakes.md`` (M1–M10). Each mistake's ``hint``
is what a learner reads when their output matches it (in the visible
self-checks and in the feedback): it names the idea, never the code.
"""

from __future__ import annotations

from autograder.grader.spec import Variant

__all__ = ["CORRECT", "MISTAKES", "Variant"]


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


MISTAKES = {
    "mask_flipped": Variant("causal mask flipped: upper triangle (queries see the future)", {
        "causal_mask": '''
def causal_mask(T):
    return np.triu(np.ones((T, T), dtype=bool))
''',
    }, frozenset({"test_causal_mask"}),
        hint=("True in the mask means 'may attend', and query i may attend to keys j ≤ i — itself and the past."
             ' The allowed entries form the lower triangle (diagonal included); the upper triangle is the '
             'future.')),
    "diagonal_blocked": Variant("causal mask off by one: the diagonal is blocked", {
        "causal_mask": '''
def causal_mask(T):
    return np.tril(np.ones((T, T), dtype=bool), k=-1)
''',
    }, frozenset({"test_causal_mask"}),
        hint=('Each position may attend to itself: the diagonal (key j = query i) belongs to the allowed part '
              'of the mask, otherwise query 0 has no key at all.')),
    "one_step_future": Variant("causal mask off by one: each query sees one future key", {
        "causal_mask": '''
def causal_mask(T):
    return np.tril(np.ones((T, T), dtype=bool), k=1)
''',
    }, frozenset({"test_causal_mask"}),
        hint=('Only keys j ≤ i are allowed; the key right after each query (j = i + 1) is already the future. '
              'Check the offset of your triangle.')),
    "softmax_wrong_axis": Variant("softmax normalises over the first axis instead of `axis`", {
        "softmax": '''
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)
''',
    }, frozenset({"test_softmax"}),
        hint=('Normalise along the `axis` argument (by default the last axis): the maximum, the sum of the '
              'exponentials and the division must all use that axis, not the first one.')),
    "softmax_ignores_axis": Variant("softmax always normalises over the last axis, whatever `axis` says", {
        "softmax": '''
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
''',
    }, frozenset({"test_softmax"}),
        hint=('The `axis` argument says along which axis the probabilities sum to 1: softmax(x, axis=0) '
              'normalises down the columns. Pass `axis` to the maximum, to the sum of the exponentials and to '
              'the division instead of always using the last axis.')),
    "softmax_no_max_subtraction": Variant("softmax without subtracting the maximum (overflows)", {
        "softmax": '''
def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)
''',
    }, frozenset({"test_softmax"}),
        hint=('exp overflows for large logits (above about 709 in float64 and 88.7 in float32), and inf / inf '
              'is NaN. Softmax does not change when you subtract the same number from every logit along the '
              'axis — which number keeps every exponent ≤ 0?')),
    "scale_by_d": Variant("scores divided by d_k instead of √d_k", {
        "attention_scores": '''
def attention_scores(Q, K, scale=True):
    scores = Q @ np.swapaxes(K, -1, -2)
    return scores / Q.shape[-1] if scale else scores
''',
    }, frozenset({"test_scaling"}),
        hint=('Divide by the square root of d_k, not by d_k itself: the dot product of two random '
              'd_k-dimensional vectors has standard deviation √d_k.')),
    "no_scaling": Variant("scores never scaled (the `scale` argument is ignored)", {
        "attention_scores": '''
def attention_scores(Q, K, scale=True):
    return Q @ np.swapaxes(K, -1, -2)
''',
    }, frozenset({"test_scaling"}),
        hint=('When scale is True, divide the scores by √d_k (d_k is the last dimension of Q and K); when it is'
              ' False, return the raw products. Make sure the `scale` argument is used.')),
    "mask_with_zero": Variant("blocked scores set to 0 instead of −inf", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q, K, scale=scale)
    if mask is not None:
        scores = np.where(mask, scores, 0.0)
    weights = softmax(scores)
    return weights @ V, weights
''',
    }, frozenset({"test_scaled_dot_product_attention"}),
        hint=('A blocked score set to 0 is still an ordinary score and gets weight e⁰ / Σ. Blocked scores must '
              'become −inf (or a very large negative number) before the softmax, so that their weight is '
              'exactly 0.')),
    "attention_softmax_over_queries": Variant("attention's softmax taken over the queries (axis −2), not the keys", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q, K, scale=scale)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-2)
    return weights @ V, weights
''',
    }, frozenset({"test_scaled_dot_product_attention"}),
        hint=('Each query distributes its attention over the keys: row i of the weights (query i) must sum to '
              '1, so the softmax goes along the last axis (the T_k keys), not along the queries.')),
    "mask_after_softmax": Variant("blocked weights zeroed after the softmax, rows not renormalised", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    weights = softmax(attention_scores(Q, K, scale=scale))
    if mask is not None:
        weights = np.where(mask, weights, 0.0)
    return weights @ V, weights
''',
    }, frozenset({"test_scaled_dot_product_attention"}),
        hint=('Zeroing the blocked weights after the softmax leaves each row summing to less than 1. Block the '
              'scores before the softmax (or renormalise each row afterwards).')),
    "keys_times_queries": Variant("K Qᵀ instead of Q Kᵀ (rows are keys)", {
        "attention_scores": '''
def attention_scores(Q, K, scale=True):
    scores = K @ np.swapaxes(Q, -1, -2)
    return scores / np.sqrt(Q.shape[-1]) if scale else scores
''',
    }, frozenset({"test_attention_scores", "test_scaling"}),
        hint=('Rows of the scores are queries and columns are keys: entry (i, j) is the dot product of query i '
              'with key j, so the scores have shape (T_q, T_k).')),
    "entropy_in_bits": Variant("entropy with log base 2 (bits, not nats)", {
        "attention_entropy": '''
def attention_entropy(weights):
    safe = np.where(weights > 0, weights, 1.0)
    return -np.sum(weights * np.log2(safe), axis=-1)
''',
    }, frozenset({"test_attention_entropy"}),
        hint='This course measures entropy in nats: use the natural logarithm, not log base 2.'),
    "self_attention_shares_projection": Variant("one projection W_q used for queries, keys and values", {
        "causal_self_attention": '''
def causal_self_attention(x, W_q, W_k, W_v, scale=True):
    Q = K = V = x @ W_q
    return scaled_dot_product_attention(Q, K, V, mask=causal_mask(x.shape[0]), scale=scale)
''',
    }, frozenset({"test_causal_self_attention"}),
        hint=('Queries, keys and values each have their own projection: Q comes from W_q, K from W_k and V from'
              ' W_v.')),
}
