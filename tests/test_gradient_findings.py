"""The √d_k experiment of assignment 6: its numbers, and every sentence written about them.

Each sentence of :data:`autograder.assignments.a06_gradients.findings.FINDINGS` is checked
against freshly computed curves for two seeds and three values of T, and
each predicate is shown to be falsifiable (it fails on curves whose scalings
are swapped, or whose d_head axis is reversed), so a sentence that stopped
saying anything would be caught too.
"""

import dataclasses
import itertools
import math

import numpy as np
import pytest

from autograder.assignments.a01_attention import reference
from autograder.assignments.a06_gradients import experiment
from autograder.assignments.a06_gradients.experiment import (
    D_HEADS,
    SCALINGS,
    GradientCurves,
    assignment1_fact3_entropies,
    gradient_curves,
    jacobian_gain,
    row_jacobian,
)
from autograder.assignments.a06_gradients.findings import FINDINGS, false_findings
from autograder.assignments.a06_gradients.reference import softmax_jacobian

SEEDS = (0, 1)
TS = (16, 32, 64)


@pytest.fixture(scope="module")
def curves():
    return {(T, seed): gradient_curves(T=T, seed=seed) for T in TS for seed in SEEDS}


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_every_sentence_holds_for_two_seeds_and_several_T(finding, curves):
    for (T, seed), computed in curves.items():
        assert finding.holds(computed), f"{finding.name} is false at T = {T}, seed = {seed}: {finding.sentence}"


def _relabel(c: GradientCurves, order: dict) -> GradientCurves:
    fields = ("gain", "score_gradient", "query_gradient", "entropy", "max_weight", "score_std")
    return dataclasses.replace(c, **{f: {key: getattr(c, f)[order[key]] for key in SCALINGS} for f in fields})


def _reversed_d(c: GradientCurves) -> GradientCurves:
    fields = ("gain", "score_gradient", "query_gradient", "entropy", "max_weight", "score_std")
    return dataclasses.replace(c, **{f: {key: getattr(c, f)[key][::-1] for key in SCALINGS} for f in fields})


@pytest.mark.parametrize("finding", FINDINGS, ids=lambda f: f.name)
def test_every_sentence_can_fail(finding, curves):
    c = curves[(32, 0)]
    keys = list(SCALINGS)
    altered = [_relabel(c, dict(zip(keys, perm))) for perm in itertools.permutations(keys) if list(perm) != keys]
    altered.append(_reversed_d(c))
    assert any(not finding.holds(a) for a in altered), f"{finding.name} holds whatever the curves say"


def test_curves_are_deterministic_and_one_d_head_does_not_depend_on_the_others():
    a = gradient_curves(T=16, seed=3)
    b = gradient_curves(T=16, seed=3)
    np.testing.assert_array_equal(a.gain["sqrt"], b.gain["sqrt"])
    single = gradient_curves(T=16, d_heads=(64,), seed=3)
    assert single.gain["none"][0] == a.gain["none"][a.at(64)]
    other = gradient_curves(T=16, seed=4)
    assert not np.array_equal(a.gain["sqrt"], other.gain["sqrt"])


def test_curves_have_the_documented_shapes_and_ranges():
    c = gradient_curves(T=16)
    assert c.d_heads.tolist() == list(D_HEADS) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    for key in SCALINGS:
        assert c.gain[key].shape == (10,)
        assert np.all(c.gain[key] >= 0) and np.all(c.gain[key] <= 0.5)            # ‖J‖₂ ≤ ½ for any row
        assert np.all(c.entropy[key] <= c.ceiling + 1e-12) and np.all(c.entropy[key] >= 0)
        assert np.all(c.max_weight[key] >= 1 / 16) and np.all(c.max_weight[key] <= 1)
    assert c.uniform_gain == 1 / 16 and math.isclose(c.ceiling, math.log(16))
    assert abs(c.uniform_score_gradient - math.sqrt(15) / 16) < 0.03                # E‖(I − 11ᵀ/T) g‖ / T


def test_reduced_draws_have_the_distribution_of_direct_draws():
    # the reduced method replaces K by the exact distribution of K q and ‖Kᵀ v‖; with many rows the
    # medians of both methods agree within sampling error (about 3 % at 3000 rows)
    d_heads = (1, 8, 64)
    reduced = gradient_curves(T=16, d_heads=d_heads, n_rows=3000, seed=5, method="reduced")
    direct = gradient_curves(T=16, d_heads=d_heads, n_rows=3000, seed=5, method="direct")
    for key in SCALINGS:
        for field in ("gain", "score_gradient", "query_gradient", "max_weight"):
            np.testing.assert_allclose(getattr(reduced, field)[key], getattr(direct, field)[key], rtol=0.08,
                                       err_msg=f"{field} {key}")
        np.testing.assert_allclose(reduced.entropy[key], direct.entropy[key], rtol=0.03)


