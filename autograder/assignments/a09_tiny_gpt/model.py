"""Reference for assignment 9: a tiny decoder-only transformer (GPT) in NumPy, with a KV cache and generation.

Architecture (GPT-2's layout, Radford et al. 2019, at toy size):

* **embeddings**: ``x_t = W_emb[token_t] + W_pos[t]`` (learned token and
  position embeddings, ``W_pos`` has one row per position up to
  ``block_size``);
* **pre-LN blocks** (LayerNorm *before* each sub-layer, Xiong et al. 2020,
  as GPT-2), ``n_layers`` of them::

      x = x + MultiHead(LN₁(x))        causal multi-head attention, Vaswani et al. 2017 §3.2.2
      x = x + MLP(LN₂(x))              MLP(h) = GELU(h W₁ + b₁) W₂ + b₂

  MultiHead(h) = Concat(head₁ … head_H) W_o with headᵢ = softmax(mask(qᵢ kᵢᵀ / √d_head)) vᵢ
  and q, k, v = h W_q, h W_k, h W_v split into heads by columns
  (assignment 2's :func:`~autograder.assignments.a02_multi_head.reference.split_heads`); no
  biases in the attention projections;
* **final LayerNorm**, then the **output head** ``logits = LN_f(x) W_out``
  (``W_out`` of shape (d_model, vocab_size), no bias). The output head is
  **not tied** to ``W_emb``: the checkpoint stores both, and using
  ``W_emb.T`` instead of ``W_out`` is a mistake.

Conventions fixed here (others in public code are discussed in DESIGN.md):

* **LayerNorm**: ``LN(x) = gain ⊙ (x − μ) / √(σ² + ε) + bias`` over the last
  axis with the **biased** variance σ² = mean((x − μ)²) (divide by d_model,
  as ``torch.nn.LayerNorm``) and ε = 1e-5 **inside** the square root;
* **GELU**: the **tanh approximation** GPT-2 uses (Hendrycks & Gimpel 2016,
  eq. in §2): ``GELU(x) = ½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))``. The
  exact form ``½ x (1 + erf(x/√2))`` differs from it by at most 4.7e-4 (at
  x ≈ ±2.70); whether that is accepted is decided in DESIGN.md from the
  measured effect on this checkpoint's logits.
* **KV cache**: per layer, the keys and values of every earlier position,
  shape (n_heads, T_past, d_head) (with the batch axes in front when the
  tokens have them). Position t of a new token is ``T_past + i``. Keys and
  values of position j depend only on tokens ≤ j (in every layer), so
  decoding with the cache equals the full forward pass.

Token arrays are integers of shape (T,) or (B, T); every function accepts a
leading batch axis. This file is the grader's ground truth.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, NamedTuple

import numpy as np

import attention_lab
from autograder.assignments.validation import as_float_array, require_positive_int

#: GELU's tanh approximation constant √(2/π).
_GELU_C = math.sqrt(2.0 / math.pi)

#: Where the committed weights live (the student package ships them).
WEIGHTS_DIR = Path(attention_lab.__file__).resolve().parent / "a09_tiny_gpt"
WEIGHTS_FILE = WEIGHTS_DIR / "weights.npz"
TRAINING_FILE = WEIGHTS_DIR / "training.json"


@dataclass(frozen=True)
class Config:
    """Sizes of the model.

    Attributes
    ----------
    vocab_size : int
        Number of token ids, 0 … vocab_size − 1.
    block_size : int
        Longest sequence the model reads (rows of ``W_pos``).
    d_model : int
        Width of the residual stream.
    n_heads : int
        Attention heads per layer; d_head = d_model / n_heads.
    n_layers : int
        Decoder blocks.
    d_mlp : int
        Hidden width of the MLP (4 · d_model in GPT-2).
    ln_eps : float
        LayerNorm's ε, inside the square root.
    """

    vocab_size: int = 20
    block_size: int = 32
    d_model: int = 32
    n_heads: int = 2
    n_layers: int = 2
    d_mlp: int = 128
    ln_eps: float = 1e-5

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "d_model", "n_heads", "n_layers", "d_mlp"):
            require_positive_int(name, getattr(self, name))
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model = {self.d_model} must be divisible by n_heads = {self.n_heads}")
        if not (isinstance(self.ln_eps, float) and self.ln_eps > 0):
            raise ValueError(f"ln_eps must be a positive float; received {self.ln_eps!r}")

    @property
    def d_head(self) -> int:
        """Size of one head, d_model / n_heads."""
        return self.d_model // self.n_heads


def parameter_shapes(config: Config) -> dict[str, tuple[int, ...]]:
    """Name → shape of every parameter, in a fixed order (blocks are ``"block{i}.<name>"``)."""
    d, V = config.d_model, config.vocab_size
    shapes = {"W_emb": (V, d), "W_pos": (config.block_size, d)}
    for layer in range(config.n_layers):
        p = f"block{layer}."
        shapes.update({
            p + "ln1.gain": (d,), p + "ln1.bias": (d,),
            p + "W_q": (d, d), p + "W_k": (d, d), p + "W_v": (d, d), p + "W_o": (d, d),
            p + "ln2.gain": (d,), p + "ln2.bias": (d,),
            p + "W_1": (d, config.d_mlp), p + "b_1": (config.d_mlp,),
            p + "W_2": (config.d_mlp, d), p + "b_2": (d,),
        })
    shapes.update({"ln_f.gain": (d,), "ln_f.bias": (d,), "W_out": (d, V)})
    return shapes


def init_parameters(config: Config, seed: int) -> dict[str, np.ndarray]:
    """GPT-2's initialisation: N(0, 0.02²) weights, residual projections (W_o, W_2) ÷ √(2 n_layers), LN gain 1, biases 0.

    Returns float64 arrays keyed as :func:`parameter_shapes`; the same seed gives the same parameters.
    """
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in parameter_shapes(config).items():
        leaf = name.split(".")[-1]
        if leaf == "gain":
            params[name] = np.ones(shape)
        elif leaf in ("bias", "b_1", "b_2"):
            params[name] = np.zeros(shape)
        else:
            std = 0.02 / math.sqrt(2 * config.n_layers) if leaf in ("W_o", "W_2") else 0.02
            params[name] = rng.normal(0.0, std, size=shape)
    return params


def check_parameters(params: Mapping[str, np.ndarray], config: Config) -> dict[str, np.ndarray]:
    """Return the parameters as float arrays after checking that every name is present with its shape.

    Raises
    ------
    ValueError
        Naming the first parameter that is missing, not real or of the wrong shape, or an unexpected name.
    """
    shapes = parameter_shapes(config)
    extra = sorted(set(params) - set(shapes))
    if extra:
        raise ValueError(f"params has names the model does not use: {extra}")
    checked = {}
    for name, shape in shapes.items():
        if name not in params:
            raise ValueError(f"params is missing {name!r} (shape {shape})")
        array = as_float_array(f"params[{name!r}]", params[name], min_ndim=len(shape), expected=str(shape))
        if array.shape != shape:
            raise ValueError(f"params[{name!r}] must have shape {shape}; received shape {array.shape}")
        checked[name] = array
    return checked


def layer_norm(x, gain, bias, eps=1e-5):
    """LayerNorm over the last axis (Ba et al. 2016): gain ⊙ (x − μ) / √(σ² + ε) + bias, σ² biased.

    Parameters
    ----------
    x : array_like, shape (..., d), float
    gain, bias : array_like, shape (d,), float
    eps : float, default 1e-5
        Added to the variance inside the square root.

    Returns
    -------
    numpy.ndarray, shape (..., d)

    Raises
    ------
    ValueError
        If ``gain`` or ``bias`` does not have shape (d,) for d = x.shape[-1].
    """
    x = as_float_array("x", x, min_ndim=1, expected="(..., d)")
    for name, value in (("gain", gain), ("bias", bias)):
        if np.shape(value) != (x.shape[-1],):
            raise ValueError(f"{name} must have shape (d,) = ({x.shape[-1]},) with d from x; "
                             f"received shape {np.shape(value)}")
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)   # biased: ÷ d, as torch.nn.LayerNorm
    return (x - mean) / np.sqrt(variance + eps) * gain + bias


def gelu(x):
    """GELU, tanh approximation (GPT-2): ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))).

    Parameters
    ----------
    x : array_like, float

    Returns
    -------
    numpy.ndarray, shape of ``x``
    """
    x = np.asarray(x, dtype=float)
    return 0.5 * x * (1.0 + np.tanh(_GELU_C * x * (1.0 + 0.044715 * x * x)))   # x·x·x: ``** 3`` is 5x slower


def split_heads(x: np.ndarray, n_heads: int) -> np.ndarray:
    """Split the feature axis into heads, as assignment 2 (with leading batch axes allowed).

    Parameters
    ----------
    x : numpy.ndarray, shape (..., T, d_model), float
    n_heads : int
        Divides d_model.

    Returns
    -------
    numpy.ndarray, shape (..., n_heads, T, d_head)
        Head h holds columns h·d_head … (h+1)·d_head − 1 of every token row.
    """
    *lead, T, d_model = x.shape
    return np.swapaxes(x.reshape(*lead, T, n_heads, d_model // n_heads), -3, -2)


def merge_heads(h: np.ndarray) -> np.ndarray:
    """Concatenate the heads along the features, the inverse of :func:`split_heads`.

    Parameters
    ----------
    h : numpy.ndarray, shape (..., n_heads, T, d_head), float

    Returns
    -------
    numpy.ndarray, shape (..., T, n_heads · d_head)
    """
    *lead, n_heads, T, d_head = h.shape
    return np.swapaxes(h, -3, -2).reshape(*lead, T, n_heads * d_head)


def causal_mask(T_q: int, T_k: int) -> np.ndarray:
    """Causal mask for T_q new queries over T_k keys, aligned bottom-right (assignment 5).

    Parameters
    ----------
    T_q, T_k : int
        Queries and keys, 1 ≤ T_q ≤ T_k; the queries are the last T_q positions.

    Returns
    -------
    numpy.ndarray of bool, shape (T_q, T_k)
        True where query i (position T_k − T_q + i) may attend to key j, i.e. j ≤ T_k − T_q + i.
    """
    return np.tril(np.ones((T_q, T_k), dtype=bool), k=T_k - T_q)


def attention_weights(Q: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Causal attention weights softmax(mask(Q Kᵀ / √d_head)) (Vaswani et al. 2017, eq. 1).

    Parameters
    ----------
    Q : numpy.ndarray, shape (..., T_q, d_head), float
    K : numpy.ndarray, shape (..., T_k, d_head), float
        T_q ≤ T_k; the queries are the last T_q positions (:func:`causal_mask`).

    Returns
    -------
    numpy.ndarray, shape (..., T_q, T_k)
        Rows sum to 1; blocked (future) keys get exactly 0.
    """
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    scores = np.where(causal_mask(Q.shape[-2], K.shape[-2]), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


class LayerCache(NamedTuple):
    """Keys and values of one layer for every earlier position, each (..., n_heads, T_past, d_head)."""

    K: np.ndarray
    V: np.ndarray


def causal_self_attention(h, W_q, W_k, W_v, W_o, n_heads, cache: LayerCache | None = None, head_mask=None):
    """Causal multi-head self-attention of new positions over a cache and themselves.

    Parameters
    ----------
    h : numpy.ndarray, shape (..., T_new, d_model)
        The (layer-normed) inputs of the new positions.
    W_q, W_k, W_v, W_o : numpy.ndarray, shape (d_model, d_model)
    n_heads : int
    cache : LayerCache, optional
        Keys and values of the T_past earlier positions; None means T_past = 0.
    head_mask : array_like, shape (n_heads,), optional
        Multiplies each head's output before W_o (1 keeps, 0 ablates a head).

    Returns
    -------
    out : numpy.ndarray, shape (..., T_new, d_model)
    weights : numpy.ndarray, shape (..., n_heads, T_new, T_past + T_new)
    cache : LayerCache
        The cache with the new positions appended.
    """
    Q, K, V = (split_heads(h @ W, n_heads) for W in (W_q, W_k, W_v))
    if cache is not None:
        K = np.concatenate([cache.K, K], axis=-2)
        V = np.concatenate([cache.V, V], axis=-2)
    weights = attention_weights(Q, K)
    heads = weights @ V
    if head_mask is not None:
        heads = heads * np.asarray(head_mask, dtype=float)[:, None, None]
    return merge_heads(heads) @ W_o, weights, LayerCache(K, V)


def mlp(h, W_1, b_1, W_2, b_2):
    """The position-wise MLP: GELU(h W₁ + b₁) W₂ + b₂ (tanh GELU).

    Parameters
    ----------
    h : numpy.ndarray, shape (..., T, d_model), float
    W_1 : numpy.ndarray, shape (d_model, d_mlp); b_1 : shape (d_mlp,)
    W_2 : numpy.ndarray, shape (d_mlp, d_model); b_2 : shape (d_model,)

    Returns
    -------
    numpy.ndarray, shape (..., T, d_model)
    """
    return gelu(h @ W_1 + b_1) @ W_2 + b_2


def decoder_block(x, params: Mapping[str, np.ndarray], layer: int, config: Config,
                  cache: LayerCache | None = None, head_mask=None):
    """One pre-LN block: x + MultiHead(LN₁(x)), then + MLP(LN₂(·)).

    Parameters
    ----------
    x : numpy.ndarray, shape (..., T_new, d_model), float
        The residual stream of the new positions.
    params : mapping of str to numpy.ndarray
        The model's parameters; this block reads ``"block{layer}.*"``.
    layer : int
        Which block, 0 … n_layers − 1.
    config : Config
    cache : LayerCache, optional
        Keys and values of the earlier positions in this layer.
    head_mask : array_like, shape (n_heads,), optional
        Multiplies each head's output (0 ablates it).

    Returns
    -------
    x : numpy.ndarray, shape of the input
    weights : numpy.ndarray, shape (..., n_heads, T_new, T_past + T_new)
    cache : LayerCache
    """
    p = f"block{layer}."
    h = layer_norm(x, params[p + "ln1.gain"], params[p + "ln1.bias"], config.ln_eps)
    attended, weights, cache = causal_self_attention(h, params[p + "W_q"], params[p + "W_k"], params[p + "W_v"],
                                                     params[p + "W_o"], config.n_heads, cache, head_mask)
    x = x + attended
    h = layer_norm(x, params[p + "ln2.gain"], params[p + "ln2.bias"], config.ln_eps)
    return x + mlp(h, params[p + "W_1"], params[p + "b_1"], params[p + "W_2"], params[p + "b_2"]), weights, cache


class ForwardResult(NamedTuple):
    """What :func:`forward` returns."""

    logits: np.ndarray                 #: (..., T_new, vocab_size)
    cache: tuple[LayerCache, ...]      #: one per layer, including the new positions
    weights: tuple[np.ndarray, ...]    #: one per layer, (..., n_heads, T_new, T_past + T_new)


def _tokens(tokens, config: Config) -> np.ndarray:
    array = np.asarray(tokens)
    if array.dtype.kind not in "iu" or array.ndim not in (1, 2) or array.shape[-1] == 0:
        raise ValueError(f"tokens must be integer token ids of shape (T,) or (B, T) with T >= 1; received "
                         f"dtype {array.dtype} and shape {array.shape}")
    if array.min() < 0 or array.max() >= config.vocab_size:
        raise ValueError(f"tokens must be ids in [0, {config.vocab_size - 1}] (vocab_size = {config.vocab_size}); "
                         f"received values from {array.min()} to {array.max()}")
    return array.astype(np.int64)


def forward(params: Mapping[str, np.ndarray], tokens, config: Config, cache=None, head_mask=None) -> ForwardResult:
    """Logits of the next token at every new position, optionally continuing from a KV cache.

    Parameters
    ----------
    params : mapping of str to numpy.ndarray
        As :func:`parameter_shapes` (checked by :func:`check_parameters`).
    tokens : array_like of int, shape (T_new,) or (B, T_new)
        The new tokens; with a cache of T_past positions they sit at
        positions T_past … T_past + T_new − 1.
    config : Config
    cache : sequence of LayerCache, optional
        One per layer, from an earlier call on the preceding tokens.
    head_mask : array_like, shape (n_layers, n_heads), optional
        Multiplies each head's output (0 ablates the head); None keeps all.

    Returns
    -------
    ForwardResult
        ``logits[..., i, :]`` scores the token that follows new position i.

    Raises
    ------
    ValueError
        If the tokens are not integer ids in range, the sequence would be
        longer than ``block_size``, the cache does not have one entry per
        layer, or a parameter is missing or misshapen.
    """
    params = check_parameters(params, config)
    tokens = _tokens(tokens, config)
    T_past = 0 if cache is None else cache[0].K.shape[-2]
    if cache is not None and len(cache) != config.n_layers:
        raise ValueError(f"cache must hold one LayerCache per layer ({config.n_layers}); received {len(cache)}")
    T_new = tokens.shape[-1]
    if T_past + T_new > config.block_size:
        raise ValueError(f"the sequence would have {T_past + T_new} positions; the model reads at most "
                         f"block_size = {config.block_size}")
    if head_mask is not None:
        head_mask = np.asarray(head_mask, dtype=float)
        if head_mask.shape != (config.n_layers, config.n_heads):
            raise ValueError(f"head_mask must have shape (n_layers, n_heads) = ({config.n_layers}, "
                             f"{config.n_heads}); received shape {head_mask.shape}")
    x = params["W_emb"][tokens] + params["W_pos"][T_past:T_past + T_new]
    caches, weights = [], []
    for layer in range(config.n_layers):
        x, w, layer_cache = decoder_block(x, params, layer, config, None if cache is None else cache[layer],
                                          None if head_mask is None else head_mask[layer])
        caches.append(layer_cache)
        weights.append(w)
    h = layer_norm(x, params["ln_f.gain"], params["ln_f.bias"], config.ln_eps)
    return ForwardResult(h @ params["W_out"], tuple(caches), tuple(weights))


# ---------------------------------------------------------------- generation

def _check_generation(prompt, n_new, config: Config) -> tuple[np.ndarray, int]:
    prompt = _tokens(prompt, config)
    if prompt.ndim != 1:
        raise ValueError(f"prompt must be one sequence of token ids, shape (T,); received shape {prompt.shape}")
    if isinstance(n_new, (bool, np.bool_)) or not isinstance(n_new, (int, np.integer)) or n_new < 0:
        raise ValueError(f"n_new must be an integer >= 0; received {n_new!r}")
    if prompt.size + n_new > config.block_size:
        raise ValueError(f"prompt ({prompt.size} tokens) + n_new ({n_new}) exceeds block_size = "
                         f"{config.block_size}: the model has no position embedding beyond it")
    return prompt, int(n_new)


def _next_logits(params, config: Config, use_cache: bool):
    """A function ``step(sequence, new) -> logits of the last position`` that uses a cache or recomputes."""
    state = {"cache": None}

    def step(sequence: np.ndarray, new: np.ndarray) -> np.ndarray:
        if use_cache:
            result = forward(params, new, config, cache=state["cache"])
            state["cache"] = result.cache
        else:
            result = forward(params, sequence, config)
        return result.logits[-1]

    return step


def sample_token(logits, temperature, u):
    """Draw one token by the inverse-CDF rule from softmax(logits / temperature) with a given uniform number.

    p = softmax(logits / temperature), c_i = p_0 + … + p_i (``numpy.cumsum``);
    the token is the **smallest i with u < c_i**. If rounding leaves
    u ≥ c_{V−1}, the token is the last one with p_i > 0.

    Parameters
    ----------
    logits : array_like, shape (vocab_size,), float
    temperature : float
        Positive and finite; smaller is greedier.
    u : float
        Uniform random number in [0, 1).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``logits`` is not a finite 1-D array, ``temperature`` is not a
        positive finite number, or ``u`` is not in [0, 1).
    """
    logits = as_float_array("logits", logits, min_ndim=1, expected="(vocab_size,)")
    if logits.ndim != 1 or not np.all(np.isfinite(logits)):
        raise ValueError(f"logits must be a finite 1-D array (vocab_size,); received shape {logits.shape}")
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(temperature, (int, float, np.integer,
                                                                                np.floating)) \
            or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a positive finite number; received {temperature!r}")
    if isinstance(u, (bool, np.bool_)) or not isinstance(u, (int, float, np.integer, np.floating)) \
            or not 0 <= u < 1:
        raise ValueError(f"u must be a uniform random number in [0, 1); received {u!r}")
    z = logits / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    cdf = np.cumsum(p)
    index = int(np.searchsorted(cdf, u, side="right"))   # smallest i with u < cdf[i]
    return index if index < p.size else int(np.flatnonzero(p > 0)[-1])


def generate(params, config: Config, prompt, n_new, *, temperature=None, uniforms=None, use_cache=True):
    """Continue ``prompt`` by ``n_new`` tokens: greedily (``temperature=None``) or by sampling.

    Greedy: the next token is ``argmax`` of the last position's logits
    (NumPy's rule: the lowest index among equal maxima; graded prompts keep
    the top-2 margin ≥ 1e-6, :func:`greedy_margins`). Sampling: token k is
    :func:`sample_token` of the logits with ``uniforms[k]``.

    Parameters
    ----------
    params : mapping of str to numpy.ndarray
    config : Config
    prompt : array_like of int, shape (T_prompt,), T_prompt ≥ 1
    n_new : int
        Tokens to add, ≥ 0; T_prompt + n_new ≤ block_size.
    temperature : float, optional
        None for greedy decoding; otherwise positive.
    uniforms : array_like, shape (n_new,), optional
        The uniform numbers in [0, 1) for sampling (required with a temperature).
    use_cache : bool, default True
        Feed only the new token each step, with the KV cache (same tokens as without it).

    Returns
    -------
    numpy.ndarray of int64, shape (T_prompt + n_new,)
        The prompt followed by the generated tokens.

    Raises
    ------
    ValueError
        If the prompt is not a 1-D sequence of ids in range, ``n_new`` is
        negative or too large, or ``uniforms`` is missing or not (n_new,)
        when sampling.
    """
    prompt, n_new = _check_generation(prompt, n_new, config)
    if temperature is not None:
        if uniforms is None or np.shape(uniforms) != (n_new,):
            raise ValueError(f"uniforms must have shape (n_new,) = ({n_new},) when sampling; received "
                             f"{None if uniforms is None else np.shape(uniforms)}")
        uniforms = np.asarray(uniforms, dtype=float)
    elif uniforms is not None:
        raise ValueError("uniforms are only used when sampling: pass a temperature, or no uniforms")
    step = _next_logits(params, config, use_cache)
    sequence = prompt.copy()
    new = prompt
    for k in range(n_new):
        logits = step(sequence, new)
        token = int(np.argmax(logits)) if temperature is None else sample_token(logits, temperature, uniforms[k])
        sequence = np.append(sequence, token)
        new = sequence[-1:]
    return sequence


def greedy_margins(params, config: Config, prompt, n_new) -> np.ndarray:
    """Top-1 minus top-2 logit at each greedy step (shape (n_new,)): how far each argmax is from a tie.

    A hidden prompt is usable for exact grading of greedy generation when
    every margin is at least 1e-6 (:func:`check_greedy_margin`): rounding
    differences between correct implementations (~1e-12) cannot then flip a token.
    """
    prompt, n_new = _check_generation(prompt, n_new, config)
    step = _next_logits(params, config, use_cache=True)
    sequence, new, margins = prompt.copy(), prompt, []
    for _ in range(n_new):
        logits = step(sequence, new)
        top2 = np.sort(logits)[-2:]
        margins.append(top2[1] - top2[0])
        sequence = np.append(sequence, int(np.argmax(logits)))
        new = sequence[-1:]
    return np.array(margins)


def check_greedy_margin(params, config: Config, prompt, n_new, minimum=1e-6) -> None:
    """Raise ValueError unless every greedy step of ``prompt`` has a top-2 logit margin ≥ ``minimum``."""
    margins = greedy_margins(params, config, prompt, n_new)
    if margins.size and margins.min() < minimum:
        step = int(np.argmin(margins))
        raise ValueError(f"greedy step {step} of this prompt has a top-2 logit margin of {margins[step]:.3g} "
                         f"< {minimum:g}: a correct implementation could pick either token")


def sampling_margins(params, config: Config, prompt, uniforms, temperature) -> np.ndarray:
    """Distance of each uniform number from the nearest CDF boundary of its step: min_i |u_k − c_i|.

    Exact grading of sampling needs these well above rounding (≥ 1e-9):
    then every correct implementation of :func:`sample_token` picks the same token.
    """
    prompt, n_new = _check_generation(prompt, len(uniforms), config)
    step = _next_logits(params, config, use_cache=True)
    sequence, new, margins = prompt.copy(), prompt, []
    for u in np.asarray(uniforms, dtype=float):
        logits = step(sequence, new)
        z = logits / temperature
        p = np.exp(z - z.max())
        cdf = np.cumsum(p / p.sum())
        margins.append(float(np.min(np.abs(cdf[:-1] - u))) if cdf.size > 1 else 1.0)
        sequence = np.append(sequence, sample_token(logits, temperature, u))
        new = sequence[-1:]
    return np.array(margins)


# ---------------------------------------------------------------- weights on disk

def save_weights(params: Mapping[str, np.ndarray], config: Config, path: Path = WEIGHTS_FILE,
                 training: Mapping | None = None, training_path: Path = TRAINING_FILE) -> None:
    """Write the parameters (``.npz``, float64) and a JSON with the config and the training summary."""
    params = check_parameters(params, config)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **params)
    summary = {"config": asdict(config), **(dict(training) if training else {})}
    training_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def load_weights(path: Path = WEIGHTS_FILE, training_path: Path = TRAINING_FILE) -> tuple[dict[str, np.ndarray],
                                                                                           Config]:
    """The committed parameters and their :class:`Config`.

    Raises
    ------
    ValueError
        If the file does not hold exactly the parameters the config describes.
    """
    config = Config(**json.loads(training_path.read_text(encoding="utf-8"))["config"])
    with np.load(path) as stored:
        params = {name: stored[name] for name in stored.files}
    return check_parameters(params, config), config
