"""Differently written answers to assignment 3 (sinusoidal positional encoding): correct ones and known mistakes.

Each variant replaces solution cells, keyed by the cell's nbgrader ``grade_id``;
cells it does not name keep the source notebook's solution. Every correct
variant must earn full marks; every mistake must lose points exactly on the
autograder cells in its ``breaks`` and be named there (see
:mod:`autograder.grader.spec`). Mistakes follow ``shared/notes/mistakes.md`` (M19 for
the encoding itself) plus slips met in this assignment's later steps.
Known mistakes are small edits of the source notebook's solution cells
(``KNOWN_MISTAKES``, :class:`~autograder.grader.bank.Mistake`, applied to ``SOLUTION``);
``MISTAKES`` holds them as the edited cells the grader uses.
"""

from __future__ import annotations

from autograder.grader.bank import Edit, Mistake, source_solution, variants
from autograder.grader.spec import Variant

CORRECT = {
    "loops": Variant("explicit Python loops with math.sin / math.cos, a loop over offsets, a block per pair", {
        "sinusoidal_positional_encoding": '''
import math

def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2 == 1:
        raise ValueError("d_model must be even")
    pe = np.zeros((T, d_model))
    for t in range(T):
        for i in range(d_model // 2):
            angle = t / 10000 ** (2 * i / d_model)
            pe[t, 2 * i] = math.sin(angle)
            pe[t, 2 * i + 1] = math.cos(angle)
    return pe
''',
        "dot_product_by_offset": '''
def dot_product_by_offset(pe, t):
    T = pe.shape[0]
    out = np.zeros(T - t)
    for k in range(T - t):
        out[k] = sum(a * b for a, b in zip(pe[t], pe[t + k]))
    return out
''',
        "permutation_gap": '''
def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    shuffled = np.array([x[p] for p in perm])
    if positions:
        x, shuffled = add_positions(x), add_positions(shuffled)
    out = self_attention(x, W_q, W_k, W_v)[0]
    out_shuffled = self_attention(shuffled, W_q, W_k, W_v)[0]
    gap = 0.0
    for row, p in enumerate(perm):
        for col in range(out.shape[1]):
            gap = max(gap, abs(out_shuffled[row, col] - out[p, col]))
    return gap
''',
    }),
    "outer_exp_log_stack": Variant("frequencies as exp(−2i·ln(10000)/d), np.outer, sin/cos stacked then reshaped", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError(f"d_model={d_model} is odd")
    freq = np.exp(-np.arange(0, d_model, 2) * np.log(10000.0) / d_model)
    angles = np.outer(np.arange(T), freq)
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(T, d_model)
''',
        "offset_rotation": '''
def offset_rotation(k, d_model):
    freq = np.exp(-np.arange(0, d_model, 2) * np.log(10000.0) / d_model)
    c, s = np.cos(k * freq), np.sin(k * freq)
    rotation = np.array([[1.0, 0.0], [0.0, 1.0]])
    quarter = np.array([[0.0, -1.0], [1.0, 0.0]])
    return np.kron(np.diag(c), rotation) + np.kron(np.diag(s), quarter)
''',
    }),
    "complex_exponentials": Variant("e^{i t ω}: sine = imaginary part, cosine = real part; rotation blocks from "
                                    "e^{i k ω}", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2 != 0:
        raise ValueError("odd d_model")
    omega = np.power(10000.0, -np.arange(d_model // 2) * 2.0 / d_model)
    z = np.exp(1j * np.arange(T)[:, None] * omega)
    pe = np.empty((T, d_model))
    pe[:, ::2], pe[:, 1::2] = z.imag, z.real
    return pe
''',
        "offset_rotation": '''
def offset_rotation(k, d_model):
    omega = np.power(10000.0, -np.arange(d_model // 2) * 2.0 / d_model)
    R = np.zeros((d_model, d_model))
    for i, w in enumerate(np.exp(1j * k * omega)):
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[w.real, -w.imag], [w.imag, w.real]]
    return R
''',
        "dot_product_by_offset": '''
def dot_product_by_offset(pe, t):
    return np.einsum("kd,d->k", pe[t:], pe[t])
''',
    }),
    "float32": Variant("all arithmetic in float32", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    pos = np.arange(T, dtype=np.float32)[:, None]
    div = np.float32(10000.0) ** (np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model))
    pe = np.zeros((T, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(pos / div)
    pe[:, 1::2] = np.cos(pos / div)
    return pe
''',
        "dot_product_by_offset": '''
def dot_product_by_offset(pe, t):
    pe = np.asarray(pe, dtype=np.float32)
    return pe[t:] @ pe[t]
''',
        "offset_rotation": '''
def offset_rotation(k, d_model):
    angles = np.float32(k) / np.float32(10000.0) ** (np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model))
    R = np.zeros((d_model, d_model), dtype=np.float32)
    idx = np.arange(0, d_model, 2)
    R[idx, idx] = R[idx + 1, idx + 1] = np.cos(angles)
    R[idx, idx + 1] = -np.sin(angles)
    R[idx + 1, idx] = np.sin(angles)
    return R
''',
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
''',
        "self_attention": '''
def self_attention(x, W_q, W_k, W_v):
    x = np.asarray(x, dtype=np.float32)
    return scaled_dot_product_attention(x @ W_q.astype(np.float32), x @ W_k.astype(np.float32),
                                        x @ W_v.astype(np.float32))
''',
        "add_positions": '''
def add_positions(x):
    return (x + sinusoidal_positional_encoding(*x.shape)).astype(np.float32)
''',
    }),
    "power_column_index": Variant("np.power with the even column index 2i, written per column with a range step", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2 == 1:
        raise ValueError("sin and cos need an even d_model")
    pe = np.zeros((T, d_model))
    t = np.arange(T).reshape(-1, 1)
    for col in range(0, d_model, 2):
        angle = t[:, 0] / np.power(10000, col / d_model)
        pe[:, col] = np.sin(angle)
        pe[:, col + 1] = np.cos(angle)
    return pe
''',
        "add_positions": '''
def add_positions(x):
    pe = sinusoidal_positional_encoding(x.shape[0], x.shape[1])
    out = x.copy()
    out += pe
    return out
''',
    }),
    "einsum_everywhere": Variant("einsum for dot products, projections and the weighted sum; −1e9 mask fill", {
        "dot_product_by_offset": '''
def dot_product_by_offset(pe, t):
    return np.einsum("d,kd->k", pe[t], pe[t:])
''',
        "from_assignment_1": '''
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)

