"""Values as data: between the grader and a learner's kernel, and in the worked cases the package stores.

**On the wire** (:func:`encode`, :func:`decode`, :func:`dumps`, :func:`pack`).
The grader sends hidden inputs into the kernel and reads the learner's raw
results back (see :mod:`attention_lab.core.probe`). Both directions use this one
encoding: JSON with NumPy arrays as base64 ``.npy`` bytes, read back with
``allow_pickle=False``. Nothing a learner returns can reach the grader as a
live Python object: an ``ndarray`` subclass arrives as its plain data with its
class name noted, and anything else arrives as the name of its type, so an
object whose ``__eq__`` says True to everything is only a name.

**Stored** (:func:`encode_stored`, :func:`decode_stored`): the worked cases
kept in ``attention_lab/<folder>/worked_cases.json`` (see
:mod:`attention_lab.core.worked`) are read by people in reviews, so their
values are readable JSON that round-trips bit for bit:

* ``None``, booleans, integers, strings and finite floats are JSON values
  (floats written with enough digits to round-trip exactly);
* a non-finite float is ``{"float": "nan" | "inf" | "-inf"}`` (as on the wire);
* an array is ``{"ndarray": {"dtype": ..., "shape": [...], "data": nested lists}}``,
  non-finite entries written as the strings ``"nan"``, ``"inf"``, ``"-inf"``;
* a NumPy scalar is ``{"numpy_scalar": {"dtype": ..., "value": ...}}``;
* a tuple is ``{"tuple": [...]}``, a dict ``{"dict": {...}}`` (string keys).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from attention_lab.core.compare import subclass_name
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


class RecipeArray(np.ndarray):
    """A hidden input the kernel can make itself: sent as its recipe (a few dozen bytes), not its data.

    :func:`encode` sends ``{tag: recipe}`` for one whose values are still those its recipe makes, and
    :func:`decode` makes them again as a plain ``numpy.ndarray``. An array derived from one (a view, an
    arithmetic result) has no recipe and is sent as data. Assignment 7's T = 20 000 case holds three
    20 000 × 8 arrays and assignment 9's cases the trained model (300 KB a case): sent as data they made
    probe cells of 6.8 MB and 0.8 MB, which each student's kernel spent seconds reading (IPython transforms
    and compiles a cell's whole text).

    Attributes
    ----------
    recipe : dict or None
        What :func:`decode` needs to make the array again (see the subclasses).
    """

    recipe: dict | None = None
    tag = ""

    def __array_finalize__(self, obj) -> None:
        self.recipe = None  # a view or a result of this array is data, not the input

    def holds_its_recipe(self) -> bool:
        """Whether the values are still the ones the recipe makes."""
        raise NotImplementedError


class SeededNormal(RecipeArray):
    """A standard-normal draw of NumPy's default generator (:func:`seeded_normals`).

    ``recipe`` is ``{"seed": int, "shape": [int, ...], "count": int, "index": int}``: the ``index``-th of
    ``count`` consecutive ``numpy.random.default_rng(seed).normal(size=shape)`` draws.
    """

    tag = "seeded_normal"

    def holds_its_recipe(self) -> bool:
        drawn = _seeded_array(self.recipe)
        return self.shape == drawn.shape and np.array_equal(self, drawn)


class PackageArray(RecipeArray):
    """An array stored in a ``.npz`` file of this package (:func:`package_arrays`; assignment 9's weights).

    ``recipe`` is ``{"file": "<folder>/<name>.npz", "key": str, "sha256": hex}``, the file relative to the
    ``attention_lab`` package and the SHA-256 of the array's dtype, shape and bytes (:func:`array_digest`).
    """

    tag = "package_array"

    def holds_its_recipe(self) -> bool:
        try:  # the stored array, its digest checked once when read (``load_package_array``)
            stored = _package_array(self.recipe)
        except ValueError:
            return False
        return self.dtype == stored.dtype and self.shape == stored.shape and np.array_equal(self, stored)


#: The largest draw :func:`decode` makes again (elements of one array, arrays drawn): far above the hidden cases'
#: (3 × 160 000), low enough that a recipe a kernel sends back cannot make the grader allocate much.
MAX_SEEDED_ELEMENTS = 2**22
MAX_SEEDED_COUNT = 8


def seeded_normals(seed: int, shape: tuple[int, ...], count: int) -> list[SeededNormal]:
    """``count`` consecutive standard-normal draws of ``shape`` from ``numpy.random.default_rng(seed)``.

    The same values as ``[rng.normal(size=shape) for _ in range(count)]`` with ``rng = default_rng(seed)``,
    each carrying its recipe (:class:`SeededNormal`).

    Parameters
    ----------
    seed : int
        Seed of the generator, >= 0.
    shape : tuple of int
        Shape of each array (float64), at most :data:`MAX_SEEDED_ELEMENTS` elements.
    count : int
        How many arrays, 1 to :data:`MAX_SEEDED_COUNT`.

    Returns
    -------
    list of SeededNormal

    Raises
    ------
    ValueError
        If the recipe is outside these bounds.
    """
    recipe = _seeded_recipe({"seed": seed, "shape": list(shape), "count": count, "index": 0})
    rng = np.random.default_rng(recipe["seed"])
    arrays = []
    for index in range(recipe["count"]):
        array = rng.normal(size=tuple(recipe["shape"])).view(SeededNormal)
        array.recipe = {**recipe, "index": index}
        arrays.append(array)
    return arrays


def _seeded_recipe(recipe) -> dict:
    """``recipe`` checked (exact types, bounds), as a new dict; ValueError naming what is wrong."""
    fields = ("seed", "shape", "count", "index")
    if not isinstance(recipe, dict) or set(recipe) != set(fields):
        raise ValueError(f"a seeded_normal recipe must be a dict with keys {fields}; received {str(recipe)[:80]}")
    seed, shape, count, index = (recipe[f] for f in fields)
    if not all(type(v) is int for v in (seed, count, index)) or not isinstance(shape, list) \
            or not all(type(n) is int and n >= 0 for n in shape) or len(shape) > 8:
        raise ValueError(f"a seeded_normal recipe needs integer seed, count, index and shape; received {str(recipe)[:80]}")
    if not (0 <= seed < 2**63 and 1 <= count <= MAX_SEEDED_COUNT and 0 <= index < count
            and math.prod(shape) <= MAX_SEEDED_ELEMENTS):
        raise ValueError(f"a seeded_normal recipe out of bounds (count <= {MAX_SEEDED_COUNT}, "
                         f"at most {MAX_SEEDED_ELEMENTS} elements); received {str(recipe)[:80]}")
    return {"seed": seed, "shape": list(shape), "count": count, "index": index}


def draw_seeded(recipe) -> np.ndarray:
    """The array a :class:`SeededNormal` recipe describes, drawn again (a plain, writeable float64 array).

    Raises
    ------
    ValueError
        If ``recipe`` is not a recipe :func:`seeded_normals` writes, or is outside its bounds.
    """
    return _seeded_array(_seeded_recipe(recipe)).copy()


def _seeded_array(recipe: dict) -> np.ndarray:
    """The read-only array a checked seeded-normal recipe draws, drawn once (:func:`_made`)."""
    key = recipe["seed"], tuple(recipe["shape"]), recipe["count"], recipe["index"]
    return _made("seeded_normal", key, lambda: _draw(recipe))


def _package_array(recipe: dict) -> np.ndarray:
    """The read-only array a checked package-array recipe names, read and digest-checked once (:func:`_made`)."""
    return _made("package_array", (recipe["file"], recipe["key"], recipe["sha256"]), lambda: _stored_array(recipe))


def _draw(recipe: dict) -> np.ndarray:
    rng = np.random.default_rng(recipe["seed"])
    for _ in range(recipe["index"]):
        rng.normal(size=tuple(recipe["shape"]))
    return rng.normal(size=tuple(recipe["shape"]))


#: Arrays made from recipes, read-only, by recipe: the grader encodes and the in-process model decodes the same
#: hidden inputs for every answer it grades (assignment 9's 17 weights in every case; reading each from the .npz
#: again made grading every mistake with every variant 2.7x slower). Emptied past MAX_MADE entries.
_MADE: dict[tuple, np.ndarray] = {}
MAX_MADE = 64


def _made(tag: str, key: tuple, make) -> np.ndarray:
    """The read-only array ``make()`` gives for ``(tag, key)``, made once (callers hand out copies)."""
    entry = _MADE.get((tag, key))
    if entry is None:
        if len(_MADE) >= MAX_MADE:
            _MADE.clear()
        entry = make()
        entry.flags.writeable = False
        _MADE[(tag, key)] = entry
    return entry


def read_back(argument, sent) -> Any:
    """What the probe sends back for an argument after the call: its recipe when it still holds its draw.

    Parameters
    ----------
    argument : object
        The argument as the learner's function left it.
    sent : object
        Its encoding in the request.

    Returns
    -------
    object
        ``sent`` when it was a recipe (:class:`RecipeArray`) and ``argument`` still equals what it makes; else
        :func:`encode` of an array argument, or None for any other argument.
    """
    if isinstance(sent, dict) and len(sent) == 1 and next(iter(sent)) in _MAKERS and type(argument) is np.ndarray:
        try:
            made = decode(sent)
        except ValueError:
            made = None
        if made is not None and made.dtype == argument.dtype and np.array_equal(argument, made):
            return sent
    return encode(argument) if isinstance(argument, np.ndarray) else None


#: What a package_array recipe may name: a .npz file one folder deep in this package, and an array key.
_PACKAGE_FILE = re.compile(r"[a-z0-9_]+/[a-z0-9_]+\.npz")
_PACKAGE_KEY = re.compile(r"[A-Za-z0-9_.]{1,100}")
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def array_digest(array: np.ndarray) -> str:
    """SHA-256 (hex) of an array's dtype, shape and C-order bytes."""
    hasher = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode("ascii"))
    hasher.update(np.ascontiguousarray(array).tobytes())
    return hasher.hexdigest()


