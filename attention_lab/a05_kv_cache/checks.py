"""Visible self-checks for assignment 5 (incremental decoding with a key/value cache).

Each check first runs the learner's function on the assignment's worked cases
(stored numbers, see :mod:`attention_lab.core.worked`), which name a known mistake
when the result matches one, and then checks properties that any correct
answer has, on random inputs, in plain words: a chunk decoded at once equals
the same tokens decoded one by one; decoding with the cache equals the
learner's own full causal attention to 1e-12; the cost grows linearly with the
cache and quadratically without it. No reference implementation is involved:
every comparison is between the learner's own functions, or with a property.
They award no points; the hidden tests grade.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from attention_lab.core.compare import as_number, is_number
from attention_lab.core.self_check import CALL_SECONDS, attempt, call, fail as _fail, float_array, ok as _ok, \
    self_check
from attention_lab.core.worked import check_worked_cases, show

ASSIGNMENT = "05_kv_cache"
SAME = 1e-12  # "the same numbers": reordered float64 arithmetic differs by about 1e-15 here
FLOAT32 = 1e-4  # differences of this size come from rounding to float32

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)


_array = functools.partial(float_array, sep=", but ", kinds="fb")


def _triple(value, what: str) -> tuple:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        got = f"{len(value)} values" if isinstance(value, (tuple, list)) else f"a {type(value).__name__}"
        _fail(f"{what} should return three values (out_new, K_cache_new, V_cache_new), but it returned {got}")
    return tuple(value)


def _problem(rng, T: int, d_model: int, d_head: int):
    """Random tokens and projections scaled so that attention is neither uniform nor one-hot."""
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v = (rng.normal(size=(d_model, d_head)) / np.sqrt(d_model) * 2.0 for _ in range(3))
    return x, W_q, W_k, W_v


# ---------------------------------------------------------------- step 0
def check_from_assignment_1(softmax: Callable, scaled_dot_product_attention: Callable) -> None:
    """Self-check the pasted assignment-1 functions, including T_q ≠ T_k with a (T_q, T_k) mask.

    Parameters
    ----------
    softmax, scaled_dot_product_attention : callable
        The learner's functions pasted from assignment 1; here Q (2, 4), K (5, 4), V (5, 3), float, and a
        bool (2, 5) mask give (output (2, 3), weights (2, 5)).

    Raises
    ------
    SelfCheckFailed
        At the first worked case of either that fails, or when the blocked weight is not exactly 0, a row
        of weights does not sum to 1 or the output is not weights @ V.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    check_worked_cases(ASSIGNMENT, "softmax", softmax)
    check_worked_cases(ASSIGNMENT, "scaled_dot_product_attention", scaled_dot_product_attention)
    rng = np.random.default_rng(50)
    Q, K, V = rng.normal(size=(2, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 3))
    allowed = np.array([[True, True, True, True, False], [True, True, True, True, True]])
    result = call(scaled_dot_product_attention, Q, K, V, mask=allowed)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        _fail("scaled_dot_product_attention should return (output, weights)")
    output = _array("the output for 2 queries over 5 keys", result[0], (2, 3))
    weights = _array("the weights for 2 queries over 5 keys", result[1], (2, 5))
    if weights[0, 4] != 0:
        _fail(f"with mask[0, 4] = False, weight [0, 4] should be exactly 0; it is {weights[0, 4]:.4g}")
    if not np.allclose(weights.sum(axis=-1), 1.0):
        _fail(f"each row of weights should sum to 1; the sums are {show(weights.sum(axis=-1))}")
    if not np.allclose(output, weights @ V):
        _fail("the output should be weights @ V")
    _ok("2 queries over 5 keys with a (2, 5) mask: blocked weight 0, rows sum to 1, output = weights @ V")


