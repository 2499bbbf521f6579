"""Why √d_k, measured through gradients: the experiment of Vaswani et al. (2017), §3.2.1, for three scalings.

§3.2.1 argues that for large d_k the dot products grow large in magnitude,
"pushing the softmax function into regions where it has extremely small
gradients", and footnote 4 gives the variance argument: for q, k with
independent N(0, 1) entries, q · k has variance d_k. This module measures
what each choice of divisor does to the gradient as d_head grows.

Set-up, for every d_head and one seed (the same random numbers for every
scaling, so the curves differ only by the scaling):

* ``n_rows`` independent rows; row r has one query q ~ N(0, I_d) and T keys
  k_j ~ N(0, I_d) (d = d_head), scores s_j = q · k_j / c with c = 1, √d or d,
  weights p = softmax(s);
* an upstream gradient g ~ N(0, I_T) with respect to the row's weights p
  (unit variance, fixed: it does not depend on the scaling);
* per row: the **gain** ‖J‖₂ of the softmax Jacobian J = diag(p) − p pᵀ (its
  spectral norm, the largest factor by which it can multiply a gradient),
  the **gradient reaching the scores** ‖J g‖₂ and the **gradient reaching
  the query** ‖Kᵀ J g‖₂ / c (the chain rule through s = K q / c), and the
  row's entropy in nats;
* each curve is the median over rows (entropy: the mean, as in assignment 1).

For reference, a uniform row p = 1/T has ‖J‖₂ = 1/T: that is where the
÷d_k curve goes, because its scores shrink to 0 and stop mattering.

The spectral norm uses the structure of J (a diagonal minus a rank-one
matrix) instead of an eigen-decomposition: see :func:`jacobian_gain`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import numpy as np

from autograder.assignments.a06_gradients.reference import as_probability_rows, softmax_backward, softmax_jacobian
from autograder.assignments.a01_attention.reference import attention_entropy, softmax
from autograder.assignments.validation import require_positive_int
from attention_lab.a06_gradients import curves as student_curves

#: The three scalings compared: key → human label. The key is what the curves are indexed by.
SCALINGS: Mapping[str, str] = {"none": "÷1", "sqrt": "÷√d_k", "linear": "÷d_k"}

#: d_head values of the curves, 1 … 512 in powers of two.
D_HEADS: tuple[int, ...] = tuple(2 ** i for i in range(10))

#: Bisection steps of :func:`jacobian_gain`: the bracket [p_(2), p_(1)] has width ≤ 1, so 64 halvings reach
#: float64 spacing.


def divisor(scaling: str, d_head: int) -> float:
    """The number the scores are divided by under ``scaling`` ("none" → 1, "sqrt" → √d_head, "linear" → d_head).

    Raises
    ------
    ValueError
        If ``scaling`` is not a key of :data:`SCALINGS` or ``d_head`` is not an integer ≥ 1.
    """
    d_head = require_positive_int("d_head", d_head)
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {sorted(SCALINGS)}; received {scaling!r}")
    return {"none": 1.0, "sqrt": math.sqrt(d_head), "linear": float(d_head)}[scaling]


def jacobian_gain(p):
    """Spectral norm ‖diag(p) − p pᵀ‖₂ of the softmax Jacobian of every row, without forming J.

    J is symmetric positive semi-definite (the softmax Jacobian), so its
    spectral norm is its largest eigenvalue λ. J = D − p pᵀ with D = diag(p)
    is a rank-one downdate of a diagonal matrix, so (Golub 1973, "Some
    modified matrix eigenvalue problems", SIAM Review 15(2)) its eigenvalues
    interlace with the entries of p, and the largest one is the root, in [p_(2), p_(1)] (the two
    largest entries), of the secular equation

        w(λ) = 1 − Σ_i p_i² / (p_i − λ) = 0,

    where w falls monotonically from +∞ to −∞. Bisection on that bracket costs
    O(n) per step instead of the O(n³) of an eigen-decomposition. When the two
    largest entries are equal, λ = p_(1). The absolute error is about 1e-16.

    Parameters
    ----------
    p : array_like, shape (..., n), float
        Probability rows (each sums to 1, or is all 0: then J = 0).

    Returns
    -------
    numpy.ndarray, shape (...), float64
        ‖J‖₂ of each row; between 0 and max_i p_i (1/n for a uniform row,
        0 for a one-hot or an all-zero row).

    Raises
    ------
    ValueError
        If ``p`` is not an array of probability rows
        (:func:`autograder.assignments.a06_gradients.reference.as_probability_rows`).
    """
    p = as_probability_rows("p", p).astype(np.float64)
    if p.shape[-1] == 1:
        return np.zeros(p.shape[:-1])
    return student_curves.gain(p)  # the bisection the learner's explorer runs too: one implementation of it


@dataclass(frozen=True)
class GradientCurves(student_curves.Curves):
    """The experiment's curves for one T and seed (the explorer's ``Curves`` and more); mappings: scaling key → array over ``d_heads``.

    Attributes
    ----------
    T : int
        Keys per row.
    n_rows : int
        Rows per d_head (medians and means are over these).
    seed : int
        Seed of the random numbers (row r of d_head d is the same for every scaling).
    d_heads : numpy.ndarray of int, shape (n_d,)
    gain : dict of str to numpy.ndarray, shape (n_d,)
        Median over rows of ‖J‖₂ (dimensionless).
    score_gradient : dict of str to numpy.ndarray, shape (n_d,)
        Median over rows of ‖J g‖₂, the gradient reaching the scores.
    query_gradient : dict of str to numpy.ndarray, shape (n_d,)
        Median over rows of ‖Kᵀ J g‖₂ / c, the gradient reaching the query.
    entropy : dict of str to numpy.ndarray, shape (n_d,)
        Mean row entropy, nats; the ceiling is ln T.
    max_weight : dict of str to numpy.ndarray, shape (n_d,)
        Median over rows of the largest weight (1 = one-hot, 1/T = uniform).
    score_std : dict of str to numpy.ndarray, shape (n_d,)
        Standard deviation of the scores s_j over all rows and keys.
    uniform_gain : float
        ‖J‖₂ of a uniform row, 1/T.
    uniform_score_gradient : float
        Median over rows of ‖J_u g‖₂ for the uniform row's Jacobian J_u and the same g (≈ √(T − 1) / T).
    """

    # T, d_heads, gain, score_gradient, query_gradient, entropy and the ceiling ln T are the learner's explorer's
    # Curves (one definition of the curves both draw); the experiment adds what its findings need.
    n_rows: int
    seed: int
    max_weight: Mapping[str, np.ndarray]
    score_std: Mapping[str, np.ndarray]
    uniform_gain: float
    uniform_score_gradient: float

    def at(self, d_head: int) -> int:
        """Index of ``d_head`` in :attr:`d_heads`; KeyError if it was not computed."""
        hits = np.flatnonzero(self.d_heads == d_head)
        if hits.size == 0:
            raise KeyError(f"d_head = {d_head} is not among the computed {self.d_heads.tolist()}")
        return int(hits[0])


class _Rows(NamedTuple):
    """The random quantities of one d_head that every scaling shares (``n_rows`` rows)."""

    raw_scores: np.ndarray               # (n_rows, T): q · k_j, before any division
    upstream: np.ndarray                 # (n_rows, T): g = ∂L/∂p
    keys: np.ndarray | None              # direct: K (n_rows, T, d_head); reduced: None
    query_direction: np.ndarray | None   # reduced: z = K q̂ (n_rows, T)
    orthogonal_chi2: np.ndarray | None   # reduced: ‖K_⊥ᵀ v‖² / ‖v‖² ~ χ²_{d−1} (n_rows,)


def draw_rows(d_head: int, T: int, n_rows: int, seed: int, method: str = "reduced") -> _Rows:
    """Draw the rows of one d_head: q ~ N(0, I_d), T keys k_j ~ N(0, I_d), and g ~ N(0, I_T).

    Drawn from ``numpy.random.default_rng([seed, d_head, T])``, so that one
    d_head's rows do not depend on which other d_heads are computed (the
    visual's heatmap shows row 0 of exactly the rows behind the curves).

    ``method="direct"`` draws q and K entry by entry: O(n_rows · T · d_head).
    ``method="reduced"`` (the default) draws the same joint distribution of
    what the experiment uses in O(n_rows · T): for a key matrix K with
    independent N(0, 1) entries, independent of q, the scores are
    K q = ‖q‖ z with z = K q̂ ~ N(0, I_T); and for any v that depends only on
    z, Kᵀ v = q̂ (zᵀ v) + K_⊥ᵀ v where K_⊥ (K's part orthogonal to q) is
    independent of z, so ‖Kᵀ v‖² = (zᵀ v)² + ‖v‖² χ²_{d−1}. Hence a row needs
    only ‖q‖ ~ χ_d, z, one χ²_{d−1} draw and g (for d = 1 the χ² term is 0).
    """
    rng = np.random.default_rng([seed, d_head, T])
    if method == "direct":
        q = rng.standard_normal((n_rows, d_head))
        K = rng.standard_normal((n_rows, T, d_head))
        g = rng.standard_normal((n_rows, T))
        return _Rows(np.einsum("rjd,rd->rj", K, q), g, K, None, None)
    if method != "reduced":
        raise ValueError(f"method must be 'reduced' or 'direct'; received {method!r}")
    norms = np.sqrt(rng.chisquare(d_head, size=n_rows))
    z = rng.standard_normal((n_rows, T))
    g = rng.standard_normal((n_rows, T))
    chi2 = rng.chisquare(d_head - 1, size=n_rows) if d_head > 1 else np.zeros(n_rows)
    return _Rows(norms[:, None] * z, g, None, z, chi2)


def _query_gradient_norm(rows: _Rows, dscores: np.ndarray, c: float) -> np.ndarray:
    """‖Kᵀ dscores‖₂ / c per row (the gradient reaching the query)."""
    if rows.keys is not None:
        return np.linalg.norm(np.einsum("rjd,rj->rd", rows.keys, dscores), axis=-1) / c
    along = np.sum(rows.query_direction * dscores, axis=-1)
    return np.sqrt(along ** 2 + np.sum(dscores ** 2, axis=-1) * rows.orthogonal_chi2) / c


def gradient_curves(T: int = 32, d_heads=D_HEADS, n_rows: int = 256, seed: int = 0,
                    method: str = "reduced") -> GradientCurves:
    """Run the experiment: gains, gradient norms and entropies of the three scalings as d_head grows.

    Parameters
    ----------
    T : int, default 32
        Keys per row, ≥ 2.
    d_heads : sequence of int, default :data:`D_HEADS` (1 … 512)
        Head sizes, each ≥ 1.
    n_rows : int, default 256
        Independent rows per d_head, ≥ 1.
    seed : int, default 0
        Seed; the same seed gives the same curves.
    method : {"reduced", "direct"}, default "reduced"
        How the rows are drawn (:func:`draw_rows`): the same distribution,
        "direct" entry by entry (slow at large d_head), "reduced" through the
        exact distribution of the scores and of ‖Kᵀ v‖.

    Returns
    -------
    GradientCurves

    Raises
    ------
    ValueError
        If ``T`` < 2, ``n_rows`` < 1, ``seed`` is not an integer ≥ 0, a
        d_head is not an integer ≥ 1, or ``method`` is unknown.
    """
    T = require_positive_int("T", T)
    if T < 2:
        raise ValueError(f"T must be an integer >= 2 (a softmax over one key is constant); received {T}")
    n_rows = require_positive_int("n_rows", n_rows)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0; received {seed!r}")
    if method not in ("reduced", "direct"):
        raise ValueError(f"method must be 'reduced' or 'direct'; received {method!r}")
    d_heads = np.array([require_positive_int("d_heads[i]", d) for d in d_heads], dtype=int)
    curves = {name: {key: np.empty(len(d_heads)) for key in SCALINGS}
              for name in ("gain", "score_gradient", "query_gradient", "entropy", "max_weight", "score_std")}
    uniform = np.full(T, 1.0 / T)
    uniform_score_gradient = []
    for index, d_head in enumerate(d_heads):
        rows = draw_rows(int(d_head), T, n_rows, seed, method)
        uniform_score_gradient.append(
            np.linalg.norm(softmax_backward(np.broadcast_to(uniform, rows.upstream.shape), rows.upstream), axis=-1))
        for key in SCALINGS:
            c = divisor(key, int(d_head))
            scores = rows.raw_scores / c
            p = softmax(scores, axis=-1)
            dscores = softmax_backward(p, rows.upstream)                   # J g, row by row
            curves["gain"][key][index] = np.median(jacobian_gain(p))
            curves["score_gradient"][key][index] = np.median(np.linalg.norm(dscores, axis=-1))
            curves["query_gradient"][key][index] = np.median(_query_gradient_norm(rows, dscores, c))
            curves["entropy"][key][index] = np.mean(attention_entropy(p[:, None, :]))
            curves["max_weight"][key][index] = np.median(p.max(axis=-1))
            curves["score_std"][key][index] = np.std(scores)
    return GradientCurves(T=T, n_rows=n_rows, seed=int(seed), d_heads=d_heads,
                          uniform_gain=1.0 / T,
                          uniform_score_gradient=float(np.median(np.concatenate(uniform_score_gradient))),
                          **curves)


def row_jacobian(d_head: int, T: int, scaling: str, seed: int = 0, row: int = 0, n_rows: int = 256) -> np.ndarray:
    """The softmax Jacobian (T, T) of one row of the experiment, for the visual's heatmap.

    Row ``row`` of the rows :func:`gradient_curves` draws for this ``d_head``,
    ``T``, ``n_rows`` and ``seed``, under ``scaling``.

    Raises
    ------
    ValueError
        If an argument is out of range (``row`` must be in [0, n_rows)).
    """
    n_rows = require_positive_int("n_rows", n_rows)
    if isinstance(row, (bool, np.bool_)) or not isinstance(row, (int, np.integer)) or not 0 <= row < n_rows:
        raise ValueError(f"row must be an integer in [0, {n_rows}); received {row!r}")
    d_head = require_positive_int("d_head", d_head)
    rows = draw_rows(d_head, require_positive_int("T", T), n_rows, seed)
    return softmax_jacobian(softmax(rows.raw_scores[row] / divisor(scaling, d_head)))


def assignment1_fact3_entropies(d_head: int = 256, T: int = 32, seed: int = 3) -> dict[str, float]:
    """The numbers behind assignment 1's fact 3: mean row entropy (nats) of the three scalings on its own draw.

    Reproduces ``attention_lab.a01_attention.checks.check_scaling_prevents_saturation``:
    ``rng = default_rng(3)``, Q and K of shape (T, d_head) (no mask), each of
    the T queries attends over the T keys. Returns the entropy for each
    scaling key, and ``"ceiling"`` = ln T.
    """
    rng = np.random.default_rng(seed)
    Q, K = rng.normal(size=(T, d_head)), rng.normal(size=(T, d_head))
    values = {}
    for key in SCALINGS:
        p = softmax(Q @ K.T / divisor(key, d_head), axis=-1)
        values[key] = float(np.mean(attention_entropy(p)))
    values["ceiling"] = math.log(T)
    return values
