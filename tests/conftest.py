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