def package_arrays(file: str) -> dict[str, PackageArray]:
    """Every array of ``attention_lab/<file>`` (a ``.npz``), each carrying its recipe (:class:`PackageArray`).

    Parameters
    ----------
    file : str
        ``"<folder>/<name>.npz"`` relative to the ``attention_lab`` package, e.g. ``"a09_tiny_gpt/weights.npz"``.

    Returns
    -------
    dict of str to PackageArray
        Key → array, in the file's order.

    Raises
    ------
    ValueError
        If ``file`` is not a ``.npz`` one folder deep in the package.
    """
    if not isinstance(file, str) or not _PACKAGE_FILE.fullmatch(file):
        raise ValueError(f"file must be '<folder>/<name>.npz' inside attention_lab; received {str(file)[:80]!r}")
    arrays = {}
    with np.load(PACKAGE_ROOT / file, allow_pickle=False) as stored:
        for key in stored.files:
            array = np.array(stored[key]).view(PackageArray)
            array.recipe = {"file": file, "key": key, "sha256": array_digest(np.asarray(array))}
            arrays[key] = array
    return arrays


def load_package_array(recipe) -> np.ndarray:
    """The array a :class:`PackageArray` recipe names, read from this package's file (a plain, writeable array).

    Raises
    ------
    ValueError
        If ``recipe`` is malformed, names a file outside the package or a missing key, or the stored array's
        digest is not the recipe's (this package's file differs from the grader's).
    """
    if not isinstance(recipe, dict) or set(recipe) != {"file", "key", "sha256"} \
            or not all(isinstance(recipe[k], str) for k in recipe):
        raise ValueError(f"a package_array recipe must be a dict of strings file, key, sha256; received {str(recipe)[:80]}")
    if not _PACKAGE_FILE.fullmatch(recipe["file"]) or not _PACKAGE_KEY.fullmatch(recipe["key"]):
        raise ValueError(f"a package_array recipe names a file or key outside the package; received {str(recipe)[:80]}")
    return _package_array(recipe).copy()


