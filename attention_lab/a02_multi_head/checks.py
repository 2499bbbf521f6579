"""Visible self-checks for assignment 2 (multi-head attention), run by learners on their own functions.

Each check first runs the function on the assignment's worked cases (small
inputs whose expected numbers, and the numbers known mistakes give, are
stored in ``attention_lab/<folder>/worked_cases.json``; see :mod:`attention_lab.core.worked`),
then tests properties every correct answer has — rows of weights sum to 1,
no head looks into the future, tokens do not mix inside a head, merging
undoes splitting — and says in plain words which one fails. Nothing here
computes the answers themselves: the grader's reference lives elsewhere.
They award no points.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from attention_lab.a01_attention import checks
from attention_lab.core.self_check import attempt, call, fail as _fail, float_array as _array, \
    normal_arrays as _random, ok as _ok, self_check
from attention_lab.core.worked import check_worked_cases, describe_failure, passes_worked_cases, show

ASSIGNMENT = "02_multi_head_attention"

# a check of one learner's function: its worked cases of this assignment, then the properties (core.self_check)
_self_check = functools.partial(self_check, ASSIGNMENT)


def _pair(what: str, value, shapes) -> tuple[np.ndarray, np.ndarray]:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        _fail(f"{what} should return a tuple (output, weights); it returned a {type(value).__name__}")
    if all(isinstance(v, np.ndarray) for v in value) and [v.shape for v in value] == list(shapes)[::-1] \
            and shapes[0] != shapes[1]:
        _fail(f"{what} returned (weights, output); return (output, weights) in that order")
    return _array(f"the output of {what}", value[0], shapes[0]), _array(f"the weights of {what}", value[1], shapes[1])


def _token_of(value: float) -> int:
    """The token a labelled value belongs to (labels are t + f / 100 with f < 50, see :func:`_labelled_tokens`)."""
    return int(np.floor(float(value) + 1e-3))


def _tokens_in_rows(rows: np.ndarray) -> list[tuple[int, list[int]]]:
    """The rows (row index, tokens found) whose values do not all come from the token of the row's index."""
    wrong = []
    for t, row in enumerate(rows):
        tokens = sorted({_token_of(v) for v in row})
        if tokens != [t]:
            wrong.append((t, tokens))
    return wrong


def _labelled_tokens(T: int, d_model: int) -> np.ndarray:
    """X with entry (t, f) = t + f / 100: each value names its token, so mixed tokens are visible (d_model < 50)."""
    return np.arange(T)[:, None] + np.arange(d_model)[None, :] / 100.0


def _rows_sum_to_one(what: str, weights: np.ndarray) -> None:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    if not np.all(np.isfinite(weights)):
        _fail(f"{what} contain NaN or inf: does exp overflow, or is a whole row masked?")
    sums = weights.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-5):
        extra = (" They sum to 1 across the heads instead: the softmax must run along the last axis (the keys)."
                 if weights.ndim == 3 and np.allclose(weights.sum(axis=0), 1.0, atol=1e-5) else "")
        _fail(f"each row of {what} should sum to 1; the row sums range from {sums.min():.4g} to {sums.max():.4g}."
              + extra)


def _no_future(what: str, weights: np.ndarray) -> None:
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    T = weights.shape[-1]
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    leaked = np.argwhere(future & (np.abs(weights) > 1e-9))
    if leaked.size:
        where = tuple(int(i) for i in leaked[0])
        _fail(f"with a causal (T, T) mask, {what} put weight on a future key at (head, query, key) = {where}: "
              "the mask must apply to every head")


