"""Assignment 8's answer bank: correct variants agree with the reference, every mistake is caught where it says.

Runs the bank's own cells in this process (trusted code), on the hidden cases the spec hands the grader
(tests/test_grader.py and tests/test_mistake_edits.py grade them as the grader does).
"""

import types

import numpy as np
import pytest

from answer_bank_checks import BankChecks
from autograder.grader.bank import apply_edits
from conftest import REPO

from autograder.assignments.a08_modern_attention import bank
from autograder.assignments.a08_modern_attention import reference as ref
#: the bank as BankChecks reads a bank: its mistakes as Mistakes (the graded bank's KNOWN_MISTAKES)
_BANK = types.SimpleNamespace(STEPS=bank.STEPS, REFERENCE=bank.REFERENCE, SOLUTION=bank.SOLUTION, CORRECT=bank.CORRECT,
                              MISTAKES=bank.KNOWN_MISTAKES, Edit=bank.Edit)
CHECKS = BankChecks(_BANK, bank.hidden_cases(),
                    (REPO / "autograder" / "assignments" / "a08_modern_attention" / "DESIGN.md").read_text())
SAME = dict(rtol=0.0, atol=1e-12)
REFERENCE = bank.REFERENCE


def test_the_steps_and_their_cases():
    assert list(bank.STEPS) == list(CHECKS.cases)
    CHECKS.steps_and_cases(points=11)


def test_the_solution_cells_give_the_reference_results():
    CHECKS.agrees_on_hidden_cases({})


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_on_the_hidden_cases(name):
    CHECKS.agrees_on_hidden_cases(bank.CORRECT[name].cells)


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_on_random_inputs(name):
    f = CHECKS.namespace(bank.CORRECT[name].cells)
    rng = np.random.default_rng(sum(map(ord, name)))
    for _ in range(4):
        d = int(rng.choice([2, 4, 6, 8, 16]))
        batch = [(), (3,), (2, 2)][rng.integers(3)]
        T = int(rng.integers(1, 9))
        x = rng.normal(size=batch + (T, d))
        positions = rng.integers(-5, 2000, size=(T,)) if rng.random() < 0.7 else rng.integers(0, 50, batch + (T,))
        np.testing.assert_allclose(f["apply_rope"](x, positions), ref.apply_rope(x, positions), **SAME)

        T_k = int(rng.integers(1, 9))
        T_q = int(rng.integers(1, T_k + 1))
        Q, K, V = rng.normal(size=batch + (T_q, d)), rng.normal(size=batch + (T_k, d)), rng.normal(size=batch + (T_k, 2))
        causal = bool(rng.integers(2))
        for got, want in zip(f["rope_attention"](Q, K, V, causal=causal), ref.rope_attention(Q, K, V, causal=causal)):
            np.testing.assert_allclose(got, want, **SAME)

        d_model, T_past, T_new = 2 * d, int(rng.integers(0, 6)), int(rng.integers(1, 4))
        xs = rng.normal(size=(T_past + T_new, d_model))
        W = [rng.normal(0, 0.5, (d_model, d)) for _ in range(3)]
        K_cache = ref.apply_rope(xs[:T_past] @ W[1], np.arange(T_past))
        for got, want in zip(f["rope_attend_with_cache"](xs[T_past:], K_cache, xs[:T_past] @ W[2], *W),
                             ref.rope_attend_with_cache(xs[T_past:], K_cache, xs[:T_past] @ W[2], *W)):
            np.testing.assert_allclose(got, want, **SAME)

        H = int(rng.integers(1, 13))
        shared = rng.random() < 0.5
        Q = rng.normal(size=(2, H, T_q, 4))
        K, V = rng.normal(size=(2, 1 if shared else H, T_k, 4)), rng.normal(size=(2, 1 if shared else H, T_k, 3))
        for got, want in zip(f["alibi_attention"](Q, K, V), ref.alibi_attention(Q, K, V)):
            np.testing.assert_allclose(got, want, **SAME)

        n_kv = int(rng.choice([1, 2, 3]))
        n_heads = n_kv * int(rng.integers(1, 4))
        d_head = int(rng.integers(1, 4))
        d_model, T = n_heads * d_head, int(rng.integers(1, 7))
        x = rng.normal(size=(T, d_model))
        W_q, W_o = rng.normal(size=(d_model, d_model)) / d_model, rng.normal(size=(d_model, d_model))
        W_k, W_v = (rng.normal(size=(d_model, n_kv * d_head)) / d_model for _ in range(2))
        mask = np.tril(np.ones((T, T), dtype=bool)) if rng.random() < 0.5 else None
        for got, want in zip(f["grouped_query_attention"](x, W_q, W_k, W_v, W_o, n_heads, n_kv, mask=mask),
                             ref.grouped_query_attention(x, W_q, W_k, W_v, W_o, n_heads, n_kv, mask=mask)):
            np.testing.assert_allclose(got, want, **SAME)

        sizes = [int(v) for v in rng.integers(1, 5000, size=5)]
        assert f["kv_cache_bytes"](*sizes) == ref.kv_cache_bytes(*sizes)
    for n in range(1, 41):
        np.testing.assert_allclose(f["alibi_slopes"](n), ref.alibi_slopes(n), rtol=1e-12, atol=0)
    for T_q, T_k in ((1, 1), (2, 5), (4, 4), (3, 8)):  # the pasted functions of step 0
        np.testing.assert_array_equal(f["causal_mask"](T_q, T_k), REFERENCE["causal_mask"](T_q, T_k))
        Q, K, V = rng.normal(0, 30.0, (2, T_q, 4)), rng.normal(size=(2, T_k, 4)), rng.normal(size=(2, T_k, 3))
        mask = REFERENCE["causal_mask"](T_q, T_k)
        for got, want in zip(f["scaled_dot_product_attention"](Q, K, V, mask=mask),
                             REFERENCE["scaled_dot_product_attention"](Q, K, V, mask=mask)):
            np.testing.assert_allclose(got, want, **SAME)
        x = rng.normal(size=(T_k, 6))
        for n_heads in (1, 2, 3, 6):
            H = f["split_heads"](x, n_heads)
            np.testing.assert_array_equal(H, REFERENCE["split_heads"](x, n_heads))
            np.testing.assert_array_equal(f["merge_heads"](H), x)


