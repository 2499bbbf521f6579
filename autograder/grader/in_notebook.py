"""The hidden part of an autograder-test cell, as the instructor runs it in the source notebook.

In ``source/`` each autograder-test cell ends with::

    ### BEGIN HIDDEN TESTS
    from autograder.grader.in_notebook import grade_step; grade_step(globals(), "<assignment>", "<grade_id>")
    ### END HIDDEN TESTS

so that an instructor running the source notebook (or ``nbgrader validate``
on it) sees the same feedback and score the grader will give, stand-in passes
(:mod:`autograder.grader.stand_ins`) included. During
``nbgrader autograde`` this line never runs: the
:class:`~autograder.nbgrader.preprocessors.InsertProbes` preprocessor replaces it with
a probe, and the comparison happens outside the learner's kernel.
"""

from __future__ import annotations

from autograder import assignments
from autograder.grader.in_process import grader_for, kernel_results, points_of
from autograder.grader.stand_ins import step_passes


def grade_step(namespace: dict, assignment_name: str, grade_id: str) -> float:
    """Grade one step on the functions in ``namespace``; print the feedback; return the score.

    Parameters
    ----------
    namespace : dict
        The notebook's ``globals()``.
    assignment_name : str
        The assignment's folder name.
    grade_id : str
        The autograder-test cell's grade_id.

    Returns
    -------
    float
        The score in ``[0, points]`` as a built-in float (nbgrader reads the
        cell's value as partial credit).

    Raises
    ------
    KeyError
        If the assignment or the step is unknown.
    """
    assignment = assignments.get(assignment_name)
    grader = grader_for(assignment)
    step = assignment.step(grade_id)
    points = points_of(assignment)[grade_id]
    results = {grade_id: kernel_results(namespace, grader.request(grade_id))}
    # the stand-in passes right away: the earlier steps are done, as in the grader's second pass
    later = {grade_id: step_passes(grader, grade_id, results[grade_id], lambda request: kernel_results(namespace, request))}
    verdict = grader.grade(results, {grade_id: points}, stand_in_results=later)[step.grade_id]
    print(verdict.text())
    return float(verdict.score)
