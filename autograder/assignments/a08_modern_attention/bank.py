"""Answer bank of assignment 8 (RoPE, ALiBi, grouped-query attention): solution, variants, hidden cases.

See DESIGN.md next to this file for what each case, variant and mistake is for.

* ``SOLUTION`` — the source notebook's solution cells (grade_id → source; the grade_ids of the
  solution cells are the function names, the test cells are ``STEPS``); the first cell,
  ``from_earlier_assignments``, holds what the learner pastes from assignments 1, 2 and 5.
* ``CORRECT`` — differently written correct answers (cell replacements, :class:`Variant`).
* ``KNOWN_MISTAKES`` — known mistakes as exact edits of ``SOLUTION`` (:class:`Mistake`);
  ``MISTAKES`` holds the edited cells the grader uses.
* :func:`hidden_cases` — the hidden cases per step (seeded), which the spec hands the grader, and
  ``REFERENCE``, the functions that give their expected results.

tests/test_modern_attention_bank.py runs every correct variant against the reference on the hidden
cases and on random inputs, and every mistake on the hidden cases of its step, in this process;
tests/test_mistake_edits.py and tests/test_grader.py grade them as the grader does.
"""

from __future__ import annotations

import numpy as np

from autograder.grader.bank import Edit, Mistake, source_solution, variants
from autograder.grader.spec import Case, Variant

from autograder.assignments.a01_attention import reference as attention
from autograder.assignments.a02_multi_head import reference as multi_head
from autograder.assignments.a05_kv_cache import reference as kv_cache

from . import reference as ref

#: Test cells in notebook order: grade_id → (what it grades, points).
STEPS = {
    "test_from_earlier_assignments": ("your functions from assignments 1, 2 and 5", 1),
    "test_apply_rope": ("apply_rope: pairs (2i, 2i + 1) turned by position × θ_i", 2),
    "test_rope_attention": ("rope_attention: rotated queries and keys, the queries last", 1),
    "test_rope_attend_with_cache": ("rope_attend_with_cache: positions after the cache, rotated keys cached", 1),
    "test_alibi_slopes": ("alibi_slopes: the paper's slopes, the authors' rule for other head counts", 1),
    "test_alibi_attention": ("alibi_attention: −m_h · distance added to the scaled scores, causal", 2),
    "test_grouped_query_attention": ("grouped_query_attention: contiguous groups of query heads share K, V", 2),
    "test_kv_cache_bytes": ("kv_cache_bytes: 2 · T · layers · kv heads · d_head · bytes", 1),
}


REFERENCE = {
    "softmax": attention.softmax,
    "scaled_dot_product_attention": attention.scaled_dot_product_attention,
    "causal_mask": kv_cache.causal_mask,
    "split_heads": multi_head.split_heads,
    "merge_heads": multi_head.merge_heads,
    "apply_rope": ref.apply_rope,
    "rope_attention": ref.rope_attention,
    "rope_attend_with_cache": ref.rope_attend_with_cache,
    "alibi_slopes": ref.alibi_slopes,
    "alibi_attention": ref.alibi_attention,
    "grouped_query_attention": ref.grouped_query_attention,
    "kv_cache_bytes": ref.kv_cache_bytes,
}

# ------------------------------------------------------------------ solution
#: The source notebook's solution cells (grade_id → source), read from source/08_modern_attention/, never a copy.
SOLUTION = source_solution(__name__)

