"""Assignment 3's reference (sinusoidal positional encoding) against hand-computed values and properties,
its input errors, and the hidden cases' power to tell the known mistakes apart."""

import math

import numpy as np
import pytest

from autograder.assignments.a01_attention import reference
from autograder.assignments.a03_positional import reference as pos
from autograder.assignments.a03_positional.spec import ASSIGNMENT
from autograder.grader.comparison import same


# ---------------------------------------------------------------- the encoding
def test_d_model_4_table_by_hand():
    # d_model = 4: frequencies 1 and 1/10000^(2/4) = 1/100 (shared/notes/mistakes.md M19).
    pe = pos.sinusoidal_positional_encoding(3, 4)
    assert pe.shape == (3, 4) and pe.dtype == np.float64
    np.testing.assert_allclose(pe[0], [0.0, 1.0, 0.0, 1.0], atol=0)
    np.testing.assert_allclose(pe[1], [0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004], rtol=1e-8)
    np.testing.assert_allclose(pe[2], [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)], rtol=1e-12)


def test_every_entry_follows_section_3_5():
    T, d_model = 30, 10
    pe = pos.sinusoidal_positional_encoding(T, d_model)
    for t in range(T):
        for i in range(d_model // 2):
            angle = t / 10000 ** (2 * i / d_model)
            assert pe[t, 2 * i] == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[t, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-12)


def test_frequencies_run_geometrically_from_1_to_nearly_1_over_10000():
    omega = pos.frequencies(64)
    assert omega.shape == (32,)
    assert omega[0] == 1.0
    assert omega[-1] == pytest.approx(10000 ** (-62 / 64))
    np.testing.assert_allclose(omega[1:] / omega[:-1], 10000 ** (-2 / 64), rtol=1e-12)


def test_pairs_lie_on_the_unit_circle_and_rows_have_length_sqrt_half_d_model():
    pe = pos.sinusoidal_positional_encoding(200, 64)
    np.testing.assert_allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.sum(pe * pe, axis=1), 32.0, rtol=1e-12)
    assert np.abs(pe).max() <= 1.0


@pytest.mark.parametrize("T, d_model, words", [
    (10, 7, "d_model must be an even integer >= 2 (the columns come in sin/cos pairs); received d_model=7"),
    (10, 0, "d_model must be an integer >= 1; received 0"),
    (0, 4, "T must be an integer >= 1; received 0"),
    (3.0, 4, "T must be an integer >= 1; received 3.0"),
    (3, True, "d_model must be an integer >= 1; received True"),
])
def test_bad_sizes_raise_value_errors_naming_the_argument(T, d_model, words):
    with pytest.raises(ValueError) as error:
        pos.sinusoidal_positional_encoding(T, d_model)
    assert str(error.value) == words


