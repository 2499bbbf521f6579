"""Assignment 4 (masks and numerical stability) as data for the grader: steps, hidden cases, variants.

The hidden cases avoid inputs that hide mistakes (``shared/notes/mistakes.md``):
batches whose size B differs from T (a (B, T) mask would broadcast silently
when B = T_q), lengths 0 and T next to lengths in between, fully masked rows
(an empty sequence) next to partial ones, masked scores that are neither 0 nor
all equal, T_q ≠ T_k and d_v ≠ d_k in cross-attention, float32 logits above
88.7 and float16 logits above 11.1 (where ``exp`` overflows without max
subtraction), and float16 rows whose blocked scores lie below −16 (where
``finfo(float16).min`` plus the score overflows to −inf).

Large-logit cases keep every allowed score of a row within a few units of the
row's maximum and no blocked score above it, so that a correct answer never
underflows ``exp`` to 0 on an allowed key and the equivalent "softmax, then
zero the blocked weights and renormalise" answer stays exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a04_masking import reference as ref
from autograder.grader.spec import Assignment, Case, Steps, functions
from autograder.assignments.a04_masking.bank import CORRECT, MISTAKES

NAME = "04_masks_and_stability"
PAIR = ("the output", "the weights")
MASK = ("the mask",)
WEIGHTS = ("the weights",)
FLOAT16 = {"rtol": 5e-3, "atol": 1e-3}  # float16 keeps ~3 decimal digits; every known mistake is off by far more


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _first(flags: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(flags)[0])


def _mask_shape(got: np.ndarray, expected: np.ndarray) -> list[str]:
    B, _, T = expected.shape if expected.ndim == 3 else (expected.shape[0], None, expected.shape[-1])
    if got.shape == (B, T) and expected.shape == (B, 1, T):
        return ["The mask has shape (B, T), which does not broadcast against scores (B, T_q, T): "
                "it needs a query axis of size 1, shape (B, 1, T)."]
    if got.shape == (B, T, 1) and expected.shape == (B, 1, T):
        return ["The mask has shape (B, T, 1): it masks query rows. Padding must block keys (columns): (B, 1, T)."]
    return []


def _masks(case: Case, got, expected) -> list[str]:
    if not isinstance(got, np.ndarray):
        return []
    if got.shape != expected.shape:
        return _mask_shape(got, expected)
    if got.dtype != np.bool_:
        return []
    notes = []
    if np.array_equal(got, ~expected):
        return ["The mask is exactly inverted: True must mean 'may attend' (a real token), False the padding."]
    lengths = np.asarray(case.args[0])
    T = expected.shape[-1]
    padded_key = np.arange(T)[None, None, :] >= lengths[:, None, None]
    if np.any(got & np.broadcast_to(padded_key, got.shape)):
        b, i, j = _first(got & padded_key)
        row = f" for query {i}" if got.shape[-2] > 1 else ""
        notes.append(f"A padded key is allowed: sequence {b} has length {lengths[b]}, yet key {j} is True{row}.")
    if got.shape[-2] == T:
        future = np.triu(np.ones((T, T), dtype=bool), 1)
        if np.any(got & future):
            b, i, j = _first(got & future)
            notes.append(f"A future key is allowed: in sequence {b}, query {i} may attend to key {j} > {i}.")
    missing = expected & ~got
    if np.any(missing):
        b, i, j = _first(missing)
        row = f" for query {i}" if got.shape[-2] > 1 else ""
        notes.append(f"A real key is blocked: in sequence {b} (length {lengths[b]}), key {j} should be allowed{row}.")
    return notes


def _softmax_properties(weights: np.ndarray, mask: np.ndarray, axis: int) -> list[str]:
    """Plain-words failures of masked-softmax weights against their mask (broadcast to their shape)."""
    notes = []
    rows = "rows" if axis % weights.ndim == weights.ndim - 1 else f"slices along axis {axis}"
    if not np.all(np.isfinite(weights)):
        bad = ~np.isfinite(weights)
        empty = ~np.broadcast_to(mask.any(axis=axis, keepdims=True), weights.shape)
        where = f"in {rows} with no allowed key (0/0?)" if np.all(empty[bad]) else "(does exp overflow?)"
        notes.append(f"{int(bad.sum())} weight(s) are NaN or infinite {where}; a correct result is finite.")
        return notes
    empty = ~mask.any(axis=axis)
    sums = weights.sum(axis=axis)
    if np.any(empty) and not np.allclose(sums[empty], 0.0, atol=1e-3):
        uniform = 1.0 / weights.shape[axis]
        if np.allclose(np.take(np.moveaxis(weights, axis, -1)[empty], 0, axis=-1), uniform, atol=1e-3):
            notes.append(f"{rows.capitalize()} with no allowed key are uniform (each weight "
                         f"1/{weights.shape[axis]}); this spec wants them all 0 — a finite fill such as −1e9 gives "
                         "uniform rows.")
        else:
            notes.append(f"{rows.capitalize()} with no allowed key should be all 0.")
    if np.any(~empty) and not np.allclose(sums[~empty], 1.0, atol=1e-3):
        notes.append(f"{rows.capitalize()} with an allowed key should sum to 1; their sums range from "
                     f"{sums[~empty].min():.4g} to {sums[~empty].max():.4g}.")
    leaked = ~mask & (np.abs(weights) > 1e-6)
    if np.any(leaked):
        notes.append(f"A blocked entry has weight {weights[_first(leaked)]:.4g} (index {_first(leaked)}); blocked "
                     "entries must get exactly 0.")
    return notes


def _softmax(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, np.ndarray) and got.shape == expected.shape and got.dtype.kind == "f"):
        return []
    mask = np.broadcast_to(np.asarray(case.args[1], dtype=bool), got.shape)
    return _softmax_properties(got, mask, case.kwargs.get("axis", -1))


def _attention(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(g, np.ndarray) for g in got)):
        return []
    output, weights = got
    if weights.shape == expected[1].shape[:-2] + expected[1].shape[:-3:-1] != expected[1].shape:
        return ["The weights have shape (..., T_k, T_q): rows should be queries and columns keys (Q Kᵀ, not K Qᵀ)."]
    if weights.shape != expected[1].shape or weights.dtype.kind != "f":
        return []
    mask = np.broadcast_to(np.asarray(case.args[3], dtype=bool), weights.shape)
    notes = _softmax_properties(weights, mask, -1)
    empty = ~mask.any(axis=-1)
    if output.shape == expected[0].shape and np.any(empty) and np.all(np.isfinite(output)):
        if not np.allclose(output[empty], 0.0, atol=1e-6):
            notes.append("A query with no allowed key should get a zero output row (its weights are all 0).")
    return notes


# ---- hidden cases, built in the grader from a seed (default: the one the course has always used) -----

STEPS = Steps()  # in notebook order: each builder of hidden cases says which step it grades


@STEPS.add("test_padding_mask", "padding", _masks)
def _padding_cases(seed: int | None = None):
    # hand-chosen exact inputs (edge cases): the seed does not change them
    name = "padding_mask"
    return [
        Case("lengths (5, 2, 0, 7) padded to T = 7 (B ≠ T)", name, (np.array([5, 2, 0, 7]), 7), outputs=MASK),
        Case("lengths (3, 9, 1) padded to T = 9", name, (np.array([3, 9, 1]), 9), outputs=MASK),
        Case("one sequence of length 4 padded to T = 6", name, (np.array([4]), 6), outputs=MASK),
        Case("a length above T raises ValueError", name, (np.array([3, 8]), 5), outputs=MASK, raises="ValueError"),
        Case("a negative length raises ValueError", name, (np.array([2, -1]), 4), outputs=MASK,
             raises="ValueError"),
    ]


@STEPS.add("test_causal_padding_mask", "causal+pad", _masks)
def _causal_padding_cases(seed: int | None = None):
    # hand-chosen exact inputs (edge cases): the seed does not change them
    name = "causal_padding_mask"
    return [
        Case("lengths (6, 3, 0), T = 6", name, (np.array([6, 3, 0]), 6), outputs=MASK),
        Case("lengths (2, 5), T = 5", name, (np.array([2, 5]), 5), outputs=MASK),
        Case("lengths (4, 1, 4, 0, 2), T = 4 (B ≠ T)", name, (np.array([4, 1, 4, 0, 2]), 4), outputs=MASK),
    ]


def _random_mask(rng, shape, p=0.6):
    """A mask with roughly a fraction ``p`` allowed and at least one allowed entry in every row."""
    mask = rng.random(shape) < p
    rows = mask.reshape(-1, shape[-1])
    rows[np.arange(rows.shape[0]), rng.integers(shape[-1], size=rows.shape[0])] = True
    return rows.reshape(shape)


def _near_top(rng, mask, top, spread, dtype):
    """Logits within ``spread`` below ``top`` (one per row), none blocked above the row's largest allowed one.

    So no allowed weight underflows to 0, whichever correct way the weights are computed (see the module doc).
    """
    scores = top - spread * rng.random(mask.shape)
    allowed_top = np.max(np.where(mask, scores, -np.inf), axis=-1, keepdims=True)
    lowered = np.where(mask | (allowed_top == -np.inf), scores, np.minimum(scores, allowed_top - 0.5))
    return lowered.astype(dtype)


@STEPS.add("test_masked_softmax", "masked_softmax", _softmax)
def _softmax_cases(seed: int = 2404):
    rng = np.random.default_rng(seed)
    name = "masked_softmax"
    quiet = {"no_warnings": True, "exact_dtype": True, "outputs": WEIGHTS}  # spec: no warning, dtype kept

    partial = rng.normal(0.0, 3.0, (2, 4, 6))
    causal_pad = rng.normal(0.0, 3.0, (3, 5, 5))
    key_pad = rng.normal(0.0, 3.0, (3, 4, 7))
    heads = rng.normal(0.0, 3.0, (2, 2, 3, 5))
    shared = _random_mask(rng, (3, 5))
    shared[1] = False  # a query with no allowed key, in every batch element and head
    columns = rng.normal(0.0, 3.0, (5, 4))
    column_mask = _random_mask(rng, (4, 5)).T.copy()  # every column has an allowed entry ...
    column_mask[:, 2] = False  # ... except column 2

    big32_mask = _random_mask(rng, (3, 6))
    big32_mask[1] = False
    big32 = _near_top(rng, big32_mask, np.array([[100.0], [95.0], [120.0]]), 12.0, np.float32)

    big16_mask = _random_mask(rng, (5, 5))
    big16_mask[3:] = False
    big16 = _near_top(rng, big16_mask, np.array([[1000.0], [-600.0], [30.0], [0.0], [0.0]]), 6.0, np.float16)
    big16[3] = np.array([-20.0, -23.5, -21.0, -26.0, -22.0], dtype=np.float16)  # all blocked, all below −16
    big16[4] = np.array([3.0, -2.0, 7.0, 0.5, 1.0], dtype=np.float16)  # all blocked, none below −16
    return [
        Case("partially masked rows, float64, shape (2, 4, 6)", name, (partial, _random_mask(rng, (2, 4, 6))),
             **quiet),
        Case("a causal padding mask (B, T, T) with an empty sequence (fully masked rows)", name,
             (causal_pad, ref.causal_padding_mask([5, 2, 0], 5)), **quiet),
        Case("a key padding mask (B, 1, T_k) broadcast over the query rows, one source of length 0", name,
             (key_pad, ref.padding_mask([7, 3, 0], 7)), **quiet),
        Case("a (T_q, T_k) mask shared by batch and head dimensions, one query fully masked", name,
             (heads, shared), **quiet),
        Case("axis=-2 (down each column), one column fully masked", name, (columns, column_mask), {"axis": -2},
             **quiet),
        Case("float32 logits of size 100 (exp overflows above 88.7 in float32), one row fully masked", name,
             (big32, big32_mask), **quiet),
        Case("float16 logits of size 1000 (exp overflows above 11.1 in float16) and two fully masked rows, one of "
             "scores below −16", name, (big16, big16_mask), **quiet, **FLOAT16),
    ]


@STEPS.add("test_masked_attention", "attention", _attention)
def _attention_cases(seed: int = 1609):
    rng = np.random.default_rng(seed)
    name = "masked_attention"
    cross_mask = _random_mask(rng, (3, 5))
    cross_mask[1] = False
    heads_mask = ref.padding_mask([4, 1], 4)[:, None]  # (B, 1, 1, T_k)
    return [
        Case("cross-attention T_q = 3, T_k = 5, d_k = 4, d_v = 2, a (T_q, T_k) mask with a fully masked query", name,
             (rng.normal(0, 1.5, (3, 4)), rng.normal(0, 1.5, (5, 4)), rng.normal(size=(5, 2)), cross_mask),
             outputs=PAIR),
        Case("3 sources of lengths (6, 2, 0), key padding mask (B, 1, T_k), T_q = 4", name,
             (rng.normal(0, 1.5, (3, 4, 8)), rng.normal(0, 1.5, (3, 6, 8)), rng.normal(size=(3, 6, 3)),
              ref.padding_mask([6, 2, 0], 6)), outputs=PAIR),
        Case("decoder self-attention with a causal padding mask (B, T, T), lengths (5, 3)", name,
             (rng.normal(0, 1.5, (2, 5, 6)), rng.normal(0, 1.5, (2, 5, 6)), rng.normal(size=(2, 5, 4)),
              ref.causal_padding_mask([5, 3], 5)), outputs=PAIR),
        Case("heads (B, H, T_q, T_k) = (2, 3, 2, 4) with a mask (B, 1, 1, T_k)", name,
             (rng.normal(0, 1.5, (2, 3, 2, 6)), rng.normal(0, 1.5, (2, 3, 4, 6)), rng.normal(size=(2, 3, 4, 5)),
              heads_mask), outputs=PAIR),
        # scored: a mask transposed to make it fit (the bank's mask_transposed_to_fit) returns here
        Case("a mask of shape (T_k, T_q), the wrong way round, raises ValueError", name,
             (rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)), cross_mask.T.copy()),
             outputs=PAIR, raises="ValueError"),
    ]


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    allowed_first_two = np.array([[True, True, False], [False, False, False]])
    return (
        Case("padding_mask(lengths=[2, 0, 3], T=3)", "padding_mask", (np.array([2, 0, 3]), 3), outputs=MASK),
        Case("padding_mask(lengths=[4, 1], T=3): a length above T", "padding_mask", (np.array([4, 1]), 3),
             outputs=MASK, raises="ValueError"),
        Case("causal_padding_mask(lengths=[2, 3], T=3)", "causal_padding_mask", (np.array([2, 3]), 3), outputs=MASK),
        Case("scores [[0, 0, 5], [1, 2, 3]] with mask [[T, T, F], [F, F, F]]", "masked_softmax",
             (np.array([[0.0, 0.0, 5.0], [1.0, 2.0, 3.0]]), allowed_first_two), outputs=WEIGHTS, no_warnings=True,
             exact_dtype=True),
        Case("float16 scores [[1000, 999, 990], [-20, -30, -40]] with mask [[T, T, F], [F, F, F]]", "masked_softmax",
             (np.array([[1000.0, 999.0, 990.0], [-20.0, -30.0, -40.0]], dtype=np.float16), allowed_first_two),
             outputs=WEIGHTS, no_warnings=True, exact_dtype=True, **FLOAT16),
        Case("scores [[1, 5], [1, 0]] with mask [[T, F], [T, F]] and axis=0", "masked_softmax",
             (np.array([[1.0, 5.0], [1.0, 0.0]]), np.array([[True, False], [True, False]])), {"axis": 0},
             outputs=WEIGHTS, no_warnings=True, exact_dtype=True),
        Case("Q = [[2, 0, 0, 0], [1, 1, 1, 1]], keys (2, 0, 0, 0), (0, 0, 0, 0), (0, 2, 0, 0), "
             "V = [[1, 0], [0, 1], [5, 5]], mask [[T, T, F], [F, F, F]]", "masked_attention",
             (np.array([[2.0, 0, 0, 0], [1.0, 1, 1, 1]]), np.array([[2.0, 0, 0, 0], [0.0, 0, 0, 0], [0.0, 2, 0, 0]]),
              np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]), allowed_first_two), outputs=PAIR),
        Case("the same Q, keys and V with that mask the wrong way round, shape (3, 2): ValueError",
             "masked_attention",
             (np.array([[2.0, 0, 0, 0], [1.0, 1, 1, 1]]), np.array([[2.0, 0, 0, 0], [0.0, 0, 0, 0], [0.0, 2, 0, 0]]),
              np.array([[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]), allowed_first_two.T.copy()), outputs=PAIR,
             raises="ValueError"),
    )


ASSIGNMENT = Assignment.in_folder(  # with questions.toml and example_students.toml
    Path(__file__).parent, name=NAME, notebook="masks_and_stability.ipynb", steps=STEPS,
    correct=CORRECT, mistakes=MISTAKES, worked_cases=_worked_cases(),
    reference=functions(ref, "padding_mask causal_padding_mask masked_softmax masked_attention"))