# ------------------------------------------------------------------ correct variants
CORRECT = {
    "earlier_written_differently": Variant(
        "the pasted functions written differently: attention_scores helper, einsum, a −1e9 fill, index masks", {
            "from_earlier_assignments": '''
def softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=axis, keepdims=True)


def attention_scores(Q, K):
    return np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1])


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = attention_scores(Q, K)
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    weights = softmax(scores, axis=-1)
    return np.einsum("...qk,...kd->...qd", weights, V), weights


def causal_mask(T_q, T_k=None):
    if T_k is None:
        T_k = T_q
    if T_q > T_k:
        raise ValueError("causal_mask needs T_q <= T_k")
    return np.arange(T_k)[None, :] <= np.arange(T_q)[:, None] + (T_k - T_q)


def split_heads(X, n_heads):
    return np.stack(np.split(X, n_heads, axis=1))


def merge_heads(H):
    return np.concatenate(list(H), axis=1)
'''}),
    "rope_complex": Variant("RoPE as complex multiplication of pairs x_2i + i x_2i+1 by e^(i p θ) (Meta's LLaMA)", {
        "apply_rope": '''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    freqs = 1.0 / base ** (np.arange(0, d, 2)[: d // 2] / d)
    z = x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(1j * np.multiply.outer(np.asarray(positions), freqs))
    return np.stack([z.real, z.imag], axis=-1).reshape(x.shape)
'''}),
    "rope_rotation_matrices": Variant("RoPE with an explicit block-diagonal rotation matrix per row, einsum", {
        "apply_rope": '''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    p = np.broadcast_to(np.asarray(positions), x.shape[:-1])
    R = np.zeros(p.shape + (d, d))
    for i in range(d // 2):
        angle = p * base ** (-2 * i / d)
        R[..., 2 * i, 2 * i], R[..., 2 * i, 2 * i + 1] = np.cos(angle), -np.sin(angle)
        R[..., 2 * i + 1, 2 * i], R[..., 2 * i + 1, 2 * i + 1] = np.sin(angle), np.cos(angle)
    return np.einsum("...ij,...j->...i", R, x)
'''}),
    "rope_polar": Variant("RoPE in polar form: radius and angle of every pair, angle advanced", {"apply_rope": '''
def apply_rope(x, positions, base=10000.0):
    d = x.shape[-1]
    a, b = x[..., ::2], x[..., 1::2]
    r, phi = np.hypot(a, b), np.arctan2(b, a)
    phi = phi + np.asarray(positions)[..., None] * np.power(base, -np.arange(d // 2) * 2.0 / d)
    return np.stack([r * np.cos(phi), r * np.sin(phi)], axis=-1).reshape(x.shape)
'''}),
    "relative_rotation_loops": Variant(
        "rope_attention score by score: only the key turned, by the relative offset j − p_i", {"rope_attention": '''
def rope_attention(Q, K, V, causal=True):
    T_q, T_k = Q.shape[-2], K.shape[-2]
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2])
    Qb, Kb = np.broadcast_to(Q, lead + Q.shape[-2:]), np.broadcast_to(K, lead + K.shape[-2:])
    scores = np.zeros(lead + (T_q, T_k))
    for i in range(T_q):
        p = i + T_k - T_q
        for j in range(T_k):
            # q_p · k_j = q · R_{j - p} k: only the difference of the positions matters
            scores[..., i, j] = np.sum(Qb[..., i, :] * apply_rope(Kb[..., j:j + 1, :], [j - p])[..., 0, :], axis=-1)
    scores = scores / np.sqrt(Q.shape[-1])
    if causal:
        scores = np.where(causal_mask(T_q, T_k), scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights
'''}),
    "cache_vstack": Variant("the cache grown with np.vstack, positions from the value cache's length, keyword mask", {
        "rope_attend_with_cache": '''
def rope_attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    start = len(V_cache)
    pos = start + np.arange(len(x_new))
    K = np.vstack([K_cache, apply_rope(np.dot(x_new, W_k), pos)])
    V = np.vstack([V_cache, np.dot(x_new, W_v)])
    mask = causal_mask(T_q=len(x_new), T_k=len(K))
    return scaled_dot_product_attention(apply_rope(np.dot(x_new, W_q), pos), K, V, mask=mask)[0], K, V
'''}),
    "slopes_authors_code": Variant("alibi_slopes as the authors' get_slopes, with math.log2 and lists", {
        "alibi_slopes": '''
import math


def alibi_slopes(n_heads):
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return np.array(power_of_2(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    return np.array(power_of_2(closest) + list(alibi_slopes(2 * closest))[0::2][:n_heads - closest])
'''}),
    "slopes_strided_next_power": Variant(
        "MPT / Hugging Face form: slopes of the next power of two, odd-indexed ones first, then even, cut", {
            "alibi_slopes": '''
def alibi_slopes(n_heads):
    padded = 1 << (n_heads - 1).bit_length()  # the smallest power of two >= n_heads
    slopes = 1.0 / 2.0 ** (np.arange(1, padded + 1) * 8.0 / padded)
    if padded != n_heads:
        slopes = np.concatenate([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes
'''}),
    "alibi_authors_bias_form": Variant(
        "ALiBi bias m_h · j, the same for every row (the authors' fairseq form; softmax is shift-invariant)", {
            "alibi_attention": '''
def alibi_attention(Q, K, V):
    H, T_q, T_k = Q.shape[-3:-1] + (K.shape[-2],)
    bias = alibi_slopes(H)[:, None, None] * np.arange(T_k)[None, None, :]
    scores = np.einsum("...qd,...kd->...qk", Q, K) / np.sqrt(Q.shape[-1]) + bias
    scores = np.where(causal_mask(T_q, T_k), scores, -1e9)
    weights = softmax(scores)
    return np.einsum("...qk,...kd->...qd", weights, V), weights
'''}),
    "alibi_symmetric_distance": Variant("ALiBi with −m · |i − j| (the symmetric form equals −m · (i − j) where allowed)", {
        "alibi_attention": '''
def alibi_attention(Q, K, V):
    n_heads, T_q, T_k = Q.shape[-3], Q.shape[-2], K.shape[-2]
    i = np.arange(T_q)[:, None] + (T_k - T_q)
    j = np.arange(T_k)[None, :]
    slopes = alibi_slopes(n_heads).reshape(n_heads, 1, 1)
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    scores = np.where(j <= i, scores - slopes * np.abs(i - j), -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ V, weights
'''}),
    "gqa_broadcast_groups": Variant("GQA by reshaping the query heads to (n_kv_heads, group, T, d_head) and broadcasting", {
        "grouped_query_attention": '''
def grouped_query_attention(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, mask=None):
    if n_heads % n_kv_heads != 0:
        raise ValueError("n_heads must be a multiple of n_kv_heads")
    T, d_model = x.shape
    d_head = d_model // n_heads
    Q = (x @ W_q).reshape(T, n_kv_heads, n_heads // n_kv_heads, d_head).transpose(1, 2, 0, 3)
    K = (x @ W_k).reshape(T, n_kv_heads, 1, d_head).transpose(1, 2, 0, 3)
    V = (x @ W_v).reshape(T, n_kv_heads, 1, d_head).transpose(1, 2, 0, 3)
    scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_head)  # (n_kv_heads, group, T, T)
    if mask is not None:
        scores = np.where(np.reshape(np.broadcast_to(mask, (n_heads, T, T)), scores.shape), scores, -np.inf)
    weights = softmax(scores)
    heads = (weights @ V).reshape(n_heads, T, d_head)
    return merge_heads(heads) @ W_o, weights.reshape(n_heads, T, T)
'''}),
    "gqa_loop_over_heads": Variant("GQA with a loop over query heads, kv head h // group picked by index", {
        "grouped_query_attention": '''
def grouped_query_attention(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, mask=None):
    if n_heads % n_kv_heads:
        raise ValueError("n_kv_heads does not divide n_heads")
    d_head = x.shape[1] // n_heads
    outs, all_weights = [], []
    for h in range(n_heads):
        g = h // (n_heads // n_kv_heads)
        q = x @ W_q[:, h * d_head:(h + 1) * d_head]
        k = x @ W_k[:, g * d_head:(g + 1) * d_head]
        v = x @ W_v[:, g * d_head:(g + 1) * d_head]
        head_mask = None if mask is None else np.broadcast_to(mask, (n_heads, len(x), len(x)))[h]
        out, w = scaled_dot_product_attention(q, k, v, mask=head_mask)
        outs.append(out)
        all_weights.append(w)
    return np.concatenate(outs, axis=1) @ W_o, np.stack(all_weights)
'''}),
    "gqa_index_map": Variant("GQA by fancy indexing K[arange(n_heads) // group]; kv bytes with math.prod, as a 0-d "
                             "array (np.asarray)", {
        "grouped_query_attention": '''
def grouped_query_attention(x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads, mask=None):
    if n_heads % n_kv_heads:
        raise ValueError(f"{n_heads} query heads cannot be split into groups of {n_kv_heads} kv heads")
    kv_of = np.arange(n_heads) // (n_heads // n_kv_heads)
    Q = split_heads(x @ W_q, n_heads)
    K = split_heads(x @ W_k, n_kv_heads)[kv_of]
    V = split_heads(x @ W_v, n_kv_heads)[kv_of]
    heads, weights = scaled_dot_product_attention(Q, K, V, mask)
    return merge_heads(heads) @ W_o, weights
''',
        "kv_cache_bytes": '''
import math


def kv_cache_bytes(T, n_layers, n_kv_heads, d_head, bytes_per_value):
    per_token = math.prod([2, n_layers, n_kv_heads, d_head, bytes_per_value])
    return np.asarray(per_token * T)
'''}),
}

