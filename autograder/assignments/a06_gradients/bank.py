"""Answer bank of assignment 6 (gradients through softmax and attention): solution, variants, mistakes, cases.

The material :mod:`autograder.assignments.a06_gradients.spec` turns into the grader's steps and
variants (issue 12), and the source notebook's solution cells:

* :data:`GIVEN` — the line of given code that heads the ``attention_backward`` answer cell (not graded);
* :data:`SOLUTION` — the reference-style solution cells, id → source, in notebook order;
* :data:`STEPS` — each graded step: its cell, function and hidden cases;
* :data:`CORRECT` — differently written correct answers (:class:`~autograder.grader.draft_rewrites.Rewrite`);
* :data:`MISTAKES` — known mistakes as small edits of :data:`SOLUTION`
  (:class:`~autograder.grader.draft_rewrites.Edit`), each with a hint and the step it breaks.

``tests/test_gradients_bank.py`` runs every correct variant against
:mod:`autograder.assignments.a06_gradients.reference` on every hidden case, and checks
that every mistake differs from it on at least one hidden case of its step
(with matching shapes, unless the mistake is a shape mistake by nature).

``numerical_gradient`` takes a function, which cannot cross into a learner's kernel as code: its
hidden cases pass :func:`coupled_cubic_loss`, a :class:`~attention_lab.core.losses.CubicLoss` that the
value codecs send as its coefficients and rebuild in the kernel (a known, documented loss).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from attention_lab.core.losses import CubicLoss
from autograder.grader.draft_rewrites import Edit, Rewrite

from . import reference

#: The line that gives ``sum_to_shape`` (:mod:`attention_lab.a06_gradients.given`); it heads the notebook's
#: ``attention_backward`` answer cell, outside the solution.
GIVEN = "from attention_lab.a06_gradients.given import sum_to_shape\n"

SOLUTION: dict[str, str] = {
    "softmax_jacobian": '''
def softmax_jacobian(p):
    p = np.asarray(p, dtype=float)
    diagonal = p[..., :, None] * np.eye(p.shape[-1])
    outer = p[..., :, None] * p[..., None, :]
    return diagonal - outer
''',
    "softmax_backward": '''
def softmax_backward(p, grad_p):
    p = np.asarray(p, dtype=float)
    g = np.asarray(grad_p, dtype=float)
    inner = np.sum(g * p, axis=-1, keepdims=True)
    return p * (g - inner)
''',
    "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_out))
    d_k = Q.shape[-1]
    if scale is True:
        c = np.sqrt(d_k)
    elif scale is False:
        c = 1.0
    else:
        c = float(scale)
    scores = Q @ np.swapaxes(K, -1, -2) / c
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    total = np.sum(e, axis=-1, keepdims=True)
    P = e / np.where(total > 0, total, 1.0)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = softmax_backward(P, dP)
    dQ = dS @ K / c
    dK = np.swapaxes(dS, -1, -2) @ Q / c
    return sum_to_shape(dQ, Q.shape), sum_to_shape(dK, K.shape), sum_to_shape(dV, V.shape)
''',
    "numerical_gradient": '''
def numerical_gradient(f, x, eps=1e-6):
    x = np.array(x, dtype=float)
    grad = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        original = x[index]
        x[index] = original + eps
        f_plus = f(x)
        x[index] = original - eps
        f_minus = f(x)
        x[index] = original
        grad[index] = (f_plus - f_minus) / (2 * eps)
    return grad
''',
    "relative_error": '''
def relative_error(analytic, numerical):
    a = np.asarray(analytic, dtype=float)
    n = np.asarray(numerical, dtype=float)
    scale = max(np.linalg.norm(a), np.linalg.norm(n))
    if scale == 0:
        return 0.0
    return np.linalg.norm(a - n) / scale
''',
}


# ---------------------------------------------------------------- hidden cases

@dataclass(frozen=True)
class HiddenCase:
    """One hidden call: ``function(*args, **kwargs)``, compared with the reference's result."""

    description: str
    function: str
    args: tuple
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    exposes: tuple[str, ...] = ()      #: mistakes this case is there to catch (documentation; the test checks)


