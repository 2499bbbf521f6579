"""Differently written answers to assignment 2 (multi-head attention): correct ones and known mistakes.

Keys of ``cells`` are the solution cells' grade_ids: ``from_assignment_1``
(softmax, attention_scores, scaled_dot_product_attention, attention_entropy
pasted from assignment 1), ``split_heads``, ``merge_heads``,
``multi_head_attention``. Cells a variant does not name keep the source
notebook's solution.

Mistakes follow ``shared/notes/mistakes.md``: M12 (split without the
transpose), M13 (merge without the transpose), M4 (scale by √d_model), M14
(projection and head-wiring slips), M3 (softmax over the wrong axis).
"""

from __future__ import annotations

from autograder.grader.spec import Variant

# ------------------------------------------------------------------ correct
CORRECT = {
    "swapaxes": Variant("reshape + swapaxes to split, swapaxes + reshape to merge, d_head from -1", {
        "split_heads": '''
def split_heads(X, n_heads):
    T, d_model = X.shape
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    return X.reshape(T, n_heads, -1).swapaxes(0, 1)
''',
        "merge_heads": '''
def merge_heads(H):
    return H.swapaxes(0, 1).reshape(H.shape[1], -1)
''',
    }),
    "column_slices": Variant("loops over heads with column slices; merge with np.hstack", {
        "split_heads": '''
def split_heads(X, n_heads):
    d_model = X.shape[1]
    if d_model % n_heads:
        raise ValueError("n_heads must divide d_model")
    d_head = d_model // n_heads
    heads = []
    for h in range(n_heads):
        heads.append(X[:, h * d_head:(h + 1) * d_head])
    return np.stack(heads)
''',
        "merge_heads": '''
def merge_heads(H):
    return np.hstack([H[h] for h in range(H.shape[0])])
''',
    }),
    "split_and_concatenate": Variant("np.split and np.concatenate, the check written as an assert-like if", {
        "split_heads": '''
def split_heads(X, n_heads):
    if X.shape[-1] % n_heads:
        raise ValueError("d_model must be a multiple of n_heads")
    return np.array(np.split(X, n_heads, axis=-1))
''',
        "merge_heads": '''
def merge_heads(H):
    return np.concatenate(list(H), axis=-1)
''',
    }),
    "einsum_projections": Variant("einsum with W reshaped per head; W_o applied per head and summed", {
        "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    T, d_model = x.shape
    d_head = d_model // n_heads
    Q, K, V = (np.einsum("tm,mhd->htd", x, W.reshape(d_model, n_heads, d_head)) for W in (W_q, W_k, W_v))
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    output = np.einsum("htd,hdm->tm", heads, W_o.reshape(n_heads, d_head, d_model))
    return output, weights
''',
    }),
    "per_head_loop": Variant("a loop over heads: per-head column slices of W, 2-D attention per head", {
        "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    d_head = x.shape[1] // n_heads
    outputs, weights = [], []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        out_h, w_h = scaled_dot_product_attention(x @ W_q[:, cols], x @ W_k[:, cols], x @ W_v[:, cols], mask)
        outputs.append(out_h)
        weights.append(w_h)
    return np.concatenate(outputs, axis=1) @ W_o, np.stack(weights)
''',
    }),
    "scale_queries_first": Variant("divides Q by √d_head itself and calls attention with scale=False", {
        "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Q = split_heads(x @ W_q, n_heads)
    K = split_heads(x @ W_k, n_heads)
    V = split_heads(x @ W_v, n_heads)
    Q = Q / np.sqrt(Q.shape[-1])
    out, w = scaled_dot_product_attention(Q, K, V, mask=mask, scale=False)
    return merge_heads(out) @ W_o, w
''',
    }),
    "manual_scores": Variant("scores, −1e9 fill and softmax written out inside multi_head_attention", {
        "multi_head_attention": '''
import math

def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Q, K, V = [split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v)]
    scores = np.matmul(Q, np.transpose(K, (0, 2, 1))) / math.sqrt(K.shape[-1])
    if mask is not None:
        scores = np.where(mask[None, :, :], scores, -1e9)
    weights = softmax(scores, axis=-1)
    return np.matmul(merge_heads(np.matmul(weights, V)), W_o), weights
''',
    }),
    "float32": Variant("everything in float32", {
        "from_assignment_1": '''
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    Q, K, V = (np.asarray(a, dtype=np.float32) for a in (Q, K, V))
    s = Q @ np.swapaxes(K, -1, -2)
    if scale:
        s = s / np.float32(np.sqrt(Q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, np.float32(-np.inf))
    w = softmax(s)
    return w @ V, w


def attention_entropy(weights):
    w = np.asarray(weights, dtype=np.float32)
    return -np.sum(w * np.log(np.where(w > 0, w, np.float32(1))), axis=-1)
''',
        "split_heads": '''
def split_heads(X, n_heads):
    X = np.asarray(X, dtype=np.float32)
    T, d_model = X.shape
    if d_model % n_heads:
        raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}")
    return np.transpose(X.reshape(T, n_heads, d_model // n_heads), (1, 0, 2))
''',
        "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    x, W_q, W_k, W_v, W_o = (np.asarray(a, dtype=np.float32) for a in (x, W_q, W_k, W_v, W_o))
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    out, weights = scaled_dot_product_attention(Q, K, V, mask)
    return merge_heads(out) @ W_o, weights
''',
    }),
    "warnings_and_prints": Variant("correct code that makes NumPy warn and prints to stdout and stderr", {
        "from_assignment_1": '''
import sys

def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    s = Q @ np.swapaxes(K, -1, -2)
    if scale:
        s = s / np.sqrt(Q.shape[-1])
    if mask is not None:
        s = s + np.log(np.asarray(mask, dtype=float))   # log(0) = -inf, with a divide-by-zero warning
    print("scores", s.shape, file=sys.stderr)
    w = softmax(s)
    return w @ V, w


def attention_entropy(weights):
    return -np.nansum(weights * np.log(weights), axis=-1)   # warns for zeros; 0 * -inf = nan is dropped
''',
        "multi_head_attention": '''
import sys

def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    print(f"{n_heads} heads of size {x.shape[1] // n_heads}")
    print("projecting", file=sys.stderr)
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(out) @ W_o, weights
''',
    }),
    "moveaxis_and_keywords": Variant("np.moveaxis, keyword calls, -1e9 fill, causal mask from index comparison", {
        "from_assignment_1": '''
def softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=axis, keepdims=True)


def attention_scores(Q, K, scale=True):
    scores = np.einsum("...qd,...kd->...qk", Q, K)
    return scores / np.sqrt(Q.shape[-1]) if scale else scores


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q=Q, K=K, scale=scale)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(x=scores, axis=-1)
    return np.einsum("...qk,...kv->...qv", weights, V), weights


def attention_entropy(weights):
    logs = np.log(weights, out=np.zeros_like(weights), where=weights > 0)
    return -(weights * logs).sum(axis=-1)
''',
        "split_heads": '''
def split_heads(X, n_heads):
    T, d_model = X.shape
    d_head, rest = divmod(d_model, n_heads)
    if rest:
        raise ValueError(f"cannot split d_model={d_model} into n_heads={n_heads} equal heads")
    return np.moveaxis(X.reshape(T, n_heads, d_head), 1, 0).copy()
''',
        "merge_heads": '''
def merge_heads(H):
    n_heads, T, d_head = H.shape
    return np.moveaxis(H, 0, 1).reshape(T, n_heads * d_head)
''',
        "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Q = split_heads(X=x @ W_q, n_heads=n_heads)
    K = split_heads(X=x @ W_k, n_heads=n_heads)
    V = split_heads(X=x @ W_v, n_heads=n_heads)
    heads, weights = scaled_dot_product_attention(Q=Q, K=K, V=V, mask=mask, scale=True)
    return merge_heads(H=heads) @ W_o, weights
''',
    }),
}


# ------------------------------------------------------------------ mistakes
MISTAKES = {
    "softmax_over_heads": Variant(
        "softmax normalises over the first axis (with 3-D scores: over the heads)", {
            "from_assignment_1": '''
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = Q @ np.swapaxes(K, -1, -2)
    if scale:
        scores = scores / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights


def attention_entropy(weights):
    safe = np.where(weights > 0, weights, 1.0)
    return -np.sum(weights * np.log(safe), axis=-1)
''',
        }, frozenset({"test_from_assignment_1"}),
        "softmax must normalise along `axis` (default -1, the keys); with a leading head axis, axis 0 mixes "
        "the heads together"),
    "transpose_all_axes": Variant(
        "K.T in attention, which reverses every axis of a 3-D K instead of swapping the last two", {
            "from_assignment_1": '''
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = Q @ K.T
    if scale:
        scores = scores / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights


def attention_entropy(weights):
    safe = np.where(weights > 0, weights, 1.0)
    return -np.sum(weights * np.log(safe), axis=-1)
''',
        }, frozenset({"test_from_assignment_1"}),
        "with a leading head axis, K.T reverses all three axes; transpose only the last two "
        "(np.swapaxes(K, -1, -2)) so that each head multiplies its own queries and keys"),
    "entropy_in_bits": Variant(
        "attention entropy with log base 2 (bits, not nats)", {
            "from_assignment_1": '''
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = Q @ np.swapaxes(K, -1, -2)
    if scale:
        scores = scores / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights


def attention_entropy(weights):
    safe = np.where(weights > 0, weights, 1.0)
    return -np.sum(weights * np.log2(safe), axis=-1)
''',
        }, frozenset({"test_from_assignment_1"}),
        "entropy in this course is in nats: use the natural logarithm"),
    "split_without_transpose": Variant(
        "split_heads reshapes (T, d_model) straight to (n_heads, T, d_head)", {
            "split_heads": '''
def split_heads(X, n_heads):
    T, d_model = X.shape
    return X.reshape(n_heads, T, d_model // n_heads)
''',
        }, frozenset({"test_split_heads"}),
        "a reshape keeps the order of the entries, so reshaping straight to (n_heads, T, d_head) cuts the "
        "sequence into chunks and mixes tokens inside a head; reshape to (T, n_heads, d_head) first, then move "
        "the head axis to the front"),
    "split_strided": Variant(
        "split_heads gives head h every n_heads-th feature instead of a contiguous block", {
            "split_heads": '''
def split_heads(X, n_heads):
    T, d_model = X.shape
    return X.reshape(T, d_model // n_heads, n_heads).transpose(2, 0, 1)
''',
        }, frozenset({"test_split_heads"}),
        "head h owns the contiguous block of features h·d_head … (h+1)·d_head − 1; reshape to "
        "(T, n_heads, d_head), not (T, d_head, n_heads)"),
    "split_without_check": Variant(
        "split_heads slices d_model // n_heads columns per head without checking that n_heads divides d_model", {
            "split_heads": '''
def split_heads(X, n_heads):
    d_head = X.shape[-1] // n_heads
    return np.stack([X[:, h * d_head:(h + 1) * d_head] for h in range(n_heads)])
''',
        }, frozenset({"test_split_heads"}),
        "when n_heads does not divide d_model the heads cannot all have d_model / n_heads features, and slicing "
        "silently drops the last columns: raise ValueError, naming n_heads and d_model"),
    "merge_without_transpose": Variant(
        "merge_heads reshapes (n_heads, T, d_head) straight to (T, d_model)", {
            "merge_heads": '''
def merge_heads(H):
    n_heads, T, d_head = H.shape
    return H.reshape(T, n_heads * d_head)
''',
        }, frozenset({"test_merge_heads"}),
        "merging must undo the split: move the head axis back next to d_head (to (T, n_heads, d_head)) before "
        "reshaping, so that each row holds one token's features from every head"),
    "merge_reversed": Variant(
        "merge_heads concatenates the heads in reverse order", {
            "merge_heads": '''
def merge_heads(H):
    return np.concatenate([H[h] for h in reversed(range(H.shape[0]))], axis=-1)
''',
        }, frozenset({"test_merge_heads"}),
        "head 0's features come first in each row, then head 1's, … (the order split_heads took them in)"),
    "scale_by_d_model": Variant(
        "scores divided by √d_model instead of √d_head", {
            "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(x.shape[1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return merge_heads(weights @ V) @ W_o, weights
''',
        }, frozenset({"test_multi_head_attention"}),
        "each head computes dot products of d_head-vectors, so it is scaled by √d_head = √(d_model / n_heads), "
        "not √d_model"),
    "forgot_W_o": Variant(
        "the merged heads are returned without the output projection W_o", {
            "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(heads), weights
''',
        }, frozenset({"test_multi_head_attention"}),
        "MultiHead(...) = Concat(head_1, …, head_h) W^O: the merged heads still go through the output projection"),
    "one_projection": Variant(
        "W_q used for the queries, the keys and the values", {
            "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Q = K = V = split_heads(x @ W_q, n_heads)
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(heads) @ W_o, weights
''',
        }, frozenset({"test_multi_head_attention"}),
        "queries, keys and values each have their own projection: Q = x W_q, K = x W_k, V = x W_v"),
    "head_slice_rows": Variant(
        "per-head projections sliced from the rows of each W (and transposed to fit) instead of its columns", {
            "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    d_head = x.shape[1] // n_heads
    outputs, weights = [], []
    for h in range(n_heads):
        rows = slice(h * d_head, (h + 1) * d_head)
        out_h, w_h = scaled_dot_product_attention(x @ W_q[rows].T, x @ W_k[rows].T, x @ W_v[rows].T, mask)
        outputs.append(out_h)
        weights.append(w_h)
    return np.concatenate(outputs, axis=1) @ W_o, np.stack(weights)
''',
        }, frozenset({"test_multi_head_attention"}),
        "x @ W maps token features (the rows of W) to projected features (its columns); head h's projection is "
        "the block of columns h·d_head … (h+1)·d_head − 1, all rows"),
    "split_before_projecting": Variant(
        "x split into heads first, each head projected by its diagonal block of W only", {
            "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    d_head = x.shape[1] // n_heads
    xs = split_heads(x, n_heads)
    def project(W):
        return np.stack([xs[h] @ W[h * d_head:(h + 1) * d_head, h * d_head:(h + 1) * d_head]
                         for h in range(n_heads)])
    heads, weights = scaled_dot_product_attention(project(W_q), project(W_k), project(W_v), mask=mask)
    return merge_heads(heads) @ W_o, weights
''',
        }, frozenset({"test_multi_head_attention"}),
        "project first, then split: every head's queries, keys and values are computed from all d_model "
        "features of each token (x @ W), not only from that head's slice of x"),
    "inline_split_without_transpose": Variant(
        "inside multi_head_attention, Q, K, V reshaped straight to (n_heads, T, d_head)", {
            "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    T, d_model = x.shape
    Q, K, V = ((x @ W).reshape(n_heads, T, d_model // n_heads) for W in (W_q, W_k, W_v))
    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(heads) @ W_o, weights
''',
        }, frozenset({"test_multi_head_attention"}),
        "a reshape straight to (n_heads, T, d_head) mixes tokens inside a head; use your split_heads"),
    "mask_ignored": Variant(
        "the mask argument is never passed on (no head is masked)", {
            "multi_head_attention": '''
def multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    Q, K, V = (split_heads(x @ W, n_heads) for W in (W_q, W_k, W_v))
    heads, weights = scaled_dot_product_attention(Q, K, V)
    return merge_heads(heads) @ W_o, weights
''',
        }, frozenset({"test_multi_head_attention"}),
        "pass the mask on to the attention of every head, so that blocked keys get weight exactly 0"),
}