# ------------------------------------------------------------------ known mistakes
_EA = "from_earlier_assignments"
_EA_ALL = frozenset({"softmax of logits as large as 1e4", "attention, a batch of 2, 3 queries over 5 keys with a (3, 5) mask",
                     "causal mask, 3 queries over 7 keys", "causal mask, square, T_k omitted (T = 4)",
                     "causal mask, T_q = 6 > T_k = 4: ValueError", "split_heads, 4 tokens into 3 heads",
                     "merge_heads, 3 heads of 4 tokens"})
_EA_NO_MASK = _EA_ALL - {"attention, a batch of 2, 3 queries over 5 keys with a (3, 5) mask"}
_AR, _RA, _RC = "apply_rope", "rope_attention", "rope_attend_with_cache"
_SL, _AA, _GQ, _KB = "alibi_slopes", "alibi_attention", "grouped_query_attention", "kv_cache_bytes"
_ROPE_SQUARE = frozenset({"causal, T = 6, d_head = 8", "no mask, batch (2, 3), T = 5, d_head = 4"})
_EMPTY_CACHE = frozenset({"empty cache, 4 new tokens"})
_POWERS_OF_TWO = frozenset({"8 heads", "16 heads"})
_ALIBI_SQUARE = frozenset({"4 heads, T = 6", "batch of 2, 8 heads, K and V shared by the heads, T = 5"})
_EQUAL_HEADS = frozenset({"n_heads = n_kv_heads = 3 (multi-head attention), causal"})
_ONE_KV_HEAD = frozenset({"multi-query: 4 query heads, 1 kv head, no mask"})
_GQA_ERROR = frozenset({"n_kv_heads = 3 does not divide n_heads = 4: ValueError"})
_GQA_ALL = _GQA_ERROR | _EQUAL_HEADS | _ONE_KV_HEAD | {"4 query heads in 2 groups, causal, d_model = 8",
                                                     "6 query heads in 3 groups, no mask, d_model = 12"}

