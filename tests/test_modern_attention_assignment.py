"""Assignment 8 as a graded assignment: what is particular to it (the generic tests cover the rest).

* step 0 grades the functions pasted from assignments 1, 2 and 5 once: a mistake there costs that point and
  nothing else (the grader stands in for the pasted function in the later steps that call it), while the later
  steps' own mistakes are charged in their step only;
* the rotate_half convention is named with a hint that says it is a convention;
* a wrong answer that matches no known mistake gets the property that fails, in words (the spec's diagnoses);
* what the notebook says (steps, points, the explore cells on the learner's own functions) is what the spec
  grades, and the explorers draw the relative-position pattern and the cache's bytes from the solution.
"""

from __future__ import annotations


import numpy as np
import pytest

from answer_bank_checks import assert_table_matches_steps
from autograder import assignments
from autograder.assignments.a08_modern_attention import bank
from autograder.grader.bank import run_cells
from autograder.grader.in_process import grade_variant
from autograder.grader.spec import Variant
from autograder.nbgrader.notebook_cells import read
from conftest import REPO

A8 = assignments.get("08_modern_attention")
EARLIER = "test_from_earlier_assignments"
NOTEBOOK = REPO / "source" / A8.name / A8.notebook


def _lost(results) -> dict[str, float]:
    return {grade_id: r.points - r.score for grade_id, r in results.items() if r.score < r.points}


@pytest.mark.parametrize("name", ["split_without_transpose", "merge_without_transpose", "earlier_mask_top_left",
                                  "mask_with_zero"])
def test_a_mistake_in_a_pasted_function_costs_step_0s_point_only(name):
    """GQA calls split_heads and merge_heads, every RoPE step and ALiBi the mask and attention: stood in for."""
    results = grade_variant(A8, A8.mistakes[name])
    assert set(_lost(results)) == {EARLIER}  # partial credit: one case of seven, the other functions are right
    assert results[EARLIER].named == [name]


def test_the_pasted_functions_are_graded_in_step_0_and_stood_in_for_later():
    grader_steps = [step.grade_id for step in A8.steps]
    assert grader_steps[0] == EARLIER
    functions = {case.function for case in A8.step(EARLIER).cases()}
    assert functions == {"softmax", "scaled_dot_product_attention", "causal_mask", "split_heads", "merge_heads"}
    assert functions <= set(A8.reference)


def test_rotate_half_is_named_as_a_convention():
    results = grade_variant(A8, A8.mistakes["rotate_half_pairing"])
    assert set(_lost(results)) == {"test_apply_rope"} and results["test_apply_rope"].score == 0
    text = " ".join(results["test_apply_rope"].text().split())
    assert results["test_apply_rope"].named == ["rotate_half_pairing"]
    assert "the same rotation after permuting the coordinates" in text


def _variant(function: str, source: str, description: str) -> Variant:
    return Variant(description, {function: source}, frozenset({f"test_{function}"}))


def test_an_unknown_pairing_is_told_that_pairs_must_stay_together():
    # pairs (i, d − 1 − i): every row keeps its length, but not the pairs (2i, 2i + 1)
    source = bank.SOLUTION["apply_rope"].replace(
        "even, odd = x[..., 0::2], x[..., 1::2]", "even, odd = x[..., : d // 2], x[..., : d // 2 - 1 : -1]"
    ).replace("out[..., 0::2] = even", "out[..., : d // 2] = even").replace(
        "out[..., 1::2] = even", "out[..., : d // 2 - 1 : -1] = even")
    results = grade_variant(A8, _variant("apply_rope", source, "pairs (i, d − 1 − i)"))
    feedback = results["test_apply_rope"]
    assert feedback.score < feedback.points and feedback.named == []
    assert "Every row keeps its length, but the pairs (2i, 2i + 1) do not" in " ".join(feedback.text().split())


def test_a_cache_count_off_by_a_whole_factor_says_so():
    source = bank.SOLUTION["kv_cache_bytes"].replace("return 2 * T", "return 4 * 2 * T")
    feedback = grade_variant(A8, _variant("kv_cache_bytes", source, "× 4"))["test_kv_cache_bytes"]
    assert feedback.score == 0 and feedback.named == []
    assert "off by a factor of 4 (too large)" in feedback.text()


def test_gqa_weights_of_the_wrong_shape_are_described():
    source = bank.SOLUTION["grouped_query_attention"].replace(
        "return merge_heads(heads) @ W_o, weights", "return merge_heads(heads) @ W_o, weights.mean(axis=0)")
    feedback = grade_variant(A8, _variant("grouped_query_attention", source, "weights averaged"))[
        "test_grouped_query_attention"]
    assert feedback.named == [] and feedback.score < feedback.points
    assert "one (T, T) matrix per query head" in feedback.text()


def test_the_notebooks_table_and_cells_say_what_the_spec_grades():
    nb = read(NOTEBOOK)
    assert_table_matches_steps(nb, bank.STEPS)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    assert "explore_rope(apply_rope)" in "\n".join(sources)
    assert "explore_cache_memory(kv_cache_bytes)" in "\n".join(sources)


def test_the_explorers_draw_the_solutions_pattern_and_bytes():
    from attention_lab.a08_modern_attention import visual

    solution = run_cells(bank.SOLUTION)
    view = visual.compute_rope_view(solution["apply_rope"], visual.RopeSettings(T=24, d_head=8, base=10000.0,
                                                                                shift=100, pair=0,
                                                                                rotate_half=False))
    assert view.toeplitz_spread < 1e-9 and view.shift_change < 1e-9 and view.asymmetry > 1e-3
    memory = visual.compute_memory_view(solution["kv_cache_bytes"], visual.MemorySettings(
        T=4096, n_layers=32, n_heads=32, d_head=128, bytes_per_value=2))
    np.testing.assert_array_equal(memory.n_kv_heads, [1, 2, 4, 8, 16, 32])
    np.testing.assert_array_equal(memory.per_token, 2 * 32 * memory.n_kv_heads * 128 * 2)
    np.testing.assert_array_equal(memory.at_T, 4096 * memory.per_token)
