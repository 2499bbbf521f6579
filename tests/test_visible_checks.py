"""The visible self-checks: silent on correct answers, and a plain-words diagnosis of each known mistake."""

import re

import pytest

from attention_lab.a01_attention import checks
from autograder.assignments.a01_attention import reference
from autograder.nbgrader.notebook_cells import read, solution_cells
from autograder.assignments.a01_attention.bank import CORRECT, MISTAKES
from conftest import SOURCE_NB
from notebook_harness import namespace_with

ALL_CHECKS = [
    ("check_softmax", ["softmax"]),
    ("check_attention_scores", ["attention_scores"]),
    ("check_scaling", ["attention_scores"]),
    ("check_causal_mask", ["causal_mask"]),
    ("check_scaled_dot_product_attention", ["scaled_dot_product_attention"]),
    ("check_causal_self_attention", ["causal_self_attention"]),
    ("check_attention_entropy", ["attention_entropy"]),
    ("check_rows_are_weighted_averages", ["scaled_dot_product_attention"]),
    ("check_causality", ["causal_self_attention"]),
    ("check_scaling_prevents_saturation", ["scaled_dot_product_attention", "attention_entropy"]),
]

# mistake → the self-check that must catch it; its message names the mistake and gives its hint
DIAGNOSES = {
    "mask_flipped": "check_causal_mask",
    "diagonal_blocked": "check_causal_mask",
    "one_step_future": "check_causal_mask",
    "softmax_wrong_axis": "check_softmax",
    "softmax_no_max_subtraction": "check_softmax",
    "softmax_ignores_axis": "check_softmax",
    "scale_by_d": "check_scaling",
    "no_scaling": "check_scaling",
    "mask_with_zero": "check_scaled_dot_product_attention",
    "mask_after_softmax": "check_scaled_dot_product_attention",
    "attention_softmax_over_queries": "check_scaled_dot_product_attention",
    "attention_unstable_softmax": "check_scaled_dot_product_attention",
    "keys_times_queries": "check_attention_scores",
    "entropy_in_bits": "check_attention_entropy",
    "self_attention_shares_projection": "check_causal_self_attention",
}
PASSED_LINES = 20  # ✓ lines of all the self-checks on a correct solution


def run_all(namespace):
    for check, names in ALL_CHECKS:
        getattr(checks, check)(*(namespace[n] for n in names))


def test_reference_passes_every_self_check(capsys):
    run_all(vars(reference))
    assert capsys.readouterr().out.count("✓") == PASSED_LINES


def test_source_solution_passes_every_self_check():
    run_all(namespace_with(solution_cells(read(SOURCE_NB))))


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_variants_pass_every_self_check(name):
    run_all(namespace_with({**solution_cells(read(SOURCE_NB)), **CORRECT[name].cells}))


def test_attention_returning_a_list_passes_the_self_checks_as_the_grader_gives_it_full_marks():
    """``return [output, weights]``: the grader compares a list with the reference's tuple item by item (full marks),
    so the self-checks accept it too instead of asking for a tuple."""
    from autograder import assignments
    from autograder.grader.in_process import grade_answers

    solution = solution_cells(read(SOURCE_NB))
    as_list = {"scaled_dot_product_attention": solution["scaled_dot_product_attention"].replace(
        "return weights @ V, weights", "return [weights @ V, weights]")}
    assert as_list["scaled_dot_product_attention"] != solution["scaled_dot_product_attention"]
    run_all(namespace_with({**solution, **as_list}))
    graded = grade_answers(assignments.get(checks.ASSIGNMENT), as_list)
    assert all(result.score == result.points for result in graded.values()), \
        [result.text() for result in graded.values() if result.score != result.points]


def test_every_mistake_has_a_diagnosis():
    assert set(DIAGNOSES) == set(MISTAKES)


@pytest.mark.parametrize("name", sorted(DIAGNOSES))
def test_self_check_names_the_mistake(name):
    check = DIAGNOSES[name]
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), **MISTAKES[name].cells})
    arguments = dict(ALL_CHECKS)[check]
    with pytest.raises(checks.SelfCheckFailed) as failure:
        getattr(checks, check)(*(namespace[n] for n in arguments))
    message = str(failure.value)
    assert f"This looks like a known mistake: {MISTAKES[name].description}. Hint: {MISTAKES[name].hint}" in message


