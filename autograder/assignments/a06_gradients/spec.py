"""Assignment 6 (gradients through the softmax and attention) as data for the grader: steps, hidden cases, variants.

Built from the answer bank (:mod:`autograder.assignments.a06_gradients.bank`, see DESIGN.md): its
hidden cases become :class:`~autograder.grader.spec.Case` s, its correct rewrites and its mistakes
(small edits of the solution) become :class:`~autograder.grader.spec.Variant` s. The answer cell of
``attention_backward`` starts with the line that gives ``sum_to_shape`` (:data:`bank.GIVEN`), so every
variant of that cell starts with it too.

``numerical_gradient(f, x, eps)`` takes a function: its hidden and worked cases pass a
:class:`~attention_lab.core.losses.CubicLoss`, which crosses into the learner's kernel as its four
coefficient arrays and is rebuilt there (``attention_lab.core.values``), never as code.

Comparison: ``numpy.allclose`` with rtol = 1e-4, atol = 1e-6 (float32 answers pass); shapes must match.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attention_lab.core.losses import CubicLoss
from autograder.assignments.a06_gradients import bank, diagnoses
from autograder.assignments.a06_gradients import reference as ref
from autograder.grader.draft_rewrites import apply_edit
from autograder.grader.questions import Questions
from autograder.grader.spec import Assignment, Case, Step, Variant, example_students

NAME = "06_gradients"
OUTPUTS = {
    "softmax_jacobian": ("the Jacobian",),
    "softmax_backward": ("the gradient reaching the scores",),
    "attention_backward": ("dQ", "dK", "dV"),
    "numerical_gradient": ("the numerical gradient",),
    "relative_error": ("the relative error",),
}


def _lenient(checked, formula):
    """The reference, or on inputs it refuses (NaN, rows that do not sum to 1) the formula as a learner writes it.

    The grader also answers a later step's calls of an earlier function with the reference (stand-ins). A
    learner's attention_backward may pass its softmax_backward weights with NaN rows (an unguarded fully
    masked row) or unnormalised rows; every correct learner's function computes the formula on them, so the
    stand-in must too (the reference validates its inputs and would raise, and the mistake would not be
    recognised). Hidden cases never hold such inputs, so expected values are the reference's.
    """
    def lenient(*args):
        try:
            return checked(*args)
        except ValueError:
            with np.errstate(all="ignore"):
                return formula(*(np.asarray(a, dtype=float) for a in args))
    lenient.__name__, lenient.__doc__ = checked.__name__, checked.__doc__
    lenient.__wrapped__ = checked  # inspect.signature: the reference's parameter names in messages
    return lenient


SOFTMAX_JACOBIAN = _lenient(ref.softmax_jacobian, lambda p: p[..., :, None] * np.eye(p.shape[-1])
                            - p[..., :, None] * p[..., None, :])
SOFTMAX_BACKWARD = _lenient(ref.softmax_backward, lambda p, g: p * (g - np.sum(g * p, axis=-1, keepdims=True)))


def _with_given(cells: dict[str, str]) -> dict[str, str]:
    """Variant cells as the notebook holds them: the attention_backward cell begins with the given import."""
    return {cell: (bank.GIVEN + source if cell == "attention_backward" else source) for cell, source in cells.items()}


#: hidden cases that no known mistake fails: still run and reported, but worth nothing (Case.weight)
UNSCORED = frozenset({"(3, 4) against (0, 0)"})


def _case(hidden: bank.HiddenCase) -> Case:
    return Case(hidden.description, hidden.function, hidden.args, dict(hidden.kwargs),
                outputs=OUTPUTS[hidden.function], rtol=bank.RTOL, atol=bank.ATOL,
                weight=0.0 if hidden.description in UNSCORED else 1.0)


def _cases(make):
    def cases(seed: int | None = None) -> list[Case]:
        return [_case(hidden) for hidden in (make() if seed is None else make(seed))]
    return cases


#: each step's diagnosis of a wrong result that matches no known mistake (diagnoses.py)
DIAGNOSES = {"softmax_jacobian": diagnoses.jacobian, "softmax_backward": diagnoses.backward,
             "attention_backward": diagnoses.attention, "numerical_gradient": diagnoses.numerical,
             "relative_error": diagnoses.relative}


def _step(function: str) -> Step:
    return Step(f"test_{function}", function.replace("_", " "), _cases(bank.STEPS[function].cases), DIAGNOSES[function])


CORRECT = {name: Variant(rewrite.description, _with_given(dict(rewrite.cells)))
           for name, rewrite in bank.CORRECT.items()}
MISTAKES = {name: Variant(edit.description,
                          _with_given({edit.cell: apply_edit(bank.SOLUTION, edit)[edit.cell]}),
                          frozenset({f"test_{edit.breaks}"}), edit.hint)
            for name, edit in bank.MISTAKES.items()}


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    p_row = np.array([0.7, 0.2, 0.1])
    p_rows = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    g_rows = np.array([[1.0, 0.0, 2.0], [0.5, -1.0, 1.0], [2.0, 1.0, 3.0]])
    Q = np.array([[1.0, 0.0, 2.0, -1.0], [0.5, 1.0, -0.5, 0.0]])
    K = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, -1.0, 1.0, 0.5], [2.0, 0.0, -1.0, 1.0]])
    V = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0]])
    G = np.array([[1.0, -1.0], [0.5, 2.0]])
    X = np.array([[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 1.0, 1.5]])
    causal = np.tril(np.ones((3, 3), dtype=bool))
    holes = np.array([[True, False, True], [False, False, False]])
    loss = CubicLoss(np.array([[1.0, -2.0], [0.5, 0.0]]), np.array([[2.0, 1.0], [0.0, 3.0]]),
                     np.array([[3.0, -1.0], [2.0, 1.0]]), np.array([[1.0, 0.5], [-1.0, 2.0]]))
    x = np.array([[0.5, -1.0], [2.0, 1.0]])
    return (
        Case("p = [0.7, 0.2, 0.1]", "softmax_jacobian", (p_row,), outputs=OUTPUTS["softmax_jacobian"]),
        Case("a batch of two rows, p of shape (2, 3)", "softmax_jacobian", (p_rows[:2],),
             outputs=OUTPUTS["softmax_jacobian"]),
        Case("3 rows of 3 weights, an upstream gradient whose rows do not average to 0", "softmax_backward",
             (p_rows, g_rows), outputs=OUTPUTS["softmax_backward"]),
        Case("cross-attention T_q = 2, T_k = 3, d_k = 4, d_v = 2, scale=True", "attention_backward",
             (Q, K, V, G), outputs=OUTPUTS["attention_backward"]),
        Case("causal self-attention T = 3 (square: a missing transpose keeps the shape)", "attention_backward",
             (X, X[::-1].copy(), V, np.vstack([G, [1.0, 1.0]])), {"mask": causal},
             outputs=OUTPUTS["attention_backward"]),
        Case("a blocked key and a fully masked query row", "attention_backward", (Q, K, V, G), {"mask": holes},
             outputs=OUTPUTS["attention_backward"]),
        Case("scale=3.0: the scores are divided by 3, not by √d_k = 2", "attention_backward", (Q, K, V, G),
             {"scale": 3.0}, outputs=OUTPUTS["attention_backward"]),
        Case("a cubic loss of a (2, 2) array, eps = 0.01", "numerical_gradient", (loss, x), {"eps": 1e-2},
             outputs=OUTPUTS["numerical_gradient"]),
        Case("both gradients zero (a blocked position)", "relative_error", (np.zeros((2, 2)), np.zeros((2, 2))),
             outputs=OUTPUTS["relative_error"]),
        Case("close gradients, one entry 1e-8 against 0", "relative_error",
             (np.array([[1.0, -2.0], [0.5, 0.0]]), np.array([[1.0 + 1e-7, -2.0], [0.5, 1e-8]])),
             outputs=OUTPUTS["relative_error"]),
    )


# ---- questions that check understanding (autograder/grader/questions.py; README, "Adding a question") ------

QUESTIONS = Questions.load(Path(__file__).with_name("questions.toml"))


ASSIGNMENT = Assignment(
    name=NAME,
    notebook="gradients.ipynb",
    reference={
        "softmax_jacobian": SOFTMAX_JACOBIAN,
        "softmax_backward": SOFTMAX_BACKWARD,
        "attention_backward": ref.attention_backward,
        "numerical_gradient": ref.numerical_gradient,
        "relative_error": ref.relative_error,
    },
    steps=tuple(_step(function) for function in bank.STEPS),
    questions=QUESTIONS,
    correct=CORRECT,
    mistakes=MISTAKES,
    worked_cases=_worked_cases(),
    example_students={**example_students(Path(__file__).with_name("example_students.toml"),
                                         {**CORRECT, **MISTAKES, **QUESTIONS.correct, **QUESTIONS.mistakes}),
        "fay-einsum-and-loops": Variant("correct, written differently: einsum everywhere, loops for the differences",
                                       {**CORRECT["einsum"].cells, "numerical_gradient":
                                        CORRECT["loops"].cells["numerical_gradient"]})},
)
