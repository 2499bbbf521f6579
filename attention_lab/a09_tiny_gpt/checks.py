"""Visible self-checks for assignment 9 (the tiny-GPT capstone), run on the learner's functions.

Each check first runs the function on the assignment's worked cases (numbers stored in the package, see
:mod:`attention_lab.core.worked`; a tiny one-layer model whose numbers fit on a line), which names a known
mistake when the result matches one, and then tests properties every correct answer has, in plain words:
LayerNorm's rows have mean 0 and variance 1 before gain and bias; GELU and the MLP equal their formulas written
out here; attention over a cache equals attention over the whole sequence (in every layer, with the trained
weights); the trained model predicts a repeated block; sampling follows the inverse-CDF rule in token-id order;
generation gives the same tokens with and without the cache. No reference implementation of a learner's function
is involved. The checks award no points: the hidden tests do the grading.
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping

import numpy as np

from attention_lab.core.self_check import call, fail, float_array, ok, self_check

ASSIGNMENT = "09_tiny_gpt"
CLOSE = 1e-5  # float32 LayerNorm and GELU are accepted: a relative 1e-5 separates them from the named mistakes

_self_check = functools.partial(self_check, ASSIGNMENT)
_array = functools.partial(float_array, sep=", but ", finite=True)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GPT-2's tanh approximation of GELU (Hendrycks & Gimpel 2016, §2), the formula the checkpoint uses."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _close(what: str, got: np.ndarray, expected: np.ndarray, formula: str, rtol: float = CLOSE,
           atol: float = 1e-6) -> None:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not np.allclose(got, expected, rtol=rtol, atol=atol):
        error = float(np.max(np.abs(got - expected)))
        fail(f"{what} differs from {formula} by up to {error:.3g}")


def _pair(what: str, value) -> tuple:
    __tracebackhide__ = True
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        got = f"{len(value)} values" if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
        fail(f"{what} should return two values, but it returned {got}")
    return tuple(value)


def _cache(what: str, value, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    __tracebackhide__ = True
    K, V = _pair(what, value)
    return _array(f"the key cache of {what}", K, shape), _array(f"the value cache of {what}", V, shape)


# ---------------------------------------------------------------- step 0
def check_from_earlier_assignments(softmax: Callable, scaled_dot_product_attention: Callable,
                                   causal_mask: Callable) -> None:
    """Self-check the functions pasted from assignments 1 and 5: assignment 8's worked cases of them, then the heads.

    Parameters
    ----------
    softmax, scaled_dot_product_attention, causal_mask : callable
        As pasted in assignment 8 (assignment 1's, and assignment 5's bottom-right ``causal_mask(T_q, T_k)``),
        checked as there (:func:`attention_lab.a08_modern_attention.checks.check_batched_causal_attention`) with
        two heads as the leading axis.

    Raises
    ------
    SelfCheckFailed
        At the first worked case that fails, or when attention over two heads does not give rows of weights that
        sum to 1 with the blocked key at exactly 0.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    from attention_lab.a08_modern_attention.checks import check_batched_causal_attention
    from attention_lab.core.worked import check_worked_cases

    for name, function in (("softmax", softmax), ("scaled_dot_product_attention", scaled_dot_product_attention),
                           ("causal_mask", causal_mask)):
        check_worked_cases("08_modern_attention", name, function)  # the same functions, pasted there too
    check_batched_causal_attention(scaled_dot_product_attention, causal_mask, np.random.default_rng(90), "2 heads")
    ok("attention over 2 heads with the bottom-right causal mask")


