"""Visible self-checks for assignment 1, run by learners on their own functions.

These checks contain no reference implementation: they test properties
(rows sum to 1, the future has weight 0, ...) and small cases worked out by
hand, whose expected numbers are written down here, together with the numbers
that common mistakes produce on the same cases, so that a failure can say
which mistake it looks like. Each check prints one line per passed test and
raises :class:`SelfCheckFailed` with a plain-words message at the first
failure. They award no points: the hidden tests do the grading.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from attention_lab.learner_calls import call_learner


class SelfCheckFailed(AssertionError):
    """A visible self-check failed; the message explains what is wrong."""


def _fail(message: str) -> None:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    raise SelfCheckFailed(message)


def _ok(message: str) -> None:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    print(f"✓ {message}")


CALL_SECONDS = 5.0  # a correct answer takes milliseconds on these inputs


def _raw(function: Callable, *args, **kwargs):
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    return call_learner(function, *args, seconds=CALL_SECONDS, **kwargs)


_HINTS = (
    ("NotImplementedError", "you have not written this function yet"),
    ("FunctionTimedOut", "look for a loop that never ends"),
    ("could not be broadcast", "keep the axis you reduce over (keepdims=True) so that the shapes line up"),
    ("core dimension", "check the shapes you multiply: Q (..., T_q, d_k) @ Kᵀ (..., d_k, T_k); transpose only "
                       "the last two axes of K (K.T reverses all of them; use np.swapaxes(K, -1, -2))"),
    ("shapes", "check the shapes you multiply: Q (..., T_q, d_k) @ Kᵀ (..., d_k, T_k)"),
    ("is not defined", "run the cell that defines it first"),
)


def _quiet(function: Callable, *args, **kwargs):
    """Call the learner's function; an exception becomes one plain-words SelfCheckFailed with a hint."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    try:
        return _raw(function, *args, **kwargs)
    except Exception as error:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        hint = next((h for key, h in _HINTS if key in text), None)
        name = getattr(function, "__name__", "your function")
        raise SelfCheckFailed(f"{name} raised {text}" + (f" — {hint}" if hint else "")) from None


COURSE_FUNCTIONS = ("softmax", "attention_scores", "causal_mask", "scaled_dot_product_attention",
                    "causal_self_attention", "attention_entropy")


def expect_shapes(function: Callable, shapes: list[tuple[int, ...]], *args, **kwargs) -> None:
    """Visible part of an autograder cell: the function runs and returns arrays of the given shapes.

    Anything the function prints or warns is discarded: nbgrader gives a test
    cell zero points when anything reaches stderr, and correct code may warn.
    Each step is graded on its own, so a failure that comes from another of
    the learner's course functions — raised inside it, or a NameError because
    it is not defined — does not fail this check: the hidden tests run the
    function with correct versions of the others.

    Parameters
    ----------
    function : callable
        The learner's function.
    shapes : list of tuple
        One shape for a function returning one array; several for a tuple.
    *args, **kwargs
        Passed to ``function``.

    Raises
    ------
    SelfCheckFailed
        If the result is not an array (or tuple of arrays) of those shapes.
    Exception
        Whatever ``function`` raised in its own code.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    name = getattr(function, "__name__", "the function")
    try:
        result = _raw(function, *args, **kwargs)
    except Exception as error:
        culprit = _other_course_function_behind(function, error)
        if culprit is None:
            raise
        print(f"(not checked here: {name} failed in or for lack of your {culprit} ({type(error).__name__}: "
              f"{error}); the hidden tests run {name} with a correct {culprit})")
        return
    if len(shapes) > 1 and (not isinstance(result, (tuple, list)) or len(result) != len(shapes)):
        _fail(f"{name} should return a tuple of {len(shapes)} arrays, but it returned {type(result).__name__}")
    results = result if len(shapes) > 1 else (result,)
    actual = [value.shape if isinstance(value, np.ndarray) else None for value in results]
    if len(shapes) == 2 and actual == shapes[::-1] and shapes[0] != shapes[1]:
        _fail(f"{name} returned (weights, output); return (output, weights) in that order")
    for position, (value, shape) in enumerate(zip(results, shapes)):
        what = name if len(shapes) == 1 else f"item {position} returned by {name}"
        if not isinstance(value, np.ndarray) or value.shape != shape:
            got = f"shape {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__
            _fail(f"{what} should be an array of shape {shape}; got {got}")


def _other_course_function_behind(function: Callable, error: BaseException) -> str | None:
    """Name of the other course function that caused ``error``, if it was one.

    Either the innermost frame of the learner's notebook in the traceback runs
    another course function, or the error is a NameError for one that is not
    defined (a syntax error in its cell, or a different name).
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if isinstance(error, NameError) and getattr(error, "name", None) in COURSE_FUNCTIONS:
        return error.name
    namespace = getattr(function, "__globals__", None)
    innermost = None
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals is namespace:
            innermost = tb.tb_frame.f_code
        tb = tb.tb_next
    if innermost is None or innermost is getattr(function, "__code__", None):
        return None
    if innermost.co_name in COURSE_FUNCTIONS and getattr(namespace.get(innermost.co_name), "__code__", None) is innermost:
        return innermost.co_name
    return None


