"""The √d_k experiment of assignment 6 computed with the learner's own softmax backward and Jacobian.

For each d_head and each scaling ÷1, ÷√d_k, ÷d_k (Vaswani et al. 2017, §3.2.1): ``n_rows`` rows, each
one query q ~ N(0, I_d) against T keys k_j ~ N(0, I_d) and an upstream gradient g ~ N(0, I_T) with
respect to the row's weights p = softmax(q · k_j / c). Per row: the softmax Jacobian's gain ‖J‖₂, the
gradient reaching the scores ‖J g‖₂ (computed with the learner's ``softmax_backward``), the gradient
reaching the query ‖Kᵀ J g‖₂ / c, and the entropy in nats; each curve is the median over rows
(entropy: the mean). The rows are drawn exactly as the grader's experiment
(``autograder.assignments.a06_gradients.experiment``, "reduced" method) draws them, from
``default_rng([seed, d_head, T])``, so with the reference functions the curves are the grader's
(``tests/test_gradients_visual.py`` checks that) and what ``findings.py`` states holds for them.

The forward softmax of the rows is computed here (it is assignment 1's, not what this assignment
grades); everything the assignment teaches comes from the functions passed in.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from attention_lab.core.calls import FunctionTimedOut, time_limit
from attention_lab.core.worked import SelfCheckFailed, describe_failure

#: scaling key → label; the curves are indexed by the key
SCALINGS: Mapping[str, str] = {"none": "÷1", "sqrt": "÷√d_k", "linear": "÷d_k"}
D_HEADS: tuple[int, ...] = tuple(2 ** i for i in range(10))  # 1 … 512
_BISECTION_STEPS = 64
EXPERIMENT_SECONDS = 60.0  # 30 calls of a learner's softmax_backward on (256, T) arrays take well under a second


class ExperimentError(ValueError):
    """A learner's function failed or returned something unusable in the experiment."""


def divisor(scaling: str, d_head: int) -> float:
    """1, √d_head or d_head for ``scaling`` "none", "sqrt" or "linear".

    Raises
    ------
    ValueError
        If ``scaling`` is unknown or ``d_head`` < 1.
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {sorted(SCALINGS)}; received {scaling!r}")
    if int(d_head) < 1:
        raise ValueError(f"d_head must be an integer >= 1; received {d_head!r}")
    return {"none": 1.0, "sqrt": math.sqrt(d_head), "linear": float(d_head)}[scaling]


def weights_of(scores: np.ndarray) -> np.ndarray:
    """Softmax weights of each row (last axis) of ``scores``, max-subtracted (float64, same shape)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def entropy_nats(p: np.ndarray) -> np.ndarray:
    """−Σ p ln p of each row, in nats (0 ln 0 = 0); shape ``p.shape[:-1]``."""
    return -np.sum(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0), axis=-1)


def gain(p: np.ndarray) -> np.ndarray:
    """‖diag(p) − p pᵀ‖₂ per row: the largest root of 1 − Σ p_i² / (p_i − λ) in [p_(2), p_(1)] (bisection).

    The same secular-equation method as the grader's experiment (Golub 1973); O(T) per step, so the
    curves never form a (T, T) matrix per row.
    """
    top_two = np.sort(p, axis=-1)[..., -2:]
    low, high = top_two[..., 0].copy(), top_two[..., 1].copy()
    tied = high - low <= 0
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = 1.0 - np.sum(p * p / (p - middle[..., None]), axis=-1)
        low, high = np.where(w > 0, middle, low), np.where(w > 0, high, middle)
    return np.where(tied, top_two[..., 1], 0.5 * (low + high))


def draw(d_head: int, T: int, n_rows: int, seed: int):
    """(raw scores (n_rows, T), upstream g (n_rows, T), z = K q̂ (n_rows, T), χ²_{d−1} (n_rows,)) of one d_head.

    The scores q · k_j = ‖q‖ z_j with z ~ N(0, I_T); ‖Kᵀ v‖² = (zᵀ v)² + ‖v‖² χ²_{d−1} for v that depends on z only.
    """
    rng = np.random.default_rng([seed, d_head, T])
    norms = np.sqrt(rng.chisquare(d_head, size=n_rows))
    z = rng.standard_normal((n_rows, T))
    g = rng.standard_normal((n_rows, T))
    chi2 = rng.chisquare(d_head - 1, size=n_rows) if d_head > 1 else np.zeros(n_rows)
    return norms[:, None] * z, g, z, chi2


