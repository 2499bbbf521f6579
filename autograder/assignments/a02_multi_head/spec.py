"""Assignment 2 (multi-head attention) as data for the grader: steps, hidden cases, variants.

The hidden cases avoid inputs that hide head-wiring mistakes
(``shared/notes/mistakes.md`` M4, M12–M14): n_heads ≥ 2, d_head ≠ d_model,
T ≠ n_heads and T ≠ d_head (so that no wrong reshape or swapped axes can give the right shape), token rows that
differ, projections that are neither symmetric nor equal to each other, and
W_o ≠ I. The assignment-1 functions are tested on 3-D (n_heads, T, d) inputs
with a (T, T) mask shared by the heads, which is how multi-head attention
calls them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a01_attention import reference
from autograder.assignments.a02_multi_head import reference as multi_head
from autograder.grader.diagnosis import scale_ratio
from autograder.grader.spec import Assignment, Case, Steps, functions
from autograder.assignments.a02_multi_head.bank import CORRECT, MISTAKES

NAME = "02_multi_head_attention"
PAIR = ("the output", "the weights")


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _row_sums(weights: np.ndarray) -> list[str]:
    if not np.all(np.isfinite(weights)):
        return ["Some weights are NaN or infinite: does exp overflow, or is a whole row masked?"]
    sums = weights.sum(axis=-1)
    if np.allclose(sums, 1.0, atol=1e-5):
        return []
    notes = [f"Each row of weights should sum to 1, but the row sums range from {sums.min():.4g} to {sums.max():.4g}."]
    if weights.ndim == 3 and np.allclose(weights.sum(axis=0), 1.0, atol=1e-5):
        notes.append("They sum to 1 across the heads instead (axis 0): normalise over the keys, the last axis.")
    return notes


def _leaks(weights: np.ndarray, mask) -> list[str]:
    if mask is None or not np.all(np.isfinite(weights)):
        return []
    leaked = np.broadcast_to(~np.asarray(mask, dtype=bool), weights.shape) & (np.abs(weights) > 1e-9)
    if not leaked.any():
        return []
    first = tuple(int(i) for i in np.argwhere(leaked)[0])
    return [f"A blocked position has weight {weights[first]:.4g} (head, query, key = {first}): "
            "masked keys must get weight 0 in every head."]


def _diagnose_assignment_1(case, got, expected) -> list[str]:
    if case.function == "softmax" and isinstance(got, np.ndarray) and got.shape == expected.shape:
        return _row_sums(got)
    if case.function == "attention_entropy" and isinstance(got, np.ndarray) and got.shape == expected.shape:
        ratio = scale_ratio(got, expected)
        if ratio is not None and not np.isclose(ratio, 1.0, rtol=1e-3):
            return [f"The entropies are {ratio:.4g} times the correct ones: entropy here is in nats (natural log)."]
        return []
    if case.function == "scaled_dot_product_attention" and _pair_with_shapes(got, expected):
        notes = _row_sums(got[1]) + _leaks(got[1], case.kwargs.get("mask"))
        if not notes and np.allclose(got[1], expected[1], rtol=1e-4, atol=1e-6):
            notes.append("The weights are right, so the output is wrong: it should be weights @ V, head by head.")
        return notes
    return []


def _pair_with_shapes(got, expected) -> bool:
    return (isinstance(got, (tuple, list)) and len(got) == 2
            and all(isinstance(g, np.ndarray) and g.shape == e.shape for g, e in zip(got, expected)))


def _token_sources(got: np.ndarray, X: np.ndarray) -> list[str]:
    """Which tokens' features a head's row holds, for inputs whose entries are all different."""
    notes = []
    n_heads, T, d_head = got.shape
    for h in range(n_heads):
        for t in range(T):
            tokens = sorted({int(i) for value in got[h, t] for i in np.argwhere(np.isclose(X, value))[:, 0]})
            if tokens != [t]:
                notes.append(f"Head {h}, row {t} holds features of token(s) {tokens}: within a head, row t must be "
                             f"a slice of token t's features only (tokens must not mix).")
                return notes
    return notes


def _diagnose_split(case, got, expected) -> list[str]:
    if not (isinstance(got, np.ndarray) and isinstance(expected, np.ndarray)):
        return []
    X, n_heads = case.args
    T, d_model = X.shape
    if got.shape != expected.shape:
        return [f"For X of shape (T, d_model) = {X.shape} and n_heads = {n_heads} the result should have shape "
                f"(n_heads, T, d_head) = {expected.shape}, with d_head = d_model / n_heads = {d_model // n_heads}."]
    if np.allclose(got, expected[::-1]):
        return ["The heads are in reverse order: head 0 takes the first d_head features of each token."]
    if len(np.unique(X)) == X.size:
        notes = _token_sources(got, X)
        if notes:
            return notes
        if np.allclose(np.sort(got, axis=None), np.sort(X, axis=None)):
            return ["Every row holds features of the right token, but not the right block: head h takes the "
                    "contiguous features h·d_head … (h+1)·d_head − 1, in their order."]
    return []


def _diagnose_merge(case, got, expected) -> list[str]:
    if not (isinstance(got, np.ndarray) and isinstance(expected, np.ndarray)):
        return []
    (H,) = case.args
    n_heads, T, d_head = H.shape
    if got.shape != expected.shape:
        return [f"For H of shape (n_heads, T, d_head) = {H.shape} the result should have shape "
                f"(T, n_heads·d_head) = {expected.shape}."]
    if len(np.unique(H)) == H.size:
        for t in range(T):
            tokens = sorted({int(i) for value in got[t] for i in np.argwhere(np.isclose(H, value))[:, 1]})
            if tokens != [t]:
                return [f"Row {t} holds features of token(s) {tokens}: each row of the result must hold only "
                        f"token {t}'s vectors from every head."]
        return ["Each row holds the right token's features, but not in order: head 0's d_head features first, "
                "then head 1's, …"]
    return []


def _diagnose_multi_head(case, got, expected) -> list[str]:
    if not _pair_with_shapes(got, expected):
        if isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], np.ndarray) \
                and got[1].shape == expected[1].shape[1:]:
            return ["The weights have shape (T, T); return every head's weights, shape (n_heads, T, T)."]
        return []
    output, weights = got
    notes = _row_sums(weights) + _leaks(weights, case.kwargs.get("mask"))
    if notes:
        return notes
    if np.allclose(weights, expected[1], rtol=1e-4, atol=1e-6):
        return ["The weights of every head are right, so the mistake is after the softmax: in the values, "
                "merging the heads, or the output projection W_o."]
    right_heads = [h for h in range(weights.shape[0]) if np.allclose(weights[h], expected[1][h], rtol=1e-4, atol=1e-6)]
    if right_heads:
        return [f"Only head(s) {right_heads} have the right weights: check which features each head's queries and "
                "keys come from."]
    return ["The weights of every head are wrong: check the projections, the split into heads and the scaling "
            "(by √d_head)."]


# ---- hidden cases, built in the grader from a seed (default: the one the course has always used) -----

def _causal(T: int) -> np.ndarray:
    return np.tril(np.ones((T, T), dtype=bool))


STEPS = Steps()  # in notebook order: each builder of hidden cases says which step it grades


@STEPS.add("test_from_assignment_1", "assignment_1", _diagnose_assignment_1)
def _assignment_1_cases(seed: int = 2302):
    rng = np.random.default_rng(seed)
    raw = np.tril(rng.random((3, 5, 5)) + 0.05)
    return [
        Case("softmax of (n_heads, T, T) scores along the keys", "softmax", (rng.normal(0, 2.0, (3, 4, 6)),)),
        Case("attention for 2 heads, T_q ≠ T_k, no mask", "scaled_dot_product_attention",
             (rng.normal(0, 1.5, (2, 4, 6)), rng.normal(0, 1.5, (2, 7, 6)), rng.normal(size=(2, 7, 3))),
             outputs=PAIR),
        Case("attention for 3 heads with one causal (T, T) mask for all heads", "scaled_dot_product_attention",
             (rng.normal(0, 1.5, (3, 5, 4)), rng.normal(0, 1.5, (3, 5, 4)), rng.normal(size=(3, 5, 2))),
             {"mask": _causal(5)}, outputs=PAIR),
        Case("entropy of (n_heads, T, T) causal weights with exact zeros", "attention_entropy",
             (raw / raw.sum(-1, keepdims=True),), outputs=("the entropies",)),
    ]


def _distinct_rows(rng, T, d_model) -> np.ndarray:
    """Token rows whose entries are all different, so a diagnosis can tell which token a value came from."""
    return rng.permutation(T * d_model).reshape(T, d_model) / 10.0 - rng.normal(0, 0.01, (T, d_model))


@STEPS.add("test_split_heads", "split", _diagnose_split)
def _split_cases(seed: int = 3220):
    rng = np.random.default_rng(seed)
    return [
        Case("T = 5, d_model = 8, n_heads = 2", "split_heads", (_distinct_rows(rng, 5, 8), 2),
             outputs=("the heads",)),
        Case("T = 6, d_model = 12, n_heads = 3", "split_heads", (_distinct_rows(rng, 6, 12), 3),
             outputs=("the heads",)),
        Case("T = 3, d_model = 16, n_heads = 4, float32", "split_heads",
             (_distinct_rows(rng, 3, 16).astype(np.float32), 4), outputs=("the heads",)),
        Case("n_heads = 4 does not divide d_model = 10: ValueError", "split_heads", (rng.normal(size=(3, 10)), 4),
             raises="ValueError"),
    ]


@STEPS.add("test_merge_heads", "merge", _diagnose_merge)
def _merge_cases(seed: int = 2203):
    rng = np.random.default_rng(seed)
    return [
        Case("2 heads, T = 5, d_head = 3", "merge_heads", (_distinct_rows(rng, 10, 3).reshape(2, 5, 3),),
             outputs=("the merged array",)),
        Case("3 heads, T = 4, d_head = 2", "merge_heads", (_distinct_rows(rng, 12, 2).reshape(3, 4, 2),),
             outputs=("the merged array",)),
        Case("4 heads, T = 2, d_head = 5", "merge_heads", (_distinct_rows(rng, 8, 5).reshape(4, 2, 5),),
             outputs=("the merged array",)),
    ]


def _mha_inputs(rng, T: int, d_model: int):
    """x with distinct token rows and four different, non-symmetric projections (none is I)."""
    x = rng.normal(size=(T, d_model))
    # 1.5/√d_model keeps q and k entries at a few units, so that the scaling matters but nothing saturates.
    W_q, W_k, W_v, W_o = (rng.normal(0, 1.5 / np.sqrt(d_model), (d_model, d_model)) for _ in range(4))
    return x, W_q, W_k, W_v, W_o


@STEPS.add("test_multi_head_attention", "multi_head", _diagnose_multi_head)
def _multi_head_cases(seed: int = 1706_0322):
    rng = np.random.default_rng(seed)
    name = "multi_head_attention"
    T_mask = 7
    other_mask = rng.random((T_mask, T_mask)) < 0.6
    other_mask[np.arange(T_mask), rng.integers(T_mask, size=T_mask)] = True  # every query may attend somewhere
    return [
        Case("T = 5, d_model = 12, n_heads = 3, no mask", name, (*_mha_inputs(rng, 5, 12), 3), outputs=PAIR),
        Case("T = 6, d_model = 8, n_heads = 2, causal mask", name, (*_mha_inputs(rng, 6, 8), 2),
             {"mask": _causal(6)}, outputs=PAIR),
        Case("T = 5, d_model = 16, n_heads = 4, causal mask", name, (*_mha_inputs(rng, 5, 16), 4),
             {"mask": _causal(5)}, outputs=PAIR),
        Case("T = 7, d_model = 6, n_heads = 2, a (T, T) mask that is not causal", name,
             (*_mha_inputs(rng, T_mask, 6), 2), {"mask": other_mask}, outputs=PAIR),
    ]


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    mix = np.array([[1.0, 1.0], [0.0, 1.0]])  # output = (head 0, head 0 + head 1)
    x4 = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]])
    return (
        Case("softmax of two heads' scores [[[0, 0]], [[1, 3]]]", "softmax", (np.array([[[0.0, 0.0]], [[1.0, 3.0]]]),)),
        Case("two heads, zero queries and keys, T = 2, causal mask, V = I", "scaled_dot_product_attention",
             (np.zeros((2, 2, 3)), np.zeros((2, 2, 3)), np.stack([np.eye(2), 2 * np.eye(2)])),
             {"mask": _causal(2)}, outputs=PAIR),
        Case("entropy of two heads: one-hot and half-half rows", "attention_entropy",
             (np.array([[[1.0, 0.0], [0.5, 0.5]], [[0.5, 0.5], [0.0, 1.0]]]),), outputs=("the entropies",)),
        Case("X = [[0, 1, 2, 3], [4, 5, 6, 7]], n_heads = 2", "split_heads",
             (np.arange(8.0).reshape(2, 4), 2), outputs=("the heads",)),
        Case("X = [[0, 1, …, 5], [6, …, 11]], n_heads = 3", "split_heads",
             (np.arange(12.0).reshape(2, 6), 3), outputs=("the heads",)),
        Case("n_heads = 4 does not divide d_model = 6", "split_heads", (np.arange(12.0).reshape(2, 6), 4),
             raises="ValueError"),
        Case("H = [[[0, 1], [4, 5]], [[2, 3], [6, 7]]] (2 heads, T = 2, d_head = 2)", "merge_heads",
             (np.array([[[0.0, 1.0], [4.0, 5.0]], [[2.0, 3.0], [6.0, 7.0]]]),), outputs=("the merged array",)),
        Case("3 heads, T = 2, d_head = 1", "merge_heads", (np.array([[[1.0], [2.0]], [[3.0], [4.0]], [[5.0], [6.0]]]),),
             outputs=("the merged array",)),
        Case("d_model = 2, 2 heads of size 1, x = [[2, 0], [0, 1]], W_q = W_k = W_v = I, W_o = [[1, 1], [0, 1]]",
             "multi_head_attention", (np.array([[2.0, 0.0], [0.0, 1.0]]), np.eye(2), np.eye(2), np.eye(2), mix, 2),
             outputs=PAIR),
        Case("W_q = 0 (all scores 0), causal mask, T = 3, d_model = 4, 2 heads, W_v = I, W_o = 2·I",
             "multi_head_attention", (x4, np.zeros((4, 4)), np.eye(4)[::-1], np.eye(4), 2 * np.eye(4), 2),
             {"mask": _causal(3)}, outputs=PAIR),
        Case("W_q = W_k = 0 (uniform weights), x = [[1, 0], [0, 1], [1, 0], [0, 1]], W_v = [[1, 2], [3, 4]], "
             "2 heads of size 1, W_o = I", "multi_head_attention",
             (np.tile(np.eye(2), (2, 1)), np.zeros((2, 2)), np.zeros((2, 2)), np.array([[1.0, 2.0], [3.0, 4.0]]),
              np.eye(2), 2), outputs=PAIR),
    )


ASSIGNMENT = Assignment.in_folder(  # with questions.toml and example_students.toml
    Path(__file__).parent, name=NAME, notebook="multi_head_attention.ipynb", steps=STEPS,
    correct=CORRECT, mistakes=MISTAKES, worked_cases=_worked_cases(),
    reference={**functions(reference, "softmax scaled_dot_product_attention attention_entropy"),
               **functions(multi_head, "split_heads merge_heads multi_head_attention")})
