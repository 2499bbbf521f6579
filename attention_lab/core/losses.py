"""Scalar test functions that cross into a learner's kernel as data (their coefficients), never as code.

``numerical_gradient(f, x)`` (assignment 6) takes a function. A hidden case cannot send a live
function into the learner's kernel, so it sends a :class:`CubicLoss`: both value codecs
(:mod:`attention_lab.core.values`, :mod:`attention_lab.core.worked`) encode it as its four
coefficient arrays and decode it into a new, equal loss on the other side.
"""

from __future__ import annotations

import numpy as np


class CubicLoss:
    """f(x) = Σ a⊙x + ½ Σ b⊙x² + ⅙ Σ c⊙x³ + ½ (Σ d⊙x)², a scalar loss of an array x of the coefficients' shape.

    Its gradient is a + b⊙x + ½ c⊙x² + d (Σ d⊙x). The cubic term makes a one-sided difference
    visibly wrong (its error is about ε f''/2), and the coupling term makes every entry's gradient
    depend on every other entry, so a perturbation that is not put back changes later entries.

    Parameters
    ----------
    a, b, c, d : array_like of float
        Coefficients, all of one shape (the shape of x).

    Raises
    ------
    ValueError
        If the coefficients do not all have the same shape or are not finite real numbers.
    """

    def __init__(self, a, b, c, d):
        coefficients = tuple(np.array(v, dtype=np.float64) for v in (a, b, c, d))
        shapes = {v.shape for v in coefficients}
        if len(shapes) != 1:
            raise ValueError(f"a, b, c and d must have one shape; received shapes {[v.shape for v in coefficients]}")
        if not all(np.all(np.isfinite(v)) for v in coefficients):
            raise ValueError("the coefficients a, b, c and d must be finite")
        for v in coefficients:
            v.flags.writeable = False
        self.coefficients = coefficients

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape x must have."""
        return self.coefficients[0].shape

    def __call__(self, x) -> float:
        """f(x) as a Python float.

        Raises
        ------
        ValueError
            If x does not have the coefficients' shape.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.shape != self.shape:
            raise ValueError(f"x must have shape {self.shape}; received shape {x.shape}")
        a, b, c, d = self.coefficients
        return float(np.sum(a * x) + 0.5 * np.sum(b * x * x) + np.sum(c * x ** 3) / 6.0 + 0.5 * np.sum(d * x) ** 2)

    def gradient(self, x) -> np.ndarray:
        """The exact gradient a + b⊙x + ½ c⊙x² + d (Σ d⊙x), shape of x (float64)."""
        x = np.asarray(x, dtype=np.float64)
        a, b, c, d = self.coefficients
        return a + b * x + 0.5 * c * x * x + d * np.sum(d * x)

    def __repr__(self) -> str:
        return f"CubicLoss(shape={self.shape})"

    def __eq__(self, other) -> bool:
        return isinstance(other, CubicLoss) and all(
            np.array_equal(p, q) for p, q in zip(self.coefficients, other.coefficients))

    __hash__ = None