# ---------------------------------------------------------------- step 1
@_self_check
def check_layer_norm(layer_norm: Callable) -> None:
    """Self-check ``layer_norm(x, gain, bias, eps)``: worked cases, then the normalised rows' mean and variance.

    The learner's function: ``x`` (..., d) float, ``gain`` and ``bias`` (d,), ``eps``; returns the rows of x
    normalised over their last axis, times gain, plus bias (same shape).

    Fails when the result has another shape, a row does not have mean 0 and (biased) variance 1 before gain and
    bias, gain and bias are not applied per feature, or ε is not inside the root.
    """
    rng = np.random.default_rng(91)
    x = rng.normal(2.0, 3.0, size=(4, 6))
    what = "layer_norm on 4 rows of 6 features with gain 1 and bias 0"
    y = _array(what, call(layer_norm, x, np.ones(6), np.zeros(6)), x.shape)
    if not np.allclose(y.mean(axis=-1), 0.0, atol=1e-6):
        fail(f"{what}: every row should have mean 0 (LayerNorm centres each token over its own features, the last "
             "axis)")
    variance = (y ** 2).mean(axis=-1)
    if not np.allclose(variance, 1.0, rtol=1e-3):
        fail(f"{what}: every row should have variance (÷ d) about 1, but it is {np.round(variance, 4)}"
             + (" — that is (d − 1)/d: divide by d, not d − 1" if np.allclose(variance, 5 / 6, rtol=1e-3) else ""))
    gain, bias = rng.normal(size=6), rng.normal(size=6)
    _close("layer_norm with a gain and a bias", _array("layer_norm with a gain and a bias",
                                                       call(layer_norm, x, gain, bias), x.shape), y * gain + bias,
           "gain × (the normalised rows) + bias")
    flat = np.array([[0.0, 0.0, 0.0, 2e-3]])  # variance 7.5e-7, below ε
    expected = (flat - flat.mean()) / np.sqrt(flat.var() + 1e-5)
    _close("layer_norm on a nearly constant row", _array("layer_norm on a nearly constant row",
                                                         call(layer_norm, flat, np.ones(4), np.zeros(4), 1e-5),
                                                         flat.shape), expected, "(x − μ) / √(σ² + ε)")
    ok("rows of mean 0 and variance 1, gain and bias per feature, ε inside the root")


# ---------------------------------------------------------------- step 2
@_self_check
def check_gelu(gelu: Callable) -> None:
    """Self-check ``gelu(x)``: worked cases, then the tanh form on x from −6 to 6.

    The learner's function: ``x`` float array of any shape; returns GELU(x), tanh form, elementwise.

    Fails when the result has another shape or differs from ½ x (1 + tanh(√(2/π)(x + 0.044715 x³))) by more
    than 1e-6.
    """
    x = np.linspace(-6.0, 6.0, 49).reshape(7, 7)
    y = _array("gelu on a (7, 7) grid from −6 to 6", call(gelu, x), x.shape)
    _close("gelu", y, _gelu_tanh(x), "½ x (1 + tanh(√(2/π) (x + 0.044715 x³)))", rtol=1e-6)
    ok("½ x (1 + tanh(√(2/π) (x + 0.044715 x³))) on x from −6 to 6, any shape")


# ---------------------------------------------------------------- step 3
@_self_check
def check_mlp(mlp: Callable) -> None:
    """Self-check ``mlp(x, W_1, b_1, W_2, b_2)``: worked cases, then the formula on random sizes.

    The learner's function: ``x`` (T, d_model), ``W_1`` (d_model, d_mlp), ``b_1`` (d_mlp,), ``W_2`` (d_mlp,
    d_model), ``b_2`` (d_model,); returns (T, d_model).

    Fails when the result has another shape or differs from GELU(x W_1 + b_1) W_2 + b_2 (tanh GELU).
    """
    rng = np.random.default_rng(93)
    x, W_1, b_1, W_2, b_2 = (rng.normal(size=s) for s in ((3, 4), (4, 10), (10,), (10, 4), (4,)))
    y = _array("mlp on 3 rows, d_model 4, 10 hidden units", call(mlp, x, W_1, b_1, W_2, b_2), (3, 4))
    _close("mlp", y, _gelu_tanh(x @ W_1 + b_1) @ W_2 + b_2, "GELU(x W_1 + b_1) W_2 + b_2")
    ok("GELU(x W_1 + b_1) W_2 + b_2")


# ---------------------------------------------------------------- step 4
def _multi_head(h, W_q, W_k, W_v, W_o, n_heads):
    """Causal multi-head self-attention written out head by head (Vaswani et al. 2017, §3.2.2, eq. 1)."""
    T, d = h.shape
    d_head = d // n_heads
    out = np.zeros((T, d))
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        q, k, v = h @ W_q[:, cols], h @ W_k[:, cols], h @ W_v[:, cols]
        scores = np.where(np.tril(np.ones((T, T), dtype=bool)), q @ k.T / np.sqrt(d_head), -np.inf)
        w = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out += (w / w.sum(axis=-1, keepdims=True)) @ v @ W_o[cols]
    return out