# ---------------------------------------------------------------- dot products by offset
def test_dot_products_by_hand():
    pe = np.array([[1.0, 0.0], [2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_array_equal(pos.dot_product_by_offset(pe, 1), [5.0, 5.0])
    np.testing.assert_array_equal(pos.dot_product_by_offset(pe, 0), [1.0, 2.0, 1.0])
    np.testing.assert_array_equal(pos.dot_product_by_offset(pe, 2), [10.0])


def test_sinusoidal_dot_products_are_sums_of_cosines_of_the_offset_whatever_t():
    T, d_model = 80, 16
    pe = pos.sinusoidal_positional_encoding(T, d_model)
    omega = pos.frequencies(d_model)
    for t in (0, 7, 40, 79):
        got = pos.dot_product_by_offset(pe, t)
        k = np.arange(T - t)
        np.testing.assert_allclose(got, np.cos(np.outer(k, omega)).sum(axis=1), atol=1e-12)
        assert got[0] == pytest.approx(d_model / 2)


def test_a_random_table_has_no_offset_structure():
    pe = np.random.default_rng(0).normal(size=(20, 8))
    assert not np.allclose(pos.dot_product_by_offset(pe, 5), pos.dot_product_by_offset(pe, 0)[:15], atol=0.1)


@pytest.mark.parametrize("pe, t, words", [
    (np.ones((4, 3)), 4, "t must be an integer position in [0, 3] for pe of shape (4, 3); received 4"),
    (np.ones((4, 3)), -1, "t must be an integer position in [0, 3] for pe of shape (4, 3); received -1"),
    (np.ones((4, 3)), 1.0, "t must be an integer position in [0, 3] for pe of shape (4, 3); received 1.0"),
    (np.ones(4), 0, "pe must have shape (T, d) (at least 2 dimensions); received shape (4,)"),
    (np.ones((2, 3, 4)), 0, "pe must have shape (T, d) with T >= 1 and d >= 1; received shape (2, 3, 4)"),
    (np.ones((4, 3), dtype=complex), 0, "pe must be a real numeric array of shape (T, d); received dtype complex128"),
])
def test_dot_product_input_errors(pe, t, words):
    with pytest.raises(ValueError) as error:
        pos.dot_product_by_offset(pe, t)
    assert str(error.value) == words


# ---------------------------------------------------------------- the rotation
def test_rotation_by_hand_for_one_pair():
    R = pos.offset_rotation(1, 2)
    c, s = math.cos(1), math.sin(1)
    np.testing.assert_allclose(R, [[c, -s], [s, c]], rtol=1e-15)
    # The row vector (sin t, cos t) times R is (sin(t + 1), cos(t + 1)).
    t = 0.3
    np.testing.assert_allclose(np.array([math.sin(t), math.cos(t)]) @ R, [math.sin(t + 1), math.cos(t + 1)])


@pytest.mark.parametrize("k", [0, 1, 3, 17, -4, 2.5, -0.75])
def test_R_k_moves_every_encoding_k_positions_on(k):
    T, d_model = 60, 12
    R = pos.offset_rotation(k, d_model)
    pe = pos.sinusoidal_positional_encoding(T, d_model)
    moved = pe @ R
    angles = (np.arange(T)[:, None] + k) * pos.frequencies(d_model)  # positions t + k, fractional k included
    np.testing.assert_allclose(moved[:, 0::2], np.sin(angles), atol=1e-12)
    np.testing.assert_allclose(moved[:, 1::2], np.cos(angles), atol=1e-12)


def test_R_k_is_a_block_diagonal_rotation_group():
    d_model = 10
    R3, R4, R7, R_3 = (pos.offset_rotation(k, d_model) for k in (3, 4, 7, -3))
    blocks = np.kron(np.eye(d_model // 2), np.ones((2, 2))).astype(bool)
    assert np.all(R3[~blocks] == 0)
    np.testing.assert_allclose(R3 @ R3.T, np.eye(d_model), atol=1e-14)
    np.testing.assert_allclose(R3 @ R4, R7, atol=1e-14)
    np.testing.assert_allclose(R_3, R3.T, atol=1e-15)
    np.testing.assert_array_equal(pos.offset_rotation(0, d_model), np.eye(d_model))
    assert np.linalg.det(R7) == pytest.approx(1.0)


@pytest.mark.parametrize("k, d_model, words", [
    (1, 5, "d_model must be an even integer >= 2 (the columns come in sin/cos pairs); received d_model=5"),
    (float("nan"), 4, "k must be a finite real number (an offset in positions); received nan"),
    (float("inf"), 4, "k must be a finite real number (an offset in positions); received inf"),
    (True, 4, "k must be a finite real number (an offset in positions); received True"),
    ("3", 4, "k must be a finite real number (an offset in positions); received '3'"),
])
def test_rotation_input_errors(k, d_model, words):
    with pytest.raises(ValueError) as error:
        pos.offset_rotation(k, d_model)
    assert str(error.value) == words


# ---------------------------------------------------------------- attention, positions, permutations
def _problem(seed, T=6, d_model=8, d_head=4):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(T, d_model)), *(rng.normal(size=(d_model, d_head)) for _ in range(3))


def test_self_attention_is_unmasked_scaled_dot_product_attention():
    x, W_q, W_k, W_v = _problem(1)
    output, weights = pos.self_attention(x, W_q, W_k, W_v)
    scores = (x @ W_q) @ (x @ W_k).T / 2.0  # √d_head = √4
    expected_weights = np.exp(scores - scores.max(1, keepdims=True))
    expected_weights /= expected_weights.sum(1, keepdims=True)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-12)
    np.testing.assert_allclose(output, expected_weights @ (x @ W_v), rtol=1e-12)
    assert np.all(weights > 0)  # no mask: the future has weight too


def test_self_attention_with_zero_queries_averages_the_values():
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    output, weights = pos.self_attention(x, np.zeros((2, 2)), np.zeros((2, 2)), np.array([[1.0, 0.0], [0.0, 2.0]]))
    np.testing.assert_allclose(weights, np.full((3, 3), 1 / 3))
    np.testing.assert_allclose(output, np.full((3, 2), [2 / 3, 4 / 3]))


@pytest.mark.parametrize("args, words", [
    ((np.ones(4), np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 2))),
     "x must have shape (T, d_model) (at least 2 dimensions); received shape (4,)"),
    ((np.ones((3, 4)), np.ones((5, 2)), np.ones((4, 2)), np.ones((4, 2))),
     "W_q must have shape (d_model, d_head) with d_model=4 (from x) and d_head >= 1; received shape (5, 2)"),
    ((np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 3)), np.ones((4, 2))),
     "W_q.shape[1] and W_k.shape[1] must both equal d_head; received W_q.shape[1]=2 and W_k.shape[1]=3"),
])
def test_self_attention_input_errors(args, words):
    with pytest.raises(ValueError) as error:
        pos.self_attention(*args)
    assert str(error.value) == words