@pytest.mark.parametrize("check, answer, words", [
    # (a softmax that ignores `axis` is the known mistake softmax_ignores_axis, named above)
    ("check_softmax", "def softmax(x, axis=-1):\n    e = np.exp(x - x.min(axis=axis, keepdims=True))\n"
                      "    return e / e.sum(axis=axis, keepdims=True)", "float32 logits [100, 0] should be [1, 0]"),
    ("check_attention_scores", "def attention_scores(Q, K, scale=True):\n"
                               "    s = np.einsum('qd,kd->qk', Q, K)\n"
                               "    return s / np.sqrt(Q.shape[-1]) if scale else s",
     "attention_scores raised ValueError: operand has more dimensions than subscripts"),
    ("check_causal_mask", "def causal_mask(T):\n    return np.tril(np.ones((T, T), dtype=bool)) if T < 4 else "
                          "np.ones((T, T), dtype=bool)", "causal_mask(5) lets a query attend to a future key"),
    ("check_scaled_dot_product_attention",
     "def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
     "    s = attention_scores(Q, K)\n    s = s if mask is None else np.where(mask, s, -np.inf)\n"
     "    w = softmax(s)\n    return w @ V, w", "is `scale` passed on to attention_scores?"),
    ("check_attention_entropy", "def attention_entropy(weights):\n    w = weights.reshape(-1, weights.shape[-1])\n"
                                "    safe = np.where(w > 0, w, 1.0)\n    return -np.sum(w * np.log(safe), axis=-1)",
     "one value per query row, shape (..., T_q) = (2, 3) for weights of shape (2, 3, 4); got shape (6,)"),
])
def test_property_checks_after_the_worked_cases(check, answer, words):
    """Wrong answers that pass every worked case are caught by the property checks, in plain words."""
    name = answer.split("(")[0].removeprefix("def ")
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), name: answer})
    with pytest.raises((checks.SelfCheckFailed, ValueError)) as failure:
        getattr(checks, check)(namespace[name])
    assert words in str(failure.value)


def test_causality_fact_catches_a_leak():
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), **MISTAKES["mask_flipped"].cells})
    with pytest.raises(checks.SelfCheckFailed, match="earlier positions can see the future"):
        checks.check_causality(namespace["causal_self_attention"])


def test_scaling_fact_catches_ignored_scale():
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), **MISTAKES["no_scaling"].cells})
    with pytest.raises(checks.SelfCheckFailed, match="is `scale` ignored"):
        checks.check_scaling_prevents_saturation(namespace["scaled_dot_product_attention"],
                                                 namespace["attention_entropy"])


def test_scaling_fact_reports_entropies_in_nats(capsys):
    scaled, unscaled = checks.check_scaling_prevents_saturation(reference.scaled_dot_product_attention,
                                                                reference.attention_entropy)
    assert 2.6 < scaled < 3.3 and unscaled < 0.5  # ≈ 0.87 ln 32 and ≈ 0.2 (shared/notes/mistakes.md table)
    assert "nats" in capsys.readouterr().out


def test_expect_shapes_fails_on_the_release_stub_in_plain_words():
    namespace = namespace_with({"softmax": "def softmax(x, axis=-1):\n    raise NotImplementedError()"})
    with pytest.raises(checks.SelfCheckFailed) as failure:
        checks.expect_shapes(namespace["softmax"], [(2, 3)], __import__("numpy").zeros((2, 3)))
    assert str(failure.value) == ("softmax is not answered yet: write its code in place of "
                                  "`raise NotImplementedError()` and run its cell again")


def test_expect_shapes_does_not_charge_an_unfinished_earlier_step(capsys):
    import numpy as np
    answers = {**solution_cells(read(SOURCE_NB)), "softmax": "def softmax(x, axis=-1):\n    raise NotImplementedError()"}
    namespace = namespace_with(answers)
    checks.expect_shapes(namespace["scaled_dot_product_attention"], [(2, 5), (2, 3)],
                         np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 5)))
    assert "not checked here" in capsys.readouterr().out


def test_expect_shapes_rejects_wrong_shapes():
    import numpy as np
    namespace = namespace_with({"causal_mask": "def causal_mask(T):\n    return np.ones((T, T + 1), bool)"})
    with pytest.raises(checks.SelfCheckFailed, match=r"shape \(3, 3\); got shape \(3, 4\)"):
        checks.expect_shapes(namespace["causal_mask"], [(3, 3)], 3)


def test_expect_shapes_does_not_charge_a_missing_earlier_function(capsys):
    import numpy as np
    answers = {**solution_cells(read(SOURCE_NB)), "causal_mask": "def causal_mask(T)\n    pass"}
    namespace = namespace_with(answers)
    assert "causal_mask" not in namespace
    checks.expect_shapes(namespace["causal_self_attention"], [(3, 2), (3, 3)],
                         np.ones((3, 4)), np.ones((4, 2)), np.ones((4, 2)), np.ones((4, 2)))
    assert "not checked here" in capsys.readouterr().out


