"""Assignment 6's diagnoses: which property of a wrong gradient fails, in words (``Step.diagnose``).

The grader calls a step's diagnosis when a learner's result matches no known mistake on a hidden case (a
combination of mistakes, or one the bank has no name for). Each diagnosis recomputes, from the case's own
inputs, what the common slips give — the Jacobian without its −p pᵀ term, dK without its transpose, dQ and dK
without the 1/√d_k of the scaling, one-sided differences, ... — and names each one the learner's result
matches, output by output; then it names the properties every correct answer has that the result breaks (a
softmax Jacobian's rows sum to 0 and it is symmetric; a blocked key gets no gradient; a relative error is at
most 2). It uses the inputs and the learner's values only, so it holds for any input, not only the hidden cases
(``tests/test_gradients_diagnoses.py``). Messages never show a hidden input or an expected value (nor a learner's value, which may echo an input: the
row sums of diag(p) are p).
"""

from __future__ import annotations

import numpy as np

from attention_lab.a06_gradients.given import sum_to_shape

RTOL, ATOL = 1e-4, 1e-6  # as the comparison of the hidden cases


def _close(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=False))


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "fiu"


def _rows_sum(name: str, got: np.ndarray, what: str) -> list[str]:
    sums = got.sum(axis=-1)
    if np.all(np.isfinite(sums)) and not np.allclose(sums, 0.0, atol=1e-6):
        return [f"Each row of {name} should sum to 0 ({what}); yours do not."]  # its sums could echo an input
    return []


# ---- step 1: softmax_jacobian(p) -------------------------------------------------------------------------

def jacobian(case, got, expected) -> list[str]:
    """What is wrong with a learner's ``softmax_jacobian(p)`` (see the module docstring)."""
    p = np.asarray(case.args[0], dtype=float)
    n = p.shape[-1]
    if not _is_array(got):
        return []
    if got.shape != expected.shape:
        if got.shape == (p.size, p.size) and p.ndim > 1:
            return [f"Your Jacobian has shape {got.shape}, one row and column per entry of the whole batch: np.outer "
                    "flattens its inputs. Build p pᵀ per row with broadcasting, shape (..., n, n)."]
        return []
    got = got.astype(float)
    diagonal, outer = p[..., :, None] * np.eye(n), p[..., :, None] * p[..., None, :]
    notes = []
    if _close(got, diagonal):
        notes.append("Missing −p pᵀ term: your Jacobian is diag(p). Off the diagonal ∂p_i/∂s_j = −p_i p_j: raising "
                     "one score takes probability from every other key.")
    elif _close(got, diagonal + outer):
        notes.append("The −p pᵀ term has the wrong sign: your Jacobian is diag(p) + p pᵀ.")
    elif _close(got, outer - diagonal):
        notes.append("The sign is flipped: your Jacobian is p pᵀ − diag(p), the negative of diag(p) − p pᵀ.")
    notes += _rows_sum("the Jacobian", got, "the weights of a row always sum to 1, so no change of the scores "
                       "changes their sum")
    if np.all(np.isfinite(got)) and not np.allclose(got, np.swapaxes(got, -1, -2), rtol=RTOL, atol=ATOL):
        notes.append("The Jacobian should be symmetric (J_ij = δ_ij p_i − p_i p_j = J_ji); yours is not: are the "
                     "outer product's factors p[..., :, None] and p[..., None, :]?")
    return notes


# ---- step 2: softmax_backward(p, grad_p) -----------------------------------------------------------------