KNOWN_MISTAKES = {
    # ---- from_earlier_assignments: the pasted functions (each graded in its own assignment; here once, in step 0)
    "mask_with_zero": Mistake(
        "blocked scores set to 0 instead of −inf", "test_from_earlier_assignments",
        "A blocked score of 0 still gets weight e⁰ = 1 after the softmax. Blocked scores must become −∞ (or a very "
        "large negative number) before the softmax, so that they get weight exactly 0 (assignment 1).",
        (Edit(_EA, "np.where(mask, scores, -np.inf)", "np.where(mask, scores, 0.0)"),), passes=_EA_NO_MASK),
    "no_max_subtraction": Mistake(
        "softmax without subtracting the maximum", "test_from_earlier_assignments",
        "exp overflows to inf for logits above about 709 (float64), and inf / inf is NaN. Softmax does not change "
        "when the same number is subtracted from every logit: subtract the row's maximum (assignment 1).",
        (Edit(_EA, "e = np.exp(x - np.max(x, axis=axis, keepdims=True))", "e = np.exp(x)"),),
        passes=_EA_ALL - {"softmax of logits as large as 1e4"}),
    "earlier_mask_top_left": Mistake(
        "causal mask aligned top-left (j ≤ i) instead of bottom-right", "test_from_earlier_assignments",
        "With fewer queries than keys the queries are the last T_q positions: query i sits at position "
        "i + T_k − T_q, so the triangle belongs in the bottom-right corner (assignment 5).",
        (Edit(_EA, "np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)", "np.tril(np.ones((T_q, T_k), dtype=bool))"),),
        evidence="pytorch/pytorch#108108", passes=_EA_ALL - {"causal mask, 3 queries over 7 keys"}),
    "split_without_transpose": Mistake(
        "split_heads reshapes straight to (n_heads, T, d_head), without moving the head axis", "test_from_earlier_assignments",
        "Head h holds columns h·d_head … (h+1)·d_head − 1 of every token: reshape to (T, n_heads, d_head) first, "
        "then move the head axis to the front (assignment 2).",
        (Edit(_EA, "X.reshape(T, n_heads, d_model // n_heads).transpose(1, 0, 2)",
              "X.reshape(n_heads, T, d_model // n_heads)"),),
        evidence="jsbaan/transformer-from-scratch#6", passes=_EA_ALL - {"split_heads, 4 tokens into 3 heads"}),
    "merge_without_transpose": Mistake(
        "merge_heads reshapes (n_heads, T, d_head) straight to (T, d_model), without moving the head axis back",
        "test_from_earlier_assignments",
        "Token t's row is head 0's features of token t, then head 1's, …: move the head axis next to d_head "
        "(transpose to (T, n_heads, d_head)) before the reshape (assignment 2).",
        (Edit(_EA, "H.transpose(1, 0, 2).reshape(T, n_heads * d_head)", "H.reshape(T, n_heads * d_head)"),),
        passes=_EA_ALL - {"merge_heads, 3 heads of 4 tokens"}),

    # ---- apply_rope
    "rotate_half_pairing": Mistake(
        "pairs (i, i + d/2), the GPT-NeoX / Hugging Face rotate_half convention, instead of (2i, 2i + 1)",
        "test_apply_rope",
        "This assignment pairs coordinate 2i with 2i + 1, as the RoFormer paper (eq. 34), Meta's LLaMA code and "
        "assignment 3 do. Pairing i with i + d/2 (rotate_half) is the same rotation after permuting the "
        "coordinates — equivalent only for weights permuted to match — so for given q and k it gives other scores.",
        (Edit(_AR, "even, odd = x[..., 0::2], x[..., 1::2]", "even, odd = x[..., :d // 2], x[..., d // 2:]"),
         Edit(_AR, "out[..., 0::2] = even * cos", "out[..., :d // 2] = even * cos"),
         Edit(_AR, "out[..., 1::2] = even * sin", "out[..., d // 2:] = even * sin")),
        evidence="huggingface/transformers#25199, Dao-AILab/flash-attention#288, karpathy/nanochat#264"),
    "rotation_clockwise": Mistake(
        "each pair turned by −pθ (the signs of the sines swapped)", "test_apply_rope",
        "x'_2i = x_2i cos pθ − x_2i+1 sin pθ and x'_2i+1 = x_2i sin pθ + x_2i+1 cos pθ: a counter-clockwise turn "
        "by pθ, the matrix R_p of assignment 3 applied to the pair as a column vector.",
        (Edit(_AR, "out[..., 0::2] = even * cos - odd * sin", "out[..., 0::2] = even * cos + odd * sin"),
         Edit(_AR, "out[..., 1::2] = even * sin + odd * cos", "out[..., 1::2] = odd * cos - even * sin"))),
    "not_a_rotation": Mistake(
        "cos and sin swapped in the second coordinate of each pair (the result is not a rotation)", "test_apply_rope",
        "Each pair must be turned, which keeps its length: the second coordinate is x_2i sin pθ + x_2i+1 cos pθ. "
        "Check that position 0 leaves x unchanged and that the norm of every row is kept.",
        (Edit(_AR, "out[..., 1::2] = even * sin + odd * cos", "out[..., 1::2] = even * cos + odd * sin"),)),
    "frequency_exponent_i": Mistake(
        "θ_i = base^(−i/d) instead of base^(−2i/d)", "test_apply_rope",
        "Pair i turns with θ_i = 10000^(−2i/d_head) — the exponent counts coordinates, 2i, as in assignment 3's "
        "frequencies; with −i/d the slow pairs turn too fast.",
        (Edit(_AR, "theta = base ** (-np.arange(0, d, 2) / d)", "theta = base ** (-np.arange(d // 2) / d)"),),
        evidence="jadore801120/attention-is-all-you-need-pytorch#32"),
    "positions_from_one": Mistake(
        "positions counted from 1 (each row turned one position too far)", "test_apply_rope",
        "The row at position p is turned by p θ_i, and position 0 is not turned at all. Attention scores would not "
        "notice a common shift (only differences matter), but the rotated vectors do.",
        (Edit(_AR, "angles = np.asarray(positions)[..., None] * theta",
              "angles = (np.asarray(positions) + 1)[..., None] * theta"),)),

    # ---- rope_attention
    "values_rotated": Mistake(
        "the values are rotated too", "test_rope_attention",
        "RoPE turns only queries and keys, so that their dot product sees the relative position; the values are "
        "what is averaged and keep no position.",
        (Edit(_RA, "return scaled_dot_product_attention(Q_rot, K_rot, V, mask=mask)",
              "return scaled_dot_product_attention(Q_rot, K_rot, apply_rope(V, np.arange(T_k)), mask=mask)"),)),
    "rotated_after_attention": Mistake(
        "the rotation applied after the dot products (to the attention output) instead of to q and k",
        "test_rope_attention",
        "The positions must enter the scores: rotate q and k before their dot product, q_m · k_n = q R_(n−m) kᵀ. "
        "Rotating afterwards leaves the weights those of attention without positions.",
        (Edit(_RA, "Q_rot = apply_rope(Q, np.arange(T_k - T_q, T_k))  # the queries are the last T_q positions",
              "Q_rot = Q"),
         Edit(_RA, "K_rot = apply_rope(K, np.arange(T_k))", "K_rot = K"),
         Edit(_RA, "return scaled_dot_product_attention(Q_rot, K_rot, V, mask=mask)",
              "out, weights = scaled_dot_product_attention(Q_rot, K_rot, V, mask=mask)\n"
              "    return apply_rope(out, np.arange(T_k - T_q, T_k)), weights"))),
    "query_positions_from_zero": Mistake(
        "the queries rotated at positions 0 … T_q − 1 although they are the last T_q", "test_rope_attention",
        "With fewer queries than keys the queries are the newest tokens, at positions T_k − T_q … T_k − 1 "
        "(bottom-right, as the causal mask); at 0 … T_q − 1 every relative position is off by T_k − T_q.",
        (Edit(_RA, "Q_rot = apply_rope(Q, np.arange(T_k - T_q, T_k))", "Q_rot = apply_rope(Q, np.arange(T_q))"),),
        passes=_ROPE_SQUARE),
    "keys_not_rotated": Mistake(
        "only the queries are rotated", "test_rope_attention",
        "Both q and k are rotated by their own positions; only then does their dot product depend on the "
        "difference of the positions alone.",
        (Edit(_RA, "K_rot = apply_rope(K, np.arange(T_k))", "K_rot = K"),)),
    "keys_rotated_backwards": Mistake(
        "the keys rotated by −n (so scores depend on m + n instead of n − m)", "test_rope_attention",
        "Rotate queries and keys the same way, each by its own position: R_mᵀ R_n = R_(n−m) is what makes the "
        "score relative.",
        (Edit(_RA, "K_rot = apply_rope(K, np.arange(T_k))", "K_rot = apply_rope(K, -np.arange(T_k))"),)),

    # ---- rope_attend_with_cache
    "cache_positions_from_zero": Mistake(
        "the new tokens rotated at positions 0, 1, … instead of after the cache", "test_rope_attend_with_cache",
        "With T_past tokens cached, the new tokens sit at positions T_past, T_past + 1, …: a decoder that restarts "
        "the positions at 0 for every step sees every cached key at the wrong distance.",
        (Edit(_RC, "positions = np.arange(T_past, T_past + x_new.shape[0])", "positions = np.arange(x_new.shape[0])"),),
        evidence="huggingface/transformers#15751, huggingface/transformers#37403", passes=_EMPTY_CACHE),
    "cached_keys_rotated_again": Mistake(
        "the cached keys rotated again (they were rotated when they were cached)", "test_rope_attend_with_cache",
        "The cache holds keys already rotated by their positions; rotating them again turns them twice. Rotate "
        "only the new keys, at their own positions, and append them.",
        (Edit(_RC, "K = np.concatenate([K_cache, apply_rope(x_new @ W_k, positions)])",
              "K = apply_rope(np.concatenate([K_cache, x_new @ W_k]), np.arange(T_past + x_new.shape[0]))"),),
        evidence="MooreThreads/TurboRAG#5", passes=_EMPTY_CACHE),
    "cached_values_rotated": Mistake(
        "the new values rotated before they are cached", "test_rope_attend_with_cache",
        "Only queries and keys carry positions in RoPE; values are cached as x W_v.",
        (Edit(_RC, "V = np.concatenate([V_cache, x_new @ W_v])",
              "V = np.concatenate([V_cache, apply_rope(x_new @ W_v, positions)])"),)),
    "new_query_not_rotated": Mistake(
        "the new queries are not rotated", "test_rope_attend_with_cache",
        "The new queries need their rotation too, by their positions T_past, T_past + 1, …",
        (Edit(_RC, "q = apply_rope(x_new @ W_q, positions)", "q = x_new @ W_q"),)),

    # ---- alibi_slopes
    "slopes_geometric_for_every_n": Mistake(
        "2^(−8k/n) for every head count (the power-of-two formula used for 6 or 12 heads)", "test_alibi_slopes",
        "The paper's geometric sequence is for powers of two. For other head counts the authors' code takes the "
        "slopes of the largest power of two below n and adds every other slope of twice that many heads.",
        (Edit(_SL, "closest = 2 ** int(np.floor(np.log2(n_heads)))  # the largest power of two <= n_heads",
              "closest = n_heads"),), evidence="ml-explore/mlx#3071, baichuan-inc/Baichuan2#225",
        passes=_POWERS_OF_TWO),
    "slopes_reversed": Mistake(
        "the slopes in increasing order (head 0 the gentlest)", "test_alibi_slopes",
        "Head 0 has the steepest slope, 2^(−8/n); the slopes then shrink geometrically to 2^(−8).",
        (Edit(_SL, "np.arange(1, closest + 1) / closest", "np.arange(closest, 0, -1) / closest"),)),
    "slopes_start_at_one": Mistake(
        "slopes 2^(−8k/n) from k = 0 (head 0 gets slope 1)", "test_alibi_slopes",
        "The sequence starts at 2^(−8/n), not at 2⁰ = 1: for 8 heads the slopes are 1/2 … 1/256.",
        (Edit(_SL, "np.arange(1, closest + 1) / closest", "np.arange(closest) / closest"),),
        evidence="paiml/aprender#2143"),
    "extra_slopes_odd_indices": Mistake(
        "the extra slopes taken at odd indices [1::2] (those repeat the first ones)", "test_alibi_slopes",
        "Every other slope of 2·closest heads starting with the first ([0::2]) interleaves between the ones you "
        "already have; the odd-indexed ones are exactly the first closest slopes again.",
        (Edit(_SL, "alibi_slopes(2 * closest)[0::2]", "alibi_slopes(2 * closest)[1::2]"),), passes=_POWERS_OF_TWO),
    "extra_slopes_first_ones": Mistake(
        "the extra slopes are the first ones of 2·closest heads instead of every other one", "test_alibi_slopes",
        "The authors add every other slope of 2·closest heads ([0::2]), which fall between the existing slopes.",
        (Edit(_SL, "alibi_slopes(2 * closest)[0::2][:n_heads - closest]", "alibi_slopes(2 * closest)[:n_heads - closest]"),),
        passes=_POWERS_OF_TWO),

    # ---- alibi_attention
    "bias_sign_flipped": Mistake(
        "+m · distance: distant keys favoured", "test_alibi_attention",
        "ALiBi penalises distance: the bias is −m_h · (i − j), 0 for the query's own position and more negative "
        "the further back the key.",
        (Edit(_AA, "bias = -alibi_slopes(n_heads)[:, None, None] * distance",
              "bias = alibi_slopes(n_heads)[:, None, None] * distance"),)),
    "bias_without_causal_mask": Mistake(
        "the bias alone, without the causal mask (future keys get a positive bias)", "test_alibi_attention",
        "ALiBi is used with the causal mask: the linear bias says how far back a key is, the mask still blocks "
        "the future (j > i), where −m · (i − j) is even positive.",
        (Edit(_AA, "    scores = np.where(causal_mask(T_q, T_k), scores, -np.inf)\n", ""),)),
    "bias_scaled_by_sqrt_d": Mistake(
        "the bias added before the 1/√d_k scaling (so it is scaled too)", "test_alibi_attention",
        "The bias is added to the scaled scores q·k/√d_k, as in the authors' code: the slopes are meant per unit "
        "of scaled score.",
        (Edit(_AA, "scores = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]) + bias",
              "scores = (Q @ np.swapaxes(K, -1, -2) + bias) / np.sqrt(Q.shape[-1])"),)),
    "alibi_mask_top_left": Mistake(
        "the causal mask aligned top-left when T_q < T_k", "test_alibi_attention",
        "The queries are the last T_q positions: query i sees keys up to i + T_k − T_q (bottom-right).",
        (Edit(_AA, "scores = np.where(causal_mask(T_q, T_k), scores, -np.inf)",
              "scores = np.where(np.tril(np.ones((T_q, T_k), dtype=bool)), scores, -np.inf)"),),
        evidence="pytorch/pytorch#108108", passes=_ALIBI_SQUARE),

    # ---- grouped_query_attention
    "interleaved_groups": Mistake(
        "query head h uses kv head h mod n_kv_heads (np.tile, torch's .repeat) instead of h // group",
        "test_grouped_query_attention",
        "Groups are contiguous: query heads 0 … g−1 share kv head 0, the next g kv head 1, and so on (np.repeat, "
        "torch's repeat_interleave). np.tile gives [0, 1, 0, 1, …].",
        (Edit(_GQ, "K = np.repeat(split_heads(x @ W_k, n_kv_heads), group, axis=0)",
              "K = np.tile(split_heads(x @ W_k, n_kv_heads), (group, 1, 1))"),
         Edit(_GQ, "V = np.repeat(split_heads(x @ W_v, n_kv_heads), group, axis=0)",
              "V = np.tile(split_heads(x @ W_v, n_kv_heads), (group, 1, 1))")),
        evidence="onnx/onnx#7274, apple/axlearn#842", passes=_EQUAL_HEADS | _ONE_KV_HEAD | _GQA_ERROR),
    "repeated_along_time": Mistake(
        "the kv heads repeated along the sequence axis instead of the head axis", "test_grouped_query_attention",
        "Repeat each kv head along the head axis (axis 0 of (n_kv_heads, T, d_head)); repeating along the tokens "
        "makes T · group keys.",
        (Edit(_GQ, "K = np.repeat(split_heads(x @ W_k, n_kv_heads), group, axis=0)",
              "K = np.repeat(split_heads(x @ W_k, n_kv_heads), group, axis=1)"),
         Edit(_GQ, "V = np.repeat(split_heads(x @ W_v, n_kv_heads), group, axis=0)",
              "V = np.repeat(split_heads(x @ W_v, n_kv_heads), group, axis=1)")),
        evidence="PrimeIntellect-ai/prime-rl#2681", passes=_EQUAL_HEADS | _GQA_ERROR),
    "kv_split_into_n_heads": Mistake(
        "K and V split into n_heads heads like Q (their width is n_kv_heads · d_head)",
        "test_grouped_query_attention",
        "x W_k has n_kv_heads · d_head columns: split it into n_kv_heads heads of d_head, then share each with its "
        "group of query heads.",
        (Edit(_GQ, "K = np.repeat(split_heads(x @ W_k, n_kv_heads), group, axis=0)",
              "K = split_heads(x @ W_k, n_heads)"),
         Edit(_GQ, "V = np.repeat(split_heads(x @ W_v, n_kv_heads), group, axis=0)",
              "V = split_heads(x @ W_v, n_heads)")), passes=_EQUAL_HEADS | _GQA_ERROR),

    "output_projection_forgotten": Mistake(
        "the merged heads returned without the output projection W_o", "test_grouped_query_attention",
        "Grouped-query attention changes only how many key/value heads there are; as in assignment 2, the merged "
        "heads (T, n_heads · d_head) are multiplied by W_o (Vaswani et al. 2017, §3.2.2).",
        (Edit(_GQ, "return merge_heads(heads) @ W_o, weights", "return merge_heads(heads), weights"),),
        passes=_GQA_ERROR),

    "assert_instead_of_value_error": Mistake(
        "the sizes checked with assert (AssertionError) instead of raising a ValueError", "test_grouped_query_attention",
        "When n_kv_heads does not divide n_heads the function must refuse with a ValueError that names both "
        "numbers; an assert raises AssertionError, and Python drops it altogether under python -O.",
        (Edit(_GQ, '    if n_heads % n_kv_heads:\n        raise ValueError(f"n_kv_heads={n_kv_heads} must divide '
                   'n_heads={n_heads}")\n',
              '    assert n_heads % n_kv_heads == 0, "n_kv_heads must divide n_heads"\n'),),
        passes=_GQA_ALL - _GQA_ERROR),

    # ---- kv_cache_bytes
    "keys_only": Mistake(
        "only the keys counted (no factor 2)", "test_kv_cache_bytes",
        "The cache holds a key and a value for every token, layer and kv head: the factor 2.",
        (Edit(_KB, "return 2 * T * n_layers", "return T * n_layers"),)),
    "bits_not_bytes": Mistake(
        "bits instead of bytes (× 8)", "test_kv_cache_bytes",
        "bytes_per_value is already in bytes (2 for float16); multiplying by 8 counts bits.",
        (Edit(_KB, "* d_head * bytes_per_value", "* d_head * bytes_per_value * 8"),)),
    "quadratic_in_T": Mistake(
        "the cache counted as growing with T² (like the score matrix)", "test_kv_cache_bytes",
        "The cache stores one key and one value per token: it grows linearly in T. The T × T scores are computed "
        "and thrown away, never cached.",
        (Edit(_KB, "return 2 * T * n_layers", "return 2 * T * T * n_layers"),)),
    "layers_forgotten": Mistake(
        "the layers forgotten (one layer's cache)", "test_kv_cache_bytes",
        "Every layer has its own keys and values for every token: multiply by n_layers.",
        (Edit(_KB, "return 2 * T * n_layers * n_kv_heads", "return 2 * T * n_kv_heads"),)),
}