def test_direct_method_is_the_literal_computation():
    # one row by hand: scores q·k_j / c, p = softmax, dq = Kᵀ (J g) / c, through the reference Jacobian
    d_head, T = 8, 5
    rows = experiment.draw_rows(d_head, T, n_rows=2, seed=0, method="direct")
    rng = np.random.default_rng([0, d_head, T])
    q, K, g = rng.standard_normal((2, d_head)), rng.standard_normal((2, T, d_head)), rng.standard_normal((2, T))
    np.testing.assert_allclose(rows.raw_scores[1], K[1] @ q[1], rtol=1e-14)
    c = math.sqrt(d_head)
    p = reference.softmax(K[1] @ q[1] / c)
    dq = K[1].T @ (softmax_jacobian(p) @ g[1]) / c
    curves = gradient_curves(T=T, d_heads=(d_head,), n_rows=1, seed=0, method="direct")
    rows1 = experiment.draw_rows(d_head, T, n_rows=1, seed=0, method="direct")
    p1 = reference.softmax(rows1.raw_scores[0] / c)
    dq1 = rows1.keys[0].T @ (softmax_jacobian(p1) @ rows1.upstream[0]) / c
    assert math.isclose(curves.query_gradient["sqrt"][0], np.linalg.norm(dq1), rel_tol=1e-12)
    assert math.isclose(curves.gain["sqrt"][0], np.linalg.norm(softmax_jacobian(p1), 2), rel_tol=1e-9)
    assert dq.shape == (d_head,)


@pytest.mark.parametrize("T, spread", [(2, 1.0), (3, 3.0), (8, 0.1), (8, 5.0), (32, 1.0), (32, 30.0), (100, 2.0)])
def test_jacobian_gain_equals_the_spectral_norm(T, spread):
    rng = np.random.default_rng(T)
    p = reference.softmax(rng.normal(size=(40, T)) * spread)
    expected = np.linalg.norm(softmax_jacobian(p), 2, axis=(-2, -1))
    np.testing.assert_allclose(jacobian_gain(p), expected, rtol=0, atol=5e-16)


def test_jacobian_gain_special_rows():
    assert math.isclose(jacobian_gain(np.full(10, 0.1)), 0.1, rel_tol=1e-15)        # uniform: 1/T
    assert math.isclose(jacobian_gain([0.5, 0.5]), 0.5, rel_tol=1e-15)              # the largest possible
    assert 0 <= jacobian_gain([1.0, 0.0, 0.0]) < 1e-18                             # one-hot: no gradient
    assert jacobian_gain([[1.0]]).tolist() == [0.0]
    tied = np.array([0.4, 0.4, 0.2])
    np.testing.assert_allclose(jacobian_gain(tied), np.linalg.norm(softmax_jacobian(tied), 2), atol=1e-16)
    with pytest.raises(ValueError, match="p must hold probabilities"):
        jacobian_gain([-0.1, 1.1])
    assert jacobian_gain([[0.0, 0.0], [0.5, 0.5]]).tolist() == [0.0, 0.5]           # a fully masked row: J = 0
    with pytest.raises(ValueError, match="received a row summing to 0.9"):
        jacobian_gain([0.4, 0.5])


def test_row_jacobian_is_the_jacobian_of_the_rows_behind_the_curves():
    J = row_jacobian(d_head=64, T=16, scaling="none", n_rows=1)
    assert J.shape == (16, 16)
    c = gradient_curves(T=16, d_heads=(64,), n_rows=1)
    assert math.isclose(np.linalg.norm(J, 2), c.gain["none"][0], rel_tol=1e-9)
    np.testing.assert_allclose(J.sum(axis=1), 0, atol=1e-15)


def test_assignment_1_fact_3_numbers():
    # what assignment 1 prints (checks.check_scaling_prevents_saturation: rng 3, d_head = 256, T = 32)
    values = assignment1_fact3_entropies()
    assert f"{values['sqrt']:.2f}" == "3.01" and f"{values['none']:.2f}" == "0.21"
    assert f"{values['linear']:.2f}" == "3.46" and f"{values['ceiling']:.2f}" == "3.47"
    from attention_lab.a01_attention import checks
    scaled, unscaled = checks.check_scaling_prevents_saturation(reference.scaled_dot_product_attention,
                                                                 reference.attention_entropy)
    assert math.isclose(scaled, values["sqrt"], rel_tol=1e-12) and math.isclose(unscaled, values["none"],
                                                                                 rel_tol=1e-12)


@pytest.mark.parametrize("call, words", [
    (lambda: gradient_curves(T=1), "T must be an integer >= 2 (a softmax over one key is constant); received 1"),
    (lambda: gradient_curves(T=8, n_rows=0), "n_rows must be an integer >= 1; received 0"),
    (lambda: gradient_curves(T=8, seed=-1), "seed must be an integer >= 0; received -1"),
    (lambda: gradient_curves(T=8, d_heads=(4, 0)), "d_heads[i] must be an integer >= 1; received 0"),
    (lambda: gradient_curves(T=8, method="exact"), "method must be 'reduced' or 'direct'; received 'exact'"),
    (lambda: experiment.divisor("sqrt_d", 4), "scaling must be one of ['linear', 'none', 'sqrt']; received 'sqrt_d'"),
    (lambda: row_jacobian(8, 8, "sqrt", row=300), "row must be an integer in [0, 256); received 300"),
    (lambda: gradient_curves(T=8).at(3), "d_head = 3 is not among the computed"),
])
def test_experiment_errors(call, words):
    with pytest.raises((ValueError, KeyError)) as error:
        call()
    assert words in str(error.value)


def test_false_findings_lists_the_sentences_that_do_not_hold(curves):
    c = curves[(32, 0)]
    assert false_findings(c) == []
    swapped = _relabel(c, {"none": "linear", "sqrt": "sqrt", "linear": "none"})
    assert "entropy_ranks_the_wrong_way" in false_findings(swapped)
