"""nbgrader settings of this class's course directory (written once by `python -m autograder hub setup`).

The grading pipeline (sandboxed kernels, comparison outside the kernel, feedback without hidden
tests) is the course repository's nbgrader_config.py, loaded below. What is set here belongs to this
class: where the course and the exchange are, and the late-submission policy. Edit the policy here;
`setup` never overwrites this file.
"""

import os

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

PIPELINE = "$pipeline"
if not os.path.isfile(PIPELINE):
    # Without it nbgrader would run submissions with its own, unsandboxed Execute: refuse instead.
    raise FileNotFoundError(f"the course's grading pipeline {PIPELINE} is missing: "
                            "re-run `python -m autograder hub setup` from the course repository")
load_subconfig(PIPELINE)  # noqa: F821

c.CourseDirectory.root = "$course"
c.CourseDirectory.course_id = "$course_id"
c.Exchange.root = "$exchange"
# nbgrader's collect trusts inbound folders' names and follows links in them: a student could submit in
# another's name, or link the solutions in as their submission. This one sets such folders aside.
c.ExchangeFactory.collect = "autograder.hub.exchange.VerifiedCollect"

# Late submissions: nbgrader compares each submission's timestamp with the assignment's due date
# (set it in Formgrader or with `nbgrader db assignment add NAME --duedate="YYYY-MM-DD HH:MM:SS UTC"`)
# and asks this plugin for the penalty: a share of the score per started day late.
c.AssignLatePenalties.plugin_class = "autograder.nbgrader.late_penalty.PercentPerDayLate"
c.PercentPerDayLate.percent_per_day = 10