#: The grader's form of the mistakes: the edited cells (what the spec hands the grader).
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)


# ------------------------------------------------------------------ hidden cases
def _attention_inputs(rng, batch, T_q, T_k, d, d_v):
    return (rng.normal(0, 1.5, batch + (T_q, d)), rng.normal(0, 1.5, batch + (T_k, d)),
            rng.normal(size=batch + (T_k, d_v)))


def _earlier_cases():
    rng = np.random.default_rng(8000)
    Q, K, V = rng.normal(0, 1.5, (2, 3, 4)), rng.normal(0, 1.5, (2, 5, 4)), rng.normal(size=(2, 5, 2))
    bottom_right = np.tril(np.ones((3, 5), dtype=bool), k=2)
    return [
        Case("softmax of logits as large as 1e4", "softmax", (np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]]),),
             outputs=("the probabilities",)),
        Case("attention, a batch of 2, 3 queries over 5 keys with a (3, 5) mask", "scaled_dot_product_attention",
             (Q, K, V), {"mask": bottom_right}, outputs=("the output", "the weights"), rtol=0.0, atol=1e-12),
        Case("causal mask, 3 queries over 7 keys", "causal_mask", (3, 7), outputs=("the mask",)),
        # weight 0: the square mask and the ValueError are graded in assignment 5; here they show the function is there
        Case("causal mask, square, T_k omitted (T = 4)", "causal_mask", (4,), outputs=("the mask",), weight=0),
        Case("causal mask, T_q = 6 > T_k = 4: ValueError", "causal_mask", (6, 4), raises="ValueError", weight=0),
        Case("split_heads, 4 tokens into 3 heads", "split_heads", (rng.normal(size=(4, 6)), 3),
             outputs=("the heads",)),
        Case("merge_heads, 3 heads of 4 tokens", "merge_heads", (rng.normal(size=(3, 4, 2)),),
             outputs=("the merged rows",)),
    ]


