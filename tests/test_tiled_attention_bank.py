"""Assignment 7's answer bank: correct variants agree with the reference, every mistake is caught where it says.

Runs the bank's own cells in this process (trusted code), on the hidden cases the spec hands the grader
(tests/test_grader.py and tests/test_mistake_edits.py grade them as the grader does). The memory case runs in a
child process under the grading sandbox's address-space limit wherever an answer is graded; the in-process
tests grade it on its small stand-in (tests/a07_memory_stand_in.py), and the last test here shows that the
solution, every correct variant the memory case runs and the full score matrix get the same outcome on both.
"""

import types

import numpy as np
import pytest

from answer_bank_checks import BankChecks
from conftest import REPO
from autograder import assignments
from autograder.grader.bank import apply_edits
from autograder.grader.answers import answer_namespace
from autograder.grader.comparison import Grader, Raised
from autograder.grader.memory_limit import reachable_code

from autograder.assignments.a07_tiled_attention import bank
from autograder.assignments.a07_tiled_attention import reference as ref
#: the bank as BankChecks reads a bank: its mistakes as Mistakes (the graded bank's KNOWN_MISTAKES)
_BANK = types.SimpleNamespace(STEPS=bank.STEPS, REFERENCE=bank.REFERENCE, SOLUTION=bank.SOLUTION, CORRECT=bank.CORRECT,
                              MISTAKES=bank.KNOWN_MISTAKES, Edit=bank.Edit)
CHECKS = BankChecks(_BANK, bank.hidden_cases(include_memory_case=False),
                    (REPO / "autograder" / "assignments" / "a07_tiled_attention" / "DESIGN.md").read_text())
VALUE_MISTAKES = sorted(name for name, m in bank.KNOWN_MISTAKES.items() if m.step != "test_tiled_attention_memory")


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


def test_the_answers_of_the_conceptual_questions():
    assert ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT) == 16385
    assert ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT, 4) == 23171  # the float32 slip
    assert ref.smallest_T_exceeding(ref.SANDBOX_MEMORY_LIMIT, 1) == 46341
    schedule = ref.tile_schedule(1024, 1024, 128, 128, True)
    counts = {code: int((schedule == code).sum()) for code in (ref.SKIPPED, ref.MASKED, ref.FULL)}
    assert counts == {ref.SKIPPED: 28, ref.MASKED: 8, ref.FULL: 28}
    assert schedule.size == 64


def _memory_outcome(grader, cells: dict):
    """What the memory step sees of an answer: the exception it raised, or whether its output is the reference's."""
    step = "test_tiled_attention_memory"
    got, expected = grader.output_of(cells, step, 0), grader.expected(step, 0)
    if isinstance(got, Raised):
        return got.type
    return "equal" if np.allclose(got, expected, rtol=0.0, atol=1e-12) else "different"


def _memory_code(A7, cells: dict):
    return reachable_code(answer_namespace(A7.name, A7.notebook, cells), "tiled_attention")


@pytest.mark.slow  # the real T = 20 000 case, in a child under 2 GiB, for every answer whose tiled_attention differs
def test_the_memory_stand_in_gives_every_memory_relevant_answer_the_real_cases_outcome(monkeypatch):
    # the in-process tests (tests/a07_memory_stand_in.py) grade the memory step on bank.memory_stand_in_case; this
    # is the one test that runs the real T = 20 000 case on the bank: the solution, every correct variant of what
    # tiled_attention runs (tiled_attention, tile_schedule) and the mistake that forms the T × T matrix get the
    # same outcome on both (equal to the reference's output, or MemoryError)
    A7 = assignments.all_assignments()["07_tiled_attention"]
    answers = {"solution": {}, "full_score_matrix": A7.mistakes["full_score_matrix"].cells}
    for key, variant in A7.correct.items():  # every variant whose code the memory case runs (also tile_schedule's)
        if _memory_code(A7, variant.cells) != _memory_code(A7, {}):
            answers[key] = variant.cells
    assert {"schedule_from_mask", "query_chunks_exact_softmax"} <= set(answers)
    real = Grader(A7)
    assert real.cases["test_tiled_attention_memory"][0].args[0].shape[0] == ref.MEMORY_CASE["T"]
    monkeypatch.setattr(bank, "memory_case", bank.memory_stand_in_case)
    stand_in = Grader(A7)
    assert stand_in.cases["test_tiled_attention_memory"][0].args[0].shape[0] == bank.MEMORY_STAND_IN["T"]
    outcomes = {key: (_memory_outcome(real, cells), _memory_outcome(stand_in, cells)) for key, cells in answers.items()}
    assert outcomes == {key: ("MemoryError",) * 2 if key == "full_score_matrix" else ("equal",) * 2 for key in answers}


def test_a_result_of_the_right_shape_without_the_work_never_keeps_the_memory_point():
    """The memory case grades values too (a reviewer showed that excusing unnamed value mistakes there with any
    finite result of the right shape pays for zeros): zeros, a full-matrix answer that gives up the small causal case
    and returns zeros past T = 1000, and a 2-D-only answer that returns zeros past T = 1000 all lose it; an unnamed
    value slip costs it too (open: DESIGN.md), a full score matrix is named."""
    from a07_memory_stand_in import memory_stand_in
    from autograder.grader.in_process import grade_answers

    a07 = assignments.get("07_tiled_attention")
    solution = bank.SOLUTION["tiled_attention"]
    start = "    T_q, T_k, d_v = Q.shape[-2], K.shape[-2], V.shape[-1]\n"
    zeros = {"tiled_attention": solution.replace(start, start + "    return np.zeros(Q.shape[:-1] + (d_v,))\n")}
    dodge = {"tiled_attention": solution.replace(
        start, start + "    if Q.ndim != 2:\n        raise ValueError('2-D only')\n"
                       "    if T_q > 1000:\n        return np.zeros((T_q, d_v))\n")}
    sabotage = {"tiled_attention": solution.replace(
        start, start + "    if T_q in (11, 4000, 20000):\n        return np.zeros((T_q, d_v))\n")}
    unnamed = {"tiled_attention": solution.replace("output[..., qs:qs + n, :] = acc / l",
                                                   "output[..., qs:qs + n, :] = acc / l * 1.001")}
    for cells in (zeros, dodge, sabotage, unnamed):
        assert cells["tiled_attention"] != solution
    with memory_stand_in():
        for cells in (zeros, dodge, sabotage, unnamed):
            graded = grade_answers(a07, cells)
            assert graded["test_tiled_attention"].score < graded["test_tiled_attention"].points
            assert graded["test_tiled_attention_memory"].score == 0, graded["test_tiled_attention_memory"].text()
