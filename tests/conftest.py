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

import os
import resource
import shutil
import tempfile
from pathlib import Path

import pytest

from autograder.assignments.a01_attention.spec import ASSIGNMENT as A1_SPEC

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


#: The modules that cost the most machine time, most first (seconds summed per module on an idle fresh clone:
#: benchmarks/test_suite.md, "Where the time goes"). ``make test`` passes ``--no-loadscope-reorder`` so that
#: pytest-xdist hands out modules in collection order, and this order puts these first: each worker then takes
#: the longest remaining module when it frees up (longest processing time first), and the run does not end with
#: one worker grading a class while the other idles. xdist's own order (most tests first) left the few-test,
#: many-second modules such as test_grading for the end. An order gone stale costs balance, never a result.
LONGEST_FIRST = (
    "test_grading", "test_parallel_grading", "test_accessibility_browser", "test_hub", "test_sandbox",
    "test_self_check", "test_notebooks", "test_student_job", "test_binder", "test_stand_ins", "test_browser",
    "test_formgrader_browser", "test_grader", "test_lite", "test_release", "test_cohorts", "test_metadata_restore",
    "test_explorer", "test_walkthrough", "test_clean_clone", "test_student_edition_browser",
)


_MADE_EMPTY_GRADEBOOKS = pytest.StashKey[str]()


def pytest_configure(config):
    # One directory of empty gradebooks for the whole run (autograder.nbgrader.gradebook_copy.EMPTY_GRADEBOOKS):
    # made here by the first process (pytest-xdist's controller, before it starts its workers, which inherit it
    # with every `python -m autograder grade` and Dask worker the tests start), so that nbgrader's `alembic heads`
    # (1.5 CPU-s a process) runs once per run instead of once per process that makes a gradebook.
    from autograder.nbgrader.gradebook_copy import EMPTY_GRADEBOOKS

    if not os.environ.get(EMPTY_GRADEBOOKS):
        os.environ[EMPTY_GRADEBOOKS] = config.stash[_MADE_EMPTY_GRADEBOOKS] = tempfile.mkdtemp(
            prefix="attention-lab-empty-gradebooks-")


def pytest_unconfigure(config):
    made = config.stash.get(_MADE_EMPTY_GRADEBOOKS, None)
    if made:  # only the process that made it removes it
        shutil.rmtree(made, ignore_errors=True)


def _module_name(item) -> str:
    module = getattr(item, "module", None)
    return module.__name__.rpartition(".")[2] if module else ""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _module_name(item) in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    # A stable sort: the listed modules first in LONGEST_FIRST's order, every other module after them in
    # collection order, and each module's tests in their own order (identical on every xdist worker).
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_module_name(item), len(rank)))


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

    The sample is :func:`autograder.examples.example_class.end_to_end_sample` (five or fewer students per
    assignment, so that the suite's end-to-end part grows slowly with the number of assignments); every
    example student is checked in-process (tests/test_example_class.py).

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
