"""The grader: assignment specs as data, the answer-bank mechanism, the comparison with the reference outside the
learner's kernel, the stand-in passes, and the in-process model of nbgrader's run."""
