"""Visible self-checks for assignment 1, run by learners on their own functions.

These checks contain no reference implementation. Each ``check_<function>``
first runs the function on the assignment's worked cases: small inputs whose
expected results, and the results each known mistake gives on them, are
stored as numbers in the package (:mod:`attention_lab.core.worked`), so a wrong
result is named as a known mistake with a hint, or described by the property
it breaks. Then it tests properties in plain words (rows sum to 1, the future
has weight 0, batch dimensions work, ...) on inputs of its own. Each check
prints one line per passed test and raises :class:`SelfCheckFailed` with a
plain-words message at the first failure. They award no points: the hidden
tests do the grading.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np

from attention_lab.core import worked
from attention_lab.core.self_check import CALL_SECONDS, attempt, call, fail as _fail, learner_name, ok as _ok, \
    self_check
from attention_lab.core.worked import SelfCheckFailed

__all__ = ["SelfCheckFailed", "expect_shapes", "check_worked_cases", "check_softmax", "check_attention_scores", "check_scaling",
           "check_causal_mask", "check_scaled_dot_product_attention", "check_causal_self_attention",
           "check_attention_entropy", "check_entropy_worked_cases", "check_rows_are_weighted_averages",
           "check_causality", "check_scaling_prevents_saturation"]

ASSIGNMENT = "01_scaled_dot_product_attention"

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)


def _worked(function_name: str, function: Callable, select: Callable[[dict], bool] | None = None) -> None:
    """The stored worked cases of ``function_name`` (see :func:`attention_lab.core.worked.check_worked_cases`)."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    worked.check_worked_cases(ASSIGNMENT, function_name, function, seconds=CALL_SECONDS, select=select)


# every function learners write in the course: from the worked cases, which the specs generate
COURSE_FUNCTIONS = worked.course_functions()


def check_worked_cases(function: Callable) -> None:
    """Self-check any function of this assignment on its stored worked cases alone.

    The first self-check of a new step (README, "Adding a step"): the worked cases come from the step's
    spec, so the check needs no code of its own; a step's own ``check_<name>`` adds properties later.

    Parameters
    ----------
    function : callable
        The learner's function; its ``__name__`` says which worked cases apply.

    Raises
    ------
    SelfCheckFailed
        With the first worked case the function gets wrong, or when the assignment has no worked case
        for a function of that name.
    """
    __tracebackhide__ = True
    name = learner_name(function)
    if not worked.worked_cases(ASSIGNMENT, name):
        raise SelfCheckFailed(f"no worked cases of {name} in this assignment: the maintainers add them to its spec "
                              "and run `python -m autograder worked-cases`")
    _worked(name, function)


def expect_shapes(function: Callable, shapes: list[tuple[int, ...]], *args, **kwargs) -> None:
    """Visible part of an autograder cell: the function runs and returns arrays of the given shapes.

    Anything the function prints or warns is discarded: nbgrader gives a test
    cell zero points when anything reaches stderr, and correct code may warn.
    Each step is graded on its own, so a failure that comes from another of
    the learner's course functions — raised inside it, or a NameError because
    it is not defined — does not fail this check: the grader answers the
    function's calls of the others with the reference's values.

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
        If the function raised in its own code (the message names the error,
        or says that the function is not answered yet), or the result is not
        an array (or tuple of arrays) of those shapes.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    name = getattr(function, "__name__", "the function")
    result = call_for_visible_part(function, *args, **kwargs)
    if result is NOT_CHECKED:
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


NOT_CHECKED = object()  # what call_for_visible_part returns when another of the learner's functions failed


def call_for_visible_part(function: Callable, *args, **kwargs):
    """The learner's function's result, for the visible part of an autograder cell.

    Called quietly, on copies of its arrays, with a time limit. When the
    failure comes from another of the learner's course functions (raised
    inside it, or not defined), one line says so and :data:`NOT_CHECKED` is
    returned: each step is graded on its own.

    Parameters
    ----------
    function : callable
        The learner's function.
    *args, **kwargs
        Passed to ``function``, arrays as copies.

    Returns
    -------
    object
        What ``function`` returned, or :data:`NOT_CHECKED`.

    Raises
    ------
    SelfCheckFailed
        If the function failed in its own code: the message names the error,
        or says that the function is not answered yet.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    result, error = attempt(function, *args, **kwargs)
    if error is None:
        return result
    culprit = _other_course_function_behind(function, error)
    if culprit is None:
        _fail(worked.describe_failure(function, error, CALL_SECONDS))
    why = ("is not defined (run its cell; an error in that cell leaves it undefined)"
           if isinstance(error, NameError) else "is not answered yet" if worked.is_a(error, "NotImplementedError")
           else f"raised {worked.describe_exception(error)}")
    print(f"(not checked here: {getattr(function, '__name__', 'the function')} calls your {culprit}, which {why}; "
          "the grader answers those calls with the reference's values, so only the step of that function loses points)")
    return NOT_CHECKED


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
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        _fail(f"{name} should return a tuple (output, weights), but it returned {type(result).__name__}")
    return result