@_self_check
def check_causal_attention(causal_attention: Callable) -> None:
    """Self-check ``causal_attention``: worked cases, then the formula and decoding with the cache.

    The learner's function: ``h`` (T_new, d_model), ``W_q``, ``W_k``, ``W_v``, ``W_o`` (d_model, d_model),
    ``n_heads``, ``cache`` None or (K, V) of shape (n_heads, T_past, d_head); returns (output (T_new, d_model),
    (K, V) of shape (n_heads, T_past + T_new, d_head)).

    Fails when the output differs from causal multi-head attention written out head by head, or when feeding a
    sequence in two parts (the second over the first's cache) does not give the same rows and cache.
    """
    rng = np.random.default_rng(94)
    h = rng.normal(size=(7, 6))
    W = [rng.normal(0, 0.5, (6, 6)) for _ in range(4)]
    what = "causal_attention on 7 tokens, d_model 6, 3 heads"
    out, cache = _pair(what, call(causal_attention, h, *W, 3))
    out = _array(f"the output of {what}", out, (7, 6))
    K, V = _cache(what, cache, (3, 7, 2))
    _close(what, out, _multi_head(h, *W, 3), "causal multi-head attention written out head by head")
    first, past = _pair("causal_attention on the first 4 tokens", call(causal_attention, h[:4], *W, 3))
    _cache("causal_attention on the first 4 tokens", past, (3, 4, 2))
    what = "causal_attention on tokens 4–6 over the cache of tokens 0–3"
    rest, grown = _pair(what, call(causal_attention, h[4:], *W, 3, cache=past))
    rest = _array(f"the output of {what}", rest, (3, 6))
    K2, V2 = _cache(what, grown, (3, 7, 2))
    _close(what, rest, out[4:], "the last 3 rows of attention over all 7 tokens (is the mask bottom-right?)")
    _close(f"the cache of {what}", np.stack([K2, V2]), np.stack([K, V]), "the cache of all 7 tokens at once "
           "(append along the positions, axis 1)")
    ok("causal multi-head attention, and the same rows and cache when decoded over a cache")


# ---------------------------------------------------------------- step 5
@_self_check
def check_decoder_block(decoder_block: Callable, params: Mapping[str, np.ndarray]) -> None:
    """Self-check ``decoder_block``: worked cases, then the trained block 1 fed whole and in two parts.

    The learner's function: ``x`` (T_new, d_model), ``params`` (the weights' dict), ``layer``, ``n_heads``, ``eps``,
    ``cache``; returns (x (T_new, d_model), (K, V) of shape (n_heads, T_past + T_new, d_head)).

    Fails when the block changes the shape, or feeding 9 embedded tokens in two parts (the second over the first's
    cache) does not give the same rows and cache as feeding them at once.
    """
    tokens = np.array([0, 4, 11, 2, 4, 11, 2, 4, 11])
    x = params["W_emb"][tokens] + params["W_pos"][:9]
    n_heads, d_head = 2, x.shape[1] // 2
    what = "decoder_block(x, params, 1, 2) on 9 embedded tokens"
    out, cache = _pair(what, call(decoder_block, x, params, 1, n_heads))
    out = _array(f"the output of {what}", out, x.shape)
    K, V = _cache(what, cache, (n_heads, 9, d_head))
    _, past = _pair("decoder_block on the first 5 tokens", call(decoder_block, x[:5], params, 1, n_heads))
    what = "decoder_block on tokens 5–8 over the cache of tokens 0–4"
    rest, grown = _pair(what, call(decoder_block, x[5:], params, 1, n_heads, 1e-5, past))
    _close(what, _array(f"the output of {what}", rest, (4, x.shape[1])), out[5:], "the last 4 rows of the block on "
           "all 9 tokens", atol=1e-5)
    K2, V2 = _cache(what, grown, (n_heads, 9, d_head))
    _close(f"the cache of {what}", np.stack([K2, V2]), np.stack([K, V]), "the cache of all 9 tokens at once",
           atol=1e-5)
    ok("the trained block 1 gives the same rows and cache fed whole and over a cache")


