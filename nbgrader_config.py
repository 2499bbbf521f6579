"""nbgrader configuration for Attention Lab (course root = this folder).

Read by `nbgrader` commands run here, by `make release` / `make grade` /
`make demo`, and by the JupyterLab nbgrader extension (formgrader, Validate).
"""

from nbconvert.preprocessors import CoalesceStreamsPreprocessor
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import Execute

from autograder.course import COURSE_ID
from autograder.nbgrader.grader_stamp import ShowGraderVersion, StampGraderVersion
from autograder.nbgrader.feedback_html import FeedbackExporter, ReadableFeedback
from autograder.nbgrader.metadata_restore import RestoreFromGradebook
from autograder.nbgrader.preprocessors import CleanTracebacks, ClearWidgetState, GradeOutsideKernel, InsertProbes
from autograder.nbgrader.sanitize import SanitizeNotebook
from autograder.sandbox import SandboxedExecute

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = COURSE_ID

# Releases: the default pipeline plus dropping saved widget state (ClearOutput keeps it).
c.GenerateAssignment.preprocessors = (
    list(GenerateAssignment.class_traits()["preprocessors"].default()) + [ClearWidgetState]
)

# Grading: nbgrader metadata comes from the gradebook, never from the submission (RestoreFromGradebook,
# first): an edited, invented or copied grade cell costs the edit, not the grade, and a deleted cell is
# put back (nbgrader's own add_missing_cells can raise KeyError when it follows a read-only cell).
# A submission's saved widget state (can be megabytes of images) is dropped before it runs.
c.Autograde.sanitize_preprocessors = (
    [RestoreFromGradebook] + list(Autograde.class_traits()["sanitize_preprocessors"].default()) + [ClearWidgetState]
)

# Grading happens outside the learner's kernel: InsertProbes swaps each autograder cell's hidden tests
# for a probe that only calls the learner's functions on hidden inputs; SandboxedExecute runs the
# notebook and then, in the same kernel, the grader's stand-in passes (each step graded on its own);
# nbconvert's CoalesceStreamsPreprocessor merges the pieces of a printed output that arrived as several
# stream messages (how many depends on timing), so that the same submission gives the same feedback on
# every run; CleanTracebacks keeps only the notebook's own frames in tracebacks and no path of this
# machine in any output; GradeOutsideKernel compares the raw results with the reference in this process
# and writes the feedback and the score into the cell, which SaveAutoGrades then reads.
_default_autograde = list(Autograde.class_traits()["autograde_preprocessors"].default())
_execute_at = _default_autograde.index(Execute)
c.Autograde.autograde_preprocessors = (
    _default_autograde[:_execute_at]
    + [InsertProbes, SandboxedExecute, CoalesceStreamsPreprocessor, CleanTracebacks, GradeOutsideKernel]
    + _default_autograde[_execute_at + 1:] + [SanitizeNotebook, StampGraderVersion]
)
# nbconvert's preprocessors are off unless enabled.
c.CoalesceStreamsPreprocessor.enabled = True
# The graded notebook is stored inert (SanitizeNotebook, last): Formgrader and the feedback render it in the
# instructor's and the student's browser, so no script, event handler, javascript: URL, iframe, form or SVG
# from a submission survives; feedback is sanitised again before it is rendered.
# The feedback opens with the grader's version that graded it (StampGraderVersion stored it at grading), and
# reads well without scripts (JupyterLab's HTML viewer runs none): Markdown math is written as sanitised
# MathML, and ReadableFeedback's style wraps long lines (autograder/nbgrader/feedback_html.py).
c.GenerateFeedback.preprocessors = ([SanitizeNotebook, ShowGraderVersion]
                                    + list(GenerateFeedback.class_traits()["preprocessors"].default())
                                    + [ReadableFeedback])
c.GenerateFeedback.exporter_class = FeedbackExporter

# One submission cannot stall the class (autograder/nbgrader/submission_limits.py, autograder/nbgrader/student_job.py): checked
# before nbgrader reads it, then graded (autograde + feedback) in a child process with these budgets. The
# defaults are >= 10x the largest honest notebook (397 KiB, 45 cells, 17 outputs; benchmarks/honest_notebooks.md).
c.SubmissionLimits.max_notebook_bytes = 8 * 2**20
c.SubmissionLimits.max_cells = 1000
c.SubmissionLimits.max_outputs = 2000
c.StudentBudget.wall_clock_seconds = 300
c.StudentBudget.memory_bytes = 6 * 2**30

# Learners' code runs in a bubblewrap sandbox (autograder/sandbox/): no course files, no network, limits on memory,
# CPU, processes, files and output. Every limit and its default is in autograder/sandbox/limits.py: the kernel's
# (memory_limit, cpu_time_limit, file_size_limit, process_limit, open_files_limit, scratch_size, max_message_bytes)
# on c.SandboxedKernelManager, the run's (wall_clock_limit, max_cell_output_bytes, max_notebook_output_bytes) on
# c.SandboxedExecute. Execute's options (timeout, ...) apply to it.
# The wall clock covers the whole notebook: a loop that catches KeyboardInterrupt ignores the per-cell
# timeout's interrupt, so the sandbox is killed after this long (a correct notebook takes a few seconds).
c.SandboxedExecute.wall_clock_limit = 120
c.SandboxedKernelManager.memory_limit = 2 * 2**30

# Grading: a per-cell limit; a correct cell of assignment 1 runs in well under a second.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True
# A deleted test cell is restored from the gradebook instead of needing manual grading forever.
c.OverwriteCells.add_missing_cells = True

# Validate (the student's button) also reports errors in cells that are not graded, such as a failing
# self-check, so that "Success" means every check in the notebook ran cleanly.
c.Validator.validate_all = True

# `make release` copies helper files of source/<assignment>/ into release/ only when listed here (anything else
# there stops the release with one line naming it), e.g. {"01_scaled_dot_product_attention": ["data/tokens.csv"]}.
c.ReleaseFiles.allowed = {}
