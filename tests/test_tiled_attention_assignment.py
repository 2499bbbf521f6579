"""Assignment 7 as a graded assignment: what is particular to it (the generic tests cover the rest).

* the memory case: its numbers agree with the sandbox's configuration (memory limit, the notebook's wall clock) and
  with what the notebook says; its request carries its own time budget in CPU seconds and the memory limit, and no
  other case does; its cell alone has no per-cell wall clock;
* a learner who forms the T × T matrix gets the MemoryError named (in-process here, under the same limit; the
  end-to-end sample grades the same student with nbgrader in the sandbox), and a value mistake of
  ``tiled_attention`` is charged once, in step 3, not again in the memory step;
* the memory self-check and the memory plot measure what they say (linear against quadratic growth), and the
  tile explorer draws what the schedule says, reports a refused size and a broken schedule in words.
"""

from __future__ import annotations

import numpy as np
import pytest
from traitlets.config.loader import PyFileConfigLoader

from attention_lab.a07_tiled_attention import checks, memory, visual
from attention_lab.core.worked import SelfCheckFailed
from autograder import assignments
from autograder.assignments.a07_tiled_attention import bank, reference
from autograder.grader import comparison
from autograder.grader.bank import run_cells
from autograder.grader.in_process import grade_variant, grader_for
from autograder.nbgrader.notebook_cells import read
from conftest import REPO
from a07_memory_stand_in import a07_memory_stand_in  # noqa: F401 — a fixture: the last test's memory step

A7 = assignments.get("07_tiled_attention")
MEMORY_STEP = "test_tiled_attention_memory"


def _config():
    return PyFileConfigLoader("nbgrader_config.py", path=str(REPO)).load_config()


def test_the_memory_case_has_its_own_budget_and_the_sandboxs_limit():
    config = _config()
    (case,) = A7.step(MEMORY_STEP).cases()
    assert case.memory_limit == config.SandboxedKernelManager.memory_limit == memory.SANDBOX_MEMORY_LIMIT
    # CPU time, so that a loaded machine cannot time a correct answer out; below the notebook's wall clock, which the
    # cell keeps (it has no per-cell limit of its own)
    assert case.seconds == bank.MEMORY_CASE_SECONDS and case.cpu_time
    assert comparison.CALL_SECONDS < case.seconds < config.SandboxedExecute.wall_clock_limit
    T = case.args[0].shape[0]
    assert T == memory.GRADED_T and 8 * T * T > case.memory_limit  # one T × T float64 matrix cannot fit
    request = grader_for(A7).request(MEMORY_STEP)
    assert [(c["seconds"], c["memory_limit"], c["cpu_time"]) for c in request["cases"]] == [
        (case.seconds, case.memory_limit, True)]
    others = [step for step in A7.steps if step.grade_id != MEMORY_STEP]
    for step in others:  # every other case keeps the default wall-clock time and no memory limit of its own
        for sent in grader_for(A7).request(step.grade_id)["cases"]:
            assert sent["seconds"] == comparison.CALL_SECONDS and "memory_limit" not in sent and "cpu_time" not in sent
    assert A7.step(MEMORY_STEP).values_graded_earlier
    assert not any(step.values_graded_earlier for step in others)


def test_only_the_memory_cell_runs_without_a_per_cell_wall_clock():
    """InsertProbes names the cells whose case counts CPU time; SandboxedExecute lifts their c.Execute.timeout."""
    from traitlets.config import Config

    from autograder.nbgrader.preprocessors import InsertProbes
    from autograder.sandbox import NO_CELL_TIMEOUT

    config = Config()
    config.CourseDirectory.root = str(REPO)
    nb = read(REPO / "source" / A7.name / A7.notebook)
    resources = {"nbgrader": {"assignment": A7.name}}
    nb, resources = InsertProbes(config=config).preprocess(nb, resources)
    (index,) = resources[NO_CELL_TIMEOUT]
    assert nb.cells[index].metadata["nbgrader"]["grade_id"] == MEMORY_STEP


def test_the_cpu_clock_ignores_waiting_and_stops_computing():
    """Case.cpu_time's clock: a call that waits (as on a busy machine) keeps running; one that computes is stopped."""
    import threading

    from attention_lab.core.calls import FunctionTimedOut, TracedTimeLimit, call_learner, time_limit

    assert call_learner(lambda: threading.Event().wait(0.3) or "waited", seconds=0.05, cpu_time=True) == "waited"
    with pytest.raises(FunctionTimedOut, match=r"within 0.05 s of CPU time"):
        call_learner(_spin, seconds=0.05, cpu_time=True)
    with pytest.raises(FunctionTimedOut, match=r"within 0.05 s of CPU time"):  # the fallback without signals
        with TracedTimeLimit(0.05, cpu_time=True):
            _spin()
    with time_limit(0.05, cpu_time=True):
        threading.Event().wait(0.2)


def _spin():
    while True:
        sum(range(100))