# ---------------------------------------------------------------- step 6
@_self_check
def check_model_forward(model_forward: Callable, params: Mapping[str, np.ndarray], config: Mapping) -> None:
    """Self-check ``model_forward``: worked cases, then the trained model on a repeated block, whole and cached.

    The learner's function: ``params``, ``tokens`` (T_new,) ints, ``config``, ``caches`` None or one (K, V) per
    layer; returns (logits (T_new, vocab_size), the list of the layers' caches).

    Fails when the logits have another shape, the trained model does not predict the repeats of a block (it gets
    100 % of them right with a correct forward pass), or feeding the sequence in two parts does not give the same
    logits as feeding it at once.
    """
    tokens = [0, 5, 9, 2, 14, 5, 9, 2, 14, 5, 9]
    what = "model_forward on [0, 5, 9, 2, 14, 5, 9, 2, 14, 5, 9]"
    logits, caches = _pair(what, call(model_forward, params, tokens, config))
    logits = _array(f"the logits of {what}", logits, (len(tokens), config["vocab_size"]))
    if not isinstance(caches, (list, tuple)) or len(caches) != config["n_layers"]:
        fail(f"{what} should return a list of {config['n_layers']} caches, one per layer")
    predicted = logits.argmax(axis=-1)[4:-1]
    if not np.array_equal(predicted, tokens[5:]):
        fail(f"{what}: after the first block the trained model should predict the repeats {tokens[5:]}, but its "
             f"argmax gives {predicted.tolist()}")
    _, past = _pair("model_forward on the first 6 tokens", call(model_forward, params, tokens[:6], config))
    what = "model_forward on tokens 6–10 over the caches of tokens 0–5"
    rest, _ = _pair(what, call(model_forward, params, tokens[6:], config, past))
    _close(what, _array(f"the logits of {what}", rest, (5, config["vocab_size"])), logits[6:],
           "the last 5 rows of the logits of all 11 tokens (positions after the cache?)", rtol=1e-4, atol=1e-4)
    ok("the trained model predicts the repeated block, and decoding over the caches gives the same logits")


# ---------------------------------------------------------------- step 7
def _inverse_cdf(logits: np.ndarray, temperature: float, u: float) -> int:
    """The smallest i with u < p_0 + … + p_i, p = softmax(logits / temperature), in token-id order."""
    p = np.exp((logits - logits.max()) / temperature)
    cdf = np.cumsum(p / p.sum())
    above = np.flatnonzero(u < cdf)
    return int(above[0]) if above.size else len(cdf) - 1


@_self_check
def check_next_token(next_token: Callable) -> None:
    """Self-check ``next_token``: worked cases, then greedy and the inverse-CDF rule for many u.

    The learner's function: ``logits`` (vocab_size,), ``temperature`` None or > 0, ``u`` in [0, 1); returns an int.

    Fails when the greedy token is not the first largest logit, or a sampled token is not the smallest i with
    u < cdf[i] in token-id order, for u from 0 to 0.99 and temperatures 0.5, 1 and 2.
    """
    logits = np.array([0.5, -1.0, 2.0, 1.5, 2.0, 0.0])
    got = call(next_token, logits)
    if isinstance(got, bool) or not isinstance(got, (int, np.integer)) or got != 2:
        fail(f"next_token({logits.tolist()}) (greedy) should be 2, the first of the largest logits; it is {got!r}")
    for temperature in (0.5, 1.0, 2.0):
        for u in np.linspace(0.0, 0.99, 34):
            got = call(next_token, logits, temperature, float(u))
            want = _inverse_cdf(logits, temperature, float(u))
            if got != want:
                fail(f"next_token(logits, temperature={temperature}, u={u:.3f}) should be token {want} (the smallest i "
                     f"with u < cdf[i], cdf in token-id order); it is {got!r}")
    ok("greedy is the first largest logit; sampling is the inverse CDF in token-id order at temperatures 0.5, 1, 2")