# ---------------------------------------------------------------- step 1
@_self_check
def check_causal_mask(causal_mask: Callable) -> None:
    """Self-check ``causal_mask(T_q, T_k=None)``: worked cases, then the bottom-right rule for many sizes.

    The learner's function: ints ``T_q`` ≤ ``T_k`` (``T_k`` defaults to ``T_q``); returns a bool mask (T_q, T_k) in
    which new query i sees keys 0 … i + T_k − T_q.

    Fails when for some 1 ≤ T_q ≤ T_k ≤ 6 the mask is not that bool array (saying when the triangle is aligned
    top-left), or causal_mask(T) differs from causal_mask(T, T).
    """
    for T_k in range(1, 7):
        for T_q in range(1, T_k + 1):
            mask = call(causal_mask, T_q, T_k)
            if not isinstance(mask, np.ndarray) or mask.shape != (T_q, T_k) or mask.dtype != np.bool_:
                got = f"{mask.dtype} array of shape {mask.shape}" if isinstance(mask, np.ndarray) else \
                    type(mask).__name__
                _fail(f"causal_mask({T_q}, {T_k}) should be a bool array of shape ({T_q}, {T_k}); got {got}")
            for i in range(T_q):
                allowed = i + T_k - T_q + 1  # keys 0 … i + T_k − T_q
                if mask[i].sum() != allowed or not mask[i, :allowed].all():
                    _fail(f"in causal_mask({T_q}, {T_k}), new query {i} is position {i + T_k - T_q} of {T_k}, so it "
                          f"may attend to keys 0…{allowed - 1}; its row is {show(mask[i])}"
                          + (" — the triangle is aligned top-left; align it bottom-right" if mask[i].sum() == i + 1
                             and T_q < T_k else ""))
    _ok("causal_mask(T_q, T_k) lets new query i see keys 0 … i + T_k − T_q for every 1 ≤ T_q ≤ T_k ≤ 6")
    for T in (1, 4):
        square = call(causal_mask, T)
        if not isinstance(square, np.ndarray) or square.shape != (T, T) or \
                not np.array_equal(square, call(causal_mask, T, T)):
            _fail(f"causal_mask({T}) (T_k omitted) should equal causal_mask({T}, {T})")
    _ok("with T_k omitted the mask is the square one of assignment 1")


# ---------------------------------------------------------------- step 2
@_self_check
def check_attend_with_cache(attend_with_cache: Callable) -> None:
    """Self-check ``attend_with_cache``: worked cases, the grown caches, and chunk = token by token.

    The learner's function: ``x_new`` (T_new, d_model), ``K_cache``, ``V_cache`` (T_old, d_head) and ``W_q``,
    ``W_k``, ``W_v`` (d_model, d_head), float64; returns (out_new (T_new, d_head), K_cache_new, V_cache_new
    (T_old + T_new, d_head)).

    Fails when the caches are not float64, not the old rows followed by the new projections, or an output row lies
    outside the range of the values; or when 3 new tokens at once do not give, to 1e-12, what 3 single-token calls
    give.
    """
    rng = np.random.default_rng(52)
    x, W_q, W_k, W_v = _problem(rng, 7, 6, 3)
    K_cache, V_cache = x[:4] @ W_k, x[:4] @ W_v
    result = _triple(call(attend_with_cache, x[4:], K_cache, V_cache, W_q, W_k, W_v), "attend_with_cache")
    out = _array("out_new for 3 new tokens over a cache of 4", result[0], (3, 3))
    K_new = _array("K_cache_new for 3 new tokens over a cache of 4", result[1], (7, 3))
    V_new = _array("V_cache_new for 3 new tokens over a cache of 4", result[2], (7, 3))
    for name, grown, old, W in (("K_cache_new", K_new, K_cache, W_k), ("V_cache_new", V_new, V_cache, W_v)):
        if grown.dtype != np.float64:
            _fail(f"{name} has dtype {grown.dtype}; keep the cache in float64 — decoding must reproduce full "
                  "attention to 1e-12, and float32 keeps only about 7 significant digits")
        if np.allclose(grown[3:], old) and np.allclose(grown[:3], x[4:] @ W):
            _fail(f"{name} has the new rows before the old ones; append them after the cache (row j of the "
                  "cache must stay the key or value of position j)")
        if not np.array_equal(grown[:4], old):
            _fail(f"the first 4 rows of {name} should be the old cache, unchanged")
        if not np.allclose(grown[4:], x[4:] @ W, rtol=SAME, atol=SAME):
            _fail(f"the last 3 rows of {name} should be the new tokens' projections, x_new @ "
                  f"{'W_k' if name[0] == 'K' else 'W_v'}")
    _ok("the caches grow by the new rows, appended after the old ones, and the inputs stay unchanged")
    if np.any(out < V_new.min(axis=0) - 1e-9) or np.any(out > V_new.max(axis=0) + 1e-9):
        _fail("each output row should be a weighted average of the value rows (inside their range); it is not")

    one_by_one, K_step, V_step = [], K_cache, V_cache
    for i in range(4, 7):
        step = _triple(call(attend_with_cache, x[i:i + 1], K_step, V_step, W_q, W_k, W_v), "attend_with_cache")
        one_by_one.append(_array(f"out_new for one new token over a cache of {i}", step[0], (1, 3)))
        K_step, V_step = step[1], step[2]
    one_by_one = np.concatenate(one_by_one)
    differs = ~np.isclose(out, one_by_one, rtol=0, atol=SAME).all(axis=1)
    if differs.any():
        first = int(np.argmax(differs))
        _fail(f"3 new tokens in one call should give the same outputs as the same 3 tokens one call at a time; "
              f"new token {first} differs (largest difference {np.abs(out - one_by_one).max():.2g}) — inside a "
              "chunk, new query i may see the cache and new tokens 0…i, not the later ones")
    _ok("a chunk of 3 new tokens gives the same outputs as 3 single-token calls (to 1e-12)")


