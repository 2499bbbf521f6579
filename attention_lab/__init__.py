"""Attention Lab: the student-facing package — plots and visible self-checks.

It holds no reference implementation of the functions learners write; the
grader's reference lives in the separate ``autograder`` package.
"""

__version__ = "0.1.0"