# ---------------------------------------------------------------- step 8
@_self_check
def check_generate(generate: Callable, params: Mapping[str, np.ndarray], config: Mapping) -> None:
    """Self-check ``generate``: worked cases, then the trained model with and without the cache.

    The learner's function: ``params``, ``config``, ``prompt`` (ints), ``n_new``, ``temperature``, ``uniforms``
    (n_new,), ``use_cache``; returns an integer array (len(prompt) + n_new,).

    Fails when the result is not an integer array starting with the prompt, the trained model does not continue a
    repeated block greedily, the tokens with and without the cache differ (greedy or sampled), or a sample does not
    depend on every uniform number.
    """
    prompt = [0, 3, 8, 12, 3]
    what = f"generate(params, config, {prompt}, 6)"
    tokens = call(generate, params, config, prompt, 6)
    if not isinstance(tokens, np.ndarray) or tokens.shape != (11,) or tokens.dtype.kind not in "iu":
        fail(f"{what} should return an integer NumPy array of 11 tokens; it returned {tokens!r}")
    if tokens[:5].tolist() != prompt:
        fail(f"{what} should start with the prompt {prompt}; it starts with {tokens[:5].tolist()}")
    if tokens[5:].tolist() != [8, 12, 3, 8, 12, 3]:
        fail(f"{what}: the trained model continues the block 3, 8, 12 greedily, [8, 12, 3, 8, 12, 3]; yours gives "
             f"{tokens[5:].tolist()}")
    uncached = call(generate, params, config, prompt, 6, use_cache=False)
    if not np.array_equal(uncached, tokens):
        fail(f"with use_cache=False, {what} gives {np.asarray(uncached).tolist()}: the cache must not change the tokens")
    uniforms = np.random.default_rng(98).random(8)
    sampled = [call(generate, params, config, [0, 7], 8, temperature=1.0, uniforms=uniforms, use_cache=c)
               for c in (True, False)]
    if not np.array_equal(sampled[0], sampled[1]):
        fail("sampled at temperature 1 from [0, 7], the tokens with the cache "
             f"{np.asarray(sampled[0]).tolist()} and without it {np.asarray(sampled[1]).tolist()} differ")
    repeated = call(generate, params, config, [0, 7], 8, temperature=1.0, uniforms=np.full(8, uniforms[0]))
    if np.array_equal(repeated, sampled[0]):
        fail("sampled from [0, 7] with 8 different uniform numbers and with the first one 8 times, generate gives the "
             f"same tokens {np.asarray(repeated).tolist()}: step k must draw with uniforms[k]")
    ok("the trained model continues a block; the same tokens with and without the cache, greedy and sampled")


# ---------------------------------------------------------------- the visible parts of the autograder cells
def expect_first_output_shape(function: Callable, shape: tuple, *args, **kwargs) -> None:
    """Visible part of an autograder cell: ``function`` returns a pair whose first item is an array of ``shape``.

    For the functions that return (output, cache): ``causal_attention``, ``decoder_block``, ``model_forward``. As
    :func:`attention_lab.a01_attention.checks.expect_shapes`, a failure that comes from another of the learner's
    course functions does not fail this check (each step is graded on its own), an unanswered function does.

    Parameters
    ----------
    function : callable
        The learner's function.
    shape : tuple of int
        The shape of the first returned item.
    *args, **kwargs
        Passed to ``function``.

    Raises
    ------
    SelfCheckFailed
        If the function raised in its own code, or did not return a pair whose first item has ``shape``.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    from attention_lab.a01_attention.checks import NOT_CHECKED, call_for_visible_part

    name = getattr(function, "__name__", "the function")
    result = call_for_visible_part(function, *args, **kwargs)
    if result is NOT_CHECKED:
        return
    first, _ = _pair(name, result)
    if not isinstance(first, np.ndarray) or first.shape != shape:
        got = f"shape {first.shape}" if isinstance(first, np.ndarray) else type(first).__name__
        fail(f"the first value {name} returns should be an array of shape {shape}; got {got}")


def expect_tokens(function: Callable, length: int, *args, **kwargs) -> None:
    """Visible part of ``generate``'s autograder cell: an integer array of ``length`` tokens (see above).

    Parameters
    ----------
    function : callable
        The learner's ``generate``.
    length : int
        len(prompt) + n_new.
    *args, **kwargs
        Passed to ``function``.

    Raises
    ------
    SelfCheckFailed
        If the function raised in its own code, or did not return an integer NumPy array of ``length`` tokens.
    """
    __tracebackhide__ = True
    from attention_lab.a01_attention.checks import NOT_CHECKED, call_for_visible_part

    result = call_for_visible_part(function, *args, **kwargs)
    if result is NOT_CHECKED:
        return
    if not isinstance(result, np.ndarray) or result.shape != (length,) or result.dtype.kind not in "iu":
        fail(f"{getattr(function, '__name__', 'generate')} should return an integer NumPy array of {length} tokens; "
             f"it returned {result!r}"[:300])
