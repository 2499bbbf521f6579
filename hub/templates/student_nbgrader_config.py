"""nbgrader settings of the students' environment (written by `python -m autograder hub setup`).

Students' servers find the course's exchange here; they never read the course directory.
"""

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "$course_id"
c.Exchange.root = "$exchange"
# Validate reports errors in every cell (a failing self-check too), as in the course's own config.
c.Validator.validate_all = True