# ---------------------------------------------------------------- step 1
@_self_check
def check_softmax(softmax: Callable) -> None:
    """Self-check ``softmax(x, axis=-1)``: the worked cases, then probabilities along any axis and float32 logits.

    The learner's function: ``x`` of any shape and the ``axis`` to normalise along; returns a floating-point array
    of ``x``'s shape whose entries along ``axis`` are ≥ 0 and sum to 1.

    Fails when, for a (2, 3, 4) input and axis −1, 0 or 1, an entry is negative, NaN or infinite or the sums along
    ``axis`` are not 1; or when float32 logits [100, 0] do not give [1, 0].
    """
    x = np.random.default_rng(0).normal(0.0, 3.0, size=(2, 3, 4))
    for axis in (-1, 0, 1):
        p = _array(f"softmax(x, axis={axis}) for x of shape (2, 3, 4)", call(softmax, x, axis=axis), x.shape)
        if np.any(p < 0) or not np.all(np.isfinite(p)):
            _fail(f"softmax(x, axis={axis}) has negative, NaN or infinite entries; probabilities are finite and ≥ 0")
        if not _close(p.sum(axis=axis), 1.0):
            other = [a for a in range(x.ndim) if a != axis % x.ndim and _close(p.sum(axis=a), 1.0)]
            _fail(f"softmax(x, axis={axis}) should sum to 1 along axis {axis}"
                  + (f", but it sums to 1 along axis {other[0]}: use the `axis` argument for the max, the sum and "
                     "the division" if other else f"; the sums are {np.round(p.sum(axis=axis), 4).tolist()}"))
    _ok("for a 3-D input and axis = -1, 0 and 1 the probabilities are ≥ 0 and sum to 1 along that axis")

    single = call(softmax, np.array([[100.0, 0.0]], dtype=np.float32))
    if not (isinstance(single, np.ndarray) and np.all(np.isfinite(single)) and _close(single, [[1.0, 0.0]])):
        _fail("softmax of float32 logits [100, 0] should be [1, 0] (float32 exp overflows above about 88.7); "
              f"got {worked.show(single)}")
    _ok("float32 logits of size 100 give finite, correct probabilities")


# ---------------------------------------------------------------- steps 2 and 3
def _unscaled(case: dict) -> bool:
    """A worked case of attention_scores that passes scale=False (step 2's); the others are step 3's."""
    return worked.decode(case["kwargs"].get("scale", True)) is False


