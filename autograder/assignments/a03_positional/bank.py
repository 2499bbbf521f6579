"""Differently written answers to assignment 3 (sinusoidal positional encoding): correct ones and known mistakes.

Each variant replaces solution cells, keyed by the cell's nbgrader ``grade_id``;
cells it does not name keep the source notebook's solution. Every correct
variant must earn full marks; every mistake must lose points exactly on the
autograder cells in its ``breaks`` and be named there (see
:mod:`autograder.grader.spec`). Mistakes follow ``shared/notes/mistakes.md`` (M19 for
the encoding itself) plus slips met in this assignment's later steps.
"""

from __future__ import annotations

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
                                            "outputs", {
        "permutation_gap": '''
def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    encode = add_positions if positions else (lambda z: z)
    out, _ = self_attention(encode(x), W_q, W_k, W_v)
    out_shuffled, _ = self_attention(encode(np.take(x, perm, axis=0)), W_q, W_k, W_v)
    inverse = np.argsort(perm)
    return np.abs(out_shuffled[inverse] - out).max()
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


MISTAKES = {
    # ---- step 1: the encoding (M19)
    "sin_cos_swapped": Variant("cos in the even columns and sin in the odd ones", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(T)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = np.cos(angles)
    pe[:, 1::2] = np.sin(angles)
    return pe
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "Sine and cosine are swapped: in this spec (as in the paper) even columns 2i hold the sine and odd columns "
        "2i + 1 the cosine, so row 0 is (0, 1, 0, 1, …)."),
    "exponent_pair_index": Variant("exponent i/d_model with the pair index i, instead of 2i/d_model", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    i = np.arange(d_model // 2)
    angles = np.arange(T)[:, None] / 10000 ** (i / d_model)
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "The frequencies are off: pair i (columns 2i and 2i + 1) uses the exponent 2i/d_model, so the last pair "
        "turns 10000^((d_model − 2)/d_model) times slower than the first (100 times for d_model = 4, almost 10000 "
        "times only for large d_model). Check what your exponent is for the last pair."),
    "exponent_column_index": Variant("each column j uses the exponent j/d_model, so a cosine has a different "
                                     "frequency from its sine partner", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    pe = np.zeros((T, d_model))
    t = np.arange(T)
    for j in range(d_model):
        angle = t / 10000 ** (j / d_model)
        pe[:, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return pe
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "The cosine columns do not share their sine partner's frequency: columns 2i and 2i + 1 both use the exponent "
        "2i/d_model (the index of the even column), which is what makes each pair a point on a circle."),
    "base_1000": Variant("base 1000 instead of 10000", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(T)[:, None] / 1000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "The slowest frequencies are too fast: the base of the wavelengths is 10000 (section 3.5), not 1000."),
    "concatenated_halves": Variant("all sines in the first half of the columns, all cosines in the second", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(T)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "Sines and cosines are concatenated in two halves. That is a valid convention (tensor2tensor uses it) but "
        "not this assignment's: here they are interleaved, sine in column 2i and cosine in column 2i + 1."),
    "positions_from_one": Variant("positions counted 1 … T instead of 0 … T−1", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(1, T + 1)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "Every row is shifted by one position: positions start at t = 0, whose encoding is (0, 1, 0, 1, …)."),
    "multiplies_by_wavelength": Variant("t multiplied by 10000^(2i/d_model) instead of divided", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    angles = np.arange(T)[:, None] * 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "The later pairs turn faster instead of slower: the angle is t divided by 10000^(2i/d_model) "
        "(a frequency below 1), not multiplied by it."),
    "odd_d_model_accepted": Variant("odd d_model silently accepted (a last sine column without its cosine)", {
        "sinusoidal_positional_encoding": '''
def sinusoidal_positional_encoding(T, d_model):
    angles = np.arange(T)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return pe
''',
    }, frozenset({"test_sinusoidal_positional_encoding"}),
        "An odd d_model must raise ValueError: the columns come in sin/cos pairs, and a lone sine column would "
        "break the rotation property you use later."),
    # ---- step 2: dot products by offset
    "offsets_from_position_zero": Variant("t ignored: dot products of PE(0) with PE(k)", {
        "dot_product_by_offset": '''
def dot_product_by_offset(pe, t):
    T = pe.shape[0]
    return pe[: T - t] @ pe[0]
''',
    }, frozenset({"test_dot_product_by_offset"}),
        "The result does not depend on t: for sinusoidal encodings that happens to be true, but the function must "
        "compare position t with positions t + k for any encoding (learned ones too)."),
    "cosine_similarity": Variant("normalised dot products (cosine similarity)", {
        "dot_product_by_offset": '''
def dot_product_by_offset(pe, t):
    rows = pe[t:]
    return rows @ pe[t] / (np.linalg.norm(rows, axis=1) * np.linalg.norm(pe[t]))
''',
    }, frozenset({"test_dot_product_by_offset"}),
        "The values are divided by the vector lengths (cosine similarity); the step asks for plain dot products, "
        "which equal d_model / 2 at k = 0 for sinusoidal encodings."),
    "skips_offset_zero": Variant("offsets start at k = 1 (PE(t)·PE(t) left out)", {
        "dot_product_by_offset": '''
def dot_product_by_offset(pe, t):
    return pe[t + 1:] @ pe[t]
''',
    }, frozenset({"test_dot_product_by_offset"}),
        "Offset k = 0 is missing: the result runs over k = 0 … T − 1 − t, so it has T − t entries and starts "
        "with PE(t)·PE(t)."),
    # ---- step 3: the rotation
    "rotation_sine_sign_flipped": Variant("sine signs flipped in each block (R_k transposed, i.e. R_{−k})", {
        "offset_rotation": '''
def offset_rotation(k, d_model):
    i = np.arange(d_model // 2)
    angles = k / 10000 ** (2 * i / d_model)
    R = np.zeros((d_model, d_model))
    for j, a in enumerate(angles):
        R[2 * j:2 * j + 2, 2 * j:2 * j + 2] = [[np.cos(a), np.sin(a)], [-np.sin(a), np.cos(a)]]
    return R
''',
    }, frozenset({"test_offset_rotation"}),
        "Your matrix moves the encodings k positions back instead of forward (it is the transpose of R_k). The "
        "encoding is a row vector multiplied on the left, PE(t) @ R_k: write out sin(a + b) and cos(a + b) and read "
        "off which entry of the block multiplies the sine and which the cosine."),
    "rotation_forgets_k": Variant("rotation angle ω_i instead of k·ω_i", {
        "offset_rotation": '''
def offset_rotation(k, d_model):
    i = np.arange(d_model // 2)
    angles = 1 / 10000 ** (2 * i / d_model)
    R = np.zeros((d_model, d_model))
    for j, a in enumerate(angles):
        R[2 * j:2 * j + 2, 2 * j:2 * j + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    return R
''',
    }, frozenset({"test_offset_rotation"}),
        "The matrix moves one position for every k: each pair must turn by the angle k·ω_i."),
    "rotation_sin_cos_swapped": Variant("sin on the diagonal of each block and cos off it", {
        "offset_rotation": '''
def offset_rotation(k, d_model):
    i = np.arange(d_model // 2)
    angles = k / 10000 ** (2 * i / d_model)
    R = np.zeros((d_model, d_model))
    for j, a in enumerate(angles):
        R[2 * j:2 * j + 2, 2 * j:2 * j + 2] = [[np.sin(a), -np.cos(a)], [np.cos(a), np.sin(a)]]
    return R
''',
    }, frozenset({"test_offset_rotation"}),
        "The blocks are not rotations by k·ω_i: with k = 0 the matrix must be the identity, so the cosines go on "
        "the diagonal of each 2×2 block."),
    "rotation_halves_layout": Variant("each pair's block placed on columns (i, i + d_model/2), the concatenated "
                                      "layout", {
        "offset_rotation": '''
def offset_rotation(k, d_model):
    h = d_model // 2
    angles = k / 10000 ** (2 * np.arange(h) / d_model)
    R = np.zeros((d_model, d_model))
    for i, a in enumerate(angles):
        R[i, i], R[i, i + h] = np.cos(a), -np.sin(a)
        R[i + h, i], R[i + h, i + h] = np.sin(a), np.cos(a)
    return R
''',
    }, frozenset({"test_offset_rotation"}),
        "The 2×2 blocks sit on columns (i, i + d_model/2), the layout of concatenated halves; in this assignment the "
        "sine and cosine of pair i are the neighbouring columns 2i and 2i + 1, so R_k is block diagonal."),
    # ---- step 4: the pasted assignment-1 functions
    "softmax_no_max_subtraction": Variant("softmax without subtracting the maximum (overflows)", {
        "from_assignment_1": '''
def softmax(x, axis=-1):
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)

def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = Q @ np.swapaxes(K, -1, -2)
    if scale:
        scores = scores / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores)
    return weights @ V, weights
''',
    }, frozenset({"test_from_assignment_1"}),
        "softmax overflows on large logits (e^1000 is inf): subtract each row's maximum first, as in assignment 1."),
    "mask_with_zero": Variant("blocked scores set to 0 instead of −inf", {
        "from_assignment_1": '''
def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)

def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = Q @ np.swapaxes(K, -1, -2)
    if scale:
        scores = scores / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, 0.0)
    weights = softmax(scores)
    return weights @ V, weights
''',
    }, frozenset({"test_from_assignment_1"}),
        "Blocked keys still get weight: a score of 0 becomes e⁰ = 1 in the softmax. Blocked scores must be −inf "
        "before the softmax, as in assignment 1."),
    # ---- step 5: unmasked self-attention
    "causal_mask_applied": Variant("a causal mask applied (assignment 1's causal self-attention)", {
        "self_attention": '''
def self_attention(x, W_q, W_k, W_v):
    T = x.shape[0]
    mask = np.tril(np.ones((T, T), dtype=bool))
    return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, mask=mask)
