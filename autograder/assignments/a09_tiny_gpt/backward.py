"""Reference backward pass of the whole tiny GPT (for training the committed weights), by hand in NumPy.

The forward pass here is :func:`autograder.assignments.a09_tiny_gpt.model.forward`
written out step by step on a batch (B, T) with every intermediate kept on
a *tape*; :func:`backward` walks the tape in reverse (the chain rule). The
attention step reuses assignment 6's
:func:`~autograder.assignments.a06_gradients.reference.attention_backward`, so the
capstone is trained with the same gradient the learners derive.

Local derivatives (y is each step's output, dy = ∂L/∂y):

* matrix product y = h W (+ b): dW = Σ hᵀ dy, dh = dy Wᵀ, db = Σ dy;
* LayerNorm y = x̂ ⊙ g + b, x̂ = (x − μ) r, r = 1/√(σ² + ε):
  dx = r (dx̂ − mean(dx̂) − x̂ mean(dx̂ ⊙ x̂)) with dx̂ = dy ⊙ g;
  dg = Σ dy ⊙ x̂, db = Σ dy;
* GELU (tanh form) with t = tanh(c (x + 0.044715 x³)), c = √(2/π):
  GELU′(x) = ½ (1 + t) + ½ x (1 − t²) c (1 + 3 · 0.044715 x²);
* embeddings: row token_t of dW_emb and row t of dW_pos receive dx_t;
* cross-entropy averaged over the selected targets:
  dlogits = (softmax(logits) − onehot(target)) / n_selected.
"""

from __future__ import annotations

import math
from typing import Mapping, NamedTuple

import numpy as np

from ..a06_gradients.reference import attention_backward
from .model import (
    Config,
    _GELU_C,
    attention_weights,
    check_parameters,
    merge_heads,
    split_heads,
)


class _Norm(NamedTuple):
    xhat: np.ndarray
    rstd: np.ndarray


def _layer_norm(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> tuple[np.ndarray, _Norm]:
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    return xhat * gain + bias, _Norm(xhat, rstd)


def _layer_norm_backward(dy: np.ndarray, norm: _Norm, gain: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    dxhat = dy * gain
    dx = norm.rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                      - norm.xhat * (dxhat * norm.xhat).mean(axis=-1, keepdims=True))
    return dx, _sum_rows(dy * norm.xhat), _sum_rows(dy)


def _gelu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GELU (tanh form, as :func:`~autograder.assignments.a09_tiny_gpt.model.gelu`) and its tanh, which the derivative reuses."""
    t = np.tanh(_GELU_C * x * (1.0 + 0.044715 * x * x))
    return 0.5 * x * (1.0 + t), t


def _gelu_derivative(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * x * x)


def _sum_rows(a: np.ndarray) -> np.ndarray:
    """Sum over every axis but the last (batch and positions)."""
    return a.reshape(-1, a.shape[-1]).sum(axis=0)


def _weight_grad(h: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Σ over batch and positions of hᵀ dy: (d_in, d_out)."""
    return h.reshape(-1, h.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])


class Tape(NamedTuple):
    """Everything :func:`backward` needs from :func:`forward_with_tape`."""

    tokens: np.ndarray
    layers: tuple
    final: tuple
    logits: np.ndarray