# ---------------------------------------------------------------- step 0
def check_from_assignment_1(softmax: Callable, scaled_dot_product_attention: Callable,
                            attention_entropy: Callable) -> None:
    """Self-check the assignment-1 functions on 3-D (n_heads, T, d) inputs.

    Parameters
    ----------
    softmax, scaled_dot_product_attention, attention_entropy : callable
        The learner's functions pasted from assignment 1; here Q, K (3, 5, 4) and V (3, 5, 2), float,
        with a bool (5, 5) causal mask, give (output (3, 5, 2), weights (3, 5, 5)).

    Raises
    ------
    SelfCheckFailed
        At the first worked case of one of the three that fails; when a row of the 3-head weights does not
        sum to 1 or has weight on a future key; or when a head differs from the same head computed alone.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    check_worked_cases(ASSIGNMENT, "softmax", softmax)
    check_worked_cases(ASSIGNMENT, "scaled_dot_product_attention", scaled_dot_product_attention)
    checks.check_entropy_worked_cases(ASSIGNMENT, attention_entropy)

    Q, K, V = _random(2, (3, 5, 4), (3, 5, 4), (3, 5, 2))
    mask = np.tril(np.ones((5, 5), dtype=bool))
    output, weights = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, Q, K, V, mask=mask),
                            [(3, 5, 2), (3, 5, 5)])
    _rows_sum_to_one("the weights", weights)
    _no_future("scaled_dot_product_attention", weights)
    for h in range(3):
        alone = _pair("scaled_dot_product_attention", call(scaled_dot_product_attention, Q[h], K[h], V[h], mask=mask),
                      [(5, 2), (5, 5)])
        if not (np.allclose(alone[1], weights[h], rtol=1e-4, atol=1e-6)
                and np.allclose(alone[0], output[h], rtol=1e-4, atol=1e-6)):
            _fail(f"head {h} of a 3-D call differs from calling scaled_dot_product_attention on head {h} alone: each "
                  "head must use only its own queries, keys and values (transpose only the last two axes of K)")
    _ok("with 3 heads and a (T, T) causal mask, rows sum to 1, no head sees the future, and each head is computed "
        "on its own")


# ---------------------------------------------------------------- step 1
@_self_check
def check_split_heads(split_heads: Callable) -> None:
    """Self-check ``split_heads(X, n_heads)``: shape, tokens kept apart, a clear ValueError, X unchanged.

    The learner's function: ``X`` (T, d_model), float, and an int ``n_heads`` dividing d_model; returns (n_heads, T,
    d_model // n_heads).

    Fails when for X (5, 12) and 3 heads a head's row t holds features of another token; or when d_model = 10,
    n_heads = 4 does not raise a ValueError that names n_heads and d_model.
    """
    T, d_model, n_heads = 5, 12, 3
    X = _labelled_tokens(T, d_model)
    H = _array("split_heads(X, 3) for X of shape (5, 12)", call(split_heads, X, n_heads), (n_heads, T, d_model // n_heads))
    for h in range(n_heads):
        wrong = _tokens_in_rows(H[h])
        if wrong:
            t, tokens = wrong[0]
            _fail(f"in head {h}, row {t} holds features of token(s) {tokens}, not only of token {t}: within a head, "
                  "row t must be a slice of token t's features (a reshape straight to (n_heads, T, d_head) mixes "
                  "tokens)")
    _ok("for T = 5, d_model = 12, n_heads = 3: shape (3, 5, 4), and each head's row t comes from token t")

    result, error = attempt(split_heads, np.ones((2, 10)), 4)
    if isinstance(error, ValueError):
        message = str(error)
        if not (("n_heads" in message or "4" in message) and ("d_model" in message or "10" in message)):
            _fail(f"the ValueError for d_model = 10, n_heads = 4 should name n_heads and d_model; its message is "
                  f"{message!r}")
    elif error is not None:
        _fail(f"split_heads with d_model = 10, n_heads = 4 should raise ValueError; it raised "
              f"{describe_failure(split_heads, error).removeprefix('split_heads raised ')}")
    else:
        _fail(f"split_heads with d_model = 10 and n_heads = 4 should raise ValueError (4 does not divide 10); it "
              f"returned {show(result, 120)}")
    _ok("a ValueError naming n_heads and d_model when n_heads does not divide d_model")


# ---------------------------------------------------------------- step 2
def check_merge_heads(merge_heads: Callable, split_heads: Callable | None = None) -> None:
    """Self-check ``merge_heads(H)``: shape, one token per row, and (given split_heads) the round trip.

    Parameters
    ----------
    merge_heads : callable
        The learner's function: ``H`` (n_heads, T, d_head), float; returns (T, n_heads · d_head).
    split_heads : callable, optional
        The learner's ``split_heads``; when it passes its own worked cases,
        ``merge_heads(split_heads(X, 2))`` must give back X (5, 8).

    Raises
    ------
    SelfCheckFailed
        At the first worked case it gets wrong, when a merged row holds another token's features, or when
        merging does not undo splitting.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    check_worked_cases(ASSIGNMENT, "merge_heads", merge_heads)

    n_heads, T, d_head = 3, 4, 2
    # Entry (h, t, j) is t + (h·d_head + j) / 100: every value names its token t.
    H = np.arange(T)[None, :, None] + (np.arange(n_heads)[:, None, None] * d_head + np.arange(d_head)) / 100.0
    merged = _array("merge_heads(H) for H of shape (3, 4, 2)", call(merge_heads, H), (T, n_heads * d_head))
    wrong = _tokens_in_rows(merged)
    if wrong:
        t, tokens = wrong[0]
        _fail(f"row {t} of the merged array holds features of token(s) {tokens}: each row must hold only token "
              f"{t}'s vectors, from every head")
    _ok("for 3 heads, T = 4, d_head = 2: shape (4, 6), and row t holds only token t's features")

    if split_heads is None:
        return
    X = _labelled_tokens(5, 8)
    # the round trip needs a working split_heads; its own check reports what is wrong with it
    heads, error = attempt(split_heads, X, 2) if passes_worked_cases(ASSIGNMENT, "split_heads", split_heads) \
        else (None, None)
    if not (isinstance(heads, np.ndarray) and heads.shape == (2, 5, 4)):
        print("(merge_heads(split_heads(X)) not checked: your split_heads does not pass its own self-check yet)")
        return
    back = call(merge_heads, heads)
    if not (isinstance(back, np.ndarray) and back.shape == X.shape and np.allclose(back, X)):
        _fail("merge_heads(split_heads(X, 2)) should give back X (shape (5, 8)), but it does not: merging must undo "
              "the split, so move the head axis back the way split_heads moved it")
    _ok("merge_heads(split_heads(X, 2)) gives back X")