''',
    }, frozenset({"test_self_attention"}),
        "The weights above the diagonal are 0: this self-attention has no mask (an encoder), every position "
        "attends to every position."),
    "shared_projection": Variant("one projection W_q used for queries, keys and values", {
        "self_attention": '''
def self_attention(x, W_q, W_k, W_v):
    Q = K = V = x @ W_q
    return scaled_dot_product_attention(Q, K, V)
''',
    }, frozenset({"test_self_attention"}),
        "Queries, keys and values come from three different projections: Q = x W_q, K = x W_k, V = x W_v."),
    "not_scaled": Variant("scores not divided by √d_head (scale=False)", {
        "self_attention": '''
def self_attention(x, W_q, W_k, W_v):
    return scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, scale=False)
''',
    }, frozenset({"test_self_attention"}),
        "The weights are too peaked: the scores must be divided by √d_head (scaled dot-product attention)."),
    # ---- step 6: adding positions
    "positions_concatenated": Variant("encodings concatenated to the tokens instead of added", {
        "add_positions": '''
def add_positions(x):
    return np.concatenate([x, sinusoidal_positional_encoding(*x.shape)], axis=1)
''',
    }, frozenset({"test_add_positions"}),
        "The result has 2·d_model columns: the Transformer adds the encoding to the token vector (same size "
        "d_model), it does not append it."),
    "encoding_arguments_swapped": Variant("the encoding built as (d_model, T) and transposed", {
        "add_positions": '''
