"""Course-wide constants, defined once: where the course lives, its nbgrader course id, the kernels' environment.

The repository is the course directory (``nbgrader_config.py`` at its top); commands default to it.
"""

from __future__ import annotations

from pathlib import Path

from attention_lab.core import KERNEL_ENVIRONMENT

__all__ = ["COURSE_ID", "KERNEL_ENVIRONMENT", "REPO"]

#: The repository: the default course directory (``source/``, ``release/``, ``nbgrader_config.py``).
REPO = Path(__file__).resolve().parent.parent

#: nbgrader's course id (``c.CourseDirectory.course_id``; the gradebook and the exchange are keyed by it).
COURSE_ID = "attention-lab"
