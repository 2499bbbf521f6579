"""nbgrader plumbing: preprocessors, gradebook metadata, sanitising, submission limits, one student per child
process through ``NbGraderAPI``, class grading, release, and the late-penalty and LMS-export plugins."""