@pytest.mark.parametrize("returned, error, message", [
    # an error in the function's own code is charged, with the line that raised it
    ("w @ V.T, w", checks.SelfCheckFailed,
     r"^scaled_dot_product_attention raised ValueError: matmul.*\n  at line 3 of your scaled_dot_product_attention"),
    ("w, w @ V", checks.SelfCheckFailed, r"returned \(weights, output\)"),  # a swapped pair is named
])
def test_expect_shapes_charges_the_functions_own_mistakes(returned, error, message):
    import numpy as np
    attention = ("def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):\n"
                 f"    w = softmax(attention_scores(Q, K, scale))\n    return {returned}")
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), "scaled_dot_product_attention": attention})
    with pytest.raises(error, match=message):
        checks.expect_shapes(namespace["scaled_dot_product_attention"], [(3, 5), (3, 3)],
                             np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 5)))


def test_raw_numpy_errors_become_plain_hints():
    answers = {**solution_cells(read(SOURCE_NB)),
               "attention_scores": "def attention_scores(Q, K, scale=True):\n"
                                   "    s = Q @ K.T\n    return s / np.sqrt(Q.shape[-1]) if scale else s"}
    namespace = namespace_with(answers)
    with pytest.raises(checks.SelfCheckFailed, match=r"transpose only the last two axes"):
        checks.check_attention_scores(namespace["attention_scores"])
    answers["softmax"] = "def softmax(x, axis=-1):\n    e = np.exp(x - x.max(axis=axis))\n    return e / e.sum(axis=axis)"
    namespace = namespace_with(answers)
    with pytest.raises(checks.SelfCheckFailed, match=r"keepdims=True"):
        checks.check_softmax(namespace["softmax"])
    answers["causal_mask"] = "def causal_mask(T):\n    raise NotImplementedError()"
    namespace = namespace_with(answers)
    with pytest.raises(checks.SelfCheckFailed, match=r"^causal_mask is not answered yet"):
        checks.check_causal_mask(namespace["causal_mask"])


def test_a_hanging_earlier_function_does_not_fail_the_visible_part(monkeypatch, capsys):
    import functools

    import numpy as np

    from attention_lab.core import self_check, worked

    # the limit, shortened to keep the test quick: the visible part calls through self_check.attempt and the check
    # runs its worked cases, whose limits are not checks.CALL_SECONDS (alone it left two 5 s waits)
    monkeypatch.setattr(checks, "CALL_SECONDS", 0.3)
    monkeypatch.setattr(checks, "attempt", functools.partial(self_check.attempt, seconds=0.3))
    monkeypatch.setattr(worked, "CALL_SECONDS", 0.3)
    answers = {**solution_cells(read(SOURCE_NB)), "softmax": "def softmax(x, axis=-1):\n    while True:\n        pass"}
    namespace = namespace_with(answers)
    checks.expect_shapes(namespace["scaled_dot_product_attention"], [(3, 5), (3, 3)],
                         np.ones((3, 4)), np.ones((3, 4)), np.ones((3, 5)))
    assert "not checked here" in capsys.readouterr().out
    with pytest.raises(checks.SelfCheckFailed, match="look for a loop that never ends"):
        checks.check_softmax(namespace["softmax"])


# ---- issue 9 §4: the visible checks agree with the grader, in plain words --------------------------------

IN_PLACE_SOFTMAX = ("def softmax(x, axis=-1):\n    x -= x.max(axis=axis, keepdims=True)\n    np.exp(x, out=x)\n"
                    "    x /= x.sum(axis=axis, keepdims=True)\n    return x")


def test_a_softmax_that_modifies_its_input_fails_its_self_check_naming_the_argument():
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), "softmax": IN_PLACE_SOFTMAX})
    with pytest.raises(checks.SelfCheckFailed, match="softmax modified its argument x in place; compute a new array"):
        checks.check_softmax(namespace["softmax"])


@pytest.mark.parametrize("unscaled", [
    MISTAKES["no_scaling"].cells["attention_scores"],
    "def attention_scores(Q, K, scale=True):\n    if scale:\n        raise NotImplementedError()\n"
    "    return Q @ np.swapaxes(K, -1, -2)",  # step 3 not written yet
])
def test_step_2s_check_tests_scale_false_only_and_step_3s_the_scaling(unscaled, capsys):
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), "attention_scores": unscaled})
    checks.check_attention_scores(namespace["attention_scores"])
    assert "known mistake" not in capsys.readouterr().out
    with pytest.raises(checks.SelfCheckFailed):
        checks.check_scaling(namespace["attention_scores"])


