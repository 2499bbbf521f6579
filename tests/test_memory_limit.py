"""The grader's child process with a limited address space (autograder/grader/memory_limit.py).

Trusted code on a case sized against the sandbox's memory (Case.memory_limit) runs there: an allocation
the sandbox would refuse fails with MemoryError, one that fits returns, and a hang or a crash is reported.
The code a call reaches (reachable_code) also keys the answers the in-process model keeps.
"""

import os
import resource
import signal

import numpy as np
import pytest

from autograder.grader.in_process import json_round_trip
from autograder.grader.memory_limit import ChildFailed, mapped_bytes, reachable_code, run_with_memory_limit

LIMIT = 256 * 2**20  # small, so the test allocates little


def _allocate(n_bytes):
    def thunk():
        try:
            return float(np.ones(n_bytes // 8).sum())
        except MemoryError as error:
            return f"MemoryError: {error}"
    return thunk


def test_an_allocation_over_the_limit_fails_and_one_under_it_returns():
    assert run_with_memory_limit(_allocate(64 * 2**20), LIMIT, 60) == 8 * 2**20
    refused = run_with_memory_limit(_allocate(2 * LIMIT), LIMIT, 60)
    assert refused.startswith("MemoryError")


def test_the_limit_is_added_to_what_the_process_maps_and_the_parent_is_untouched():
    before, limit = mapped_bytes(), resource.getrlimit(resource.RLIMIT_AS)
    assert before > 0  # /proc/self/status is readable here
    assert run_with_memory_limit(mapped_bytes, LIMIT, 60) >= before // 2  # the child maps what the parent did
    child = run_with_memory_limit(lambda: resource.getrlimit(resource.RLIMIT_AS)[0], LIMIT, 60)
    assert before + LIMIT <= child <= mapped_bytes() + LIMIT + 128 * 2**20
    assert resource.getrlimit(resource.RLIMIT_AS) == limit  # the parent's own limit is unchanged


def test_an_exception_the_call_does_not_catch_is_reported():
    with pytest.raises(ChildFailed, match="MemoryError"):
        run_with_memory_limit(lambda: np.ones(LIMIT // 4), LIMIT, 60)
    with pytest.raises(ChildFailed, match="ZeroDivisionError"):
        run_with_memory_limit(lambda: 1 / 0, LIMIT, 60)


def test_a_hang_is_stopped_and_a_crash_is_reported():
    with pytest.raises(ChildFailed, match="did not finish within 0.5 s"):
        run_with_memory_limit(lambda: signal.pause(), LIMIT, 0.5)
    with pytest.raises(ChildFailed, match=f"signal {int(signal.SIGKILL)}"):
        run_with_memory_limit(lambda: os.kill(os.getpid(), signal.SIGKILL), LIMIT, 60)


@pytest.mark.parametrize("limit, seconds, message", [(0, 1, "limit_bytes"), (True, 1, "limit_bytes"),
                                                      (LIMIT, 0, "seconds")])
def test_bad_arguments_name_themselves(limit, seconds, message):
    with pytest.raises(ValueError, match=message):
        run_with_memory_limit(lambda: None, limit, seconds)


def _functions(later_body: str, helper_sign: str = "+") -> dict:
    namespace = {"np": np}
    exec(f"def helper(x):\n    return x {helper_sign} 1\n"
         "def earlier(x):\n    return helper(x) * 2\n"
         f"def later(x):\n    return {later_body}\n", namespace)
    return namespace


def test_the_code_a_call_reaches_follows_names_except_through_opaque_ones():
    base, other_helper = _functions("earlier(x) + 1"), _functions("earlier(x) + 1", "-")  # helper: only through earlier
    assert reachable_code(base, "later") != reachable_code(other_helper, "later")
    assert (reachable_code(base, "later", opaque=["earlier"])
            == reachable_code(other_helper, "later", opaque=["earlier"]))
    undefined = _functions("earlier(x) + 1")
    del undefined["earlier"]  # an opaque name counts by its name whether or not it is defined
    assert reachable_code(base, "later", opaque=["earlier"]) == reachable_code(undefined, "later", opaque=["earlier"])
    assert reachable_code(base, "later", opaque=["earlier"]) != reachable_code(base, "later")
    # the call's own function is never opaque, and a name reached another way is followed that way
    assert reachable_code(base, "later", opaque=["later"]) == reachable_code(base, "later")
    assert (reachable_code(_functions("earlier(x) + helper(x)"), "later", opaque=["earlier"])
            != reachable_code(_functions("earlier(x) + helper(x)", "-"), "later", opaque=["earlier"]))


@pytest.mark.parametrize("data", [
    {"grade_id": "g", "cases": [{"args": [{"ndarray": "AAAA"}, 3, 2.5, -0.0, True, None], "kwargs": {}}]},
    ({"tuple": (1, 2)}, [(), []], "ü\ud800"),
    [float("nan"), float("inf")], {"x": np.float64(1.5)}, {1: "a", None: "b"}, [[[[[[[[[[]]]]]]]]]] * 3,
])
def test_the_fast_json_round_trip_gives_what_json_gives(data):
    import json

    expected = json.loads(json.dumps(data))
    got = json_round_trip(data)
    assert json.dumps(got) == json.dumps(expected) and type(got) is type(expected)


def test_the_fast_json_round_trip_raises_what_json_raises():
    import json

    for bad in ({"a": object()}, [np.int64(3)], {(1, 2): 3}):
        with pytest.raises(TypeError):
            json.dumps(bad)
        with pytest.raises(TypeError):
            json_round_trip(bad)
    deep: list = []
    deep.append(deep)
    with pytest.raises(ValueError, match="Circular"):
        json_round_trip(deep)


SOFTMAX_COUNTING_ITS_CALLS = '''
_calls = []

def softmax(x, axis=-1):
    _calls.append(1)  # reaches a list: the call's answer may depend on it
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return np.exp(shifted) / np.sum(np.exp(shifted), axis=axis, keepdims=True)
'''


def test_the_in_process_model_runs_a_call_again_only_when_its_request_or_reachable_code_changes(monkeypatch):
    from attention_lab.core import probe
    from autograder import assignments
    from autograder.grader import in_process
    from autograder.grader.answers import answer_namespace

    A1 = assignments.get("01_scaled_dot_product_attention")
    monkeypatch.setattr(in_process, "_ANSWERS", {})  # none kept from the tests before this one
    runs, collect = [], probe.collect
    monkeypatch.setattr(probe, "collect", lambda namespace, request: runs.append(request["grade_id"])
                        or collect(namespace, request))

    def answer(cells, grade_id, seed=None):
        namespace = answer_namespace(A1.name, A1.notebook, cells)
        return in_process.kernel_results(namespace, in_process.grader_for(A1, seed=seed).request(grade_id))

    first = answer({}, "test_softmax")
    assert answer({}, "test_softmax") == first and runs == ["test_softmax"]
    # another step's function rewritten: softmax's answer is kept; the rewritten step's call runs
    flipped = {"causal_mask": "def causal_mask(T):\n    return ~np.triu(np.ones((T, T), dtype=bool), k=1)\n"}
    assert answer(flipped, "test_softmax") == first and runs == ["test_softmax"]
    answer(flipped, "test_causal_mask")
    assert runs == ["test_softmax", "test_causal_mask"]
    # other hidden inputs: a new request, run
    answer({}, "test_softmax", seed=1)
    assert runs == ["test_softmax", "test_causal_mask", "test_softmax"]
    # a softmax that reaches a list is run every time
    del runs[:]
    answer({"softmax": SOFTMAX_COUNTING_ITS_CALLS}, "test_softmax")
    answer({"softmax": SOFTMAX_COUNTING_ITS_CALLS}, "test_softmax")
    assert runs == ["test_softmax", "test_softmax"]