def forward_with_tape(params: Mapping[str, np.ndarray], tokens: np.ndarray, config: Config) -> Tape:
    """The model's forward pass on a batch (B, T) of token ids, keeping the intermediates.

    Returns a :class:`Tape` whose ``logits`` (B, T, vocab_size) equal
    :func:`~autograder.assignments.a09_tiny_gpt.model.forward`'s to rounding.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    T = tokens.shape[-1]
    x = params["W_emb"][tokens] + params["W_pos"][:T]
    layers = []
    for layer in range(config.n_layers):
        p = f"block{layer}."
        h1, norm1 = _layer_norm(x, params[p + "ln1.gain"], params[p + "ln1.bias"], config.ln_eps)
        Q, K, V = (split_heads(h1 @ params[p + W], config.n_heads) for W in ("W_q", "W_k", "W_v"))
        merged = merge_heads(attention_weights(Q, K) @ V)
        x = x + merged @ params[p + "W_o"]
        h2, norm2 = _layer_norm(x, params[p + "ln2.gain"], params[p + "ln2.bias"], config.ln_eps)
        u = h2 @ params[p + "W_1"] + params[p + "b_1"]
        g, t = _gelu(u)
        x = x + g @ params[p + "W_2"] + params[p + "b_2"]
        layers.append((h1, norm1, Q, K, V, merged, h2, norm2, u, g, t))
    hf, norm_f = _layer_norm(x, params["ln_f.gain"], params["ln_f.bias"], config.ln_eps)
    return Tape(tokens, tuple(layers), (hf, norm_f), hf @ params["W_out"])


def backward(params: Mapping[str, np.ndarray], tape: Tape, dlogits: np.ndarray, config: Config) -> dict[str, np.ndarray]:
    """Gradients of the loss with respect to every parameter, given ∂L/∂logits.

    Parameters
    ----------
    params : mapping of str to numpy.ndarray
    tape : Tape
        From :func:`forward_with_tape` on the same parameters.
    dlogits : numpy.ndarray, shape of ``tape.logits``
    config : Config

    Returns
    -------
    dict of str to numpy.ndarray
        Same names and shapes as ``params``.
    """
    grads: dict[str, np.ndarray] = {}
    hf, norm_f = tape.final
    grads["W_out"] = _weight_grad(hf, dlogits)
    dx, grads["ln_f.gain"], grads["ln_f.bias"] = _layer_norm_backward(dlogits @ params["W_out"].T, norm_f,
                                                                      params["ln_f.gain"])
    T = tape.tokens.shape[-1]
    mask = np.tril(np.ones((T, T), dtype=bool))
    for layer in reversed(range(config.n_layers)):
        p = f"block{layer}."
        h1, norm1, Q, K, V, merged, h2, norm2, u, g, t = tape.layers[layer]
        # MLP branch: x ← x + GELU(h2 W_1 + b_1) W_2 + b_2
        grads[p + "W_2"], grads[p + "b_2"] = _weight_grad(g, dx), _sum_rows(dx)
        du = (dx @ params[p + "W_2"].T) * _gelu_derivative(u, t)
        grads[p + "W_1"], grads[p + "b_1"] = _weight_grad(h2, du), _sum_rows(du)
        dh2, grads[p + "ln2.gain"], grads[p + "ln2.bias"] = _layer_norm_backward(du @ params[p + "W_1"].T, norm2,
                                                                                 params[p + "ln2.gain"])
        dx = dx + dh2
        # attention branch: x ← x + merge(attention(Q, K, V)) W_o
        grads[p + "W_o"] = _weight_grad(merged, dx)
        dheads = split_heads(dx @ params[p + "W_o"].T, config.n_heads)
        dQ, dK, dV = attention_backward(Q, K, V, dheads, mask=mask, scale=True)
        dh1 = 0.0
        for name, d in (("W_q", dQ), ("W_k", dK), ("W_v", dV)):
            d = merge_heads(d)
            grads[p + name] = _weight_grad(h1, d)
            dh1 = dh1 + d @ params[p + name].T
        dx1, grads[p + "ln1.gain"], grads[p + "ln1.bias"] = _layer_norm_backward(dh1, norm1, params[p + "ln1.gain"])
        dx = dx + dx1
    grads["W_emb"] = np.zeros_like(params["W_emb"])
    np.add.at(grads["W_emb"], tape.tokens.reshape(-1), dx.reshape(-1, dx.shape[-1]))
    grads["W_pos"] = np.zeros_like(params["W_pos"])
    grads["W_pos"][:T] = dx.reshape(-1, T, dx.shape[-1]).sum(axis=0)
    return {name: grads[name] for name in params}


def cross_entropy(logits: np.ndarray, targets: np.ndarray, selected=None) -> tuple[float, np.ndarray]:
    """Mean cross-entropy (nats) of ``targets`` under ``logits`` over the selected positions, and ∂L/∂logits.

    Parameters
    ----------
    logits : numpy.ndarray, shape (..., vocab_size)
    targets : numpy.ndarray of int, shape (...)
    selected : numpy.ndarray of bool, shape (...), optional
        Positions that count (all when None).

    Returns
    -------
    loss : float
    dlogits : numpy.ndarray, shape of ``logits``
    """
    selected = np.ones(targets.shape, dtype=bool) if selected is None else selected
    n = int(selected.sum())
    if n == 0:
        raise ValueError("selected must choose at least one target position")
    z = logits - logits.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    loss = -float(picked[selected].sum()) / n
    dlogits = np.exp(log_p)
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(dlogits, targets[..., None], axis=-1) - 1,
                      axis=-1)
    return loss, dlogits * (selected[..., None] / n)


def loss_and_gradients(params: Mapping[str, np.ndarray], tokens: np.ndarray, config: Config,
                       selected=None) -> tuple[float, dict[str, np.ndarray]]:
    """Next-token cross-entropy of a batch and its gradient with respect to every parameter.

    Inputs are ``tokens[:, :-1]``, targets ``tokens[:, 1:]``.

    Parameters
    ----------
    params : mapping of str to numpy.ndarray
    tokens : numpy.ndarray of int, shape (B, T)
    config : Config
    selected : numpy.ndarray of bool, shape (B, T − 1), optional
        Targets that count in the loss (all when None).

    Returns
    -------
    loss : float
        Nats per selected target.
    grads : dict of str to numpy.ndarray
    """
    params = check_parameters(params, config)
    tokens = np.asarray(tokens, dtype=np.int64)
    tape = forward_with_tape(params, tokens[:, :-1], config)
    loss, dlogits = cross_entropy(tape.logits, tokens[:, 1:], selected)
    return loss, backward(params, tape, dlogits, config)


def global_norm(grads: Mapping[str, np.ndarray]) -> float:
    """√(Σ‖g‖²) over every gradient array."""
    return math.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