def coupled_cubic_loss(coefficients) -> CubicLoss:
    """f(x) = Σ a⊙x + ½ Σ b⊙x² + ⅙ Σ c⊙x³ + ½ (Σ d⊙x)² for ``coefficients = (a, b, c, d)`` of x's shape.

    A :class:`~attention_lab.core.losses.CubicLoss`, which crosses into the learner's kernel as its
    coefficients. Its gradient a + b x + ½ c x² + d (Σ d⊙x) is known; the curvature exposes one-sided
    differences and the coupling term (every entry's gradient depends on every other entry) exposes a
    perturbation left in place.
    """
    return CubicLoss(*coefficients)


def _rng(seed):
    return np.random.default_rng(seed)


def _probabilities(rng, shape, spread=1.5):
    """Softmax rows of N(0, spread²) scores: uneven probabilities."""
    x = rng.normal(size=shape) * spread
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def jacobian_cases(seed: int = 60) -> list[HiddenCase]:
    rng = _rng(seed)
    masked_row = np.array([0.0, 0.3, 0.0, 0.7])
    return [
        HiddenCase("one row of 5, uneven", "softmax_jacobian", (_probabilities(rng, (5,)),),
                   exposes=("jacobian_no_outer_term", "jacobian_outer_plus")),
        HiddenCase("batch (2, 3, 4) of rows", "softmax_jacobian", (_probabilities(rng, (2, 3, 4)),),
                   exposes=("jacobian_diag_outer_flatten",)),
        HiddenCase("a row with blocked (zero) entries", "softmax_jacobian", (masked_row,)),
    ]


def backward_cases(seed: int = 61) -> list[HiddenCase]:
    rng = _rng(seed)
    p_square = _probabilities(rng, (4, 4))
    return [
        HiddenCase("3 rows of 6, upstream gradient with a non-zero mean", "softmax_backward",
                   (_probabilities(rng, (3, 6)), rng.normal(size=(3, 6)) + 1.0),
                   exposes=("backward_inner_unweighted", "backward_inner_wrong_axis")),
        HiddenCase("square (4, 4): rows = keys, so a dropped keepdims broadcasts silently", "softmax_backward",
                   (p_square, rng.normal(size=(4, 4))), exposes=("backward_inner_no_keepdims",)),
        HiddenCase("batch (2, 2, 5)", "softmax_backward", (_probabilities(rng, (2, 2, 5)), rng.normal(size=(2, 2, 5)))),
        HiddenCase("a row with blocked entries gets 0 there", "softmax_backward",
                   (np.array([[0.0, 0.25, 0.75, 0.0]]), np.array([[1.0, -2.0, 0.5, 3.0]]))),
    ]


def attention_cases(seed: int = 62) -> list[HiddenCase]:
    rng = _rng(seed)
    n = rng.normal
    causal = np.tril(np.ones((4, 4), dtype=bool))
    holes = np.array([[True, False, True, True, False],
                      [False, False, False, False, False],      # a fully masked row
                      [True, True, False, True, True]])
    return [
        HiddenCase("cross-attention T_q=3, T_k=5, d_k=4, d_v=2, scale=True", "attention_backward",
                   (n(size=(3, 4)), n(size=(5, 4)), n(size=(5, 2)), n(size=(3, 2))),
                   exposes=("attention_diagonal_only", "attention_no_scale_in_dQ_dK", "attention_scale_by_d_k")),
        HiddenCase("causal self-attention T=4 (square: transposes are not caught by shape)", "attention_backward",
                   (n(size=(4, 3)), n(size=(4, 3)), n(size=(4, 3)), n(size=(4, 3))), {"mask": causal},
                   exposes=("attention_dK_no_transpose", "attention_dV_no_transpose", "attention_ignores_mask")),
        HiddenCase("blocked keys and a fully masked row", "attention_backward",
                   (n(size=(3, 4)), n(size=(5, 4)), n(size=(5, 3)), n(size=(3, 3))), {"mask": holes},
                   exposes=("attention_masked_row_nan", "attention_masked_row_uniform", "attention_ignores_mask")),
        HiddenCase("batch (2, 3) with K and V shared by the heads (broadcast)", "attention_backward",
                   (n(size=(2, 3, 4, 8)), n(size=(2, 1, 6, 8)), n(size=(6, 2)), n(size=(2, 3, 4, 2)))),
        HiddenCase("scale=False", "attention_backward",
                   (n(size=(3, 4)), n(size=(5, 4)), n(size=(5, 2)), n(size=(3, 2))), {"scale": False}),
        HiddenCase("scale=3.0 (a divisor)", "attention_backward",
                   (n(size=(3, 16)), n(size=(5, 16)), n(size=(5, 2)), n(size=(3, 2))), {"scale": 3.0},
                   exposes=("attention_truthy_scale",)),
        HiddenCase("float32 inputs", "attention_backward",
                   tuple(a.astype(np.float32) for a in (n(size=(3, 4)), n(size=(5, 4)), n(size=(5, 2)),
                                                        n(size=(3, 2))))),
    ]