def _stored_array(recipe: dict) -> np.ndarray:
    try:
        with np.load(PACKAGE_ROOT / recipe["file"], allow_pickle=False) as stored:
            array = np.array(stored[recipe["key"]])
    except (OSError, KeyError) as missing:
        raise ValueError(f"the package has no array {recipe['key']!r} in {recipe['file']}: {missing}") from None
    if array_digest(array) != recipe["sha256"]:
        raise ValueError(f"{recipe['file']}[{recipe['key']!r}] differs from the grader's (SHA-256 mismatch)")
    return array


#: decode's maker of each recipe form.
_MAKERS = {"seeded_normal": draw_seeded, "package_array": load_package_array}


#: Texts of small arrays, in both directions: the grader and the probe encode and decode the same hidden inputs,
#: stand-in values and answers again in every pass and for every submission, and ``np.save``/``np.load`` cost tens
#: to hundreds of times a copy. An entry is kept only for a text of at most :data:`CACHED_TEXT_CHARS`, and each
#: cache is emptied when its texts and data would pass :data:`CACHE_CHARS` bytes (4 MiB).
CACHED_TEXT_CHARS = 64 * 2**10  # the largest arrays of assignment 9's model (32 × 128 float64) are 43 KB as text
CACHE_CHARS = 4 * 2**20
_ENCODED: dict[tuple, str] = {}  # (dtype, shape, Fortran order, data bytes) → text
_DECODED: dict[str, tuple[np.ndarray, tuple[int, ...], bool]] = {}  # text → (read-only flat data, shape, Fortran)
_CHARS = {"encoded": 0, "decoded": 0}