def attention_scores(Q, K, scale=True):
    s = np.einsum("...qd,...kd->...qk", Q, K)
    return s / np.sqrt(Q.shape[-1]) if scale else s

def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    s = attention_scores(Q, K, scale)
    if mask is not None:
        s = np.where(mask, s, -1e9)
    w = softmax(s, axis=-1)
    return np.einsum("...qk,...kv->...qv", w, V), w
''',
        "self_attention": '''
def self_attention(x, W_q, W_k, W_v):
    Q, K, V = (np.einsum("td,dh->th", x, W) for W in (W_q, W_k, W_v))
    return scaled_dot_product_attention(Q, K, V, mask=None, scale=True)
''',
    }),
    "inverse_permutation_compared": Variant("equivariance checked the other way round: un-shuffle the shuffled "
                                            "outputs; the gap as a 0-d array (np.asarray)", {
        "permutation_gap": '''
def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    encode = add_positions if positions else (lambda z: z)
    out, _ = self_attention(encode(x), W_q, W_k, W_v)
    out_shuffled, _ = self_attention(encode(np.take(x, perm, axis=0)), W_q, W_k, W_v)
    inverse = np.argsort(perm)
    return np.asarray(np.abs(out_shuffled[inverse] - out).max())
''',
        "add_positions": '''
