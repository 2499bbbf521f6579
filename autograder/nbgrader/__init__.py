"""nbgrader plumbing: preprocessors, gradebook metadata, sanitising, submission limits, one student per child
process through ``NbGraderAPI``, class grading, release, and the late-penalty and LMS-export plugins."""

#: The environment variable naming a directory where :func:`autograder.nbgrader.gradebook_copy.new_gradebook` also
#: keeps the empty gradebooks nbgrader made, for the processes that come after this one (each a ``make grade``, a
#: Dask worker, a pytest-xdist worker: each would otherwise pay its own ``alembic heads``). Unset by default; the test
#: suite sets it (tests/conftest.py, in pytest-xdist's controller, which then need not import nbgrader: 1-1.5 CPU-s
#: of each run). Here, not in gradebook_copy, because importing that module imports nbgrader.
EMPTY_GRADEBOOKS = "ATTENTION_LAB_EMPTY_GRADEBOOKS"
