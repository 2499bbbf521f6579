"""Where this instructor's Formgrader finds the course (written by `python -m autograder hub setup`).

nbgrader then also loads the course directory's own nbgrader_config.py.
"""

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.root = "$course"
