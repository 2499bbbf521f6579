"""Argument checks shared by the reference implementation.

Each check raises ``ValueError`` whose message names the argument, the
shape that was expected and the shape that was received, so that a learner
who calls the reference (or a widget built on it) with a wrong array sees
what to change instead of a broadcasting error from deep inside NumPy.
"""

from __future__ import annotations

import numpy as np


def as_float_array(name: str, value, *, min_ndim: int, expected: str) -> np.ndarray:
    """Return ``value`` as a floating-point ndarray with at least ``min_ndim`` dimensions.

    Parameters
    ----------
    name : str
        Argument name used in the error message.
    value : array_like
        The argument. Integer and boolean arrays are converted to float64;
        float16/float32/float64 arrays keep their dtype.
    min_ndim : int
        Smallest number of dimensions accepted.
    expected : str
        Human-readable expected shape, e.g. ``"(..., T_q, d_k)"``.

    Returns
    -------
    numpy.ndarray
        A floating-point view or copy of ``value``.

    Raises
    ------
    ValueError
        If ``value`` has fewer than ``min_ndim`` dimensions, is complex, is
        not numeric, or is a masked array.
    """
    if isinstance(value, np.ma.MaskedArray):
        raise ValueError(f"{name} must be a plain array of shape {expected}; received a numpy.ma.MaskedArray "
                         "(its mask would be ignored: pass a boolean `mask` instead)")
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise ValueError(
            f"{name} must be a real numeric array of shape {expected}; "
            f"received dtype {array.dtype}"
        )
    if array.ndim < min_ndim:
        raise ValueError(
            f"{name} must have shape {expected} (at least {min_ndim} dimensions); "
            f"received shape {array.shape}"
        )
    if array.dtype.kind != "f":
        array = array.astype(np.float64)
    return array