def _array(name: str, value, shape: tuple[int, ...], kind: str = "f") -> np.ndarray:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(value, np.ndarray):
        _fail(f"{name} should return a NumPy array, but it returned {type(value).__name__}: {value!r}")
    if value.shape != shape:
        _fail(f"{name} should have shape {shape}, but it has shape {value.shape}")
    if kind == "f" and value.dtype.kind != "f":
        _fail(f"{name} should be a floating-point array, but its dtype is {value.dtype}")
    if kind == "b" and value.dtype != np.bool_:
        _fail(f"{name} should be a boolean array (dtype bool), but its dtype is {value.dtype}")
    return value


def _close(a, b, tol=1e-4) -> bool:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    return bool(np.allclose(a, b, rtol=tol, atol=tol))


def _pair(name: str, result) -> tuple:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(result, tuple) or len(result) != 2:
        _fail(f"{name} should return a tuple (output, weights), but it returned {type(result).__name__}")
    return result


# ---------------------------------------------------------------- step 1
def check_softmax(softmax: Callable) -> None:
    """Self-check ``softmax(x, axis=-1)`` on hand-worked cases.

    Raises
    ------
    SelfCheckFailed
        With a message saying what is wrong.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    x = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    p = _array("softmax(x)", _quiet(softmax, x), (2, 3))
    if _close(p.sum(axis=0), 1.0) and not _close(p.sum(axis=1), 1.0):
        _fail("the probabilities sum to 1 down each column instead of along each row: "
              "use the `axis` argument (default -1, the last axis) for max, exp's sum and the division")
    if not _close(p.sum(axis=1), 1.0):
        _fail(f"each row should sum to 1, but the row sums are {np.round(p.sum(axis=1), 4)}")
    if not _close(p, [[0.09003057, 0.24472847, 0.66524096], [1 / 3, 1 / 3, 1 / 3]]):
        _fail(f"softmax([[1, 2, 3], [1, 1, 1]]) should be [[0.0900, 0.2447, 0.6652], [0.3333, 0.3333, 0.3333]]; "
              f"got {np.round(p, 4).tolist()}")
    _ok("rows sum to 1 and softmax([1, 2, 3]) = [0.090, 0.245, 0.665]")

    columns = _array("softmax(x, axis=0)", _quiet(softmax, np.array([[1.0, 1.0], [2.0, 3.0]]), axis=0), (2, 2))
    if not _close(columns, [[0.26894142, 0.11920292], [0.73105858, 0.88079708]]):
        _fail("softmax(x, axis=0) should normalise each column: for [[1, 1], [2, 3]] expected "
              f"[[0.2689, 0.1192], [0.7311, 0.8808]], got {np.round(columns, 4).tolist()}")
    _ok("the axis argument is respected")

    big = _array("softmax of large logits", _quiet(softmax, np.array([[1000.0, 1001.0, 1002.0]])), (1, 3))
    if not np.all(np.isfinite(big)):
        _fail("softmax([1000, 1001, 1002]) contains NaN or inf: exp(1000) overflows. Softmax does not change "
              "when you subtract the same number from every logit in a row; which number keeps exp small?")
    if not _close(big, [[0.09003057, 0.24472847, 0.66524096]]):
        _fail(f"softmax([1000, 1001, 1002]) should equal softmax([0, 1, 2]) = [0.0900, 0.2447, 0.6652]; "
              f"got {np.round(big, 4).tolist()}")
    single = _quiet(softmax, np.array([[100.0, 0.0]], dtype=np.float32))
    if not (isinstance(single, np.ndarray) and np.all(np.isfinite(single)) and _close(single, [[1.0, 0.0]])):
        _fail("softmax of float32 logits [100, 0] should be [1, 0] (float32 exp overflows above about 88.7)")
    _ok("large logits (1000 in float64, 100 in float32) give finite, correct probabilities")


# ---------------------------------------------------------------- step 2
_Q_HAND = np.array([[2.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])  # T_q = 2, d_k = 4
_K_HAND = np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])  # T_k = 3
_QK_HAND = np.array([[4.0, 0.0, 0.0], [2.0, 0.0, 2.0]])  # Q Kᵀ worked out by hand


def check_attention_scores(attention_scores: Callable) -> None:
    """Self-check ``attention_scores(Q, K, scale=True)`` on a hand-worked case (d_k = 4, so √d_k = 2)."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    raw = _quiet(attention_scores, _Q_HAND, _K_HAND, scale=False)
    if isinstance(raw, np.ndarray) and raw.shape == (3, 2):
        _fail("the scores have shape (T_k, T_q) = (3, 2): rows must be queries and columns keys, "
              "so the product is Q times K transposed, not K times Q transposed")
    raw = _array("attention_scores(Q, K, scale=False)", raw, (2, 3))
    if not _close(raw, _QK_HAND):
        _fail(f"with scale=False the scores should be Q Kᵀ = {_QK_HAND.tolist()}, got {np.round(raw, 4).tolist()}")
    _ok("scale=False gives Q Kᵀ with shape (T_q, T_k)")

    scaled = _array("attention_scores(Q, K)", _quiet(attention_scores, _Q_HAND, _K_HAND), (2, 3))
    hints = {
        "not scaled at all (scale=True should divide by √d_k)": _QK_HAND,
        "divided by d_k = 4 instead of √d_k = 2": _QK_HAND / 4,
        "multiplied by √d_k instead of divided": _QK_HAND * 2,
    }
    if not _close(scaled, _QK_HAND / 2):
        for hint, wrong in hints.items():
            if _close(scaled, wrong):
                _fail(f"the scaled scores look {hint}: expected {(_QK_HAND / 2).tolist()}, got {scaled.tolist()}")
        _fail(f"the scaled scores should be Q Kᵀ / √d_k = {(_QK_HAND / 2).tolist()}, got {np.round(scaled, 4).tolist()}")
    _ok("scale=True divides by √d_k")

    batched = _quiet(attention_scores, np.stack([_Q_HAND, -_Q_HAND]), np.stack([_K_HAND, _K_HAND]))
    batched = _array("attention_scores with a batch of 2", batched, (2, 2, 3))
    if not _close(batched, np.stack([_QK_HAND / 2, -_QK_HAND / 2])):
        _fail("with a leading batch dimension each batch entry should get its own Q Kᵀ / √d_k; "
              "transpose only the last two axes of K (K.T reverses all of them)")
    _ok("leading batch dimensions work")


