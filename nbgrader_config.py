"""nbgrader configuration for Attention Lab (course root = this folder).

Read by `nbgrader` commands run here, by `make release` / `make grade` /
`make demo`, and by the JupyterLab nbgrader extension (formgrader, Validate).
"""

from nbconvert.preprocessors import CoalesceStreamsPreprocessor
from nbgrader.converters import Autograde, GenerateAssignment
from nbgrader.preprocessors import Execute

from autograder.preprocessors import (CleanTracebacks, ClearWidgetState, GradeOutsideKernel, InsertProbes,
                                      RestoreDeletedCells)
from autograder.sandbox import SandboxedExecute

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.course_id = "attention-lab"

# Releases: the default pipeline plus dropping saved widget state (ClearOutput keeps it).
c.GenerateAssignment.preprocessors = (
    list(GenerateAssignment.class_traits()["preprocessors"].default()) + [ClearWidgetState]
)

# Grading: a submission's saved widget state (can be megabytes of images) is dropped before it runs.
# A deleted cell is put back before OverwriteCells runs (nbgrader's own add_missing_cells can raise
# KeyError and drop the whole submission when the deleted cell follows a read-only cell).
_sanitize = list(Autograde.class_traits()["sanitize_preprocessors"].default())
_overwrite_at = next(i for i, p in enumerate(_sanitize) if p.__name__ == "OverwriteCells")
c.Autograde.sanitize_preprocessors = (
    _sanitize[:_overwrite_at] + [RestoreDeletedCells] + _sanitize[_overwrite_at:] + [ClearWidgetState]
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
    + _default_autograde[_execute_at + 1:]
)
c.CoalesceStreamsPreprocessor.enabled = True  # nbconvert's preprocessors are off until enabled

# Learners' code runs in a bubblewrap sandbox (autograder/sandbox_kernel.py): no course files, no network,
# limits on memory, CPU, processes, files and output. Execute's options (timeout, ...) apply to it.
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
