"""Shared paths for the test suite, and its two tiers.

Fast tests run in this process (references, specs, answer banks, the in-process grader, self-checks,
visuals driven headlessly); ``make test-fast`` runs them alone. Slow tests start kernels, nbgrader,
the sandbox, a browser, a hub or a fresh environment: the modules in :data:`SLOW_MODULES` and the
tests marked ``@pytest.mark.slow`` in other modules. ``make test`` runs both tiers on three workers
(pytest-xdist, ``--dist loadfile``): each module's tests stay on one worker, so its module-scoped
fixtures (a browser, a JupyterLab server, a built edition) are made once, and the session's graded
class (``graded_class``) once, because only tests/test_grading.py uses it. (Not ``--dist loadgroup``
with ``xdist_group`` marks: with pytest 9.2 and pytest-xdist 3.8 it silently stops grouping,
pytest-dev/pytest-xdist#1386.)
"""

import gc
import os
import resource
import shutil
import tempfile
from pathlib import Path

from attention_lab.core import KERNEL_ENVIRONMENT  # imports no NumPy

# before NumPy loads (BLAS reads it then): `make test` exports OPENBLAS_NUM_THREADS=1 (Makefile); a plain `pytest` run
# gets it here too, else its in-process NumPy (and its forked children) run two contending BLAS threads on the 2-core
# machine: a07's T = 20 000 memory case cost 7× the CPU seconds (tests/test_tiled_attention_bank.py, 142 s against 36)
for _name, _value in KERNEL_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)

import pytest  # noqa: E402

from autograder.assignments.a01_attention.spec import ASSIGNMENT as A1_SPEC  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = A1_SPEC.name  # the assignment most end-to-end tests grade
NOTEBOOK = A1_SPEC.notebook
SOURCE_NB = REPO / "source" / ASSIGNMENT / NOTEBOOK
RELEASE_NB = REPO / "release" / ASSIGNMENT / NOTEBOOK


#: Modules whose every test is slow, and why.
SLOW_MODULES = {
    "test_grading": "nbgrader end to end: the example classes, the hostile bank and the grader report",
    "test_metadata_restore": "nbgrader end to end: one submission after another",
    "test_student_job": "nbgrader per student in a child process, each limit just over and just under",
    "test_parallel_grading": "nbgrader end to end: a class graded on one and on two workers, re-runs, a broken kernel",
    "test_release": "nbgrader generate_assignment and validate on every notebook",
    "test_sandbox": "bubblewrap kernels",
    "test_sandbox_image": "builds a sandbox image",
    "test_student_build": "builds the student edition and its wheel",
    "test_browser": "Chromium",
    "test_accessibility_browser": "Chromium: axe-core on every notebook page",
    "test_formgrader_browser": "Chromium",
    "test_student_edition_browser": "Chromium",
    "test_clean_clone": "a clone of the tree and Chromium",
    "test_lite": "builds the JupyterLite site, Chromium",
    "test_binder": "a fresh virtual environment",
    "test_hub": "JupyterHub with Unix users and Chromium",
}


