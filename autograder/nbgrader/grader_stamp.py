"""The grader's version in every graded notebook and in the feedback the student reads.

:class:`StampGraderVersion` (last of ``Autograde``'s preprocessors) records which grader graded the
submission (:func:`autograder.nbgrader.fingerprints.grader_label`) in the notebook's metadata
(``attention_lab.grader``); :class:`ShowGraderVersion` (``GenerateFeedback``) puts that line at the top of
the feedback, so a student's question about a grade can be answered with the grader that gave it, even after
the grader changed. The class report reads the same metadata.
"""

from __future__ import annotations

import html
import os

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.nbgrader.fingerprints import grader_label

#: The metadata key (under ``nb.metadata["attention_lab"]``) holding the grader's label.
KEY = "grader"
#: Marks the feedback cell this module adds, so that it is added once.
CELL_TAG = "attention-lab-grader-version"


def graded_by(nb) -> str:
    """The grader's label stored in a graded notebook ("" when it was graded before labels were stored)."""
    return str(nb.metadata.get("attention_lab", {}).get(KEY, ""))


class StampGraderVersion(NbGraderPreprocessor):
    """After grading: store the grader's label in ``nb.metadata["attention_lab"]["grader"]``."""

    def preprocess(self, nb, resources):
        root = CourseDirectory(config=self.config).root or os.getcwd()
        nb.metadata.setdefault("attention_lab", {})[KEY] = grader_label(root)
        return nb, resources


class ShowGraderVersion(NbGraderPreprocessor):
    """Feedback: a first Markdown cell naming the grader that graded the notebook (from its metadata)."""

    def preprocess(self, nb, resources):
        label = graded_by(nb)
        if label and not any(CELL_TAG in cell.metadata.get("tags", []) for cell in nb.cells):
            cell = nbformat.v4.new_markdown_cell(f"*Graded by Attention Lab's autograder: {html.escape(label)}.*")
            cell.metadata["tags"] = [CELL_TAG]
            nb.cells.insert(0, cell)
        return nb, resources