def add_positions(x):
    T, d_model = x.shape
    return x + sinusoidal_positional_encoding(d_model, T).T
''',
    }, frozenset({"test_add_positions"}),
        "The encoding added is not PE(T, d_model): check the order of the arguments (positions first) — "
        "transposing a (d_model, T) table is a different table."),
    "tokens_scaled_by_sqrt_d_model": Variant("tokens multiplied by √d_model before adding (the paper's embedding "
                                             "scale)", {
        "add_positions": '''
def add_positions(x):
    T, d_model = x.shape
    return x * np.sqrt(d_model) + sinusoidal_positional_encoding(T, d_model)
''',
    }, frozenset({"test_add_positions"}),
        "The tokens are rescaled: here x is used as it is (the √d_model factor of section 3.4 belongs to the "
        "embedding layer, not to adding positions)."),
    # ---- step 7: permutation equivariance
    "compares_with_unshuffled": Variant("shuffled outputs compared with the unshuffled outputs", {
        "permutation_gap": '''
def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    encode = add_positions if positions else (lambda z: z)
    out, _ = self_attention(encode(x), W_q, W_k, W_v)
    out_shuffled, _ = self_attention(encode(x[perm]), W_q, W_k, W_v)
    return float(np.max(np.abs(out_shuffled - out)))
''',
    }, frozenset({"test_permutation_gap"}),
        "Equivariance does not mean the outputs stay in place: after shuffling the tokens, compare with the "
        "original outputs shuffled the same way, output(x)[perm]."),
    "inverse_permutation": Variant("original outputs shuffled by the inverse permutation", {
        "permutation_gap": '''
def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    encode = add_positions if positions else (lambda z: z)
    out, _ = self_attention(encode(x), W_q, W_k, W_v)
    out_shuffled, _ = self_attention(encode(x[perm]), W_q, W_k, W_v)
    return float(np.max(np.abs(out_shuffled - out[np.argsort(perm)])))
''',
    }, frozenset({"test_permutation_gap"}),
        "The outputs are reordered with the inverse permutation: row r of x[perm] is token perm[r], so it must be "
        "compared with output(x)[perm] (the same indexing as the input)."),
    "positions_travel_with_tokens": Variant("encodings added before shuffling, so each token keeps its old position", {
        "permutation_gap": '''
def permutation_gap(x, W_q, W_k, W_v, perm, positions=False):
    z = add_positions(x) if positions else x
    out, _ = self_attention(z, W_q, W_k, W_v)
    out_shuffled, _ = self_attention(z[perm], W_q, W_k, W_v)
    return float(np.max(np.abs(out_shuffled - out[perm])))
''',
    }, frozenset({"test_permutation_gap"}),
        "With positions the gap should not vanish: shuffle the tokens first and then add the encodings, so that "
        "position t always gets PE(t) whatever token sits there; encodings that move with their tokens carry no "
        "order."),
}
