"""Assignment 6's reference: softmax Jacobian and backward, attention backward, central differences.

Every analytic gradient is compared with central differences of the forward pass
(relative error ≤ 1e-6 in float64), over masks, batch axes, the three kinds of
``scale``, T_q ≠ T_k and d_v ≠ d_k; masked positions and fully masked rows are
checked to receive exactly zero gradient.
"""

import math

import numpy as np
import pytest

from autograder.assignments.a01_attention import reference
from autograder.assignments.a04_masking import reference as reference_masking
from autograder.assignments.a06_gradients.reference import (
    GradientCheck,
    attention_backward,
    attention_forward,
    check_gradient,
    numerical_gradient,
    relative_error,
    softmax_backward,
    softmax_jacobian,
)

SCALES = [True, False, 2.5, 8]  # √d_k, none, a float divisor, an int divisor (d_k = 8 below: the ÷d_k scaling)


def _loss(Q, K, V, G, mask, scale):
    """L = Σ output ⊙ G, whose gradient with respect to the output is G."""
    return float(np.sum(attention_forward(Q, K, V, mask=mask, scale=scale)[0] * G))


def _check_all(Q, K, V, mask, scale, rng):
    out, _ = attention_forward(Q, K, V, mask=mask, scale=scale)
    G = rng.normal(size=out.shape)
    grads = attention_backward(Q, K, V, G, mask=mask, scale=scale)
    inputs = {"Q": Q, "K": K, "V": V}
    for (name, x), analytic in zip(inputs.items(), grads):
        assert analytic.shape == x.shape, name

        def f(z, name=name):
            args = dict(inputs, **{name: z})
            return _loss(args["Q"], args["K"], args["V"], G, mask, scale)

        result = check_gradient(f, x, analytic)
        assert result.relative_error <= 1e-6, (name, scale, result.relative_error)
        assert result.passed
    return grads


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("masked", [False, True])
def test_attention_backward_matches_central_differences_cross_attention(scale, masked):
    rng = np.random.default_rng(10 + int(masked))
    T_q, T_k, d_k, d_v = 3, 5, 8, 2
    Q, K, V = rng.normal(size=(T_q, d_k)), rng.normal(size=(T_k, d_k)), rng.normal(size=(T_k, d_v))
    mask = rng.random((T_q, T_k)) < 0.6 if masked else None
    if masked:
        mask[:, 0] = True  # every row keeps a key: fully masked rows have their own test
    _check_all(Q, K, V, mask, scale, rng)


@pytest.mark.parametrize("scale", SCALES)
def test_attention_backward_with_batch_and_head_axes_broadcast_and_causal_mask(scale):
    rng = np.random.default_rng(3)
    B, H, T, d_k, d_v = 2, 3, 4, 8, 3
    Q = rng.normal(size=(B, H, T, d_k))
    K = rng.normal(size=(B, 1, T, d_k))      # one K per sequence, shared by the heads
    V = rng.normal(size=(T, d_v))            # one V for everything
    dQ, dK, dV = _check_all(Q, K, V, reference.causal_mask(T), scale, rng)
    assert (dQ.shape, dK.shape, dV.shape) == (Q.shape, K.shape, V.shape)