def _batch_entries_on_their_own(attention_scores: Callable, rng: np.random.Generator, **scale) -> None:
    """Fail unless a batch of 2 gives each entry the scores it gets alone (``scale`` passed on as given)."""
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    written = ", ".join(f"{k}={v}" for k, v in scale.items())
    Q, K = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    batched = _array(f"attention_scores(Q, K{', ' * bool(written)}{written}) with a batch of 2",
                     call(attention_scores, Q, K, **scale), (2, 3, 5))
    single = [_array(f"attention_scores(Q[{b}], K[{b}]{', ' * bool(written)}{written})",
                     call(attention_scores, Q[b], K[b], **scale), (3, 5)) for b in range(2)]
    if not _close(batched, np.stack(single)):
        _fail(f"with a leading batch dimension each batch entry should get its own Q Kᵀ{'' if scale else ' / √d_k'}; "
              "transpose only the last two axes of K (K.T reverses all of them)")


@_self_check(select=_unscaled)
def check_attention_scores(attention_scores: Callable) -> None:
    """Self-check step 2, ``attention_scores(Q, K, scale=False)``: Q Kᵀ on the worked cases and with batch dimensions.

    Only ``scale=False`` is checked here: the notebook lets learners write the
    scaling in step 3, whose own check is :func:`check_scaling`.

    The learner's function: ``Q`` (..., T_q, d_k) and ``K`` (..., T_k, d_k), float; returns the float scores (...,
    T_q, T_k).

    Fails when a batch of 2 (Q (2, 3, 4), K (2, 5, 4)) does not give each entry the scores it gets alone.
    """
    _batch_entries_on_their_own(attention_scores, np.random.default_rng(1), scale=False)
    _ok("leading batch dimensions work: shape (batch, T_q, T_k)")


@_self_check(select=lambda case: not _unscaled(case))
def check_scaling(attention_scores: Callable) -> None:
    """Self-check step 3, ``attention_scores(Q, K)`` with the default ``scale=True``: ÷√d_k, also with batch dimensions.

    The learner's function, as for :func:`check_attention_scores`.

    Fails when, with d_k = 9, the scaled scores are not the unscaled ones divided by 3 (saying what they are divided
    by); or when batch entries are not scored on their own.
    """
    rng = np.random.default_rng(1)
    Q, K = rng.normal(size=(2, 9)), rng.normal(size=(3, 9))  # d_k = 9, so √d_k = 3
    raw = _array("attention_scores(Q, K, scale=False)", call(attention_scores, Q, K, scale=False), (2, 3))
    scaled = _array("attention_scores(Q, K)", call(attention_scores, Q, K), (2, 3))
    if not _close(scaled * 3, raw):
        ratio = float(np.vdot(raw, scaled) / np.vdot(scaled, scaled)) if np.any(scaled) else math.nan
        _fail(f"with d_k = 9 the scaled scores should be the unscaled ones divided by √d_k = 3; they are divided by "
              f"{ratio:.4g}" + (" (not scaled at all)" if _close(ratio, 1.0) else ""))
    _ok("scale=True divides the scores by √d_k, scale=False leaves them as Q Kᵀ")

    _batch_entries_on_their_own(attention_scores, rng)
    _ok("leading batch dimensions work with scaling too: shape (batch, T_q, T_k)")


# ---------------------------------------------------------------- step 3
@_self_check
def check_causal_mask(causal_mask: Callable) -> None:
    """Self-check ``causal_mask(T)``: True where query i may attend to key j, i.e. j ≤ i.

    The learner's function: an int ``T``; returns a bool array (T, T).

    Fails when for T = 1 or 5 the result is not a bool (T, T) array that is True exactly where j ≤ i.
    """
    for T in (1, 5):
        mask = _array(f"causal_mask({T})", call(causal_mask, T), (T, T), kind="b")
        i, j = np.indices((T, T))
        if np.any(mask & (j > i)):
            _fail(f"causal_mask({T}) lets a query attend to a future key (True at j > i): only j ≤ i is allowed")
        if not np.all(mask[j <= i]):
            _fail(f"causal_mask({T}) blocks a key j ≤ i (itself or the past): every query may attend to them")
    _ok("causal_mask(T) is True exactly where j ≤ i (diagonal included), dtype bool, also for T = 1 and 5")