def numerical_cases(seed: int = 63) -> list[HiddenCase]:
    rng = _rng(seed)
    shape = (2, 3)
    coefficients = tuple(rng.normal(size=shape) for _ in range(4))
    x = rng.normal(size=shape)
    return [
        HiddenCase("coupled cubic loss, default eps", "numerical_gradient", (coupled_cubic_loss(coefficients), x)),
        HiddenCase("coupled cubic loss, eps = 1e-2 (curvature exposes one-sided or unrestored steps)", "numerical_gradient",
                   (coupled_cubic_loss(coefficients), x), {"eps": 1e-2},
                   exposes=("numerical_forward_difference", "numerical_not_restored", "numerical_eps_not_doubled")),
    ]


def relative_error_cases(seed: int | None = None) -> list[HiddenCase]:
    # hand-chosen exact inputs (edge cases): the seed does not change them
    return [
        HiddenCase("(3, 4) against (0, 0)", "relative_error", (np.array([3.0, 4.0]), np.zeros(2))),
        HiddenCase("both zero (a masked position's gradient): 0, not NaN", "relative_error", (np.zeros(3), np.zeros(3)),
                   exposes=("relative_error_no_zero_guard",)),
        HiddenCase("close gradients", "relative_error",
                   (np.array([[1.0, -2.0], [0.5, 0.0]]), np.array([[1.0 + 1e-7, -2.0], [0.5, 1e-8]])),
                   exposes=("relative_error_elementwise_max",)),
    ]


@dataclass(frozen=True)
class Step:
    """A graded step: its solution cell, points, and hidden cases."""

    cell: str
    title: str
    points: float
    cases: Callable[[], list[HiddenCase]]


STEPS: dict[str, Step] = {
    "softmax_jacobian": Step("softmax_jacobian", "softmax Jacobian diag(p) − p pᵀ", 1.5, jacobian_cases),
    "softmax_backward": Step("softmax_backward", "softmax backward without the Jacobian", 1.5, backward_cases),
    "attention_backward": Step("attention_backward", "attention backward dQ, dK, dV", 4.0, attention_cases),
    "numerical_gradient": Step("numerical_gradient", "central differences", 1.5, numerical_cases),
    "relative_error": Step("relative_error", "gradient check: relative error", 1.0, relative_error_cases),
}

#: Function name → the reference the cases are compared with.
REFERENCE: dict[str, Callable] = {
    "softmax_jacobian": reference.softmax_jacobian,
    "softmax_backward": reference.softmax_backward,
    "attention_backward": reference.attention_backward,
    "numerical_gradient": reference.numerical_gradient,
    "relative_error": reference.relative_error,
}

#: Tolerances of the comparison: float32 answers and float64 ones both pass (see DESIGN.md).
RTOL, ATOL = 1e-4, 1e-6


# ---------------------------------------------------------------- correct variants