def _rope_cases():
    rng = np.random.default_rng(8001)
    out = ("the rotated rows",)
    same = dict(rtol=0.0, atol=1e-12)
    return [
        Case("5 rows, d_head = 8, positions 0 … 4", "apply_rope", (rng.normal(size=(5, 8)), np.arange(5)),
             outputs=out, **same),
        Case("batch (2, 3) of 6 rows, d_head = 4, positions 3, 0, 7, 1, 12, 5", "apply_rope",
             (rng.normal(size=(2, 3, 6, 4)), np.array([3, 0, 7, 1, 12, 5])), outputs=out, **same),
        Case("2 sequences of 4 rows with their own positions (a (2, 4) array), d_head = 6", "apply_rope",
             (rng.normal(size=(2, 4, 6)), np.array([[0, 1, 2, 3], [5, 6, 7, 8]])), outputs=out, **same),
        Case("3 rows, d_head = 16, positions 100, 1000, 5", "apply_rope",
             (rng.normal(size=(3, 16)), np.array([100, 1000, 5])), outputs=out, **same),
    ]


def _rope_attention_cases():
    rng = np.random.default_rng(8002)
    pair = dict(outputs=("the output", "the weights"), rtol=0.0, atol=1e-12)
    return [
        Case("causal, T = 6, d_head = 8", "rope_attention", _attention_inputs(rng, (), 6, 6, 8, 4), **pair),
        Case("causal, 3 queries over 7 keys (the queries are the last 3)", "rope_attention",
             _attention_inputs(rng, (), 3, 7, 8, 4), **pair),
        Case("no mask, batch (2, 3), T = 5, d_head = 4", "rope_attention", _attention_inputs(rng, (2, 3), 5, 5, 4, 2),
             {"causal": False}, **pair),
        Case("no mask, 2 queries over 6 keys, d_head = 6", "rope_attention", _attention_inputs(rng, (), 2, 6, 6, 4),
             {"causal": False}, **pair),
    ]