# ---------------------------------------------------------------- step 3
def check_causal_mask(causal_mask: Callable) -> None:
    """Self-check ``causal_mask(T)``: True where query i may attend to key j, i.e. j ≤ i."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    expected = np.array([[True, False, False], [True, True, False], [True, True, True]])
    mask = _array("causal_mask(3)", _quiet(causal_mask, 3), (3, 3), kind="b")
    if np.array_equal(mask, expected.T):
        _fail("the mask is flipped: query 0 may attend to keys 1 and 2 (the future) and query 2 to nothing "
              "before it. True should mean 'may attend', for keys j ≤ i")
    if np.array_equal(mask, ~expected):
        _fail("the mask is inverted: True should mean 'may attend' (j ≤ i), not 'blocked'")
    if np.array_equal(mask, np.tril(np.ones((3, 3), bool), -1)):
        _fail("the diagonal is blocked: each position must be allowed to attend to itself (j = i), "
              "otherwise query 0 has no key at all")
    if np.array_equal(mask, np.tril(np.ones((3, 3), bool), 1)):
        _fail("the mask lets each query see one step into the future (j = i + 1); only j ≤ i is allowed")
    if not np.array_equal(mask, expected):
        _fail(f"causal_mask(3) should be {expected.astype(int).tolist()} (1 = True), got {mask.astype(int).tolist()}")
    one = _array("causal_mask(1)", _quiet(causal_mask, 1), (1, 1), kind="b")
    if not one[0, 0]:
        _fail("causal_mask(1) should be [[True]]: a single token attends to itself")
    _ok("causal_mask(3) = lower triangle including the diagonal, dtype bool")


# ---------------------------------------------------------------- step 4
def check_scaled_dot_product_attention(scaled_dot_product_attention: Callable) -> None:
    """Self-check ``scaled_dot_product_attention(Q, K, V, mask=None, scale=True)`` on hand-worked cases."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    # d_k = 4, q = (2,0,0,0), keys (2,0,0,0) and 0: scores (4, 0), scaled (2, 0).
    q = np.array([[2.0, 0.0, 0.0, 0.0]])
    k = np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    v = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, 5.0]])
    out, w = _pair("scaled_dot_product_attention", _quiet(scaled_dot_product_attention, q, k, v))
    w = _array("the weights", w, (1, 2))
    out = _array("the output", out, (1, 3))
    wrong_scaling = {"not scaled": [0.98201379, 0.01798621], "divided by d_k instead of √d_k": [0.73105858, 0.26894142]}
    if not _close(w, [[0.88079708, 0.11920292]]):
        for hint, values in wrong_scaling.items():
            if _close(w, [values]):
                _fail(f"the weights look {hint}: expected [0.8808, 0.1192], got {np.round(w, 4).tolist()}")
        _fail(f"for scores (4, 0) with d_k = 4 the weights should be softmax(2, 0) = [0.8808, 0.1192]; "
              f"got {np.round(w, 4).tolist()} (if the self-checks of softmax and attention_scores pass, "
              "the problem is in this function)")
    if not _close(out, [[0.88079708, 0.11920292, 5.0]]):
        _fail(f"the output should be weights @ V = [0.8808, 0.1192, 5.0], got {np.round(out, 4).tolist()}")
    _ok("weights = softmax(Q Kᵀ / √d_k) and output = weights @ V")

    # Scores (−2, +7) with the second key blocked: the blocked key must get weight exactly 0.
    out, w = _pair("scaled_dot_product_attention", _quiet(
        scaled_dot_product_attention, np.array([[1.0]]), np.array([[-2.0], [7.0]]), np.array([[1.0], [0.0]]),
        mask=np.array([[True, False]])))
    w = _array("the masked weights", w, (1, 2))
    if _close(w, [[0.11920292, 0.88079708]]):
        _fail("the blocked key got weight 0.88: setting a blocked score to 0 does not block it (e⁰ = 1). "
              "Blocked scores must become −inf (or a very large negative number) before the softmax")
    if _close(w, [[1.23394576e-04, 0.0]]) or (np.all(np.isfinite(w)) and w.sum() < 0.99):
        _fail("the weights no longer sum to 1: zeroing blocked weights after the softmax leaves each row short; "
              "mask the scores before the softmax (or renormalise)")
    if not _close(w, [[1.0, 0.0]]):
        _fail(f"with scores (−2, 7) and the second key blocked the weights should be [1, 0]; got {np.round(w, 4).tolist()}")
    _ok("a blocked key gets weight exactly 0")

    # All scores zero, causal mask, T = 3: rows (1,0,0), (½,½,0), (⅓,⅓,⅓).
    V = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    causal = np.tril(np.ones((3, 3), dtype=bool))
    out, w = _pair("scaled_dot_product_attention",
                   _quiet(scaled_dot_product_attention, np.zeros((3, 2)), np.zeros((3, 2)), V, mask=causal))
    w = _array("the causal weights", w, (3, 3))
    expected = np.array([[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]])
    if _close(w, expected.T[::-1, ::-1]) or _close(w, [[1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2], [0, 0, 1]]):
        _fail("queries attend to the future instead of the past: True in the mask means 'may attend'")
    if not _close(w, expected):
        _fail(f"with all scores 0 and a causal mask the weights should be rows (1, 0, 0), (½, ½, 0), (⅓, ⅓, ⅓); "
              f"got {np.round(w, 4).tolist()}")
    _ok("the mask (True = may attend) is applied to every row")


