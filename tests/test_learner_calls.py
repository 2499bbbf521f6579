"""The one way to call a learner's function (core/calls.py) and the self-check helpers built on it (core/self_check.py)."""

import importlib
import inspect
import warnings

import numpy as np
import pytest

from attention_lab.core import values, worked
from attention_lab.core.calls import FunctionTimedOut, call_learner
from attention_lab.core.self_check import attempt, call_recording_warnings, normal_arrays, self_check
from attention_lab.core.worked import SelfCheckFailed, passes_worked_cases
from autograder.assignments.a01_attention import reference

A1 = "01_scaled_dot_product_attention"


def overflow(x):
    print("printed by the learner")
    return np.exp(x)


def test_recorded_warnings_use_numpys_default_error_handling(capsys):
    caught = []
    with np.errstate(all="ignore"):  # as after a learner's np.seterr(all="ignore") in an earlier cell
        result = call_learner(overflow, np.array([1000.0]), seconds=5, record_warnings=caught)
    assert np.isinf(result).all()
    assert [(w.category, "overflow" in str(w.message)) for w in caught] == [(RuntimeWarning, True)]
    assert capsys.readouterr() == ("", "")  # what the learner printed is discarded


def test_underflow_is_not_recorded_and_a_plain_warning_is():
    caught = []
    call_learner(lambda: (np.exp(np.array([-1000.0])), warnings.warn("mine", UserWarning)), seconds=5,
                 record_warnings=caught)
    assert [str(w.message) for w in caught] == ["mine"]


def test_warnings_are_recorded_also_when_the_call_raises():
    def warn_then_fail():
        np.log(np.zeros(1))
        raise ValueError("after a warning")

    caught = []
    with pytest.raises(ValueError, match="after a warning"):
        call_learner(warn_then_fail, seconds=5, record_warnings=caught)
    assert ["divide by zero" in str(w.message) for w in caught] == [True]


def test_without_recording_nothing_warns_outside():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning that escaped would raise here
        call_learner(lambda x: np.log(x), np.zeros(2), seconds=5)


def test_copies_protect_keyword_arrays_too():
    mask = np.ones(3, dtype=bool)

    def spoil(x, mask):
        x[0], mask[0] = 99.0, False
        return x

    x = np.zeros(3)
    assert call_learner(spoil, x, seconds=5, copy_arrays=True, mask=mask)[0] == 99.0
    assert x[0] == 0.0 and mask[0]


def test_attempt_returns_the_result_or_the_error_and_never_fails_the_check():
    assert attempt(np.add, 1, 2) == (3, None)
    result, error = attempt(int, "not a number")
    assert result is None and isinstance(error, ValueError)

    def forever():
        while True:
            pass

    result, error = attempt(forever, seconds=0.2)
    assert result is None and isinstance(error, FunctionTimedOut)


def test_attempt_works_on_copies():
    x = np.zeros(2)
    attempt(lambda a: a.fill(1.0), x)
    assert not x.any()


def test_call_recording_warnings_names_an_argument_changed_in_place():
    def normalise_in_place(x, axis=-1):
        x -= x.max(axis=axis, keepdims=True)
        return reference.softmax(x, axis)

    with pytest.raises(SelfCheckFailed, match=r"modified its argument x in place"):
        call_recording_warnings(normalise_in_place, np.arange(3.0))
    assert call_recording_warnings(np.log, np.zeros(1))[1] == ["RuntimeWarning: divide by zero encountered in log"]


def test_passes_worked_cases_says_whether_without_printing(capsys):
    assert passes_worked_cases(A1, "softmax", reference.softmax)
    assert not passes_worked_cases(A1, "softmax", lambda x, axis=-1: np.exp(x) / np.exp(x).sum())
    assert not passes_worked_cases(A1, "no_such_function", reference.softmax)
    assert capsys.readouterr().out == ""


def test_normal_arrays_are_seeded_draws_in_order():
    a, b = normal_arrays(7, (2, 3), (4,))
    rng = np.random.default_rng(7)
    assert np.array_equal(a, rng.normal(size=(2, 3))) and np.array_equal(b, rng.normal(size=(4,)))
    assert a.dtype == np.float64