#: The seconds one worker spends on each module (its tests' durations summed, from the JUnit report of a `make test`
#: run: MEASURED_ON). ``make test`` passes ``--no-loadscope-reorder`` so that pytest-xdist hands out modules in
#: collection order, and :func:`pytest_collection_modifyitems` sorts them longest first: each worker then takes the
#: longest remaining module when it frees up (longest processing time first), and the run does not end with one
#: worker grading a class while the others idle. xdist's own order (most tests first) left the few-test,
#: many-second modules such as test_grading for the end. Figures gone stale cost balance, never a result.
#: Regenerate with ``benchmarks/test_budget.py --module-seconds JUNIT`` from ``PYTEST_ADDOPTS=--junitxml=JUNIT make test``.
MODULE_SECONDS: dict[str, float] = {
    "test_grading": 309.2,
    "test_parallel_grading": 171.5,
    "test_accessibility_browser": 147.1,
    "test_hub": 124.2,
    "test_notebooks": 86.5,
    "test_stand_ins": 84.5,
    "test_sandbox": 75.5,
    "test_tiled_attention_bank": 53.5,
    "test_binder": 48.3,
    "test_self_check": 46.8,
    "test_explorer": 43.6,
    "test_browser": 38.1,
    "test_lite": 35.1,
    "test_grader": 32.2,
    "test_metadata_restore": 29.6,
    "test_new_gradebook": 28.7,
    "test_student_edition_browser": 25.9,
    "test_clean_clone": 24.9,
    "test_positional_visual": 23.8,
    "test_formgrader_browser": 23.3,
    "test_masking_visual": 21.3,
    "test_student_job": 21.2,
    "test_tiny_gpt_findings": 20.7,
    "test_multi_head_visual": 17.9,
    "test_walkthrough": 17.8,
    "test_modern_attention_visual": 15.9,
    "test_explorer_caching": 14.9,
    "test_release": 14.4,
    "test_checks_agree_with_grader": 14.3,
    "test_cohorts": 12.4,
    "test_class_report": 12.2,
    "test_kv_cache_visual": 11.6,
    "test_tiny_gpt": 10.8,
    "test_colour_contrast": 9.2,
    "test_tiny_gpt_visual": 8.1,
    "test_figure_text": 7.6,
    "test_hub_parts": 7.5,
    "test_questions": 7.1,
    "test_environment": 6.7,
    "test_job_warmup": 6.3,
    "test_browser_fallbacks": 6.3,
    "test_tiled_attention_assignment": 4.5,
    "test_gradients_assignment": 3.8,
    "test_gradebook_seed": 3.7,
    "test_reference_tiled_attention": 3.7,
    "test_worked_cases": 3.5,
    "test_sanitize": 3.0,
    "test_student_build": 2.8,
    "test_example_class": 2.3,
    "test_cli": 2.2,
    "test_fingerprints": 2.0,
    "test_gradient_findings": 1.9,
    "test_memory_limit": 1.9,
    "test_visible_checks": 1.2,
    "test_gradients_diagnoses": 0.8,
    "test_tiny_gpt_assignment": 0.8,
    "test_reference_multi_head": 0.8,
    "test_gradients_bank": 0.6,
    "test_reference_gradients": 0.5,
    "test_mistake_edits": 0.5,
    "test_modern_attention_bank": 0.5,
    "test_text_corrections": 0.4,
    "test_modern_attention_assignment": 0.4,
    "test_kv_cache_checks": 0.3,
    "test_kv_cache_grading": 0.3,
    "test_positional_checks": 0.3,
    "test_preflight_cache": 0.2,
    "test_learner_calls": 0.2,
    "test_sandbox_image": 0.2,
    "test_recipe_inputs": 0.2,
    "test_gradient_design": 0.2,
    "test_masking_checks": 0.1,
    "test_reference_modern_attention": 0.1,
    "test_course_lists": 0.1,
    "test_spec_helpers": 0.1,
    "test_notebook_headings": 0.1,
    "test_reference_positional": 0.1,
    "test_wire_cache": 0.1,
    "test_probe_output": 0.1,
    "test_reference": 0.0,
    "test_reference_masking": 0.0,
    "test_reference_kv_cache": 0.0,
    "test_image_root": 0.0,
    "test_suite_order": 0.0,
}
MEASURED_ON = ("2026-12-07, nine assignments, a fresh clone's `.ci/run` of 6ced6c7 (3 workers, 2 cores; 622 s of "
               "wall clock, pytest's session time)")
#: What a module missing from MODULE_SECONDS (added since: a new assignment's, say) is taken to cost: about the
#: largest in-process module's (test_tiled_attention_bank's, one assignment's answer bank), so that a new module
#: goes out while the long modules still run and never joins the short ones at the end of the run (where a long
#: module would leave the other workers idle); a short one sent out early costs nothing, the short modules then
#: fill the gaps after it.
UNMEASURED_SECONDS = 100.0
#: The measured modules, longest first (the order the run hands them out in).
LONGEST_FIRST = tuple(sorted(MODULE_SECONDS, key=lambda name: -MODULE_SECONDS[name]))