def _keep(cache: dict, name: str, key, value, chars: int) -> None:
    if _CHARS[name] + chars > CACHE_CHARS:
        cache.clear()
        _CHARS[name] = 0
    cache[key] = value
    _CHARS[name] += chars


def _npy(array: np.ndarray) -> str:
    """Base64 of ``np.save(array)``; for a small array of a plain numeric dtype, the text it gave before.

    The key is everything ``np.save`` writes — the dtype (byte order included), the shape, the memory order and
    the data's bytes — and such dtypes make ``np.save`` warn about nothing, so the text is the one it would write.
    """
    dtype = array.dtype
    fortran = array.flags.f_contiguous and not array.flags.c_contiguous  # as np.save decides it
    key = None
    if (array.nbytes * 4 // 3 <= CACHED_TEXT_CHARS and dtype.kind in "biufc" and dtype.metadata is None
            and np.dtype(dtype.str) == dtype):
        key = (dtype.str, array.shape, fortran, array.tobytes(order="F" if fortran else "C"))
        text = _ENCODED.get(key)
        if text is not None:
            return text
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    text = base64.b64encode(buffer.getvalue()).decode("ascii")
    if key is not None and len(text) <= CACHED_TEXT_CHARS:
        _keep(_ENCODED, "encoded", key, text, len(text) + len(key[3]))
    return text


def _from_npy(text: str) -> np.ndarray:
    """The array of one ``.npy`` text: ``np.load`` of it, or a fresh copy of what it gave for the same text before.

    The copy is laid out as ``np.load`` lays it out (a writeable view of a new flat array, in C or Fortran order),
    so nothing — not the values, the dtype, the strides or the flags — tells the two apart; the kept array is
    read-only and never handed out, so code that modifies what it receives cannot change a later decode.
    """
    kept = _DECODED.get(text)
    if kept is not None:
        flat, shape, fortran = kept
        return flat.copy().reshape(shape[::-1]).transpose() if fortran else flat.copy().reshape(shape)
    array = np.load(io.BytesIO(base64.b64decode(text.encode("ascii"))), allow_pickle=False)
    if len(text) <= CACHED_TEXT_CHARS:
        fortran = array.flags.f_contiguous and not array.flags.c_contiguous
        flat = array.ravel(order="F" if fortran else "C").copy()
        flat.flags.writeable = False
        _keep(_DECODED, "decoded", text, (flat, array.shape, fortran), len(text) + flat.nbytes)
    return array


def encode(value: Any, depth: int = 0) -> Any:
    """Encode ``value`` as JSON-ready data.

    Supported: ``numpy.ndarray`` (and subclasses, sent as plain arrays),
    NumPy scalars, ``bool``, ``int``, ``float`` (also inf and NaN), ``str``,
    ``None``, and ``tuple``/``list`` of these and ``dict`` of them with string keys (a model's parameters,
    assignment 9) up to :data:`MAX_DEPTH` levels, and a
    :class:`~attention_lab.core.losses.CubicLoss` (as its coefficient arrays).
    Exact types are required for containers, so a subclass cannot hide
    behaviour in ``__iter__``. Anything else becomes ``{"unsupported": <type name>}``.

    Parameters
    ----------
    value : object
        Typically what a learner's function returned, or a hidden input.
    depth : int
        How deep in containers ``value`` already is (for the recursion).

    Returns
    -------
    object
        JSON-ready data: dicts, lists, strings, numbers, booleans and None. Never raises for an
        unsupported value; it is described instead.
    """
    kind = type(value)
    if value is None or kind in (bool, str):
        return value if kind is not str else value[:MAX_TEXT]
    if kind is int:
        return value if abs(value) < 2**53 else {"float": repr(float(value))}
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, RecipeArray) and kind in (SeededNormal, PackageArray) and value.recipe is not None \
            and value.holds_its_recipe():
        return {kind.tag: dict(value.recipe)}
    if isinstance(value, np.ndarray):
        plain = np.array(value, copy=True, subok=False)
        if plain.dtype.hasobject or plain.dtype.kind in "OVSUMm":
            return {"unsupported": f"an array of dtype {plain.dtype}"}
        encoded = {"ndarray": _npy(plain)}
        if kind not in (np.ndarray, SeededNormal, PackageArray):
            encoded["class"] = subclass_name(value)
        return encoded
    if isinstance(value, np.generic) and type(value).__module__ == "numpy":
        return {"scalar": _npy(np.asarray(value))}
    if kind in (tuple, list) and depth < MAX_DEPTH:
        return {kind.__name__: [encode(item, depth + 1) for item in value]}
    if kind is dict and depth < MAX_DEPTH and all(type(key) is str for key in value):
        # sent as [key, value] pairs, so that the key order (the caller's) survives any JSON reader
        return {"dict": [[key[:MAX_TEXT], encode(item, depth + 1)] for key, item in value.items()]}
    if kind is CubicLoss:  # a hidden case's loss for numerical_gradient: sent as its coefficients
        return {"cubic_loss": [encode(v, MAX_DEPTH) for v in value.coefficients]}
    return {"unsupported": f"a {kind.__module__}.{kind.__qualname__}"}


