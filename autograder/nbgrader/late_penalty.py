"""The course's late-submission policy, as an nbgrader ``LateSubmissionPlugin``.

nbgrader decides *whether* a submission is late (its ``timestamp.txt`` from the
exchange against the assignment's ``duedate`` in the gradebook) and stores the
penalty per notebook; this plugin only says *how much*. Configure it in the
course's ``nbgrader_config.py``::

    c.AssignLatePenalties.plugin_class = "autograder.nbgrader.late_penalty.PercentPerDayLate"
    c.PercentPerDayLate.percent_per_day = 10
"""

from __future__ import annotations

import math

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Float

SECONDS_PER_DAY = 86400


class PercentPerDayLate(LateSubmissionPlugin):
    """Each started day late costs ``percent_per_day`` % of the notebook's score (at most all of it)."""

    percent_per_day = Float(10.0, help="Share of the score lost per started day late, in percent.").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        """Points to subtract from ``score``.

        Parameters
        ----------
        student_id : str
            The student (unused: the policy is the same for everyone).
        score : float
            The notebook's score before the penalty, in points.
        total_seconds_late : float
            Seconds between the due date and the submission's timestamp (> 0 when nbgrader calls this).

        Returns
        -------
        float
            ``score * percent_per_day / 100 * days``, where ``days`` counts started days
            (1 second late is one day), and never more than ``score``.

        Raises
        ------
        ValueError
            If ``percent_per_day`` is negative.
        """
        if self.percent_per_day < 0:
            raise ValueError(f"PercentPerDayLate.percent_per_day must be >= 0, got {self.percent_per_day}")
        days = math.ceil(max(total_seconds_late, 0) / SECONDS_PER_DAY)
        return min(score, score * self.percent_per_day / 100 * days)
