"""Differently written answers to assignment 5 (KV cache): correct ones and known mistakes.

Keys of ``cells`` are the solution cells' grade_ids: ``from_assignment_1``
(softmax, attention_scores and scaled_dot_product_attention pasted from
assignment 1), ``causal_mask``, ``attend_with_cache``,
``decode_incrementally``, ``attention_cost_per_token``. Cells a variant does
not name keep the source notebook's solution. Known mistakes are small edits of
that solution (``KNOWN_MISTAKES``, read from the source notebook as ``SOLUTION``);
``MISTAKES`` holds the edited cells the grader uses.

float32 arithmetic is not among the correct answers: decoding with a cache
must reproduce full attention to 1e-12 (the issue's requirement), which
float32 (about 1e-7) cannot; a float32 cache is a known mistake instead.
"""

from __future__ import annotations

from autograder.grader.bank import Edit, Mistake, source_solution, variants
from autograder.grader.spec import Variant

# ------------------------------------------------------------------ correct
CORRECT = {
    "vstack_and_index_mask": Variant("mask by comparing indices; np.vstack for the caches and the outputs", {
        "causal_mask": '''
def causal_mask(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    if T_q > T_k:
        raise ValueError(f"T_q={T_q} > T_k={T_k}")
    i = np.arange(T_q)[:, None]
    j = np.arange(T_k)[None, :]
    return j <= i + (T_k - T_q)
''',
        "attend_with_cache": '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.vstack([K_cache, x_new @ W_k])
    V = np.vstack([V_cache, x_new @ W_v])
    out, _ = scaled_dot_product_attention(x_new @ W_q, K, V, mask=causal_mask(len(x_new), len(K)))
    return out, K, V
''',
        "decode_incrementally": '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    K = np.empty((0, W_k.shape[1]))
    V = np.empty((0, W_v.shape[1]))
    rows = []
    for start in range(0, len(x), chunk):
        out, K, V = attend_with_cache(x[start:start + chunk], K, V, W_q, W_k, W_v)
        rows.append(out)
    return np.vstack(rows)
''',
    }),
    "triu_negated": Variant("mask as the complement of np.triu with offset T_k − T_q + 1", {
        "causal_mask": '''
def causal_mask(T_q, T_k=None):
    if T_k is None:
        T_k = T_q
    if T_q > T_k:
        raise ValueError("T_q must not exceed T_k")
    return ~np.triu(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q + 1)
''',
    }),
    "last_rows_of_square_mask": Variant("mask = the last T_q rows of the square (T_k, T_k) lower triangle", {
        "causal_mask": '''
def causal_mask(T_q, T_k=None):
    T_k = T_q if T_k is None else T_k
    if T_q > T_k:
        raise ValueError(f"T_q ({T_q}) must be <= T_k ({T_k})")
    return np.tril(np.ones((T_k, T_k), dtype=bool))[T_k - T_q:]
''',
    }),
    "preallocated": Variant("preallocated caches and output filled by slices; explicit chunk bounds", {
        "attend_with_cache": '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    T_past, T_new = K_cache.shape[0], x_new.shape[0]
    K = np.empty((T_past + T_new, W_k.shape[1]))
    V = np.empty((T_past + T_new, W_v.shape[1]))
    K[:T_past], V[:T_past] = K_cache, V_cache
    K[T_past:], V[T_past:] = x_new @ W_k, x_new @ W_v
    mask = causal_mask(T_new, T_past + T_new)
    return scaled_dot_product_attention(x_new @ W_q, K, V, mask)[0], K, V
''',
        "decode_incrementally": '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    T, d_head = x.shape[0], W_v.shape[1]
    out = np.empty((T, d_head))
    K_cache = V_cache = np.zeros((0, d_head))
    start = 0
    while start < T:
        stop = min(start + chunk, T)
        out[start:stop], K_cache, V_cache = attend_with_cache(x[start:stop], K_cache, V_cache, W_q, W_k, W_v)
        start = stop
    return out
''',
    }),
    "einsum_inline": Variant("attention written inline with einsum and its own stable softmax", {
        "attend_with_cache": '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    q = np.einsum("td,dh->th", x_new, W_q)
    K = np.concatenate([K_cache, np.einsum("td,dh->th", x_new, W_k)], axis=0)
    V = np.concatenate([V_cache, np.einsum("td,dh->th", x_new, W_v)], axis=0)
    scores = np.einsum("qh,kh->qk", q, K) / np.sqrt(q.shape[1])
    offset = K.shape[0] - q.shape[0]
    allowed = np.arange(K.shape[0])[None, :] <= np.arange(q.shape[0])[:, None] + offset
    scores = np.where(allowed, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("qk,kh->qh", weights, V), K, V
''',
    }),
    "loops": Variant("loops: one new token at a time over slices of the cache; cost summed term by term, returned "
                     "as a 0-d array (np.asarray)", {
        "causal_mask": '''
def causal_mask(T_q, T_k=None):
    if T_k is None:
        T_k = T_q
    if T_q > T_k:
        raise ValueError("more queries than keys")
    mask = np.zeros((T_q, T_k), dtype=bool)
    for i in range(T_q):
        for j in range(T_k):
            mask[i, j] = j <= i + T_k - T_q
    return mask
''',
        "attend_with_cache": '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.concatenate([K_cache, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    T_past = K_cache.shape[0]
    rows = []
    for i in range(x_new.shape[0]):
        visible = T_past + i + 1  # the cache and new tokens 0..i
        out, _ = scaled_dot_product_attention(x_new[i:i + 1] @ W_q, K[:visible], V[:visible])
        rows.append(out[0])
    return np.array(rows), K, V
''',
        "attention_cost_per_token": '''
def attention_cost_per_token(t, d_model, d_head, cached):
    projected = 1 if cached else t
    queries = 1 if cached else t
    total = 0
    for _ in range(3 * projected):
        total += d_model * d_head
    total += queries * t * d_head  # scores
    total += queries * t * d_head  # weights @ V
    return np.asarray(total)
''',
    }),
    "array_split_chunks": Variant("chunks from np.array_split (sizes differ by at most one, each ≤ chunk)", {
        "decode_incrementally": '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    d_head = W_q.shape[1]
    K_cache, V_cache = np.zeros((0, d_head)), np.zeros((0, d_head))
    pieces = []
    for part in np.array_split(x, -(-len(x) // chunk)):
        out, K_cache, V_cache = attend_with_cache(part, K_cache, V_cache, W_q, W_k, W_v)
        pieces.append(out)
    return np.concatenate(pieces)
''',
    }),
    "log_mask_warns_and_prints": Variant(
        "additive mask np.log(mask) (divide-by-zero RuntimeWarning), debug prints to stdout and stderr", {
            "attend_with_cache": '''
import sys


def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    K = np.concatenate([K_cache, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    print("cache size", K.shape[0], file=sys.stderr)
    bias = np.log(causal_mask(x_new.shape[0], K.shape[0]).astype(float))  # log 0 = -inf blocks the future
    scores = (x_new @ W_q) @ K.T / np.sqrt(K.shape[1]) + bias
    weights = softmax(scores)
    return weights @ V, K, V
''',
            "decode_incrementally": '''
def decode_incrementally(x, W_q, W_k, W_v, chunk=1):
    K_cache = V_cache = np.zeros((0, W_k.shape[1]))
    outputs = []
    for start in range(0, x.shape[0], chunk):
        print("decoding tokens", start, "to", min(start + chunk, x.shape[0]) - 1)
        out_new, K_cache, V_cache = attend_with_cache(x[start:start + chunk], K_cache, V_cache, W_q, W_k, W_v)
        outputs.append(out_new)
    return np.concatenate(outputs)
''',
        }),
    "assignment_1_written_differently": Variant(
        "pasted assignment-1 code with einsum, a −1e9 fill and a float cost", {
            "from_assignment_1": '''
def softmax(x, axis=-1):
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


def attention_scores(Q, K, scale=True):
    scores = np.einsum("...qd,...kd->...qk", Q, K)
    return scores / np.sqrt(Q.shape[-1]) if scale else scores


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q, K, scale)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores)
    return np.einsum("...qk,...kv->...qv", weights, V), weights
''',
            "attention_cost_per_token": '''
def attention_cost_per_token(t, d_model, d_head, cached):
    n = 1 if cached else t  # tokens projected, and queries attending
    return float(3 * n * d_model * d_head + 2.0 * n * t * d_head)
''',
        }),
    "mask_keyword_arguments": Variant("causal_mask called with keywords; scale passed explicitly", {
        "attend_with_cache": '''
def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    keys = np.concatenate((K_cache, np.dot(x_new, W_k)), axis=0)
    values = np.concatenate((V_cache, np.dot(x_new, W_v)), axis=0)
    mask = causal_mask(T_q=x_new.shape[0], T_k=keys.shape[0])
    out, weights = scaled_dot_product_attention(np.dot(x_new, W_q), keys, values, mask=mask, scale=True)
    return out, keys, values
''',
    }),
}

# ------------------------------------------------------------------ mistakes
#: The solution the mistakes edit: the source notebook's solution cells (grade_id → source), not a copy.
SOLUTION = source_solution(__name__)

#: Known mistakes as edits of SOLUTION (name → Mistake).
KNOWN_MISTAKES = {
    # step 0: the pasted assignment-1 functions
    "mask_with_zero": Mistake(
        "blocked scores set to 0 instead of −inf", "test_from_assignment_1",
        ("A blocked score of 0 still gets weight e⁰ = 1 after the softmax. Blocked scores must become −∞ "
         "(or a very large negative number) before the softmax, so that they get weight exactly 0."),
        (Edit("from_assignment_1", "np.where(mask, scores, -np.inf)", "np.where(mask, scores, 0.0)"),)),
    "no_max_subtraction": Mistake(
        "softmax without subtracting the maximum", "test_from_assignment_1",
        ("exp overflows to inf for logits above about 709 (float64), and inf / inf is NaN. Softmax does "
         "not change when the same number is subtracted from every logit: subtract the row's maximum."),
        (Edit("from_assignment_1", "shifted = x - np.max(x, axis=axis, keepdims=True)", "shifted = x"),)),

    # step 1: causal_mask(T_q, T_k)
    "mask_top_left": Mistake(
        "causal mask aligned top-left (j ≤ i) instead of bottom-right", "test_causal_mask",
        ("The new queries are the last T_q of the T_k positions, so new query i sits at position "
         "i + T_k − T_q: the triangle belongs in the bottom-right corner. With the top-left one, a single "
         "new token may only look at the very first token."),
        (Edit("causal_mask", "dtype=bool), k=T_k - T_q)", "dtype=bool))"),)),
    "mask_diagonal_blocked": Mistake(
        "the diagonal of the bottom-right mask blocked (offset one too small)", "test_causal_mask",
        ("Every position may attend to itself: new query i may see keys up to and including position "
         "i + T_k − T_q. Check the offset you give np.tril or np.triu."),
        (Edit("causal_mask", "k=T_k - T_q)", "k=T_k - T_q - 1)"),)),
    "mask_no_value_error": Mistake(
        "no ValueError when T_q > T_k", "test_causal_mask",
        ("With more queries than keys the first queries have no key they may attend to (their rows are all "
         "False, and attention over them would be 0/0). The function must refuse such sizes with a ValueError."),
        (Edit("causal_mask",
              "    if T_q > T_k:\n"
              '        raise ValueError(f"T_q must be <= T_k; received T_q={T_q} and T_k={T_k}")\n',
              ""),)),

    # step 2: attend_with_cache
    "cache_not_appended": Mistake(
        "returns only the new keys and values as the cache", "test_attend_with_cache",
        ("The returned caches are what the next call attends over: they must hold the keys and values of "
         "all positions so far, the old cache followed by the new rows, not only the new ones."),
        (Edit("attend_with_cache", "return out_new, K, V", "return out_new, x_new @ W_k, x_new @ W_v"),)),
    "cache_returned_unchanged": Mistake(
        "returns the old caches instead of the grown ones", "test_attend_with_cache",
        ("The caches you return must include the new tokens' keys and values; returning the ones you were "
         "given means the next call never sees these tokens."),
        (Edit("attend_with_cache", "return out_new, K, V", "return out_new, K_cache, V_cache"),)),
    "new_keys_prepended": Mistake(
        "new keys and values put before the cached ones", "test_attend_with_cache",
        ("Row j of the cache is position j of the sequence, and the causal mask relies on that order: "
         "append the new rows after the cached ones."),
        (Edit("attend_with_cache",
              "np.concatenate([K_cache, x_new @ W_k])",
              "np.concatenate([x_new @ W_k, K_cache])"),
         Edit("attend_with_cache",
              "np.concatenate([V_cache, x_new @ W_v])",
              "np.concatenate([x_new @ W_v, V_cache])"))),
    "no_mask_in_chunk": Mistake(
        "no causal mask (fine for one new token, wrong for several)", "test_attend_with_cache",
        ("One new token may see the whole cache, so it needs no mask; but with several new tokens at once, "
         "the first of them must not see the ones after it. Use the bottom-right causal mask of step 1."),
        (Edit("attend_with_cache",
              "scaled_dot_product_attention(Q_new, K, V, mask=mask)",
              "scaled_dot_product_attention(Q_new, K, V)"),)),
    "mask_top_left_inline": Mistake(
        "mask written inline and aligned top-left (j ≤ i)", "test_attend_with_cache",
        ("The new queries are the last positions of the sequence, so the triangle of the mask must be "
         "aligned bottom-right (new query i may see keys up to i + T_k − T_q). Use your causal_mask(T_q, T_k)."),
        (Edit("attend_with_cache",
              "mask = causal_mask(x_new.shape[0], K.shape[0])",
              "mask = np.tril(np.ones((x_new.shape[0], K.shape[0]), dtype=bool))"),)),
    "cache_ignored": Mistake(
        "keys and values recomputed from x_new only (the cache is ignored)", "test_attend_with_cache",
        ("x_new holds only the new tokens, so keys computed from it lack every earlier position. The new "
         "queries must attend over the cached keys and values plus the new ones."),
        (Edit("attend_with_cache",
              "    K = np.concatenate([K_cache, x_new @ W_k])\n"
              "    V = np.concatenate([V_cache, x_new @ W_v])\n",
              "    K, V = x_new @ W_k, x_new @ W_v\n"),)),
    "unscaled_scores": Mistake(
        "scores not divided by √d_head", "test_attend_with_cache",
        ("Decoding must compute the same attention as the full model, which divides the scores by "
         "√d_head (Vaswani et al. 2017, eq. 1)."),
        (Edit("attend_with_cache", "mask=mask)", "mask=mask, scale=False)"),)),
    "float32_cache": Mistake(
        "cache stored in float32 to save memory", "test_attend_with_cache",
        ("Real inference engines do store caches in lower precision, but here decoding must reproduce full "
         "attention to 1e-12, and float32 keeps only about 7 significant digits. Keep the cache in float64."),
        (Edit("attend_with_cache",
              "np.concatenate([K_cache, x_new @ W_k])",
              "np.concatenate([K_cache, x_new @ W_k]).astype(np.float32)"),
         Edit("attend_with_cache",
              "np.concatenate([V_cache, x_new @ W_v])",
              "np.concatenate([V_cache, x_new @ W_v]).astype(np.float32)"))),

    # step 3: decode_incrementally
    "fresh_cache_each_chunk": Mistake(
        "starts from an empty cache for every chunk", "test_decode_incrementally",
        ("The caches returned by one call are the input of the next: create the empty caches once, before "
         "the loop, and carry them from call to call."),
        (Edit("decode_incrementally",
              "    for start in range(0, x.shape[0], chunk):\n",
              "    for start in range(0, x.shape[0], chunk):\n"
              "        K_cache, V_cache = np.zeros((0, d_head)), np.zeros((0, d_head))\n"),)),
    "last_partial_chunk_dropped": Mistake(
        "loops over T // chunk full chunks and drops the shorter last one", "test_decode_incrementally",
        ("When chunk does not divide T, the last chunk is shorter, and when chunk > T there is only that "
         "one: every token must be decoded, so the output has T rows."),
        (Edit("decode_incrementally", "range(0, x.shape[0], chunk)", "range(0, x.shape[0] - chunk + 1, chunk)"),)),

    # step 4: attention_cost_per_token
    "cached_cost_without_attention": Mistake(
        "cached cost counts the projections of the new token but not its attention over the cache",
        "test_attention_cost_per_token",
        ("The cache saves recomputing old keys and values, not the attention itself: the new query still "
         "meets all t keys (t · d_head) and averages t value rows (t · d_head)."),
        (Edit("attention_cost_per_token",
              "return 3 * d_model * d_head + 2 * t * d_head",
              "return 3 * d_model * d_head"),)),
    "cached_cost_quadratic": Mistake(
        "cached cost still quadratic in t (a t × t attention per token)", "test_attention_cost_per_token",
        ("With the cache only one query is new, so there is one row of scores (t of them), not a t × t "
         "matrix: the cost per token grows linearly in t."),
        (Edit("attention_cost_per_token",
              "return 3 * d_model * d_head + 2 * t * d_head",
              "return 3 * d_model * d_head + 2 * t * t * d_head"),)),
    "uncached_only_last_query": Mistake(
        "uncached cost with a single query (linear attention term)", "test_attention_cost_per_token",
        ("Without a cache the model reruns full causal self-attention over all t tokens: t queries against "
         "t keys, a t × t score matrix and a t × t weights-times-V product."),
        (Edit("attention_cost_per_token", "+ 2 * t * t * d_head", "+ 2 * t * d_head"),)),
    "weighted_sum_not_counted": Mistake(
        "counts the scores but not the weighted sum of the values", "test_attention_cost_per_token",
        ("Attention has two products: the scores Q Kᵀ and then the weights times V. Each costs as much as "
         "the other here; count both."),
        (Edit("attention_cost_per_token", "+ 2 * t * d_head", "+ t * d_head"),
         Edit("attention_cost_per_token", "+ 2 * t * t * d_head", "+ t * t * d_head"))),
}

#: The grader's form of the mistakes (edited solution cells): what the spec, the report and the tests read.
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)
