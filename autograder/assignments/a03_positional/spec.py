"""Assignment 3 (sinusoidal positional encoding) as data for the grader: steps, hidden cases, variants.

The hidden cases avoid inputs that hide the encoding's known slips
(``shared/notes/mistakes.md`` M19): d_model ≥ 6 so that the exponents i and 2i
differ, T up to 200 so that slow and fast frequencies both show, offsets
k ∉ {0, ±1}, a random table next to the sinusoidal one so that a
result that ignores t is caught, and permutations that are not their own
inverse and move every position.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a01_attention import reference
from autograder.assignments.a03_positional import reference as positional
from autograder.grader.diagnosis import scale_ratio
from autograder.grader.spec import Assignment, Case, Steps, functions
from autograder.assignments.a03_positional.bank import CORRECT, MISTAKES

NAME = "03_positional_encoding"
PAIR = ("the output", "the weights")
PE_TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}  # float32 angles t·ω at t ≈ 200 are off by ~2e-5


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _same_shape(got, expected) -> bool:
    return isinstance(got, np.ndarray) and isinstance(expected, np.ndarray) and got.shape == expected.shape \
        and got.dtype.kind in "fiu" and bool(np.all(np.isfinite(got)))


def _diagnose_encoding(case, got, expected) -> list[str]:
    if not isinstance(got, np.ndarray):
        return []
    T, d_model = case.args
    if got.shape == (d_model, T) and T != d_model:
        return [f"The result has shape (d_model, T) = {got.shape}: rows are positions, columns dimensions, "
                f"so it should be (T, d_model) = {expected.shape}."]
    if not _same_shape(got, expected):
        return []
    notes = []
    if np.any(np.abs(got) > 1 + 1e-6):
        notes.append("Some entries lie outside [−1, 1]: every entry is a sine or a cosine.")
    first = np.tile([0.0, 1.0], d_model // 2)
    if not np.allclose(got[0], first, atol=1e-4):
        notes.append("Row 0 (position 0) should be (0, 1, 0, 1, …): sin 0 in the even columns, cos 0 in the odd ones.")
    radius = got[:, 0::2] ** 2 + got[:, 1::2] ** 2
    if not np.allclose(radius, 1.0, atol=1e-3):
        notes.append("Columns 2i and 2i + 1 are not a sine and a cosine of the same angle (sin² + cos² ≠ 1): "
                     "both use pair i's frequency.")
    elif not np.allclose(got[:, 0], np.sin(np.arange(T)), atol=1e-4):
        notes.append("Column 0 should be sin(t): the first pair's frequency is 10000⁰ = 1 radian per position.")
    else:
        wrong = [i for i in range(d_model // 2)
                 if not np.allclose(got[:, 2 * i:2 * i + 2], expected[:, 2 * i:2 * i + 2], rtol=1e-4, atol=1e-4)]
        if wrong:
            notes.append(f"Pairs {wrong[:4]}{'…' if len(wrong) > 4 else ''} turn at the wrong speed: pair i's "
                         "frequency is 1 / 10000^(2i/d_model) radians per position.")
    return notes


def _diagnose_offsets(case, got, expected) -> list[str]:
    if not isinstance(got, np.ndarray):
        return []
    pe, t = case.args
    if got.ndim == 1 and got.shape != expected.shape:
        return [f"For t = {t} and T = {pe.shape[0]} there are T − t = {expected.size} offsets "
                f"k = 0 … {expected.size - 1}; the result has {got.size} entries."]
    if not _same_shape(got, expected):
        return []
    ratio = scale_ratio(got, expected, atol=1e-6)
    if ratio is not None:
        return [f"The values are {ratio:.4g} times the expected dot products."]
    if not np.isclose(got[0], pe[t] @ pe[t], rtol=1e-4):
        return ["The first entry (k = 0) should be PE(t)·PE(t), the squared length of position t's encoding."]
    return ["Entry k should be the dot product of row t with row t + k."]


def _diagnose_rotation(case, got, expected) -> list[str]:
    if not _same_shape(got, expected):
        return []
    k, d_model = case.args
    notes = []
    blocks = np.kron(np.eye(d_model // 2), np.ones((2, 2))).astype(bool)
    if np.any(np.abs(got[~blocks]) > 1e-6):
        notes.append("Entries outside the 2×2 diagonal blocks are not 0: each sin/cos pair (2i, 2i + 1) only mixes "
                     "with itself.")
    if not np.allclose(got @ got.T, np.eye(d_model), atol=1e-4):
        notes.append("The matrix is not a rotation (R Rᵀ ≠ I): each block is [[cos a, −sin a], [sin a, cos a]].")
    elif np.allclose(got, expected.T, rtol=1e-4, atol=1e-5):
        notes.append("The matrix is the transpose of R_k: it moves encodings k positions back.")
    elif not notes:
        notes.append("The rotation angles are wrong: pair i turns by k·ω_i, with ω_i = 1 / 10000^(2i/d_model).")
    return notes


def _diagnose_assignment_1(case, got, expected) -> list[str]:
    if case.function == "softmax" and _same_shape(got, expected):
        sums = got.sum(axis=case.kwargs.get("axis", -1))
        if not np.allclose(sums, 1.0, atol=1e-5):
            return [f"The probabilities should sum to 1 along axis {case.kwargs.get('axis', -1)}; their sums range "
                    f"from {sums.min():.4g} to {sums.max():.4g}."]
        return []
    if case.function == "softmax" and isinstance(got, np.ndarray) and not np.all(np.isfinite(got)):
        return ["Some probabilities are NaN or infinite: exp overflows unless you subtract each row's maximum first."]
    if case.function == "scaled_dot_product_attention" and isinstance(got, (tuple, list)) and len(got) == 2 \
            and _same_shape(got[1], expected[1]):
        weights, mask = got[1], case.kwargs.get("mask")
        if not np.allclose(weights.sum(axis=-1), 1.0, atol=1e-5):
            return ["Each row of weights should sum to 1 over the keys."]
        if mask is not None and np.any(np.abs(weights[~np.broadcast_to(mask, weights.shape)]) > 1e-9):
            return ["A blocked key (mask False) has a non-zero weight: blocked scores must be −inf before the softmax."]
        if np.allclose(weights, expected[1], rtol=1e-4, atol=1e-6):
            return ["The weights are right, so the output is wrong: it should be weights @ V."]
    return []


def _diagnose_self_attention(case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and _same_shape(got[1], expected[1])):
        return []
    weights = got[1]
    if not np.allclose(weights.sum(axis=-1), 1.0, atol=1e-5):
        return ["Each row of weights should sum to 1 over all T keys."]
    if np.allclose(np.triu(weights, 1), 0.0) and not np.allclose(np.triu(expected[1], 1), 0.0):
        return ["Every weight above the diagonal is 0, as with a causal mask; this self-attention has no mask."]
    if np.allclose(weights, expected[1], rtol=1e-4, atol=1e-6):
        return ["The weights are right, so the values are wrong: V = x W_v and output = weights @ V."]
    return ["The weights are wrong: Q = x W_q, K = x W_k, scores Q Kᵀ / √d_head, softmax over the keys."]


def _diagnose_add_positions(case, got, expected) -> list[str]:
    (x,) = case.args
    if isinstance(got, np.ndarray) and got.shape != expected.shape:
        return [f"The result should have the shape of x, (T, d_model) = {x.shape}: the encoding is added, "
                "entry by entry."]
    if not _same_shape(got, expected):
        return []
    if np.allclose(got, x):
        return ["The result equals x: the encodings were not added."]
    if not np.allclose(got[0] - x[0], np.tile([0.0, 1.0], x.shape[1] // 2), atol=1e-6):
        return ["Row 0 of the result minus row 0 of x should be PE(0) = (0, 1, 0, 1, …)."]
    return ["The result minus x should be sinusoidal_positional_encoding(T, d_model)."]


def _diagnose_permutation(case, got, expected) -> list[str]:
    if not isinstance(got, (int, float, np.integer, np.floating)):
        return []
    positions = case.kwargs.get("positions", False)
    if not positions and abs(float(got)) > 1e-6:
        return ["Without positions unmasked self-attention is permutation-equivariant, so the gap should be 0 up "
                "to rounding: compare output(x[perm]) with output(x)[perm]."]
    if positions and abs(float(got)) < 1e-9:
        return ["With positions the gap should not be 0: the encodings stay at their positions when the tokens "
                "are shuffled, so the shuffled sequence is a different input."]
    if float(got) < 0:
        return ["The gap is the largest absolute difference, so it cannot be negative."]
    return ["The gap is the largest |output(x[perm]) − output(x)[perm]| over positions and columns."]


# ---- hidden cases, built in the grader from a seed (default: the one the course has always used) -----

STEPS = Steps()  # in notebook order: each builder of hidden cases says which step it grades


@STEPS.add("test_sinusoidal_positional_encoding", "encoding", _diagnose_encoding)
def _encoding_cases(seed: int | None = None):
    # hand-chosen exact inputs (edge cases): the seed does not change them
    name, out = "sinusoidal_positional_encoding", ("the encodings",)
    return [
        Case("T = 10, d_model = 6", name, (10, 6), outputs=out, **PE_TOLERANCE),
        Case("T = 64, d_model = 16", name, (64, 16), outputs=out, **PE_TOLERANCE),
        Case("T = 200, d_model = 64 (fast and slow frequencies)", name, (200, 64), outputs=out, **PE_TOLERANCE),
        Case("odd d_model = 7: ValueError", name, (10, 7), raises="ValueError"),
    ]


@STEPS.add("test_dot_product_by_offset", "offsets", _diagnose_offsets)
def _offset_cases(seed: int = 3_0305):
    rng = np.random.default_rng(seed)
    name, out = "dot_product_by_offset", ("the dot products",)
    return [
        Case("sinusoidal encodings, T = 40, d_model = 16, t = 5", name,
             (positional.sinusoidal_positional_encoding(40, 16), 5), outputs=out, rtol=1e-4, atol=1e-5),
        Case("a random table, T = 12, d = 6, t = 3", name, (rng.normal(size=(12, 6)), 3), outputs=out),
        Case("a random table, T = 9, d = 4, t = 0", name, (rng.normal(size=(9, 4)), 0), outputs=out),
        Case("a random table, T = 7, d = 5, last position t = 6", name, (rng.normal(size=(7, 5)), 6),
             outputs=out),
    ]


@STEPS.add("test_offset_rotation", "rotation", _diagnose_rotation)
def _rotation_cases(seed: int | None = None):
    # hand-chosen exact inputs (edge cases): the seed does not change them
    name, out = "offset_rotation", ("R_k",)
    return [
        Case("k = 3, d_model = 8", name, (3, 8), outputs=out, atol=1e-5),
        Case("k = −5, d_model = 10 (moving back)", name, (-5, 10), outputs=out, atol=1e-5),
        Case("k = 37, d_model = 16", name, (37, 16), outputs=out, atol=1e-5),
        Case("k = 2.5, d_model = 6 (a fractional offset)", name, (2.5, 6), outputs=out, atol=1e-5),
    ]


@STEPS.add("test_from_assignment_1", "assignment_1", _diagnose_assignment_1)
def _assignment_1_cases(seed: int = 3_0101):
    rng = np.random.default_rng(seed)
    causal = np.tril(np.ones((6, 6), dtype=bool))
    return [
        # weight 0: no known mistake of this step fails these three (they show that the functions are there)
        Case("softmax of (4, 7) logits", "softmax", (rng.normal(0, 3.0, (4, 7)),), outputs=("the probabilities",),
             weight=0),
        Case("softmax of large logits (up to 1e4)", "softmax",
             (np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]]),), outputs=("the probabilities",)),
        Case("softmax along axis 0", "softmax", (rng.normal(0, 2.0, (3, 5)),), {"axis": 0},
             outputs=("the probabilities",), weight=0),
        Case("attention without a mask, T_q ≠ T_k, d_v ≠ d_k", "scaled_dot_product_attention",
             (rng.normal(0, 1.5, (4, 6)), rng.normal(0, 1.5, (7, 6)), rng.normal(size=(7, 3))), outputs=PAIR,
             weight=0),
        Case("attention with a causal mask, T = 6", "scaled_dot_product_attention",
             (rng.normal(0, 1.5, (6, 5)), rng.normal(0, 1.5, (6, 5)), rng.normal(size=(6, 4))), {"mask": causal},
             outputs=PAIR),
    ]


def _attention_inputs(rng, T: int, d_model: int, d_head: int):
    """Token rows that differ and three different projections, scaled so the softmax neither saturates nor flattens."""
    x = rng.normal(size=(T, d_model))
    W_q, W_k, W_v = (rng.normal(0, 1.5 / np.sqrt(d_model), (d_model, d_head)) for _ in range(3))
    return x, W_q, W_k, W_v


@STEPS.add("test_self_attention", "self_attn", _diagnose_self_attention)
def _self_attention_cases(seed: int = 3_0505):
    rng = np.random.default_rng(seed)
    return [
        Case("T = 6, d_model = 8, d_head = 4", "self_attention", _attention_inputs(rng, 6, 8, 4), outputs=PAIR),
        Case("T = 9, d_model = 6, d_head = 3", "self_attention", _attention_inputs(rng, 9, 6, 3), outputs=PAIR),
    ]


@STEPS.add("test_add_positions", "positions", _diagnose_add_positions)
def _add_positions_cases(seed: int = 3_0606):
    rng = np.random.default_rng(seed)
    out = ("x + PE",)
    return [
        Case("T = 10, d_model = 6", "add_positions", (rng.normal(size=(10, 6)),), outputs=out),
        Case("T = 4, d_model = 12", "add_positions", (rng.normal(size=(4, 12)),), outputs=out),
    ]


def _shuffle(rng, T: int) -> np.ndarray:
    """A permutation that moves every position and is not its own inverse (so perm and its inverse differ)."""
    while True:
        perm = rng.permutation(T)
        if np.all(perm != np.arange(T)) and not np.array_equal(perm[perm], np.arange(T)):
            return perm


@STEPS.add("test_permutation_gap", "permutation", _diagnose_permutation)
def _permutation_cases(seed: int = 3_0707):
    rng = np.random.default_rng(seed)
    small, large = _attention_inputs(rng, 7, 8, 4), _attention_inputs(rng, 10, 12, 6)
    perm_small, perm_large = _shuffle(rng, 7), _shuffle(rng, 10)
    name, out = "permutation_gap", ("the gap",)
    return [
        Case("T = 7, d_model = 8, without positions", name, (*small, perm_small), {"positions": False}, outputs=out),
        Case("T = 7, d_model = 8, with positions", name, (*small, perm_small), {"positions": True}, outputs=out),
        Case("T = 10, d_model = 12, with positions", name, (*large, perm_large), {"positions": True}, outputs=out),
        Case("T = 10, d_model = 12, without positions", name, (*large, perm_large), {"positions": False},
             outputs=out),
    ]


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    pe_d2 = np.array([[0.0, 1.0], [np.sin(1.0), np.cos(1.0)], [np.sin(2.0), np.cos(2.0)]])
    x3 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    return (
        Case("T = 4, d_model = 4: rows (sin t, cos t, sin(t/100), cos(t/100))", "sinusoidal_positional_encoding",
             (4, 4), outputs=("the encodings",), rtol=1e-5),
        Case("T = 2, d_model = 6", "sinusoidal_positional_encoding", (2, 6), outputs=("the encodings",), rtol=1e-5),
        Case("odd d_model = 5", "sinusoidal_positional_encoding", (3, 5), raises="ValueError"),
        Case("pe = [[1, 0], [2, 1], [1, 3]], t = 1: (5, 5)", "dot_product_by_offset",
             (np.array([[1.0, 0.0], [2.0, 1.0], [1.0, 3.0]]), 1), outputs=("the dot products",)),
        Case("pe = sinusoidal with d_model = 2, T = 3, t = 0: (1, cos 1, cos 2)", "dot_product_by_offset",
             (pe_d2, 0), outputs=("the dot products",)),
        Case("k = 1, d_model = 2: [[cos 1, −sin 1], [sin 1, cos 1]]", "offset_rotation", (1, 2), outputs=("R_k",)),
        Case("k = 2, d_model = 4: angles 2 and 0.02", "offset_rotation", (2, 4), outputs=("R_k",)),
        Case("softmax([1000, 1001, 1002]) = softmax([0, 1, 2])", "softmax", (np.array([[1000.0, 1001.0, 1002.0]]),),
             outputs=("the probabilities",)),
        Case("softmax along axis 0 of [[1, 1], [2, 3]]", "softmax", (np.array([[1.0, 1.0], [2.0, 3.0]]),), {"axis": 0},
             outputs=("the probabilities",)),
        Case("scores (−2, 7) with the second key blocked: weights (1, 0)", "scaled_dot_product_attention",
             (np.array([[1.0]]), np.array([[-2.0], [7.0]]), np.array([[1.0], [0.0]])),
             {"mask": np.array([[True, False]])}, outputs=PAIR),
        Case("all scores 0, causal mask, T = 3: weight rows (1, 0, 0), (½, ½, 0), (⅓, ⅓, ⅓)",
             "scaled_dot_product_attention", (np.zeros((3, 2)), np.zeros((3, 2)), x3),
             {"mask": np.tril(np.ones((3, 3), dtype=bool))}, outputs=PAIR),
        Case("W_q = W_k = 0 (every score 0), W_v = [[1, 0], [0, 2]]: every weight 1/3", "self_attention",
             (x3, np.zeros((2, 2)), np.zeros((2, 2)), np.array([[1.0, 0.0], [0.0, 2.0]])), outputs=PAIR),
        Case("x = [[2, 0], [0, 0]], W_q = W_k = W_v = I: scores [[4, 0], [0, 0]] / √2", "self_attention",
             (np.array([[2.0, 0.0], [0.0, 0.0]]), np.eye(2), np.eye(2), np.eye(2)), outputs=PAIR),
        Case("x = ones((2, 4)): rows (1, 2, 1, 2) and (1 + sin 1, 1 + cos 1, 1 + sin 0.01, 1 + cos 0.01)",
             "add_positions", (np.ones((2, 4)),), outputs=("x + PE",)),
        Case("x = zeros((3, 2)): PE itself, rows (0, 1), (sin 1, cos 1), (sin 2, cos 2)", "add_positions",
             (np.zeros((3, 2)),), outputs=("x + PE",)),
        Case("x = [[1, 0], [0, 1], [1, 1]], W = I, perm = [1, 2, 0], no positions: gap 0", "permutation_gap",
             (x3, np.eye(2), np.eye(2), np.eye(2), np.array([1, 2, 0])), {"positions": False}, outputs=("the gap",)),
        Case("the same with positions", "permutation_gap",
             (x3, np.eye(2), np.eye(2), np.eye(2), np.array([1, 2, 0])), {"positions": True}, outputs=("the gap",)),
    )


ASSIGNMENT = Assignment.in_folder(  # with questions.toml and example_students.toml
    Path(__file__).parent, name=NAME, notebook="positional_encoding.ipynb", steps=STEPS,
    correct=CORRECT, mistakes=MISTAKES, worked_cases=_worked_cases(),
    reference={**functions(positional, "sinusoidal_positional_encoding dot_product_by_offset offset_rotation"),
               **functions(reference, "softmax scaled_dot_product_attention"),
               **functions(positional, "self_attention add_positions permutation_gap")})