# ---------------------------------------------------------------- step 4
@_self_check
def check_scaled_dot_product_attention(scaled_dot_product_attention: Callable) -> None:
    """Self-check ``scaled_dot_product_attention(Q, K, V, mask=None, scale=True)``: worked cases, then properties.

    The learner's function: ``Q`` (..., T_q, d_k), ``K`` (..., T_k, d_k), ``V`` (..., T_k, d_v), a bool ``mask``
    broadcasting to (..., T_q, T_k); returns the float pair (output (..., T_q, d_v), weights (..., T_q, T_k)).

    Fails when the weights of scores (4, 0) are not softmax(2, 0) (or softmax(4, 0) with ``scale=False``) or the
    output is not weights @ V; or when, for a batch of 2 with a (3, 5) mask, the pair is swapped, a row does not sum
    to 1 or a blocked key has weight.
    """
    # d_k = 4, q = (2,0,0,0), keys (2,0,0,0) and 0: scores (4, 0), scaled (2, 0).
    q = np.array([[2.0, 0.0, 0.0, 0.0]])
    k = np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    v = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, 5.0]])
    out, w = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, q, k, v))
    w = _array("the weights", w, (1, 2))
    out = _array("the output", out, (1, 3))
    if not _close(w, [[0.88079708, 0.11920292]]):
        _fail(f"for scores (4, 0) with d_k = 4 the weights should be softmax(4 / √4, 0) = softmax(2, 0) = "
              f"[0.8808, 0.1192]; got {np.round(w, 4).tolist()} (if the self-checks of softmax and "
              "attention_scores pass, the problem is in this function: is `scale` passed on?)")
    if not _close(out, [[0.88079708, 0.11920292, 5.0]]):
        _fail(f"the output should be weights @ V = [0.8808, 0.1192, 5.0], got {np.round(out, 4).tolist()}")
    _, w = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, q, k, v, scale=False))
    w = _array("the weights with scale=False", w, (1, 2))
    if not _close(w, [[0.98201379, 0.01798621]]):
        _fail(f"with scale=False the scores (4, 0) are not divided by √d_k, so the weights should be softmax(4, 0) = "
              f"[0.9820, 0.0180]; got {np.round(w, 4).tolist()}: is `scale` passed on to attention_scores?")
    _ok("weights = softmax(Q Kᵀ / √d_k) (without ÷√d_k for scale=False) and output = weights @ V")

    rng = np.random.default_rng(4)
    Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    mask = rng.random((3, 5)) < 0.6
    mask[:, 0] = True
    out, w = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, Q, K, V, mask=mask))
    if isinstance(out, np.ndarray) and isinstance(w, np.ndarray) and out.shape == (2, 3, 5) and w.shape == (2, 3, 2):
        _fail("scaled_dot_product_attention returned (weights, output); return (output, weights) in that order")
    w = _array("the weights for a batch of 2", w, (2, 3, 5))
    out = _array("the output for a batch of 2", out, (2, 3, 2))
    if not _close(w.sum(axis=-1), 1.0):
        _fail(f"each row of the weights should sum to 1; row sums are {np.round(w.sum(axis=-1), 4).tolist()}")
    if np.any(w[:, ~mask] != 0):
        _fail("a blocked key (mask False) has a non-zero weight: blocked scores must get weight exactly 0")
    if not _close(out, w @ V):
        _fail("the output should be weights @ V")
    _ok("with a (T_q, T_k) mask broadcast over a batch: shapes (2, 3, 2) and (2, 3, 5), rows sum to 1, "
        "blocked keys get 0")


