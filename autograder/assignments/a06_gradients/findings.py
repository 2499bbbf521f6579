"""What the experiment of :mod:`autograder.assignments.a06_gradients.experiment` shows, as sentences paired with checks.

Each :class:`Finding` is one sentence a notebook or the visual may print
about the curves, and a predicate over :class:`~.experiment.GradientCurves`
that is True exactly when the sentence is true of those curves.
``tests/test_gradient_findings.py`` evaluates every predicate for several
seeds and values of T, so a sentence cannot drift from the numbers. The
sentences were written from the computed values (T = 8 … 128, seeds 0–2,
256 rows per d_head), not from the expectation in the issue, which they
correct in two places: under ÷1 the gain first *rises* before it collapses,
and ÷d_k's problem is the gradient reaching Q (it shrinks like 1/√d_head),
not the gradient reaching the scores.

Index names: "none" = ÷1, "sqrt" = ÷√d_k, "linear" = ÷d_k (see
:data:`~.experiment.SCALINGS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from autograder.assignments.a06_gradients.experiment import GradientCurves


@dataclass(frozen=True)
class Finding:
    """One sentence about the curves and the check that makes it true.

    Attributes
    ----------
    name : str
        Short identifier ("unscaled_gain_rises_then_collapses").
    sentence : str
        What a learner reads; numbers in it are bounds the predicate checks.
    holds : callable
        ``holds(curves) -> bool``.
    """

    name: str
    sentence: str
    holds: Callable[[GradientCurves], bool]


def _from(curves: GradientCurves, d_min: int) -> np.ndarray:
    """Boolean selector of the d_heads ≥ ``d_min``."""
    return curves.d_heads >= d_min


def _within(values: np.ndarray, target, relative: float) -> bool:
    return bool(np.all(np.abs(np.asarray(values) / target - 1.0) <= relative))


def _same_at_one(c: GradientCurves) -> bool:
    i = c.at(1)
    return all(np.allclose([curve["none"][i], curve["linear"][i]], curve["sqrt"][i], rtol=1e-12, atol=0)
               for curve in (c.gain, c.score_gradient, c.query_gradient, c.entropy))


def _score_std(c: GradientCurves) -> bool:
    d = c.d_heads.astype(float)
    return (_within(c.score_std["none"], np.sqrt(d), 0.15) and _within(c.score_std["sqrt"], 1.0, 0.15)
            and _within(c.score_std["linear"], 1.0 / np.sqrt(d), 0.15))


def _unscaled_gain(c: GradientCurves) -> bool:
    gain = c.gain["none"]
    peak = int(np.argmax(gain))
    return (4 <= c.d_heads[peak] <= 64 and 0.4 <= c.max_weight["none"][peak] <= 0.8
            and gain[c.at(512)] < gain[peak] / 10 and c.max_weight["none"][c.at(512)] > 0.98)


def _unscaled_query_gradient(c: GradientCurves) -> bool:
    moderate = (c.d_heads >= 2) & (c.d_heads <= 32)
    q = c.query_gradient
    return (bool(np.all(q["none"][moderate] > q["sqrt"][moderate]))
            and q["none"][c.at(512)] < np.max(q["none"]) / 3)


def _scaled_gain_and_gradients_settle(c: GradientCurves) -> bool:
    late = _from(c, 8)
    return all(_within(curve["sqrt"][late], np.median(curve["sqrt"][late]), 0.15)
               for curve in (c.gain, c.score_gradient, c.query_gradient)) \
        and c.gain["sqrt"][c.at(1)] < 0.9 * np.median(c.gain["sqrt"][late])


def _scaled_entropy(c: GradientCurves) -> bool:
    H = c.entropy["sqrt"]
    return bool(np.ptp(H) < 0.2 and np.all(H / c.ceiling >= 0.8) and np.all(H / c.ceiling <= 0.95))


def _linear_tends_to_uniform(c: GradientCurves) -> bool:
    gain = c.gain["linear"][_from(c, 2)]
    return (bool(np.all(np.diff(gain) <= 0)) and bool(np.all(c.gain["linear"] >= c.uniform_gain))
            and c.gain["linear"][c.at(512)] <= 1.15 * c.uniform_gain
            and _within(c.score_gradient["linear"][_from(c, 64)], c.uniform_score_gradient, 0.10)
            and c.ceiling - c.entropy["linear"][c.at(512)] < 0.002)


def _linear_query_gradient_vanishes(c: GradientCurves) -> bool:
    late = _from(c, 16)
    scaled_back = c.query_gradient["linear"][late] * np.sqrt(c.d_heads[late])
    return _within(scaled_back, c.uniform_score_gradient, 0.10)


def _entropy_ranks_the_wrong_way(c: GradientCurves) -> bool:
    d2 = _from(c, 2)
    H, q = c.entropy, c.query_gradient
    ranked = bool(np.all(H["linear"][d2] > H["sqrt"][d2]) and np.all(H["sqrt"][d2] > H["none"][d2]))
    return ranked and bool(np.all(q["linear"][d2] < q["sqrt"][d2])) \
        and bool(np.all(q["sqrt"][_from(c, 128)] >= 10 * q["linear"][_from(c, 128)]))


FINDINGS: tuple[Finding, ...] = (
    Finding("same_at_d_head_1",
            "At d_head = 1 the three scalings are the same function (√1 = 1), so their curves start together.",
            _same_at_one),
    Finding("score_spread",
            "The scores' standard deviation is √d_head without scaling, 1 with ÷√d_k and 1/√d_head with ÷d_k "
            "(each within 15 %, the sampling error of 256 rows): only ÷√d_k keeps the score variance at 1 whatever d_head is.",
            _score_std),
    Finding("unscaled_gain_rises_then_collapses",
            "Without scaling the softmax Jacobian's gain ‖J‖₂ first rises, peaking at a d_head between 4 and 64 (later for larger T) "
            "where the median largest weight of a row is 0.4–0.8, then collapses as the rows saturate: at "
            "d_head = 512 it is below a tenth of its peak and the median largest weight is above 0.98.",
            _unscaled_gain),
    Finding("unscaled_query_gradient",
            "Without scaling the gradient reaching Q is larger than with ÷√d_k for d_head from 2 to 32 (the "
            "keys' length √d_head multiplies it); it falls only once the rows saturate: at d_head = 512 it is "
            "below a third of its peak (with more keys the rows saturate later).",
            _unscaled_query_gradient),
    Finding("scaled_settles",
            "With ÷√d_k the gain and the gradients reaching the scores and Q settle: from d_head = 8 on each stays "
            "within 15 % of its median over those d_head. At d_head = 1 the gain is lower (below 0.9 of it), "
            "because the spread ‖q‖/√d_head of a row's scores varies more from row to row when d_head is small.",
            _scaled_gain_and_gradients_settle),
    Finding("scaled_entropy_flat",
            "With ÷√d_k the mean row entropy is independent of d_head (it varies by less than 0.2 nats over "
            "d_head = 1 … 512) and stays between 0.8 and 0.95 of the ceiling ln T.",
            _scaled_entropy),
    Finding("linear_tends_to_uniform",
            "With ÷d_k the scores shrink like 1/√d_head and stop mattering: from d_head = 2 on the gain falls "
            "toward that of a uniform row, 1/T (at d_head = 512 it is within 15 % of 1/T), the gradient reaching "
            "the scores is a uniform row's (within 10 % from d_head = 64 on), and the entropy is within 0.002 "
            "nats of the ceiling ln T at d_head = 512.",
            _linear_tends_to_uniform),
    Finding("linear_query_gradient_vanishes",
            "With ÷d_k the gradient reaching Q vanishes like 1/√d_head: from d_head = 16 on, √d_head times it "
            "equals a uniform row's gradient at the scores within 10 % (the keys add √d_head, the divisor takes "
            "away d_head).",
            _linear_query_gradient_vanishes),
    Finding("entropy_ranks_the_wrong_way",
            "Entropy ranks ÷d_k first at every d_head ≥ 2 (then ÷√d_k, then ÷1), yet ÷d_k passes less gradient "
            "to Q than ÷√d_k at every d_head ≥ 2, and at least 10 times less from d_head = 128 on: a spread-out "
            "row is not a trainable one.",
            _entropy_ranks_the_wrong_way),
)


def false_findings(curves: GradientCurves) -> list[str]:
    """Names of the findings whose predicate is False for ``curves`` (empty when every sentence is true)."""
    return [finding.name for finding in FINDINGS if not finding.holds(curves)]
