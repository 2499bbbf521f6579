"""What the kernel sends is screened before grading: forged probe output is named, learner strings are capped,
and a learner's BaseException (SystemExit, KeyboardInterrupt, its own subclass) is a result like any other."""

import nbformat
import numpy as np
import pytest

from attention_lab.core import probe, values as wire
from autograder import assignments
from autograder.grader.comparison import Grader
from autograder.grader.probe_output import CAPS, screen, why_missing
from conftest import ASSIGNMENT

GRADER = Grader(assignments.get(ASSIGNMENT))
REQUEST = GRADER.request("test_softmax")


def output(results) -> dict:
    return nbformat.v4.new_output("display_data", data={probe.MIME: results, "text/plain": "sent"})


def genuine(namespace=None):
    namespace = namespace or {"softmax": lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)}
    return probe.collect(namespace, wire.unpack(wire.pack(REQUEST)))


def test_genuine_results_pass_unchanged():
    results = genuine()
    assert screen(REQUEST, [output(results)]) == (results, None)


@pytest.mark.parametrize("forge, words", [
    (lambda r: {**r, "results": r["results"][:-1]}, "results for"),
    (lambda r: {**r, "results": [{"status": "returned", "value": True, "args_after": [], "warnings": []}] * len(r["results"])},
     "arguments read back"),
    (lambda r: {**r, "results": [{"status": "passed"}] * len(r["results"])}, "known status"),
    (lambda r: {**r, "results": [{"status": "raised", "type": "X", "mro": [], "message": ""}] * len(r["results"])},
     "without its classes"),
    (lambda r: "all tests passed", "not a list of results"),
])
def test_forged_results_are_named_for_what_they_are(forge, words):
    found, problem = screen(REQUEST, [output(forge(genuine()))])
    assert found is None and problem.startswith("the probe's output was forged") and words in problem


def test_two_probe_outputs_in_one_cell_are_forged():
    results = genuine()
    found, problem = screen(REQUEST, [output(results), output(results)])
    assert found is None and "sent 2 probe outputs" in problem


def test_learner_strings_are_capped():
    huge = type("Y" * 10_000, (ValueError,), {})

    def softmax(x, axis=-1):
        raise huge("Z" * 100_000)

    found, problem = screen(REQUEST, [output(genuine({"softmax": softmax}))])
    record = found["results"][0]
    assert problem is None and record["status"] == "raised"
    assert len(record["type"]) <= CAPS["type"] + 1 and len(record["message"]) <= CAPS["message"] + 1
    assert all(len(name) <= CAPS["type"] + 1 for name in record["mro"])
    verdict = GRADER.grade({"test_softmax": found}, {"test_softmax": 2.0})["test_softmax"]
    assert "Y" * 200 not in verdict.text() and "Z" * 400 not in verdict.text()


@pytest.mark.parametrize("raised", [SystemExit("bye"), KeyboardInterrupt(), type("GiveUp", (BaseException,), {})("no")])
def test_a_base_exception_from_the_learners_function_is_reported_as_raised(raised):
    def softmax(x, axis=-1):
        raise raised

    results = genuine({"softmax": softmax})
    assert all(r["status"] == "raised" and r["type"] == type(raised).__name__ for r in results["results"])
    verdict = GRADER.grade({"test_softmax": screen(REQUEST, [output(results)])[0]}, {"test_softmax": 2.0})["test_softmax"]
    assert verdict.score == 0 and f"your function raised {type(raised).__name__}" in verdict.text()
    assert "did not run to the end" not in verdict.text()


def test_why_a_cell_sent_nothing():
    ran = nbformat.v4.new_code_cell("x")
    ran.execution_count, ran.outputs = 1, [nbformat.v4.new_output("stream", text="hi")]
    assert "the notebook replaced the probe" in why_missing(ran, None)
    failed = nbformat.v4.new_code_cell("x")
    failed.outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="x", traceback=[])]
    assert why_missing(failed, None) == "the cell stopped with NameError before the probe sent its results"
    assert why_missing(ran, "the kernel was killed") == "the kernel was killed"


def test_an_array_argument_not_read_back_counts_as_modified():
    # found by a reviewer: a wrapped call_case that blanked args_after hid a softmax that edits its input in place
    def in_place(x, axis=-1):
        x -= x.max(axis=axis, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=axis, keepdims=True)
        return x

    honest = genuine({"softmax": lambda x, axis=-1: np.exp(x - x.max(axis=axis, keepdims=True))
                      / np.exp(x - x.max(axis=axis, keepdims=True)).sum(axis=axis, keepdims=True)})
    edits = genuine({"softmax": in_place})
    blanked = {**edits, "results": [{**r, "args_after": [None] * len(r["args_after"])} for r in edits["results"]]}
    screened = [screen(REQUEST, [output(r)])[0]["results"] for r in (honest, edits, blanked)]
    passed = [[GRADER.passes("test_softmax", i, record) for i, record in enumerate(results)] for results in screened]
    assert all(passed[0])
    assert not any(passed[1]) and not any(passed[2])