# ---------------------------------------------------------------- step 5
@_self_check
def check_causal_self_attention(causal_self_attention: Callable) -> None:
    """Self-check ``causal_self_attention(x, W_q, W_k, W_v, scale=True)``: worked case, then shapes and causality.

    The learner's function: ``x`` (T, d_model) and ``W_q``, ``W_k``, ``W_v`` (d_model, d_head), float; returns
    (output (T, d_head), weights (T, T)).

    Fails when for T = 4, d_model = 6, d_head = 3 the shapes are wrong, a weight above the diagonal is not 0 or a
    row of weights does not sum to 1.
    """
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 6))
    W_q, W_k, W_v = (rng.normal(size=(6, 3)) for _ in range(3))
    out, w = _pair("causal_self_attention", call(causal_self_attention, x, W_q, W_k, W_v))
    _array("the weights", w, (4, 4))
    _array("the output", out, (4, 3))
    if np.any(np.abs(np.triu(w, 1)) > 1e-12):
        _fail("some weights above the diagonal are not 0: a query attends to a future key")
    if not _close(w.sum(axis=-1), 1.0):
        _fail(f"each row of the weights should sum to 1; row sums are {np.round(w.sum(axis=-1), 4).tolist()}")
    _ok("shapes (T, d_head) and (T, T) with d_head ≠ d_model, rows sum to 1, and no weight on the future")


# ---------------------------------------------------------------- step 6
ZERO_LOG_ZERO = ("  NaN where a weight is 0: in NumPy 0 · log 0 is 0 · (−inf) = NaN, but the entropy counts "
                 "0 · log 0 as 0 — leave the zero weights out of the sum (or take the log only where w > 0)")


