"""Assignment 8 (positions and sharing in modern models: RoPE, ALiBi, grouped-query attention) as data for the grader.

Built from the answer bank (:mod:`autograder.assignments.a08_modern_attention.bank`, see DESIGN.md): its
hidden cases (seeds 8000–8005), its correct rewrites and its known mistakes (edits of the source notebook's
solution). Step 0 grades the functions pasted from assignments 1, 2 and 5 once, so that the grader can stand
in for them wherever a later step calls them. Tolerances: every float result atol 1e-12 and no relative
tolerance (float64 rotations and sums are exact up to rounding, about 1e-15); the slopes rtol 1e-12 (the
authors' code computes them as products, within 2 ulp of the exact powers of two); the cache's bytes exactly.
Four questions (1 point each) and a written answer (0 points, graded by hand) follow, as in assignments 1–7.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a08_modern_attention import bank
from autograder.grader.spec import Assignment, Case, Step

NAME = "08_modern_attention"
SAME = dict(rtol=0.0, atol=1e-12)
PAIR = ("the output", "the weights")


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _arrays(got, expected) -> bool:
    """Whether got has the expected structure: an array of the same shape, or a tuple of such arrays."""
    if isinstance(expected, np.ndarray):
        return isinstance(got, np.ndarray) and got.shape == expected.shape
    return (isinstance(got, (tuple, list)) and len(got) == len(expected)
            and all(_arrays(g, e) for g, e in zip(got, expected)))


def _float32_sized(got: np.ndarray, expected: np.ndarray) -> list[str]:
    difference = float(np.max(np.abs(np.asarray(got, dtype=np.float64) - expected)))
    if 1e-12 < difference < 1e-4:
        return [f"The largest difference is {difference:.1g}: the size of float32 rounding. Keep every array in "
                "float64: the hidden tests ask for 1e-12."]
    return []


def _diagnose_earlier(case: Case, got, expected) -> list[str]:
    if not _arrays(got, expected):
        if case.function == "split_heads" and isinstance(got, np.ndarray):
            return [f"split_heads should return (n_heads, T, d_head) = {expected.shape}; it returned shape "
                    f"{got.shape}."]
        return []
    if case.function == "softmax" and not np.all(np.isfinite(got)):
        return ["Some probabilities are NaN or infinite: does exp overflow for large logits?"]
    if case.function == "scaled_dot_product_attention":
        weights, mask = got[1], case.kwargs.get("mask")
        if mask is not None and np.any(np.abs(weights[..., ~mask]) > 1e-12):
            return ["A blocked key has weight: blocked scores must get weight exactly 0."]
        if np.allclose(weights, expected[1], **SAME):
            return ["The weights are right, so the output is wrong: it should be weights @ V."]
    return []


def _diagnose_rope(case: Case, got, expected) -> list[str]:
    if not _arrays(got, expected):
        if isinstance(got, np.ndarray):
            return [f"apply_rope returns the rotated rows, the shape of x: {expected.shape}; it returned shape "
                    f"{got.shape}."]
        return []
    x = case.args[0]
    pairs = lambda a: np.hypot(a[..., 0::2], a[..., 1::2])  # noqa: E731 — the length of every pair
    if not np.allclose(pairs(got), pairs(x), rtol=0.0, atol=1e-9):
        if np.allclose(np.linalg.norm(got, axis=-1), np.linalg.norm(x, axis=-1), rtol=0.0, atol=1e-9):
            return ["Every row keeps its length, but the pairs (2i, 2i + 1) do not: turn coordinate 2i together "
                    "with 2i + 1."]
        return ["A rotation keeps the length of every pair (x_2i, x_2i+1); yours changes it: the second coordinate "
                "is x_2i sin pθ + x_2i+1 cos pθ."]
    positions = np.broadcast_to(np.asarray(case.args[1]), x.shape[:-1])
    at_zero = positions == 0
    if at_zero.any() and not np.allclose(got[at_zero], x[at_zero], **SAME):
        return ["The rows at position 0 should come back unchanged: position 0 is a turn by 0."]
    return _float32_sized(got, expected)


def _diagnose_rope_attention(case: Case, got, expected) -> list[str]:
    if not _arrays(got, expected):
        return []
    weights = got[1]
    if not np.allclose(weights.sum(axis=-1), 1.0, atol=1e-9):
        return ["The rows of the weights don't sum to 1."]
    if np.allclose(weights, expected[1], **SAME):
        return ["The weights are right, so the output is wrong: it is weights @ V with the values as they are "
                "(RoPE turns only queries and keys)."]
    return _float32_sized(got[0], expected[0])


def _diagnose_rope_cache(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 3 and all(isinstance(g, np.ndarray) for g in got)):
        return []
    T_past = case.args[1].shape[0]
    notes = []
    for name, grown, want in (("key", got[1], expected[1]), ("value", got[2], expected[2])):
        if grown.shape != want.shape:
            notes.append(f"The new {name} cache should have T_past + T_new = {want.shape[0]} rows (the old cache "
                         f"followed by the new tokens'); it has shape {grown.shape}.")
        elif not np.allclose(grown[:T_past], want[:T_past], **SAME):
            notes.append(f"The first T_past rows of the new {name} cache should be the old cache, unchanged (the "
                         "cached keys are rotated already).")
        elif not np.allclose(grown, want, **SAME):
            notes.append(f"The rows appended to the {name} cache are wrong: "
                         + ("the new keys rotated at positions T_past, T_past + 1, …" if name == "key"
                            else "the new values x_new @ W_v, not rotated") + ".")
    if not notes and got[0].shape == expected[0].shape:
        notes = _float32_sized(got[0], expected[0]) or (
            ["The caches are right, so the attention is wrong: the new queries rotated at positions T_past, …, "
             "and the bottom-right causal mask."] if not np.allclose(got[0], expected[0], **SAME) else [])
    return notes


def _diagnose_slopes(case: Case, got, expected) -> list[str]:
    if not isinstance(got, np.ndarray) or got.shape != expected.shape:
        return [f"alibi_slopes({case.args[0]}) should return one slope per head, shape {expected.shape}."] \
            if isinstance(got, np.ndarray) else []
    if np.allclose(np.sort(got), np.sort(expected), rtol=1e-12, atol=0.0):
        return ["These are the right slopes in the wrong order: the slopes of the largest power of two below "
                "n_heads first, steepest first, then the extra ones."]
    if np.any(got <= 0) or np.any(got >= 1):
        return ["Every slope lies strictly between 0 and 1 (2^(−8/n) … 2^(−8))."]
    return []


def _diagnose_alibi(case: Case, got, expected) -> list[str]:
    if not _arrays(got, expected):
        return []
    weights = got[1]
    T_q, T_k = weights.shape[-2:]
    future = np.arange(T_k)[None, :] > np.arange(T_q)[:, None] + (T_k - T_q)
    if np.any(np.abs(weights[..., future]) > 1e-12):
        return ["A query gives weight to a later key: ALiBi's bias comes with the causal mask (bottom-right)."]
    if np.allclose(weights, expected[1], **SAME):
        return ["The weights are right, so the output is wrong: it should be weights @ V."]
    return _float32_sized(got[0], expected[0])


def _diagnose_gqa(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return []
    n_heads = case.args[5]
    if isinstance(got[1], np.ndarray) and got[1].shape != expected[1].shape:
        return [f"The weights should have one (T, T) matrix per query head: shape {expected[1].shape} for "
                f"n_heads = {n_heads}; they have shape {got[1].shape}."]
    if _arrays(got, expected) and np.allclose(got[1], expected[1], **SAME):
        return ["The weights are right, so the combination is wrong: merge the heads (T, n_heads · d_head), then "
                "multiply by W_o."]
    return []


def _diagnose_bytes(case: Case, got, expected) -> list[str]:
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, float, np.integer, np.floating)) \
            or not np.isfinite(got) or expected == 0:
        return []
    ratio = float(got) / expected
    simple = [k for k in range(2, 9) if np.isclose(ratio, k, rtol=1e-9) or np.isclose(ratio, 1 / k, rtol=1e-9)]
    # only a whole factor is named: any other ratio would give the expected number away
    return [f"Your count is off by a factor of {simple[0]} (too {'large' if ratio > 1 else 'small'})."] if simple \
        else [f"Your count is too {'large' if ratio > 1 else 'small'}."]


# ---- steps: the bank's hidden cases -----------------------------------------------------------------

def _cases(grade_id: str):
    def cases(seed: int | None = None) -> list[Case]:
        # hand-built cases from fixed seeds (bank.hidden_cases): another seed gives the same inputs
        return bank.hidden_cases()[grade_id]
    return cases


_DIAGNOSES = {
    "test_from_earlier_assignments": _diagnose_earlier, "test_apply_rope": _diagnose_rope,
    "test_rope_attention": _diagnose_rope_attention, "test_rope_attend_with_cache": _diagnose_rope_cache,
    "test_alibi_slopes": _diagnose_slopes, "test_alibi_attention": _diagnose_alibi,
    "test_grouped_query_attention": _diagnose_gqa, "test_kv_cache_bytes": _diagnose_bytes,
}
STEPS = tuple(Step(grade_id, "earlier" if grade_id == "test_from_earlier_assignments" else title.split(":")[0],
                   _cases(grade_id), _DIAGNOSES[grade_id])
              for grade_id, (title, _) in bank.STEPS.items())

CORRECT = bank.CORRECT
MISTAKES = bank.MISTAKES


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    e0, e1 = np.array([[1.0, 0.0, 0.0, 0.0]]), np.array([[0.0, 1.0, 0.0, 0.0]])
    x2 = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0]])
    rows = np.arange(8.0).reshape(2, 4)
    eye2, eye4, empty = np.eye(2), np.eye(4), np.zeros((0, 2))
    Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    V = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    zeros_h = np.zeros((2, 3, 2))
    x_gqa = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    W_kv = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    W_v2 = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    return (
        Case("softmax of [[1, 2, 3], [1000, 1001, 1002]]", "softmax", (np.array([[1.0, 2.0, 3.0],
                                                                              [1000.0, 1001.0, 1002.0]]),),
             outputs=("the probabilities",)),
        Case("2 zero queries over 3 zero keys, mask [[1, 1, 0], [1, 1, 1]]", "scaled_dot_product_attention",
             (np.zeros((2, 2)), np.zeros((3, 2)), V), {"mask": np.array([[True, True, False], [True, True, True]])},
             outputs=PAIR),
        Case("2 queries over 4 keys", "causal_mask", (2, 4), outputs=("the mask",)),
        Case("square, T_k omitted (T = 3)", "causal_mask", (3,), outputs=("the mask",)),
        Case("split the rows [[0, 1, 2, 3], [4, 5, 6, 7]] into 2 heads", "split_heads", (rows, 2),
             outputs=("the heads",)),
        Case("merge 2 heads of 2 tokens [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]", "merge_heads",
             (np.array([[[0.0, 1.0], [4.0, 5.0]], [[2.0, 3.0], [6.0, 7.0]]]),), outputs=("the merged rows",)),
        Case("e_0 = [1, 0, 0, 0] at position 1 (pair 0 turns by 1 radian, pair 1 by 0.01)", "apply_rope",
             (e0, np.array([1])), outputs=("the rotated rows",), **SAME),
        Case("e_1 = [0, 1, 0, 0] at position 1", "apply_rope", (e1, np.array([1])), outputs=("the rotated rows",),
             **SAME),
        Case("[1, 0, 0, 1] at positions 0 and 100, base 10000", "apply_rope", (x2, np.array([0, 100])),
             outputs=("the rotated rows",), **SAME),
        Case("[1, 0, 0, 1] at positions 0 and 2, base 100", "apply_rope", (x2, np.array([0, 2])), {"base": 100.0},
             outputs=("the rotated rows",), **SAME),
        Case("causal, T = 3, d_k = 2", "rope_attention", (Q, K, V), outputs=PAIR, **SAME),
        Case("no mask, 1 query over 3 keys (the query at position 2)", "rope_attention", (Q[2:], K, V),
             {"causal": False}, outputs=PAIR, **SAME),
        Case("empty cache, x_new = I (2 tokens), W_q = W_k = W_v = I", "rope_attend_with_cache",
             (eye2, empty, empty, eye2, eye2, eye2), outputs=("the output", "the new key cache",
                                                           "the new value cache"), **SAME),
        Case("1 new token [1, 0, 0, 0] over a cache of 1 (K = V = [[1, 0, 0, 0]]), all W = I",
             "rope_attend_with_cache", (e0, e0, e0, eye4, eye4, eye4),
             outputs=("the output", "the new key cache", "the new value cache"), **SAME),
        Case("8 heads", "alibi_slopes", (8,), outputs=("the slopes",), rtol=1e-12, atol=0.0),
        Case("2 heads", "alibi_slopes", (2,), outputs=("the slopes",), rtol=1e-12, atol=0.0),
        Case("6 heads (not a power of two)", "alibi_slopes", (6,), outputs=("the slopes",), rtol=1e-12, atol=0.0),
        Case("2 heads, zero queries and keys (only the bias), T = 3", "alibi_attention",
             (zeros_h, zeros_h[:1], np.broadcast_to(V, (1, 3, 2)).copy()), outputs=PAIR, **SAME),
        Case("2 heads, zero queries, 1 query over 3 keys", "alibi_attention",
             (zeros_h[:, :1], zeros_h[:1], np.broadcast_to(V, (1, 3, 2)).copy()), outputs=PAIR, **SAME),
        Case("2 query heads sharing 1 kv head (multi-query), W_q = W_o = I", "grouped_query_attention",
             (x_gqa, eye4, W_kv, W_kv, eye4, 2, 1), outputs=PAIR, **SAME),
        Case("4 query heads in 2 groups, causal, W_q = W_o = I", "grouped_query_attention",
             (x_gqa, eye4, W_kv, W_v2, eye4, 4, 2), {"mask": np.tril(np.ones((3, 3), dtype=bool))}, outputs=PAIR,
             **SAME),
        Case("3 kv heads for 4 query heads: ValueError", "grouped_query_attention",
             (x_gqa, eye4, np.ones((4, 3)), np.ones((4, 3)), eye4, 4, 3), raises="ValueError"),
        Case("1 token, 1 layer, 1 kv head, d_head = 4, 2 bytes", "kv_cache_bytes", (1, 1, 1, 4, 2),
             rtol=0.0, atol=0.5),
        Case("10 tokens, 2 layers, 2 kv heads, d_head = 4, 2 bytes", "kv_cache_bytes", (10, 2, 2, 4, 2),
             rtol=0.0, atol=0.5),
    )


ASSIGNMENT = Assignment.in_folder(  # with questions.toml and example_students.toml
    Path(__file__).parent, name=NAME, notebook="modern_attention.ipynb", steps=STEPS,
    correct=CORRECT, mistakes=MISTAKES, worked_cases=_worked_cases(), reference=dict(bank.REFERENCE))