def test_the_worked_cases_use_the_stored_form_of_the_value_codec():
    value = (np.array([[1.5, np.nan], [np.inf, -0.0]], dtype=np.float32), np.int64(3), {"k": [True, None]})
    data = values.encode_stored(value)
    assert worked.encode(value) == data and isinstance(data["tuple"][0]["ndarray"]["data"], list)  # readable
    back = worked.decode(data)
    assert back[0].dtype == np.float32 and np.array_equal(back[0], value[0], equal_nan=True)
    assert type(back[1]) is np.int64 and back[2] == {"k": [True, None]}


# ---------------------------------------------------------------- self_check: a check of one learner's function
@self_check(A1)
def check_probabilities(softmax):
    """Self-check ``softmax`` on one more input.

    A paragraph of its own, kept as it is.

    The learner's function: an array ``x``; returns its softmax along the last axis.

    Fails when the row of ``[0, 0]`` is not ``[0.5, 0.5]``.
    """
    if not np.allclose(softmax(np.zeros((1, 2))), 0.5):
        raise SelfCheckFailed("[0, 0] should give [0.5, 0.5]")
    print("✓ the body ran")
    return "what the body returned"


def test_a_self_check_runs_the_worked_cases_of_its_function_first_then_its_body(capsys):
    assert check_probabilities(reference.softmax) == "what the body returned"
    worked_line, body_line = capsys.readouterr().out.splitlines()
    assert worked_line.startswith("✓ softmax gives the expected result on ") and body_line == "✓ the body ran"
    no_max_subtraction = lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)  # noqa: E731
    with pytest.raises(SelfCheckFailed, match="softmax fails the worked case"):  # float32 logits overflow
        check_probabilities(no_max_subtraction)
    assert "the body ran" not in capsys.readouterr().out


def test_a_self_check_without_worked_cases_or_with_some_of_them_runs_what_it_says(capsys):
    @self_check(A1, worked_cases=False)
    def check_alone(softmax):
        """Summary.\n\nThe learner's function.\n\nFails when it fails."""
    check_alone(lambda x, axis=-1: None)  # its worked cases would fail
    assert capsys.readouterr().out == ""

    seen = []

    @self_check(A1, select=lambda case: seen.append(case) or len(seen) == 1)
    def check_one(softmax):
        """Summary.\n\nThe learner's function.\n\nFails when it fails."""
    check_one(reference.softmax)
    assert len(seen) == len(worked.worked_cases(A1, "softmax")) > 1
    assert capsys.readouterr().out == "✓ softmax gives the expected result on 1 worked case\n"


def test_a_self_check_has_its_bodys_name_and_signature_and_a_numpydoc_docstring():
    assert check_probabilities.__name__ == "check_probabilities"
    assert str(inspect.signature(check_probabilities)) == "(softmax)"
    assert inspect.getdoc(check_probabilities) == (
        "Self-check ``softmax`` on one more input.\n\nA paragraph of its own, kept as it is.\n\n"
        "Parameters\n----------\nsoftmax : callable\n"
        "    The learner's function: an array ``x``; returns its softmax along the last axis.\n\n"
        "Raises\n------\nSelfCheckFailed\n"
        "    At the first worked case it gets wrong (naming the known mistake where one matches), then when\n"
        "    the row of ``[0, 0]`` is not ``[0.5, 0.5]``.")
    with pytest.raises(TypeError, match="check_vague's docstring should end with a paragraph \"The learner's function"):
        @self_check(A1)
        def check_vague(softmax):
            """Self-check softmax somehow."""


CHECK_MODULES = ["a01_attention", "a02_multi_head", "a03_positional", "a04_masking", "a05_kv_cache",
                 "a06_gradients"]


@pytest.mark.parametrize("folder", CHECK_MODULES)
def test_every_self_check_documents_each_function_it_checks_and_what_it_raises(folder):
    module = importlib.import_module(f"attention_lab.{folder}.checks")
    checks = [f for name, f in vars(module).items() if name.startswith("check_") and inspect.isfunction(f)
              and f.__module__ == module.__name__]
    assert len(checks) >= 4
    for check in checks:
        doc = inspect.getdoc(check)
        parameters = doc.split("Parameters\n----------\n")[1].split("\n\n")[0]
        named = {name.strip() for line in parameters.splitlines() if not line.startswith(" ")
                 for name in line.split(" : ")[0].split(",")}
        assert named == set(inspect.signature(check).parameters), check.__name__
        assert "\nRaises\n------\nSelfCheckFailed\n    " in doc, check.__name__
