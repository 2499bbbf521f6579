"""Values as data between the grader and a learner's kernel: arrays and scalars, never objects.

The grader sends hidden inputs into the kernel and reads the learner's raw
results back (see :mod:`attention_lab.core.probe`). Both directions use this one
encoding: JSON with NumPy arrays as base64 ``.npy`` bytes, read back with
``allow_pickle=False``. Nothing a learner returns can reach the grader as a
live Python object: an ``ndarray`` subclass arrives as its plain data with its
class name noted, and anything else arrives as the name of its type, so an
object whose ``__eq__`` says True to everything is only a name.
"""

from __future__ import annotations

import base64
import io
import json
import math
from typing import Any

import numpy as np

from attention_lab.core.losses import CubicLoss

MAX_BYTES = 16 * 2**20  # one call's results; a correct one is a few kilobytes
MAX_DEPTH = 3  # tuples of arrays, e.g. (output, weights) or (out, K_cache, V_cache)
MAX_TEXT = 2000


class Unsupported:
    """A value that could not be sent as data; ``what`` says what it was, in words."""

    def __init__(self, what: str):
        self.what = what

    def __repr__(self) -> str:
        return f"Unsupported({self.what!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Unsupported) and other.what == self.what


class ArrayFromSubclass(np.ndarray):
    """A decoded array that the learner returned as an ``ndarray`` subclass (``source_class`` names it)."""

    source_class = ""


def _npy(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _from_npy(text: str) -> np.ndarray:
    return np.load(io.BytesIO(base64.b64decode(text.encode("ascii"))), allow_pickle=False)


def encode(value: Any, depth: int = 0) -> Any:
    """Encode ``value`` as JSON-ready data.

    Supported: ``numpy.ndarray`` (and subclasses, sent as plain arrays),
    NumPy scalars, ``bool``, ``int``, ``float`` (also inf and NaN), ``str``,
    ``None``, and ``tuple``/``list`` of these up to :data:`MAX_DEPTH` levels, and a
    :class:`~attention_lab.core.losses.CubicLoss` (as its coefficient arrays).
    Exact types are required for containers, so a subclass cannot hide
    behaviour in ``__iter__``. Anything else becomes ``{"unsupported": <type name>}``.
    """
    kind = type(value)
    if value is None or kind in (bool, str):
        return value if kind is not str else value[:MAX_TEXT]
    if kind is int:
        return value if abs(value) < 2**53 else {"float": repr(float(value))}
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, np.ndarray):
        plain = np.array(value, copy=True, subok=False)
        if plain.dtype.hasobject or plain.dtype.kind in "OVSUMm":
            return {"unsupported": f"an array of dtype {plain.dtype}"}
        encoded = {"ndarray": _npy(plain)}
        if kind is not np.ndarray:
            encoded["class"] = f"{kind.__module__}.{kind.__qualname__}"
        return encoded
    if isinstance(value, np.generic) and type(value).__module__ == "numpy":
        return {"scalar": _npy(np.asarray(value))}
    if kind in (tuple, list) and depth < MAX_DEPTH:
        return {kind.__name__: [encode(item, depth + 1) for item in value]}
    if kind is CubicLoss:  # a hidden case's loss for numerical_gradient: sent as its coefficients
        return {"cubic_loss": [encode(v, MAX_DEPTH) for v in value.coefficients]}
    return {"unsupported": f"a {kind.__module__}.{kind.__qualname__}"}


def decode(data: Any) -> Any:
    """Inverse of :func:`encode`; unsupported values become :class:`Unsupported`.

    Raises
    ------
    ValueError
        If ``data`` is not something :func:`encode` produces.
    """
    if data is None or type(data) in (bool, int, float, str):
        return data
    if isinstance(data, dict) and len(data) in (1, 2):
        if "ndarray" in data:
            array = _from_npy(data["ndarray"])
            if "class" in data:
                array = array.view(ArrayFromSubclass)
                array.source_class = str(data["class"])
            return array
        if "scalar" in data:
            return _from_npy(data["scalar"])[()]
        if "float" in data:
            return float(data["float"])
        if "tuple" in data:
            return tuple(decode(item) for item in data["tuple"])
        if "list" in data:
            return [decode(item) for item in data["list"]]
        if "unsupported" in data:
            return Unsupported(str(data["unsupported"]))
        if "cubic_loss" in data and isinstance(data["cubic_loss"], list) and len(data["cubic_loss"]) == 4:
            return CubicLoss(*(decode(item) for item in data["cubic_loss"]))
    raise ValueError(f"not an encoded value: {str(data)[:80]}")


def dumps(data: Any) -> str:
    """JSON text of encoded data (compact, key order kept)."""
    return json.dumps(data, separators=(",", ":"))


def pack(data: Any) -> str:
    """Encoded data as one line of base64 text, to embed in a code cell."""
    return base64.b64encode(dumps(data).encode("utf-8")).decode("ascii")


def unpack(text: str) -> Any:
    """Inverse of :func:`pack`."""
    return json.loads(base64.b64decode(text.encode("ascii")).decode("utf-8"))
