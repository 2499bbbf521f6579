"""The wire codec's caches of small arrays (attention_lab.core.values): a cached text or array is exactly what
``np.save``/``np.load`` give, a fresh copy every time, and nothing done to a decoded array reaches a later decode."""

import base64
import io

import numpy as np
import pytest

from attention_lab.core import values as wire

FLAGS = ("C_CONTIGUOUS", "F_CONTIGUOUS", "OWNDATA", "WRITEABLE", "ALIGNED", "WRITEBACKIFCOPY")
ARRAYS = [np.arange(6.0).reshape(2, 3), np.asfortranarray(np.arange(24.0).reshape(2, 3, 4)),
          np.arange(24.0).reshape(2, 3, 4).transpose(1, 0, 2), np.array(3), np.zeros((0, 3)),
          np.zeros((3, 0), order="F"), np.arange(8)[::2], np.tril(np.ones((3, 3), dtype=bool)),
          np.arange(3.0).astype(">f8"), np.array([1 + 2j, np.nan]), np.array([-0.0, np.inf], dtype=np.float16)]


def layout(array: np.ndarray):
    base = array.base
    return (array.dtype.str, array.shape, array.strides, [array.flags[f] for f in FLAGS], type(base),
            None if base is None else (base.shape, base.strides, [base.flags[f] for f in FLAGS], base.base is None),
            array.tobytes(order="A"))


def plain_npy(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_a_cached_encoding_and_decoding_is_what_numpy_gives(array):
    plain = np.array(array, copy=True)  # as encode sends it
    texts = [wire.encode(array)["ndarray"] for _ in range(3)]
    assert texts == [plain_npy(plain)] * 3
    loaded = np.load(io.BytesIO(base64.b64decode(texts[0])), allow_pickle=False)
    decoded = [wire.decode({"ndarray": texts[0]}) for _ in range(3)]
    assert all(layout(d) == layout(loaded) for d in decoded)
    assert len({id(d) for d in decoded}) == 3 and len({id(d.base) for d in decoded}) == 3


def test_changing_a_decoded_array_or_the_encoded_one_changes_no_later_result():
    array = np.arange(6.0).reshape(2, 3)
    data = wire.encode(array)
    first = wire.decode(data)
    first[:] = 7
    assert np.array_equal(wire.decode(data), array)
    array[0, 0] = -1  # the same object with other values: its own text, not the cached one
    assert wire.decode(wire.encode(array))[0, 0] == -1 and wire.decode(data)[0, 0] == 0


def test_a_dtype_with_metadata_is_not_cached_so_numpy_s_warning_is_never_skipped():
    array = np.zeros(2, dtype=np.dtype(float, metadata={"unit": "nats"}))
    for _ in range(2):
        with pytest.warns(UserWarning, match="metadata"):
            wire.encode(array)


def test_the_caches_stay_within_their_bound(monkeypatch):
    monkeypatch.setattr(wire, "CACHE_CHARS", 4096)
    for seed in range(200):
        wire.decode(wire.encode(np.random.default_rng(seed).normal(size=20)))
    assert wire._CHARS["encoded"] <= 4096 and wire._CHARS["decoded"] <= 4096
    big = np.zeros(wire.CACHED_TEXT_CHARS)  # its text is far over the size of an entry
    text = wire.encode(big)["ndarray"]
    assert text not in wire._DECODED and wire.decode({"ndarray": text}).shape == big.shape
    assert text not in wire._DECODED and text not in wire._ENCODED.values()