# ---------------------------------------------------------------- step 5
def check_causal_self_attention(causal_self_attention: Callable) -> None:
    """Self-check ``causal_self_attention(x, W_q, W_k, W_v, scale=True)``."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    x = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # T = 3, d_model = 3
    zeros = np.zeros((3, 2))
    W_v = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # d_head = 2
    out, w = _pair("causal_self_attention", _quiet(causal_self_attention, x, zeros, zeros, W_v))
    w = _array("the weights", w, (3, 3))
    out = _array("the output", out, (3, 2))
    if not _close(w, [[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]]):
        _fail("with W_q = W_k = 0 every score is 0, so the causal weights should be rows (1, 0, 0), (½, ½, 0), "
              f"(⅓, ⅓, ⅓); got {np.round(w, 4).tolist()}")
    if not _close(out, [[1, 0], [1 / 2, 1 / 2], [2 / 3, 2 / 3]]):
        _fail("the output should be weights @ V with V = x @ W_v: rows (1, 0), (½, ½), (⅔, ⅔); "
              f"got {np.round(out, 4).tolist()}")
    _ok("Q = x W_q, K = x W_k, V = x W_v, and a causal mask")

    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 6))
    W_q, W_k, W_v = (rng.normal(size=(6, 3)) for _ in range(3))
    out, w = _pair("causal_self_attention", _quiet(causal_self_attention, x, W_q, W_k, W_v))
    _array("the weights", w, (4, 4))
    _array("the output", out, (4, 3))
    if np.any(np.abs(np.triu(w, 1)) > 1e-12):
        _fail("some weights above the diagonal are not 0: a query attends to a future key")
    _ok("shapes (T, d_head) and (T, T) with d_head ≠ d_model, and no weight on the future")


# ---------------------------------------------------------------- step 6
def check_attention_entropy(attention_entropy: Callable) -> None:
    """Self-check ``attention_entropy(weights)`` in nats with 0 · log 0 = 0."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    weights = np.array([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    H = _quiet(attention_entropy, weights)
    if isinstance(H, np.ndarray) and H.shape in {(4,), ()}:
        _fail(f"attention_entropy should return one value per row (shape (T_q,) = (3,)), got shape {H.shape}: "
              "sum over the last axis (keys)")
    H = _array("attention_entropy(weights)", H, (3,))
    if not np.all(np.isfinite(H)):
        _fail(f"the entropies contain NaN: 0 · log 0 must count as 0, but 0 * np.log(0) is 0 * (−inf) = NaN; got {H}")
    expected = np.array([math.log(4), 0.0, math.log(2)])
    if _close(H, expected / math.log(2)):
        _fail("the entropies look like bits (log base 2); this course measures entropy in nats (natural log)")
    if _close(H, -expected):
        _fail("the entropies are negative: entropy is −Σ w ln w (mind the minus sign)")
    if not _close(H, expected):
        _fail(f"rows uniform over 4 keys, one-hot, and uniform over 2 keys should have entropies "
              f"[ln 4, 0, ln 2] = [1.3863, 0, 0.6931] nats; got {np.round(H, 4).tolist()}")
    _ok("uniform over n keys → ln n nats, one-hot → 0, and 0 · log 0 counts as 0")