def add_positions(x):
    T, d_model = np.shape(x)
    return np.add(x, sinusoidal_positional_encoding(T=T, d_model=d_model))
''',
    }),
    "warnings_and_prints": Variant("correct code that makes NumPy warn and prints to stdout and stderr", {
        "sinusoidal_positional_encoding": '''
import sys

def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    print("building", T, "x", d_model, file=sys.stderr)
    log_t = np.log(np.arange(T) * 1.0)  # log 0 = -inf, with a divide-by-zero warning; exp(-inf) = 0 below
    log_freq = -np.arange(0, d_model, 2) / d_model * np.log(10000.0)
    angles = np.exp(log_t[:, None] + log_freq[None, :])
    pe = np.zeros((T, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe
''',
        "offset_rotation": '''
import warnings

def offset_rotation(k, d_model):
    warnings.warn("building a rotation")
    print("rotation by", k)
    R = np.eye(d_model)
    for i in range(d_model // 2):
        a = k * 10000.0 ** (-2 * i / d_model)
        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return R
''',
        "permutation_gap": '''
import sys

def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    a = add_positions(x) if positions else x
    b = add_positions(x[perm]) if positions else x[perm]
    diff = self_attention(b, W_q, W_k, W_v)[0] - self_attention(a, W_q, W_k, W_v)[0][perm]
    print("max gap", np.abs(diff).max(), file=sys.stderr)
    return float(np.abs(diff).max())
''',
    }),
    "keyword_calls_and_additive_mask": Variant("keyword arguments throughout, an additive 0/−inf mask, mask=None "
                                               "passed on", {
        "from_assignment_1": '''
def softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=axis, keepdims=True)

def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = Q @ np.swapaxes(K, -2, -1)
    if scale:
        scores = scores / np.sqrt(K.shape[-1])
    if mask is not None:
        scores = scores + np.where(mask, 0.0, -np.inf)
    weights = softmax(x=scores, axis=-1)
    return weights @ V, weights
''',
        "self_attention": '''
def self_attention(x, W_q, W_k, W_v):
    return scaled_dot_product_attention(Q=x @ W_q, K=x @ W_k, V=x @ W_v, mask=None)
''',
    }),
}


#: The solution the mistakes edit: the source notebook's solution cells (grade_id → source), not a copy.
SOLUTION = source_solution(__name__)

#: Known mistakes as edits of SOLUTION (name → Mistake).
KNOWN_MISTAKES = {
    # ---- step 1: the encoding (M19)
    "sin_cos_swapped": Mistake(
        "cos in the even columns and sin in the odd ones", "test_sinusoidal_positional_encoding",
        ("Sine and cosine are swapped: in this spec (as in the paper) even columns 2i hold the sine and odd columns "
         "2i + 1 the cosine, so row 0 is (0, 1, 0, 1, …)."),
        (Edit("sinusoidal_positional_encoding",
              "    pe[:, 0::2] = np.sin(angles)\n"
              "    pe[:, 1::2] = np.cos(angles)\n",
              "    pe[:, 0::2] = np.cos(angles)\n"
              "    pe[:, 1::2] = np.sin(angles)\n"),)),
    "exponent_pair_index": Mistake(
        "exponent i/d_model with the pair index i, instead of 2i/d_model", "test_sinusoidal_positional_encoding",
        ("The frequencies are off: pair i (columns 2i and 2i + 1) uses the exponent 2i/d_model, so the last pair "
         "turns 10000^((d_model − 2)/d_model) times slower than the first (100 times for d_model = 4, almost 10000 "
         "times only for large d_model). Check what your exponent is for the last pair."),
        (Edit("sinusoidal_positional_encoding",
              "10000 ** (np.arange(0, d_model, 2) / d_model)",
              "10000 ** (np.arange(d_model // 2) / d_model)"),)),
    "exponent_column_index": Mistake(
        ("each column j uses the exponent j/d_model, so a cosine has a different "
         "frequency from its sine partner"), "test_sinusoidal_positional_encoding",
        ("The cosine columns do not share their sine partner's frequency: columns 2i and 2i + 1 both use the exponent "
         "2i/d_model (the index of the even column), which is what makes each pair a point on a circle."),
        (Edit("sinusoidal_positional_encoding",
              "    pe[:, 1::2] = np.cos(angles)\n",
              "    pe[:, 1::2] = np.cos(positions / 10000 ** (np.arange(1, d_model, 2) / d_model))\n"),)),
    "base_1000": Mistake(
        "base 1000 instead of 10000", "test_sinusoidal_positional_encoding",
        "The slowest frequencies are too fast: the base of the wavelengths is 10000 (section 3.5), not 1000.",
        (Edit("sinusoidal_positional_encoding", "1.0 / 10000 **", "1.0 / 1000 **"),)),
    "concatenated_halves": Mistake(
        "all sines in the first half of the columns, all cosines in the second", "test_sinusoidal_positional_encoding",
        ("Sines and cosines are concatenated in two halves. That is a valid convention (tensor2tensor uses it) but "
         "not this assignment's: here they are interleaved, sine in column 2i and cosine in column 2i + 1."),
        (Edit("sinusoidal_positional_encoding",
              "    pe = np.zeros((T, d_model))\n"
              "    pe[:, 0::2] = np.sin(angles)\n"
              "    pe[:, 1::2] = np.cos(angles)\n"
              "    return pe\n",
              "    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)\n"),)),
    "positions_from_one": Mistake(
        "positions counted 1 … T instead of 0 … T−1", "test_sinusoidal_positional_encoding",
        "Every row is shifted by one position: positions start at t = 0, whose encoding is (0, 1, 0, 1, …).",
        (Edit("sinusoidal_positional_encoding", "np.arange(T)[:, None]", "np.arange(1, T + 1)[:, None]"),)),
    "multiplies_by_wavelength": Mistake(
        "t multiplied by 10000^(2i/d_model) instead of divided", "test_sinusoidal_positional_encoding",
        ("The later pairs turn faster instead of slower: the angle is t divided by 10000^(2i/d_model) "
         "(a frequency below 1), not multiplied by it."),
        (Edit("sinusoidal_positional_encoding", "frequencies = 1.0 / 10000 ** (", "frequencies = 10000 ** ("),)),
    "odd_d_model_accepted": Mistake(
        "odd d_model silently accepted (a last sine column without its cosine)", "test_sinusoidal_positional_encoding",
        ("An odd d_model must raise ValueError: the columns come in sin/cos pairs, and a lone sine column would "
         "break the rotation property you use later."),
        (Edit("sinusoidal_positional_encoding",
              "    if d_model % 2 != 0:\n"
              '        raise ValueError(f"d_model must be even (sine/cosine pairs); received d_model={d_model}")\n',
              ""),
         Edit("sinusoidal_positional_encoding",
              "pe[:, 1::2] = np.cos(angles)",
              "pe[:, 1::2] = np.cos(angles[:, : d_model // 2])"))),
    # ---- step 2: dot products by offset
    "offsets_from_position_zero": Mistake(
        "t ignored: dot products of PE(0) with PE(k)", "test_dot_product_by_offset",
        ("The result does not depend on t: for sinusoidal encodings that happens to be true, but the function must "
         "compare position t with positions t + k for any encoding (learned ones too)."),
        (Edit("dot_product_by_offset", "return pe[t:] @ pe[t]", "return pe[: pe.shape[0] - t] @ pe[0]"),)),
    "cosine_similarity": Mistake(
        "normalised dot products (cosine similarity)", "test_dot_product_by_offset",
        ("The values are divided by the vector lengths (cosine similarity); the step asks for plain dot products, "
         "which equal d_model / 2 at k = 0 for sinusoidal encodings."),
        (Edit("dot_product_by_offset",
              "return pe[t:] @ pe[t]",
              "return pe[t:] @ pe[t] / (np.linalg.norm(pe[t:], axis=1) * np.linalg.norm(pe[t]))"),)),
    "skips_offset_zero": Mistake(
        "offsets start at k = 1 (PE(t)·PE(t) left out)", "test_dot_product_by_offset",
        ("Offset k = 0 is missing: the result runs over k = 0 … T − 1 − t, so it has T − t entries and starts "
         "with PE(t)·PE(t)."),
        (Edit("dot_product_by_offset", "pe[t:] @", "pe[t + 1:] @"),)),
    # ---- step 3: the rotation
    "rotation_sine_sign_flipped": Mistake(
        "sine signs flipped in each block (R_k transposed, i.e. R_{−k})", "test_offset_rotation",
        ("Your matrix moves the encodings k positions back instead of forward (it is the transpose of R_k). The "
         "encoding is a row vector multiplied on the left, PE(t) @ R_k: write out sin(a + b) and cos(a + b) and read "
         "off which entry of the block multiplies the sine and which the cosine."),
        (Edit("offset_rotation", "[[np.cos(a), -np.sin(a)],", "[[np.cos(a), np.sin(a)],"),
         Edit("offset_rotation", "[np.sin(a), np.cos(a)]]", "[-np.sin(a), np.cos(a)]]"))),
    "rotation_forgets_k": Mistake(
        "rotation angle ω_i instead of k·ω_i", "test_offset_rotation",
        "The matrix moves one position for every k: each pair must turn by the angle k·ω_i.",
        (Edit("offset_rotation", "angles = k / 10000", "angles = 1 / 10000"),)),
    "rotation_sin_cos_swapped": Mistake(
        "sin on the diagonal of each block and cos off it", "test_offset_rotation",
        ("The blocks are not rotations by k·ω_i: with k = 0 the matrix must be the identity, so the cosines go on "
         "the diagonal of each 2×2 block."),
        (Edit("offset_rotation", "[[np.cos(a), -np.sin(a)],", "[[np.sin(a), -np.cos(a)],"),
         Edit("offset_rotation", "[np.sin(a), np.cos(a)]]", "[np.cos(a), np.sin(a)]]"))),
    "rotation_halves_layout": Mistake(
        ("each pair's block placed on columns (i, i + d_model/2), the concatenated "
         "layout"), "test_offset_rotation",
        ("The 2×2 blocks sit on columns (i, i + d_model/2), the layout of concatenated halves; in this assignment the "
         "sine and cosine of pair i are the neighbouring columns 2i and 2i + 1, so R_k is block diagonal."),
        (Edit("offset_rotation",
              "        R[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), -np.sin(a)],\n"
              "                                               [np.sin(a), np.cos(a)]]\n",
              "        h = d_model // 2\n"
              "        R[i, i], R[i, i + h] = np.cos(a), -np.sin(a)\n"
              "        R[i + h, i], R[i + h, i + h] = np.sin(a), np.cos(a)\n"),)),
    # ---- step 4: the pasted assignment-1 functions
    "softmax_no_max_subtraction": Mistake(
        "softmax without subtracting the maximum (overflows)", "test_from_assignment_1",
        "softmax overflows on large logits (e^1000 is inf): subtract each row's maximum first, as in assignment 1.",
        (Edit("from_assignment_1",
              "    shifted = x - np.max(x, axis=axis, keepdims=True)\n"
              "    exps = np.exp(shifted)\n",
              "    exps = np.exp(x)\n"),)),
    "mask_with_zero": Mistake(
        "blocked scores set to 0 instead of −inf", "test_from_assignment_1",
        ("Blocked keys still get weight: a score of 0 becomes e⁰ = 1 in the softmax. Blocked scores must be −inf "
         "before the softmax, as in assignment 1."),
        (Edit("from_assignment_1", "np.where(mask, scores, -np.inf)", "np.where(mask, scores, 0.0)"),)),
    # ---- step 5: unmasked self-attention
    "causal_mask_applied": Mistake(
        "a causal mask applied (assignment 1's causal self-attention)", "test_self_attention",
        ("The weights above the diagonal are 0: this self-attention has no mask (an encoder), every position "
         "attends to every position."),
        (Edit("self_attention", "x @ W_v)", "x @ W_v, mask=np.tril(np.ones((len(x), len(x)), dtype=bool)))"),)),
    "shared_projection": Mistake(
        "one projection W_q used for queries, keys and values", "test_self_attention",
        "Queries, keys and values come from three different projections: Q = x W_q, K = x W_k, V = x W_v.",
        (Edit("self_attention", "(x @ W_q, x @ W_k, x @ W_v)", "(x @ W_q, x @ W_q, x @ W_q)"),)),
    "not_scaled": Mistake(
        "scores not divided by √d_head (scale=False)", "test_self_attention",
        "The weights are too peaked: the scores must be divided by √d_head (scaled dot-product attention).",
        (Edit("self_attention", "x @ W_v)", "x @ W_v, scale=False)"),)),
    # ---- step 6: adding positions
    "positions_concatenated": Mistake(
        "encodings concatenated to the tokens instead of added", "test_add_positions",
        ("The result has 2·d_model columns: the Transformer adds the encoding to the token vector (same size "
         "d_model), it does not append it."),
        (Edit("add_positions",
              "return x + sinusoidal_positional_encoding(T, d_model)",
              "return np.concatenate([x, sinusoidal_positional_encoding(T, d_model)], axis=1)"),)),
    "encoding_arguments_swapped": Mistake(
        "the encoding built as (d_model, T) and transposed", "test_add_positions",
        ("The encoding added is not PE(T, d_model): check the order of the arguments (positions first) — "
         "transposing a (d_model, T) table is a different table."),
        (Edit("add_positions",
              "sinusoidal_positional_encoding(T, d_model)",
              "sinusoidal_positional_encoding(d_model, T).T"),)),
    "tokens_scaled_by_sqrt_d_model": Mistake(
        ("tokens multiplied by √d_model before adding (the paper's embedding "
         "scale)"), "test_add_positions",
        ("The tokens are rescaled: here x is used as it is (the √d_model factor of section 3.4 belongs to the "
         "embedding layer, not to adding positions)."),
        (Edit("add_positions", "return x + ", "return x * np.sqrt(d_model) + "),)),
    # ---- step 7: permutation equivariance
    "compares_with_unshuffled": Mistake(
        "shuffled outputs compared with the unshuffled outputs", "test_permutation_gap",
        ("Equivariance does not mean the outputs stay in place: after shuffling the tokens, compare with the "
         "original outputs shuffled the same way, output(x)[perm]."),
        (Edit("permutation_gap", "shuffled_output - output[perm]", "shuffled_output - output"),)),
    "inverse_permutation": Mistake(
        "original outputs shuffled by the inverse permutation", "test_permutation_gap",
        ("The outputs are reordered with the inverse permutation: row r of x[perm] is token perm[r], so it must be "
         "compared with output(x)[perm] (the same indexing as the input)."),
        (Edit("permutation_gap", "output[perm]", "output[np.argsort(perm)]"),)),
    "positions_travel_with_tokens": Mistake(
        "encodings added before shuffling, so each token keeps its old position", "test_permutation_gap",
        ("With positions the gap should not vanish: shuffle the tokens first and then add the encodings, so that "
         "position t always gets PE(t) whatever token sits there; encodings that move with their tokens carry no "
         "order."),
        (Edit("permutation_gap",
              "add_positions(z), add_positions(z_shuffled)",
              "add_positions(z), add_positions(z)[perm]"),)),
}

#: The grader's form of the mistakes (edited solution cells): what the spec, the report and the tests read.
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)