# ---------------------------------------------------------------- step 3
@_self_check
def check_multi_head_attention(multi_head_attention: Callable) -> None:
    """Self-check ``multi_head_attention(x, W_q, W_k, W_v, W_o, n_heads, mask=None)``.

    The learner's function: ``x`` (T, d_model), the four projections (d_model, d_model), float, an int ``n_heads``
    and a bool ``mask`` (T, T); returns (output (T, d_model), weights (n_heads, T, T)).

    Fails when for T = 5, d_model = 12, 3 heads and a causal mask a row of weights does not sum to 1 or a head sees
    the future; or when W_v or W_o change the weights, or the output is not linear in them.
    """
    T, d_model, n_heads = 5, 12, 3
    x, W_q, W_k, W_v, W_o = _random(8, (T, d_model), *[(d_model, d_model)] * 4)
    shapes = [(T, d_model), (n_heads, T, T)]
    mask = np.tril(np.ones((T, T), dtype=bool))
    output, weights = _pair("multi_head_attention",
                            call(multi_head_attention, x, W_q, W_k, W_v, W_o, n_heads, mask=mask), shapes)
    _rows_sum_to_one("the weights", weights)
    _no_future("multi_head_attention", weights)
    _ok("for T = 5, d_model = 12, 3 heads: output (5, 12), weights (3, 5, 5); rows sum to 1; with a causal mask "
        "no head sees the future")

    doubled, weights_2 = _pair("multi_head_attention",
                               call(multi_head_attention, x, W_q, W_k, 3 * W_v, 2 * W_o, n_heads, mask=mask), shapes)
    if not np.allclose(weights_2, weights, rtol=1e-4, atol=1e-6):
        _fail("changing W_v or W_o changed the weights: the weights depend only on the queries and keys (W_q, W_k)")
    if not np.allclose(doubled, 6 * output, rtol=1e-4, atol=1e-6):
        if np.allclose(doubled, 3 * output, rtol=1e-4, atol=1e-6):
            _fail("doubling W_o did not change the output: the merged heads must go through the output projection, "
                  "output = merge(heads) @ W_o")
        _fail("the output should be linear in the values and in W_o (3·W_v and 2·W_o give 6 times the output), "
              "but it is not")
    _ok("the weights depend only on W_q and W_k, and the output goes through W_v and W_o")


def check_multi_head_facts(multi_head_attention: Callable, scaled_dot_product_attention: Callable) -> None:
    """Two facts about multi-head attention, checked on the learner's functions (no points).

    Causality per head: with a causal mask, changing the last token changes only
    the last output row. One head is single-head attention: with n_heads = 1 the
    result equals the learner's scaled dot-product attention on x W_q, x W_k,
    x W_v, followed by W_o.

    Parameters
    ----------
    multi_head_attention, scaled_dot_product_attention : callable
        The learner's functions (see :func:`check_multi_head_attention` and
        :func:`check_from_assignment_1`), called with x (6, 8), projections (8, 8) and 2 heads.

    Raises
    ------
    SelfCheckFailed
        With a message saying which fact fails.
    """
    __tracebackhide__ = True  # IPython then shows the message, not this module's frames
    T, d_model, n_heads = 6, 8, 2
    x, W_q, W_k, W_v, W_o = _random(11, (T, d_model), *[(d_model, d_model)] * 4)
    mask = np.tril(np.ones((T, T), dtype=bool))
    shapes = [(T, d_model), (n_heads, T, T)]
    before, _ = _pair("multi_head_attention", call(multi_head_attention, x, W_q, W_k, W_v, W_o, n_heads, mask=mask),
                      shapes)
    changed = x.copy()
    changed[-1] += 5.0
    after, _ = _pair("multi_head_attention",
                     call(multi_head_attention, changed, W_q, W_k, W_v, W_o, n_heads, mask=mask), shapes)
    moved = [t for t in range(T - 1) if not np.allclose(before[t], after[t], rtol=1e-6, atol=1e-9)]
    if moved:
        _fail(f"changing only the last token changed the outputs at positions {moved}: with a causal mask, output t "
              "may depend only on tokens 0 … t (check the mask and that tokens do not mix when you split or merge)")
    _ok("causality: changing the last token changes only the last output row")

    single, single_weights = _pair("multi_head_attention",
                                   call(multi_head_attention, x, W_q, W_k, W_v, W_o, 1, mask=mask),
                                   [(T, d_model), (1, T, T)])
    heads, weights = _pair("scaled_dot_product_attention",
                           call(scaled_dot_product_attention, x @ W_q, x @ W_k, x @ W_v, mask=mask),
                           [(T, d_model), (T, T)])
    if not (np.allclose(single_weights[0], weights, rtol=1e-4, atol=1e-6)
            and np.allclose(single, heads @ W_o, rtol=1e-4, atol=1e-6)):
        _fail("with n_heads = 1, multi_head_attention should equal scaled_dot_product_attention(x W_q, x W_k, x W_v) "
              "followed by W_o, but it does not")
    _ok("with one head, multi-head attention is single-head attention followed by W_o")