def _cache_case(rng, description, T_past, T_new, d_model=6, d_head=4):
    x = rng.normal(size=(T_past + T_new, d_model))
    W_q, W_k, W_v = (rng.normal(0, 1.5 / np.sqrt(d_model), (d_model, d_head)) for _ in range(3))
    K_cache = ref.apply_rope(x[:T_past] @ W_k, np.arange(T_past))  # rotated when they were cached
    return Case(description, "rope_attend_with_cache", (x[T_past:], K_cache, x[:T_past] @ W_v, W_q, W_k, W_v),
                outputs=("the output", "the new key cache", "the new value cache"), rtol=0.0, atol=1e-12)


def _rope_cache_cases():
    rng = np.random.default_rng(8003)
    return [
        _cache_case(rng, "empty cache, 4 new tokens", 0, 4),
        _cache_case(rng, "1 new token over a cache of 5", 5, 1),
        _cache_case(rng, "3 new tokens over a cache of 3 (d_model = 8, d_head = 6)", 3, 3, 8, 6),
    ]


def _slope_cases():
    exact = dict(outputs=("the slopes",), rtol=1e-12, atol=0.0)
    # not 3 or 5 heads: their single extra slope is the same for [0::2][:1] and [:1]
    return [Case(f"{n} heads", "alibi_slopes", (n,), **exact) for n in (8, 6, 12, 7, 16, 24)]


