"""Assignment 7 (online softmax and tiled attention, FlashAttention in NumPy) as data for the grader.

Built from the answer bank (:mod:`autograder.assignments.a07_tiled_attention.bank`, see DESIGN.md): its
hidden cases (seeds 7001–7004), its correct rewrites and its known mistakes (edits of the source
notebook's solution). Tolerances: online softmax rtol 1e-9, atol 1e-12; tiled attention atol 1e-12 and no
relative tolerance (float64 rescaling is exact up to rounding, about 1e-15); the schedule is an integer
array, compared exactly.

The memory step grades ``tiled_attention`` once more, on causal self-attention at T = 20 000: the case
has its own time budget (``Case.seconds``, 60 s of the kernel's CPU time, ``Case.cpu_time``: a busy grading
machine cannot make a correct answer run out of time) and the sandbox's memory limit (``Case.memory_limit``,
2 GiB), so trusted code runs on it under that limit too and a learner who forms the T × T matrix gets
the MemoryError named as the known mistake ``full_score_matrix``. Its values are graded in step 3:
the step is ``values_graded_earlier``, so a value mistake already named there is not charged again (one
no bank entry names is: see DESIGN.md).
Two questions (1 point each) and a written answer (0 points, graded by hand) follow, as in assignments 1–6.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autograder.assignments.a07_tiled_attention import bank
from autograder.assignments.a07_tiled_attention import reference as ref
from autograder.grader.spec import Assignment, Case, Step

NAME = "07_tiled_attention"
SAME = dict(rtol=0.0, atol=1e-12)
PROBABILITIES = dict(outputs=("the probabilities",), rtol=1e-9, atol=1e-12)


# ---- diagnoses: which property fails, when no known mistake matches --------------------------------

def _diagnose_softmax(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, np.ndarray) and isinstance(expected, np.ndarray)):
        return []
    if got.shape != expected.shape:
        total = expected.shape[-1]
        return [f"The result should have one probability per logit: shape (..., Σ n_b) with Σ n_b = {total}, "
                "the blocks joined along the last axis."]
    if not np.all(np.isfinite(got)):
        return ["Some probabilities are NaN or infinite: is every exponential measured from the running maximum, "
                "and are rows that have seen only -inf shifted by 0?"]
    sums = got.sum(axis=-1)
    if not np.all(np.isclose(sums, 1.0, atol=1e-9) | np.isclose(sums, 0.0, atol=1e-12)):
        return ["The rows don't sum to 1 (or to 0 for a row that is -inf everywhere): every block shares the "
                "row's one maximum m and sum l."]
    return []


def _diagnose_tiled(case: Case, got, expected) -> list[str]:
    if not (isinstance(got, np.ndarray) and isinstance(expected, np.ndarray)) or got.shape != expected.shape:
        if isinstance(got, np.ndarray) and isinstance(expected, np.ndarray):
            return [f"The output should have shape (..., T_q, d_v) = {expected.shape}: one row per query."]
        return []
    if not np.all(np.isfinite(got)):
        return ["Some outputs are NaN or infinite: a tile whose maximum is -inf, or e^(m − m') measured from "
                "something other than the running maximum?"]
    difference = float(np.max(np.abs(got.astype(np.float64) - expected)))
    if 1e-12 < difference < 1e-4:
        return [f"The largest difference is {difference:.1g}: the size of float32 rounding. Tiled attention must "
                "match full attention to 1e-12, so keep every array in float64."]
    return []


# ---- steps: the bank's hidden cases -----------------------------------------------------------------

def _cases(grade_id: str):
    def cases(seed: int | None = None) -> list[Case]:
        # hand-built cases from fixed seeds (bank.hidden_cases): another seed gives the same inputs
        return bank.hidden_cases()[grade_id]
    return cases


_DIAGNOSES = {"test_online_softmax": _diagnose_softmax, "test_tiled_attention": _diagnose_tiled}
STEPS = tuple(Step(grade_id, title.split(":")[0] if grade_id != "test_tiled_attention_memory" else "memory",
                   _cases(grade_id), _DIAGNOSES.get(grade_id),
                   values_graded_earlier=grade_id == "test_tiled_attention_memory")
              for grade_id, (title, _) in bank.STEPS.items())

CORRECT = bank.CORRECT
MISTAKES = bank.MISTAKES


# ---- worked cases: tiny inputs the visible self-checks show (numbers stored in attention_lab) ------

def _worked_cases():
    schedule = ("the schedule",)
    Q = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    K = np.array([[0.0, 1.0], [2.0, 0.0], [1.0, -1.0]])
    V = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    rising = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 30.0]])  # the third key scores highest: the maximum rises
    return (
        Case("one row [1, 2, 3, 4] in blocks [1, 2] and [3, 4]", "online_softmax",
             ([np.array([1.0, 2.0]), np.array([3.0, 4.0])],), **PROBABILITIES),
        Case("one row [1000, 1001, 999] in blocks of 1 (logits far above 709)", "online_softmax",
             ([np.array([1000.0]), np.array([1001.0]), np.array([999.0])],), **PROBABILITIES),
        Case("one row [5, -1, 0] in blocks [5] and [-1, 0]: the maximum comes first", "online_softmax",
             ([np.array([5.0]), np.array([-1.0, 0.0])],), **PROBABILITIES),
        Case("two rows in blocks of 1 and 2: [-inf | 0, 0] and [-inf | -inf, -inf] (a fully -inf row)",
             "online_softmax", ([np.array([[-np.inf], [-np.inf]]), np.array([[0.0, 0.0], [-np.inf, -np.inf]])],),
             no_warnings=True, **PROBABILITIES),
        Case("one row of logits near -800 in blocks [-800, -801] and [-799]", "online_softmax",
             ([np.array([-800.0, -801.0]), np.array([-799.0])],), **PROBABILITIES),
        Case("causal, T = 4 in tiles of 2 × 2", "tile_schedule", (4, 4, 2, 2, True), outputs=schedule),
        Case("causal, T = 5 in tiles of 2 × 3 (both last blocks shorter)", "tile_schedule", (5, 5, 2, 3, True),
             outputs=schedule),
        Case("causal, 2 queries over 5 keys in tiles of 1 × 2 (bottom-right)", "tile_schedule", (2, 5, 1, 2, True),
             outputs=schedule),
        Case("causal, T = 3 in tiles of 1 × 1", "tile_schedule", (3, 3, 1, 1, True), outputs=schedule),
        Case("no mask, 3 × 4 in tiles of 2 × 2", "tile_schedule", (3, 4, 2, 2, False), outputs=schedule),
        Case("causal, 3 queries over 2 keys: ValueError", "tile_schedule", (3, 2, 1, 1, True), raises="ValueError"),
        Case("no mask, T = 3 in tiles of 2 × 2 (ragged), d_k = 2", "tiled_attention", (Q, K, V, 2, 2, False),
             outputs=("the output",), **SAME),
        Case("causal, T = 3 in tiles of 2 × 2", "tiled_attention", (Q, K, V, 2, 2, True), outputs=("the output",),
             **SAME),
        Case("causal, T = 3 in tiles of 1 × 1", "tiled_attention", (Q, K, V, 1, 1, True), outputs=("the output",),
             **SAME),
        Case("no mask, queries that score highest on the last key (the running maximum rises), tiles of 3 × 1",
             "tiled_attention", (Q + 1.0, rising, V, 3, 1, False), outputs=("the output",), **SAME),
        Case("causal, 1 query over 3 keys in tiles of 1 × 2 (it sees every key)", "tiled_attention",
             (Q[2:], K, V, 1, 2, True), outputs=("the output",), **SAME),
    )


ASSIGNMENT = Assignment.in_folder(  # with questions.toml and example_students.toml
    Path(__file__).parent, name=NAME, notebook="tiled_attention.ipynb", steps=STEPS,
    correct=CORRECT, mistakes=MISTAKES, worked_cases=_worked_cases(),
    reference={"online_softmax": ref.online_softmax, "tile_schedule": ref.tile_schedule,
               "tiled_attention": ref.tiled_attention})