def require_positive_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` after checking that it is an integer ≥ 1.

    Raises
    ------
    ValueError
        If ``value`` is not an integer (``bool`` is rejected) or is < 1.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= 1; received {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1; received {value}")
    return int(value)


def require_same(name_a: str, size_a: int, name_b: str, size_b: int, what: str) -> None:
    """Raise ``ValueError`` unless two axis sizes agree.

    Parameters
    ----------
    name_a, name_b : str
        Descriptions of the two axes, e.g. ``"Q.shape[-1]"``.
    size_a, size_b : int
        The sizes received.
    what : str
        The symbol both must share, e.g. ``"d_k"``.
    """
    if size_a != size_b:
        raise ValueError(
            f"{name_a} and {name_b} must both equal {what}; "
            f"received {name_a}={size_a} and {name_b}={size_b}"
        )


def broadcast_mask(mask, target_shape: tuple[int, ...]) -> np.ndarray:
    """Check a boolean attention mask and broadcast it to ``target_shape``.

    Parameters
    ----------
    mask : array_like of bool
        True where a query may attend to a key; broadcastable to
        ``target_shape`` = ``(..., T_q, T_k)``.
    target_shape : tuple of int
        Shape of the attention scores.

    Returns
    -------
    numpy.ndarray of bool, shape ``target_shape``

    Raises
    ------
    ValueError
        If ``mask`` is not boolean or does not broadcast to ``target_shape``.
    """
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(
            f"mask must be a boolean array (True = may attend) broadcastable to "
            f"{target_shape}; received dtype {mask.dtype} with shape {mask.shape}"
        )
    try:
        return np.broadcast_to(mask, target_shape)
    except ValueError:
        raise ValueError(
            f"mask must be broadcastable to the scores' shape (..., T_q, T_k) = "
            f"{target_shape}; received shape {mask.shape}"
        ) from None


def require_bool(name: str, value) -> bool:
    """Return ``value`` as ``bool`` after checking that it is True or False.

    Raises
    ------
    ValueError
        If ``value`` is not a Python or NumPy boolean (``None`` is not "no").
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; received {value!r}")
    return bool(value)


def require_axis(name: str, axis, ndim: int, shape: tuple[int, ...]) -> int:
    """Return ``axis`` as a non-negative int after checking it indexes an axis of an array of ``shape``.

    Raises
    ------
    ValueError
        If ``axis`` is not an integer (``bool`` is rejected) or is out of range.
    """
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{-ndim}, {ndim - 1}] for an array of shape {shape}; "
                         f"received {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name} must be in [{-ndim}, {ndim - 1}] for an array of shape {shape}; received {axis}")
    return int(axis) % ndim


def keys_and_values(K, V) -> tuple[np.ndarray, np.ndarray]:
    """``K`` (..., T_k, d_k) and ``V`` (..., T_k, d_v) as float arrays with the same number of keys T_k.

    Raises
    ------
    ValueError
        If either has fewer than 2 dimensions, is not numeric, or their T_k differ.
    """
    K = as_float_array("K", K, min_ndim=2, expected="(..., T_k, d_k)")
    V = as_float_array("V", V, min_ndim=2, expected="(..., T_k, d_v)")
    require_same("K.shape[-2]", K.shape[-2], "V.shape[-2]", V.shape[-2], "T_k")
    return K, V


def require_batch_broadcast(scores: np.ndarray, V: np.ndarray) -> None:
    """Check that the leading (batch) dimensions of ``V`` broadcast with those of the scores (..., T_q, T_k).

    Raises
    ------
    ValueError
        If they do not, naming both shapes.
    """
    try:
        np.broadcast_shapes(scores.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"the leading (batch) dimensions of V {V.shape[:-2]} must broadcast with those of the "
                         f"scores {scores.shape[:-2]}; received V.shape={V.shape}") from None


def projections(d_model: int, W_q, W_k, W_v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The projections W_q, W_k, W_v as float arrays of shape (d_model, d_head), checked against each other.

    Raises
    ------
    ValueError
        If one is not (d_model, d_head) with ``d_model`` (from x) and d_head ≥ 1, or their d_head differ.
    """
    checked = []
    for name, W in (("W_q", W_q), ("W_k", W_k), ("W_v", W_v)):
        W = as_float_array(name, W, min_ndim=2, expected=f"(d_model, d_head) = ({d_model}, d_head)")
        if W.ndim != 2 or W.shape[0] != d_model or W.shape[1] == 0:
            raise ValueError(f"{name} must have shape (d_model, d_head) with d_model={d_model} (from x) and "
                             f"d_head >= 1; received shape {W.shape}")
        checked.append(W)
    require_same("W_q.shape[1]", checked[0].shape[1], "W_k.shape[1]", checked[1].shape[1], "d_head")
    require_same("W_q.shape[1]", checked[0].shape[1], "W_v.shape[1]", checked[2].shape[1], "d_head")
    return checked[0], checked[1], checked[2]


def kv_caches(d_head: int, K_cache, V_cache) -> tuple[np.ndarray, np.ndarray]:
    """A key cache and a value cache as float arrays of shape (T_past, d_head), with the same T_past (may be 0).

    Raises
    ------
    ValueError
        If one is not (T_past, d_head) with ``d_head`` (from W_k), or their T_past differ.
    """
    caches = []
    for name, cache in (("K_cache", K_cache), ("V_cache", V_cache)):
        cache = as_float_array(name, cache, min_ndim=2, expected=f"(T_past, d_head) = (T_past, {d_head})")
        if cache.ndim != 2 or cache.shape[1] != d_head:
            raise ValueError(f"{name} must have shape (T_past, d_head) with d_head={d_head} (from W_k); "
                             f"received shape {cache.shape}")
        caches.append(cache)
    require_same("K_cache.shape[0]", caches[0].shape[0], "V_cache.shape[0]", caches[1].shape[0], "T_past")
    return caches[0], caches[1]


def tokens(name: str, x) -> np.ndarray:
    """Token vectors ``x`` as a float array of shape (T, d_model) with T ≥ 1 and d_model ≥ 1.

    Raises
    ------
    ValueError
        If ``x`` is not numeric or not of that shape, naming ``name``.
    """
    x = as_float_array(name, x, min_ndim=2, expected="(T, d_model)")
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must have shape (T, d_model) with T >= 1 and d_model >= 1; "
                         f"received shape {x.shape}")
    return x
