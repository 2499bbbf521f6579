"""Properties of a wrong result that several assignments' diagnoses name (see ``Step.diagnose``)."""

from __future__ import annotations

import numpy as np


def scale_ratio(got: np.ndarray, expected: np.ndarray, atol: float = 1e-9) -> float | None:
    """The factor k with got ≈ k · expected, if the two differ only by a constant factor.

    Parameters
    ----------
    got, expected : numpy.ndarray
        The learner's result and the reference's, of the same shape.
    atol : float
        Absolute tolerance of ``got ≈ k · expected`` (relative tolerance 1e-4), as in :func:`numpy.allclose`.

    Returns
    -------
    float or None
        k, or None when ``expected`` is all zeros, ``got`` is not finite, or no constant factor fits.
    """
    norm = float(np.vdot(expected, expected))
    if norm == 0.0 or not np.all(np.isfinite(got)):
        return None
    ratio = float(np.vdot(got, expected)) / norm
    return ratio if np.allclose(got, ratio * expected, rtol=1e-4, atol=atol) else None