def test_add_positions_adds_the_table_and_keeps_x_and_float32():
    x = np.random.default_rng(2).normal(size=(5, 6))
    before = x.copy()
    np.testing.assert_allclose(pos.add_positions(x), x + pos.sinusoidal_positional_encoding(5, 6), rtol=0)
    np.testing.assert_array_equal(x, before)
    second_row = [1 + math.sin(1), 1 + math.cos(1), 1 + math.sin(0.01), 1 + math.cos(0.01)]
    np.testing.assert_allclose(pos.add_positions(np.ones((2, 4))), [[1, 2, 1, 2], second_row])
    assert pos.add_positions(x.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="d_model must be an even integer >= 2"):
        pos.add_positions(np.ones((3, 5)))


def test_without_positions_attention_is_permutation_equivariant_and_with_them_it_is_not():
    x, W_q, W_k, W_v = _problem(3, T=7)
    perm = np.array([3, 0, 6, 1, 5, 2, 4])
    out, _ = pos.self_attention(x, W_q, W_k, W_v)
    out_shuffled, _ = pos.self_attention(x[perm], W_q, W_k, W_v)
    np.testing.assert_allclose(out_shuffled, out[perm], atol=1e-13)
    assert pos.permutation_gap(x, W_q, W_k, W_v, perm) < 1e-13
    gap = pos.permutation_gap(x, W_q, W_k, W_v, perm, positions=True)
    encoded, encoded_shuffled = pos.add_positions(x), pos.add_positions(x[perm])
    expected = np.abs(pos.self_attention(encoded_shuffled, W_q, W_k, W_v)[0]
                      - pos.self_attention(encoded, W_q, W_k, W_v)[0][perm]).max()
    assert isinstance(gap, float) and gap == expected and gap > 0.1
    assert pos.permutation_gap(x, W_q, W_k, W_v, np.arange(7), positions=True) == 0.0


@pytest.mark.parametrize("perm, positions, words", [
    (np.array([0, 1, 1]), False, "perm must be a permutation of 0 … 2"),
    (np.array([0, 1]), False, "perm must be a permutation of 0 … 2"),
    (np.array([0.0, 1.0, 2.0]), False, "perm must be a permutation of 0 … 2"),
    (np.array([2, 0, 1]), 1, "positions must be True or False; received 1"),
])
def test_permutation_gap_input_errors(perm, positions, words):
    x, W_q, W_k, W_v = _problem(4, T=3)
    with pytest.raises(ValueError) as error:
        pos.permutation_gap(x, W_q, W_k, W_v, perm, positions=positions)
    assert str(error.value).startswith(words)