def test_broadcast_input_receives_the_sum_of_the_copies_gradients():
    rng = np.random.default_rng(4)
    Q = rng.normal(size=(3, 4, 5))
    K, V = rng.normal(size=(6, 5)), rng.normal(size=(6, 2))
    G = rng.normal(size=(3, 4, 2))
    _, dK_shared, dV_shared = attention_backward(Q, K, V, G)
    _, dK_copies, dV_copies = attention_backward(Q, np.broadcast_to(K, (3, 6, 5)), np.broadcast_to(V, (3, 6, 2)), G)
    np.testing.assert_allclose(dK_shared, dK_copies.sum(axis=0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dV_shared, dV_copies.sum(axis=0), rtol=1e-12, atol=1e-14)


def test_blocked_positions_send_exactly_zero_gradient_to_their_keys_and_values():
    rng = np.random.default_rng(5)
    T_q, T_k, d_k, d_v = 4, 6, 3, 2
    Q, K, V = rng.normal(size=(T_q, d_k)), rng.normal(size=(T_k, d_k)), rng.normal(size=(T_k, d_v))
    mask = rng.random((T_q, T_k)) < 0.5
    mask[:, 1] = True
    mask[:, 4] = False                       # key 4 is blocked for every query
    dQ, dK, dV = attention_backward(Q, K, V, rng.normal(size=(T_q, d_v)), mask=mask)
    assert np.all(dK[4] == 0) and np.all(dV[4] == 0)
    for i in range(T_q):                     # one query's contribution at a time
        G = np.zeros((T_q, d_v))
        G[i] = rng.normal(size=d_v)
        _, dK_i, dV_i = attention_backward(Q, K, V, G, mask=mask)
        blocked = ~mask[i]
        assert np.all(dK_i[blocked] == 0) and np.all(dV_i[blocked] == 0), i
        assert np.all(np.abs(dV_i[~blocked]).sum(axis=1) > 0), i
    # and a masked key changes nothing: its numerical gradient is zero too
    f = lambda k: _loss(Q, k, V, np.ones((T_q, d_v)), mask, True)  # noqa: E731
    assert np.all(numerical_gradient(f, K)[4] == 0)


def test_fully_masked_rows_output_zero_and_get_zero_gradient():
    rng = np.random.default_rng(6)
    T_q, T_k, d_k, d_v = 3, 4, 5, 2
    Q, K, V = rng.normal(size=(T_q, d_k)), rng.normal(size=(T_k, d_k)), rng.normal(size=(T_k, d_v))
    mask = np.ones((T_q, T_k), dtype=bool)
    mask[1] = False
    out, weights = attention_forward(Q, K, V, mask=mask)
    assert np.all(out[1] == 0) and np.all(weights[1] == 0)            # assignment 4's convention
    np.testing.assert_allclose(out, reference_masking.masked_attention(Q, K, V, mask)[0], rtol=1e-15)
    G = np.zeros((T_q, d_v))
    G[1] = rng.normal(size=d_v)                                        # gradient only on the masked row
    dQ, dK, dV = attention_backward(Q, K, V, G, mask=mask)
    assert not dQ.any() and not dK.any() and not dV.any()
    dQ, dK, dV = _check_all(Q, K, V, mask, True, rng)                 # and with other rows, still exact
    assert np.all(dQ[1] == 0)
    every_row_masked = np.zeros((T_q, T_k), dtype=bool)
    assert not any(g.any() for g in attention_backward(Q, K, V, np.ones((T_q, d_v)), mask=every_row_masked))


def test_forward_equals_assignment_1_and_4_references():
    rng = np.random.default_rng(7)
    Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    mask = rng.random((3, 5)) < 0.6
    mask[:, 0] = True
    for scale in (True, False):
        expected = reference.scaled_dot_product_attention(Q, K, V, mask=mask, scale=scale)
        for got, want in zip(attention_forward(Q, K, V, mask=mask, scale=scale), expected):
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(attention_forward(Q, K, V, scale=2.0)[0],
                               attention_forward(Q, K, V, scale=True)[0], rtol=1e-13)  # √4 = 2
    np.testing.assert_allclose(attention_forward(Q, K, V, scale=1.0)[0],
                               attention_forward(Q, K, V, scale=False)[0], rtol=1e-13)
    assert not np.allclose(attention_forward(Q, K, V, scale=4)[0], attention_forward(Q, K, V, scale=True)[0])


def test_scale_changes_dQ_and_dK_by_the_divisor_at_fixed_weights():
    # with Q and K multiplied by √c the scores under ÷c equal the unscaled ones: dQ, dK shrink by 1/√c
    rng = np.random.default_rng(8)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    G = rng.normal(size=(3, 2))
    c = 9.0
    dQ1, dK1, dV1 = attention_backward(Q, K, V, G, scale=False)
    dQc, dKc, dVc = attention_backward(Q * 3.0, K * 3.0, V, G, scale=c)
    np.testing.assert_allclose(dVc, dV1, rtol=1e-12)
    np.testing.assert_allclose(dQc, dQ1 / 3.0, rtol=1e-12)
    np.testing.assert_allclose(dKc, dK1 / 3.0, rtol=1e-12)


def test_float32_inputs_give_float32_gradients_close_to_float64():
    rng = np.random.default_rng(9)
    Q, K, V = rng.normal(size=(4, 8)), rng.normal(size=(6, 8)), rng.normal(size=(6, 3))
    G = rng.normal(size=(4, 3))
    grads64 = attention_backward(Q, K, V, G, mask=reference_masking.causal_padding_mask([4], 6)[0, :4])
    grads32 = attention_backward(*(a.astype(np.float32) for a in (Q, K, V, G)),
                                 mask=reference_masking.causal_padding_mask([4], 6)[0, :4])
    for g32, g64 in zip(grads32, grads64):
        assert g32.dtype == np.float32
        np.testing.assert_allclose(g32, g64, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- softmax Jacobian and backward

def _random_probabilities(rng, shape):
    return reference.softmax(rng.normal(size=shape) * 2)


def test_softmax_jacobian_hand_worked_symmetric_rows_sum_to_zero():
    np.testing.assert_allclose(softmax_jacobian([0.5, 0.5]), [[0.25, -0.25], [-0.25, 0.25]], rtol=1e-15)
    np.testing.assert_allclose(softmax_jacobian([0.2, 0.3, 0.5]),
                               [[0.16, -0.06, -0.10], [-0.06, 0.21, -0.15], [-0.10, -0.15, 0.25]], rtol=1e-12)
    rng = np.random.default_rng(11)
    p = _random_probabilities(rng, (2, 3, 6))
    J = softmax_jacobian(p)
    assert J.shape == (2, 3, 6, 6)
    np.testing.assert_array_equal(J, np.swapaxes(J, -1, -2))
    np.testing.assert_allclose(J.sum(axis=-1), 0, atol=1e-16)
    eigenvalues = np.linalg.eigvalsh(J)
    assert eigenvalues.min() > -1e-15 and np.all(eigenvalues.max(axis=-1) <= p.max(axis=-1) + 1e-15)
    assert not softmax_jacobian(np.zeros(4)).any()                     # a fully masked row: constant output


def test_softmax_jacobian_equals_central_differences_of_the_softmax():
    rng = np.random.default_rng(12)
    s = rng.normal(size=5)
    J = softmax_jacobian(reference.softmax(s))
    for i in range(5):   # row i of J is the gradient of p_i with respect to the scores
        numerical = numerical_gradient(lambda z, i=i: reference.softmax(z)[i], s)
        assert relative_error(J[i], numerical) < 1e-8


def test_softmax_backward_equals_jacobian_times_gradient():
    rng = np.random.default_rng(13)
    p = _random_probabilities(rng, (3, 2, 7))
    g = rng.normal(size=p.shape)
    expected = np.einsum("...ij,...j->...i", softmax_jacobian(p), g)
    np.testing.assert_allclose(softmax_backward(p, g), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(softmax_backward(p, g).sum(axis=-1), 0, atol=1e-15)
    s = rng.normal(size=7)
    g1 = rng.normal(size=7)
    numerical = numerical_gradient(lambda z: float(reference.softmax(z) @ g1), s)
    assert relative_error(softmax_backward(reference.softmax(s), g1), numerical) < 1e-8
    masked = np.array([0.0, 0.25, 0.75, 0.0])
    assert np.all(softmax_backward(masked, np.arange(4.0))[[0, 3]] == 0)   # blocked keys: exactly 0
    assert softmax_backward(p.astype(np.float32), g.astype(np.float32)).dtype == np.float32


# ---------------------------------------------------------------- central differences

def test_numerical_gradient_of_known_functions():
    rng = np.random.default_rng(14)
    x = rng.normal(size=(3, 4))
    # rounding: ε_machine · |f| / ε ≈ 1e-16 · 60 / 1e-6 ≈ 1e-8 absolute
    np.testing.assert_allclose(numerical_gradient(lambda z: float(np.sum(z ** 3)), x), 3 * x ** 2, rtol=1e-8, atol=1e-7)
    np.testing.assert_allclose(numerical_gradient(lambda z: np.sum(np.sin(z)), x.astype(np.float32)),
                               np.cos(x.astype(np.float32).astype(np.float64)), rtol=1e-8, atol=1e-8)
    assert numerical_gradient(lambda z: float(np.sum(z)), x).dtype == np.float64

    def mutating(z):
        z *= 2   # modifies its argument: every call gets a fresh copy, so the result is still right
        return float(np.sum(z ** 2))

    np.testing.assert_allclose(numerical_gradient(mutating, x), 8 * x, rtol=1e-7, atol=1e-7)


def test_relative_error_definition_and_check_gradient_rejects_a_wrong_gradient():
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error([3.0, 4.0], [0.0, 0.0]) == 1.0
    assert math.isclose(relative_error([1.0, 0.0], [1.0, 1.0]), 1 / math.sqrt(2))
    assert relative_error([1.0, 1.0], [-1.0, -1.0]) == 2.0
    rng = np.random.default_rng(15)
    Q, K, V = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    G = rng.normal(size=(3, 2))
    dQ, _, _ = attention_backward(Q, K, V, G)
    f = lambda q: _loss(q, K, V, G, None, True)  # noqa: E731
    good = check_gradient(f, Q, dQ)
    assert isinstance(good, GradientCheck) and good.passed and good.relative_error < 1e-8
    dQ_unscaled, _, _ = attention_backward(Q, K, V, G, scale=False)   # the forgotten 1/√d_k of dQ is caught
    bad = check_gradient(f, Q, dQ_unscaled * 0.5 + dQ * 0.5)
    assert not bad.passed and bad.relative_error > 0.01


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("call, words", [
    (lambda: softmax_jacobian([-0.5, 1.5]), "p must hold probabilities (the softmax output, not the scores)"),
    (lambda: softmax_jacobian([0.5, 0.6]), "must sum to 1 (the softmax of one row) or be all 0 (a fully masked row); received a row summing to 1.1 (shape (2,))"),
    (lambda: softmax_jacobian(np.float64(1.0)), "p must have shape (..., n) (at least 1 dimensions); received shape ()"),
    (lambda: softmax_jacobian(np.zeros((2, 0))), "p must have shape (..., n) with n >= 1; received shape (2, 0)"),
    (lambda: softmax_jacobian([np.nan, 1.0]), "p must hold finite probabilities"),
    (lambda: softmax_backward([0.5, 0.5], [1.0, 2.0, 3.0]), "grad_p must have the shape of p, (2,) (one gradient per probability); received shape (3,)"),
    (lambda: softmax_backward([0.5, 0.5], ["a", "b"]), "grad_p must be a real numeric array"),
    (lambda: attention_backward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), np.ones((2, 3))),
     "grad_out must have the output's shape (..., T_q, d_v) = (2, 2); received shape (2, 3)"),
    (lambda: attention_backward(np.ones((2, 3)), np.ones((4, 5)), np.ones((4, 2)), np.ones((2, 2))),
     "Q.shape[-1] and K.shape[-1] must both equal d_k; received Q.shape[-1]=3 and K.shape[-1]=5"),
    (lambda: attention_backward(np.ones((2, 3)), np.ones((4, 3)), np.ones((5, 2)), np.ones((2, 2))),
     "K.shape[-2] and V.shape[-2] must both equal T_k; received K.shape[-2]=4 and V.shape[-2]=5"),
    (lambda: attention_backward(np.ones(3), np.ones((4, 3)), np.ones((4, 2)), np.ones((2, 2))),
     "Q must have shape (..., T_q, d_k) (at least 2 dimensions); received shape (3,)"),
    (lambda: attention_backward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), np.ones((2, 2)), mask=np.ones((2, 4))),
     "mask must be a boolean array (True = may attend) broadcastable to (2, 4); received dtype float64"),
    (lambda: attention_backward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), np.ones((2, 2)), mask=np.ones((3, 4), bool)),
     "mask must be broadcastable to the scores' shape (..., T_q, T_k) = (2, 4); received shape (3, 4)"),
    (lambda: attention_backward(np.ones((2, 2, 3)), np.ones((3, 4, 3)), np.ones((4, 2)), np.ones((2, 2))),
     "the leading (batch) dimensions of Q (2,) and K (3,) must broadcast"),
    (lambda: attention_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), scale=0),
     "scale must be True (divide the scores by √d_k), False (no scaling) or a positive finite divisor such as d_k; received 0"),
    (lambda: attention_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), scale=-2.0), "received -2.0"),
    (lambda: attention_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), scale=None), "received None"),
    (lambda: attention_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), scale=float("inf")), "received inf"),
    (lambda: attention_forward(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 2)), scale="sqrt"), "received 'sqrt'"),
    (lambda: numerical_gradient(lambda z: z, np.ones(3)), "f must return a real scalar (the loss); it returned ndarray with shape (3,)"),
    (lambda: numerical_gradient("loss", np.ones(3)), "f must be a function of one array returning a scalar loss"),
    (lambda: numerical_gradient(np.sum, np.ones(3), eps=0), "eps must be a positive finite step such as 1e-6; received 0"),
    (lambda: numerical_gradient(np.sum, ["a"]), "x must be a real numeric array"),
    (lambda: relative_error(np.ones(3), np.ones(4)), "numerical must have the shape of analytic, (3,); received shape (4,)"),
    (lambda: check_gradient(np.sum, np.ones(3), np.ones(3), tol=-1), "tol must be a positive finite number"),
])
def test_errors_name_the_argument_the_expected_shape_and_what_was_received(call, words):
    with pytest.raises(ValueError) as error:
        call()
    assert words in str(error.value)