def test_what_the_notebook_says_about_the_memory_case_is_what_the_grader_does():
    text = "\n".join(cell.source for cell in read(REPO / "source" / A7.name / A7.notebook).cells)
    assert f"the test allows {bank.MEMORY_CASE_SECONDS:g} s of CPU time for this case" in " ".join(text.split())
    assert "every other hidden case allows 3 s of wall-clock time" in " ".join(text.split())
    config = _config()
    assert comparison.CALL_SECONDS == 3
    assert f"({config.SandboxedExecute.wall_clock_limit} s of wall-clock time) still applies" in " ".join(text.split())
    assert "$T = 20\\,000$, $d_\\text{head} = 8$ and tiles of 512 × 256" in text
    spec = reference.MEMORY_CASE
    assert (spec["T"], spec["d_head"], spec["block_q"], spec["block_k"], spec["causal"]) == (20_000, 8, 512, 256, True)


def test_forming_the_matrix_is_named_on_the_real_case():
    memory_feedback = grade_variant(A7, A7.mistakes["full_score_matrix"])[MEMORY_STEP]
    assert memory_feedback.score == 0 and memory_feedback.named == ["full_score_matrix"]
    assert "MemoryError" in memory_feedback.text() and "3.2 GB" in memory_feedback.text()


def test_a_slow_answer_is_stopped_at_the_cases_own_time_and_says_so():
    (case,) = A7.step(MEMORY_STEP).cases()
    slow = comparison._learner_value(case, {"status": "timeout"})  # noqa: SLF001 — our own module
    with pytest.raises(comparison.CheckFailed, match=r"did not finish within 60 s of CPU time \(too slow for this case\)"):
        comparison._check(case, slow, None, {})  # noqa: SLF001


def test_the_memory_self_check_tells_tiled_from_full():
    solution = run_cells(bank.SOLUTION)
    checks.check_tiled_memory(solution["tiled_attention"])
    full = run_cells({**bank.SOLUTION, **bank.KNOWN_MISTAKES["full_score_matrix"].cells(bank.SOLUTION)})
    with pytest.raises(SelfCheckFailed, match="forms a T × T array somewhere"):
        checks.check_tiled_memory(full["tiled_attention"])


def test_the_memory_plot_measures_quadratic_against_linear_growth(capsys, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    growth = memory.plot_memory(reference.tiled_attention, T_values=(512, 1024, 2048), block=128)
    printed = capsys.readouterr().out
    assert "log-log slope over the last doubling" in printed and "2048" in printed
    assert memory.slope(growth["T"], growth["full"]) > 1.8
    assert memory.slope(growth["T"], growth["tiled"]) < 1.2
    assert np.all(growth["full"] > 3 * growth["score_matrix"])  # scores, exponentials, weights at once
    assert growth["tiled"][-1] < growth["score_matrix"][-1] / 8  # at T = 2048: a few tiles and (T, d) arrays
    assert memory.plot_memory(lambda *args: 1 / 0) is None
    assert "ZeroDivisionError" in capsys.readouterr().out
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # full attention's 512 MiB are not spent while grading
    assert memory.plot_memory(reference.tiled_attention) is None
    assert capsys.readouterr().out.strip() == "(the memory plot is not drawn while grading)"


def test_the_tile_explorer_draws_the_schedule_and_reports_refusals():
    explorer = visual.TileExplorer(reference.tile_schedule, T_q=10, T_k=10, block_q=4, block_k=3, sync=True)
    view = explorer.view
    np.testing.assert_array_equal(view.schedule, reference.tile_schedule(10, 10, 4, 3, True))
    assert view.allowed_scores == 55 and view.computed_tiles == int((view.schedule > 0).sum())
    assert "scores are computed only to be masked" in explorer.summary.value
    explorer.causal_box.value = False
    assert explorer.view.computed_scores == 100 and "masked" not in explorer.summary.value.split(";")[-1]
    explorer.causal_box.value, explorer.T_q_slider.value = True, 12
    assert explorer.view is None and "refuses these sizes (ValueError), as it should" in explorer.error
    first_redraws = explorer.redraws
    explorer.T_q_slider.value = 4
    assert explorer.view is not None and explorer.redraws == first_redraws + 1
    broken = visual.TileExplorer(lambda *args: np.zeros((1, 1), dtype=int), sync=True)
    assert broken.view is None and "expected an array of shape" in broken.error
    with pytest.raises(ValueError, match="block_q must be an integer from 1 to 128"):
        visual.TileExplorer(reference.tile_schedule, block_q=0, sync=True)


# last in the module: the fixture swaps in the stand-in memory case for the rest of it
def test_a_value_mistake_is_charged_once_in_step_3_not_again_in_the_memory_step(a07_memory_stand_in):
    results = grade_variant(A7, A7.mistakes["output_not_rescaled"])
    assert results["test_tiled_attention"].named == ["output_not_rescaled"]
    step = results[MEMORY_STEP]
    assert step.score == step.points and "correct given your earlier function" in " ".join(step.text().split())
