"""Answer bank of assignment 9 (the tiny-GPT capstone): solution, variants, hidden cases.

See DESIGN.md next to this file for the model, its conventions and what each case, variant and mistake is for.

* ``SOLUTION`` — the source notebook's solution cells (grade_id → source; the grade_ids of the
  solution cells are the function names, the test cells are ``STEPS``); the first cell,
  ``from_earlier_assignments``, holds what the learner pastes from assignments 1 and 5.
* ``CORRECT`` — differently written correct answers (cell replacements, :class:`Variant`), among them
  the way public code writes them (nanoGPT's fused projection and ``masked_fill``, GPT-2's ``gelu_new``,
  einsum, float32 LayerNorm and GELU).
* ``KNOWN_MISTAKES`` — known mistakes as exact edits of ``SOLUTION`` (:class:`Mistake`);
  ``MISTAKES`` holds the edited cells the grader uses.
* :func:`hidden_cases` — the hidden cases per step, on the committed weights where a step takes them,
  which the spec hands the grader, and ``REFERENCE``, the functions that give their expected results.

Hidden generation cases are few and short (two, prompts of at most 5 tokens, 4 new tokens): each step is graded with
stand-ins for the earlier functions it calls (:mod:`autograder.grader.stand_ins`), and a decoding chain needs
one stand-in pass per call that depends on an earlier stand-in's answer (two per generated token, one per
prompt token fed alone), which must stay within ``stand_ins.MAX_PASSES``; every greedy step keeps a top-2
logit margin far above 1e-6 and every uniform number stays away from the CDF's boundaries
(``tests/test_tiny_gpt_assignment.py``).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from attention_lab.core import values as wire

from autograder.grader.bank import Edit, Mistake, source_solution, variants
from autograder.grader.spec import Case, Variant

from autograder.assignments.a01_attention import reference as attention
from autograder.assignments.a05_kv_cache import reference as kv_cache

from . import model
from . import reference as ref

#: Test cells in notebook order: grade_id → (what it grades, points).
STEPS = {
    "test_from_earlier_assignments": ("your functions from assignments 1 and 5", 1),
    "test_layer_norm": ("layer_norm: biased variance, ε inside the root", 1),
    "test_gelu": ("gelu: the tanh form", 1),
    "test_mlp": ("mlp: gelu(x W_1 + b_1) W_2 + b_2", 1),
    "test_causal_attention": ("causal_attention: heads, the KV cache, the bottom-right mask", 2),
    "test_decoder_block": ("decoder_block: pre-LN with residual connections", 2),
    "test_model_forward": ("model_forward: embeddings at the right positions, blocks, LN_f, W_out", 2),
    "test_next_token": ("next_token: greedy and inverse-CDF sampling in token-id order", 1),
    "test_generate": ("generate: exact tokens, greedy and sampled, with and without the cache", 2),
}

#: What the learner's functions receive as ``config`` (the committed model's).
LEARNER_CONFIG = {"vocab_size": 20, "block_size": 32, "n_heads": 2, "n_layers": 2, "ln_eps": 1e-5}

REFERENCE = {
    "softmax": attention.softmax,
    "scaled_dot_product_attention": attention.scaled_dot_product_attention,
    "causal_mask": kv_cache.causal_mask,
    **ref.REFERENCE,
}

# ------------------------------------------------------------------ solution
#: The source notebook's solution cells (grade_id → source), read from source/09_tiny_gpt/, never a copy.
SOLUTION = source_solution(__name__)

# ------------------------------------------------------------------ correct variants
CORRECT = {
    "np_var_layer_norm": Variant("LayerNorm with np.var (ddof=0, NumPy's default) and np.mean", {"layer_norm": '''
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=float)
    centred = x - np.mean(x, axis=-1, keepdims=True)
    return gain * centred / np.sqrt(np.var(x, axis=-1, keepdims=True) + eps) + bias
'''}),
    "mean_of_squares": Variant("LayerNorm's variance as mean(x²) − mean(x)², one reciprocal", {"layer_norm": '''
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=float)
    mu = x.mean(axis=-1, keepdims=True)
    var = (x * x).mean(axis=-1, keepdims=True) - mu * mu
    return (x - mu) * (1.0 / np.sqrt(var + eps)) * gain + bias
'''}),
    "float32_layer_norm_and_gelu": Variant("LayerNorm and GELU in float32, as frameworks run them (within the tolerance)", {
        "layer_norm": '''
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=np.float32)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + np.float32(eps))) * np.float32(gain) + np.float32(bias)
''',
        "gelu": '''
def gelu(x):
    x = np.asarray(x, dtype=np.float32)
    c = np.float32(np.sqrt(2.0 / np.pi))
    return np.float32(0.5) * x * (1 + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))
'''}),
    "gpt2_gelu_new": Variant("GELU as GPT-2's gelu / Hugging Face's gelu_new: math constants and np.power", {"gelu": '''
import math


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * np.power(x, 3.0))))
'''}),
    "heads_one_at_a_time": Variant("attention head by head on column slices of the projections, caches stacked", {
        "causal_attention": '''
def causal_attention(h, W_q, W_k, W_v, W_o, n_heads, cache=None):
    d_head = W_q.shape[1] // n_heads
    outputs, Ks, Vs = [], [], []
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        k, v = h @ W_k[:, cols], h @ W_v[:, cols]
        if cache is not None:
            k, v = np.vstack([cache[0][i], k]), np.vstack([cache[1][i], v])
        out, _ = scaled_dot_product_attention(h @ W_q[:, cols], k, v, mask=causal_mask(len(h), len(k)))
        outputs.append(out)
        Ks.append(k)
        Vs.append(v)
    return np.hstack(outputs) @ W_o, (np.stack(Ks), np.stack(Vs))
'''}),
    "einsum_and_big_negative": Variant("attention with einsum, −1e9 for the blocked scores and W_o applied as a sum over "
                                       "heads of each head times its rows of W_o", {"causal_attention": '''
def causal_attention(h, W_q, W_k, W_v, W_o, n_heads, cache=None):
    T_new, d_model = h.shape
    d = d_model // n_heads
    Q = np.einsum("td,dhe->hte", h, W_q.reshape(d_model, n_heads, d))
    K = np.einsum("td,dhe->hte", h, W_k.reshape(d_model, n_heads, d))
    V = np.einsum("td,dhe->hte", h, W_v.reshape(d_model, n_heads, d))
    if cache is not None:
        K, V = np.concatenate([cache[0], K], axis=1), np.concatenate([cache[1], V], axis=1)
    T_k = K.shape[1]
    scores = np.einsum("hqe,hke->hqk", Q, K) / np.sqrt(d)
    allowed = np.arange(T_k)[None, :] <= np.arange(T_k - T_new, T_k)[:, None]
    scores = np.where(allowed, scores, -1e9)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    heads = np.einsum("hqk,hke->hqe", w, V)
    return sum(heads[i] @ W_o[i * d:(i + 1) * d] for i in range(n_heads)), (K, V)
'''}),
    "nanogpt_attention": Variant(
        "nanoGPT's CausalSelfAttention in NumPy: one fused (d, 3d) projection split into q, k, v, a tril 'bias' "
        "buffer of block_size sliced at the new positions, masked_fill with −inf, y.transpose().reshape()", {
            "causal_attention": '''
import math


def causal_attention(h, W_q, W_k, W_v, W_o, n_heads, cache=None):
    T, C = h.shape
    q, k, v = np.split(h @ np.concatenate([W_q, W_k, W_v], axis=1), 3, axis=1)
    k = k.reshape(T, n_heads, C // n_heads).transpose(1, 0, 2)
    q = q.reshape(T, n_heads, C // n_heads).transpose(1, 0, 2)
    v = v.reshape(T, n_heads, C // n_heads).transpose(1, 0, 2)
    if cache is not None:
        past_k, past_v = cache
        k, v = np.concatenate((past_k, k), axis=-2), np.concatenate((past_v, v), axis=-2)
    T_all = k.shape[-2]
    bias = np.tril(np.ones((T_all, T_all)))
    att = (q @ k.swapaxes(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
    att = np.where(bias[T_all - T:T_all, :T_all] == 0, float("-inf"), att)
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att = att / att.sum(axis=-1, keepdims=True)
    y = (att @ v).transpose(1, 0, 2).reshape(T, C)
    return y @ W_o, (k, v)
'''}),
    "block_as_loop_over_sublayers": Variant("decoder block as a loop over its two pre-LN sublayers", {"decoder_block": '''
def decoder_block(x, params, layer, n_heads, eps=1e-5, cache=None):
    p = f"block{layer}."
    new_cache = cache

    def attention_sublayer(h):
        nonlocal new_cache
        out, new_cache = causal_attention(h, params[p + "W_q"], params[p + "W_k"], params[p + "W_v"],
                                          params[p + "W_o"], n_heads, cache)
        return out

    def mlp_sublayer(h):
        return mlp(h, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"])

    for norm, sublayer in (("ln1", attention_sublayer), ("ln2", mlp_sublayer)):
        x = x + sublayer(layer_norm(x, params[p + norm + ".gain"], params[p + norm + ".bias"], eps))
    return x, new_cache
'''}),
    "one_hot_embedding": Variant("embeddings as one-hot rows times W_emb, positions from np.arange, caches in a list "
                                 "filled in place", {"model_forward": '''
def model_forward(params, tokens, config, caches=None):
    tokens = np.asarray(tokens)
    start = 0 if caches is None else caches[0][0].shape[1]
    one_hot = np.eye(params["W_emb"].shape[0])[tokens]
    x = one_hot @ params["W_emb"] + params["W_pos"][np.arange(start, start + tokens.size)]
    caches = [None] * config["n_layers"] if caches is None else list(caches)
    for layer in range(config["n_layers"]):
        x, caches[layer] = decoder_block(x, params, layer, config["n_heads"], config["ln_eps"], caches[layer])
    logits = layer_norm(x, params["ln_f.gain"], params["ln_f.bias"], config["ln_eps"]) @ params["W_out"]
    return logits, caches
'''}),
    "sampling_by_running_sum": Variant("inverse CDF with an explicit running sum; greedy with a loop", {"next_token": '''
def next_token(logits, temperature=None, u=None):
    logits = [float(v) for v in logits]
    if temperature is None:
        best = 0
        for i, v in enumerate(logits):
            if v > logits[best]:
                best = i
        return best
    top = max(logits)
    weights = [np.exp((v - top) / temperature) for v in logits]
    total = sum(weights)
    running = 0.0
    for i, w in enumerate(weights):
        running += w / total
        if u < running:
            return i
    return len(weights) - 1
'''}),
    "log_softmax_sampling": Variant("probabilities from a log-softmax; the first index with u < cdf by np.argmax",
                                    {"next_token": '''
def next_token(logits, temperature=None, u=None):
    logits = np.asarray(logits, dtype=float)
    if temperature is None:
        return int(logits.argmax())
    z = (logits - logits.max()) / temperature
    log_p = z - np.log(np.sum(np.exp(z)))
    cdf = np.cumsum(np.exp(log_p))
    above = u < cdf
    return int(np.argmax(above)) if above.any() else len(cdf) - 1
'''}),
    "prefill_token_by_token": Variant("with the cache, the prompt is fed one token at a time before generating; an "
                                      "array is filled in place", {"generate": '''
def generate(params, config, prompt, n_new, temperature=None, uniforms=None, use_cache=True):
    out = np.zeros(len(prompt) + n_new, dtype=np.int64)
    out[:len(prompt)] = prompt
    caches, logits = None, None
    if use_cache and n_new > 0:
        for t in range(len(prompt)):
            logits, caches = model_forward(params, out[t:t + 1], config, caches)
    for k in range(n_new):
        end = len(prompt) + k
        if not use_cache:
            logits, _ = model_forward(params, out[:end], config)
        elif k > 0:
            logits, caches = model_forward(params, out[end - 1:end], config, caches)
        out[end] = next_token(logits[-1], temperature, None if uniforms is None else uniforms[k])
    return out
'''}),
}

# ------------------------------------------------------------------ known mistakes
_EA, _LN, _GE, _ML, _CA = "from_earlier_assignments", "layer_norm", "gelu", "mlp", "causal_attention"
#: Why the sampler needs the notebook's rule for u ≥ c_{V−1} (the hints of the two mistakes that lack it).
_ROUNDING = ("Rounding can end the cumulative sum just below 1 (ten probabilities of 0.1 add up to "
             "0.9999999999999999), and u can be as large as that: then no entry is above u and the rule says")
_DB, _MF, _NT, _GN = "decoder_block", "model_forward", "next_token", "generate"
_TANH = "    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))"

KNOWN_MISTAKES = {
    # ---- from_earlier_assignments: the pasted functions (each graded in its own assignment; here once, in step 0)
    "mask_with_zero": Mistake(
        "blocked scores set to 0 instead of −inf", "test_from_earlier_assignments",
        "A blocked score of 0 still gets weight e⁰ = 1 after the softmax. Blocked scores must become −∞ (or a very "
        "large negative number) before the softmax, so that they get weight exactly 0 (assignment 1).",
        (Edit(_EA, "np.where(mask, scores, -np.inf)", "np.where(mask, scores, 0.0)"),)),
    "no_max_subtraction": Mistake(
        "softmax without subtracting the maximum", "test_from_earlier_assignments",
        "exp overflows to inf for logits above about 709 (float64), and inf / inf is NaN. Softmax does not change "
        "when the same number is subtracted from every logit: subtract the row's maximum (assignment 1).",
        (Edit(_EA, "e = np.exp(x - np.max(x, axis=axis, keepdims=True))", "e = np.exp(x)"),)),
    "earlier_mask_top_left": Mistake(
        "causal mask aligned top-left (j ≤ i) instead of bottom-right", "test_from_earlier_assignments",
        "With fewer queries than keys the queries are the last T_q positions: query i sits at position "
        "i + T_k − T_q, so the triangle belongs in the bottom-right corner (assignment 5).",
        (Edit(_EA, "np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)", "np.tril(np.ones((T_q, T_k), dtype=bool))"),),
        evidence="pytorch/pytorch#108108"),

    # ---- layer_norm
    "ln_unbiased_variance": Mistake(
        "LayerNorm with the unbiased variance (÷ (d − 1)), as x.std(-1) in the Annotated Transformer", "test_layer_norm",
        "LayerNorm divides by d, not d − 1 (the biased variance, as torch.nn.LayerNorm and this checkpoint): with "
        "d − 1 every normalised value is √((d − 1)/d) too small.",
        (Edit(_LN, "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)", "var = x.var(axis=-1, ddof=1, keepdims=True)"),)),
    "ln_eps_outside_root": Mistake(
        "ε added to the standard deviation instead of inside the square root (the Annotated Transformer's form)",
        "test_layer_norm",
        "This checkpoint (like torch.nn.LayerNorm) divides by √(σ² + ε). Adding ε to σ instead is almost the same for "
        "large σ but not for nearly constant rows, whose σ is below √ε.",
        (Edit(_LN, "(x - mean) / np.sqrt(var + eps)", "(x - mean) / (np.sqrt(var) + eps)"),)),
    "ln_no_gain_bias": Mistake(
        "LayerNorm without its learned gain and bias", "test_layer_norm",
        "After normalising, LayerNorm scales by its learned gain and adds its bias, per feature.",
        (Edit(_LN, "return normalised * gain + bias", "return normalised"),)),
    "ln_over_positions": Mistake(
        "mean and variance over the positions (axis 0) instead of over each token's features", "test_layer_norm",
        "LayerNorm normalises each token on its own, over its d_model features (the last axis); averaging over "
        "positions mixes tokens (and would let a token see the future).",
        (Edit(_LN, "mean = x.mean(axis=-1, keepdims=True)", "mean = x.mean(axis=0, keepdims=True)"),
         Edit(_LN, "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
              "var = ((x - mean) ** 2).mean(axis=0, keepdims=True)"))),

    # ---- gelu
    "gelu_erf": Mistake(
        "the exact GELU ½ x (1 + erf(x/√2)) (torch.nn.GELU's default, nanoGPT) instead of the checkpoint's tanh form",
        "test_gelu",
        "This model was trained with GPT-2's tanh approximation of GELU. The exact erf form differs by up to 4.7e-4 "
        "(at x ≈ ±2.7), which moves this model's logits by up to 4e-3: use the tanh form given in the text.",
        (Edit(_GE, _TANH, "    import math\n    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))"),)),
    "gelu_relu": Mistake(
        "ReLU instead of GELU", "test_gelu",
        "GELU is smooth and slightly negative for negative inputs (GELU(−1) ≈ −0.159); ReLU is 0 there.",
        (Edit(_GE, _TANH, "    return np.maximum(x, 0.0)"),)),
    "gelu_no_cubic": Mistake(
        "the tanh form without the 0.044715 x³ term", "test_gelu",
        "The tanh approximation's argument is √(2/π) (x + 0.044715 x³): the cubic term is part of it.",
        (Edit(_GE, "(x + 0.044715 * x ** 3)", "x"),)),
    "gelu_quick": Mistake(
        "x · sigmoid(1.702 x) (CLIP's 'quick GELU') instead of the tanh form", "test_gelu",
        "x·σ(1.702x) is another approximation of GELU (up to 0.02 away); this model uses the tanh form.",
        (Edit(_GE, _TANH, "    return x / (1.0 + np.exp(-1.702 * x))"),)),

    # ---- mlp
    "mlp_no_activation": Mistake(
        "the MLP without its non-linearity", "test_mlp",
        "Without GELU between them the two linear layers collapse into one; apply GELU to the hidden layer.",
        (Edit(_ML, "return gelu(x @ W_1 + b_1) @ W_2 + b_2", "return (x @ W_1 + b_1) @ W_2 + b_2"),)),

    # ---- causal_attention
    "attn_top_left_mask": Mistake(
        "causal mask aligned top-left: a new token over a cache sees only the first keys", "test_causal_attention",
        "With a cache the new queries are the *last* positions: query i sits at T_past + i and may see keys "
        "0 … T_past + i. Align the causal mask bottom-right (assignment 5).",
        (Edit(_CA, "mask = causal_mask(Q.shape[1], K.shape[1])",
              "mask = np.tril(np.ones((Q.shape[1], K.shape[1]), dtype=bool))"),), evidence="pytorch/pytorch#108108"),
    "attn_no_mask": Mistake(
        "no causal mask: every position sees the future", "test_causal_attention",
        "A decoder predicts the next token, so position t may only attend to positions ≤ t: pass the causal mask.",
        (Edit(_CA, "scaled_dot_product_attention(Q, K, V, mask=mask)", "scaled_dot_product_attention(Q, K, V, mask=None)"),)),
    "attn_cache_on_head_axis": Mistake(
        "the cache concatenated on the head axis (0) instead of the position axis (1)", "test_causal_attention",
        "A layer's cache has shape (n_heads, T_past, d_head): new keys and values are appended along the positions, "
        "axis 1.",
        (Edit(_CA, "K = np.concatenate([cache[0], K], axis=1)", "K = np.concatenate([cache[0], K], axis=0)"),
         Edit(_CA, "V = np.concatenate([cache[1], V], axis=1)", "V = np.concatenate([cache[1], V], axis=0)"))),
    "attn_no_output_projection": Mistake(
        "the merged heads returned without the output projection W_o", "test_causal_attention",
        "As in assignment 2, the merged heads (T, n_heads · d_head) are multiplied by W_o (Vaswani et al. 2017, "
        "§3.2.2).",
        (Edit(_CA, "reshape(T_new, d_model) @ W_o, (K, V)", "reshape(T_new, d_model), (K, V)"),)),

    # ---- decoder_block
    "block_post_ln": Mistake(
        "post-LN (the original Transformer: LayerNorm after each residual addition) instead of pre-LN",
        "test_decoder_block",
        "This model is pre-LN (GPT-2): each sublayer reads LayerNorm(x) and its output is added to x, which itself is "
        "never normalised inside the block. Post-LN (Vaswani et al. 2017) normalises after the addition; these "
        "weights were not trained that way.",
        (Edit(_DB, 'h = layer_norm(x, params[p + "ln1.gain"], params[p + "ln1.bias"], eps)\n    ', ""),
         Edit(_DB, 'attended, cache = causal_attention(h,', 'attended, cache = causal_attention(x,'),
         Edit(_DB, "x = x + attended\n", 'x = layer_norm(x + attended, params[p + "ln1.gain"], params[p + "ln1.bias"], eps)\n'),
         Edit(_DB, 'h = layer_norm(x, params[p + "ln2.gain"], params[p + "ln2.bias"], eps)\n    ', ""),
         Edit(_DB, 'x = x + mlp(h, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"])',
              'x = layer_norm(x + mlp(x, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"]),\n'
              '                   params[p + "ln2.gain"], params[p + "ln2.bias"], eps)'))),
    "block_no_attention_residual": Mistake(
        "the attention's output replaces x instead of being added to it", "test_decoder_block",
        "Each sublayer's output is added to its input (the residual connection): x = x + attention(LN(x)).",
        (Edit(_DB, "x = x + attended", "x = attended"),)),
    "block_ln1_twice": Mistake(
        "the first LayerNorm's gain and bias used before the MLP too", "test_decoder_block",
        "Each sublayer has its own LayerNorm: ln1 before attention, ln2 before the MLP.",
        (Edit(_DB, 'params[p + "ln2.gain"], params[p + "ln2.bias"]', 'params[p + "ln1.gain"], params[p + "ln1.bias"]'),)),

    # ---- model_forward
    "forward_positions_restart": Mistake(
        "with a cache, the new tokens get positions 0, 1, … instead of T_past, T_past + 1, …", "test_model_forward",
        "A token's position is its index in the whole sequence: after T_past cached tokens the new ones sit at "
        "T_past, T_past + 1, … Without a cache both agree, which is why this only shows in decoding.",
        (Edit(_MF, 'params["W_pos"][T_past:T_past + len(tokens)]', 'params["W_pos"][:len(tokens)]'),),
        evidence="huggingface/transformers#15751"),
    "forward_no_final_ln": Mistake(
        "no final LayerNorm before the output head", "test_model_forward",
        "Pre-LN models end with one more LayerNorm (ln_f) before the output head: the residual stream itself is never "
        "normalised inside the blocks.",
        (Edit(_MF, '    x = layer_norm(x, params["ln_f.gain"], params["ln_f.bias"], config["ln_eps"])\n', ""),)),
    "forward_tied_head": Mistake(
        "the output head tied to the embeddings (W_embᵀ, as GPT-2 and nanoGPT) although this checkpoint has its own "
        "W_out", "test_model_forward",
        "GPT-2 ties its output head to the token embeddings, but this model was trained with a separate W_out: use it.",
        (Edit(_MF, 'return x @ params["W_out"], new_caches', 'return x @ params["W_emb"].T, new_caches'),)),
    "forward_caches_not_passed": Mistake(
        "the layers' caches are not passed on: the new tokens attend only to themselves", "test_model_forward",
        "Each layer must receive its own cache (caches[layer]) so that the new tokens can attend to the earlier ones.",
        (Edit(_MF, "None if caches is None else caches[layer])", "None)"),)),

    # ---- next_token
    "sample_temperature_multiplied": Mistake(
        "the logits multiplied by the temperature instead of divided", "test_next_token",
        "Temperature divides the logits: τ < 1 sharpens the distribution, τ > 1 flattens it.",
        (Edit(_NT, "z = logits / temperature", "z = logits * temperature"),)),
    "sample_unnormalised": Mistake(
        "the CDF of unnormalised exponentials: the cumulative sum does not end at 1", "test_next_token",
        "Normalise the exponentials into probabilities before the cumulative sum, so that it ends at 1.",
        (Edit(_NT, "    p = p / p.sum()\n", ""),)),
    "sample_rank_not_id": Mistake(
        "the CDF over the probabilities sorted from the largest (top-k / top-p code), returning the rank instead of "
        "the token id", "test_next_token",
        "The rule is the cumulative sum in token-id order 0, 1, … and the token returned is an id. Code written for "
        "top-k or top-p sorts first (and maps back through the sort); here the order is fixed.",
        (Edit(_NT, "cdf = np.cumsum(p)", "cdf = np.cumsum(np.sort(p)[::-1])"),)),
    "sample_sorted_mapped_back": Mistake(
        "the CDF over the probabilities sorted from the largest (top-k / top-p code), mapped back to the token id",
        "test_next_token",
        "A valid sampler, but not this one: the rule is the cumulative sum in token-id order 0, 1, …, so that the "
        "same u picks the same token everywhere (the grader, the visual, another learner's code). Do not sort.",
        (Edit(_NT, "    cdf = np.cumsum(p)\n    return int(min(np.searchsorted(cdf, u, side=\"right\"), len(p) - 1))\n",
              "    order = np.argsort(-p, kind=\"stable\")\n    cdf = np.cumsum(p[order])\n"
              "    return int(order[min(np.searchsorted(cdf, u, side=\"right\"), len(p) - 1)])\n"),)),
    "sample_argmax_without_guard": Mistake(
        "the first index with u < cdf by np.argmax, without the rule for u ≥ the CDF's last entry: token 0 when "
        "rounding leaves the cumulative sum just below 1", "test_next_token",
        "np.argmax of an all-False comparison is 0. " + _ROUNDING + " the last token.",
        (Edit(_NT, 'return int(min(np.searchsorted(cdf, u, side="right"), len(p) - 1))',
              "return int(np.argmax(cdf > u))"),)),
    "sample_index_past_the_end": Mistake(
        "np.searchsorted without the rule for u ≥ the CDF's last entry: index V, past the last token, when rounding "
        "leaves the cumulative sum just below 1", "test_next_token",
        "np.searchsorted returns len(cdf) when u is not below any entry. " + _ROUNDING + " the last token, V − 1.",
        (Edit(_NT, 'return int(min(np.searchsorted(cdf, u, side="right"), len(p) - 1))',
              'return int(np.searchsorted(cdf, u, side="right"))'),)),
    "greedy_argmin": Mistake(
        "greedy picks the smallest logit (np.argmin)", "test_next_token",
        "Greedy decoding takes the most likely token: the index of the largest logit.",
        (Edit(_NT, "return int(np.argmax(logits))", "return int(np.argmin(logits))"),)),

    # ---- generate
    "generate_cache_not_kept": Mistake(
        "the returned caches are thrown away: every step starts without a cache", "test_generate",
        "Keep the caches model_forward returns and pass them to the next call; otherwise each new token sees nothing "
        "before it (and sits at position 0).",
        (Edit(_GN, "logits, caches = model_forward(params, new, config, caches)",
              "logits, _ = model_forward(params, new, config, caches)"),)),
    "generate_first_row": Mistake(
        "the next token from the first position's logits instead of the last", "test_generate",
        "logits[t] predicts the token after position t: the next token comes from the last row.",
        (Edit(_GN, "next_token(logits[-1], temperature, u)", "next_token(logits[0], temperature, u)"),)),
    "generate_feeds_everything": Mistake(
        "with the cache, the whole sequence is fed again at every step", "test_generate",
        "With a cache, feed only the tokens the model has not seen yet (the last one); the cache already holds the "
        "keys and values of the others.",
        (Edit(_GN, "new = tokens[-1:]", "new = tokens"),)),
    "generate_same_uniform": Mistake(
        "every sampling step uses the first uniform number", "test_generate",
        "Step k draws with its own number, uniforms[k]; reusing uniforms[0] makes the samples depend on one draw.",
        (Edit(_GN, "u = None if uniforms is None else uniforms[k]", "u = None if uniforms is None else uniforms[0]"),)),
}


#: The hidden cases of its own step on which each mistake's output is right (the case does not involve what it gets
#: wrong): exactly where it keeps points (tests/test_tiny_gpt_assignment.py checks both ways).
_EARLIER_OTHERS = {"softmax of logits as large as 1e4", "causal mask, square, T_k omitted (T = 4)"}
_WITHOUT_CACHE = {"greedy from BOS and a block of 3 repeated once, without the cache"}
_SAMPLED = {"temperature 0.5, u = 0.95", "temperature 0.8, u = 0.3", "temperature 2.0, u = 0.4",
            "temperature 1.5, u = 0.6"}
_ROUNDED = "logits [0, 2, 0, 0], temperature 1, u = the largest float below 1, which the CDF's last entry is not above"
PASSES = {
    "mask_with_zero": _EARLIER_OTHERS | {"causal mask, 3 queries over 7 keys"},
    "no_max_subtraction": {"attention, 2 heads, 3 queries over 5 keys with the causal mask",
                           "causal mask, 3 queries over 7 keys", "causal mask, square, T_k omitted (T = 4)"},
    "earlier_mask_top_left": _EARLIER_OTHERS | {"attention, 2 heads, 3 queries over 5 keys with the causal mask"},
    "ln_eps_outside_root": {"5 rows of 6 features, gain and bias",
                            "3 rows of 4 features (the unbiased variance differs by 4/3)"},
    "ln_no_gain_bias": {"3 rows of 4 features (the unbiased variance differs by 4/3)",
                        "nearly constant rows: variance below ε"},
    "attn_top_left_mask": {"a full sequence of 8 (causal)"},
    "attn_no_mask": {"one new token over a cache of 5"},  # the newest token may see every key anyway
    "attn_cache_on_head_axis": {"a full sequence of 8 (causal)"},
    "forward_positions_restart": {"12 tokens from scratch"},
    "forward_caches_not_passed": {"12 tokens from scratch"},
    # ×1.5 and ÷1.5 pick token 3 there; ×1 and ÷1 agree; the sorted CDFs end below u too, which gives token 3
    "sample_temperature_multiplied": {"greedy", "temperature 1.5, u = 0.6", _ROUNDED},
    "sample_sorted_mapped_back": {"greedy", "temperature 0.5, u = 0.95", "temperature 0.8, u = 0.3", _ROUNDED},
    "sample_unnormalised": {"greedy"},
    "sample_rank_not_id": {"greedy", _ROUNDED},
    "sample_argmax_without_guard": {"greedy"} | _SAMPLED,  # wrong only where no entry of the CDF is above u
    "sample_index_past_the_end": {"greedy"} | _SAMPLED,
    "greedy_argmin": _SAMPLED | {_ROUNDED},
    "generate_cache_not_kept": _WITHOUT_CACHE,
    "generate_feeds_everything": _WITHOUT_CACHE,
    "generate_first_row": {"sampled at temperature 1.5 from BOS and two tokens, with the cache"},
    "generate_same_uniform": _WITHOUT_CACHE,
}
KNOWN_MISTAKES = {name: dataclasses.replace(mistake, passes=frozenset(PASSES.get(name, ())))
                  for name, mistake in KNOWN_MISTAKES.items()}

#: The grader's form of the mistakes: the edited cells (what the spec hands the grader).
MISTAKES = variants(KNOWN_MISTAKES, SOLUTION)


# ------------------------------------------------------------------ hidden cases
@functools.lru_cache(maxsize=1)
def committed_parameters() -> dict[str, np.ndarray]:
    """The committed weights (read once; every case gets this dict, never changed).

    Each array is a :class:`attention_lab.core.values.PackageArray`: it goes into the kernel as the name of its
    array in the student package's ``weights.npz`` (which the kernel reads and checks against its SHA-256), not
    as 300 KB of data in every case.
    """
    params, _ = model.load_weights()
    stored = wire.package_arrays("a09_tiny_gpt/weights.npz")
    if list(stored) != list(params) or not all(np.array_equal(stored[k], params[k]) for k in params):
        raise RuntimeError("attention_lab/a09_tiny_gpt/weights.npz is not the file model.load_weights reads")
    return stored


def _embedded(tokens) -> np.ndarray:
    """Token + position embeddings of a sequence under the committed weights (a realistic block input)."""
    params = committed_parameters()
    tokens = np.asarray(tokens)
    return params["W_emb"][tokens] + params["W_pos"][:tokens.size]


#: Generation cases: (description, prompt, temperature, seed of the uniforms or None, use_cache). Few and short: a
#: generation case is graded with stand-ins for model_forward and next_token, one pass per call of the chain.
GENERATION = (
    ("greedy from BOS and a block of 3 repeated once, without the cache", [0, 5, 9, 2, 5], None, None, False),
    ("sampled at temperature 1.5 from BOS and two tokens, with the cache", [0, 2, 9], 1.5, 7, True),
)
N_NEW = 4  #: new tokens per generation case


def _earlier_cases():
    rng = np.random.default_rng(9000)
    Q, K, V = rng.normal(0, 1.5, (2, 3, 4)), rng.normal(0, 1.5, (2, 5, 4)), rng.normal(size=(2, 5, 2))
    return [
        Case("softmax of logits as large as 1e4", "softmax", (np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]]),),
             outputs=("the probabilities",)),
        Case("attention, 2 heads, 3 queries over 5 keys with the causal mask", "scaled_dot_product_attention",
             (Q, K, V), {"mask": np.tril(np.ones((3, 5), dtype=bool), k=2)}, outputs=("the output", "the weights"),
             rtol=0.0, atol=1e-12),
        Case("causal mask, 3 queries over 7 keys", "causal_mask", (3, 7), outputs=("the mask",)),
        # weight 0: graded in assignment 5; here it shows the function is there
        Case("causal mask, square, T_k omitted (T = 4)", "causal_mask", (4,), outputs=("the mask",), weight=0),
    ]


def _layer_norm_cases():
    rng = np.random.default_rng(9001)
    params = committed_parameters()
    near_constant = 0.01 + 1e-3 * rng.normal(size=(2, 8))  # variance ≈ 1e-6, below ε = 1e-5
    tol = dict(outputs=("the normalised rows",), rtol=1e-5, atol=1e-6)
    return [
        Case("5 rows of 6 features, gain and bias", "layer_norm",
             (rng.normal(size=(5, 6)) * 3 + 1, rng.normal(size=6), rng.normal(size=6)), **tol),
        Case("3 rows of 4 features (the unbiased variance differs by 4/3)", "layer_norm",
             (rng.normal(size=(3, 4)), np.ones(4), np.zeros(4)), **tol),
        Case("nearly constant rows: variance below ε", "layer_norm", (near_constant, np.ones(8), np.zeros(8)), **tol),
        Case("the trained final LayerNorm on real embeddings", "layer_norm",
             (_embedded([0, 4, 8, 4, 8]), params["ln_f.gain"], params["ln_f.bias"]), **tol),
    ]


def _gelu_cases():
    return [Case("x from −5 to 5 (the forms differ most at ±2.7)", "gelu", (np.linspace(-5, 5, 41),),
                 outputs=("GELU(x)",), rtol=1e-6, atol=1e-6)]


def _mlp_cases():
    params = committed_parameters()
    h = model.layer_norm(_embedded([0, 3, 5, 7, 3, 5]), params["block0.ln2.gain"], params["block0.ln2.bias"])
    return [Case("block 0's trained MLP on a real LayerNorm output", "mlp",
                 (h, params["block0.W_1"], params["block0.b_1"], params["block0.W_2"], params["block0.b_2"]),
                 outputs=("the MLP's output",), rtol=1e-5, atol=1e-6)]


def _attention_cases():
    params = committed_parameters()
    W = tuple(params["block0." + name] for name in ("W_q", "W_k", "W_v", "W_o"))
    h = model.layer_norm(_embedded([0, 7, 3, 15, 7, 3, 15, 7]), params["block0.ln1.gain"], params["block0.ln1.bias"])
    _, past = ref.causal_attention(h[:5], *W, 2)
    tol = dict(outputs=("the output", "the cache"), rtol=1e-5, atol=1e-6)
    return [
        Case("a full sequence of 8 (causal)", "causal_attention", (h, *W, 2), **tol),
        Case("one new token over a cache of 5", "causal_attention", (h[5:6], *W, 2), {"cache": past}, **tol),
        Case("three new tokens over a cache of 5", "causal_attention", (h[5:8], *W, 2), {"cache": past}, **tol),
    ]


def _block_cases():
    params = committed_parameters()
    x = _embedded([0, 7, 3, 15, 1, 7, 3, 15, 1, 7])
    block = {name: array for name, array in params.items() if name.startswith("block1.")}  # all the block reads
    _, past = ref.decoder_block(x[:6], block, 1, 2)
    tol = dict(outputs=("the output", "the cache"), rtol=1e-5, atol=1e-5)
    return [
        Case("block 1 on 10 real tokens", "decoder_block", (x, block, 1, 2), **tol),
        Case("block 1, four new tokens over a cache of 6", "decoder_block", (x[6:], block, 1, 2), {"cache": past},
             **tol),
    ]


def _forward_cases():
    params = committed_parameters()
    tokens = [0, 9, 4, 12, 2, 9, 4, 12, 2, 9, 4, 12]
    _, caches = ref.model_forward(params, tokens[:7], LEARNER_CONFIG)
    tol = dict(outputs=("the logits", "the caches"), rtol=1e-4, atol=1e-4)
    return [
        Case("12 tokens from scratch", "model_forward", (params, tokens, LEARNER_CONFIG), **tol),
        Case("5 new tokens after a cache of 7 (positions 7–11)", "model_forward", (params, tokens[7:], LEARNER_CONFIG),
             {"caches": caches}, **tol),
    ]


def _next_token_cases():
    # on each sampled case the solution and the three sampling mistakes give four different tokens
    logits = np.array([1.0, -0.5, 0.2, 2.0, 0.7, -1.2])
    exact = dict(outputs=("the token",), rtol=0.0, atol=0.0)
    return [
        Case("greedy", "next_token", (logits,), **exact),
        Case("temperature 0.5, u = 0.95", "next_token", (logits, 0.5, 0.95), **exact),
        Case("temperature 0.8, u = 0.3", "next_token", (logits, 0.8, 0.3), **exact),
        Case("temperature 2.0, u = 0.4", "next_token", (logits, 2.0, 0.4), **exact),
        # the sorted CDF mapped back to ids differs from every other sampling mistake here (tokens 3, 1, 2, 4)
        Case("temperature 1.5, u = 0.6", "next_token", (logits, 1.5, 0.6), **exact),
        # the notebook's rule for u ≥ c_{V−1}: this CDF ends at 0.9999999999999997 (three floats below 1), so no
        # entry is above u and the token is the last one, 3; np.argmax of the comparison gives 0, np.searchsorted
        # alone 4, the unnormalised CDF 1
        Case(_ROUNDED, "next_token", (np.array([0.0, 2.0, 0.0, 0.0]), 1.0, float(np.nextafter(1.0, 0.0))), **exact),
    ]


def uniforms(seed: int | None) -> np.ndarray | None:
    """The uniform numbers of a sampled generation case (None for greedy)."""
    return None if seed is None else np.random.default_rng(seed).random(N_NEW)


def _generate_cases():
    params = committed_parameters()
    cases = []
    for description, prompt, temperature, seed, use_cache in GENERATION:
        kwargs = {"use_cache": use_cache}
        if temperature is not None:
            kwargs.update(temperature=temperature, uniforms=uniforms(seed))
        cases.append(Case(description, "generate", (params, LEARNER_CONFIG, prompt, N_NEW), kwargs,
                          outputs=("the tokens",), rtol=0.0, atol=0.0))
    return cases


def hidden_cases() -> dict[str, list[Case]]:
    """The hidden cases, test-cell grade_id → cases (fixed seeds, the committed weights)."""
    return {
        "test_from_earlier_assignments": _earlier_cases(),
        "test_layer_norm": _layer_norm_cases(),
        "test_gelu": _gelu_cases(),
        "test_mlp": _mlp_cases(),
        "test_causal_attention": _attention_cases(),
        "test_decoder_block": _block_cases(),
        "test_model_forward": _forward_cases(),
        "test_next_token": _next_token_cases(),
        "test_generate": _generate_cases(),
    }
