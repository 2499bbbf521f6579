"""Assignment 7's draft answer bank: correct variants agree with the reference, every mistake is caught.

Runs the bank's own cells in this process (trusted code). The memory case runs in a child process
under the grading sandbox's address-space limit, as a learner's notebook would.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from answer_bank_checks import BankChecks
from conftest import REPO
from autograder.grader.bank import apply_edits

from autograder.assignments.a07_tiled_attention import bank
from autograder.assignments.a07_tiled_attention import reference as ref
CHECKS = BankChecks(bank, bank.hidden_cases(include_memory_case=False),
                    (REPO / "autograder" / "assignments" / "a07_tiled_attention" / "DESIGN.md").read_text())
VALUE_MISTAKES = sorted(name for name, m in bank.MISTAKES.items() if m.step != "test_tiled_attention_memory")


def test_the_steps_and_their_cases():
    assert list(bank.STEPS) == list(CHECKS.cases)
    CHECKS.steps_and_cases(points=10)


def test_the_solution_cells_give_the_reference_results():
    CHECKS.agrees_on_hidden_cases({})


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_on_the_hidden_cases(name):
    CHECKS.agrees_on_hidden_cases(bank.CORRECT[name].cells)


def _random_softmax_inputs(rng):
    for shape in [(7,), (3, 8), (2, 2, 6)]:
        x = rng.normal(0, rng.choice([1.0, 50.0, 400.0]), shape) + rng.choice([-900.0, 0.0, 900.0])
        x[rng.random(shape) < 0.2] = -np.inf
        cuts = np.sort(rng.choice(np.arange(1, shape[-1]), size=rng.integers(0, 4), replace=False))
        yield [x[..., a:b] for a, b in zip([0, *cuts], [*cuts, shape[-1]])]


def _random_attention_inputs(rng):
    for _ in range(6):
        causal = bool(rng.integers(2))
        T_k = int(rng.integers(1, 14))
        T_q = int(rng.integers(1, T_k + 1)) if causal else int(rng.integers(1, 14))
        batch = [(), (2,), (2, 3)][rng.integers(3)]
        yield (rng.normal(0, 2.0, batch + (T_q, 4)), rng.normal(0, 2.0, batch + (T_k, 4)),
               rng.normal(size=batch + (T_k, 3)), int(rng.integers(1, T_q + 2)), int(rng.integers(1, T_k + 2)), causal)


@pytest.mark.parametrize("name", sorted(bank.CORRECT))
def test_correct_variant_on_random_inputs(name):
    functions = CHECKS.namespace(bank.CORRECT[name].cells)
    rng = np.random.default_rng(sum(map(ord, name)))
    for blocks in _random_softmax_inputs(rng):
        np.testing.assert_allclose(functions["online_softmax"](blocks), ref.online_softmax(blocks), rtol=1e-9,
                                   atol=1e-12)
    for Q, K, V, block_q, block_k, causal in _random_attention_inputs(rng):
        np.testing.assert_array_equal(functions["tile_schedule"](Q.shape[-2], K.shape[-2], block_q, block_k, causal),
                                      ref.tile_schedule(Q.shape[-2], K.shape[-2], block_q, block_k, causal))
        np.testing.assert_allclose(functions["tiled_attention"](Q, K, V, block_q, block_k, causal),
                                   ref.tiled_attention(Q, K, V, block_q, block_k, causal), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", [None, *sorted(bank.CORRECT)])
def test_no_warnings_where_the_spec_forbids_them(name):
    CHECKS.no_warnings(bank.CORRECT[name].cells if name else {})


@pytest.mark.parametrize("name", VALUE_MISTAKES)
def test_mistake_is_wrong_on_every_case_of_its_step_except_those_it_does_not_involve(name):
    CHECKS.mistake_wrong_exactly_off_its_passes(name)


def test_mistakes_of_a_step_can_be_told_apart():
    CHECKS.mistakes_told_apart()


def test_edits_apply_exactly_once():
    CHECKS.edits_apply_once()
    with pytest.raises(ValueError, match="occurs 0 times"):
        apply_edits(bank.SOLUTION, (bank.Edit("online_softmax", "no such text", "x"),))
    with pytest.raises(ValueError, match="occurs 2 times"):
        apply_edits(bank.SOLUTION, (bank.Edit("tiled_attention", "np.arange(", "np.arange ("),))
    with pytest.raises(KeyError, match="no solution cell"):
        apply_edits(bank.SOLUTION, (bank.Edit("softmax", "a", "b"),))
    with pytest.raises(ValueError, match="changes nothing"):
        apply_edits(bank.SOLUTION, (bank.Edit("online_softmax", "m = m_new", "m = m_new"),))


def test_the_bank_is_large_enough_and_documented():
    CHECKS.documented()


_UNDER_THE_LIMIT = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))  # as prlimit --as in the grading sandbox
sys.path.insert(0, {tests!r})
import numpy as np
from autograder.grader.bank import run_cells
from autograder.assignments.a07_tiled_attention import bank
case = bank.memory_case()
expected = bank.REFERENCE["tiled_attention"](*case.args)
answers = {{"solution": {{}}, **{{name: v.cells for name, v in bank.CORRECT.items()
                                if {{"tile_schedule", "tiled_attention"}} & set(v.cells)}},
            "full_score_matrix": bank.MISTAKES["full_score_matrix"].cells(bank.SOLUTION)}}
report = {{}}
for name, cells in answers.items():
    function = run_cells({{**bank.SOLUTION, **cells}})["tiled_attention"]
    start = time.perf_counter()
    try:
        got = function(*case.args)
        report[name] = {{"error": float(np.abs(got - expected).max()), "shape": list(got.shape)}}
    except MemoryError:
        report[name] = {{"raised": "MemoryError"}}
    report[name]["seconds"] = round(time.perf_counter() - start, 2)
print(json.dumps(report))
"""


@pytest.mark.slow  # a child process computes the full-size memory case under the sandbox's address-space limit
def test_memory_case_under_the_sandbox_limit():
    """Every correct variant passes the T = 20 000 case under 2 GiB of address space; the full matrix cannot."""
    code = _UNDER_THE_LIMIT.format(limit=ref.SANDBOX_MEMORY_LIMIT, tests=str(REPO / "tests"))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(report, indent=1))
    assert report.pop("full_score_matrix")["raised"] == "MemoryError"
    assert len(report) >= 6
    for name, outcome in report.items():
        assert outcome.get("error", 1.0) <= 1e-12, (name, outcome)
        assert outcome["shape"] == [ref.MEMORY_CASE["T"], ref.MEMORY_CASE["d_head"]]


def test_the_answers_of_the_conceptual_questions():
    assert ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT) == 16385
    assert ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT, 4) == 23171  # the float32 slip
    assert ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT, 1) == 46341
    schedule = ref.tile_schedule(1024, 1024, 128, 128, True)
    counts = {code: int((schedule == code).sum()) for code in (ref.SKIPPED, ref.MASKED, ref.FULL)}
    assert counts == {ref.SKIPPED: 28, ref.MASKED: 8, ref.FULL: 28}
    assert schedule.size == 64