@pytest.mark.parametrize("name", [None, *sorted(bank.CORRECT)])
def test_no_warnings_where_the_spec_forbids_them(name):
    CHECKS.no_warnings(bank.CORRECT[name].cells if name else {})


@pytest.mark.parametrize("name", sorted(bank.KNOWN_MISTAKES))
def test_mistake_is_wrong_on_every_case_of_its_step_except_those_it_does_not_involve(name):
    CHECKS.mistake_wrong_exactly_off_its_passes(name)


def test_mistakes_of_a_step_can_be_told_apart():
    CHECKS.mistakes_told_apart()


def test_edits_apply_exactly_once():
    CHECKS.edits_apply_once()
    with pytest.raises(ValueError, match="occurs 0 times"):
        apply_edits(bank.SOLUTION, (bank.Edit("apply_rope", "no such text", "x"),))
    with pytest.raises(ValueError, match="occurs 2 times"):
        apply_edits(bank.SOLUTION, (bank.Edit("rope_attention", "np.arange(", "np.arange ("),))
    with pytest.raises(KeyError, match="no solution cell"):
        apply_edits(bank.SOLUTION, (bank.Edit("softmax", "a", "b"),))


def test_the_bank_is_large_enough_and_documented():
    CHECKS.documented()


def test_rotate_half_keeps_the_relative_property_but_is_another_function():
    """Why rotate_half is a named mistake and not a second accepted answer: both conventions are relative
    (q_m · k_n depends on n − m only), and they differ by a fixed permutation of the coordinates, so they agree
    only after permuting the weights — for the same q and k they give different rotated vectors and scores."""
    functions = CHECKS.namespace(bank.KNOWN_MISTAKES["rotate_half_pairing"].cells(bank.SOLUTION))
    half = functions["apply_rope"]
    rng = np.random.default_rng(80)
    d = 8
    q, k = rng.normal(size=(1, d)), rng.normal(size=(1, d))
    scores = [(half(q, [m])[0] @ half(k, [n])[0]) for m, n in ((3, 7), (10, 14), (0, 4))]
    np.testing.assert_allclose(scores, scores[0], **SAME)  # relative too
    assert abs(scores[0] - ref.apply_rope(q, [3])[0] @ ref.apply_rope(k, [7])[0]) > 1e-3
    perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])  # interleaved → halves
    inverse = np.argsort(perm)
    for m in (0, 1, 5, 100):
        np.testing.assert_allclose(half(q[:, perm], [m])[:, inverse], ref.apply_rope(q, [m]), **SAME)


def test_the_answers_of_the_conceptual_questions():
    assert ref.kv_cache_bytes(1, 80, 64, 128, 2) // ref.kv_cache_bytes(1, 80, 8, 128, 2) == 8
    assert ref.kv_cache_bytes(1, 80, 8, 128, 2) == 327_680
    assert ref.kv_cache_bytes(1, 80, 8, 128, 2) // 2 == 163_840  # keys only
    assert ref.kv_cache_bytes(1, 80, 8, 128, 2) * 8 == ref.kv_cache_bytes(1, 80, 64, 128, 2) == 2_621_440  # bits = MHA
    assert ref.kv_cache_bytes(1, 1, 8, 128, 2) == 4096  # one layer
    assert ref.alibi_slopes(8)[::-1][2] == 1 / 64  # the reversed order
    assert ref.alibi_slopes(8)[2] == 0.125
    np.testing.assert_array_equal(ref.alibi_slopes(6), [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])
    np.testing.assert_array_equal(ref.kv_head_of(8, 2), [0, 0, 0, 0, 1, 1, 1, 1])
