"""Draft answer bank of assignment 9 (the tiny-GPT capstone): learner API, solution, variants, mistakes, cases.

The learner assembles the model of :mod:`autograder.assignments.a09_tiny_gpt.model` from
small functions, one sequence (T,) at a time, and runs it on the committed
weights. Layout-independent material for the notebook and the grading spec:

* :data:`GIVEN` — functions from earlier assignments (the course's versions;
  in the notebook these can be the learner's own);
* :data:`SOLUTION` — the reference-style solution cells, in notebook order;
* :data:`STEPS` — graded steps with points, hidden cases and tolerances;
* :data:`CORRECT` / :data:`MISTAKES` — the answer bank
  (:class:`~autograder.grader.draft_rewrites.Rewrite`, :class:`~autograder.grader.draft_rewrites.Edit`);
* :data:`REFERENCE` — the learner API implemented by the reference model.

Learner conventions: ``config`` is a plain dict (:data:`LEARNER_CONFIG`), so
that hidden cases can send it as data; a layer's cache is a pair
``(K, V)`` of arrays (n_heads, T_past, d_head); ``model_forward`` returns the
logits and the list of the layers' caches.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from autograder.grader.draft_rewrites import Edit, Rewrite

from . import model, reference
from .reference import REFERENCE, model_config  # noqa: F401 — the bank's readers take the learner API from here

#: What the learner's functions receive as ``config``.
LEARNER_CONFIG = {"vocab_size": 20, "block_size": 32, "n_heads": 2, "n_layers": 2, "ln_eps": 1e-5}

GIVEN = '''
def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def causal_mask(T_q, T_k=None):
    """Assignment 5: (T_q, T_k), True where query i (the last T_q of T_k positions) may see key j."""
    T_k = T_q if T_k is None else T_k
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    """Assignment 1: softmax(Q Kᵀ / √d_k) V over the last two axes; returns (output, weights)."""
    scores = Q @ np.swapaxes(K, -1, -2)
    if scale:
        scores = scores / np.sqrt(Q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ V, weights


def split_heads(X, n_heads):
    """Assignment 2: (T, d_model) → (n_heads, T, d_head)."""
    T, d_model = X.shape
    return X.reshape(T, n_heads, d_model // n_heads).transpose(1, 0, 2)


def merge_heads(H):
    """Assignment 2: (n_heads, T, d_head) → (T, n_heads · d_head)."""
    n_heads, T, d_head = H.shape
    return H.transpose(1, 0, 2).reshape(T, n_heads * d_head)


def attend_with_cache(x_new, K_cache, V_cache, W_q, W_k, W_v):
    """Assignment 5 (one head): attend from new tokens over the cache plus themselves; returns (out, K, V)."""
    K = np.concatenate([K_cache, x_new @ W_k])
    V = np.concatenate([V_cache, x_new @ W_v])
    out, _ = scaled_dot_product_attention(x_new @ W_q, K, V, mask=causal_mask(len(x_new), len(K)))
    return out, K, V
'''

SOLUTION: dict[str, str] = {
    "layer_norm": '''
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=float)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    normalised = (x - mean) / np.sqrt(var + eps)
    return normalised * gain + bias
''',
    "gelu": '''
def gelu(x):
    x = np.asarray(x, dtype=float)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
''',
    "mlp": '''
def mlp(x, W_1, b_1, W_2, b_2):
    return gelu(x @ W_1 + b_1) @ W_2 + b_2
''',
    "causal_attention": '''
def causal_attention(h, W_q, W_k, W_v, W_o, n_heads, cache=None):
    Q, K, V = (split_heads(h @ W, n_heads) for W in (W_q, W_k, W_v))
    if cache is not None:
        K = np.concatenate([cache[0], K], axis=1)
        V = np.concatenate([cache[1], V], axis=1)
    mask = causal_mask(Q.shape[1], K.shape[1])
    heads, _ = scaled_dot_product_attention(Q, K, V, mask=mask)
    return merge_heads(heads) @ W_o, (K, V)
''',
    "decoder_block": '''
def decoder_block(x, params, layer, n_heads, eps=1e-5, cache=None):
    p = f"block{layer}."
    h = layer_norm(x, params[p + "ln1.gain"], params[p + "ln1.bias"], eps)
    attended, cache = causal_attention(h, params[p + "W_q"], params[p + "W_k"], params[p + "W_v"],
                                       params[p + "W_o"], n_heads, cache)
    x = x + attended
    h = layer_norm(x, params[p + "ln2.gain"], params[p + "ln2.bias"], eps)
    x = x + mlp(h, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"])
    return x, cache
''',
    "model_forward": '''
def model_forward(params, tokens, config, caches=None):
    tokens = np.asarray(tokens)
    T_past = 0 if caches is None else caches[0][0].shape[1]
    x = params["W_emb"][tokens] + params["W_pos"][T_past:T_past + len(tokens)]
    new_caches = []
    for layer in range(config["n_layers"]):
        x, cache = decoder_block(x, params, layer, config["n_heads"], config["ln_eps"],
                                 None if caches is None else caches[layer])
        new_caches.append(cache)
    x = layer_norm(x, params["ln_f.gain"], params["ln_f.bias"], config["ln_eps"])
    return x @ params["W_out"], new_caches
''',
    "next_token": '''
def next_token(logits, temperature=None, u=None):
    logits = np.asarray(logits, dtype=float)
    if temperature is None:
        return int(np.argmax(logits))
    z = logits / temperature
    p = np.exp(z - z.max())
    p = p / p.sum()
    cdf = np.cumsum(p)
    return int(min(np.searchsorted(cdf, u, side="right"), len(p) - 1))
''',
    "generate": '''
def generate(params, config, prompt, n_new, temperature=None, uniforms=None, use_cache=True):
    tokens = [int(t) for t in prompt]
    caches = None
    new = tokens
    for k in range(n_new):
        if use_cache:
            logits, caches = model_forward(params, new, config, caches)
        else:
            logits, _ = model_forward(params, tokens, config)
        u = None if uniforms is None else uniforms[k]
        tokens.append(next_token(logits[-1], temperature, u))
        new = tokens[-1:]
    return np.array(tokens)
''',
}


# ---------------------------------------------------------------- hidden cases

@dataclass(frozen=True)
class HiddenCase:
    """One hidden call, compared with :data:`REFERENCE`; ``exposes`` names the mistakes it is there for."""

    description: str
    function: str
    args: tuple
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    exposes: tuple[str, ...] = ()


@functools.lru_cache(maxsize=1)
def committed_parameters() -> dict[str, np.ndarray]:
    """The committed weights (read once)."""
    return model.load_weights()[0]


def _embedded(tokens) -> np.ndarray:
    """Token + position embeddings of a sequence under the committed weights (a realistic block input)."""
    params = committed_parameters()
    tokens = np.asarray(tokens)
    return params["W_emb"][tokens] + params["W_pos"][:tokens.size]


#: Prompts for greedy generation, each with n_new = block_size − len(prompt); every greedy step keeps a top-2
#: logit margin ≥ 0.02 under the committed weights (test_tiny_gpt_bank checks ≥ 1e-3, the spec's bound).
GREEDY_PROMPTS: dict[str, list[int]] = {
    "in_distribution": [0, 7, 3, 15, 1, 9, 7, 3],
    "block_only": [0, 4, 11, 2, 16, 8, 5, 13],
    "bos_and_two": [0, 6, 17],
    "bos_only": [0],
    "repeat_inside_block": [0, 3, 4, 3, 9, 12],
    "block_longer_than_trained": [0, *range(1, 15), 1, 2],
    "no_bos": [5, 9, 2, 5, 9],
}

#: Sampled generation: (prompt, temperature, seed of the uniforms); the uniforms stay ≥ 1e-4 from every CDF
#: boundary (checked in the test).
SAMPLED: tuple[tuple[list[int], float, int], ...] = (
    ([0, 6, 17], 0.7, 5), ([0, 6, 17], 1.0, 6), ([0, 2, 9, 14], 1.5, 7),
)


def layer_norm_cases() -> list[HiddenCase]:
    rng = np.random.default_rng(90)
    near_constant = 0.01 + 1e-3 * rng.normal(size=(2, 8))              # variance ≈ 1e-6 < ε = 1e-5
    return [
        HiddenCase("rows of 6 features, gain and bias", "layer_norm",
                   (rng.normal(size=(5, 6)) * 3 + 1, rng.normal(size=6), rng.normal(size=6)),
                   exposes=("ln_unbiased_variance", "ln_no_gain_bias", "ln_over_positions")),
        HiddenCase("d = 4 (the unbiased variance differs by 4/3)", "layer_norm",
                   (rng.normal(size=(3, 4)), np.ones(4), np.zeros(4)), exposes=("ln_unbiased_variance",)),
        HiddenCase("nearly constant rows: variance below ε", "layer_norm",
                   (near_constant, np.ones(8), np.zeros(8)), exposes=("ln_eps_outside_root",)),
        HiddenCase("the committed final LayerNorm on real embeddings", "layer_norm",
                   (_embedded([0, 4, 8, 4, 8]), committed_parameters()["ln_f.gain"],
                    committed_parameters()["ln_f.bias"])),
    ]


def gelu_cases() -> list[HiddenCase]:
    return [HiddenCase("x from −5 to 5 (the forms differ most at ±2.7)", "gelu", (np.linspace(-5, 5, 41),),
                       exposes=("gelu_erf", "gelu_relu", "gelu_no_cubic", "gelu_quick"))]


def mlp_cases() -> list[HiddenCase]:
    params = committed_parameters()
    h = model.layer_norm(_embedded([0, 3, 5, 7, 3, 5]), params["block0.ln2.gain"], params["block0.ln2.bias"])
    return [HiddenCase("block 0's MLP on a real LayerNorm output", "mlp",
                       (h, params["block0.W_1"], params["block0.b_1"], params["block0.W_2"], params["block0.b_2"]),
                       exposes=("mlp_no_activation",))]


def _attention_weights(layer=0):
    params = committed_parameters()
    p = f"block{layer}."
    return tuple(params[p + W] for W in ("W_q", "W_k", "W_v", "W_o"))


def attention_cases() -> list[HiddenCase]:
    params = committed_parameters()
    tokens = [0, 7, 3, 15, 7, 3, 15, 7]
    h = model.layer_norm(_embedded(tokens), params["block0.ln1.gain"], params["block0.ln1.bias"])
    _, past = reference.causal_attention(h[:5], *_attention_weights(), 2)
    return [
        HiddenCase("full sequence of 8 (causal)", "causal_attention", (h, *_attention_weights(), 2),
                   exposes=("attn_no_mask",)),
        HiddenCase("one new token over a cache of 5", "causal_attention", (h[5:6], *_attention_weights(), 2),
                   {"cache": past}, exposes=("attn_top_left_mask", "attn_cache_on_head_axis")),
        HiddenCase("three new tokens over a cache of 5", "causal_attention", (h[5:8], *_attention_weights(), 2),
                   {"cache": past}, exposes=("attn_top_left_mask",)),
    ]


def block_cases() -> list[HiddenCase]:
    params = committed_parameters()
    x = _embedded([0, 7, 3, 15, 1, 7, 3, 15, 1, 7])
    _, past = reference.decoder_block(x[:6], params, 1, 2)
    return [
        HiddenCase("block 1 on 10 real tokens", "decoder_block", (x, params, 1, 2),
                   exposes=("block_post_ln", "block_no_attention_residual", "block_ln1_twice")),
        HiddenCase("block 1, four new tokens over a cache of 6", "decoder_block", (x[6:], params, 1, 2),
                   {"cache": past}),
    ]


def forward_cases() -> list[HiddenCase]:
    params = committed_parameters()
    tokens = [0, 9, 4, 12, 2, 9, 4, 12, 2, 9, 4, 12]
    _, caches = reference.model_forward(params, tokens[:7], LEARNER_CONFIG)
    return [
        HiddenCase("12 tokens from scratch", "model_forward", (params, tokens, LEARNER_CONFIG),
                   exposes=("forward_no_final_ln", "forward_tied_head")),
        HiddenCase("5 new tokens after a cache of 7 (positions 7–11)", "model_forward",
                   (params, tokens[7:], LEARNER_CONFIG), {"caches": caches},
                   exposes=("forward_positions_restart", "forward_caches_not_passed")),
    ]


def next_token_cases() -> list[HiddenCase]:
    logits = np.array([0.3, 2.0, -1.0, 1.2, 0.9])
    return [
        HiddenCase("greedy", "next_token", (logits,)),
        HiddenCase("temperature 0.5, u = 0.6", "next_token", (logits, 0.5, 0.6),
                   exposes=("sample_temperature_multiplied", "sample_rank_not_id")),
        HiddenCase("temperature 2.0, u = 0.55", "next_token", (logits, 2.0, 0.55),
                   exposes=("sample_temperature_multiplied", "sample_unnormalised", "sample_rank_not_id")),
        HiddenCase("temperature 1.0, u = 0.3", "next_token", (logits, 1.0, 0.3), exposes=("sample_rank_not_id",)),
    ]


def generate_cases() -> list[HiddenCase]:
    params = committed_parameters()
    cases = []
    for name, prompt in GREEDY_PROMPTS.items():
        n_new = LEARNER_CONFIG["block_size"] - len(prompt)
        cases.append(HiddenCase(f"greedy, prompt {name}, with cache", "generate",
                                (params, LEARNER_CONFIG, prompt, n_new),
                                exposes=("generate_cache_not_kept", "generate_first_row",
                                         "generate_feeds_everything") if name == "in_distribution" else ()))
        if name in ("in_distribution", "bos_and_two"):
            cases.append(HiddenCase(f"greedy, prompt {name}, without cache", "generate",
                                    (params, LEARNER_CONFIG, prompt, n_new), {"use_cache": False},
                                    exposes=("generate_first_row",)))
    for prompt, temperature, seed in SAMPLED:
        n_new = LEARNER_CONFIG["block_size"] - len(prompt)
        u = np.random.default_rng(seed).random(n_new)
        cases.append(HiddenCase(f"sampled at temperature {temperature}", "generate",
                                (params, LEARNER_CONFIG, prompt, n_new), {"temperature": temperature, "uniforms": u}))
    return cases


@dataclass(frozen=True)
class Step:
    """A graded step: its solution cell, points, hidden cases and comparison tolerances."""

    cell: str
    title: str
    points: float
    cases: Callable[[], list[HiddenCase]]
    rtol: float
    atol: float


STEPS: dict[str, Step] = {
    "layer_norm": Step("layer_norm", "LayerNorm (biased variance, ε inside the root)", 1.0, layer_norm_cases,
                       1e-5, 1e-6),
    "gelu": Step("gelu", "GELU, tanh form", 0.5, gelu_cases, 1e-6, 1e-6),
    "mlp": Step("mlp", "MLP", 0.5, mlp_cases, 1e-5, 1e-6),
    "causal_attention": Step("causal_attention", "causal multi-head attention with a KV cache", 2.0,
                             attention_cases, 1e-5, 1e-6),
    "decoder_block": Step("decoder_block", "pre-LN decoder block", 1.5, block_cases, 1e-5, 1e-5),
    "model_forward": Step("model_forward", "model forward (embeddings, blocks, final LN, head)", 2.0,
                          forward_cases, 1e-4, 1e-4),
    "next_token": Step("next_token", "greedy and inverse-CDF sampling of one token", 1.0, next_token_cases, 0, 0),
    "generate": Step("generate", "generation, greedy and sampled, with and without the cache", 2.0,
                     generate_cases, 0, 0),
}


# ---------------------------------------------------------------- correct variants

CORRECT: dict[str, Rewrite] = {
    "np_var_and_std": Rewrite("LayerNorm with np.var (ddof=0, NumPy's default)", {"layer_norm": '''
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=float)
    centred = x - np.mean(x, axis=-1, keepdims=True)
    return gain * centred / np.sqrt(np.var(x, axis=-1, keepdims=True) + eps) + bias
'''}),
    "mean_of_squares": Rewrite("LayerNorm variance as mean(x²) − mean(x)²", {"layer_norm": '''
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=float)
    mu = x.mean(axis=-1, keepdims=True)
    var = (x * x).mean(axis=-1, keepdims=True) - mu * mu
    return (x - mu) * (1.0 / np.sqrt(var + eps)) * gain + bias
'''}),
    "float32_layer_norm_and_gelu": Rewrite("LayerNorm and GELU in float32 (within the tolerance)", {
        "layer_norm": '''
def layer_norm(x, gain, bias, eps=1e-5):
    x = np.asarray(x, dtype=np.float32)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + np.float32(eps))) * gain.astype(np.float32) + bias.astype(np.float32)
''',
        "gelu": '''
def gelu(x):
    x = np.asarray(x, dtype=np.float32)
    c = np.float32(np.sqrt(2.0 / np.pi))
    return np.float32(0.5) * x * (1 + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))
'''}),
    "gelu_written_out": Rewrite("GELU with math constants and np.power", {"gelu": '''
import math


def gelu(x):
    x = np.asarray(x, dtype=float)
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * np.power(x, 3))
    return x * (1 + np.tanh(inner)) / 2
'''}),
    "heads_with_assignment_5": Rewrite("attention head by head with assignment 5's attend_with_cache on column "
                                       "slices of the projections", {"causal_attention": '''
def causal_attention(h, W_q, W_k, W_v, W_o, n_heads, cache=None):
    d_head = W_q.shape[1] // n_heads
    outputs, Ks, Vs = [], [], []
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        K_past = np.zeros((0, d_head)) if cache is None else cache[0][i]
        V_past = np.zeros((0, d_head)) if cache is None else cache[1][i]
        out, K, V = attend_with_cache(h, K_past, V_past, W_q[:, cols], W_k[:, cols], W_v[:, cols])
        outputs.append(out)
        Ks.append(K)
        Vs.append(V)
    return np.concatenate(outputs, axis=1) @ W_o, (np.stack(Ks), np.stack(Vs))
'''}),
    "einsum_and_big_negative": Rewrite("attention with einsum, −1e9 for the blocked scores and W_o applied as a sum "
                                       "over heads of each head times its rows of W_o", {"causal_attention": '''
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
    out = sum(heads[i] @ W_o[i * d:(i + 1) * d] for i in range(n_heads))
    return out, (K, V)
'''}),
    "block_as_loop_over_sublayers": Rewrite("decoder block as a loop over its two pre-LN sublayers", {
        "decoder_block": '''
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
    "one_hot_embedding": Rewrite("embeddings as one-hot rows times W_emb; positions from np.arange", {
        "model_forward": '''
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
    "sampling_by_running_sum": Rewrite("inverse CDF with an explicit running sum; greedy with a loop", {
        "next_token": '''
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
    "log_softmax_sampling": Rewrite("probabilities from a log-softmax; first index with u < cdf by np.argmax", {
        "next_token": '''
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
    "prefill_token_by_token": Rewrite("with the cache, the prompt is fed one token at a time before generating; an "
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


# ---------------------------------------------------------------- known mistakes

MISTAKES: dict[str, Edit] = {
    "ln_unbiased_variance": Edit(
        "LayerNorm with the unbiased variance (÷ (d − 1)), as torch.std's default in the Annotated Transformer",
        "layer_norm", "    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "    var = x.var(axis=-1, ddof=1, keepdims=True)",
        hint="LayerNorm divides by d, not d − 1 (the biased variance, as torch.nn.LayerNorm and this checkpoint): "
             "with d − 1 every normalised value is √((d − 1)/d) too small.",
        breaks="layer_norm"),
    "ln_eps_outside_root": Edit(
        "ε added to the standard deviation instead of inside the square root", "layer_norm",
        "(x - mean) / np.sqrt(var + eps)", "(x - mean) / (np.sqrt(var) + eps)",
        hint="This checkpoint (like torch.nn.LayerNorm) divides by √(σ² + ε). Adding ε to σ instead is almost the "
             "same for large σ but not for nearly constant rows, whose σ is below √ε.",
        breaks="layer_norm"),
    "ln_no_gain_bias": Edit(
        "LayerNorm without its learned gain and bias", "layer_norm",
        "    return normalised * gain + bias", "    return normalised",
        hint="After normalising, LayerNorm scales by its learned gain and adds its bias, per feature.",
        breaks="layer_norm"),
    "ln_over_positions": Edit(
        "mean and variance over the positions (axis 0) instead of over each token's features", "layer_norm",
        "    mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
        "    mean = x.mean(axis=0, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=0, keepdims=True)",
        hint="LayerNorm normalises each token on its own, over its d_model features (the last axis); averaging "
             "over positions mixes tokens (and would let a token see the future).",
        breaks="layer_norm"),
    "gelu_erf": Edit(
        "the exact GELU ½ x (1 + erf(x/√2)) instead of the checkpoint's tanh approximation", "gelu",
        "    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))",
        "    import math\n    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / np.sqrt(2.0)))",
        hint="This model was trained with GPT-2's tanh approximation of GELU. The exact erf form differs by up to "
             "4.7e-4 (at x ≈ ±2.7), which moves this model's logits by up to 4e-3: use the tanh form given in "
             "the text.",
        breaks="gelu"),
    "gelu_relu": Edit(
        "ReLU instead of GELU", "gelu",
        "    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))",
        "    return np.maximum(x, 0.0)",
        hint="GELU is smooth and slightly negative for negative inputs (GELU(−1) ≈ −0.159); ReLU is 0 there.",
        breaks="gelu"),
    "gelu_no_cubic": Edit(
        "tanh approximation without the 0.044715 x³ term", "gelu",
        " * (x + 0.044715 * x ** 3)))", " * x))",
        hint="The tanh approximation's argument is √(2/π) (x + 0.044715 x³): the cubic term is part of it.",
        breaks="gelu"),
    "gelu_quick": Edit(
        "x · sigmoid(1.702 x) (the 'quick GELU' of CLIP) instead of the tanh form", "gelu",
        "    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))",
        "    return x / (1.0 + np.exp(-1.702 * x))",
        hint="x·σ(1.702x) is another approximation of GELU (up to 0.02 away); this model uses the tanh form.",
        breaks="gelu"),
    "mlp_no_activation": Edit(
        "MLP without its non-linearity", "mlp",
        "    return gelu(x @ W_1 + b_1) @ W_2 + b_2", "    return (x @ W_1 + b_1) @ W_2 + b_2",
        hint="Without GELU between them the two linear layers collapse into one; apply GELU to the hidden layer.",
        breaks="mlp"),
    "attn_top_left_mask": Edit(
        "causal mask aligned top-left: a new token over a cache sees only the first keys", "causal_attention",
        "    mask = causal_mask(Q.shape[1], K.shape[1])",
        "    mask = np.tril(np.ones((Q.shape[1], K.shape[1]), dtype=bool))",
        hint="With a cache the new queries are the *last* positions: query i sits at T_past + i and may see keys "
             "0 … T_past + i. Align the causal mask bottom-right (assignment 5).",
        breaks="causal_attention"),
    "attn_no_mask": Edit(
        "no causal mask: every position sees the future", "causal_attention",
        "    heads, _ = scaled_dot_product_attention(Q, K, V, mask=mask)",
        "    heads, _ = scaled_dot_product_attention(Q, K, V, mask=None)",
        hint="A decoder predicts the next token, so position t may only attend to positions ≤ t: pass the causal "
             "mask.",
        breaks="causal_attention"),
    "attn_cache_on_head_axis": Edit(
        "cache concatenated on the head axis (0) instead of the position axis (1)", "causal_attention",
        "        K = np.concatenate([cache[0], K], axis=1)\n        V = np.concatenate([cache[1], V], axis=1)",
        "        K = np.concatenate([cache[0], K], axis=0)\n        V = np.concatenate([cache[1], V], axis=0)",
        hint="A layer's cache has shape (n_heads, T_past, d_head): new keys and values are appended along the "
             "positions, axis 1.",
        breaks="causal_attention", shape_only=True),
    "block_post_ln": Edit(
        "post-LN (the original Transformer: LayerNorm after each residual addition) instead of pre-LN",
        "decoder_block",
        '    h = layer_norm(x, params[p + "ln1.gain"], params[p + "ln1.bias"], eps)\n'
        '    attended, cache = causal_attention(h, params[p + "W_q"], params[p + "W_k"], params[p + "W_v"],\n'
        '                                       params[p + "W_o"], n_heads, cache)\n'
        '    x = x + attended\n'
        '    h = layer_norm(x, params[p + "ln2.gain"], params[p + "ln2.bias"], eps)\n'
        '    x = x + mlp(h, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"])',
        '    attended, cache = causal_attention(x, params[p + "W_q"], params[p + "W_k"], params[p + "W_v"],\n'
        '                                       params[p + "W_o"], n_heads, cache)\n'
        '    x = layer_norm(x + attended, params[p + "ln1.gain"], params[p + "ln1.bias"], eps)\n'
        '    x = layer_norm(x + mlp(x, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"]),\n'
        '                   params[p + "ln2.gain"], params[p + "ln2.bias"], eps)',
        hint="This model is pre-LN (GPT-2): each sublayer reads LayerNorm(x) and its output is added to x, which "
             "itself is never normalised inside the block. Post-LN (Vaswani et al. 2017) normalises after the "
             "addition; these weights were not trained that way.",
        breaks="decoder_block"),
    "block_no_attention_residual": Edit(
        "attention output replaces x instead of being added to it", "decoder_block",
        "    x = x + attended", "    x = attended",
        hint="Each sublayer's output is added to its input (the residual connection): x = x + attention(LN(x)).",
        breaks="decoder_block"),
    "block_ln1_twice": Edit(
        "the first LayerNorm's gain and bias used before the MLP too", "decoder_block",
        'params[p + "ln2.gain"], params[p + "ln2.bias"]', 'params[p + "ln1.gain"], params[p + "ln1.bias"]',
        hint="Each sublayer has its own LayerNorm: ln1 before attention, ln2 before the MLP.",
        breaks="decoder_block"),
    "forward_positions_restart": Edit(
        "with a cache, the new tokens get positions 0, 1, … instead of T_past, T_past + 1, …", "model_forward",
        'params["W_pos"][T_past:T_past + len(tokens)]', 'params["W_pos"][:len(tokens)]',
        hint="A token's position is its index in the whole sequence: after T_past cached tokens the new ones sit "
             "at T_past, T_past + 1, … Without a cache both agree, which is why this only shows in generation.",
        breaks="model_forward"),
    "forward_no_final_ln": Edit(
        "no final LayerNorm before the output head", "model_forward",
        '    x = layer_norm(x, params["ln_f.gain"], params["ln_f.bias"], config["ln_eps"])\n', "",
        hint="Pre-LN models end with one more LayerNorm (ln_f) before the output head: the residual stream itself "
             "is never normalised inside the blocks.",
        breaks="model_forward"),
    "forward_tied_head": Edit(
        "output head tied to the embeddings (W_embᵀ) although this checkpoint has its own W_out", "model_forward",
        '    return x @ params["W_out"], new_caches', '    return x @ params["W_emb"].T, new_caches',
        hint="GPT-2 ties its output head to the token embeddings, but this model was trained with a separate "
             "W_out: use it.",
        breaks="model_forward"),
    "forward_caches_not_passed": Edit(
        "the layers' caches are not passed on: new tokens attend only to themselves", "model_forward",
        "                                 None if caches is None else caches[layer])",
        "                                 None)",
        hint="Each layer must receive its own cache (caches[layer]) so that the new tokens can attend to the "
             "earlier ones.",
        breaks="model_forward"),
    "sample_temperature_multiplied": Edit(
        "logits multiplied by the temperature instead of divided", "next_token",
        "    z = logits / temperature", "    z = logits * temperature",
        hint="Temperature divides the logits: T < 1 sharpens the distribution, T > 1 flattens it.",
        breaks="next_token"),
    "sample_unnormalised": Edit(
        "CDF of unnormalised exponentials: the cumulative sum does not end at 1", "next_token",
        "    p = p / p.sum()\n", "",
        hint="Normalise the exponentials into probabilities before the cumulative sum, so that it ends at 1.",
        breaks="next_token"),
    "sample_rank_not_id": Edit(
        "CDF over the probabilities sorted from the largest, returning the rank instead of the token id",
        "next_token",
        "    cdf = np.cumsum(p)\n", "    order = np.argsort(-p)\n    cdf = np.cumsum(p[order])\n",
        hint="The rule is the cumulative sum in token-id order 0, 1, … and the token returned is an id. Code "
             "written for top-k or top-p sorts first and must map back through the sort; here the order is fixed.",
        breaks="next_token"),
    "generate_cache_not_kept": Edit(
        "the returned caches are thrown away: every step starts without a cache", "generate",
        "            logits, caches = model_forward(params, new, config, caches)",
        "            logits, _ = model_forward(params, new, config, caches)",
        hint="Keep the caches model_forward returns and pass them to the next call; otherwise each new token "
             "sees nothing before it (and sits at position 0).",
        breaks="generate"),
    "generate_first_row": Edit(
        "next token from the first position's logits instead of the last", "generate",
        "        tokens.append(next_token(logits[-1], temperature, u))",
        "        tokens.append(next_token(logits[0], temperature, u))",
        hint="logits[t] predicts the token after position t: the next token comes from the last row.",
        breaks="generate"),
    "generate_feeds_everything": Edit(
        "with the cache, the whole sequence is fed again at every step", "generate",
        "        new = tokens[-1:]", "        new = tokens",
        hint="With a cache, feed only the tokens the model has not seen yet (the last one); the cache already "
             "holds the keys and values of the others.",
        breaks="generate", shape_only=True),
}


def prompt_margins() -> dict[str, float]:
    """Smallest top-2 logit margin over the greedy steps of each of :data:`GREEDY_PROMPTS` (committed weights)."""
    params, config = model.load_weights()
    return {name: float(model.greedy_margins(params, config, np.array(prompt), config.block_size - len(prompt)).min())
            for name, prompt in GREEDY_PROMPTS.items()}


def sampling_margins() -> list[float]:
    """Smallest distance of a uniform number from a CDF boundary, for each case of :data:`SAMPLED`."""
    params, config = model.load_weights()
    out = []
    for prompt, temperature, seed in SAMPLED:
        u = np.random.default_rng(seed).random(config.block_size - len(prompt))
        out.append(float(model.sampling_margins(params, config, np.array(prompt), u, temperature).min()))
    return out