def backward(case, got, expected) -> list[str]:
    """What is wrong with a learner's ``softmax_backward(p, grad_p)`` (see the module docstring)."""
    p, g = (np.asarray(a, dtype=float) for a in case.args[:2])
    if not _is_array(got) or got.shape != expected.shape:
        return []
    got = got.astype(float)
    slips = [
        ("Missing −p pᵀ term: your result is p ⊙ g, the Jacobian's diagonal only; subtract the p-weighted average "
         "⟨g, p⟩ from g first.", lambda: p * g),
        ("⟨g, p⟩ is not weighted by p: you subtract Σ g (or its plain mean) instead of Σ_i g_i p_i.",
         lambda: p * (g - g.sum(axis=-1, keepdims=True))),
        ("⟨g, p⟩ is not weighted by p: you subtract the plain mean of g instead of Σ_i g_i p_i.",
         lambda: p * (g - g.mean(axis=-1, keepdims=True))),
        ("⟨g, p⟩ is summed over the wrong axis (down the rows): each row's sum runs over its own keys, the last "
         "axis.", lambda: p * (g - (g * p).sum(axis=0, keepdims=True))),
        ("keepdims dropped: the per-row sums ⟨g, p⟩ are lined up with the last axis, so row i subtracts another "
         "row's sum. Use keepdims=True.", lambda: p * (g - (g * p).sum(axis=-1))),
        ("The sign is flipped: your result is p ⊙ (⟨g, p⟩ − g).", lambda: p * ((g * p).sum(axis=-1, keepdims=True) - g)),
    ]
    notes = _matching(got, expected, slips)
    notes += _rows_sum("the gradient reaching the scores", got, "a softmax does not change when the same number is "
                       "added to every score of a row")
    blocked = (p == 0) & np.isfinite(got) & (np.abs(got) > ATOL)
    if blocked.any():
        notes.append("An entry with weight 0 gets a gradient: p_i = 0 multiplies every term of entry i.")
    return notes


def _matching(got, expected, slips) -> list[str]:
    notes = []
    for message, slip in slips:
        try:
            with np.errstate(all="ignore"):
                value = slip()
        except (ValueError, IndexError):
            continue  # the slip does not apply to these shapes
        if np.shape(value) == np.shape(got) and _close(got, value) and not _close(value, expected):
            notes.append(message)
            break
    return notes


# ---- step 3: attention_backward(Q, K, V, grad_out, mask=None, scale=True) ---------------------------------

def _divisor(scale, d_k: int) -> float:
    return float(np.sqrt(d_k)) if scale is True else 1.0 if scale is False else float(scale)


def _gradients(Q, K, V, G, mask, c, *, masked=True, fill=-np.inf, diagonal_only=False):
    """(P, dS, dQ, dK, dV) of attention with divisor ``c``, written out (the slips change one switch each)."""
    with np.errstate(all="ignore"):
        scores = Q @ np.swapaxes(K, -1, -2) / c
        if mask is not None and masked:
            scores = np.where(mask, scores, fill)
        top = np.max(scores, axis=-1, keepdims=True)
        e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
        total = e.sum(axis=-1, keepdims=True)
        P = e / np.where(total > 0, total, 1.0)
        dP = G @ np.swapaxes(V, -1, -2)
        dS = P * dP if diagonal_only else P * (dP - (dP * P).sum(axis=-1, keepdims=True))
        return (P, dS, sum_to_shape(dS @ K / c, Q.shape), sum_to_shape(np.swapaxes(dS, -1, -2) @ Q / c, K.shape),
                sum_to_shape(np.swapaxes(P, -1, -2) @ G, V.shape))


NAMES = ("dQ", "dK", "dV")


