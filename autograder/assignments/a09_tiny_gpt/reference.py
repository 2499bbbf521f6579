"""Reference solution for assignment 9 (the tiny-GPT capstone), in the learner's API.

The learner's functions take plain data: a parameter dict name → array (the
names of ``attention_lab/a09_tiny_gpt/weights.npz``), a ``config`` dict
``{"vocab_size", "block_size", "n_heads", "n_layers", "ln_eps"}`` and, per
layer, a KV cache that is a pair ``(K, V)`` of arrays (n_heads, T_past, d_head).
Each function here computes what the learner's function of the same name must
return, by the grader's model :mod:`autograder.assignments.a09_tiny_gpt.model`
(GPT-2's pre-LN layout, Radford et al. 2019; attention as Vaswani et al. 2017,
§3.2; the model, its conventions and the accepted alternatives are described
there and in DESIGN.md).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from . import model

__all__ = ["layer_norm", "gelu", "mlp", "causal_attention", "decoder_block", "model_forward", "next_token",
           "generate", "attention_weights", "model_config", "REFERENCE"]


def model_config(params: Mapping[str, np.ndarray], config: Mapping) -> model.Config:
    """The model's :class:`~autograder.assignments.a09_tiny_gpt.model.Config` for a learner ``config`` dict.

    Parameters
    ----------
    params : mapping of str to numpy.ndarray
        Needs ``W_emb`` (vocab_size, d_model), ``W_pos`` (block_size, d_model) and ``block0.W_1``
        (d_model, d_mlp).
    config : mapping
        ``n_heads``, ``n_layers`` and ``ln_eps`` (the other sizes are read from the arrays).

    Returns
    -------
    model.Config

    Raises
    ------
    KeyError
        If a parameter or config entry is missing.
    ValueError
        If the sizes are inconsistent (d_model not divisible by n_heads, ε not positive).
    """
    return model.Config(vocab_size=params["W_emb"].shape[0], block_size=params["W_pos"].shape[0],
                        d_model=params["W_emb"].shape[1], n_heads=int(config["n_heads"]),
                        n_layers=int(config["n_layers"]), d_mlp=params["block0.W_1"].shape[1],
                        ln_eps=float(config["ln_eps"]))


def _cache(pair):
    return None if pair is None else model.LayerCache(np.asarray(pair[0], dtype=float),
                                                      np.asarray(pair[1], dtype=float))


def _n_layers(params: Mapping[str, np.ndarray]) -> int:
    return 1 + max(int(name[len("block"):].split(".")[0]) for name in params if name.startswith("block"))


layer_norm = model.layer_norm
gelu = model.gelu
mlp = model.mlp


def causal_attention(h, W_q, W_k, W_v, W_o, n_heads, cache=None):
    """Causal multi-head self-attention of the new positions, over the cache and themselves.

    Parameters
    ----------
    h : array_like, shape (T_new, d_model), float
        LayerNorm-ed inputs of the new positions.
    W_q, W_k, W_v, W_o : array_like, shape (d_model, d_model), float
        Projections (no biases); heads are contiguous column blocks of d_head = d_model / n_heads.
    n_heads : int
    cache : tuple of two arrays of shape (n_heads, T_past, d_head), optional
        Keys and values of the earlier positions.

    Returns
    -------
    out : numpy.ndarray, shape (T_new, d_model), float64
        Concat(heads) W_o, each head softmax(q kᵀ / √d_head) v with the causal mask aligned
        bottom-right (the new queries are the last T_new of T_past + T_new positions).
    cache : tuple of two numpy.ndarray, shape (n_heads, T_past + T_new, d_head)

    Raises
    ------
    ValueError
        If the shapes do not agree (see :func:`model.causal_self_attention`).
    """
    out, _, grown = model.causal_self_attention(np.asarray(h, dtype=float), W_q, W_k, W_v, W_o, n_heads,
                                                _cache(cache))
    return out, (grown.K, grown.V)


def attention_weights(h, W_q, W_k, n_heads, cache_K=None):
    """The attention weights of one layer, per head (for maps and explorers).

    Parameters
    ----------
    h : array_like, shape (T_new, d_model), float
    W_q, W_k : array_like, shape (d_model, d_model), float
    n_heads : int
    cache_K : array_like, shape (n_heads, T_past, d_head), optional

    Returns
    -------
    numpy.ndarray, shape (n_heads, T_new, T_past + T_new), float64
        Row i of head h: how query position T_past + i spreads over key positions; rows sum to 1,
        zero above the causal diagonal.
    """
    h = np.asarray(h, dtype=float)
    Q = model.split_heads(h @ W_q, n_heads)
    K = model.split_heads(h @ W_k, n_heads)
    if cache_K is not None:
        K = np.concatenate([np.asarray(cache_K, dtype=float), K], axis=-2)
    return model.attention_weights(Q, K)


def decoder_block(x, params, layer, n_heads, eps=1e-5, cache=None):
    """One pre-LN decoder block: x + MultiHead(LN₁(x)), then + MLP(LN₂(x)).

    Parameters
    ----------
    x : array_like, shape (T_new, d_model), float
    params : mapping of str to numpy.ndarray
        The block's arrays are ``f"block{layer}.ln1.gain"`` … ``f"block{layer}.b_2"`` (the only ones read).
    layer : int
    n_heads : int
    eps : float
        LayerNorm's ε, inside the square root.
    cache : tuple (K, V), optional

    Returns
    -------
    x : numpy.ndarray, shape (T_new, d_model), float64
    cache : tuple of two numpy.ndarray, shape (n_heads, T_past + T_new, d_head)
    """
    p = f"block{layer}."
    # only the block's own arrays are read: its sizes come from them (a case may pass just this block's arrays)
    config = model.Config(d_model=params[p + "W_q"].shape[0], n_heads=int(n_heads), n_layers=int(layer) + 1,
                          d_mlp=params[p + "W_1"].shape[1], ln_eps=float(eps))
    out, _, grown = model.decoder_block(np.asarray(x, dtype=float), params, layer, config, _cache(cache))
    return out, (grown.K, grown.V)


def model_forward(params, tokens, config, caches=None):
    """Logits of every new position: embeddings, the blocks, the final LayerNorm and W_out.

    Parameters
    ----------
    params : mapping of str to numpy.ndarray
    tokens : array_like of int, shape (T_new,)
    config : mapping
        ``n_heads``, ``n_layers``, ``ln_eps``.
    caches : list of (K, V), one per layer, optional
        The new tokens sit at positions T_past … T_past + T_new − 1.

    Returns
    -------
    logits : numpy.ndarray, shape (T_new, vocab_size), float64
    caches : list of tuple (K, V), one per layer, each (n_heads, T_past + T_new, d_head)

    Raises
    ------
    ValueError
        If a token is out of range or the sequence is longer than block_size.
    """
    result = model.forward(params, np.asarray(tokens), model_config(params, config),
                           cache=None if caches is None else [_cache(c) for c in caches])
    return result.logits, [(c.K, c.V) for c in result.cache]


def next_token(logits, temperature=None, u=None):
    """Greedy argmax (``temperature=None``) or the inverse-CDF sample of softmax(logits / temperature).

    Parameters
    ----------
    logits : array_like, shape (vocab_size,), float
    temperature : float, optional
    u : float in [0, 1), needed when ``temperature`` is given

    Returns
    -------
    int
        The token id: the lowest index of the largest logit, or the smallest i with u < c_i,
        c = cumsum(p) in token-id order.
    """
    return int(np.argmax(logits)) if temperature is None else model.sample_token(logits, temperature, u)


def generate(params, config, prompt, n_new, temperature=None, uniforms=None, use_cache=True):
    """The prompt followed by ``n_new`` generated tokens (greedy, or sampled with ``uniforms[k]`` at step k).

    Parameters
    ----------
    params, config : as :func:`model_forward`
    prompt : array_like of int, shape (T_prompt,)
    n_new : int
        T_prompt + n_new must not exceed block_size.
    temperature : float, optional
    uniforms : array_like of float, shape (n_new,), optional
    use_cache : bool
        Decode with the KV cache (one new token per forward pass) or re-run the whole sequence;
        the tokens are the same.

    Returns
    -------
    numpy.ndarray of int, shape (T_prompt + n_new,)
    """
    return model.generate(params, model_config(params, config), prompt, n_new, temperature=temperature,
                          uniforms=uniforms, use_cache=use_cache)


#: Learner function name → its reference.
REFERENCE: dict[str, Callable] = {
    "layer_norm": layer_norm,
    "gelu": gelu,
    "mlp": mlp,
    "causal_attention": causal_attention,
    "decoder_block": decoder_block,
    "model_forward": model_forward,
    "next_token": next_token,
    "generate": generate,
}