# ---------------------------------------------------------------- step 7: the three facts
def check_rows_are_weighted_averages(scaled_dot_product_attention: Callable) -> None:
    """Fact 1: each output row is a weighted average of the value rows.

    The weights are non-negative, each row sums to 1, the output equals
    ``weights @ V`` and so lies, column by column, between the smallest and
    largest value.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    rng = np.random.default_rng(1)
    Q, K, V = rng.normal(size=(5, 8)), rng.normal(size=(7, 8)), rng.normal(size=(7, 3))
    mask = rng.random((5, 7)) < 0.6
    mask[:, 0] = True
    out, w = _pair("scaled_dot_product_attention", _quiet(scaled_dot_product_attention, Q, K, V, mask=mask))
    w = _array("the weights", w, (5, 7))
    out = _array("the output", out, (5, 3))
    if np.any(w < 0):
        _fail(f"some weights are negative (minimum {w.min():.3g}); softmax outputs are never negative")
    if not _close(w.sum(axis=-1), 1.0):
        _fail(f"the weights in each row should sum to 1; row sums are {np.round(w.sum(axis=-1), 4).tolist()}")
    if np.any(w[~mask] != 0):
        _fail("a blocked key (mask False) has a non-zero weight")
    if not _close(out, w @ V):
        _fail("the output is not weights @ V")
    if np.any(out < V.min(axis=0) - 1e-9) or np.any(out > V.max(axis=0) + 1e-9):
        _fail("an output value lies outside the range of the values it averages")
    _ok("fact 1: weights ≥ 0, rows sum to 1, output = weights @ V lies within the range of V")


def check_causality(causal_self_attention: Callable) -> None:
    """Fact 2: changing the last token changes only the last output row."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    rng = np.random.default_rng(2)
    T, d_model, d_head = 6, 8, 4
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v = (rng.normal(size=(d_model, d_head)) for _ in range(3))
    before, _ = _pair("causal_self_attention", _quiet(causal_self_attention, x, W_q, W_k, W_v))
    x_changed = x.copy()
    x_changed[-1] = rng.normal(size=d_model) * 3
    after, _ = _pair("causal_self_attention", _quiet(causal_self_attention, x_changed, W_q, W_k, W_v))
    before = _array("the output", before, (T, d_head))
    after = _array("the output", after, (T, d_head))
    changed = [i for i in range(T) if not np.allclose(before[i], after[i], rtol=1e-10, atol=1e-12)]
    if changed[:-1] or changed and changed[-1] != T - 1:
        _fail(f"changing only the last token changed the outputs at positions {changed}: "
              "earlier positions can see the future")
    if not changed:
        _fail("changing the last token did not change the last output: the last position should attend to itself")
    _ok("fact 2: changing the last token changes only the last output (causality)")


