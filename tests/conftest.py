"""Shared paths for the test suite."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "01_scaled_dot_product_attention"
NOTEBOOK = "scaled_dot_product_attention.ipynb"
SOURCE_NB = REPO / "source" / ASSIGNMENT / NOTEBOOK
RELEASE_NB = REPO / "release" / ASSIGNMENT / NOTEBOOK


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """One nbgrader run per assignment: the example class of every assignment plus the hostile submissions.

    Shared by the end-to-end grading tests and the report test, because grading a class is the slow part.
    Returns (course_dir, results, outcomes) as ``autograder.examples.report.grade_class_with_hostile``.
    """
    from autograder.examples import report

    course = tmp_path_factory.mktemp("class")
    results, outcomes = report.grade_class_with_hostile(course)
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