@dataclass(frozen=True)
class Curves:
    """Curves over ``d_heads`` for each scaling key: gain, score_gradient, query_gradient, entropy (nats)."""

    T: int
    d_heads: np.ndarray
    gain: Mapping[str, np.ndarray]
    score_gradient: Mapping[str, np.ndarray]
    query_gradient: Mapping[str, np.ndarray]
    entropy: Mapping[str, np.ndarray]

    @property
    def ceiling(self) -> float:
        """ln T, the entropy of a uniform row (nats)."""
        return math.log(self.T)


def _backward(softmax_backward: Callable, p: np.ndarray, g: np.ndarray) -> np.ndarray:
    try:
        dscores = softmax_backward(p.copy(), g.copy())
    except Exception as error:  # noqa: BLE001 — a learner's failure becomes one message
        raise ExperimentError(describe_failure(softmax_backward, error)) from None
    if not isinstance(dscores, np.ndarray) or dscores.shape != p.shape:
        got = f"shape {dscores.shape}" if isinstance(dscores, np.ndarray) else type(dscores).__name__
        raise ExperimentError(f"softmax_backward(p, grad_p) with p of shape {p.shape} returned {got}; "
                              f"expected shape {p.shape}")
    return np.asarray(dscores, dtype=np.float64)


@dataclass(frozen=True)
class _Rows:
    """The learner-independent part of the experiment for one (T, d_heads, n_rows, seed): the drawn rows, each
    scaling's weights (scaling, d_head, row, key) and the curves that depend on the weights only."""

    weights: np.ndarray
    g: np.ndarray
    z: np.ndarray
    chi2: np.ndarray
    divisors: np.ndarray  # (scaling, d_head)
    gain: np.ndarray  # (scaling, d_head) medians over rows
    entropy: np.ndarray  # (scaling, d_head) means over rows


@functools.lru_cache(maxsize=8)
def _rows(T: int, d_heads: tuple[int, ...], n_rows: int, seed: int) -> _Rows:
    """Cached per (T, d_heads, n_rows, seed): a change of T in the explorer computes it once, a return is free."""
    draws = [draw(d, T, n_rows, seed) for d in d_heads]
    raw, g, z, chi2 = (np.stack(parts) for parts in zip(*draws))
    divisors = np.array([[divisor(key, d) for d in d_heads] for key in SCALINGS])
    weights = weights_of(raw[None] / divisors[..., None, None])
    for array in (weights, g, z, chi2):
        array.flags.writeable = False  # shared by every call: the learner's function gets copies
    # the gain one (n_rows, T) block at a time: its bisection's arrays then stay in the CPU's cache (about 3x faster at
    # T = 128 than one pass over all blocks)
    gains = np.array([[np.median(gain(block)) for block in blocks] for blocks in weights])
    return _Rows(weights, g, z, chi2, divisors, gains, np.mean(entropy_nats(weights), axis=-1))


