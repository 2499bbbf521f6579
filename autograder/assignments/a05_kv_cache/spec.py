"""Assignment 5 (incremental decoding with a key/value cache) as data for the grader.

The hidden cases avoid inputs that hide cache mistakes: several new tokens
over a non-empty cache (a missing or top-left mask, prepended keys and an
ignored cache all show there), one new token over a cache (the top-left mask
sends it to key 0), an empty cache with a chunk (the mask inside the chunk),
d_head ≠ d_model, chunk sizes that do not divide T and one longer than T.
Decoding is compared with full causal self-attention itself (not with a
reference decoder), with 1e-12 absolute tolerance and no relative one: the
cache must reproduce it up to rounding, whatever the chunk size, as the issue
asks. The cost model's counts are integers and compared exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a01_attention import reference
from autograder.assignments.a05_kv_cache import reference as kv
from autograder.grader.spec import Assignment, Case, Steps, Variant, functions
from autograder.assignments.a05_kv_cache.bank import CORRECT, MISTAKES

NAME = "05_kv_cache"
PAIR = ("the output", "the weights")
TRIPLE = ("the output", "the new key cache", "the new value cache")
SAME = dict(rtol=0.0, atol=1e-12)  # the same numbers up to float64 rounding (≈ 1e-15 on these inputs)
EXACT = dict(rtol=0.0, atol=0.5)  # integer counts


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _float32_sized(got: np.ndarray, expected: np.ndarray) -> list[str]:
    difference = float(np.max(np.abs(got.astype(np.float64) - expected)))
    if 1e-12 < difference < 1e-4:
        return [f"The largest difference is {difference:.1g}: the size of float32 rounding. Decoding must match "
                "full attention to 1e-12, so keep every array in float64."]
    return []


def _diagnose_assignment_1(case, got, expected) -> list[str]:
    if case.function == "softmax" and isinstance(got, np.ndarray) and got.shape == expected.shape:
        if not np.all(np.isfinite(got)):
            return ["Some probabilities are NaN or infinite: does exp overflow for large logits?"]
        if not np.allclose(got.sum(axis=-1), 1.0, atol=1e-6):
            return ["The rows don't sum to 1: normalise along the last axis."]
        return []
    if case.function == "scaled_dot_product_attention" and isinstance(got, (tuple, list)) and len(got) == 2 \
            and all(isinstance(g, np.ndarray) and g.shape == e.shape for g, e in zip(got, expected)):
        weights = got[1]
        notes = []
        if not np.allclose(weights.sum(axis=-1), 1.0, atol=1e-6):
            notes.append("The rows of the weights don't sum to 1.")
        mask = case.kwargs.get("mask")
        if mask is not None and np.any(np.abs(weights[~np.broadcast_to(mask, weights.shape)]) > 1e-12):
            notes.append("A blocked key has weight: blocked scores must get weight exactly 0.")
        if not notes and np.allclose(weights, expected[1], rtol=1e-4, atol=1e-6):
            notes.append("The weights are right, so the output is wrong: it should be weights @ V.")
        return notes
    return []


def _diagnose_mask(case, got, expected) -> list[str]:
    if isinstance(expected, np.ndarray) and isinstance(got, np.ndarray):
        T_q, T_k = expected.shape
        if got.shape != expected.shape:
            if got.shape == (T_k, T_q) and T_q != T_k:
                return ["The mask is transposed: rows are the T_q new queries, columns the T_k keys."]
            return [f"The mask should have shape (T_q, T_k) = {expected.shape}: one row per new query, one column "
                    "per key."]
        if got.dtype != np.bool_:
            return []
        notes = []
        offset = T_k - T_q
        for i in range(T_q):
            allowed = got[i]
            if allowed[i + offset + 1:].any():
                notes.append(f"New query {i} (position {i + offset}) may attend to a later position: the future "
                             "must be blocked.")
            elif not allowed[i + offset]:
                notes.append(f"New query {i} may not attend to its own position {i + offset}: every position "
                             "sees itself.")
            elif not allowed[:i + offset].all():
                notes.append(f"New query {i} is blocked from an earlier key: it may see every key up to its "
                             "own position.")
            if notes:
                return notes
    return []


def _diagnose_attend(case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(isinstance(g, np.ndarray) for g in got)):
        return []
    out, K, V = got
    T_past = case.args[1].shape[0]
    notes = []
    for name, grown, want in (("key", K, expected[1]), ("value", V, expected[2])):
        if grown.shape != want.shape:
            notes.append(f"The new {name} cache should have T_past + T_new = {want.shape[0]} rows (the old cache "
                         f"followed by the new tokens'); it has shape {grown.shape}.")
        elif not np.allclose(grown[:T_past], want[:T_past], **SAME):
            notes.append(f"The first T_past rows of the new {name} cache should be the old cache, unchanged.")
        elif not np.allclose(grown, want, **SAME):
            notes.append(f"The rows appended to the {name} cache should be the new tokens' projections "
                         f"(x_new @ W_{name[0]}).")
    if notes:
        return notes
    if out.shape == expected[0].shape:
        wrong_rows = np.flatnonzero(~np.isclose(out, expected[0], **SAME).all(axis=1))
        notes += _float32_sized(out, expected[0])
        if not notes and wrong_rows.size and wrong_rows[0] > 0:
            notes.append(f"The caches are right and new token 0 is right, but new token {wrong_rows[0]} is not: "
                         "inside a chunk, new query i may see the cache and new tokens 0…i.")
        elif not notes and wrong_rows.size:
            notes.append("The caches are right, so the attention is wrong: the mask (bottom-right), the scaling "
                         "by √d_head, or the softmax over the keys.")
    return notes


def _diagnose_decode(case, got, expected) -> list[str]:
    if not isinstance(got, np.ndarray):
        return []
    T = expected.shape[0]
    if got.shape[1:] == expected.shape[1:] and got.shape[0] != T:
        return [f"The output has {got.shape[0]} rows but the sequence has T = {T} tokens: every chunk, including a "
                "shorter last one, must be decoded."]
    if got.shape != expected.shape:
        return []
    notes = _float32_sized(got, expected)
    if notes:
        return notes
    wrong = np.flatnonzero(~np.isclose(got, expected, **SAME).all(axis=1))
    if wrong.size:
        chunk = case.kwargs.get("chunk", 1)
        first = int(wrong[0])
        return [f"Rows 0…{first - 1} are right; row {first} (in chunk {first // chunk}) is the first wrong one: "
                "are the caches carried from one call to the next?" if first else
                "Row 0 is already wrong: check the first call, with empty caches of shape (0, d_head)."]
    return []


def _diagnose_cost(case, got, expected) -> list[str]:
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, float, np.integer, np.floating)) \
            or not np.isfinite(got) or expected == 0:
        return []
    t, d_model, d_head = case.args[:3]
    cached = case.kwargs.get("cached", case.args[3] if len(case.args) > 3 else None)
    ratio = float(got) / expected
    simple = [k for k in range(2, 9) if np.isclose(ratio, k, rtol=1e-9) or np.isclose(ratio, 1 / k, rtol=1e-9)]
    # only a whole factor is named: any other ratio would give the expected count away
    notes = [f"Your count is off by a factor of {simple[0]} (too {'large' if ratio > 1 else 'small'})."] if simple \
        else [f"Your count is too {'large' if ratio > 1 else 'small'}."]
    if float(got) < 3 * d_model * d_head * (1 if cached else t):
        notes.append("It is smaller than the projections alone: with the cache one token is projected to q, k and "
                     "v; without it all t tokens are.")
    return notes


# ---- hidden cases, built in the grader from a seed (default: the one the course has always used) -----

def _weights(rng, d_model: int, d_head: int):
    # 1.5/√d_model gives q and k entries of about ±1.5: the scaling matters and nothing saturates.
    return tuple(rng.normal(0, 1.5 / np.sqrt(d_model), (d_model, d_head)) for _ in range(3))


STEPS = Steps()  # in notebook order: each builder of hidden cases says which step it grades


@STEPS.add("test_from_assignment_1", "assignment_1", _diagnose_assignment_1)
def _assignment_1_cases(seed: int = 5001):
    rng = np.random.default_rng(seed)
    bottom_right = np.tril(np.ones((3, 6), dtype=bool), k=3)
    return [
        # weight 0: no known mistake of this step fails these two (they show that the functions are there)
        Case("softmax of mixed-sign logits", "softmax", (rng.normal(0, 3.0, (4, 6)),), weight=0),
        Case("softmax of logits as large as 1e4", "softmax",
             (np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]]),)),
        Case("attention, 3 queries over 5 keys, no mask", "scaled_dot_product_attention",
             (rng.normal(0, 1.5, (3, 4)), rng.normal(0, 1.5, (5, 4)), rng.normal(size=(5, 2))), outputs=PAIR,
             weight=0),
        Case("attention, 3 queries over 6 keys with a (3, 6) mask", "scaled_dot_product_attention",
             (rng.normal(0, 1.5, (3, 5)), rng.normal(0, 1.5, (6, 5)), rng.normal(size=(6, 3))),
             {"mask": bottom_right}, outputs=PAIR),
    ]


@STEPS.add("test_causal_mask", "mask", _diagnose_mask)
def _mask_cases(seed: int | None = None):
    # hand-chosen exact inputs (edge cases): the seed does not change them
    return [
        Case("3 new queries over 7 keys", "causal_mask", (3, 7), outputs=("the mask",)),
        Case("1 new query over 6 keys", "causal_mask", (1, 6), outputs=("the mask",)),
        Case("square, T_k omitted (T = 5)", "causal_mask", (5,), outputs=("the mask",)),
        Case("square, T_q = T_k = 4", "causal_mask", (4, 4), outputs=("the mask",)),
        Case("T_q = 6 > T_k = 4: ValueError", "causal_mask", (6, 4), raises="ValueError"),
    ]


def _attend_case(rng, description: str, T_past: int, T_new: int, d_model: int, d_head: int) -> Case:
    x = rng.normal(size=(T_past + T_new, d_model))
    W_q, W_k, W_v = _weights(rng, d_model, d_head)
    past = x[:T_past]
    return Case(description, "attend_with_cache", (x[T_past:], past @ W_k, past @ W_v, W_q, W_k, W_v),
                outputs=TRIPLE, **SAME)


@STEPS.add("test_attend_with_cache", "attend", _diagnose_attend)
def _attend_cases(seed: int = 5002):
    rng = np.random.default_rng(seed)
    return [
        _attend_case(rng, "empty cache, 4 new tokens (d_model = 8, d_head = 4)", 0, 4, 8, 4),
        _attend_case(rng, "1 new token over a cache of 5", 5, 1, 8, 4),
        _attend_case(rng, "3 new tokens over a cache of 6", 6, 3, 8, 4),
        _attend_case(rng, "4 new tokens over a cache of 2 (d_model = 6, d_head = 3)", 2, 4, 6, 3),
    ]


def decodes_chunk_by_chunk(case: Case, calls: list, finished: bool) -> str | None:
    """The notebook's rule for ``decode_incrementally`` (a :attr:`~autograder.grader.spec.Case.calls_check`): it
    calls ``attend_with_cache`` (the notebook's function, by its name or through an alias, a default argument or
    a closure) ⌈T / chunk⌉ times; the calls' new tokens are consecutive pieces of ``x`` of at most ``chunk``
    tokens, in order (np.array_split's pieces too); the first call gets empty caches and each later one the caches
    the call before it returned.

    Recomputing attention over the whole prefix for every chunk, with the full-attention functions or with
    ``attend_with_cache`` on fresh caches, gives the same numbers, so only the calls show that the cache is carried.
    When the first pass stopped early (``finished`` False: an earlier function raised), the calls made must be
    the first ones. A cache rebuilt from the prefix with the very values the last call returned cannot be told
    from the one it returned.
    """
    x = case.args[0]
    chunk = case.kwargs.get("chunk", 1)
    pieces = -(-x.shape[0] // chunk)
    rule = (f"decode_incrementally must call your attend_with_cache once per chunk ({pieces} times "
            f"here), with x[start:start + chunk] as x_new and the caches the call before returned (empty ones "
            "first)")
    attends = [call for call in calls if call["function"] == "attend_with_cache"]
    start, previous = 0, None
    for number, call in enumerate(attends, 1):
        given = [_argument(call, position, name) for position, name in enumerate(("x_new", "K_cache", "V_cache"))]
        tokens = given[0]
        if not isinstance(tokens, np.ndarray) or tokens.ndim != 2 or tokens.shape[1] != x.shape[1]:
            what = "no array" if tokens is None else f"{_described(tokens)}"
            return f"{rule}; call {number} got {what} as x_new"
        rows = tokens.shape[0]
        if not (1 <= rows <= chunk and start + rows <= x.shape[0]
                and np.allclose(tokens, x[start:start + rows], rtol=0, atol=1e-12)):
            return (f"{rule}; call {number} got {rows} token(s) as x_new, not the next piece of at most {chunk} "
                    f"after the {start} token(s) before it (the same numbers computed again from the prefix do not "
                    "show the cache carried)")
        caches = given[1:]
        if previous is None:
            kept = all(isinstance(c, np.ndarray) and c.shape[:1] == (0,) for c in caches)
        else:
            kept = previous is _UNRECORDED or all(
                isinstance(c, np.ndarray) and isinstance(r, np.ndarray) and c.shape == r.shape
                and np.array_equal(c, r, equal_nan=True) for c, r in zip(caches, previous))
        if not kept:
            return (f"{rule}; call {number} got " + ("caches that are not empty" if previous is None else
                    "caches other than those call " + str(number - 1) + " returned") +
                    " (a cache rebuilt each time is not carried)")
        returned = call.get("returned", _UNRECORDED)
        # as arrays, as the next call's arguments are read: caches returned as lists and passed on are carried too
        previous = tuple(np.asarray(r) if isinstance(r, (list, tuple)) else r for r in returned[1:3]) \
            if isinstance(returned, (tuple, list)) and len(returned) == 3 else _UNRECORDED
        start += rows
    if finished and (start < x.shape[0] or len(attends) != pieces):
        return (f"{rule}; it called it {len(attends)} time(s) on {start} of the {x.shape[0]} tokens (the same "
                "numbers computed without attend_with_cache do not show the cache carried)")
    return None


_UNRECORDED = object()  # what a call returned was not recorded (over the probe's byte limit, or it raised)


def _argument(call: dict, position: int, name: str):
    """A call's argument by position, else by keyword (None when absent), as an array when it is array-like."""
    args, kwargs = call["args"], call["kwargs"]
    value = args[position] if len(args) > position else kwargs.get(name)
    return np.asarray(value) if isinstance(value, (list, tuple)) else value


def _described(value) -> str:
    return f"an array of shape {value.shape}" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"


def _decode_case(rng, description: str, T: int, d_model: int, d_head: int, chunk: int | None) -> Case:
    x = rng.normal(size=(T, d_model))
    kwargs = {} if chunk is None else {"chunk": chunk}
    return Case(description, "decode_incrementally", (x, *_weights(rng, d_model, d_head)), kwargs,
                outputs=("the output",), calls_check=decodes_chunk_by_chunk, **SAME)


@STEPS.add("test_decode_incrementally", "decode", _diagnose_decode)
def _decode_cases(seed: int = 5003):
    rng = np.random.default_rng(seed)
    return [
        _decode_case(rng, "T = 9 token by token (chunk omitted) equals full causal attention to 1e-12", 9, 8, 4, None),
        _decode_case(rng, "T = 10 in chunks of 3 (the last one shorter)", 10, 8, 4, 3),
        _decode_case(rng, "T = 8 in chunks of 4 (d_model = 6, d_head = 3)", 8, 6, 3, 4),
        _decode_case(rng, "T = 5 with chunk = 8 > T", 5, 8, 4, 8),
    ]


@STEPS.add("test_attention_cost_per_token", "cost", _diagnose_cost)
def _cost_cases(seed: int | None = None):
    # hand-chosen exact inputs (edge cases): the seed does not change them
    return [
        Case("t = 1, d_model = 64, d_head = 16, with the cache", "attention_cost_per_token", (1, 64, 16, True),
             **EXACT),
        Case("t = 1, d_model = 64, d_head = 16, without the cache", "attention_cost_per_token", (1, 64, 16, False),
             **EXACT),
        Case("t = 100, d_model = 96, d_head = 12, with the cache", "attention_cost_per_token", (100, 96, 12),
             {"cached": True}, **EXACT),
        Case("t = 100, d_model = 96, d_head = 12, without the cache", "attention_cost_per_token", (100, 96, 12),
             {"cached": False}, **EXACT),
        Case("t = 37, d_model = 512, d_head = 64, with the cache", "attention_cost_per_token", (37, 512, 64, True),
             **EXACT),
        Case("t = 37, d_model = 512, d_head = 64, without the cache", "attention_cost_per_token",
             (37, 512, 64, False), **EXACT),
    ]


def _full_causal_attention(x, W_q, W_k, W_v, chunk=1):
    """What decoding must return, whatever the chunk size: full causal self-attention's output (eq. 1)."""
    kv.decode_incrementally(x, W_q, W_k, W_v, chunk=chunk)  # the same argument checks, and ValueErrors
    return reference.causal_self_attention(x, W_q, W_k, W_v)[0]


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    eye2, zero2, eye4 = np.eye(2), np.zeros((2, 2)), np.eye(4)
    empty = np.zeros((0, 2))
    return (
        Case("softmax of [[1, 2, 3], [1, 1, 1]]", "softmax", (np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]),)),
        Case("softmax of [[1000, 1001, 1002]]", "softmax", (np.array([[1000.0, 1001.0, 1002.0]]),)),
        Case("2 zero queries over 3 zero keys, mask [[1, 1, 0], [1, 1, 1]]", "scaled_dot_product_attention",
             (np.zeros((2, 2)), np.zeros((3, 2)), np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])),
             {"mask": np.array([[True, True, False], [True, True, True]])}, outputs=PAIR),
        Case("scores (−2, 7) with key 1 blocked", "scaled_dot_product_attention",
             (np.array([[1.0]]), np.array([[-2.0], [7.0]]), eye2), {"mask": np.array([[True, False]])},
             outputs=PAIR),
        Case("2 new queries over 4 keys", "causal_mask", (2, 4), outputs=("the mask",)),
        Case("1 new query over 3 keys", "causal_mask", (1, 3), outputs=("the mask",)),
        Case("square, T_k omitted (T = 3)", "causal_mask", (3,), outputs=("the mask",)),
        Case("T_q = 3 > T_k = 2", "causal_mask", (3, 2), raises="ValueError"),
        Case("empty cache, x_new = I (2 tokens), W_q = 0 (all scores 0), W_k = W_v = I", "attend_with_cache",
             (eye2, empty, empty, zero2, eye2, eye2), outputs=TRIPLE, **SAME),
        Case("cache K = [[0, 0]], V = [[1, 1]], x_new = I (2 tokens), W_q = 0, W_k = W_v = I", "attend_with_cache",
             (eye2, np.zeros((1, 2)), np.ones((1, 2)), zero2, eye2, eye2), outputs=TRIPLE, **SAME),
        Case("one new token x_new = [[2, 0, 0, 0]] over cache K = [[0, 0, 0, 0]], V = [[0.1, 0, 0, 0]], all W = I",
             "attend_with_cache", (np.array([[2.0, 0, 0, 0]]), np.zeros((1, 4)), np.array([[0.1, 0, 0, 0]]),
                                   eye4, eye4, eye4), outputs=TRIPLE, **SAME),
        Case("x = I (2 tokens), W_q = 0, W_k = W_v = I, chunk omitted", "decode_incrementally",
             (eye2, zero2, eye2, eye2), outputs=("the output",), **SAME),
        Case("x = I (3 tokens), W_q = 0, W_k = W_v = I, chunk = 2", "decode_incrementally",
             (np.eye(3), np.zeros((3, 3)), np.eye(3), np.eye(3)), {"chunk": 2}, outputs=("the output",), **SAME),
        Case("t = 1, d_model = 4, d_head = 2, with the cache", "attention_cost_per_token", (1, 4, 2, True),
             **EXACT),
        Case("t = 3, d_model = 4, d_head = 2, with the cache", "attention_cost_per_token", (3, 4, 2, True),
             **EXACT),
        Case("t = 3, d_model = 4, d_head = 2, without the cache", "attention_cost_per_token", (3, 4, 2, False),
             **EXACT),
    )


ASSIGNMENT = Assignment.in_folder(  # with questions.toml and example_students.toml
    Path(__file__).parent, name=NAME, notebook="kv_cache.ipynb", steps=STEPS,
    correct=CORRECT, mistakes=MISTAKES, worked_cases=_worked_cases(),
    reference={**functions(reference, "softmax scaled_dot_product_attention"),
               **functions(kv, "causal_mask attend_with_cache"), "decode_incrementally": _full_causal_attention,
               **functions(kv, "attention_cost_per_token")},
    more_students={"bea-vstack-and-loops": Variant(
        "correct, written differently: index-comparison mask, np.vstack, a cost summed in a loop",
        {**CORRECT["vstack_and_index_mask"].cells,
         "attention_cost_per_token": CORRECT["loops"].cells["attention_cost_per_token"]})})