def _alibi_cases():
    rng = np.random.default_rng(8004)
    pair = dict(outputs=("the output", "the weights"), rtol=0.0, atol=1e-12)
    Q, K, V = _attention_inputs(rng, (2, 8), 5, 5, 4, 3)
    return [
        Case("4 heads, T = 6", "alibi_attention", _attention_inputs(rng, (4,), 6, 6, 4, 3), **pair),
        Case("6 heads, 3 queries over 7 keys", "alibi_attention", _attention_inputs(rng, (6,), 3, 7, 4, 2), **pair),
        Case("batch of 2, 8 heads, K and V shared by the heads, T = 5", "alibi_attention",
             (Q, K[:, :1], V[:, :1]), **pair),
    ]


def _gqa_case(rng, description, T, d_model, n_heads, n_kv_heads, causal, raises=None):
    d_head = d_model // n_heads
    s = 1.5 / np.sqrt(d_model)
    x = rng.normal(size=(T, d_model))
    W_q, W_o = rng.normal(0, s, (d_model, d_model)), rng.normal(0, s, (d_model, d_model))
    W_k, W_v = (rng.normal(0, s, (d_model, n_kv_heads * d_head)) for _ in range(2))
    kwargs = {"mask": np.tril(np.ones((T, T), dtype=bool))} if causal else {}
    extra = dict(raises=raises) if raises else dict(outputs=("the output", "the weights"), rtol=0.0, atol=1e-12)
    return Case(description, "grouped_query_attention", (x, W_q, W_k, W_v, W_o, n_heads, n_kv_heads), kwargs, **extra)


def _gqa_cases():
    rng = np.random.default_rng(8005)
    return [
        _gqa_case(rng, "4 query heads in 2 groups, causal, d_model = 8", 5, 8, 4, 2, True),
        _gqa_case(rng, "6 query heads in 3 groups, no mask, d_model = 12", 4, 12, 6, 3, False),
        _gqa_case(rng, "multi-query: 4 query heads, 1 kv head, no mask", 5, 8, 4, 1, False),
        _gqa_case(rng, "n_heads = n_kv_heads = 3 (multi-head attention), causal", 4, 6, 3, 3, True),
        _gqa_case(rng, "n_kv_heads = 3 does not divide n_heads = 4: ValueError", 4, 8, 4, 3, False, "ValueError"),
    ]


def _bytes_cases():
    exact = dict(outputs=("the bytes",), rtol=0.0, atol=0.5)
    return [
        Case("4096 tokens, 80 layers, 8 kv heads, d_head = 128, 2 bytes", "kv_cache_bytes", (4096, 80, 8, 128, 2),
             **exact),
        Case("2048 tokens, 32 layers, 32 kv heads, d_head = 128, 2 bytes", "kv_cache_bytes", (2048, 32, 32, 128, 2),
             **exact),
        Case("7 tokens, 2 layers, 1 kv head, d_head = 64, 4 bytes", "kv_cache_bytes", (7, 2, 1, 64, 4), **exact),
        Case("3 tokens, 12 layers, 12 kv heads, d_head = 64, 4 bytes (keywords)", "kv_cache_bytes", (),
             {"T": 3, "n_layers": 12, "n_kv_heads": 12, "d_head": 64, "bytes_per_value": 4}, **exact),
    ]


def hidden_cases() -> dict[str, list[Case]]:
    """Proposed hidden cases, test-cell grade_id → cases (seeded)."""
    return {
        "test_from_earlier_assignments": _earlier_cases(),
        "test_apply_rope": _rope_cases(),
        "test_rope_attention": _rope_attention_cases(),
        "test_rope_attend_with_cache": _rope_cache_cases(),
        "test_alibi_slopes": _slope_cases(),
        "test_alibi_attention": _alibi_cases(),
        "test_grouped_query_attention": _gqa_cases(),
        "test_kv_cache_bytes": _bytes_cases(),
    }