def gradient_curves(softmax_backward: Callable, T: int = 32, d_heads=D_HEADS, n_rows: int = 256,
                    seed: int = 0) -> Curves:
    """The experiment's curves, with ``softmax_backward`` (the learner's) computing J g.

    The rows of every d_head and scaling go to ``softmax_backward`` in one call, as one
    (3 · len(d_heads) · n_rows, T) array (each row is its own softmax, so a row-wise function gives each
    row what it gives it alone); the weights, the Jacobian's gain and the entropy do not depend on the
    learner's function and are computed once per (T, d_heads, n_rows, seed) (:func:`_rows`).

    Parameters
    ----------
    softmax_backward : callable
        ``softmax_backward(p, grad_p)`` for (rows, T) arrays.
    T : int, ≥ 2
    d_heads : sequence of int, each ≥ 1
    n_rows : int, ≥ 1
    seed : int, ≥ 0

    Returns
    -------
    Curves

    Raises
    ------
    ValueError
        If T < 2 or n_rows < 1.
    ExperimentError
        If ``softmax_backward`` raises or returns another shape.
    """
    if int(T) < 2:
        raise ValueError(f"T must be an integer >= 2; received {T!r}")
    if int(n_rows) < 1:
        raise ValueError(f"n_rows must be an integer >= 1; received {n_rows!r}")
    d_heads = tuple(int(d) for d in d_heads)
    rows = _rows(int(T), d_heads, int(n_rows), int(seed))
    shape = rows.weights.shape  # (scaling, d_head, row, key)
    g = np.broadcast_to(rows.g, shape)
    dscores = _backward(softmax_backward, rows.weights.reshape(-1, shape[-1]), g.reshape(-1, shape[-1]))
    dscores = dscores.reshape(shape)
    query = np.sqrt(np.sum(rows.z * dscores, axis=-1) ** 2 + np.sum(dscores ** 2, axis=-1) * rows.chi2) \
        / rows.divisors[..., None]
    score_gradient = np.median(np.linalg.norm(dscores, axis=-1), axis=-1)
    query_gradient = np.median(query, axis=-1)

    def by_key(values: np.ndarray) -> dict[str, np.ndarray]:
        return {key: values[i].copy() for i, key in enumerate(SCALINGS)}

    return Curves(int(T), np.array(d_heads), by_key(rows.gain), by_key(score_gradient), by_key(query_gradient),
                  by_key(rows.entropy))


def print_curves(softmax_backward: Callable, T: int = 32) -> Curves:
    """Run :func:`gradient_curves` on the learner's ``softmax_backward`` and print its table; return the curves.

    Columns: d_head, then ‖J‖₂, the gradient reaching Q ‖dq‖ and the entropy H (nats) for each scaling.

    Raises
    ------
    SelfCheckFailed
        In plain words (no traceback of this package) when ``softmax_backward`` fails or returns
        another shape, e.g. while it is not answered yet.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    try:
        with time_limit(EXPERIMENT_SECONDS):
            curves = gradient_curves(softmax_backward, T=T)
    except ExperimentError as error:
        raise SelfCheckFailed(f"the experiment runs on your softmax_backward: {error}") from None
    except FunctionTimedOut:
        raise SelfCheckFailed(f"the experiment did not finish within {EXPERIMENT_SECONDS:g} s: does your "
                              "softmax_backward loop forever?") from None
    labels = list(SCALINGS.values())
    print(f"{'d_head':>6} | " + " | ".join(f"{'‖J‖₂ ' + label:>11}" for label in labels) + " | "
          + " | ".join(f"{'‖dq‖ ' + label:>11}" for label in labels) + " | "
          + " | ".join(f"{'H ' + label:>9}" for label in labels))
    for i, d_head in enumerate(curves.d_heads):
        print(f"{d_head:>6} | " + " | ".join(f"{curves.gain[key][i]:>11.4f}" for key in SCALINGS) + " | "
              + " | ".join(f"{curves.query_gradient[key][i]:>11.4f}" for key in SCALINGS) + " | "
              + " | ".join(f"{curves.entropy[key][i]:>9.3f}" for key in SCALINGS))
    print(f"uniform row: ‖J‖₂ = 1/T = {1 / curves.T:.4f}; ceiling ln T = {curves.ceiling:.4f} nats")
    return curves


def row_weights(d_head: int, T: int, scaling: str, seed: int = 0, row: int = 0, n_rows: int = 256) -> np.ndarray:
    """The weights (T,) of row ``row`` behind the curves of this d_head, T and scaling (for the heatmap)."""
    if int(d_head) in D_HEADS:  # the explorer's rows: from the cache the curves use
        rows = _rows(int(T), D_HEADS, int(n_rows), int(seed))
        return rows.weights[list(SCALINGS).index(scaling), D_HEADS.index(int(d_head)), row].copy()
    raw = draw(int(d_head), int(T), int(n_rows), int(seed))[0]
    return weights_of(raw[row] / divisor(scaling, d_head))
