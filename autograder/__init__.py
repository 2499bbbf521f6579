"""Attention Lab's grading side: reference solution, hidden-test helpers, grading commands.

Not needed by students; see README.md ("Instructors").
"""