def check_scaling_prevents_saturation(scaled_dot_product_attention: Callable, attention_entropy: Callable,
                                      d_head: int = 256, T: int = 32) -> tuple[float, float]:
    """Fact 3: without ÷√d_k the softmax saturates; with it the weights stay spread.

    Draws q, k ~ N(0, I) with ``d_head`` dimensions (seeded), computes the mean
    row entropy in nats of the scaled and unscaled attention weights, prints
    both against the uniform ceiling ln T and returns ``(scaled, unscaled)``.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(T, d_head)), rng.normal(size=(T, d_head)), rng.normal(size=(T, 2))
    entropies = []
    for scale in (True, False):
        _, w = _pair("scaled_dot_product_attention", _quiet(scaled_dot_product_attention, Q, K, V, scale=scale))
        H = _array("attention_entropy(weights)", _quiet(attention_entropy, _array("the weights", w, (T, T))), (T,))
        entropies.append(float(np.mean(H)))
    scaled, unscaled = entropies
    ceiling = math.log(T)
    print(f"mean row entropy at d_head = {d_head}, T = {T}: scaled {scaled:.2f} nats, unscaled {unscaled:.2f} nats "
          f"(uniform would be ln {T} = {ceiling:.2f})")
    if abs(scaled - unscaled) < 1e-6:
        _fail(f"scale=True and scale=False give the same weights (entropy {scaled:.2f} nats): is `scale` ignored?")
    if not scaled > 0.6 * ceiling:
        _fail(f"scaled attention should stay spread out (entropy near {0.85 * ceiling:.1f} nats), got {scaled:.2f}")
    if not unscaled < 0.5 * scaled:
        _fail(f"unscaled attention should be nearly one-hot at d_head = {d_head} (entropy well below the scaled "
              f"{scaled:.2f} nats), got {unscaled:.2f}: is `scale` ignored?")
    _ok("fact 3: scaling by √d_k keeps the softmax from saturating")
    return scaled, unscaled