def check_entropy_worked_cases(assignment_name: str, attention_entropy: Callable) -> None:
    """The worked cases of ``attention_entropy`` in an assignment; a NaN from 0 · log 0 is named as such.

    Parameters
    ----------
    assignment_name : str
        The assignment whose stored worked cases are run ("01_scaled_dot_product_attention").
    attention_entropy : callable
        The learner's function: weights (..., T_k), float; returns the entropies (...,) in nats.

    Raises
    ------
    SelfCheckFailed
        With the worked case's message, plus the 0 · log 0 explanation when
        the learner's entropy of a row with a zero weight is NaN.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    try:
        worked.check_worked_cases(assignment_name, "attention_entropy", attention_entropy, seconds=CALL_SECONDS)
    except SelfCheckFailed as failure:
        H, error = attempt(attention_entropy, np.array([[0.5, 0.5, 0.0]]))  # an error: the worked case says it
        if not (error is None and isinstance(H, np.ndarray) and H.dtype.kind == "f" and bool(np.isnan(H).any())):
            raise
        raise SelfCheckFailed(f"{failure}\n{ZERO_LOG_ZERO}") from None


@_self_check(worked_cases=False)  # its own worked cases' call explains a NaN from 0 · log 0
def check_attention_entropy(attention_entropy: Callable) -> None:
    """Self-check ``attention_entropy(weights)`` in nats with 0 · log 0 = 0: worked case, then shapes and ln n.

    The learner's function: weights (..., T_q, T_k), float; returns one entropy per query row, (..., T_q), in nats.

    Fails at the first worked case it gets wrong (explaining 0 · log 0 where that is the cause), or when uniform
    weights (2, 3, 4) do not give ln 4 in an array of shape (2, 3).
    """
    check_entropy_worked_cases(ASSIGNMENT, attention_entropy)
    weights = np.full((2, 3, 4), 0.25)
    H = call(attention_entropy, weights)
    if isinstance(H, np.ndarray) and H.shape != (2, 3):
        _fail(f"attention_entropy should return one value per query row, shape (..., T_q) = (2, 3) for weights of "
              f"shape (2, 3, 4); got shape {H.shape}: sum over the last axis (keys) only and keep the others")
    H = _array("attention_entropy of a (2, 3, 4) batch", H, (2, 3))
    if not _close(H, math.log(4)):
        _fail(f"rows spread evenly over 4 keys should have entropy ln 4 = 1.3863 nats; got {np.round(H, 4).tolist()}")
    _ok("one value per query row, with batch dimensions; uniform over n keys → ln n nats")


# ---------------------------------------------------------------- step 7: the three facts
@_self_check(worked_cases=False)
def check_rows_are_weighted_averages(scaled_dot_product_attention: Callable) -> None:
    """Fact 1: each output row is a weighted average of the value rows.

    The weights are non-negative, each row sums to 1, the output equals
    ``weights @ V`` and so lies, column by column, between the smallest and
    largest value.

    The learner's function, called with Q (5, 8), K (7, 8), V (7, 3) and a bool (5, 7) mask.

    Fails naming the first of these properties that fails, and the step to revisit.
    """
    rng = np.random.default_rng(1)
    Q, K, V = rng.normal(size=(5, 8)), rng.normal(size=(7, 8)), rng.normal(size=(7, 3))
    mask = rng.random((5, 7)) < 0.6
    mask[:, 0] = True
    out, w = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, Q, K, V, mask=mask))
    w = _array("the weights", w, (5, 7))
    out = _array("the output", out, (5, 3))
    if np.any(w < 0):
        _fail(f"some weights are negative (minimum {w.min():.3g}); softmax outputs are never negative: revisit "
              "softmax (step 1), which scaled_dot_product_attention uses")
    if not _close(w.sum(axis=-1), 1.0):
        _fail(f"the weights in each row should sum to 1; row sums are {np.round(w.sum(axis=-1), 4).tolist()}: revisit "
              "scaled_dot_product_attention (step 5) — is the softmax taken along the last axis (the keys)? — and "
              "softmax (step 1)")
    if np.any(w[~mask] != 0):
        _fail("a blocked key (mask False) has a non-zero weight: revisit scaled_dot_product_attention (step 5), "
              "where blocked scores must become −inf before the softmax")
    if not _close(out, w @ V):
        _fail("the output is not weights @ V: revisit scaled_dot_product_attention (step 5)")
    if np.any(out < V.min(axis=0) - 1e-9) or np.any(out > V.max(axis=0) + 1e-9):
        _fail("an output value lies outside its column's smallest … largest value in V, so the output row is not "
              "a weighted average of the value rows: revisit scaled_dot_product_attention (step 5)")
    _ok("fact 1: weights ≥ 0, rows sum to 1, output = weights @ V lies in the convex hull of the rows of V "
        "(each column between its smallest and largest value in V)")


@_self_check(worked_cases=False)
def check_causality(causal_self_attention: Callable) -> None:
    """Fact 2: changing the last token changes only the last output row.

    The learner's function, called with x (6, 8) and projections (8, 4).

    Fails when an earlier output changes too (the future leaks), or the last one does not change.
    """
    rng = np.random.default_rng(2)
    T, d_model, d_head = 6, 8, 4
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v = (rng.normal(size=(d_model, d_head)) for _ in range(3))
    before, _ = _pair("causal_self_attention", call(causal_self_attention, x, W_q, W_k, W_v))
    x_changed = x.copy()
    x_changed[-1] = rng.normal(size=d_model) * 3
    after, _ = _pair("causal_self_attention", call(causal_self_attention, x_changed, W_q, W_k, W_v))
    before = _array("the output", before, (T, d_head))
    after = _array("the output", after, (T, d_head))
    changed = [i for i in range(T) if not np.allclose(before[i], after[i], rtol=1e-10, atol=1e-12)]
    if changed[:-1] or changed and changed[-1] != T - 1:
        _fail(f"changing only the last token changed the outputs at positions {changed}: "
              "earlier positions can see the future")
    if not changed:
        _fail("changing the last token did not change the last output: the last position should attend to itself")
    _ok("fact 2: changing the last token changes only the last output (causality)")


# With ÷√d_k the scores of random q, k ~ N(0, I) have variance 1 whatever d_k is, and the mean row entropy of
# their softmax lies 0.35–0.5 nats below the ceiling ln T (measured for T = 8 … 128, d_k = 16 … 512). Dividing by
# d_k instead leaves the weights almost uniform (less than 0.05 nats below the ceiling for d_k ≥ 16).
SCALED_GAP = (0.25, 0.75)


def check_scaling_prevents_saturation(scaled_dot_product_attention: Callable, attention_entropy: Callable,
                                      d_head: int = 256, T: int = 32) -> tuple[float, float]:
    """Fact 3: without ÷√d_k the softmax saturates; with it the weights stay spread out, but not uniform.

    Draws q, k ~ N(0, I) with ``d_head`` dimensions (seeded), computes the mean
    row entropy in nats of the scaled and unscaled attention weights, prints
    both against the uniform ceiling ln T and returns ``(scaled, unscaled)``.
    It checks that the scaled entropy lies between 0.25 and 0.75 nats below
    ln T (÷√d_k gives scores of variance 1; ÷d_k would leave the weights
    almost uniform) and that the unscaled entropy is below half the scaled
    one (Vaswani et al. 2017, §3.2.1 and footnote 4).

    Parameters
    ----------
    scaled_dot_product_attention : callable
        The learner's function, called with Q, K (T, d_head), V (T, 2), float64, and ``scale`` True or False.
    attention_entropy : callable
        The learner's function, called with the weights (T, T); returns (T,) entropies in nats.
    d_head, T : int
        Dimension of the queries and keys, and number of positions.

    Returns
    -------
    scaled, unscaled : float
        Mean row entropies in nats.

    Raises
    ------
    SelfCheckFailed
        Saying which of the two entropies is out of its range, and why.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(T, d_head)), rng.normal(size=(T, d_head)), rng.normal(size=(T, 2))
    entropies = []
    for scale in (True, False):
        _, w = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, Q, K, V, scale=scale))
        H = _array("attention_entropy(weights)", call(attention_entropy, _array("the weights", w, (T, T))), (T,))
        entropies.append(float(np.mean(H)))
    scaled, unscaled = entropies
    ceiling = math.log(T)
    low, high = SCALED_GAP
    print(f"mean row entropy at d_head = {d_head}, T = {T}: scaled {scaled:.2f} nats, unscaled {unscaled:.2f} nats "
          f"(uniform would be ln {T} = {ceiling:.2f})")
    if abs(scaled - unscaled) < 1e-6:
        _fail(f"scale=True and scale=False give the same weights (entropy {scaled:.2f} nats): is `scale` ignored?")
    if ceiling - scaled < low:
        _fail(f"the scaled weights are almost uniform: entropy {scaled:.2f} nats, only {ceiling - scaled:.2f} below the "
              f"ceiling ln {T} = {ceiling:.2f}. The scores were shrunk too much — divide them by √d_k, not by d_k: "
              f"÷√d_k gives scores of variance 1 whatever d_k is, and their softmax stays {low:g}–{high:g} nats "
              "below the ceiling")
    if ceiling - scaled > high:
        _fail(f"the scaled weights are too peaked: entropy {scaled:.2f} nats, {ceiling - scaled:.2f} below the ceiling "
              f"ln {T} = {ceiling:.2f}. Divided by √d_k the scores have variance 1 and the entropy stays within "
              f"{high:g} nats of the ceiling: are the scores divided by √d_k, and by nothing smaller?")
    if not unscaled < 0.5 * scaled:
        _fail(f"unscaled attention should be nearly one-hot at d_head = {d_head} (entropy well below the scaled "
              f"{scaled:.2f} nats), got {unscaled:.2f}: is `scale` ignored?")
    _ok(f"fact 3: scaling by √d_k keeps the softmax from saturating (scaled entropy {ceiling - scaled:.2f} nats below "
        f"the ceiling, unscaled {unscaled:.2f} nats)")
    return scaled, unscaled