def test_step_2s_check_still_catches_a_wrong_product():
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), **MISTAKES["keys_times_queries"].cells})
    with pytest.raises(checks.SelfCheckFailed, match="K Qᵀ instead of Q Kᵀ"):
        checks.check_attention_scores(namespace["attention_scores"])


def test_fact_3_fails_for_scores_divided_by_d_k_and_says_why(capsys):
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), **MISTAKES["scale_by_d"].cells})
    with pytest.raises(checks.SelfCheckFailed) as failure:
        checks.check_scaling_prevents_saturation(namespace["scaled_dot_product_attention"],
                                                 namespace["attention_entropy"])
    message = str(failure.value)
    assert message.startswith("the scaled weights are almost uniform: entropy 3.46 nats")
    assert "divide them by √d_k, not by d_k" in message
    assert "scaled 3.46 nats" in capsys.readouterr().out


def test_fact_3_text_says_what_the_check_tests_and_matches_the_printed_values(capsys):
    scaled, unscaled = checks.check_scaling_prevents_saturation(reference.scaled_dot_product_attention,
                                                                reference.attention_entropy)
    printed = capsys.readouterr().out
    assert f"scaled {scaled:.2f} nats, unscaled {unscaled:.2f} nats (uniform would be ln 32 = 3.47)" in printed
    text = " ".join(next(c.source for c in read(SOURCE_NB).cells if c.source.startswith("**Fact 3")).split())
    assert "close to the" not in text and "ceiling 3.47" not in text
    assert f"{unscaled:.2f} nats" in text and f"{scaled:.2f} nats" in text and r"\ln 32 \approx 3.47" in text
    low, high = checks.SCALED_GAP
    assert f"between {low:g} and {high:g} nats below" in text and "below half the scaled one" in text


def test_a_nan_entropy_is_explained_as_0_log_0():
    naive = "def attention_entropy(weights):\n    return -np.sum(weights * np.log(weights), axis=-1)"
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), "attention_entropy": naive})
    with pytest.raises(checks.SelfCheckFailed, match=r"0 · log 0 is 0 · \(−inf\) = NaN"):
        checks.check_attention_entropy(namespace["attention_entropy"])


@pytest.mark.parametrize("mistake, function", [
    ("softmax_wrong_axis", "revisit scaled_dot_product_attention (step 5)"),
    ("mask_after_softmax", "revisit scaled_dot_product_attention (step 5)"),
    ("mask_with_zero", "revisit scaled_dot_product_attention (step 5)"),
])
def test_fact_1_says_which_function_to_revisit(mistake, function):
    namespace = namespace_with({**solution_cells(read(SOURCE_NB)), **MISTAKES[mistake].cells})
    with pytest.raises(checks.SelfCheckFailed, match=re.escape(function)):
        checks.check_rows_are_weighted_averages(namespace["scaled_dot_product_attention"])


def test_an_exception_without_a_message_is_named_by_its_type_with_no_dangling_dash():
    namespace = namespace_with({"softmax": "def softmax(x, axis=-1):\n    raise ValueError()"})
    with pytest.raises(checks.SelfCheckFailed) as failure:
        checks.check_softmax(namespace["softmax"])
    assert "problem:  softmax raised ValueError\n            at line 2 of your softmax" in str(failure.value)
    assert "ValueError:" not in str(failure.value) and "— " not in str(failure.value)


def test_a_function_that_calls_an_unanswered_one_names_it():
    answers = {**solution_cells(read(SOURCE_NB)), "softmax": "def softmax(x, axis=-1):\n    raise NotImplementedError()"}
    namespace = namespace_with(answers)
    with pytest.raises(checks.SelfCheckFailed, match="scaled_dot_product_attention calls softmax, which is not answered "
                                                     "yet: answer softmax first"):
        checks.check_scaled_dot_product_attention(namespace["scaled_dot_product_attention"])


def test_in_a_notebook_a_failed_self_check_shows_only_its_message():
    """IPython's protocol for an exception's own traceback: no frame of attention_lab, the message first."""
    failure = checks.SelfCheckFailed("softmax fails the worked case …:\n  problem:  wrong values")
    assert failure._render_traceback_() == ["✗ softmax fails the worked case …:", "  problem:  wrong values"]
    long = checks.SelfCheckFailed("a hint " * 30 + "\n  problem:  " + "wrong " * 30)
    lines = long._render_traceback_()
    assert all(len(line) <= checks.SelfCheckFailed.WIDTH for line in lines)  # nbgrader validate cuts at 87
    assert " ".join(" ".join(lines).split()) == "✗ " + " ".join(str(long).split())  # nothing lost
    assert lines[-1].startswith("    wrong")  # a continuation keeps its line's indent