# ---------------------------------------------------------------- the hidden cases
def _cases(function):
    return [case for step in ASSIGNMENT.steps for case in step.cases() if case.function == function]


def test_hidden_cases_avoid_inputs_that_hide_the_encoding_slips():
    for case in _cases("sinusoidal_positional_encoding"):
        if case.raises is None:
            T, d_model = case.args
            assert T >= 8 and d_model >= 6  # exponents i and 2i differ; several positions
    assert max(case.args[0] for case in _cases("sinusoidal_positional_encoding")) >= 200
    assert all(abs(case.args[0]) not in (0, 1) for case in _cases("offset_rotation"))
    for case in _cases("permutation_gap"):
        perm = case.args[4]
        assert np.all(perm != np.arange(perm.size)) and not np.array_equal(perm[perm], np.arange(perm.size))
    tables = [case.args[0] for case in _cases("dot_product_by_offset")]
    assert any(not np.allclose(np.sum(t * t, axis=1), np.sum(t[0] ** 2)) for t in tables)  # a learned table


def test_hidden_cases_are_seeded():
    for step in ASSIGNMENT.steps:
        first, second = step.cases(), step.cases()
        for a, b in zip(first, second):
            assert a.description == b.description
            assert all(same(x, y, a) if isinstance(x, np.ndarray) else x == y for x, y in zip(a.args, b.args))


@pytest.mark.parametrize("function", sorted(ASSIGNMENT.reference))
def test_reference_functions_are_the_course_references(function):
    module = reference if function in {"softmax", "scaled_dot_product_attention"} else pos
    assert ASSIGNMENT.reference[function] is getattr(module, function)


def _diagnosis(grade_id, index, got):
    step = ASSIGNMENT.step(grade_id)
    case = step.cases()[index]
    expected = ASSIGNMENT.reference[case.function](*case.args, **case.kwargs)
    return step.diagnose(case, got, expected)


def test_diagnoses_name_the_failing_property_in_plain_words():
    pe = pos.sinusoidal_positional_encoding(10, 6)
    assert "shape (d_model, T)" in _diagnosis("test_sinusoidal_positional_encoding", 0, pe.T.copy())[0]
    row_shifted = pos.sinusoidal_positional_encoding(11, 6)[1:]
    assert any("Row 0" in line for line in _diagnosis("test_sinusoidal_positional_encoding", 0, row_shifted))
    slow_pair = pe.copy()
    slow_pair[:, 4:6] = pos.sinusoidal_positional_encoding(10, 6)[:, 2:4]
    assert "turn at the wrong speed" in _diagnosis("test_sinusoidal_positional_encoding", 0, slow_pair)[0]

    case = ASSIGNMENT.step("test_dot_product_by_offset").cases()[1]
    doubled = 2 * pos.dot_product_by_offset(*case.args)
    assert _diagnosis("test_dot_product_by_offset", 1, doubled) == ["The values are 2 times the expected dot products."]

    R = pos.offset_rotation(3, 8)
    assert "transpose of R_k" in _diagnosis("test_offset_rotation", 0, R.T.copy())[0]
    off_block = R.copy()
    off_block[0, 7] = 0.5
    assert "outside the 2×2 diagonal blocks" in _diagnosis("test_offset_rotation", 0, off_block)[0]

    case = ASSIGNMENT.step("test_add_positions").cases()[0]
    assert _diagnosis("test_add_positions", 0, case.args[0].copy()) == [
        "The result equals x: the encodings were not added."]

    assert "should be 0 up to rounding" in _diagnosis("test_permutation_gap", 0, 0.5)[0]
    assert "should not be 0" in _diagnosis("test_permutation_gap", 1, 0.0)[0]
