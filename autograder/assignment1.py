"""Hidden-test helpers for assignment 1 (scaled dot-product attention).

Each ``grade_*`` function is called from the hidden part of one autograder
cell with the learner's function, the hidden inputs and the cell's points.
It compares the learner's results with :mod:`autograder.reference` on those
inputs and returns the partial credit as a float (see
:func:`autograder.checking.run_checks`).

Steps are graded on their own: a later function runs with the reference's
version of every earlier piece the learner got wrong (or has not written)
swapped into the notebook namespace
(:func:`autograder.checking.using_reference_pieces`), so a wrong ``softmax``
costs points only in the ``softmax`` cell; correct earlier pieces are kept.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from autograder import reference
from autograder.checking import (
    Check,
    CheckFailed,
    call_quietly,
    expect_array,
    expect_pair,
    expect_unchanged,
    run_checks,
    using_reference_pieces,
)

PIECES = {
    "softmax": reference.softmax,
    "attention_scores": reference.attention_scores,
    "causal_mask": reference.causal_mask,
    "scaled_dot_product_attention": reference.scaled_dot_product_attention,
}


def _probe_cases() -> dict[str, list[tuple[tuple, dict]]]:
    """Small fixed inputs on which an earlier piece must agree with the reference to be kept."""
    rng = np.random.default_rng(7)
    x, big = rng.normal(0, 3, (2, 3, 5)), np.array([[1000.0, 1001.0, -1000.0]])
    Q, K, V = rng.normal(size=(4, 6)), rng.normal(size=(5, 6)), rng.normal(size=(5, 3))
    Qb, Kb = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 5, 6))
    mask = np.array([[1, 0, 0, 1, 0], [1, 1, 0, 0, 0], [0, 1, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=bool)
    return {
        "softmax": [((x,), {}), ((x,), {"axis": 0}), ((big,), {})],
        "attention_scores": [((Q, K), {}), ((Q, K), {"scale": False}), ((Qb, Kb), {})],
        "causal_mask": [((1,), {}), ((5,), {})],
        "scaled_dot_product_attention": [((Q, K, V), {}), ((Q, K, V), {"mask": mask}),
                                         ((Q, K, V), {"mask": mask, "scale": False})],
    }


_PROBES = _probe_cases()


_VERDICTS: dict[tuple, bool] = {}  # (piece, function object, its code) → agrees; a re-run cell is a new object


def _agrees_with_reference(name: str, learner: Callable) -> bool:
    """Whether a learner's earlier piece gives the reference's results on the probe inputs (cached)."""
    key = (name, id(learner), getattr(learner, "__code__", None))
    if key not in _VERDICTS:
        _VERDICTS[key] = _probe(name, learner)
    return _VERDICTS[key]


def _probe(name: str, learner: Callable) -> bool:
    try:
        for args, kwargs in _PROBES[name]:
            got = call_quietly(learner, *[np.array(a, copy=True) for a in args], **kwargs)  # probes stay intact
            expected = PIECES[name](*args, **kwargs)
            if isinstance(expected, tuple):
                if not isinstance(got, (tuple, list)) or len(got) != 2:
                    return False
                pairs = zip(got, expected)
            else:
                pairs = [(got, expected)]
            for value, reference_value in pairs:
                expect_array(name, value, reference_value, kind="b" if reference_value.dtype == np.bool_ else "f")
    except Exception:  # wrong, unfinished or missing: it will be replaced
        return False
    return True


def _pieces_for(function: Callable, step: str) -> dict[str, Callable]:
    """Reference versions of the earlier steps the learner got wrong (or has not written).

    A correct earlier piece is kept, so a learner whose own ``softmax`` takes an
    extra argument that their attention passes is not penalised; a wrong one is
    replaced, so its mistake is charged only in its own cell.
    """
    order = list(PIECES)
    earlier = order[: order.index(step)] if step in order else order
    namespace = getattr(function, "__globals__", {})
    return {name: PIECES[name] for name in earlier
            if not (callable(namespace.get(name)) and _agrees_with_reference(name, namespace[name]))}


def _call(function: Callable, step: str, *args, **kwargs):
    """Call a learner's function on copies of its inputs, with wrong earlier steps replaced by the reference.

    Raises
    ------
    CheckFailed
        If the function is the course's reference imported from ``autograder``,
        or it modified one of its array arguments in place.
    """
    if str(getattr(function, "__module__", "")).startswith("autograder"):
        raise CheckFailed(f"{step} is the course's reference imported from {function.__module__}, not your own code")
    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    with using_reference_pieces(function, _pieces_for(function, step)):
        result = call_quietly(function, *copies, **kwargs)
    for index, (original, used) in enumerate(zip(args, copies)):
        if isinstance(original, np.ndarray):
            expect_unchanged(f"(argument {index + 1})", original, used)
    return result


def _expect_order(output, weights, ref_output, ref_weights) -> None:
    """Name the swapped return value instead of reporting two shape mismatches."""
    shape = lambda a: getattr(a, "shape", None)  # noqa: E731
    if shape(output) == ref_weights.shape and shape(weights) == ref_output.shape != ref_weights.shape:
        raise CheckFailed("the function returned (weights, output); return (output, weights) in that order")


def grade_softmax(softmax: Callable, *, logits: Sequence[np.ndarray], batched: np.ndarray,
                  axis_case: np.ndarray, large: Sequence[np.ndarray], points: float) -> float:
    """Grade ``softmax(x, axis=-1)``.

    Parameters
    ----------
    softmax : callable
        The learner's function.
    logits : sequence of ndarray, each 2-D
        Ordinary mixed-sign logits, softmax over the last axis.
    batched : ndarray, at least 3-D
        Logits with leading batch dimensions.
    axis_case : ndarray, 3-D
        Checked with ``axis=0`` and ``axis=-2``.
    large : sequence of ndarray, each 2-D
        Large logits (size 1e3–1e4; float32 arrays of size ~100), where
        ``exp`` without max subtraction overflows.
    points : float
        The cell's points.
    """
    def matches(x, axis=None, what="the probabilities"):
        kwargs = {} if axis is None else {"axis": axis}
        got = _call(softmax, "softmax", x, **kwargs)
        expect_array(what, got, reference.softmax(x, **kwargs))

    def ordinary():
        for x in logits:
            matches(x)

    def with_axis():
        matches(axis_case, axis=0, what="softmax(x, axis=0)")
        matches(axis_case, axis=-2, what="softmax(x, axis=-2)")

    def stable():
        for x in large:
            try:
                matches(x)
            except CheckFailed as failure:
                raise CheckFailed(f"{failure} (logits as large as {float(np.max(np.abs(x))):.0f}; "
                                  "does your softmax subtract each row's maximum before exp?)") from None

    return run_checks("softmax", [
        Check("probabilities along the last axis of 2-D arrays", ordinary),
        Check("leading batch dimensions", lambda: matches(batched)),
        Check("the axis argument (axis=0 and axis=-2)", with_axis),
        Check("large logits stay finite (numerical stability)", stable),
    ], points)


def grade_attention_scores(attention_scores: Callable, *, Q: np.ndarray, K: np.ndarray,
                           Q_batched: np.ndarray, K_batched: np.ndarray, points: float) -> float:
    """Grade the raw scores ``attention_scores(Q, K, scale=False)`` = Q Kᵀ (step 2).

    ``Q (T_q, d_k)`` and ``K (T_k, d_k)`` with T_q ≠ T_k expose ``K Qᵀ``; the
    batched pair checks that only the last two axes of K are transposed.
    Scaling is graded separately by :func:`grade_scaling`.
    """
    def shape():
        got = _call(attention_scores, "attention_scores", Q, K, scale=False)
        if isinstance(got, np.ndarray) and got.shape == (K.shape[0], Q.shape[0]) != (Q.shape[0], K.shape[0]):
            raise CheckFailed(f"the scores have shape {got.shape} = (T_k, T_q); rows should be queries: "
                              f"expected (T_q, T_k) = {(Q.shape[0], K.shape[0])}")
        expect_array("the scores", got, reference.attention_scores(Q, K, scale=False))

    def batched():
        got = _call(attention_scores, "attention_scores", Q_batched, K_batched, scale=False)
        expect_array("the batched scores", got, reference.attention_scores(Q_batched, K_batched, scale=False))

    return run_checks("attention_scores", [
        Check("Q Kᵀ with shape (T_q, T_k) when T_q ≠ T_k (scale=False)", shape),
        Check("leading batch dimensions (scale=False)", batched),
    ], points)


def grade_scaling(attention_scores: Callable, *, Q: np.ndarray, K: np.ndarray,
                  Q_batched: np.ndarray, K_batched: np.ndarray, points: float) -> float:
    """Grade the scaling ``attention_scores(Q, K, scale=True)`` = Q Kᵀ / √d_k (step 3).

    With d_k > 1 (and not a perfect fourth power of 1) ÷d_k, ×√d_k and no
    scaling are each off by a factor far outside the tolerance.
    """
    def check(Q_, K_, **kwargs):
        def run():
            got = _call(attention_scores, "attention_scores", Q_, K_, **kwargs)
            expected = reference.attention_scores(Q_, K_, scale=True)
            if isinstance(got, np.ndarray) and got.shape == expected.shape and np.all(np.isfinite(got)):
                ratio = _scale_ratio(got, expected)
                if ratio is not None and not np.isclose(ratio, 1.0, rtol=1e-3):
                    raise CheckFailed(f"the scaled scores are {ratio:.4g} times the correct ones "
                                      f"(d_k = {Q_.shape[-1]}); scale=True should divide Q Kᵀ by √d_k")
            expect_array("the scaled scores", got, expected)
        return run

    return run_checks("scaling by √d_k", [
        Check("default scale=True divides by √d_k", check(Q, K)),
        Check("scale=True with leading batch dimensions", check(Q_batched, K_batched, scale=True)),
    ], points)


def _scale_ratio(got: np.ndarray, expected: np.ndarray) -> float | None:
    """The factor k with got ≈ k · expected, if the two differ only by a constant factor."""
    norm = float(np.vdot(expected, expected))
    if norm == 0.0:
        return None
    ratio = float(np.vdot(got, expected)) / norm
    return ratio if np.allclose(got, ratio * expected, rtol=1e-4, atol=1e-9) else None


def grade_causal_mask(causal_mask: Callable, *, lengths: Sequence[int], points: float) -> float:
    """Grade ``causal_mask(T)``: bool ``(T, T)``, True where j ≤ i, for every T in ``lengths``."""
    def exact():
        for T in lengths:
            expect_array(f"causal_mask({T})", _call(causal_mask, "causal_mask", T), reference.causal_mask(T), kind="b")

    return run_checks("causal_mask", [Check(f"causal_mask(T) for T in {list(lengths)}", exact)], points)


def grade_scaled_dot_product_attention(
    scaled_dot_product_attention: Callable, *, cases: Sequence[dict], points: float
) -> float:
    """Grade ``scaled_dot_product_attention(Q, K, V, mask=None, scale=True)``.

    Parameters
    ----------
    cases : sequence of dict
        Each has ``description``, ``Q``, ``K``, ``V`` and optionally ``mask``
        and ``scale``; both the output and the weights are compared.
    """
    def case_check(case):
        def run():
            kwargs = {key: case[key] for key in ("mask", "scale") if key in case}
            got = _call(scaled_dot_product_attention, "scaled_dot_product_attention",
                        case["Q"], case["K"], case["V"], **kwargs)
            output, weights = expect_pair("scaled_dot_product_attention", got)
            ref_output, ref_weights = reference.scaled_dot_product_attention(case["Q"], case["K"], case["V"], **kwargs)
            _expect_order(output, weights, ref_output, ref_weights)
            expect_array("the weights", weights, ref_weights)
            expect_array("the output", output, ref_output)
        return Check(case["description"], run)

    return run_checks("scaled_dot_product_attention", [case_check(case) for case in cases], points)


def grade_causal_self_attention(causal_self_attention: Callable, *, cases: Sequence[dict], points: float) -> float:
    """Grade ``causal_self_attention(x, W_q, W_k, W_v, scale=True)``.

    Parameters
    ----------
    cases : sequence of dict
        Each has ``description``, ``x``, ``W_q``, ``W_k``, ``W_v`` and
        optionally ``scale``.
    """
    def case_check(case):
        def run():
            args = (case["x"], case["W_q"], case["W_k"], case["W_v"])
            kwargs = {"scale": case["scale"]} if "scale" in case else {}
            got = _call(causal_self_attention, "causal_self_attention", *args, **kwargs)
            output, weights = expect_pair("causal_self_attention", got)
            ref_output, ref_weights = reference.causal_self_attention(*args, **kwargs)
            _expect_order(output, weights, ref_output, ref_weights)
            expect_array("the weights", weights, ref_weights)
            expect_array("the output", output, ref_output)
        return Check(case["description"], run)

    return run_checks("causal_self_attention", [case_check(case) for case in cases], points)


def grade_attention_entropy(attention_entropy: Callable, *, cases: Sequence[tuple[str, np.ndarray]],
                            points: float) -> float:
    """Grade ``attention_entropy(weights)``: nats, 0 · log 0 = 0, one value per row.

    Parameters
    ----------
    cases : sequence of (description, weights)
    """
    def case_check(description, weights):
        def run():
            expect_array("the entropies", _call(attention_entropy, "attention_entropy", weights),
                         reference.attention_entropy(weights))
        return Check(description, run)

    return run_checks("attention_entropy", [case_check(d, w) for d, w in cases], points)