def attention(case, got, expected) -> list[str]:
    """What is wrong with a learner's ``attention_backward`` result (see the module docstring)."""
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(_is_array(g) for g in got)):
        return []
    if any(np.shape(g) != np.shape(e) for g, e in zip(got, expected)):
        return []
    got = tuple(np.asarray(g, dtype=float) for g in got)
    Q, K, V, G = (np.asarray(a, dtype=float) for a in case.args[:4])
    mask = case.kwargs.get("mask")
    mask = None if mask is None else np.asarray(mask, dtype=bool)
    scale = case.kwargs.get("scale", True)
    d_k = Q.shape[-1]
    c = _divisor(scale, d_k)
    P, dS, *right = _gradients(Q, K, V, G, mask, c)
    notes = []
    wrong = [name for name, mine, ok in zip(NAMES, got, right) if not _close(mine, ok)]
    if wrong and len(wrong) < 3:
        notes.append(f"{_names(wrong)} {'is' if len(wrong) == 1 else 'are'} wrong; "
                     f"{_names([n for n in NAMES if n not in wrong])} {'is' if len(wrong) == 2 else 'are'} right.")
    slips = [
        ("Missing 1/√d_k in dQ and dK: the scores are Q Kᵀ / c, so the chain rule divides the gradients reaching Q "
         "and K by c (√d_k for scale=True).", lambda: (right[0] * c, right[1] * c, right[2])),
        ("Divided by d_k instead of √d_k: your gradients are those of scores Q Kᵀ / d_k.",
         lambda: _gradients(Q, K, V, G, mask, float(d_k))[2:] if scale is True else None),
        (f"scale={scale!r} treated as True: your gradients are those of dividing by √d_k; a number passed as scale "
         "is the divisor itself.", lambda: _gradients(Q, K, V, G, mask, float(np.sqrt(d_k)))[2:]
         if scale is not True and scale is not False else None),
        ("Missing −p pᵀ term in dS: dS = P ⊙ dP forgets that each row of weights sums to 1; use "
         "P ⊙ (dP − ⟨dP, P⟩).", lambda: _gradients(Q, K, V, G, mask, c, diagonal_only=True)[2:]),
        ("The mask is ignored in the backward: your gradients are those of the weights without the mask, so blocked "
         "positions pass gradient.", lambda: _gradients(Q, K, V, G, mask, c, masked=False)[2:]
         if mask is not None else None),
        ("A fully masked row gets gradient: with a finite fill (−1e9) its weights are uniform instead of 0.",
         lambda: _gradients(Q, K, V, G, mask, c, fill=-1e9)[2:] if mask is not None else None),
    ]
    for message, slip in slips:
        value = slip()
        if value is None:
            continue
        changed = [i for i in range(3) if not _close(value[i], right[i])]
        if changed and all(_close(got[i], value[i]) for i in changed):
            notes.append(message)
    transposes = [
        (1, "dK is missing its transpose: dK = dSᵀ Q / c (key j collects dS_ij q_i over the queries i), not dS Q.",
         lambda: sum_to_shape(dS @ Q / c, K.shape)),
        (2, "dV is missing its transpose: dV = Pᵀ G (value j collects P_ij g_i over the queries i), not P G.",
         lambda: sum_to_shape(P @ G, V.shape)),
    ]
    for index, message, slip in transposes:
        try:
            with np.errstate(all="ignore"):
                value = slip()
        except ValueError:
            continue  # T_q ≠ T_k: the product without the transpose has no such shape
        if not _close(value, right[index]) and _close(got[index], value):
            notes.append(message)
    notes += _blocked(got, mask, Q.shape, K.shape)
    return notes


def _blocked(got, mask, q_shape, k_shape) -> list[str]:
    """Properties of any correct answer under a mask: no NaN; no gradient for a query with no key, nor for a key
    that no query may see."""
    dQ, dK, dV = got
    notes = []
    bad = [name for name, g in zip(NAMES, got) if not np.all(np.isfinite(g))]
    if bad:
        notes.append(f"{_names(bad)} {'holds' if len(bad) == 1 else 'hold'} NaN or inf: a fully masked row has max −inf, and −inf − (−inf) is NaN; "
                     "such a row has weights 0 and passes no gradient.")
    if mask is None or mask.ndim != 2 or len(q_shape) != 2 or len(k_shape) != 2:
        return notes
    empty_rows, unseen_keys = ~mask.any(axis=1), ~mask.any(axis=0)
    if empty_rows.any() and np.all(np.isfinite(dQ)) and np.abs(dQ[empty_rows]).max() > ATOL:
        notes.append("A query that may attend to no key gets a gradient in dQ: a fully masked row has weights 0 and "
                     "passes no gradient.")
    for name, g in (("dK", dK), ("dV", dV)):
        if unseen_keys.any() and np.all(np.isfinite(g)) and np.abs(g[unseen_keys]).max() > ATOL:
            notes.append(f"A key blocked for every query gets a gradient in {name}: a blocked position gets no "
                         "gradient.")
    return notes


