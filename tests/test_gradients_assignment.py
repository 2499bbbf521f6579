"""Assignment 6 as a graded assignment: what is particular to it (the generic tests cover the rest).

* ``numerical_gradient``'s hidden function crosses into the kernel as data (a CubicLoss's coefficients) in both
  value codecs, and is rebuilt equal;
* every claim the notebook makes about the curves is a sentence of ``findings.py`` (which its tests check
  against the computed values), and every finding is in the notebook;
* the student-side experiment, run on the reference functions, gives the grader's curves, so the findings hold
  for what the notebook and the explorer show;
* the explorer draws with the d_head and T sliders and reports a broken learner function in words.
"""

from __future__ import annotations

import numpy as np
import pytest

from attention_lab.a06_gradients import curves as student
from attention_lab.core import values, worked
from attention_lab.core.losses import CubicLoss
from autograder import assignments
from autograder.assignments.a06_gradients import experiment, reference
from autograder.assignments.a06_gradients.findings import FINDINGS
from autograder.nbgrader.notebook_cells import read
from conftest import REPO

A6 = assignments.get("06_gradients")


def _loss():
    rng = np.random.default_rng(0)
    return CubicLoss(*(rng.normal(size=(2, 3)) for _ in range(4)))


@pytest.mark.parametrize("codec", [values, worked], ids=["wire", "worked"])
def test_a_cubic_loss_crosses_both_codecs_as_its_coefficients_and_comes_back_equal(codec):
    loss = _loss()
    encoded = codec.encode(loss)
    assert set(encoded) == {"cubic_loss"} and len(encoded["cubic_loss"]) == 4
    decoded = codec.decode(encoded)
    assert isinstance(decoded, CubicLoss) and decoded == loss and decoded is not loss
    x = np.arange(6.0).reshape(2, 3)
    assert decoded(x) == loss(x)


def test_the_cubic_loss_gradient_is_its_derivative():
    loss, x = _loss(), np.linspace(-1, 1, 6).reshape(2, 3)
    assert reference.relative_error(loss.gradient(x), reference.numerical_gradient(loss, x)) < 1e-8
    with pytest.raises(ValueError, match=r"x must have shape \(2, 3\)"):
        loss(np.zeros(3))
    with pytest.raises(ValueError, match="one shape"):
        CubicLoss(np.zeros(2), np.zeros(2), np.zeros(3), np.zeros(2))


def test_the_hidden_numerical_gradient_cases_send_a_cubic_loss_and_no_code():
    from autograder.grader.in_process import grader_for

    request = grader_for(A6).request("test_numerical_gradient")
    assert all(set(case["args"][0]) == {"cubic_loss"} for case in request["cases"])


def _markdown(nb) -> str:
    return " ".join(" ".join(c.source.split()) for c in nb.cells if c.cell_type == "markdown")


def test_the_notebook_states_every_finding_word_for_word_and_no_other_claim_about_the_curves():
    nb = read(REPO / "source" / A6.name / A6.notebook)
    text = _markdown(nb)
    for finding in FINDINGS:
        assert " ".join(finding.sentence.split()) in text, finding.name
    shows = next(c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("### What the curves show"))
    numbered = [line.split(". ", 1)[1] for line in shows.splitlines() if line[:1].isdigit()]
    assert numbered == [finding.sentence for finding in FINDINGS]


@pytest.mark.parametrize("T", [16, 32])
def test_the_student_side_experiment_on_the_reference_gives_the_graders_curves(T):
    mine = student.gradient_curves(reference.softmax_backward, T=T, n_rows=64)
    theirs = experiment.gradient_curves(T=T, n_rows=64)
    for name in ("gain", "score_gradient", "query_gradient", "entropy"):
        for key in student.SCALINGS:
            np.testing.assert_allclose(getattr(mine, name)[key], getattr(theirs, name)[key], rtol=1e-9, atol=1e-12)


def test_a_wrong_softmax_backward_changes_the_curves():
    wrong = lambda p, g: p * g  # noqa: E731 — the −p pᵀ term forgotten
    mine = student.gradient_curves(wrong, T=16, n_rows=32)
    right = student.gradient_curves(reference.softmax_backward, T=16, n_rows=32)
    assert not np.allclose(mine.score_gradient["sqrt"], right.score_gradient["sqrt"])


def test_the_explorer_redraws_for_each_slider_and_names_a_broken_function():
    import matplotlib
    matplotlib.use("Agg")
    from attention_lab.a06_gradients.visual import GradientExplorer

    explorer = GradientExplorer(reference.softmax_jacobian, reference.softmax_backward, T=16, d_head=16, sync=True)
    first = explorer.image.value
    assert explorer.error is None and first[:4] == b"\x89PNG"
    explorer.d_head_slider.value = 512
    assert explorer.image.value != first and "d_head = 512" in explorer.summary.value
    np.testing.assert_allclose(explorer.jacobian, reference.softmax_jacobian(student.row_weights(512, 16, "none")))
    explorer.T_slider.value = 64
    assert explorer.curves.T == 64 and explorer.jacobian.shape == (64, 64)
    broken = GradientExplorer(lambda p: np.zeros(3), reference.softmax_backward, T=8, d_head=4, sync=True)
    assert "softmax_jacobian(p) for p of shape (8,) returned shape (3,)" in broken.summary.value


def test_the_explorer_caches_each_T_and_shows_what_a_fresh_explorer_shows():
    """A return to a T shown before blits onto that T's cached background: the picture is a fresh explorer's; a
    redefined softmax_backward (its cell re-run) computes the curves again."""
    import matplotlib
    matplotlib.use("Agg")
    from attention_lab.a06_gradients.visual import GradientExplorer

    explorer = GradientExplorer(reference.softmax_jacobian, reference.softmax_backward, T=16, d_head=8, sync=True)
    first_curves = explorer.curves
    explorer.T_slider.value = 32
    explorer.d_head_slider.value = 64
    explorer.T_slider.value = 16
    assert explorer.curves is first_curves  # cached, not recomputed
    fresh = GradientExplorer(reference.softmax_jacobian, reference.softmax_backward, T=16, d_head=64, sync=True)
    assert explorer.image.value == fresh.image.value and explorer.summary.value == fresh.summary.value
    scaled = lambda p, g: 2 * reference.softmax_backward(p, g)  # noqa: E731
    explorer.functions = (explorer.functions[0], scaled)
    explorer.d_head_slider.value = 32
    assert explorer.curves is not first_curves
    np.testing.assert_allclose(explorer.curves.score_gradient["sqrt"], 2 * first_curves.score_gradient["sqrt"])
    assert explorer.image.value != GradientExplorer(reference.softmax_jacobian, reference.softmax_backward, T=16,
                                                    d_head=32, sync=True).image.value
