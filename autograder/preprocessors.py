"""nbgrader preprocessors that extend Attention Lab's grading pipeline.

Each is one small configurable class, composed in ``nbgrader_config.py``.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor


class ClearWidgetState(NbGraderPreprocessor):
    """Drop saved ipywidgets state from a notebook's metadata.

    ``ClearOutput`` clears cell outputs but not ``metadata.widgets``, which
    JupyterLab saves when a notebook with live widgets is stored; that state
    can hold a rendered answer (a printed reference result in an Output
    widget), so it must not reach ``release/``. (Subclassing nbgrader's base
    class makes it enabled by default, like nbgrader's own preprocessors.)
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            cell.metadata.pop("widgets", None)
        return nb, resources