def expected_seconds(module: str) -> float:
    """What ``module`` (a test module's name, e.g. ``test_grading``) is expected to cost one worker, in seconds."""
    return MODULE_SECONDS.get(module, UNMEASURED_SECONDS)


_MADE_EMPTY_GRADEBOOKS = pytest.StashKey[str]()


def pytest_configure(config):
    # One directory of empty gradebooks for the whole run (autograder.nbgrader.EMPTY_GRADEBOOKS):
    # made here by the first process (pytest-xdist's controller, before it starts its workers, which inherit it
    # with every `python -m autograder grade` and Dask worker the tests start), so that nbgrader's `alembic heads`
    # (1.5 CPU-s a process) runs once per run instead of once per process that makes a gradebook.
    from autograder.nbgrader import EMPTY_GRADEBOOKS  # not gradebook_copy's import of nbgrader in the controller

    if not os.environ.get(EMPTY_GRADEBOOKS):
        os.environ[EMPTY_GRADEBOOKS] = config.stash[_MADE_EMPTY_GRADEBOOKS] = tempfile.mkdtemp(
            prefix="attention-lab-empty-gradebooks-")


def pytest_unconfigure(config):
    made = config.stash.get(_MADE_EMPTY_GRADEBOOKS, None)
    if made:  # only the process that made it removes it
        shutil.rmtree(made, ignore_errors=True)
    # The run is over: without this, the interpreter's garbage collections at exit walk everything the tests imported
    # and kept (1.2 s for a process that ran tests/test_grader.py and test_stand_ins.py, 0.1 s frozen), in each
    # pytest-xdist worker and in the controller, the last of them at the very end of `make test`
    # (autograder/__main__.py does the same for the command line).
    gc.freeze()


def _module_name(item) -> str:
    module = getattr(item, "module", None)
    return module.__name__.rpartition(".")[2] if module else ""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _module_name(item) in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    # A stable sort, longest module first (an unmeasured one as UNMEASURED_SECONDS), modules of equal seconds in
    # collection order, and each module's tests in their own order (identical on every xdist worker).
    items.sort(key=lambda item: -expected_seconds(_module_name(item)))


_CPU_START = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children that have ended (kernels, nbgrader, bwrap)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # The CPU a test costs, next to the wall time JUnit already records: benchmarks/test_suite.py sets one against
    # the other to tell a test that computes from one that waits (a wall clock limit, a download, a browser).
    item.stash[_CPU_START] = _cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    if call.when == "teardown" and _CPU_START in item.stash:
        # Written before the teardown report is made, so that JUnit's <properties> carry it.
        item.user_properties.append(("cpu_seconds", f"{_cpu_seconds() - item.stash[_CPU_START]:.3f}"))
    return (yield)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """One nbgrader run per assignment: a fixed sample of each example class plus the hostile submissions.

    The sample is :func:`autograder.examples.example_class.end_to_end_sample` (four or fewer students per
    assignment, five for the hostile bank's, so that the suite's end-to-end part grows slowly with the number of
    assignments); every example student is checked in-process (tests/test_example_class.py).

    Shared by the end-to-end grading tests and the report test (all in tests/test_grading.py, so that one
    pytest-xdist worker grades the class once), because grading a class is the slow part.
    Returns (course_dir, results, outcomes) as ``autograder.examples.report.grade_class_with_hostile``.
    """
    from autograder.examples import report

    course = tmp_path_factory.mktemp("class")
    results, outcomes = report.grade_class_with_hostile(course, sample=True)
    return course, results, outcomes


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright, one per test module (the browser tests skip without it)."""
    from playwright.sync_api import sync_playwright

    from browser_support import launch

    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()