CORRECT: dict[str, Rewrite] = {
    "einsum": Rewrite("einsum for the Jacobian, the backward and every product of the attention backward", {
        "softmax_jacobian": '''
def softmax_jacobian(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[-1]
    return np.einsum("...i,ij->...ij", p, np.eye(n)) - np.einsum("...i,...j->...ij", p, p)
''',
        "softmax_backward": '''
def softmax_backward(p, grad_p):
    p = np.asarray(p, dtype=float)
    g = np.asarray(grad_p, dtype=float)
    return p * (g - np.einsum("...j,...j->...", g, p)[..., None])
''',
        "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_out))
    c = np.sqrt(Q.shape[-1]) if scale is True else (1.0 if scale is False else float(scale))
    S = np.einsum("...qd,...kd->...qk", Q, K) / c
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    m = S.max(axis=-1, keepdims=True)
    m = np.where(m == -np.inf, 0.0, m)
    e = np.exp(S - m)
    z = e.sum(axis=-1, keepdims=True)
    P = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    dV = np.einsum("...qk,...qv->...kv", P, G)
    dP = np.einsum("...qv,...kv->...qk", G, V)
    dS = P * (dP - np.einsum("...qk,...qk->...q", dP, P)[..., None])
    dQ = np.einsum("...qk,...kd->...qd", dS, K) / c
    dK = np.einsum("...qk,...qd->...kd", dS, Q) / c
    return sum_to_shape(dQ, Q.shape), sum_to_shape(dK, K.shape), sum_to_shape(dV, V.shape)
''',
    }),
    "loops": Rewrite("explicit Python loops over rows (Jacobian, backward) and over entries (numerical gradient)", {
        "softmax_jacobian": '''
def softmax_jacobian(p):
    p = np.asarray(p, dtype=float)
    n = p.shape[-1]
    J = np.zeros(p.shape + (n,))
    for index in np.ndindex(*p.shape[:-1]):
        row = p[index]
        for i in range(n):
            for j in range(n):
                J[index + (i, j)] = row[i] * ((1.0 if i == j else 0.0) - row[j])
    return J
''',
        "softmax_backward": '''
def softmax_backward(p, grad_p):
    p = np.asarray(p, dtype=float)
    g = np.asarray(grad_p, dtype=float)
    out = np.zeros_like(p)
    for index in np.ndindex(*p.shape[:-1]):
        inner = 0.0
        for j in range(p.shape[-1]):
            inner += g[index][j] * p[index][j]
        out[index] = p[index] * (g[index] - inner)
    return out
''',
        "numerical_gradient": '''
def numerical_gradient(f, x, eps=1e-6):
    x = np.array(x, dtype=float)
    flat = x.reshape(-1)
    grad = np.zeros(flat.size)
    for i in range(flat.size):
        plus = flat.copy()
        plus[i] += eps
        minus = flat.copy()
        minus[i] -= eps
        grad[i] = (f(plus.reshape(x.shape)) - f(minus.reshape(x.shape))) / (2 * eps)
    return grad.reshape(x.shape)
''',
    }),
    "jacobian_vector_product": Rewrite("softmax backward as J g with the explicit Jacobian (np.matmul on a column)", {
        "softmax_backward": '''
def softmax_backward(p, grad_p):
    J = softmax_jacobian(p)
    g = np.asarray(grad_p, dtype=float)
    return (J @ g[..., :, None])[..., 0]
''',
    }),
    "jacobian_transposed": Rewrite("Jᵀ g instead of J g: the same, since the softmax Jacobian is symmetric", {
        "softmax_backward": '''
def softmax_backward(p, grad_p):
    J = softmax_jacobian(p)
    g = np.asarray(grad_p, dtype=float)
    return np.einsum("...ji,...j->...i", J, g)
''',
    }),
    "attention_via_jacobian": Rewrite("attention backward through the explicit (T_q, T_k, T_k) Jacobians", {
        "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_out))
    c = {True: np.sqrt(Q.shape[-1]), False: 1.0}.get(scale, None) if isinstance(scale, bool) else float(scale)
    S = Q @ np.swapaxes(K, -1, -2) / c
    allowed = np.ones(S.shape, dtype=bool) if mask is None else np.broadcast_to(mask, S.shape)
    S = np.where(allowed, S, -np.inf)
    m = np.max(S, axis=-1, keepdims=True)
    e = np.where(allowed, np.exp(S - np.where(np.isfinite(m), m, 0.0)), 0.0)
    z = e.sum(axis=-1, keepdims=True)
    P = e / np.where(z == 0, 1.0, z)
    J = softmax_jacobian(P)
    dP = G @ np.swapaxes(V, -1, -2)
    dS = (J @ dP[..., :, None])[..., 0]
    dQ = dS @ K / c
    dK = np.swapaxes(dS, -1, -2) @ Q / c
    dV = np.swapaxes(P, -1, -2) @ G
    return sum_to_shape(dQ, Q.shape), sum_to_shape(dK, K.shape), sum_to_shape(dV, V.shape)
''',
    }),
    "float32": Rewrite("everything computed in float32 (within the tolerance; not for central differences)", {
        "softmax_jacobian": '''
def softmax_jacobian(p):
    p = np.asarray(p, dtype=np.float32)
    return p[..., :, None] * np.eye(p.shape[-1], dtype=np.float32) - p[..., :, None] * p[..., None, :]
''',
        "softmax_backward": '''
def softmax_backward(p, grad_p):
    p = np.asarray(p, dtype=np.float32)
    g = np.asarray(grad_p, dtype=np.float32)
    return p * (g - (g * p).sum(axis=-1, keepdims=True))
''',
        "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=np.float32) for a in (Q, K, V, grad_out))
    c = np.float32(np.sqrt(Q.shape[-1]) if scale is True else (1.0 if scale is False else scale))
    S = Q @ np.swapaxes(K, -1, -2) / c
    if mask is not None:
        S = np.where(mask, S, np.float32(-np.inf))
    m = S.max(axis=-1, keepdims=True)
    e = np.exp(S - np.where(np.isinf(m), np.float32(0), m))
    z = e.sum(axis=-1, keepdims=True)
    P = e / np.maximum(z, np.float32(1e-30))
    dV = np.swapaxes(P, -1, -2) @ G
    dS = softmax_backward(P, G @ np.swapaxes(V, -1, -2))
    return (sum_to_shape(dS @ K / c, Q.shape), sum_to_shape(np.swapaxes(dS, -1, -2) @ Q / c, K.shape),
            sum_to_shape(dV, V.shape))
''',
    }),
    "big_negative_fill": Rewrite("blocked scores filled with −1e9, fully masked rows zeroed explicitly", {
        "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_out))
    c = np.sqrt(Q.shape[-1]) if scale is True else (1.0 if scale is False else float(scale))
    S = Q @ np.swapaxes(K, -1, -2) / c
    allowed = np.ones(S.shape, dtype=bool) if mask is None else np.broadcast_to(mask, S.shape)
    S = np.where(allowed, S, -1e9)
    e = np.exp(S - S.max(axis=-1, keepdims=True))
    P = e / e.sum(axis=-1, keepdims=True)
    P = np.where(allowed.any(axis=-1, keepdims=True), P, 0.0)   # a row with no allowed key: zeros
    dV = np.swapaxes(P, -1, -2) @ G
    dS = softmax_backward(P, G @ np.swapaxes(V, -1, -2))
    dQ = dS @ K / c
    dK = np.swapaxes(dS, -1, -2) @ Q / c
    return sum_to_shape(dQ, Q.shape), sum_to_shape(dK, K.shape), sum_to_shape(dV, V.shape)
''',
    }),
    "scale_queries_first": Rewrite("divide Q by c before the product; dK then uses the scaled queries", {
        "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_out))
    c = np.sqrt(Q.shape[-1]) if scale is True else (1.0 if scale is False else float(scale))
    Qs = Q / c
    S = Qs @ np.swapaxes(K, -1, -2)
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    m = np.max(S, axis=-1, keepdims=True)
    e = np.exp(S - np.where(np.isfinite(m), m, 0.0))
    z = np.sum(e, axis=-1, keepdims=True)
    P = e / np.where(z > 0, z, 1.0)
    dV = np.swapaxes(P, -1, -2) @ G
    dS = softmax_backward(P, G @ np.swapaxes(V, -1, -2))
    dQs = dS @ K
    dK = np.swapaxes(dS, -1, -2) @ Qs
    return sum_to_shape(dQs / c, Q.shape), sum_to_shape(dK, K.shape), sum_to_shape(dV, V.shape)
''',
    }),
    "per_batch_loops": Rewrite("2-D formulas in a loop over the broadcast batch, gradients accumulated with +=", {
        "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_out))
    c = np.sqrt(Q.shape[-1]) if scale is True else (1.0 if scale is False else float(scale))
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    T_q, T_k = Q.shape[-2], K.shape[-2]
    M = np.ones((T_q, T_k), dtype=bool) if mask is None else mask
    M = np.broadcast_to(M, batch + (T_q, T_k))
    Qb, Kb, Vb = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (Q, K, V))
    dQ, dK, dV = np.zeros(Qb.shape), np.zeros(Kb.shape), np.zeros(Vb.shape)
    for b in np.ndindex(*batch):
        S = Qb[b] @ Kb[b].T / c
        P = np.zeros_like(S)
        for i in range(T_q):
            allowed = M[b][i]
            if allowed.any():
                e = np.exp(S[i][allowed] - S[i][allowed].max())
                P[i][allowed] = e / e.sum()
        dV[b] += P.T @ G[b]
        dP = G[b] @ Vb[b].T
        dS = P * (dP - (dP * P).sum(axis=1, keepdims=True))
        dQ[b] += dS @ Kb[b] / c
        dK[b] += dS.T @ Qb[b] / c
    return sum_to_shape(dQ, Q.shape), sum_to_shape(dK, K.shape), sum_to_shape(dV, V.shape)
''',
    }),
    "renormalised_after_mask": Rewrite("softmax of all scores, then blocked weights zeroed and rows renormalised", {
        "attention_backward": '''
def attention_backward(Q, K, V, grad_out, mask=None, scale=True):
    Q, K, V, G = (np.asarray(a, dtype=float) for a in (Q, K, V, grad_out))
    c = np.sqrt(Q.shape[-1]) if scale is True else (1.0 if scale is False else float(scale))
    S = Q @ np.swapaxes(K, -1, -2) / c
    allowed = np.ones(S.shape, dtype=bool) if mask is None else np.broadcast_to(mask, S.shape)
    shift = np.max(np.where(allowed, S, -np.inf), axis=-1, keepdims=True)
    e = np.exp(S - np.where(np.isfinite(shift), shift, S.max(axis=-1, keepdims=True))) * allowed
    z = e.sum(axis=-1, keepdims=True)
    P = e / np.where(z > 0, z, 1.0)
    dV = np.swapaxes(P, -1, -2) @ G
    dS = softmax_backward(P, G @ np.swapaxes(V, -1, -2))
    return (sum_to_shape(dS @ K / c, Q.shape), sum_to_shape(np.swapaxes(dS, -1, -2) @ Q / c, K.shape),
            sum_to_shape(dV, V.shape))
''',
    }),
    "norms_by_hand": Rewrite("relative error with sums of squares, as a 0-d array (np.where); numerical gradient "
                             "with np.nditer", {
        "relative_error": '''
def relative_error(analytic, numerical):
    a = np.asarray(analytic, dtype=float)
    n = np.asarray(numerical, dtype=float)
    denominator = max(np.sqrt(np.sum(a * a)), np.sqrt(np.sum(n * n)))
    return np.where(denominator == 0, 0.0, np.sqrt(np.sum((a - n) ** 2)) / np.where(denominator == 0, 1.0, denominator))
''',
        "numerical_gradient": '''
def numerical_gradient(f, x, eps=1e-6):
    x = np.array(x, dtype=float)
    grad = np.empty_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad
''',
    }),
}