def decode(data: Any) -> Any:
    """Inverse of :func:`encode`; unsupported values become :class:`Unsupported`.

    Parameters
    ----------
    data : object
        What :func:`encode` produced (after a JSON round trip).

    Returns
    -------
    object
        Plain ``numpy.ndarray`` (an :class:`ArrayFromSubclass` for a learner's subclass), NumPy scalar,
        Python scalar, tuple, list, dict (string keys) or :class:`Unsupported`.

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
        if len(data) == 1 and next(iter(data)) in _MAKERS:
            (tag, recipe), = data.items()
            return _MAKERS[tag](recipe)
        if "scalar" in data:
            return _from_npy(data["scalar"])[()]
        if "float" in data:
            return float(data["float"])
        if "tuple" in data:
            return tuple(decode(item) for item in data["tuple"])
        if "list" in data:
            return [decode(item) for item in data["list"]]
        if "dict" in data:
            pairs = data["dict"]
            if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                                                      for p in pairs):
                raise ValueError(f"not an encoded dict: {str(pairs)[:80]}")
            return {key: decode(item) for key, item in pairs}
        if "unsupported" in data:
            return Unsupported(str(data["unsupported"]))
        if "cubic_loss" in data and isinstance(data["cubic_loss"], list) and len(data["cubic_loss"]) == 4:
            return CubicLoss(*(decode(item) for item in data["cubic_loss"]))
    raise ValueError(f"not an encoded value: {str(data)[:80]}")


def dumps(data: Any) -> str:
    """JSON text of encoded data (compact, key order kept).

    Parameters
    ----------
    data : object
        Encoded data, as :func:`encode` returns it (or a request built of such data).

    Returns
    -------
    str
    """
    return json.dumps(data, separators=(",", ":"))


def size(data: Any) -> int:
    """About the length of ``dumps(data)``, without writing it: what the probe's and the grader's size limits count.

    Strings count their characters plus their quotes (base64 and the grader's texts need no escaping; a learner's
    text with escapes is at most a few times longer, and every such text is capped), numbers the characters of
    their ``repr``, containers one character per item for the separators. Measuring a model's parameters this way
    costs a walk over 17 arrays instead of writing 300 KB of JSON, for every recorded call.

    Parameters
    ----------
    data : object
        Encoded data (dicts with string keys, lists, strings, numbers, booleans, None).

    Returns
    -------
    int
    """
    if isinstance(data, str):
        return len(data) + 2
    if isinstance(data, dict):
        return 2 + sum(len(key) + 4 + size(value) for key, value in data.items())
    if isinstance(data, (list, tuple)):
        return 2 + sum(1 + size(item) for item in data)
    return len(repr(data))


def digest(data: Any) -> str:
    """SHA-256 of encoded data, fed piece by piece (no JSON text is written): equal data, equal digests.

    Each piece is written with its kind and length, so that different data cannot feed the same bytes.

    Parameters
    ----------
    data : object
        Encoded data, as :func:`size` takes it.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    hasher = hashlib.sha256()

    def feed(item) -> None:
        if isinstance(item, str):
            raw = item.encode("utf-8")
            hasher.update(b"s%d:" % len(raw))
            hasher.update(raw)
        elif isinstance(item, dict):
            hasher.update(b"d%d:" % len(item))
            for key, value in item.items():
                feed(str(key))
                feed(value)
        elif isinstance(item, (list, tuple)):
            hasher.update(b"l%d:" % len(item))
            for value in item:
                feed(value)
        else:
            text = repr(item).encode("utf-8")  # None, booleans and numbers: repr is exact for floats
            hasher.update(b"v%d:" % len(text))
            hasher.update(text)

    feed(data)
    return hasher.hexdigest()


