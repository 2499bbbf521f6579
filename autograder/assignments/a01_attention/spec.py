"""Assignment 1 (scaled dot-product attention) as data for the grader: steps, hidden cases, variants.

The hidden cases avoid inputs that hide mistakes (``shared/notes/mistakes.md``):
T_q ≠ T_k, d_v ≠ d_k, d_k not a perfect square of a power that would make ÷d
and ÷√d agree, mixed-sign logits, masks that are not all-True, batch
dimensions, logits large enough to overflow ``exp`` without max subtraction.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a01_attention import reference
from autograder.grader.diagnosis import scale_ratio
from autograder.grader.questions import Questions
from autograder.grader.spec import Assignment, Case, Steps, Variant, example_students, functions
from autograder.assignments.a01_attention.bank import CORRECT, MISTAKES

NAME = "01_scaled_dot_product_attention"
PAIR = ("the output", "the weights")


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _row_sums(weights: np.ndarray, axis: int = -1) -> list[str]:
    if not np.all(np.isfinite(weights)):
        return ["Some values are NaN or infinite: does exp overflow, or is a whole row masked?"]
    sums = weights.sum(axis=axis)
    if np.allclose(sums, 1.0, atol=1e-6):
        return []
    notes = [f"The values along axis {axis} should sum to 1, but their sums range from "
             f"{sums.min():.4g} to {sums.max():.4g}."]
    for other in range(weights.ndim):
        if other != axis % weights.ndim and np.allclose(weights.sum(axis=other), 1.0, atol=1e-6):
            notes.append(f"They sum to 1 along axis {other} instead.")
    return notes


def _scaled(case, got, expected) -> list[str]:
    if isinstance(got, np.ndarray) and isinstance(expected, np.ndarray):
        if got.shape == expected.shape[:-2] + expected.shape[:-3:-1] and got.shape != expected.shape:
            return ["The shape is (T_k, T_q): rows should be queries and columns keys."]
        if got.shape == expected.shape:
            ratio = scale_ratio(got, expected)
            if ratio is not None and not np.isclose(ratio, 1.0, rtol=1e-3):
                d_k = case.args[0].shape[-1]
                return [f"The result is {ratio:.4g} times the correct one (d_k = {d_k})."]
    return []


def _softmax(case, got, expected) -> list[str]:
    if isinstance(got, np.ndarray) and got.shape == expected.shape:
        return _row_sums(got, case.kwargs.get("axis", -1))
    return []


def _weights(case, got, expected) -> list[str]:
    if not (isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[1], np.ndarray)
            and got[1].shape == expected[1].shape):
        return []
    weights = got[1]
    notes = _row_sums(weights)
    mask = case.kwargs.get("mask")
    if case.function == "causal_self_attention":
        mask = np.tril(np.ones(weights.shape[-2:], dtype=bool))
    if mask is not None and np.all(np.isfinite(weights)):
        leaked = np.broadcast_to(~np.asarray(mask, dtype=bool), weights.shape) & (np.abs(weights) > 1e-9)
        if leaked.any():
            first = tuple(int(i) for i in np.argwhere(leaked)[0])
            notes.append(f"A blocked position has weight {weights[first]:.4g} (index {first}): "
                         "masked keys must get weight 0.")
    if case.kwargs.get("scale", True) is not False:
        unscaled = getattr(reference, case.function)(*case.args, **{**case.kwargs, "scale": False})[1]
        if (np.allclose(weights, unscaled, rtol=1e-6, atol=1e-9, equal_nan=True)
                and not np.allclose(unscaled, expected[1], rtol=1e-6, atol=1e-9, equal_nan=True)):
            notes.append("These are the weights of unscaled scores: with scale=True the scores Q Kᵀ must be "
                         "divided by √d_k before the softmax (Vaswani et al. 2017, eq. 1).")
    return notes


def _entropy(case, got, expected) -> list[str]:
    if isinstance(got, np.ndarray) and got.shape == expected.shape:
        ratio = scale_ratio(got, expected)
        if ratio is not None and not np.isclose(ratio, 1.0, rtol=1e-3):
            return [f"The entropies are {ratio:.4g} times the correct ones: entropy here is in nats (natural log)."]
    return []


# ---- hidden cases, built in the grader from a seed (default: the one the course has always used) -----

STEPS = Steps()  # in notebook order: each builder of hidden cases says which step it grades


@STEPS.add("test_softmax", "softmax", _softmax)
def _softmax_cases(seed: int = 1706):
    rng = np.random.default_rng(seed)
    axis_case = rng.normal(0.0, 3.0, size=(4, 3, 5))
    return [
        Case("probabilities along the last axis of a 2-D array", "softmax", (rng.normal(0.0, 3.0, size=(4, 7)),)),
        Case("float32 logits", "softmax", (rng.normal(0.0, 3.0, size=(3, 5)).astype(np.float32),)),
        Case("leading batch dimensions", "softmax", (rng.normal(0.0, 3.0, size=(2, 3, 6)),)),
        Case("softmax(x, axis=0)", "softmax", (axis_case,), {"axis": 0}),
        Case("softmax(x, axis=-2)", "softmax", (axis_case,), {"axis": -2}),
        Case("logits of size 1e3–1e4 stay finite (numerical stability)", "softmax",
             (np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]]),)),
        Case("large random logits stay finite", "softmax", (rng.normal(0.0, 1e3, size=(3, 4)),)),
        Case("float32 logits of size 100 stay finite", "softmax",
             (np.array([[100.0, 0.0, -50.0], [90.0, 95.0, 0.0]], dtype=np.float32),)),
    ]


def _qk(seed):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(5, 8)), rng.normal(size=(7, 8)),
            rng.normal(size=(2, 3, 4, 6)), rng.normal(size=(2, 3, 5, 6)))


@STEPS.add("test_attention_scores", "scores", _scaled)
def _score_cases(seed: int = 2017):
    Q, K, Qb, Kb = _qk(seed)
    return [
        Case("Q Kᵀ with shape (T_q, T_k) when T_q ≠ T_k (scale=False)", "attention_scores", (Q, K), {"scale": False},
             outputs=("the scores",)),
        Case("leading batch dimensions (scale=False)", "attention_scores", (Qb, Kb), {"scale": False},
             outputs=("the scores",)),
    ]


def scaled_like_its_twin(case: Case, got, twin, expected) -> str | None:
    """The scaling step given the learner's own unscaled scores on the same Q and K (its twin in the scores step,
    :attr:`Case.twin`): those divided by √d_k, whatever they are (a mistake in them is charged there). Only real
    scores count: finite numbers, as many as the right scores, not all zero (None, an empty array or zeros
    divide into themselves and would earn the point for nothing)."""
    d_k = case.args[0].shape[-1]
    real = [isinstance(a, np.ndarray) and a.dtype.kind in "fiuc" and a.size == expected.size for a in (got, twin)]
    if not all(real) or not np.all(np.isfinite(twin)) or not np.any(np.abs(twin) > 1e-9):
        return ""  # no scores to scale (None, empty, NaN or zeros): graded as it is, with its own message
    if got.shape != twin.shape:
        return (f"with scale=True the scores have shape {got.shape}, with scale=False {twin.shape}: scaling must "
                "not change the shape")
    with np.errstate(all="ignore"):
        if np.allclose(got.astype(float), twin.astype(float) / np.sqrt(d_k), rtol=case.rtol, atol=case.atol,
                       equal_nan=True):
            return None
        ratios = twin.astype(float) / got.astype(float)
    ratios = ratios[np.isfinite(ratios) & (np.abs(got) > 1e-9)]
    found = f" divided by {np.median(ratios):.4g}" if ratios.size and np.allclose(ratios, np.median(ratios)) else \
        " changed in another way"
    return (f"your scale=True scores are your own scale=False scores{found}; divide them by √d_k = √{d_k} ≈ "
            f"{np.sqrt(d_k):.4g}")


# the scaling step grades the scaling: on the scores step's own Q and K, so that a mistake in the scores, named or
# not, is charged there once and the scaling is graded on the learner's own unscaled scores (Case.twin)
@STEPS.add("test_scaling", "scaling", _scaled, values_graded_earlier=True)
def _scaling_cases(seed: int = 2017):
    Q, K, Qb, Kb = _qk(seed)
    twin = dict(given_twin=scaled_like_its_twin, outputs=("the scores",))
    return [
        Case("default scale=True divides by √d_k (d_k = 8)", "attention_scores", (Q, K),
             twin=("test_attention_scores", 0), **twin),
        Case("scale=True with leading batch dimensions (d_k = 6)", "attention_scores", (Qb, Kb), {"scale": True},
             twin=("test_attention_scores", 1), **twin),
    ]


@STEPS.add("test_causal_mask", "mask")
def _mask_cases(seed: int | None = None):
    # hand-chosen sizes: the seed does not change them. Not T = 1, where a flipped mask is right by accident
    # (the visible self-check tries T = 1).
    return [Case(f"causal_mask({T})", "causal_mask", (T,), outputs=("the mask",)) for T in (4, 7, 2, 12)]


@STEPS.add("test_scaled_dot_product_attention", "attention", _weights)
def _attention_cases(seed: int = 1409):
    rng = np.random.default_rng(seed)

    def some_mask(shape):
        m = rng.random(shape) < 0.55
        m[..., rng.integers(shape[-1])] = True  # every query may attend to at least one key
        return m

    name = "scaled_dot_product_attention"
    return [
        Case("no mask, T_q ≠ T_k, d_v ≠ d_k", name,
             (rng.normal(0, 1.5, (4, 6)), rng.normal(0, 1.5, (7, 6)), rng.normal(size=(7, 3))), outputs=PAIR),
        Case("causal mask, T = 6", name,
             (rng.normal(0, 1.5, (6, 5)), rng.normal(0, 1.5, (6, 5)), rng.normal(size=(6, 4))),
             {"mask": np.tril(np.ones((6, 6), dtype=bool))}, outputs=PAIR),
        Case("a (T_q, T_k) mask broadcast over batch dimensions", name,
             (rng.normal(0, 1.5, (2, 3, 4, 6)), rng.normal(0, 1.5, (2, 3, 5, 6)), rng.normal(size=(2, 3, 5, 2))),
             {"mask": some_mask((4, 5))}, outputs=PAIR),
        Case("a per-batch mask with scale=False", name,
             (rng.normal(size=(2, 4, 8)), rng.normal(size=(2, 6, 8)), rng.normal(size=(2, 6, 3))),
             {"mask": some_mask((2, 4, 6)), "scale": False}, outputs=PAIR),
        Case("scores near 800 (exp of a score overflows: the softmax must not)", name,
             (*large_scores(rng), rng.normal(size=(6, 3))), outputs=PAIR),
    ]


def large_scores(rng) -> tuple[np.ndarray, np.ndarray]:
    """Q (5, 4) and K (6, 4) whose scaled scores are 800 + (a small half-integer): a common first column of 40s,
    the rest in {−1, 0, 1}. Every score and every difference between them is exact in float32 as in float64, so
    float32 attention stays within tolerance, while exp(800) overflows in both (a softmax that does not subtract
    its maximum gives inf / inf = NaN)."""
    Q, K = rng.integers(-1, 2, (5, 4)).astype(float), rng.integers(-1, 2, (6, 4)).astype(float)
    Q[:, 0] = K[:, 0] = 40.0  # 40 · 40 / √4 = 800
    return Q, K


@STEPS.add("test_causal_self_attention", "self_attn", _weights)
def _self_attention_cases(seed: int = 1017):
    rng = np.random.default_rng(seed)
    name = "causal_self_attention"
    return [
        Case("T = 5, d_model = 8, d_head = 4", name,
             (rng.normal(size=(5, 8)), rng.normal(size=(8, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 4))),
             outputs=PAIR),
        Case("T = 7, d_model = 6, d_head = 3, scale=False", name,
             (rng.normal(size=(7, 6)), rng.normal(0, 0.5, (6, 3)), rng.normal(0, 0.5, (6, 3)),
              rng.normal(size=(6, 3))), {"scale": False}, outputs=PAIR),
    ]


@STEPS.add("test_attention_entropy", "entropy", _entropy)
def _entropy_cases(seed: int = 1948):
    rng = np.random.default_rng(seed)
    rows = np.exp(rng.normal(0, 2, (2, 4, 6)))
    causal = np.tril(rng.random((5, 5)) + 0.1)
    name = "attention_entropy"
    return [
        Case("random rows with batch dimensions", name, (rows / rows.sum(-1, keepdims=True),),
             outputs=("the entropies",)),
        Case("causal rows containing exact zeros", name, (causal / causal.sum(-1, keepdims=True),),
             outputs=("the entropies",)),
        Case("one-hot and uniform rows", name, (np.vstack([np.eye(6)[[2, 5]], np.full((2, 6), 1 / 6)]),),
             outputs=("the entropies",)),
    ]


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    zeros = np.zeros((3, 2))
    return (
        Case("softmax of [[0, 0, 0], [1, 2, 3]]", "softmax", (np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]),)),
        Case("softmax of [[1000, 1001, 1002]] (large logits)", "softmax", (np.array([[1000.0, 1001.0, 1002.0]]),)),
        Case("softmax of [[1, 2], [3, 5]] with axis=0", "softmax", (np.array([[1.0, 2.0], [3.0, 5.0]]),), {"axis": 0}),
        Case("scores of Q = [[1, 0], [0, 1], [1, 1]], K = [[1, 2], [3, 4]], scale=False", "attention_scores",
             (np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 4.0]])), {"scale": False},
             outputs=("the scores",)),
        Case("scaled scores of q = (2, 0, 0, 0) with keys (2, 0, 0, 0) and (0, 0, 0, 0) (d_k = 4)",
             "attention_scores", (np.array([[2.0, 0.0, 0.0, 0.0]]), np.array([[2.0, 0.0, 0.0, 0.0], [0.0] * 4])),
             outputs=("the scores",)),
        Case("causal_mask(3)", "causal_mask", (3,), outputs=("the mask",)),
        Case("zero queries and keys, T = 3, causal mask, V = I", "scaled_dot_product_attention",
             (zeros, zeros, np.eye(3)), {"mask": np.tril(np.ones((3, 3), dtype=bool))}, outputs=PAIR),
        Case("scores (−2, 7) where key 1 is blocked for query 0 (d_k = 1)", "scaled_dot_product_attention",
             (np.array([[1.0], [1.0]]), np.array([[-2.0], [7.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])),
             {"mask": np.array([[True, False], [True, True]])}, outputs=PAIR),
        Case("scores 800 and 800.5: q = (40, 1), keys (40, 0) and (40, 1) (d_k = 4 with zeros), V = I",
             "scaled_dot_product_attention", (np.array([[40.0, 1.0, 0.0, 0.0]]),
                                              np.array([[40.0, 0.0, 0.0, 0.0], [40.0, 1.0, 0.0, 0.0]]), np.eye(2)),
             outputs=PAIR),
        Case("x = [[1, 0], [0, 1], [1, 1]] with W_q = W_k = I, W_v = [[1, 2], [3, 4]]", "causal_self_attention",
             (np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.eye(2), np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]])),
             outputs=PAIR),
        Case("entropy of one-hot, half-half and uniform rows over 3 keys", "attention_entropy",
             (np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]]),), outputs=("the entropies",)),
    )


# ---- questions that check understanding (autograder/grader/questions.py; README, "Adding a question") ------

QUESTIONS = Questions.load(Path(__file__).with_name("questions.toml"))


ASSIGNMENT = Assignment(
    name=NAME, notebook="scaled_dot_product_attention.ipynb", steps=STEPS, questions=QUESTIONS,
    correct=CORRECT, mistakes=MISTAKES,
    reference=functions(reference, "softmax attention_scores causal_mask scaled_dot_product_attention "
                                   "causal_self_attention attention_entropy"),
    worked_cases=_worked_cases(),
    example_students={**example_students(Path(__file__).with_name("example_students.toml"),
                                         {**CORRECT, **MISTAKES, **QUESTIONS.correct, **QUESTIONS.mistakes}),
        # earlier functions wrong in ways the bank has no name for: only their own step loses points
        "lea-softmax-unfinished": Variant("softmax left as the release's stub; the entropy ceiling in bits (3); "
                                          "everything else correct",
                                          {"softmax": "def softmax(x, axis=-1):\n    raise NotImplementedError()\n",
                                           **QUESTIONS.mistakes["question_entropy_ceiling_3p0"].cells},
                                          frozenset({"test_softmax", "question_entropy_ceiling"})),
        "max-mask-as-floats": Variant("causal_mask returns 0.0/1.0 floats and attention an extra leading axis", {
            "causal_mask": "def causal_mask(T):\n    return np.tril(np.ones((T, T)))\n",
            "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = attention_scores(Q, K, scale=scale)
    weights = softmax(scores if mask is None else np.where(mask, scores, -np.inf))
    return (weights @ V)[None], weights[None]
'''}, frozenset({"test_causal_mask", "test_scaled_dot_product_attention"}))},
)
