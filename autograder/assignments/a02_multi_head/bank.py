"""Differently written answers to assignment 2 (multi-head attention): correct ones and known mistakes.

Keys of ``cells`` are the solution cells' grade_ids: ``from_assignment_1``
(softmax, attention_scores, scaled_dot_product_attention, attention_entropy
pasted from assignment 1), ``split_heads``, ``merge_heads``,
``multi_head_attention``. Cells a variant does not name keep the source
notebook's solution.
Known mistakes are small edits of the source notebook's solution cells
(``KNOWN_MISTAKES``, :class:`~autograder.grader.bank.Mistake`, applied to ``SOLUTION``);
``MISTAKES`` holds them as the edited cells the grader uses.

Mistakes follow ``shared/notes/mistakes.md``: M12 (split without the
transpose), M13 (merge without the transpose), M4 (scale by √d_model), M14
(projection and head-wiring slips), M3 (softmax over the wrong axis).
"""

from __future__ import annotations

from autograder.grader.bank import Edit, Mistake, source_solution, variants
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
#: The solution the mistakes edit: the source notebook's solution cells (grade_id → source), not a copy.
SOLUTION = source_solution(__name__)

#: Known mistakes as edits of SOLUTION (name → Mistake).
KNOWN_MISTAKES = {
    "softmax_over_heads": Mistake(
        "softmax normalises over the first axis (with 3-D scores: over the heads)", "test_from_assignment_1",
        ("softmax must normalise along `axis` (default -1, the keys); with a leading head axis, axis 0 mixes "
         "the heads together"),
        (Edit("from_assignment_1", "np.max(x, axis=axis,", "np.max(x, axis=0,"),
         Edit("from_assignment_1", "np.sum(exps, axis=axis,", "np.sum(exps, axis=0,"))),
    "transpose_all_axes": Mistake(
        "K.T in attention, which reverses every axis of a 3-D K instead of swapping the last two",
        "test_from_assignment_1",
        ("with a leading head axis, K.T reverses all three axes; transpose only the last two "
         "(np.swapaxes(K, -1, -2)) so that each head multiplies its own queries and keys"),
        (Edit("from_assignment_1", "scores = Q @ np.swapaxes(K, -1, -2)", "scores = Q @ K.T"),)),
    "entropy_in_bits": Mistake(
        "attention entropy with log base 2 (bits, not nats)", "test_from_assignment_1",
        "entropy in this course is in nats: use the natural logarithm",
        (Edit("from_assignment_1", "np.log(safe)", "np.log2(safe)"),)),
    "split_without_transpose": Mistake(
        "split_heads reshapes (T, d_model) straight to (n_heads, T, d_head)", "test_split_heads",
        ("a reshape keeps the order of the entries, so reshaping straight to (n_heads, T, d_head) cuts the "
         "sequence into chunks and mixes tokens inside a head; reshape to (T, n_heads, d_head) first, then move "
         "the head axis to the front"),
        (Edit("split_heads",
              "return X.reshape(T, n_heads, d_head).transpose(1, 0, 2)",
              "return X.reshape(n_heads, T, d_head)"),)),
    "split_strided": Mistake(
        "split_heads gives head h every n_heads-th feature instead of a contiguous block", "test_split_heads",
        ("head h owns the contiguous block of features h·d_head … (h+1)·d_head − 1; reshape to "
         "(T, n_heads, d_head), not (T, d_head, n_heads)"),
        (Edit("split_heads",
              "return X.reshape(T, n_heads, d_head).transpose(1, 0, 2)",
              "return X.reshape(T, d_head, n_heads).transpose(2, 0, 1)"),)),
    "split_without_check": Mistake(
        "split_heads slices d_model // n_heads columns per head without checking that n_heads divides d_model",
        "test_split_heads",
        ("when n_heads does not divide d_model the heads cannot all have d_model / n_heads features, and slicing "
         "silently drops the last columns: raise ValueError, naming n_heads and d_model"),
        (Edit("split_heads",
              "    if d_model % n_heads != 0:\n"
              '        raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")\n',
              ""),
         Edit("split_heads",
              "return X.reshape(T, n_heads, d_head).transpose(1, 0, 2)",
              "return np.stack([X[:, h * d_head:(h + 1) * d_head] for h in range(n_heads)])"))),
    "merge_without_transpose": Mistake(
        "merge_heads reshapes (n_heads, T, d_head) straight to (T, d_model)", "test_merge_heads",
        ("merging must undo the split: move the head axis back next to d_head (to (T, n_heads, d_head)) before "
         "reshaping, so that each row holds one token's features from every head"),
        (Edit("merge_heads", "H.transpose(1, 0, 2).reshape(", "H.reshape("),)),
    "merge_reversed": Mistake(
        "merge_heads concatenates the heads in reverse order", "test_merge_heads",
        "head 0's features come first in each row, then head 1's, … (the order split_heads took them in)",
        (Edit("merge_heads",
              "return H.transpose(1, 0, 2).reshape(T, n_heads * d_head)",
              "return np.concatenate([H[h] for h in reversed(range(n_heads))], axis=-1)"),)),
    "scale_by_d_model": Mistake(
        "scores divided by √d_model instead of √d_head", "test_multi_head_attention",
        ("each head computes dot products of d_head-vectors, so it is scaled by √d_head = √(d_model / n_heads), "
         "not √d_model"),
        (Edit("multi_head_attention",
              "    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)\n",
              "    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(x.shape[1])\n"
              "    if mask is not None:\n"
              "        scores = np.where(mask, scores, -np.inf)\n"
              "    weights = softmax(scores, axis=-1)\n"
              "    heads = weights @ V\n"),)),
    "forgot_W_o": Mistake(
        "the merged heads are returned without the output projection W_o", "test_multi_head_attention",
        "MultiHead(...) = Concat(head_1, …, head_h) W^O: the merged heads still go through the output projection",
        (Edit("multi_head_attention",
              "return merge_heads(heads) @ W_o, weights",
              "return merge_heads(heads), weights"),)),
    "one_projection": Mistake(
        "W_q used for the queries, the keys and the values", "test_multi_head_attention",
        "queries, keys and values each have their own projection: Q = x W_q, K = x W_k, V = x W_v",
        (Edit("multi_head_attention",
              "    Q = split_heads(x @ W_q, n_heads)\n"
              "    K = split_heads(x @ W_k, n_heads)\n"
              "    V = split_heads(x @ W_v, n_heads)\n",
              "    Q = K = V = split_heads(x @ W_q, n_heads)\n"),)),
    "head_slice_rows": Mistake(
        "per-head projections sliced from the rows of each W (and transposed to fit) instead of its columns",
        "test_multi_head_attention",
        ("x @ W maps token features (the rows of W) to projected features (its columns); head h's projection is "
         "the block of columns h·d_head … (h+1)·d_head − 1, all rows"),
        (Edit("multi_head_attention",
              "    Q = split_heads(x @ W_q, n_heads)\n"
              "    K = split_heads(x @ W_k, n_heads)\n"
              "    V = split_heads(x @ W_v, n_heads)\n"
              "    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)\n"
              "    return merge_heads(heads) @ W_o, weights\n",
              "    d_head = x.shape[1] // n_heads\n"
              "    outputs, weights = [], []\n"
              "    for h in range(n_heads):\n"
              "        rows = slice(h * d_head, (h + 1) * d_head)\n"
              "        out_h, w_h = scaled_dot_product_attention(x @ W_q[rows].T, x @ W_k[rows].T, x @ W_v[rows].T, mask)\n"
              "        outputs.append(out_h)\n"
              "        weights.append(w_h)\n"
              "    return np.concatenate(outputs, axis=1) @ W_o, np.stack(weights)\n"),)),
    "split_before_projecting": Mistake(
        "x split into heads first, each head projected by its diagonal block of W only", "test_multi_head_attention",
        ("project first, then split: every head's queries, keys and values are computed from all d_model "
         "features of each token (x @ W), not only from that head's slice of x"),
        (Edit("multi_head_attention",
              "    Q = split_heads(x @ W_q, n_heads)\n"
              "    K = split_heads(x @ W_k, n_heads)\n"
              "    V = split_heads(x @ W_v, n_heads)\n"
              "    heads, weights = scaled_dot_product_attention(Q, K, V, mask=mask)\n",
              "    d_head = x.shape[1] // n_heads\n"
              "    xs = split_heads(x, n_heads)\n"
              "    def project(W):\n"
              "        return np.stack([xs[h] @ W[h * d_head:(h + 1) * d_head, h * d_head:(h + 1) * d_head]\n"
              "                         for h in range(n_heads)])\n"
              "    heads, weights = scaled_dot_product_attention(project(W_q), project(W_k), project(W_v), mask=mask)\n"),)),
    "inline_split_without_transpose": Mistake(
        "inside multi_head_attention, Q, K, V reshaped straight to (n_heads, T, d_head)", "test_multi_head_attention",
        "a reshape straight to (n_heads, T, d_head) mixes tokens inside a head; use your split_heads",
        (Edit("multi_head_attention",
              "    Q = split_heads(x @ W_q, n_heads)\n"
              "    K = split_heads(x @ W_k, n_heads)\n"
              "    V = split_heads(x @ W_v, n_heads)\n",
              "    T, d_model = x.shape\n"
              "    Q, K, V = ((x @ W).reshape(n_heads, T, d_model // n_heads) for W in (W_q, W_k, W_v))\n"),)),
    "mask_ignored": Mistake(
        "the mask argument is never passed on (no head is masked)", "test_multi_head_attention",
        "pass the mask on to the attention of every head, so that blocked keys get weight exactly 0",
        (Edit("multi_head_attention",
              "scaled_dot_product_attention(Q, K, V, mask=mask)",
              "scaled_dot_product_attention(Q, K, V)"),)),
}

#: The grader's form of the mistakes (edited solution cells): what the spec, the report and the tests read.
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)