def pack(data: Any) -> str:
    """Encoded data as one line of base64 text, to embed in a code cell.

    Parameters
    ----------
    data : object
        JSON-ready data (a request of encoded values).

    Returns
    -------
    str
        ASCII only, no newline.
    """
    return base64.b64encode(dumps(data).encode("utf-8")).decode("ascii")


def unpack(text: str) -> Any:
    """Inverse of :func:`pack`.

    Parameters
    ----------
    text : str
        What :func:`pack` returned.

    Returns
    -------
    object
        The JSON-ready data.

    Raises
    ------
    ValueError
        If ``text`` is not base64 of UTF-8 JSON (``binascii.Error``, ``UnicodeDecodeError`` and
        ``json.JSONDecodeError`` are ValueErrors).
    """
    return json.loads(base64.b64decode(text.encode("ascii")).decode("utf-8"))


# ---------------------------------------------------------------- stored: readable JSON (worked cases)
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _float_item(value: float):
    value = float(value)
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _array_items(array: np.ndarray):
    if array.dtype.kind == "f":
        return [_array_items(a) for a in array] if array.ndim else _float_item(array.item())
    return array.tolist()


def encode_stored(value) -> Any:
    """A JSON-ready form of ``value`` that :func:`decode_stored` turns back into an equal value, bit for bit.

    Parameters
    ----------
    value : None, bool, int, float, str, numpy.ndarray, numpy scalar, or a tuple, list or dict of these
        Arrays must have a boolean, integer or floating dtype.

    Returns
    -------
    object
        Built from dicts, lists, strings, numbers, booleans and None only.

    Raises
    ------
    TypeError
        If ``value`` (or an item of it) is of another type, or an array has
        another dtype (complex, object, ...).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"cannot store an array of dtype {value.dtype} (only bool, integer and float)")
        return {"ndarray": {"dtype": value.dtype.name, "shape": list(value.shape), "data": _array_items(value)}}
    if isinstance(value, np.generic):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"cannot store a NumPy scalar of dtype {value.dtype}")
        item = _float_item(value.item()) if value.dtype.kind == "f" else value.item()
        return {"numpy_scalar": {"dtype": value.dtype.name, "value": item}}
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": _float_item(value)}
    if isinstance(value, tuple):
        return {"tuple": [encode_stored(v) for v in value]}
    if isinstance(value, list):
        return [encode_stored(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: encode_stored(v) for k, v in value.items()}}
    if type(value) is CubicLoss:  # numerical_gradient's f, stored as its coefficients
        return {"cubic_loss": [encode_stored(v) for v in value.coefficients]}
    raise TypeError(f"cannot store a value of type {type(value).__name__}")


def _float_data(items):
    if isinstance(items, list):
        return [_float_data(i) for i in items]
    return _NON_FINITE[items] if isinstance(items, str) else items


def decode_stored(data) -> Any:
    """The value that :func:`encode_stored` stored as ``data`` (a fresh object on every call).

    Parameters
    ----------
    data : object
        What :func:`encode_stored` returned, as read back from JSON.

    Returns
    -------
    object
        Equal to the stored value bit for bit: arrays and NumPy scalars with their dtype, tuples,
        lists, dicts and Python scalars.

    Raises
    ------
    ValueError
        If ``data`` is not something :func:`encode_stored` writes.
    """
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode_stored(d) for d in data]
    if isinstance(data, dict) and len(data) == 1:
        (tag, body), = data.items()
        if tag == "ndarray":
            dtype = np.dtype(body["dtype"])
            items = _float_data(body["data"]) if dtype.kind == "f" else body["data"]
            return np.array(items, dtype=dtype).reshape(body["shape"])
        if tag == "numpy_scalar":
            dtype = np.dtype(body["dtype"])
            return dtype.type(_NON_FINITE.get(body["value"], body["value"]) if dtype.kind == "f" else body["value"])
        if tag == "float":
            return _NON_FINITE[body]
        if tag == "tuple":
            return tuple(decode_stored(d) for d in body)
        if tag == "dict":
            return {k: decode_stored(v) for k, v in body.items()}
        if tag == "cubic_loss":
            return CubicLoss(*(decode_stored(d) for d in body))
    raise ValueError(f"not an encoded worked-case value: {data!r:.200}")