def _names(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# ---- step 4: numerical_gradient(f, x, eps=1e-6) ----------------------------------------------------------

def numerical(case, got, expected) -> list[str]:
    """What is wrong with a learner's ``numerical_gradient`` (see the module docstring)."""
    f, x = case.args[0], np.array(case.args[1], dtype=float)
    eps = float(case.kwargs.get("eps", 1e-6))
    if not _is_array(got) or got.shape != expected.shape or not callable(f):
        return []
    got = got.astype(float)

    def differences(step, restore=True, one_sided=False):
        point, grad = x.copy(), np.zeros_like(x)
        for index in np.ndindex(*x.shape):
            original = point[index]
            point[index] = original + step
            plus = f(point)
            point[index] = original if one_sided else original - step
            minus = f(point)
            if restore:
                point[index] = original
            grad[index] = (plus - minus) / (step if one_sided else 2 * step)
        return grad

    slips = [
        ("One-sided differences: your gradient is (f(x + ε) − f(x)) / ε, off by about ε·f''/2; the central "
         "difference (f(x + ε) − f(x − ε)) / 2ε is accurate to O(ε²).", lambda: differences(eps, one_sided=True)),
        ("Divided by ε instead of 2ε: every entry is twice the central difference (the two points are 2ε apart).",
         lambda: 2 * differences(eps)),
        ("An entry is not put back after its differences: every later entry is differentiated at a point that "
         "has moved by −ε. Restore x[index] before the next entry.", lambda: differences(eps, restore=False)),
    ]
    notes = _matching(got, expected, slips)
    flat_got, flat_expected = got.ravel(), np.asarray(expected, dtype=float).ravel()
    if not notes and flat_got.size > 1 and np.isclose(flat_got[0], flat_expected[0], rtol=RTOL, atol=ATOL) \
            and not np.allclose(flat_got[1:], flat_expected[1:], rtol=RTOL, atol=ATOL):
        notes.append("The first entry is right and later ones are wrong: is x left as it was after each entry?")
    return notes


# ---- step 5: relative_error(analytic, numerical) ---------------------------------------------------------

def relative(case, got, expected) -> list[str]:
    """What is wrong with a learner's ``relative_error`` (see the module docstring)."""
    a, n = (np.asarray(v, dtype=float) for v in case.args[:2])
    try:
        value = float(got)
    except (TypeError, ValueError):
        return []
    if not np.isfinite(value):
        if not a.any() and not n.any():
            return ["Both gradients are 0 here (a blocked position), and 0 / 0 is NaN: define the relative error as "
                    "0 when both norms are 0."]
        return ["The relative error is NaN or infinite although one of the gradients is not 0."]
    notes = []
    with np.errstate(all="ignore"):
        entrywise = float(np.max(np.abs(a - n) / np.maximum(np.maximum(np.abs(a), np.abs(n)), 1e-300))) \
            if a.size else 0.0
    if np.isclose(value, entrywise, rtol=RTOL, atol=ATOL) and not np.isclose(entrywise, float(expected),
                                                                              rtol=RTOL, atol=ATOL):
        notes.append("This is the largest entry-wise relative error, not one number for the whole array: "
                     "‖a − n‖ / max(‖a‖, ‖n‖).")
    if value < 0 or value > 2 + 1e-9:
        notes.append(f"A relative error ‖a − n‖ / max(‖a‖, ‖n‖) lies between 0 and 2; yours is {value:.4g}.")
    return notes
