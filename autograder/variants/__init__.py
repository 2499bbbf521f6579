"""Banks of differently written answers, one module per assignment.

:data:`HIDDEN_INPUTS_ONLY` lists the known mistakes that lose points in a step
although that step's visible self-check passes, each with the reason only the
hidden inputs can expose it (``tests/test_checks_agree_with_grader.py`` checks
every other mistake against the self-checks, and README.md's developer section
shows this list).
"""

#: (assignment, mistake key, autograder-test grade_id) → why the visible self-check cannot see the mistake.
HIDDEN_INPUTS_ONLY: dict[tuple[str, str, str], str] = {}