# ---------------------------------------------------------------- known mistakes

MISTAKES: dict[str, Edit] = {
    "jacobian_no_outer_term": Edit(
        "softmax Jacobian without the −p pᵀ term: diag(p) only", "softmax_jacobian",
        "    return diagonal - outer", "    return diagonal",
        hint="Moving one score moves every probability, since they must still sum to 1: ∂p_i/∂s_j = −p_i p_j "
             "for i ≠ j. Your Jacobian has no off-diagonal entries (its rows should sum to 0).",
        breaks="softmax_jacobian"),
    "jacobian_outer_plus": Edit(
        "diag(p) + p pᵀ: the outer product added instead of subtracted", "softmax_jacobian",
        "    return diagonal - outer", "    return diagonal + outer",
        hint="Check the sign of ∂p_i/∂s_j for i ≠ j: raising another key's score takes probability away from "
             "key i. Each row of J must sum to 0.",
        breaks="softmax_jacobian"),
    "jacobian_diag_outer_flatten": Edit(
        "np.diag / np.outer: right for one row, wrong for a batch (np.diag of a matrix extracts its diagonal, "
        "np.outer flattens)", "softmax_jacobian",
        "    diagonal = p[..., :, None] * np.eye(p.shape[-1])\n    outer = p[..., :, None] * p[..., None, :]",
        "    diagonal = np.diag(p)\n    outer = np.outer(p, p)",
        hint="np.diag and np.outer only work on one row: on a batch (..., n) np.diag extracts a diagonal and "
             "np.outer flattens its inputs. Build diag(p) and p pᵀ with broadcasting over the leading axes.",
        breaks="softmax_jacobian", shape_only=True),
    "backward_inner_unweighted": Edit(
        "⟨g, 1⟩ instead of ⟨g, p⟩: the mean is not weighted by p", "softmax_backward",
        "    inner = np.sum(g * p, axis=-1, keepdims=True)", "    inner = np.sum(g, axis=-1, keepdims=True)",
        hint="The term subtracted from g is the p-weighted average ⟨g, p⟩ = Σ_i g_i p_i, from the −p pᵀ part of "
             "the Jacobian.",
        breaks="softmax_backward"),
    "backward_inner_wrong_axis": Edit(
        "⟨g, p⟩ summed over the rows (axis 0) instead of over each row's keys", "softmax_backward",
        "    inner = np.sum(g * p, axis=-1, keepdims=True)", "    inner = np.sum(g * p, axis=0, keepdims=True)",
        hint="Each row is its own softmax: ⟨g, p⟩ is a sum over that row's entries (the last axis), one number "
             "per row.",
        breaks="softmax_backward"),
    "backward_inner_no_keepdims": Edit(
        "⟨g, p⟩ without keepdims: one number per row broadcast along the keys instead of along the row",
        "softmax_backward",
        "    inner = np.sum(g * p, axis=-1, keepdims=True)", "    inner = np.sum(g * p, axis=-1)",
        hint="Without keepdims the per-row sums have shape (rows,), which NumPy lines up with the *last* axis: "
             "row i then subtracts the sum of row j. Keep the summed axis (keepdims=True) so each row subtracts "
             "its own.",
        breaks="softmax_backward"),
    "attention_diagonal_only": Edit(
        "dS = P ⊙ dP: only the Jacobian's diagonal, the −p pᵀ term forgotten in attention", "attention_backward",
        "    dS = softmax_backward(P, dP)", "    dS = P * dP",
        hint="dS is the softmax backward of dP row by row: P ⊙ (dP − ⟨dP, P⟩). Dropping the ⟨dP, P⟩ term "
             "forgets that the weights of a row sum to 1 (each row of dS should sum to 0).",
        breaks="attention_backward"),
    "attention_no_scale_in_dQ_dK": Edit(
        "dQ and dK without the 1/c of the scaling", "attention_backward",
        "    dQ = dS @ K / c\n    dK = np.swapaxes(dS, -1, -2) @ Q / c",
        "    dQ = dS @ K\n    dK = np.swapaxes(dS, -1, -2) @ Q",
        hint="The scores are Q Kᵀ / √d_k, so the chain rule multiplies the gradients reaching Q and K by 1/√d_k "
             "(or by 1/c for the divisor you were given).",
        breaks="attention_backward"),
    "attention_scale_by_d_k": Edit(
        "divides by d_k instead of √d_k for scale=True", "attention_backward",
        "        c = np.sqrt(d_k)", "        c = d_k",
        hint="scale=True means dividing the scores by √d_k (Vaswani et al. 2017, eq. 1), not by d_k: with d_k the "
             "weights are too flat and every gradient to Q and K too small.",
        breaks="attention_backward"),
    "attention_truthy_scale": Edit(
        "any truthy scale (e.g. 3.0) treated as True, i.e. as √d_k", "attention_backward",
        "    if scale is True:", "    if scale:",
        hint="A number passed as scale is the divisor itself: `if scale:` is also true for 3.0. Test for True and "
             "False explicitly (`scale is True`).",
        breaks="attention_backward"),
    "attention_dK_no_transpose": Edit(
        "dK = dS Q instead of dSᵀ Q", "attention_backward",
        "    dK = np.swapaxes(dS, -1, -2) @ Q / c", "    dK = dS @ Q / c",
        hint="Key j's gradient collects, over the queries i that looked at it, dS_ij q_i: that is dSᵀ Q (shape "
             "(T_k, d_k)). dS Q only has the right shape when T_q = T_k.",
        breaks="attention_backward"),
    "attention_dV_no_transpose": Edit(
        "dV = P G instead of Pᵀ G", "attention_backward",
        "    dV = np.swapaxes(P, -1, -2) @ G", "    dV = P @ G",
        hint="Value j receives from each query i its weight P_ij times that query's upstream gradient: "
             "dV = Pᵀ G, shape (T_k, d_v).",
        breaks="attention_backward"),
    "attention_ignores_mask": Edit(
        "the backward recomputes the weights without the mask: gradient flows through blocked positions",
        "attention_backward",
        "    if mask is not None:\n        scores = np.where(mask, scores, -np.inf)\n", "",
        hint="The backward must use the same weights as the forward: a blocked position has weight 0 and must get "
             "no gradient. Apply the mask before the softmax here too.",
        breaks="attention_backward"),
    "attention_masked_row_nan": Edit(
        "no guard for a fully masked row: −inf − (−inf) = NaN", "attention_backward",
        "    top = np.where(np.isfinite(top), top, 0.0)\n", "",
        hint="A row whose keys are all blocked has max −inf, and −inf − (−inf) is NaN. This assignment's "
             "convention (assignment 4) is a zero row with zero gradient: shift such rows by 0 instead.",
        breaks="attention_backward"),
    "attention_masked_row_uniform": Edit(
        "blocked scores filled with −1e9: a fully masked row becomes uniform and passes gradient",
        "attention_backward",
        "        scores = np.where(mask, scores, -np.inf)", "        scores = np.where(mask, scores, -1e9)",
        hint="With a finite fill, a row with no allowed key is uniform over blocked keys instead of zero, and its "
             "gradient flows into V and Q. Use −inf (and the zero-row rule), or zero such rows explicitly.",
        breaks="attention_backward"),
    "numerical_forward_difference": Edit(
        "one-sided difference (f(x + ε) − f(x)) / ε", "numerical_gradient",
        "        x[index] = original - eps\n        f_minus = f(x)\n        x[index] = original\n"
        "        grad[index] = (f_plus - f_minus) / (2 * eps)",
        "        x[index] = original\n        f_minus = f(x)\n        grad[index] = (f_plus - f_minus) / eps",
        hint="A one-sided difference is off by about ε·f''/2; the central difference (f(x + ε) − f(x − ε)) / 2ε "
             "cancels that term and is accurate to O(ε²).",
        breaks="numerical_gradient"),
    "numerical_not_restored": Edit(
        "the perturbed entry is not put back: later entries are differentiated at a shifted point",
        "numerical_gradient",
        "        x[index] = original\n        grad", "        grad",
        hint="After the two evaluations, restore x[index] to its original value; otherwise every later entry is "
             "differentiated at a point that has moved by −ε.",
        breaks="numerical_gradient"),
    "numerical_eps_not_doubled": Edit(
        "divides by ε instead of 2ε: every entry doubled", "numerical_gradient",
        "        grad[index] = (f_plus - f_minus) / (2 * eps)", "        grad[index] = (f_plus - f_minus) / eps",
        hint="The two evaluation points are 2ε apart.",
        breaks="numerical_gradient"),
    "relative_error_no_zero_guard": Edit(
        "no special case when both gradients are 0: 0 / 0 = NaN", "relative_error",
        "    if scale == 0:\n        return 0.0\n", "",
        hint="Blocked positions have gradient exactly 0 in both: define the relative error as 0 when both norms "
             "are 0 instead of dividing 0 by 0.",
        breaks="relative_error"),
    "relative_error_elementwise_max": Edit(
        "the largest entry-wise relative error |a_i − n_i| / max(|a_i|, |n_i|) instead of the ratio of norms",
        "relative_error",
        "    return np.linalg.norm(a - n) / scale",
        "    return np.max(np.abs(a - n) / np.maximum(np.maximum(np.abs(a), np.abs(n)), 1e-300))",
        hint="This assignment's relative error is one number for the whole array: ‖a − n‖ / max(‖a‖, ‖n‖). "
             "Entry by entry, a tiny entry (1e-8 against 0) counts as a 100 % error.",
        breaks="relative_error"),
}