# ---------------------------------------------------------------- step 3
def check_decode_incrementally(decode_incrementally: Callable, scaled_dot_product_attention: Callable,
                               causal_mask: Callable) -> None:
    """Self-check ``decode_incrementally``: worked cases, then equality with your own full causal attention.

    The full attention is ``scaled_dot_product_attention(x W_q, x W_k, x W_v, mask=causal_mask(T))`` with
    the learner's own functions, so this check needs steps 0 and 1 to work.

    Parameters
    ----------
    decode_incrementally : callable
        The learner's function: ``x`` (T, d_model), ``W_q``, ``W_k``, ``W_v`` (d_model, d_head), float64,
        and an int ``chunk``; returns the outputs (T, d_head).
    scaled_dot_product_attention, causal_mask : callable
        The learner's functions of steps 0 and 1.

    Raises
    ------
    SelfCheckFailed
        When the result differs from full attention by float32 rounding; at the first worked case it gets
        wrong; when the learner's full attention cannot be computed; when for chunk = 1, 3, 4, 10, 25 the
        outputs differ from it by more than 1e-12; or when changing the last token changes an earlier
        output.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    rng = np.random.default_rng(53)
    T, d_head = 10, 4
    x, W_q, W_k, W_v = _problem(rng, T, 8, d_head)

    def difference_from_full_attention() -> float:
        full = scaled_dot_product_attention(x @ W_q, x @ W_k, x @ W_v, mask=causal_mask(T))[0]
        return float(np.max(np.abs(np.asarray(decode_incrementally(x, W_q, W_k, W_v), dtype=np.float64) - full)))

    # None when a function fails: the worked cases below say how, in words (three calls share one time limit)
    largest, _ = attempt(difference_from_full_attention, seconds=3 * CALL_SECONDS)
    # Rounding to float32 is checked first: on the small worked cases it looks like any other wrong value.
    if largest is not None and SAME < largest < FLOAT32:
        _fail(f"decoding with the cache differs from your full causal attention by {largest:.1g}: the size of "
              "float32 rounding. Decoding must reproduce full attention to 1e-12, so keep every array in float64")
    check_worked_cases(ASSIGNMENT, "decode_incrementally", decode_incrementally)
    mask = call(causal_mask, T)
    full = call(scaled_dot_product_attention, x @ W_q, x @ W_k, x @ W_v, mask=mask)
    if not isinstance(full, (tuple, list)) or not isinstance(full[0], np.ndarray) or full[0].shape != (T, d_head):
        _fail("your scaled_dot_product_attention (step 0) does not return (output, weights) of the right shapes, "
              "so the full attention to compare with cannot be computed; fix step 0 first")
    full = full[0]
    for chunk in (1, 3, 4, T, 25):
        decoded = _array(f"decode_incrementally(x, W_q, W_k, W_v, chunk={chunk}) with T = {T}",
                         call(decode_incrementally, x, W_q, W_k, W_v, chunk=chunk), (T, d_head))
        difference = np.abs(decoded - full)
        if not np.all(difference <= SAME):
            first = int(np.argmax((difference > SAME).any(axis=1)))
            largest = float(np.nanmax(difference)) if np.isfinite(difference).any() else float("nan")
            why = (" — differences of this size come from float32 rounding; keep everything in float64"
                   if largest < FLOAT32 else
                   f" — row {first} is the first wrong one (position {first}, in chunk {first // chunk}): "
                   "are the caches carried from one call to the next, in order, and is every chunk decoded?")
            _fail(f"with chunk={chunk}, decoding with the cache should equal your full causal attention to 1e-12; "
                  f"the largest difference is {largest:.2g}{why}")
    _ok(f"decoding with the cache equals your full causal self-attention to 1e-12 for chunk = 1, 3, 4, {T}, 25")

    changed = x.copy()
    changed[T - 1] += 1.0
    moved = np.abs(call(decode_incrementally, changed, W_q, W_k, W_v, chunk=3) - full).max(axis=1)
    if np.any(moved[:-1] > SAME):
        _fail("changing the last token changed earlier outputs: the future leaks into the past")
    _ok("changing the last token changes only the last output")


# ---------------------------------------------------------------- step 4
@_self_check
def check_attention_cost_per_token(attention_cost_per_token: Callable) -> None:
    """Self-check the cost model: worked cases, equal at t = 1, linear with the cache, quadratic without.

    The learner's function: ints ``t``, ``d_model``, ``d_head`` and a bool ``cached``; returns the whole number of
    multiply-adds for token t.

    Fails when a count is not a whole number; or when the counts for t = 1 differ, the cached count does not grow by
    2·d_head per token or the uncached one has second differences other than 4·d_head.
    """
    d_model, d_head = 48, 8
    counts = {}
    for cached in (True, False):
        values = []
        for t in range(1, 9):
            value = as_number(call(attention_cost_per_token, t, d_model, d_head, cached))
            if not is_number(value) or not np.isfinite(value) or value != round(float(value)):
                _fail(f"attention_cost_per_token({t}, {d_model}, {d_head}, cached={cached}) should be a whole "
                      f"number of multiply-adds; it returned {show(value)}")
            values.append(float(value))
        counts[cached] = np.array(values)
    if counts[True][0] != counts[False][0]:
        _fail(f"for the first token (t = 1) there is nothing to reuse, so both counts should be equal; got "
              f"{counts[True][0]:g} with the cache and {counts[False][0]:g} without")
    steps = np.diff(counts[True])
    if not np.all(steps == 2 * d_head):
        _fail(f"with the cache, one more key should add one score and one value row, 2·d_head = {2 * d_head} "
              f"multiply-adds, per token; your count grows by {show(steps)}")
    _ok("with the cache the cost grows linearly: 2·d_head more multiply-adds per earlier token")
    curvature = np.diff(counts[False], 2)
    if not np.all(curvature == 4 * d_head):
        _fail(f"without the cache the t × t score matrix and weights @ V make the count quadratic in t "
              f"(second differences 4·d_head = {4 * d_head}); yours are {show(curvature)}")
    _ok("without the cache the cost grows quadratically, and equals the cached cost at t = 1")
